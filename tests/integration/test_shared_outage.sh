#!/bin/sh
# The shared store's outages during ingest: S3 down for a while, then
# PostgreSQL down for a while, while a real agent streams into gentraced.
# Meanwhile the daemon stays up within its memory budget, /healthz answers
# 503 naming the cause, reads answer exactly or with a clean 503 JSON error
# (never a hang); afterwards it resumes by itself and every generation is
# stored exactly once with nothing lost.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl psql "$DEMO" "$GENTRACED"

cluster_start
CL="$top_srcdir/scripts/cluster-up"
SQL() { psql -qtA "$GENTRACE_CATALOG" -c "$1"; }

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--catalog "$GENTRACE_CATALOG" --objects "$GENTRACE_OBJECTS/outage" \
	--segment-max-age 200ms --max-buffer 16M
# GENTRACE_FLUSH_MS: the demo exits once its last generation is ACKed
# (cataloged), so the counts at the end are final on a loaded machine too.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=outage GENTRACE_PERIOD_MS=200 GENTRACE_FLUSH_MS=60000 \
	"$DEMO" --duration 16 --threads 2 --quiet >"$T/demo.log" 2>&1 &
D=$!
PIDS="$PIDS $D"

health() { curl -s -m 10 -o "$T/h.out" -w '%{http_code}' "http://$HTTP/healthz"; }
wait_health() { # CODE: waits up to 30 s for /healthz to answer CODE
	i=0
	while [ "$(health)" != "$1" ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "/healthz never answered $1: $(cat "$T/h.out")"
		sleep 0.1
	done
}
rss_kb() { sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$DPID/status"; }
# Every read answers in time: 200 with a body, or 503 {"error":"unavailable"}.
check_reads() {
	for q in "v1/agents" "v1/trace?service=outage&last=1h" "v1/feed?after=0&limit=50"; do
		code=$(curl -s -m 20 -o "$T/r.out" -w '%{http_code}' "http://$HTTP/$q") ||
			fail "$q: no answer in 20 s during $1"
		case $code in
		200) [ -s "$T/r.out" ] || fail "$q: empty 200 during $1" ;;
		503) grep -q '"error":"unavailable"' "$T/r.out" ||
			fail "$q: 503 without the unavailable error during $1: $(cat "$T/r.out")" ;;
		*) fail "$q: HTTP $code during $1: $(cat "$T/r.out")" ;;
		esac
		echo "$1 $q $code" >>"$T/reads.txt"
	done
}

sleep 2
wait_health 200
rss0=$(rss_kb)

"$CL" --stop s3 "$GENTRACE_CLUSTER_DIR" || fail "stop s3"
wait_health 503
grep -q "S3" "$T/h.out" || fail "healthz reason does not name S3: $(cat "$T/h.out")"
check_reads "s3-down"
sleep 2
kill -0 "$DPID" || fail "daemon died during the S3 outage"
rss1=$(rss_kb)
"$CL" --start s3 "$GENTRACE_CLUSTER_DIR" || fail "start s3"
wait_health 200

"$CL" --stop pg "$GENTRACE_CLUSTER_DIR" || fail "stop pg"
wait_health 503
grep -q "PostgreSQL" "$T/h.out" || fail "healthz reason does not name PostgreSQL: $(cat "$T/h.out")"
check_reads "pg-down"
code=$(curl -s -m 20 -o "$T/r.out" -w '%{http_code}' "http://$HTTP/v1/agents")
[ "$code" = 503 ] || fail "/v1/agents with the catalog down: HTTP $code"
sleep 2
kill -0 "$DPID" || fail "daemon died during the PostgreSQL outage"
rss2=$(rss_kb)
"$CL" --start pg "$GENTRACE_CLUSTER_DIR" || fail "start pg"
wait_health 200

wait "$D" || fail "demo failed"
read -r sessions total gaps <<EOF2
$(SQL "SELECT count(DISTINCT s.id), count(*), max(g.gen) - min(g.gen) + 1 - count(*) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = 'outage'" | tr '|' ' ')
EOF2
[ "$sessions" = 1 ] || fail "$sessions sessions"
[ "$gaps" = 0 ] || fail "$gaps generations missing of $total"
[ "$total" -ge 40 ] || fail "only $total generations in 16 s at 200 ms"
lost=$(SQL "SELECT lost FROM gt_sessions WHERE service = 'outage'")
[ "$lost" = 0 ] || fail "ledger lost $lost events"
# Memory: the outages may not grow the daemon by more than its buffer
# budget plus slack (16 MiB + 48 MiB).
for r in $rss1 $rss2; do
	[ $((r - rss0)) -lt 65536 ] || fail "RSS grew from $rss0 to $r KiB"
done
curl -sf -o "$T/w.trace" "http://$HTTP/v1/trace?service=outage&last=1h" || fail "trace after"
stop_daemon
echo "ok: $total generations, none lost; RSS ${rss0}/${rss1}/${rss2} KiB; reads: $(tr '\n' ';' <"$T/reads.txt")"
