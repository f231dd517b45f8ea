# bench/lttng.sh: the LTTng baseline and the B1 trials, sourced by
# bench/quick and bench/report (one copy of how LTTng is built, started,
# run and counted, so the two cannot drift apart).
#
# The caller sets before sourcing:
#   SRC, BUILD  the source tree and the build measured
#   W           a private temporary directory (LTTng runs in $W/lttng)
#   PIDS        background processes to stop at exit: appended to here
# and before each trial:
#   SECS        seconds per B1 trial
#   TRIAL_MAX_S the longest a trial's emitter may take and still pass
#   LT_LOG      where LTTng's own output goes (default /dev/null)
#   LT_CHANNEL  channel0's options (unset: lt_channel's, sized as the
#               agents' pools; "default": LTTng's defaults)
#
# LTTng runs as nobody with its own HOME (no session daemon of the
# machine is involved), on private random ports.

LD=$W/lttng
LT_LOG=${LT_LOG:-/dev/null}
# setpriv execs env, which execs the program: a background AS_CMD keeps
# one PID, so the daemons can be stopped by $! (not AS, a function: in the
# background it would be a subshell's).
AS_CMD=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$LD" LTTNG_HOME="$LD")
AS() { "${AS_CMD[@]}" "$@"; }

# Builds $W/lttng_bench against the build's static libgentrace with the
# given compiler flags. 0, or 1 with the reason in LT_WHY.
lttng_build() {
	LT_WHY=""
	local t
	for t in lttng lttng-sessiond lttng-relayd babeltrace2 setpriv; do
		command -v $t >/dev/null || LT_WHY="$LT_WHY $t not installed;"
	done
	[ -z "$LT_WHY" ] || return 1
	# libgentrace.a's own dependencies (TLS), as gentrace.pc's Libs.private.
	local libs
	libs=$(sed -n 's/^GNUTLS_LIBS = //p' "$BUILD/Makefile")
	if ! cc "$@" -pthread -I"$SRC/bench" -I"$SRC/agent" \
		"$SRC/bench/lttng_bench.c" "$BUILD/agent/.libs/libgentrace.a" \
		$libs -llttng-ust -ldl -o "$W/lttng_bench" >"$W/cc.log" 2>&1; then
		LT_WHY="lttng_bench does not build (liblttng-ust-dev?): $(head -n 2 "$W/cc.log" | tr '\n' ' ')"
		return 1
	fi
	return 0
}

# Starts lttng-sessiond and lttng-relayd (RPORT..RPORT+2). 0, or 1 with
# the reason in LT_WHY.
lttng_up() {
	mkdir -p "$LD" && chmod 777 "$LD" && cp "$W/lttng_bench" "$LD/"
	"${AS_CMD[@]}" lttng-sessiond --no-kernel >"$W/sessiond.log" 2>&1 &
	SESSIOND=$!
	PIDS="$PIDS $SESSIOND"
	local i=0
	until AS lttng list >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -ge 100 ]; then
			LT_WHY="lttng-sessiond did not answer: $(tail -n 2 "$W/sessiond.log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
	done
	RPORT=$((20000 + RANDOM % 20000))
	"${AS_CMD[@]}" lttng-relayd -o "$LD/relay" -C "tcp://127.0.0.1:$RPORT" \
		-D "tcp://127.0.0.1:$((RPORT + 1))" -L "tcp://127.0.0.1:$((RPORT + 2))" \
		>"$W/relayd.log" 2>&1 &
	RELAYD=$!
	PIDS="$PIDS $RELAYD"
	i=0
	until (exec 3<>"/dev/tcp/127.0.0.1/$RPORT") 2>/dev/null; do
		i=$((i + 1))
		if [ $i -ge 100 ]; then
			LT_WHY="lttng-relayd did not listen: $(tail -n 2 "$W/relayd.log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# A1: lttng_bench a1 N in a snapshot session; its output into file $2.
