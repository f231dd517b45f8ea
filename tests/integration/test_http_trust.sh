#!/bin/sh
# Files and secrets on a real gentraced, through curl: database files 0600
# (new and pre-existing), tokens from files and the environment (never in
# /proc/PID/cmdline), token files readable by others refused, failed read
# tokens counted and logged (rate-limited, without the token), CORS off by
# default and on for a named origin, and NUL / invalid UTF-8 parameters
# refused with 400 naming them.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl "$DEMO" "$GENTRACED"

mode() { stat -c %a "$1"; }

# --- database files: created 0600, -wal and -shm too ----------------------
umask 022
start_daemon "$T/d1.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/new.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=trust GENTRACE_PERIOD_MS=250 \
	"$DEMO" --duration 1 --threads 1 --quiet >"$T/demo1.log" 2>&1 ||
	fail "demo failed"
for f in "$T/new.db" "$T/new.db-wal" "$T/new.db-shm"; do
	[ -f "$f" ] || fail "$f missing"
	[ "$(mode "$f")" = 600 ] || fail "$f has mode $(mode "$f"), want 600"
done

# --- NUL and invalid UTF-8 in parameters: 400 naming the parameter --------
for q in 'service=trust%00x' 'service=%ff%fe' 'service=tr%c0%afust'; do
	code=$(curl -s -o "$T/err.json" -w '%{http_code}' \
		"http://$HTTP/v1/trace?$q&last=1h")
	[ "$code" = 400 ] || fail "$q: status $code, want 400"
	grep -q '"error":"bad_parameter"' "$T/err.json" || fail "$q: $(cat "$T/err.json")"
	grep -q '"message":"service: ' "$T/err.json" || fail "$q: $(cat "$T/err.json")"
done
# The same name without the NUL does match: the NUL was not cut off.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/trace?service=trust&last=1h")
[ "$code" = 200 ] || fail "service=trust: $code"

# --- CORS: off by default --------------------------------------------------
curl -s -D "$T/h.txt" -o /dev/null -H 'Origin: https://ui.perfetto.dev' \
	"http://$HTTP/v1/agents" || fail "agents"
grep -qi '^Access-Control-Allow-Origin' "$T/h.txt" &&
	fail "CORS header sent by default: $(cat "$T/h.txt")"
# The dashboard (same origin) needs none.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/")
[ "$code" = 200 ] || fail "dashboard: $code"
stop_daemon

# --- an existing world-readable database is made private ------------------
chmod 644 "$T/new.db"
start_daemon "$T/d2.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/new.db" --cors-origin https://ui.perfetto.dev
[ "$(mode "$T/new.db")" = 600 ] || fail "existing db left $(mode "$T/new.db")"
grep -q 'database files made private' "$T/d2.log" || fail "no log line"

# --- CORS: on for the named origin only -----------------------------------
curl -s -D "$T/h.txt" -o /dev/null -H 'Origin: https://ui.perfetto.dev' \
	"http://$HTTP/v1/agents" || fail "agents"
grep -qi '^Access-Control-Allow-Origin: https://ui.perfetto.dev' "$T/h.txt" ||
	fail "no CORS grant for the configured origin: $(cat "$T/h.txt")"
curl -s -D "$T/h.txt" -o /dev/null -H 'Origin: http://evil.example' \
	"http://$HTTP/v1/agents" || fail "agents"
grep -qi '^Access-Control-Allow-Origin' "$T/h.txt" &&
	fail "CORS grant for another origin: $(cat "$T/h.txt")"
stop_daemon

# --- token files ------------------------------------------------------------
SECRET=s3cret-read-$$
printf '%s\n' "$SECRET" >"$T/read.token"
chmod 644 "$T/read.token"
if timeout 20 "$GENTRACED" --db "$T/x.db" --read-token-file "$T/read.token" \
	--http-listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 2>"$T/refuse.txt"; then
	fail "a world-readable token file was accepted"
fi
grep -q 'chmod 600' "$T/refuse.txt" || fail "unclear refusal: $(cat "$T/refuse.txt")"
grep -q "$SECRET" "$T/refuse.txt" && fail "the token was printed"
chmod 600 "$T/read.token"

