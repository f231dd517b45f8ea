#!/bin/sh
# demo.sh BUILDDIR: `make demo`. Starts gentraced on its default ports with
# ./gentrace.db in the build directory, streams the demo service into it,
# prints where to look, and stays in the foreground until Ctrl-C; then stops
# both processes by PID. The database stays bounded however long the demo
# runs: one hour of retention and at most 1 GiB (DEMO_RETAIN, DEMO_MAX_DB).
set -u
B=${1:-.}
cd "$B" || exit 1
DAEMON=./daemon/gentraced
DEMO=./examples/gentrace-demo
LOG=gentraced-demo.log
RETAIN=${DEMO_RETAIN:-1h}
MAX_DB=${DEMO_MAX_DB:-1G}
AGENT_PORT=7170
HTTP_PORT=7171

for bin in "$DAEMON" "$DEMO"; do
	if [ ! -x "$bin" ]; then
		echo "demo: $bin is not built (run: make $bin)" >&2
		exit 1
	fi
done

# A port is taken when something accepts a connection on it.
port_taken() {
	if command -v bash >/dev/null 2>&1; then
		bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
	else
		return 1
	fi
}
for p in $AGENT_PORT $HTTP_PORT; do
	if port_taken "$p"; then
		echo "demo: port $p on 127.0.0.1 is already in use." >&2
		echo "demo: gentraced needs 7170 (agents) and 7171 (HTTP); stop what" >&2
		echo "demo: holds it (e.g. an earlier gentraced: ss -ltnp 'sport = :$p')." >&2
		exit 1
	fi
done

DPID=""
APID=""
cleanup() {
	trap - INT TERM EXIT
	[ -n "$APID" ] && kill -TERM "$APID" 2>/dev/null && wait "$APID" 2>/dev/null
	if [ -n "$DPID" ]; then
		kill -TERM "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
		echo "demo: stopped gentraced (pid $DPID) and gentrace-demo (pid ${APID:-none})"
	fi
}
trap cleanup EXIT
trap 'exit 0' INT TERM

: > "$LOG"
"$DAEMON" --db ./gentrace.db --log "$LOG" --retain "$RETAIN" --max-db-size "$MAX_DB" &
DPID=$!

# Ready when the `listening` line is in the log (or the daemon is gone).
i=0
while ! grep -q 'msg=listening ' "$LOG" 2>/dev/null; do
	if ! kill -0 "$DPID" 2>/dev/null; then
		wait "$DPID" 2>/dev/null
		DPID=""
		echo "demo: gentraced did not start:" >&2
		grep 'level=error' "$LOG" >&2 || cat "$LOG" >&2
		if grep -q 'in use' "$LOG"; then
			echo "demo: a port is taken: free 127.0.0.1:7170 and :7171 and retry." >&2
		fi
		exit 1
	fi
	i=$((i + 1))
	if [ $i -gt 200 ]; then
		echo "demo: gentraced did not log 'listening' within 20 s (see $B/$LOG)" >&2
		exit 1
	fi
	sleep 0.1
done

GENTRACE_ADDR=127.0.0.1:$AGENT_PORT GENTRACE_SERVICE=gentrace-demo \
	"$DEMO" --quiet &
APID=$!

cat <<MSG

  gentrace demo is running.
    gentraced     pid $DPID, database $B/gentrace.db (kept: $RETAIN, at most $MAX_DB), log $B/$LOG
    gentrace-demo pid $APID, streaming one generation per second

  Dashboard:  http://127.0.0.1:$HTTP_PORT/

  Try:
    curl -s localhost:$HTTP_PORT/v1/agents
    curl -s 'localhost:$HTTP_PORT/v1/trace?service=gentrace-demo&last=30s' -o demo.gentrace
    curl -s 'localhost:$HTTP_PORT/v1/trace?service=gentrace-demo&last=30s&format=chrome' -o demo.json
    $B/tools/gentrace stat demo.gentrace
    curl -s localhost:$HTTP_PORT/metrics | grep ^gentrace_generations

  Press Ctrl-C to stop both.

MSG

# Foreground until Ctrl-C or until either process ends.
while kill -0 "$DPID" 2>/dev/null && kill -0 "$APID" 2>/dev/null; do
	sleep 1
done
if ! kill -0 "$DPID" 2>/dev/null; then
	echo "demo: gentraced exited; see $B/$LOG" >&2
	exit 1
fi
echo "demo: gentrace-demo exited" >&2
