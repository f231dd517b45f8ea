#!/bin/bash
# bench/go.sh (make bench-go): the Go client's cost, tests/go/bench_test.go
# (TestBenchGo: io.Discard, the client, and the kernel's socket floor, in
# alternating rounds), in three set-ups of the same machine, one after the
# other:
#   shared      gentraced and the traced program scheduled anywhere (on a
#               2-CPU machine the daemon, ingesting the program's trace,
#               runs on the CPU the program's other threads would use)
#   pinned      gentraced on CPU 0, the traced program (every arm) on
#               CPU 1 with GOMAXPROCS=1: the daemon takes no CPU from the
#               program, as when it runs on another machine
#   pinned_rps  the same, and loopback's receive processing (the softirq
#               that runs TCP's receive side, which on loopback otherwise
#               runs on the sender's CPU, inside its send) steered to
#               CPU 0 with RPS, as a real network does it on the daemon's
#               host. Needs root (it writes lo's rps_cpus, and puts the
#               old value back on exit, failure or signal); skipped with
#               a message when RPS cannot be set. Not run by default:
#               it changes the whole machine's loopback while it runs,
#               and on this VM it raised the floor instead of lowering it
#               (the cross-CPU interrupt traps to the hypervisor).
# Every BENCH line is the median of alternating rounds, with min and max.
# Needs GENTRACED (the built daemon); taskset (util-linux) and two CPUs
# for the pinned set-ups. GENTRACE_BENCH_SETUPS="pinned pinned_rps" runs
# only those (the default is "shared pinned"); GENTRACE_BENCH_ROUNDS and GENTRACE_BENCH_PROFILE pass on.
set -euo pipefail
: "${GENTRACED:?set GENTRACED to the built gentraced}"
here=$(cd "$(dirname "$0")/.." && pwd)
setups=${GENTRACE_BENCH_SETUPS:-shared pinned}
rps=/sys/class/net/lo/queues/rx-0/rps_cpus
rps_old=""
bin=$(mktemp -d)
restore() {
	if [ -n "$rps_old" ]; then
		echo "$rps_old" >"$rps" && echo "== lo rps_cpus back to $rps_old"
		rps_old=""
	fi
	rm -rf "$bin"
}
trap restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
(cd "$here/tests/go" && go test -c -o "$bin/gotest.test" .)
run() { GENTRACE_BENCH=1 "$@" -test.run '^TestBenchGo$' -test.v -test.timeout 1800s; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
pinned_ok() { [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; }
pinned() {
	(cd "$here/tests/go" && GENTRACE_BENCH_SETUP=$1 GENTRACE_BENCH_DAEMON="taskset -c 0" \
		GOMAXPROCS=1 run taskset -c 1 "$bin/gotest.test")
}
for s in $setups; do
	case $s in
	shared)
		echo "== set-up shared (load $(load))"
		(cd "$here/tests/go" && run "$bin/gotest.test")
		;;
	pinned)
		if ! pinned_ok; then
			echo "SKIP set-up pinned: needs two CPUs and taskset"
			continue
		fi
		echo "== set-up pinned: gentraced on CPU 0, the program on CPU 1 (load $(load))"
		pinned pinned
		;;
	pinned_rps)
		if ! pinned_ok; then
			echo "SKIP set-up pinned_rps: needs two CPUs and taskset"
			continue
		fi
		old=$(cat "$rps" 2>/dev/null) || old=""
		if [ -z "$old" ] || ! echo 1 2>/dev/null >"$rps"; then
			echo "SKIP set-up pinned_rps: cannot set RPS ($rps: needs root and RPS in the kernel)"
			continue
		fi
		rps_old=$old
		echo "== set-up pinned_rps: as pinned, lo's receive processing on CPU 0 (rps_cpus $old -> $(cat "$rps")) (load $(load))"
		pinned pinned_rps
		restore_now=$rps_old
		echo "$restore_now" >"$rps" && echo "== lo rps_cpus back to $restore_now"
		rps_old=""
		;;
	*)
		echo "unknown set-up $s (shared, pinned, pinned_rps)" >&2
		exit 2
		;;
	esac
done
