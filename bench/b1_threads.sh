#!/bin/bash
# bench/b1_threads.sh: where the CPU of a one-thread B1 trial goes, thread
# by thread, on both sides (`make bench-b1-threads`): one trial of bench/
# quick's B1 (one emitting thread, SECS seconds) through the agent into
# gentraced at GT_RATE, and one through lttng-sessiond and lttng-relayd at
# LT_RATE, each repeated REPS times (default 3). Per thread, the CPU
# seconds it used during the trial (its run time in /proc/PID/task/TID/
# schedstat, nanoseconds): the emitting process's own threads as it reports
# them once the trial settled (lttng_bench's BENCH_THREAD_CPU: the emitter,
# the agent's thread that seals and sends or LTTng-UST's listeners, main),
# and the daemons' threads as the difference of two readings around the
# trial (gentraced; lttng-sessiond, its consumer daemons, lttng-relayd). Prints a
# line per thread and a `BENCH id=B1_cpu_split` line per side: CPU
# nanoseconds per event in all, beside the emitter's.
#
#   bench/b1_threads.sh [GT_RATE [LT_RATE]]   (defaults 4000000, 3000000)
#
# BUILD as for bench/quick (default build-bench/); SECS (default 2);
# GT_ONLY=1 runs the gentrace side alone (A/B runs of GENTRACED_ARGS, e.g.
# --zstd-level settings, where relayd's figures are not the question). The
# trial passes or fails as in bench/quick (zero loss, emitter on time), and
# the lines say which: the split is read at the edge, where it explains it.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build-bench}
GT_RATE=${1:-4000000}
LT_RATE=${2:-3000000}
REPS=${REPS:-3}
SECS=${SECS:-2}
TRIAL_MAX_S=$(awk -v s="$SECS" 'BEGIN { print s * 1.2 }')
W=$(mktemp -d /tmp/gt-threads-XXXXXX)
chmod 755 "$W"
PIDS=""
say() { echo "b1-threads: $*" >&2; }
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$W"
}
trap cleanup EXIT
make -s -C "$BUILD" -j2 daemon/gentraced agent/libgentrace.la >&2 || exit 1
. "$SRC/bench/lttng.sh"
if ! lttng_build $(sed -n 's/^CFLAGS = //p' "$BUILD/Makefile") ||
	{ [ "${GT_ONLY:-0}" != 1 ] && ! lttng_up; }; then
	say "ERROR: LTTng cannot run: $LT_WHY (./setup.sh --bench installs it)"
	exit 2
fi
b1_gentraced_up
[ -n "$GAGENT" ] || { say "gentraced did not start"; exit 1; }
export BENCH_THREAD_CPU=1

# "name tid run-ns" for every thread of the processes "name:pid ...".
snap() {
	local np p n t
	for np in "$@"; do
		n=${np%%:*} p=${np#*:}
		for t in /proc/"$p"/task/*; do
			# The thread's name (gentraced names its threads) beside its tid.
			awk -v n="$n-$(tr -d ' ' <"$t/comm" 2>/dev/null)" -v t="${t##*/}" \
				'{ print n, t, $1 }' "$t/schedstat" 2>/dev/null
		done
	done
}
# The emitting process's lines and the daemons' differences, one table:
# "process/thread cpu_s" (threads under 1 ms left out).
split() { # before after emit.out
	awk 'FILENAME == ARGV[1] { b[$1 " " $2] = $3; next }
		FILENAME == ARGV[2] { k = $1 " " $2; d = ($3 - b[k]) / 1e9
			if (d >= 0.001) printf "%s/tid%s %.4f\n", $1, $2, d; next }
		/^THREAD/ { split($2, r, "="); split($3, t, "="); split($4, c, "=")
			if (c[2] >= 0.001) printf "emitting-process/%s-tid%s %.4f\n", r[2], t[2], c[2] }' "$1" "$2" "$3"
}
report() { # side ok events elapsed table
	local side=$1 ok=$2 ev=$3 el=$4 tab=$5
	awk -v s="$side" -v ok="$ok" -v ev="$ev" -v el="$el" '
		{ cpu[$1] += $2; tot += $2; if ($1 ~ /emitter/) em += $2 }
		END { for (k in cpu) printf "b1-threads: %s %s: %.3f CPU-s, %.0f%% of a core over the %.2f s of emitting, %.1f ns/event\n",
				s, k, cpu[k], 100 * cpu[k] / el, el, cpu[k] * 1e9 / ev
			printf "BENCH id=B1_cpu_split value=%.1f unit=cpu-ns/event(all-threads,%s,%s,events=%d) baseline=emitter-thread:%.1f ratio=%.2f bar=none pass=1\n",
				tot * 1e9 / ev, s, ok, ev, em * 1e9 / ev, (em > 0 ? tot / em : 0) }' "$tab"
}
consumers() { ps -o pid= --ppid "$SESSIOND" | awk '{ printf " consumerd:%s", $1 }'; }

for r in $(seq 1 "$REPS"); do
	snap gentraced:"$GD" >"$W/b"
	t0=$(date +%s.%N)
	res=$(gt_trial "$GT_RATE" 1)
	t1=$(date +%s.%N)
	snap gentraced:"$GD" >"$W/a"
	set -- $res
	say "repeat $r gentrace rate=$GT_RATE: $res (trial $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s)"
	# How the trial's generations were stored (zstd, or raw: --zstd-level
	# 0, or zstd did not shrink them), and at what share of their size.
	say "repeat $r gentrace stored: $(sqlite3 -cmd '.timeout 10000' "file:$W/b1.db?mode=ro" \
		"SELECT group_concat(codec || '=' || n || ' gens at ' || r, ', ') FROM
		 (SELECT codec, count(*) n, printf('%.3f', 1.0 * sum(stored_bytes) / sum(bytes)) r
		  FROM generations WHERE session_id = (SELECT max(id) FROM sessions)
		  GROUP BY codec)" 2>/dev/null)"
	# Disk: the database's bytes (WAL included) per event stored so far.
	say "repeat $r gentrace disk: $(sqlite3 -cmd '.timeout 10000' "file:$W/b1.db?mode=ro" \
		"SELECT printf('%.2f stored bytes/event of %.2f', 1.0 * sum(stored_bytes) / sum(events),
		 1.0 * sum(bytes) / sum(events)) FROM generations WHERE session_id = (SELECT max(id) FROM sessions)" 2>/dev/null)," \
		"$(du -cb "$W"/b1.db* | awk 'END { print $1 }') bytes of files"
	split "$W/b" "$W/a" "$W/emit.out" >"$W/tab"
	report "gentrace(rate=$GT_RATE)" "$1" "${2:-0}" "${8:-1}" "$W/tab"
	[ "${GT_ONLY:-0}" = 1 ] && continue

	P="sessiond:$SESSIOND relayd:$RELAYD $(consumers)"
	snap $P >"$W/b"
	t0=$(date +%s.%N)
	res=$(lttng_trial "$LT_RATE" 1)
	t1=$(date +%s.%N)
	snap $P >"$W/a"
	set -- $res
	say "repeat $r lttng-relayd rate=$LT_RATE: $res (trial $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s)"
	split "$W/b" "$W/a" "$W/emit.out" >"$W/tab"
	report "lttng-relayd(rate=$LT_RATE)" "$1" "${2:-0}" "${5:-1}" "$W/tab"
done
