#!/bin/sh
# bench/quick (`make bench-quick`) in smoke mode, so the two-minute benchmark
# cannot rot: this build, one short repeat of every figure. It fails when a
# benchmark program fails or prints no BENCH line; a baseline that is not
# installed here (LTTng, iperf3, nginx: ./setup.sh --bench) is printed with
# the reason and is not a failure; figures never fail it. bench/quick stops
# every process it starts by PID.
set -e
out=$(mktemp /tmp/gt-bench-quick-XXXXXX)
trap 'rm -f "$out"' EXIT
BUILD=$top_builddir "$top_srcdir/bench/quick" --smoke >"$out"
cat "$out"
# Every event kind of A1 and the switch and full-pool figures are there.
for u in 'instant' 'region_begin+end' 'counter' 'log,16B' 'task_begin+end' \
	'first-in-new-generation' 'pool-full'; do
	grep -q "^BENCH id=A1.* unit=ns/event($u" "$out" ||
		{ echo "no A1 line for $u"; exit 1; }
done
for id in B2 B2-floor B2-floor-hold B2-floor-store B2-of-floor B2-cpu B2-ingest-cpu D1 F1; do
	grep -q "^BENCH id=$id " "$out" || { echo "no $id line"; exit 1; }
done
