# tests/system/lib.sh: helpers shared by run.sh and soak.sh (sourced, bash).
#
# Every process started here is recorded by PID in PIDS and killed by PID on
# exit (never by name). Readiness comes from the daemon's `listening` log
# line and from /metrics, never from a bare sleep; the sleeps that remain
# pace a scenario (how long a phase lasts), they do not wait for readiness.
set -u
: "${top_srcdir:=.}"
. "$top_srcdir/tests/lib/common.sh"
EMITTER=$top_builddir/tests/system/emitter
SYSDIR=$top_srcdir/tests/system
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/gt-sys-XXXXXX")
PIDS=""
KEEP=${GT_SYSTEM_KEEP:-0}
CHECKS=0
FAILED=0
TABLE=$T/table.txt
: >"$TABLE"

cleanup() {
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ "$KEEP" = 1 ] || [ "$FAILED" != 0 ]; then
		echo "(files kept in $T)"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

say() { printf '%s [%6.1fs] %s\n' "$(date +%T)" "$(elapsed)" "$*"; }
T0=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) - $T0" | bc 2>/dev/null || echo 0; }

die() {
	echo "FAIL: $*" >&2
	show_logs 20
	FAILED=1
	exit 1
}

forget_pid() {
	local p=$1 out="" q
	for q in $PIDS; do [ "$q" = "$p" ] || out="$out $q"; done
	PIDS=$out
}

# check WHAT EXPECTED GOT: one row of the final table; a mismatch fails the
# run (at the end, so the table shows everything that was checked).
check() {
	local what=$1 want=$2 got=$3 res=ok
	CHECKS=$((CHECKS + 1))
	[ "$want" = "$got" ] || { res=FAIL; FAILED=$((FAILED + 1)); }
	printf '%-58s %-22s %-22s %s\n' "$what" "$want" "$got" "$res" >>"$TABLE"
	[ "$res" = ok ] || echo "check failed: $what: want $want, got $got" >&2
}
# info WHAT GOT: a row that reports without judging (behaviour the design
# leaves open, e.g. whether a trickling client is ever cut).
info() {
	printf '%-58s %-22s %-22s %s\n' "$1" "(report)" "${2:-none}" info >>"$TABLE"
}
# check_ge WHAT MIN GOT
check_ge() {
	local what=$1 min=$2 got=$3
	if [ "${got:-0}" -ge "$min" ] 2>/dev/null; then
		check "$what" ">=$min" ">=$min"
	else
		check "$what" ">=$min" "${got:-none}"
	fi
}
print_table() {
	printf '\n%-58s %-22s %-22s %s\n' "check" "expected" "got" "result"
	printf '%s\n' "--------------------------------------------------------------------------------------------------------------"
	cat "$TABLE"
	echo "$CHECKS checks, $FAILED failed"
}

# start_daemon NAME [VAR=VALUE...] -- [FLAGS...]: starts gentraced with log
# $T/NAME.log, sets DPID AGENT HTTP from its listening line.
start_daemon() {
	local name=$1 envs=() line i=0
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	DLOG=$T/$name.log
	: >"$DLOG"
	env ${envs[@]+"${envs[@]}"} "$GENTRACED" --log "$DLOG" "$@" \
		>>"$T/$name.stderr" 2>&1 &
	DPID=$!
	PIDS="$PIDS $DPID"
	while ! grep -q 'msg=listening ' "$DLOG"; do
		kill -0 "$DPID" 2>/dev/null || { DPID=""; return 1; }
		i=$((i + 1))
		[ $i -lt 600 ] || die "$name: no listening line in 30 s"
		sleep 0.05
	done
	line=$(grep 'msg=listening ' "$DLOG" | tail -n 1)
	AGENT=$(echo "$line" | sed -n 's/.* agent=\([^ ]*\).*/\1/p')
	HTTP=$(echo "$line" | sed -n 's/.* http=\([^ ]*\).*/\1/p')
	[ -n "$AGENT" ] && [ -n "$HTTP" ] || die "cannot parse: $line"
	return 0
}

