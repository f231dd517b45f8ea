#!/bin/sh
# Exact Chrome export: the real agent (gentrace-demo hands every receipt task
# from a worker thread to the mailer thread) into the real daemon; the
# format=chrome answer and `gentrace convert` hold every task and region
# begin and end of the native window, paired, counted by Python's json
# module. A window cut mid-run shows the flagged synthetic begins.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 "$DEMO" "$GENTRACED" "$GENTRACE"
CHECK="python3 $top_srcdir/tests/integration/chrome_tasks.py"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=handoff GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 2 --threads 4 --rate 3000 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"

# check NAME QUERY: native and chrome downloads of one window, compared.
check() {
	curl -sf -o "$T/$1.gtrace" "http://$HTTP/v1/trace?service=handoff&$2" ||
		fail "$1: native download"
	curl -sf -o "$T/$1.json" "http://$HTTP/v1/trace?service=handoff&$2&format=chrome" ||
		fail "$1: chrome download"
	"$GENTRACE" dump -o "$T/$1.dump" "$T/$1.gtrace" || fail "$1: dump"
	"$GENTRACE" convert --to chrome -o "$T/$1.conv.json" "$T/$1.gtrace" ||
		fail "$1: convert"
	out=$($CHECK "$T/$1.json" "$T/$1.dump" 2>&1) || fail "$1 (http): $out"
	echo "$1 http: $out"
	out=$($CHECK "$T/$1.conv.json" "$T/$1.dump" 2>&1) || fail "$1 (convert): $out"
	echo "$1 convert: $out"
}

check all "last=1h"
ntasks=$(grep -c '	task_end	' "$T/all.dump")
[ "$ntasks" -gt 100 ] || fail "only $ntasks task ends: the demo did not hand tasks over"

# A window starting at the third generation: tasks and regions begun before
# it end inside it, and show as flagged synthetic begins.
from=$(sqlite3 "file:$T/g.db?mode=ro" \
	"SELECT start_ns FROM generations ORDER BY gen LIMIT 1 OFFSET 2" 2>/dev/null) ||
	from=""
if [ -n "$from" ]; then
	check mid "from=$from"
fi
stop_daemon
echo ok
