#!/bin/sh
# bench/fleet_cg.sh: the loop thread's instructions per small generation
# under a fleet's load, by function group, for gentraced and for the bare
# libuv server (bench/bare_server.c) under the same load.
#
#   bench/fleet_cg.sh BUILD [AGENTS] [OUTDIR]
#
# BUILD is a build directory (build-bench/). For each server, bench_fleet
# drives AGENTS agents (default 300) on 1 s generations of 10 events for
# 30 s with the server under callgrind (--separate-threads=yes); 14 s after
# the server started (connections made, the load steady) its counters are
# zeroed (callgrind_control -z), 10 s later dumped (-d), so start-up,
# connecting and shutdown are not counted. bench/cg_groups.py then divides
# the loop thread's (thread 1) instructions by the generations read in that
# window (calls of reasm_gen_end, or of the bare server's ACK encoder) and
# splits them by group. callgrind counts user-space instructions only: the
# kernel's side of read, write and epoll_wait is not in these figures (the
# syscall counts per generation are printed so the two servers' can be
# compared). Leaves the callgrind files in OUTDIR (default a temp dir).
# CG_OPTS adds valgrind options, e.g. CG_OPTS=--cache-sim=yes for D1/LL
# misses per function (read them with callgrind_annotate).
set -eu
B=$(cd "$1" && pwd)
AGENTS=${2:-300}
OUT=${3:-$(mktemp -d)}
SRC=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/top/bench"
cat >"$OUT/gentraced" <<W
#!/bin/sh
exec valgrind --tool=callgrind --separate-threads=yes ${CG_OPTS:-} \
  --callgrind-out-file=$OUT/cg.gentraced.%p "$B/daemon/gentraced" "\$@"
W
cat >"$OUT/top/bench/bare_server" <<W
#!/bin/sh
exec valgrind --tool=callgrind --separate-threads=yes ${CG_OPTS:-} \
  --callgrind-out-file=$OUT/cg.bare.%p "$B/bench/bare_server" "\$@"
W
chmod +x "$OUT/gentraced" "$OUT/top/bench/bare_server"
for server in gentraced bare; do
	top=$B
	[ $server = bare ] && top=$OUT/top
	GENTRACED=$OUT/gentraced top_builddir=$top "$B/bench/bench_fleet" \
		--agents "$AGENTS" --period-ms 1000 --seconds 30 \
		--server $server --id CG >"$OUT/$server.bench" 2>"$OUT/$server.err" &
	bf=$!
	pid=
	for i in $(seq 1 600); do
		pid=$(sed -n 's/^bench_fleet: .* pid \([0-9]*\) agent port.*/\1/p' \
			"$OUT/$server.err")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "fleet_cg: $server did not start" >&2; exit 1; }
	sleep 14
	callgrind_control -z "$pid" >/dev/null
	echo "fleet_cg: $server window from $(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg)"
	sleep 10
	callgrind_control -d "$pid" >/dev/null
	echo "fleet_cg: $server window to $(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg)"
	wait $bf || echo "fleet_cg: bench_fleet exited $? (see $OUT/$server.err)"
	python3 "$SRC/cg_groups.py" "$OUT/cg.$server.$pid.1-01" $server
done
echo "fleet_cg: files in $OUT"
