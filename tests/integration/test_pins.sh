#!/bin/sh
# Retention pins over HTTP on SQLite (web/web_pins.c, store/store_hold.c):
# without --admin-token pin writes are 403 and say which flag is missing; a
# missing, wrong or read token is 401; hostile bodies (not JSON, both
# service and session, from after to, a reason too long, invalid UTF-8, a
# huge body) are refused and change nothing; the byte cap answers 507; and
# with a real agent streaming, a pinned service survives --retain while an
# unpinned one is deleted, until the pin is deleted.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl sqlite3 python3 "$DEMO" "$GENTRACED" "$GENTRACE"

# post BODY [CURL ARGS...]: POST /v1/pins; prints the status, body in $T/out.
post() {
	body=$1
	shift
	curl -s -o "$T/out" -w '%{http_code}' -X POST "$@" \
		-H 'Content-Type: application/json' --data-binary "$body" "$H/v1/pins"
}
pins() { curl -sf -H "Authorization: Bearer $READ" "$H/v1/pins"; }
SQL() { sqlite3 "file:$T/g.db?mode=ro" "$1"; }

# 1. No admin token configured: writes are 403, naming the flag.
start_daemon "$T/d0.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g0.db"
H="http://$HTTP"
READ=""
code=$(post '{"service":"a","from":"now-1m","to":"now","reason":"r"}' \
	-H 'Authorization: Bearer x')
[ "$code" = 403 ] || fail "no admin token: HTTP $code"
grep -q -- '--admin-token' "$T/out" || fail "403 does not name the flag: $(cat "$T/out")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$H/v1/pins/1")
[ "$code" = 403 ] || fail "DELETE without admin token: HTTP $code"
[ "$(curl -sf "$H/v1/pins")" = '{"pins":[]}' ] || fail "GET /v1/pins without pins"
stop_daemon

# 2. Admin token from a file, read token from the environment.
umask 077
printf 'admin-%s\n' "$$" >"$T/admin.token"
ADMIN="admin-$$"
READ="read-$$"
export GENTRACED_READ_TOKEN="$READ"
start_daemon "$T/d.log" \
	--agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --db "$T/g.db" \
	--admin-token-file "$T/admin.token" --retain 3s --max-pinned-bytes 64M
unset GENTRACED_READ_TOKEN
H="http://$HTTP"
good='{"service":"keep","from":"now-1m","to":"now+1h","reason":"incident 42"}'
for auth in "X-None: 1" "Authorization: Bearer wrong" "Authorization: Bearer $READ"; do
	code=$(post "$good" -H "$auth")
	[ "$code" = 401 ] || fail "POST with '$auth': HTTP $code"
	code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$auth" "$H/v1/pins/1")
	[ "$code" = 401 ] || fail "DELETE with '$auth': HTTP $code"
done
# The admin token is a header only: ?token= never carries it.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary "$good" \
	"$H/v1/pins?token=$ADMIN")
[ "$code" = 401 ] || fail "admin token in the query: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$H/v1/pins")
[ "$code" = 401 ] || fail "GET /v1/pins without the read token: HTTP $code"
grep -q 'msg="http admin token refused"' "$T/d.log" || fail "refusal not logged"
grep -q "$ADMIN" "$T/d.log" && fail "the admin token reached the log"

A="Authorization: Bearer $ADMIN"
long=$(python3 -c 'print("x" * 513)' 2>/dev/null || printf '%0513d' 0)
ok512=$(python3 -c 'print("é" * 256)' 2>/dev/null || printf '%0512d' 0)
i=0
while IFS= read -r body; do
	i=$((i + 1))
	code=$(post "$body" -H "$A")
	[ "$code" = 400 ] || fail "bad body $i ($body): HTTP $code $(cat "$T/out")"
	grep -q '"error":"bad_body"' "$T/out" || fail "bad body $i: $(cat "$T/out")"
