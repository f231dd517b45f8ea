# lib.sh: helpers for the integration tests (sourced). Every process a test
# starts is recorded by PID and stopped on exit; readiness comes from the
# daemon's `listening` log line, never from a bare sleep.
set -u
: "${top_srcdir:=.}"
. "$top_srcdir/tests/lib/common.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/gt-int-XXXXXX")
PIDS=""

# before_cleanup: a hook a test may redefine after sourcing this file, for
# what must stop before the recorded PIDs (the browser test's Chromium).
before_cleanup() { :; }

cleanup() {
	before_cleanup
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	show_logs 30
	exit 1
}

# start_daemon LOG [ARGS...]: starts gentraced, sets DPID AGENT HTTP.
start_daemon() {
	log=$1
	shift
	: >"$log"
	"$GENTRACED" --log "$log" "$@" >>"$T/stderr.log" 2>&1 &
	DPID=$!
	PIDS="$PIDS $DPID"
	i=0
	while ! grep -q 'msg=listening ' "$log"; do
		kill -0 "$DPID" 2>/dev/null || fail "gentraced exited at start"
		i=$((i + 1))
		[ $i -lt 400 ] || fail "no listening line in 20 s"
		sleep 0.05
	done
	line=$(grep 'msg=listening ' "$log" | tail -n 1)
	AGENT=$(echo "$line" | sed -n 's/.* agent=\([^ ]*\).*/\1/p')
	HTTP=$(echo "$line" | sed -n 's/.* http=\([^ ]*\).*/\1/p')
	[ -n "$AGENT" ] && [ -n "$HTTP" ] || fail "cannot parse: $line"
}

# stop_daemon: SIGTERM, expect exit status 0.
stop_daemon() {
	kill -TERM "$DPID"
	wait "$DPID"
	st=$?
	[ $st -eq 0 ] || fail "gentraced exited with $st"
}

# cluster_start: a private PostgreSQL + Swift s3api from scripts/cluster-up
# for this test, its environment sourced (GENTRACE_CATALOG, GENTRACE_OBJECTS,
# GENTRACE_CLUSTER_DIR); skips the test (77) when they are not installed.
# On exit the test's own processes stop first, then the cluster.
cluster_start() {
	"$top_srcdir/scripts/cluster-up" >"$T/cluster.env" 2>"$T/cluster.log"
	rc=$?
	if [ $rc = 3 ]; then
		echo "SKIP: PostgreSQL/Swift not installed (./setup.sh installs them)"
		exit 77
	fi
	[ $rc = 0 ] || fail "scripts/cluster-up exited $rc"
	. "$T/cluster.env"
	before_cleanup() {
		for p in $PIDS; do
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		done
		PIDS=""
		"$top_srcdir/scripts/cluster-down" "$GENTRACE_CLUSTER_DIR"
	}
}

# expect_truth WHAT MADE QUERY GOT DUMP: a search QUERY found GOT spans; the
# trace (DUMP, `gentrace dump` of it) must hold exactly that many for QUERY
# (tests/integration/spans_truth.py), and at least MADE, what the traced
# program was asked to make: a sleep only ever lasts longer, and a region
# preempted on a loaded machine is that long all the same, so the queries
# whose answer depends on timing expect what was made, not what was meant.
expect_truth() {
	tr=$(python3 "$top_srcdir/tests/integration/spans_truth.py" "$5" "$3") ||
		fail "$1: spans_truth.py"
	set -- "$1" "$2" "$3" "$4" $tr
	[ "$4" -ge "$5" ] && [ "$4" -le "$6" ] ||
		fail "$1: found $4 spans, the trace holds $5 ($6 with those within 1 ms of a bound) ($3)"
	[ "$5" -ge "$2" ] || fail "$1: the trace holds $5 such spans, fewer than the $2 made ($3)"
	echo "ok: $1 = $4 (the trace holds $5; at least $2 by design)"
}
