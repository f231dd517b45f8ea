#!/bin/sh
# Two gentraced on one shared store (real PostgreSQL + Swift s3api from
# scripts/cluster-up): two real agents with failover lists stream; one
# daemon is killed with -9 mid-stream and its agent moves to the other;
# afterwards every generation is stored exactly once, one session per
# service, and the surviving daemon and a freshly started third answer the
# session list, windows and feed byte for byte the same. Also: either
# store flag alone, or an unreachable store, fails the start clearly.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl psql "$DEMO" "$GENTRACED"

cluster_start
OBJ="$GENTRACE_OBJECTS/itest"
SQL() { psql -qtA "$GENTRACE_CATALOG" -c "$1"; }

# Either flag alone, or a catalog nobody listens on: a clear error.
"$GENTRACED" --catalog "$GENTRACE_CATALOG" --http-listen 127.0.0.1:0 \
	--agent-listen 127.0.0.1:0 >"$T/alone.out" 2>&1 && fail "--catalog alone started"
grep -q -- "--objects" "$T/alone.out" || fail "no hint: $(cat "$T/alone.out")"
"$GENTRACED" --objects "$OBJ" --http-listen 127.0.0.1:0 \
	--agent-listen 127.0.0.1:0 >"$T/alone2.out" 2>&1 && fail "--objects alone started"
grep -q -- "--catalog" "$T/alone2.out" || fail "no hint: $(cat "$T/alone2.out")"
"$GENTRACED" --catalog postgresql://postgres@127.0.0.1:1/x --objects "$OBJ" \
	--http-listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >"$T/down.out" 2>&1 &&
	fail "started on an unreachable catalog"
grep -q "cannot connect" "$T/down.out" || fail "unclear: $(cat "$T/down.out")"

shared="--catalog $GENTRACE_CATALOG --objects $OBJ --segment-max-age 200ms"
start_daemon "$T/a.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id itest-a
A_PID=$DPID A_AGENT=$AGENT A_HTTP=$HTTP
start_daemon "$T/b.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id itest-b
B_PID=$DPID B_AGENT=$AGENT B_HTTP=$HTTP
grep -q "store=" "$T/a.log" || fail "listening line does not name the store"

GENTRACE_ADDR=$A_AGENT,$B_AGENT GENTRACE_SERVICE=fo1 GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 4 --threads 2 --quiet >"$T/demo1.log" 2>&1 &
D1=$!
GENTRACE_ADDR=$B_AGENT,$A_AGENT GENTRACE_SERVICE=fo2 GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 4 --threads 2 --quiet >"$T/demo2.log" 2>&1 &
D2=$!
PIDS="$PIDS $D1 $D2"

# Kill -9 daemon A once it stored a few of fo1's generations.
i=0
while :; do
	n=$(SQL "SELECT count(*) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = 'fo1'" 2>/dev/null)
	[ "${n:-0}" -ge 3 ] && break
	i=$((i + 1))
	[ $i -lt 400 ] || fail "no fo1 generations stored"
	sleep 0.05
done
kill -KILL "$A_PID"
wait "$A_PID" 2>/dev/null
wait "$D1" || fail "demo fo1 failed"
wait "$D2" || fail "demo fo2 failed"

# Exactly once, one session per service, nothing missing.
for svc in fo1 fo2; do
	read -r sessions total gaps <<EOF2
$(SQL "SELECT count(DISTINCT s.id), count(*), max(g.gen) - min(g.gen) + 1 - count(*) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = '$svc'" | tr '|' ' ')
EOF2
	[ "$sessions" = 1 ] || fail "$svc: $sessions sessions"
	[ "$gaps" = 0 ] || fail "$svc: $gaps generations missing of $total"
	[ "$total" -ge 10 ] || fail "$svc: only $total generations in 4 s at 200 ms"
	lost=$(SQL "SELECT lost FROM gt_sessions WHERE service = '$svc'")
	[ "$lost" = 0 ] || fail "$svc: ledger lost $lost events"
done
[ "$(SQL "SELECT count(DISTINCT daemon) FROM gt_segments g WHERE live_gens > 0")" = 2 ] ||
	fail "both daemons should have stored segments"
# fo1's agent really moved: its session has generations from both daemons.
[ "$(SQL "SELECT count(DISTINCT sg.daemon) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id JOIN gt_segments sg ON sg.id = g.segment_id WHERE s.service = 'fo1'")" = 2 ] ||
	fail "fo1 did not fail over to B"

# The bucket holds the cataloged segment objects (keys are bucket-relative,
# the --objects prefix included).
obj=$(SQL "SELECT object FROM gt_segments ORDER BY id LIMIT 1")
case $obj in itest/segments/itest-*) ;; *) fail "unexpected object key $obj" ;; esac
empty=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
code=$(curl -s -o /dev/null -w '%{http_code}' -I --netrc-file "$GENTRACE_CLUSTER_DIR/netrc" \
	--aws-sigv4 "aws:amz:$AWS_REGION:s3" -H "x-amz-content-sha256: $empty" \
	"$AWS_ENDPOINT_URL/$GENTRACE_BUCKET/$obj")
[ "$code" = 200 ] || fail "segment object $obj: HTTP $code"

# A third daemon that ingested nothing answers like the survivor.
start_daemon "$T/c.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id itest-c
C_HTTP=$HTTP
for q in "v1/agents" "v1/agents?service=fo1" "v1/trace?service=fo1&last=1h" \
	"v1/trace?service=fo2&last=1h" "v1/feed?after=0&limit=10000"; do
	curl -sf -o "$T/b.out" "http://$B_HTTP/$q" || fail "B: $q"
	curl -sf -o "$T/c.out" "http://$C_HTTP/$q" || fail "C: $q"
	cmp -s "$T/b.out" "$T/c.out" || fail "B and C differ on $q"
	[ -s "$T/b.out" ] || fail "empty answer to $q"
done
"$GENTRACE" stat "$T/b.out" >/dev/null 2>&1 || true
curl -sf "http://$C_HTTP/v1/trace?service=fo1&last=1h" -o "$T/w.trace" || fail "trace"
"$GENTRACE" stat "$T/w.trace" >"$T/stat.txt" 2>&1 || fail "stat: $(cat "$T/stat.txt")"
curl -sf "http://$C_HTTP/healthz" >/dev/null || fail "healthz"
echo "ok: two daemons, one killed, reads identical from a third"
