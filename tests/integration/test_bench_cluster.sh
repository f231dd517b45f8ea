#!/bin/sh
# bench/bench_cluster (`make bench-cluster`, issue 14's benchmark) in smoke
# mode, so it cannot rot: one short B1 trial at a low fixed rate through
# gentraced on SQLite and through 1, 2 and 3 gentraced on one real shared
# store (PostgreSQL + Swift s3api from scripts/cluster-up), a few MiB of C1
# and the window fetches from a daemon that did not ingest. It fails when
# any trial loses an event, an agent's failover list does not spread the
# sessions over the daemons, C1 is not fully ACKed, a window fetch fails or
# a BENCH line is missing; figures never fail it.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless "$GENTRACED"
cluster_start
BENCH_CLUSTER_SEGMENT_AGE=200ms top_builddir=$top_builddir \
	"$top_builddir/bench/bench_cluster" --smoke >"$T/out" 2>"$T/err" ||
	{ cat "$T/out" "$T/err"; fail "bench_cluster --smoke failed"; }
cat "$T/out"
for n in 1 2 3; do
	for id in B1-shared-$n B1-shared-${n}_cpu C1-shared-$n \
		window-other-daemon-${n}_cold_p50 window-other-daemon-${n}_warm_p99; do
		grep -q "^BENCH id=$id " "$T/out" || fail "no $id line"
	done
done
# Each daemon of the 2- and 3-daemon runs committed generations of the B1
# trial: the rotated failover lists spread the agents.
grep -q "gens per daemon [1-9][0-9]*/[1-9][0-9]* -> zero loss" "$T/err" ||
	fail "2 daemons: no even spread: $(grep 'gens per' "$T/err")"
grep -q "gens per daemon [1-9][0-9]*/[1-9][0-9]*/[1-9][0-9]* -> zero loss" "$T/err" ||
	fail "3 daemons: no even spread: $(grep 'gens per' "$T/err")"
exit 0
