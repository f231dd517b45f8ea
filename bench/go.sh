#!/bin/bash
# bench/go.sh (make bench-go): the Go client's cost, tests/go/bench_test.go
# (TestBenchGo), in two set-ups of the same machine, one after the other:
#   shared  gentraced and the traced program scheduled anywhere (on a
#           2-CPU machine the daemon, ingesting the program's trace,
#           runs on the CPU the program's other threads would use)
#   pinned  gentraced on CPU 0, the traced program (both arms: io.Discard
#           and the client) on CPU 1 with GOMAXPROCS=1: the daemon takes no
#           CPU from the program, as when it runs on another machine
# Every BENCH line is the median of alternating rounds (ABBA...), with min
# and max. Needs GENTRACED (the built daemon); taskset (util-linux) and two
# CPUs for the pinned set-up.
set -euo pipefail
: "${GENTRACED:?set GENTRACED to the built gentraced}"
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$here/tests/go" && go test -c -o "$bin/gotest.test" .)
run() { GENTRACE_BENCH=1 "$@" -test.run '^TestBenchGo$' -test.v -test.timeout 900s; }
echo "== set-up shared (load $(cut -d' ' -f1-3 /proc/loadavg))"
(cd "$here/tests/go" && run "$bin/gotest.test")
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	echo "== set-up pinned: gentraced on CPU 0, the program on CPU 1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
	(cd "$here/tests/go" && GENTRACE_BENCH_SETUP=pinned GENTRACE_BENCH_DAEMON="taskset -c 0" \
		GOMAXPROCS=1 run taskset -c 1 "$bin/gotest.test")
else
	echo "SKIP set-up pinned: needs two CPUs and taskset"
fi