lttng_a1() {
	AS lttng create a1 --snapshot -o "$LD/snap" >>"$LT_LOG" 2>&1
	AS lttng enable-event -u 'gtbench:*' >>"$LT_LOG" 2>&1
	AS lttng start >>"$LT_LOG" 2>&1
	AS "$LD/lttng_bench" a1 "$1" >"$2" 2>&1
	AS lttng stop >>"$LT_LOG" 2>&1
	AS lttng destroy >>"$LT_LOG" 2>&1
}

# Starts a gentraced for B1 on private ports (database $W/b1.db); GD its
# PID, GAGENT its agent address (empty if it did not start).
b1_gentraced_up() {
	# shellcheck disable=SC2086 # GENTRACED_ARGS: extra flags, split (A/B runs)
	"$BUILD/daemon/gentraced" --log "$W/b1d.log" --agent-listen 127.0.0.1:0 \
		--http-listen 127.0.0.1:0 --db "$W/b1.db" ${GENTRACED_ARGS:-} >/dev/null 2>&1 &
	GD=$!
	PIDS="$PIDS $GD"
	local i=0
	until grep -q 'msg=listening ' "$W/b1d.log" 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 200 ] || break; sleep 0.05
	done
	GAGENT=$(sed -n 's/.*msg=listening agent=\([^ ]*\).*/\1/p' "$W/b1d.log")
}

lt_le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "nan" && a <= b) }'; }

# channel0's options for PROCS traced processes: per-UID ring buffers (one
# per CPU, shared by every process of the user, LTTng's default scheme)
# holding at least what each gentrace agent can hold of a burst before it
# loses events: its buffer pool and its spool of sealed generations waiting
# for ACKs (GENTRACE_BUFFER_MB + GENTRACE_SPOOL_MB, defaults 16 + 64 MiB),
# per process, up to 8 processes; 16 sub-buffers per CPU, their size the
# next power of two (LTTng's rule), so relayd gets at least as much as the
# agents, never less. LTTng's default is 4 x 512 KiB per CPU (4 MiB in all
# on two CPUs), which discarded 2-3x more events than 64 MiB did with 8
# processes at 14 M/s (2026-11-26, bench/RESULTS.md): a bias against relayd.
#
# Above 100 processes relayd keeps LTTng's default channel: with 1,000 apps
# the sized one (640 MiB here) made every trial late or lossy (bench-limit,
# 2026-11-26 01:51 UTC: zero-loss at no rate, first failure at 1,562
# events/s), where the default channel's row had reached 437,500-800,000
# events/s the day before. relayd gets the better of the two.
lt_channel() {
	local n=$1 cpus
	cpus=$(nproc)
	[ "$n" -gt 100 ] && { echo default; return; }
	[ "$n" -gt 8 ] && n=8
	awk -v n="$n" -v c="$cpus" 'BEGIN {
		sub_ = n * (16 + 64) * 1048576 / c / 16; s = 4096
		while (s < sub_) s *= 2
		printf "--subbuf-size=%d --num-subbuf=16", s }'
}

# The rate a trial reached: EMITTED events over max(ELAPSED, SECS), as an
# integer (bench_b1's run_trial does the same for gentrace): a trial up to
# 20% late passes on both sides, but counts at the rate it reached.
lt_reached() { awk -v e="$1" -v t="$2" -v s="$SECS" 'BEGIN { printf "%.0f", e / (t > s ? t : s) }'; }