done <<EOF
not json
[]
{}
{"service":"keep","session":"00112233445566778899aabbccddeeff","from":"now-1m","to":"now","reason":"r"}
{"service":"keep","from":"now","to":"now-1m","reason":"r"}
{"service":"keep","from":"now-1m","to":"now-1m","reason":"r"}
{"service":"keep","from":"now-1m","to":"now","reason":"$long"}
{"service":"keep","from":"now-1m","to":"now"}
{"service":"keep","to":"now","reason":"r"}
{"service":"keep","from":"yesterday","to":"now","reason":"r"}
{"service":"keep","from":"now-1m","to":"now","reason":"r","ttl":"1000d"}
{"service":"keep","from":"now-1m","to":"now","reason":"r","ttl":"soon"}
{"service":"keep","from":"now-1m","to":"now","reason":"r","servce":"x"}
{"service":"keep","service":"keep","from":"now-1m","to":"now","reason":"r"}
{"service":"","from":"now-1m","to":"now","reason":"r"}
{"service":7,"from":"now-1m","to":"now","reason":"r"}
{"session":"nothex","from":"now-1m","to":"now","reason":"r"}
{"service":"keep","from":"now-1m","to":"now","reason":"a\u0000b"}
{"service":"keep","from":"now-1m","to":"now","reason":"\ud800"}
{"service":"keep","from":"now-1m","to":"now","reason":"r"} trailing
EOF
# Invalid UTF-8 inside a string.
code=$(printf '{"service":"ke\377ep","from":"now-1m","to":"now","reason":"r"}' |
	curl -s -o "$T/out" -w '%{http_code}' -X POST -H "$A" --data-binary @- "$H/v1/pins")
[ "$code" = 400 ] || fail "invalid UTF-8: HTTP $code"
# A huge body is drained, not kept, and refused.
head -c 2000000 /dev/zero | tr '\0' ' ' >"$T/huge"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST -H "$A" \
	--data-binary @"$T/huge" "$H/v1/pins")
[ "$code" = 413 ] || fail "huge body: HTTP $code"
# Without a length (chunked), a body past the cap is drained a little, then
# its connection closed: 413, or no answer at all; the daemon goes on.
code=$(head -c 3000000 /dev/zero | tr '\0' ' ' | curl -s -o /dev/null \
	-w '%{http_code}' -X POST -H "$A" -H 'Transfer-Encoding: chunked' -H 'Expect:' \
	--data-binary @- "$H/v1/pins")
case $code in 413 | 000) ;; *) fail "huge chunked body: HTTP $code" ;; esac
curl -sf "$H/healthz" >/dev/null || fail "daemon unhealthy after a huge body"
[ "$(pins)" = '{"pins":[]}' ] || fail "a refused body left a pin: $(pins)"
[ "$(SQL 'SELECT count(*) FROM retention_pins')" = 0 ] || fail "rows after refusals"
# A reason of exactly 512 bytes (256 two-byte characters) is fine.
code=$(post "{\"service\":\"x\",\"from\":\"now-1m\",\"to\":\"now\",\"reason\":\"$ok512\",\"ttl\":\"1h\"}" -H "$A")
[ "$code" = 201 ] || fail "512-byte reason: HTTP $code $(cat "$T/out")"
xid=$(sed -n 's/^{"id":\([0-9]*\),.*/\1/p' "$T/out")

# 3. Pin service keep before any data (a pin is a window), then stream
# keep and drop together; --retain 3s deletes drop, never keep.
code=$(curl -s -D "$T/hdr" -o "$T/out" -w '%{http_code}' -X POST -H "$A" \
	--data-binary "$good" "$H/v1/pins")
[ "$code" = 201 ] || fail "good pin: HTTP $code $(cat "$T/out")"
id=$(sed -n 's/^{"id":\([0-9]*\),.*/\1/p' "$T/out")
tr -d '\r' <"$T/hdr" | grep -qx "Location: /v1/pins/$id" || fail "no Location: $(cat "$T/hdr")"
for k in '"service":"keep"' '"session":null' '"reason":"incident 42"' \
	'"from":"20' '"expires":"20' '"bytes":0'; do
	grep -qF "$k" "$T/out" || fail "pin object lacks $k: $(cat "$T/out")"
done
# GENTRACE_FLUSH_MS: each demo exits once its last generation is ACKed,
# i.e. stored, however loaded the machine: the counts below are final (the
# default 2 s flush may give up first, and a late commit then looked like a
# generation keep "lost" or gained).
for svc in keep drop; do
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=$svc GENTRACE_PERIOD_MS=200 GENTRACE_FLUSH_MS=60000 \
		"$DEMO" --duration 2 --threads 2 --quiet >"$T/demo-$svc.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "D_$svc=\$!"
