#!/bin/sh
# The real agent (gentrace-demo) streams into the real daemon; the HTTP API
# lists it, serves a window that the CLI decodes, and /metrics counts it.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl "$DEMO" "$GENTRACED" "$GENTRACE"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=itest GENTRACE_PERIOD_MS=250 \
	"$DEMO" --duration 2 --threads 3 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"

agents=$(curl -sf "http://$HTTP/v1/agents?service=itest") || fail "agents"
echo "$agents" | grep -q '"service":"itest"' || fail "agent not listed: $agents"

curl -sf -o "$T/w.trace" "http://$HTTP/v1/trace?service=itest&last=1h" ||
	fail "trace download"
"$GENTRACE" stat "$T/w.trace" >"$T/stat.txt" 2>&1 || fail "stat: $(cat "$T/stat.txt")"
ngens=$(grep -c . "$T/stat.txt")
[ "$ngens" -gt 0 ] || fail "empty stat"

committed=$(curl -sf "http://$HTTP/metrics" |
	sed -n 's/^gentrace_generations_committed_total \([0-9]*\)$/\1/p')
[ "${committed:-0}" -ge 4 ] || fail "committed=$committed, want >= 4 (2 s at 250 ms)"

# The agent stopped with gt_stop while the daemon was up: no gaps.
gaps=$(sqlite3 "file:$T/g.db?mode=ro" \
	"SELECT max(gen) - min(gen) + 1 - count(*) FROM generations" 2>/dev/null) ||
	gaps=0
[ "$gaps" = 0 ] || fail "missing generations: $gaps"

stop_daemon
grep -q 'msg=stopped' "$T/d.log" || fail "no stopped line"
echo "ok: $committed generations"
