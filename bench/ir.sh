#!/bin/sh
# bench/ir.sh: instruction counts (callgrind) of gentraced's ingest and of
# the agent's hot path, for comparing two builds where wall time on a shared
# machine cannot separate anything from noise.
#
#   bench/ir.sh BUILD [DRIVER]
#
# BUILD is a build directory (build-bench/ of any checkout); DRIVER the
# bench_ir program to use (default BUILD/bench/bench_ir; for an older
# checkout that has none, build bench/bench_ir.c against its tree: see
# bench/RESULTS.md). For each workload of bench_ir (small: fixture
# generations; large: 64 KiB ones) gentraced runs under callgrind twice,
# with G1 and G2 generations sent one at a time; the difference divided by
# G2 - G1 is the instructions per generation, start-up and shutdown
# cancelled out: the whole daemon, and its loop thread (thread 1: frames,
# reassembly, validation, replies) apart. Then bench_hotpath under callgrind
# gives the agent's instructions per event of each kind (as make
# bench-hotpath does). Prints one line per figure; never fails a build.
set -eu
B=$(cd "$1" && pwd)
DRV=${2:-$B/bench/bench_ir}
G1=${G1:-20}
G2=${G2:-120}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/gentraced" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --separate-threads=yes \
  --callgrind-out-file=$tmp/cg.\$GT_IR_TAG "$B/daemon/gentraced" "\$@"
EOF
chmod +x "$tmp/gentraced"
# Total Ir of the files of one run: all threads, or the first (the loop).
ir() { cat "$@" | awk '/^totals:/ { s += $2 } END { print s }'; }
for w in small large; do
	for g in $G1 $G2; do
		# Under valgrind on a loaded machine gentraced may miss the
		# driver's 20 s start-up bound: try again (counts are per run).
		for try in 1 2 3; do
			rm -f "$tmp"/cg.$w.$g*
			GT_IR_TAG=$w.$g GENTRACED="$tmp/gentraced" top_builddir="$B" \
				"$DRV" "$g" "$w" >/dev/null && break
			[ $try = 3 ] && exit 1
		done
	done
	all1=$(ir "$tmp"/cg.$w.$G1*)
	all2=$(ir "$tmp"/cg.$w.$G2*)
	loop1=$(ir "$tmp"/cg.$w.$G1-01)
	loop2=$(ir "$tmp"/cg.$w.$G2-01)
	echo "$w daemon_ir_per_gen $(( (all2 - all1) / (G2 - G1) ))"
	echo "$w loop_ir_per_gen $(( (loop2 - loop1) / (G2 - G1) ))"
done
valgrind --tool=callgrind --callgrind-out-file="$tmp/hot.cg" \
	"$B/bench/bench_hotpath" 100000 >/dev/null 2>&1
callgrind_annotate --inclusive=yes "$tmp/hot.cg" | grep '=> .*loop_' |
	tail -n 6 | tr -d , |
	awk '{ d = ($4 ~ /region|task/) ? 200000 : 100000;
	  printf "a1 %s %.1f\n", $4, $1 / d }'