# One LTTng B1 trial: rate events/s over threads (of each of procs
# processes, default 1: the rate is split evenly between them, as bench_b1
# splits it between its agents) for SECS through sessiond -> relayd ->
# files, counted by babeltrace2. Prints
# "ok|loss emitted recorded discarded elapsed bytes" (emitted summed over
# the processes, elapsed the slowest one's).
lttng_trial() {
	local rate=$1 th=$2 procs=${3:-1} s="b1-$1-$2-$RANDOM"
	rm -rf "$LD/relay"
	AS lttng create "$s" --set-url="net://127.0.0.1:$RPORT:$((RPORT + 1))" >>"$LT_LOG" 2>&1
	# The ring buffers hold as much as the agents' pools would (lt_channel);
	# LT_CHANNEL overrides ("default": LTTng's own).
	local ch=${LT_CHANNEL-$(lt_channel "$procs")}
	# A channel LTTng refuses would leave the trial on its default one:
	# said on stderr, not silently.
	[ "$ch" = default ] ||
		AS lttng enable-channel -u channel0 $ch >>"$LT_LOG" 2>&1 ||
		echo "lttng_trial: lttng enable-channel $ch failed: LTTng's default channel" >&2
	AS lttng enable-event -u -c channel0 'gtbench:*' >>"$LT_LOG" 2>&1
	AS lttng start >>"$LT_LOG" 2>&1
	# LTTng-UST's state dumps (the base addresses of every loaded object,
	# the process name) run in each app's listener thread when a session
	# starts tracing it: with a thousand apps they took the CPU their
	# emitters needed (median process 2.54 s for a 2 s trial at 100
	# events/s each, 2.13 s without). They are not the workload B1
	# measures, so every B1 trial runs without them.
	export LTTNG_UST_WITHOUT_BADDR_STATEDUMP=1 LTTNG_UST_WITHOUT_PROCNAME_STATEDUMP=1
	if [ "$procs" = 1 ]; then
		AS "$LD/lttng_bench" emit lttng "$rate" "$th" "$SECS" >"$W/emit.out" 2>&1
	else
		# Each process is an app of its own (registered with sessiond,
		# per-UID buffers shared by all of them, LTTng's default);
		# each waits until it is registered before it emits (without the
		# wait, a process started among a thousand emits its first second
		# before sessiond enabled its tracepoint, and those events vanish
		# uncounted), then writes a byte into the READY FIFO and waits
		# for end of file on GO (lttng_bench's barrier, bench_b1's too):
		# all start emitting together, so the trial holds N processes
		# emitting at once, and starting a thousand of them (tens of
		# seconds here) is not inside any process's emitting time.
		# The emitters' sleep when ahead of the pace: 10 us per process
		# (at least 200: lttng_bench's default), as bench_b1 sets it.
		local i kids="" each tick=${BENCH_TICK_US:-$((procs * 10 > 200 ? procs * 10 : 200))}
		each=$(awk -v r="$rate" -v n="$procs" 'BEGIN { printf "%.3f", r / n }')
		rm -f "$W"/emit.*.out "$W/ready" "$W/go"
		mkfifo -m 666 "$W/ready" "$W/go"
		# Read-write: opening neither blocks, and GO has a writer until
		# the shell closes it (the children get neither descriptor).
		exec 8<>"$W/ready" 9<>"$W/go"
		for i in $(seq 1 "$procs"); do
			"${AS_CMD[@]}" LTTNG_UST_REGISTER_TIMEOUT=-1 BENCH_TICK_US="$tick" BENCH_READY="$W/ready" \
				BENCH_GO="$W/go" "$LD/lttng_bench" emit lttng "$each" \
				"$th" "$SECS" >"$W/emit.$i.out" 2>&1 8>&- 9>&- &
			kids="$kids $!"
		done
		# One byte per process; a process that died before it was ready
		# leaves the count short and the trial without its events.
		timeout 600 head -c "$procs" <&8 >/dev/null 9>&-
		exec 9>&-
		for i in $kids; do wait "$i"; done
		exec 8>&-
		rm -f "$W/ready" "$W/go"
		cat "$W"/emit.*.out | awk '
			/EMIT/ { for (i = 1; i <= NF; i++) { split($i, kv, "=")
				if (kv[1] == "emitted") em += kv[2]
				if (kv[1] == "elapsed" && kv[2] > el) el = kv[2] }; n++ }
			END { printf "EMIT emitted=%d elapsed=%.3f procs=%d\n", em, el, n }' >"$W/emit.out"
		# A process that printed nothing emitted nothing we can count.
		[ "$(sed -n 's/.*procs=\([0-9]*\).*/\1/p' "$W/emit.out")" = "$procs" ] ||
			echo "EMIT emitted= elapsed=" >"$W/emit.out"
	fi
	AS lttng stop >>"$LT_LOG" 2>&1
	local disc
	disc=$(AS lttng list "$s" -c channel0 2>/dev/null |
		sed -n 's/.*Discarded events: *\([0-9]*\).*/\1/p' | head -n 1)
	# Bit 63 is sometimes set (seen on this machine): the low 63 bits count.
	disc=$(awk -v d="${disc:-0}" 'BEGIN { printf "%.0f", d % 9223372036854775808 }')
	AS lttng destroy "$s" >>"$LT_LOG" 2>&1
	local rec=skipped bytes em el ok=loss
	em=$(sed -n 's/.*emitted=\([0-9]*\).*/\1/p' "$W/emit.out")
	el=$(sed -n 's/.*elapsed=\([0-9.]*\).*/\1/p' "$W/emit.out")
	# Counting the trace decodes every event (seconds for the largest
	# trials): only a trial that is neither late nor discarding needs it.
	if [ "$disc" = 0 ] && [ -n "$el" ] && lt_le "$el" "$TRIAL_MAX_S"; then
		rec=$(babeltrace2 -c sink.utils.counter -p step=+0 "$LD/relay" 2>/dev/null |
			awk '/Event messages/ { n = $1 } END { print n + 0 }')
	fi
	bytes=$(find "$LD/relay" -type f -path '*channel0*' -printf '%s\n' 2>/dev/null |
		awk '{ s += $1 } END { print s + 0 }')
	[ -n "$em" ] && [ "$rec" = "$em" ] && [ "$disc" = 0 ] &&
		lt_le "$el" "$TRIAL_MAX_S" && ok=ok
	echo "$ok $em $rec $disc $el $bytes"
}