# stop_daemon: SIGTERM (drains and commits), expects exit status 0.
stop_daemon() {
	kill -TERM "$DPID"
	wait "$DPID"
	local st=$?
	forget_pid "$DPID"
	[ $st -eq 0 ] || die "gentraced exited with $st on SIGTERM"
}

kill9_daemon() {
	kill -KILL "$DPID"
	wait "$DPID" 2>/dev/null
	forget_pid "$DPID"
}

# metric NAME: the value of an unlabelled metric (empty if absent).
metric() {
	curl -s --max-time 10 "http://$HTTP/metrics" |
		awk -v n="$1" '$1 == n { print $2; exit }'
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s.
wait_for() {
	local secs=$1 what=$2 i=0
	shift 2
	while ! "$@"; do
		i=$((i + 1))
		[ $i -lt $((secs * 10)) ] || return 1
		sleep 0.1
	done
	return 0
}

# sql DB QUERY: read-only query with a busy timeout (the daemon writes).
sql() {
	sqlite3 -cmd '.timeout 10000' "file:$1?mode=ro" "$2"
}

# start_emitter NAME SERVICE HOST RATE SPOOL_MB THREADS: an exact-count
# emitter at RATE events/s for up to 20 minutes; stopped by stop_agents.
# EMIT_ADDR overrides GENTRACE_ADDR (default: the daemon's agent address).
EMITTERS=""
start_emitter() {
	local name=$1 svc=$2 host=$3 rate=$4 spool=$5 threads=$6
	GENTRACE_ADDR=${EMIT_ADDR:-$AGENT} GENTRACE_SERVICE=$svc \
		GENTRACE_TAGS="host=$host,emitter=$name" GENTRACE_PERIOD_MS=${PERIOD_MS:-250} \
		GENTRACE_SPOOL_MB=$spool GENTRACE_FLUSH_MS=10000 \
		"$EMITTER" --events $((rate * 1200)) --seconds 1200 --threads "$threads" \
		--settle-ms 60000 --label "$name" >"$T/em-$name.out" 2>"$T/em-$name.err" &
	eval "EPID_$name=$!"
	PIDS="$PIDS $!"
	EMITTERS="$EMITTERS $name"
}

DEMOS=""
start_demo() {
	local name=$1 svc=$2 host=$3
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=$svc GENTRACE_TAGS="host=$host,demo=$name" \
		GENTRACE_PERIOD_MS=${PERIOD_MS:-250} GENTRACE_FLUSH_MS=10000 \
		"$DEMO" --duration 1200 --threads 2 --rate "${DEMO_RATE:-300}" --quiet \
		>"$T/demo-$name.out" 2>&1 &
	eval "DPID_$name=$!"
	PIDS="$PIDS $!"
	DEMOS="$DEMOS $name"
}

# stop_agents: SIGTERM every emitter and demo, wait for each to exit 0.
stop_agents() {
	local n p st
	for n in $EMITTERS; do eval "p=\$EPID_$n"; kill -TERM "$p" 2>/dev/null; done
	for n in $DEMOS; do eval "p=\$DPID_$n"; kill -TERM "$p" 2>/dev/null; done
	for n in $EMITTERS; do
		eval "p=\$EPID_$n"
		wait "$p"
		st=$?
		forget_pid "$p"
		check "emitter $n exits 0" 0 "$st"
	done
	for n in $DEMOS; do
		eval "p=\$DPID_$n"
		wait "$p"
		st=$?
		forget_pid "$p"
		check "demo $n exits 0" 0 "$st"
	done
}

# kv FILE KEY: a value from the emitter's EMITTER line.
kv() {
	sed -n "s/^EMITTER .* $2=\([^ ]*\).*/\1/p" "$1" | head -n 1
}

# session_of TAGKEY TAGVALUE: the session id the daemon lists for a tag.
session_of() {
	curl -s --max-time 10 "http://$HTTP/v1/agents?tag=$1:$2" |
		"$PY" "$SYSDIR/count.py" sessions
}

# account NAME DB: downloads the emitter's session through /v1/trace, counts
# it with `gentrace stat --json`, and checks the ledger identity exactly.
# Sets ACC_EVICTED_GENS (holes) and ACC_LEDGER for the caller.
account() {
	local n=$1 db=$2 out=$T/em-$1.out sess hdr f
	sess=$(session_of emitter "$n")
	check "emitter $n: one session listed" 1 "$(echo "$sess" | grep -c .)"
	sess=$(echo "$sess" | head -n 1)
	f=$T/win-$n.gentrace
	curl -s --max-time 120 -D "$T/win-$n.hdr" -o "$f" \
		"http://$HTTP/v1/trace?session=$sess&from=0&to=now" ||
		check "emitter $n: window download" ok curl-failed
	"$GENTRACE" stat --json "$f" >"$T/win-$n.json" 2>"$T/win-$n.err"
	check "emitter $n: gentrace stat of the window" 0 $?
	# gens events retrievable dropped evicted rejected
	read -r s_gens s_events s_retr s_drop s_evict s_rej <<EOF
$("$PY" "$SYSDIR/count.py" stat "$T/win-$n.json")
EOF
	hdr=$(tr -d '\r' <"$T/win-$n.hdr" | sed -n 's/^X-Gentrace-Generations: //Ip')
	read -r d_gens d_events d_drop d_evict d_rej d_min d_max <<EOF
$(sql "$db" "SELECT count(*), coalesce(sum(g.events),0), coalesce(sum(dropped),0),
	coalesce(sum(evicted),0), coalesce(sum(g.rejected),0), min(gen), max(gen)
	FROM generations g JOIN sessions s ON s.id = g.session_id
	WHERE s.session = '$sess'" | tr '|' ' ')
EOF
	local asked emitted written delivered a_drop a_evict a_rej settled g_ev
	emitted=$(kv "$out" emitted)
	written=$(kv "$out" written)
	delivered=$(kv "$out" delivered)
	a_drop=$(kv "$out" dropped)
	a_evict=$(kv "$out" evicted)
	a_rej=$(kv "$out" rejected)
	settled=$(kv "$out" settled)
	g_ev=$(kv "$out" gens_evicted)
	check "emitter $n: emitted > 0" 1 "$([ "${emitted:-0}" -gt 0 ] && echo 1 || echo 0)"
	check "emitter $n: agent counted every call (written)" "$emitted" "$written"
	check "emitter $n: agent settled (all accounted)" 1 "$settled"
	check "emitter $n: window gens = header = db rows" "$d_gens/$d_gens" "$s_gens/$hdr"
	check "emitter $n: window events = db events" "$d_events" "$s_events"
	check "emitter $n: window ledger = db ledger" "$d_drop/$d_evict/$d_rej" \
		"$s_drop/$s_evict/$s_rej"
	ACC_LEDGER=$((s_drop + s_evict + s_rej))
	check "emitter $n: emitted = retrievable + ledger" "$emitted" \
		"$((s_retr + ACC_LEDGER))"
	check "emitter $n: agent delivered = retrievable" "$delivered" "$s_retr"
	check "emitter $n: ledger = agent's drop/evict/reject" "$a_drop/$a_evict/$a_rej" \
		"$s_drop/$s_evict/$s_rej"
	ACC_EVICTED_GENS=$((d_max - d_gens)) # gens start at 1
	check "emitter $n: missing gens = agent's evicted gens" "$g_ev" "$ACC_EVICTED_GENS"
	ACC_EVICTED=$s_evict
	ACC_DROPPED=$s_drop
}

# check_demo NAME DB: the demo's session is stored without holes and its
# window decodes.
check_demo() {
	local n=$1 db=$2 sess
	sess=$(session_of demo "$n" | head -n 1)
	check "demo $n: listed" 32 "${#sess}"
	curl -s --max-time 120 -o "$T/demo-$n.gentrace" \
		"http://$HTTP/v1/trace?session=$sess&from=0&to=now"
	"$GENTRACE" stat "$T/demo-$n.gentrace" >/dev/null 2>&1
	check "demo $n: window decodes" 0 $?
	check "demo $n: gens 1..last, none missing" 0 "$(sql "$db" \
		"SELECT max(gen) - count(*) FROM generations g JOIN sessions s
		 ON s.id = g.session_id WHERE s.session = '$sess'")"
}

# rss_kb PID / fds PID
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
