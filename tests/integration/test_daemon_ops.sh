#!/bin/sh
# Operations of gentraced: --help/--version, config file (flags win), bad
# config names file and line, port already taken, SIGHUP reopens the log,
# /metrics and /healthz over curl, SIGTERM exits 0.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl "$GENTRACED"

"$GENTRACED" --help >"$T/help.txt" || fail "--help exit"
grep -q -- '--max-conn-buffer SIZE' "$T/help.txt" || fail "--help text"
grep -q '^SIGNALS' "$T/help.txt" || fail "--help has no SIGNALS"
"$GENTRACED" --version | grep -q '^gentraced ' || fail "--version"

# Bad usage: exit 2 and a message naming file and line.
printf 'db = x.db\nretain = forever\n' >"$T/bad.conf"
"$GENTRACED" --config "$T/bad.conf" >"$T/bad.out" 2>&1
[ $? -eq 2 ] || fail "bad config exit status"
grep -q "bad.conf:2: retain: bad duration" "$T/bad.out" || fail "bad config message: $(cat "$T/bad.out")"
"$GENTRACED" --no-such-flag >"$T/bad2.out" 2>&1
[ $? -eq 2 ] || fail "unknown flag exit status"

# Config file with the flag on the command line winning.
cat >"$T/g.conf" <<EOF2
# test config
agent-listen = 127.0.0.1:0
http-listen = 127.0.0.1:0
db = $T/from-file.db
max-connections = 7
EOF2
start_daemon "$T/d.log" --config "$T/g.conf" --db "$T/from-flag.db"
[ -f "$T/from-flag.db" ] || fail "flag did not win over the file"
[ ! -f "$T/from-file.db" ] || fail "file value used despite the flag"

# The agent port is taken now: a second daemon must say so and exit 1.
"$GENTRACED" --agent-listen "$AGENT" --http-listen 127.0.0.1:0 \
	--db "$T/other.db" >"$T/taken.out" 2>&1
[ $? -eq 1 ] || fail "second daemon on a taken port did not exit 1"
grep -qi 'in use' "$T/taken.out" || fail "no 'in use' message: $(cat "$T/taken.out")"

code=$(curl -s -o "$T/health" -w '%{http_code}' "http://$HTTP/healthz")
[ "$code" = 200 ] || fail "healthz $code"
curl -sf "http://$HTTP/metrics" >"$T/metrics" || fail "metrics"
for m in gentrace_agent_connections gentrace_buffered_bytes \
	gentrace_generations_committed_total gentrace_disk_full \
	'gentrace_limit_hits_total{limit="max-connections"}' \
	gentrace_store_queue_generations; do
	grep -q "^$m " "$T/metrics" || fail "metric $m missing"
done

# SIGHUP reopens the log: after a rotation new lines go to the new file.
mv "$T/d.log" "$T/d.log.1"
kill -HUP "$DPID"
i=0
while ! grep -q 'msg="log reopened"' "$T/d.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "no log line after SIGHUP"
	sleep 0.05
done
grep -q 'msg=listening' "$T/d.log.1" || fail "old log lost"

stop_daemon
grep -q 'msg=stopped' "$T/d.log" || fail "no stopped line in the reopened log"
echo ok