# One gentrace B1 trial: the same emitter through the agent into the
# gentraced at GAGENT, counted in its committed rows. Optional third
# argument: GENTRACE_BUFFER_MB. Prints "ok|loss emitted rows dropped
# evicted delivered settled elapsed".
gt_trial() {
	local rate=$1 th=$2 s="b1-$1-$2-${3:-d}-$RANDOM"
	env GENTRACE_ADDR="$GAGENT" GENTRACE_SERVICE="$s" ${3:+GENTRACE_BUFFER_MB=$3} \
		"$W/lttng_bench" emit gentrace "$rate" "$th" "$SECS" >"$W/emit.out" 2>&1
	local em el de dr ev st rows ok=loss
	em=$(sed -n 's/.*emitted=\([0-9]*\).*/\1/p' "$W/emit.out")
	el=$(sed -n 's/.*elapsed=\([0-9.]*\).*/\1/p' "$W/emit.out")
	de=$(sed -n 's/.*delivered=\([0-9]*\).*/\1/p' "$W/emit.out")
	dr=$(sed -n 's/.*dropped=\([0-9]*\).*/\1/p' "$W/emit.out")
	ev=$(sed -n 's/.*evicted=\([0-9]*\).*/\1/p' "$W/emit.out")
	st=$(sed -n 's/.*settled=\([0-9]*\).*/\1/p' "$W/emit.out")
	# Committed rows: events stored for this session, LOST markers aside.
	rows=$(sqlite3 -cmd '.timeout 10000' "file:$W/b1.db?mode=ro" \
		"SELECT coalesce(sum(g.events), 0) FROM generations g JOIN sessions s
		 ON s.id = g.session_id WHERE s.service = '$s'" 2>/dev/null)
	[ -n "$em" ] && [ "$st" = 1 ] && [ "${dr:-1}" = 0 ] && [ "${ev:-1}" = 0 ] &&
		[ "$de" = "$em" ] && [ "${rows:-0}" = "$em" ] &&
		lt_le "$el" "$TRIAL_MAX_S" && ok=ok
	echo "$ok $em ${rows:-0} ${dr:-} ${ev:-} ${de:-} ${st:-} $el"
}