done
wait "$D_keep" || fail "demo keep"
wait "$D_drop" || fail "demo drop"
count() { SQL "SELECT count(*) FROM generations g JOIN sessions s ON s.id = g.session_id WHERE s.service = '$1'"; }
kept=$(count keep)
[ "$kept" -ge 5 ] || fail "keep stored only $kept generations"
i=0
while [ "$(count drop)" != 0 ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "retention never deleted drop ($(count drop) left)"
	sleep 0.05
done
sleep 1.5 # more retention ticks: keep must not lose a generation
[ "$(count keep)" = "$kept" ] || fail "keep lost generations: $(count keep) of $kept"
curl -sf -H "Authorization: Bearer $READ" -o "$T/keep.trace" \
	"$H/v1/trace?service=keep&from=now-1h&to=now" || fail "download keep"
"$GENTRACE" stat "$T/keep.trace" >/dev/null 2>&1 || fail "keep window unreadable"
bytes=$(pins | python3 -c 'import json,sys; print([p for p in json.load(sys.stdin)["pins"] if p["service"]=="keep"][0]["bytes"])')
stored=$(SQL "SELECT sum(g.stored_bytes) FROM generations g JOIN sessions s ON s.id = g.session_id WHERE s.service = 'keep'")
[ "$bytes" = "$stored" ] || fail "pin bytes $bytes, stored $stored"
curl -sf -H "Authorization: Bearer $READ" "$H/metrics" >"$T/metrics"
grep -qx 'gentrace_pins 2' "$T/metrics" || fail "metrics: $(grep gentrace_pin "$T/metrics")"
grep -qx "gentrace_pinned_bytes $stored" "$T/metrics" || fail "pinned bytes: $(grep gentrace_pin "$T/metrics")"

# 4. The cap: a pin whose window holds more than --max-pinned-bytes is 507
# (a second daemon on a copy, with a tiny cap), and nothing changes.
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$A" "$H/v1/pins/$xid")
[ "$code" = 204 ] || fail "DELETE: HTTP $code"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X DELETE -H "$A" "$H/v1/pins/$xid")
[ "$code" = 404 ] || fail "DELETE twice: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$A" "$H/v1/pins/abc")
[ "$code" = 404 ] || fail "DELETE abc: HTTP $code"
DPID_MAIN=$DPID H_MAIN=$H
sqlite3 "$T/g.db" ".backup '$T/c.db'" || fail "backup"
start_daemon "$T/c.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/c.db" --admin-token-file "$T/admin.token" --max-pinned-bytes 1K
H="http://$HTTP"
# The copy's keep pin holds those rows already: a pin over rows held adds
# nothing and fits any cap, so drop it first.
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$A" "$H/v1/pins/$id")
[ "$code" = 204 ] || fail "DELETE on the copy: HTTP $code"
code=$(post '{"session":"'"$(sqlite3 "$T/c.db" "SELECT session FROM sessions WHERE service = 'keep'")"'","from":"now-1h","to":"now","reason":"too big"}' -H "$A")
[ "$code" = 507 ] || fail "over the cap: HTTP $code $(cat "$T/out")"
grep -q 'max-pinned-bytes' "$T/out" || fail "507 does not say why: $(cat "$T/out")"
[ "$(sqlite3 "$T/c.db" 'SELECT count(*) FROM retention_pins')" = 0 ] || fail "507 changed the pins"
stop_daemon
DPID=$DPID_MAIN H=$H_MAIN

# 5. Deleting the pin gives keep back to retention.
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$A" "$H/v1/pins/$id")
[ "$code" = 204 ] || fail "DELETE keep pin: HTTP $code"
i=0
while [ "$(count keep)" != 0 ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "keep kept after its pin went ($(count keep))"
	sleep 0.05
done
[ "$(pins)" = '{"pins":[]}' ] || fail "pins left: $(pins)"
stop_daemon
echo "ok: pins refuse bad tokens and bodies, keep their window through retention"