AGENT_SECRET=s3cret-agent-$$
printf '%s\n' "$AGENT_SECRET" >"$T/agent.token"
chmod 600 "$T/agent.token"
start_daemon "$T/d3.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/t.db" --read-token-file "$T/read.token" \
	--token-file "$T/agent.token"
tr '\0' ' ' </proc/"$DPID"/cmdline >"$T/cmdline.txt"
grep -q "$SECRET" "$T/cmdline.txt" && fail "read token in the process list"
grep -q "$AGENT_SECRET" "$T/cmdline.txt" && fail "agent token in the process list"
# The agent token from the file is the one agents must send.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=trust GENTRACE_PERIOD_MS=250 \
	GENTRACE_TOKEN=$AGENT_SECRET \
	"$DEMO" --duration 1 --threads 1 --quiet >"$T/demo3.log" 2>&1 ||
	fail "demo failed"
curl -sf -H "Authorization: Bearer $SECRET" "http://$HTTP/v1/agents?service=trust" |
	grep -q '"service":"trust"' || fail "agent with the file's token not stored"

# Agents with a wrong token: every refusal counted, one line per 10 s.
for i in 1 2 3; do
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=intruder GENTRACE_PERIOD_MS=250 \
		GENTRACE_TOKEN=wrong-agent-guess-$i \
		"$DEMO" --duration 1 --threads 1 --quiet >>"$T/demo4.log" 2>&1
done
refused=$(curl -sf "http://$HTTP/metrics?token=$SECRET" |
	sed -n 's/^gentrace_limit_hits_total{limit="token"} \([0-9]*\)$/\1/p')
[ "${refused:-0}" -ge 3 ] || fail "agent token refusals counted: $refused, want >= 3"
n=$(grep -c 'error=TOKEN' "$T/d3.log")
[ "$n" = 1 ] || fail "$n log lines for $refused agent token refusals, want 1"
grep -q 'wrong-agent-guess' "$T/d3.log" && fail "an agent's token was logged"

# --- failed read tokens: counted, logged once per 10 s, never the token ----
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/agents")
[ "$code" = 401 ] || fail "no token: $code"
for i in 1 2 3; do
	code=$(curl -s -o /dev/null -w '%{http_code}' \
		-H "Authorization: Bearer wrong-guess-$i" "http://$HTTP/v1/agents")
	[ "$code" = 401 ] || fail "wrong token: $code"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/agents?token=wrong-guess-4")
[ "$code" = 401 ] || fail "wrong ?token: $code"
curl -sf "http://$HTTP/metrics?token=$SECRET" >"$T/m.txt" || fail "metrics"
grep -q '^gentrace_http_auth_failures_total{reason="wrong"} 4$' "$T/m.txt" ||
	fail "wrong tokens not counted: $(grep auth_failures "$T/m.txt")"
grep -q '^gentrace_http_auth_failures_total{reason="missing"} 1$' "$T/m.txt" ||
	fail "missing token not counted: $(grep auth_failures "$T/m.txt")"
n=$(grep -c 'http read token refused' "$T/d3.log")
[ "$n" = 1 ] || fail "$n log lines for 5 failures within 10 s, want 1"
grep -q 'wrong-guess' "$T/d3.log" && fail "a guessed token was logged"
grep -q 'peer=127.0.0.1' "$T/d3.log" || fail "the refusal names no peer"
stop_daemon

# --- tokens from the environment --------------------------------------------
export GENTRACED_READ_TOKEN="$SECRET"
start_daemon "$T/d4.log" \
	--agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --db "$T/t.db"
unset GENTRACED_READ_TOKEN
tr '\0' ' ' </proc/"$DPID"/cmdline | grep -q "$SECRET" &&
	fail "env token in the process list"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/agents")
[ "$code" = 401 ] || fail "env token not applied: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' \
	-H "Authorization: Bearer $SECRET" "http://$HTTP/v1/agents")
[ "$code" = 200 ] || fail "env token refused: $code"
stop_daemon

# --- a flag and a file for the same token: refused --------------------------
if timeout 20 "$GENTRACED" --db "$T/x.db" --read-token x --read-token-file "$T/read.token" \
	--http-listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 2>"$T/both.txt"; then
	fail "--read-token with --read-token-file accepted"
fi
grep -q 'both given' "$T/both.txt" || fail "unclear: $(cat "$T/both.txt")"
echo ok
