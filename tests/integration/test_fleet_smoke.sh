#!/bin/sh
# bench_fleet in smoke mode, so the fleet benchmark cannot rot: 300 agents
# (two processes, each agent its own source address) on half-second generations for 3 s
# against bench/bare_server and then gentraced. bench_fleet exits non-zero
# when an ACKed generation is missing from /v1/agents, an ACK repeats, a
# generation is refused or stays unACKed (--soak), or a connection is lost;
# its figures never fail the test. bench_fleet starts both servers itself
# and stops them by PID.
set -e
command -v curl >/dev/null 2>&1 || { echo "SKIP: curl missing"; exit 77; }
exec "$top_builddir/bench/bench_fleet" --agents 300 --procs 2 \
	--period-ms 500 --seconds 3 --soak --id SMOKE-F
