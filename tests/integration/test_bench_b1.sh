#!/bin/bash
# bench_b1 and bench/lttng.sh's many-process trial in smoke mode, so B1's
# start barrier cannot rot: four agent processes (one trial, --rate) start
# together once all are connected and every event they wrote is stored;
# then, where LTTng is installed (./setup.sh --bench), three traced
# processes wait at the same kind of barrier and all of them report. Only
# counts are checked, never whether a trial was on time (figures never fail
# a test).
set -u
out=$(mktemp -d /tmp/gt-test-b1-XXXXXX)
chmod 755 "$out"
PIDS=""
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$out/b1.err" 2>/dev/null; exit 1; }

"$top_builddir/bench/bench_b1" --agents 4 --threads 1 --seconds 0.5 \
	--rate 4000 --id B1_smoke >"$out/b1.out" 2>"$out/b1.err" ||
	fail "bench_b1 exited $?"
cat "$out/b1.out"
grep -q '^bench_b1: 4 of 4 agents ready' "$out/b1.err" ||
	fail "the four agents did not all pass the barrier"
# 4,000 events/s for 0.5 s in all: 2,000 written, 2,000 stored.
grep -q 'written 2000 stored 2000 dropped 0 ledger 0 ' "$out/b1.err" ||
	fail "not every event written was stored"
grep -q '^BENCH id=B1_smoke ' "$out/b1.out" || fail "no BENCH line"

# The LTTng side, where it is installed.
for t in lttng lttng-sessiond lttng-relayd babeltrace2 setpriv cc; do
	command -v $t >/dev/null || { echo "LTTng part skipped: $t not installed"; exit 0; }
done
SRC=$top_srcdir BUILD=$top_builddir W=$out
. "$top_srcdir/bench/lttng.sh"
lttng_build $(sed -n 's/^CFLAGS = //p' "$BUILD/Makefile") ||
	{ echo "LTTng part skipped: $LT_WHY"; exit 0; }
lttng_up || fail "LTTng did not start: $LT_WHY"
SECS=0.5 TRIAL_MAX_S=600
res=$(lttng_trial 3000 1 3)
echo "lttng_trial 3000/s over 3 processes: $res"
set -- $res
# Every process reported (else emitted is empty), 1,500 events in all, and
# babeltrace2 counted as many recorded.
[ "${2:-}" = 1500 ] || fail "lttng processes emitted '${2:-}', not 1500"
[ "${3:-}" = 1500 ] || [ "${4:-0}" != 0 ] ||
	fail "recorded '${3:-}' of 1500 with nothing discarded"
exit 0
