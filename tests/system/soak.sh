#!/bin/bash
# soak.sh: many agents for a long time on one gentraced.
#
#   soak.sh DURATION [AGENTS]     e.g. make check-soak DURATION=10m AGENTS=50
#
# AGENTS processes stream for DURATION: four in five are exact-count emitters
# (1,000 events/s each, services svc0..svc4, "hosts" h0..h9 as tags), the
# rest demo services. Every minute hostile clients attack both ports for 5 s
# (their lines are warnings, not errors). The daemon's RSS and open fds are
# sampled every 10 s; "start" is the sample at half the run: the first half
# is warm-up (measured here: gentraced's RSS climbs for about 4 minutes
# under 50 agents, as SQLite's caches, zstd contexts and the malloc arenas of
# its threads fill, then levels off). At the end every emitter must satisfy
# the exact ledger identity, RSS must end within 10% + 8 MiB of the
# half-way sample and fds within 8 of theirs, and the log must hold no
# error-level line. The second half's RSS slope is reported (kB/min).
. "$(dirname "$0")/lib.sh"
skip_unless curl sqlite3 bc "$PY" "$GENTRACED" "$GENTRACE" "$DEMO" "$EMITTER"

dur=${1:-10m}
AGENTS=${2:-50}
case $dur in
*h) SECS=$((${dur%h} * 3600)) ;;
*m) SECS=$((${dur%m} * 60)) ;;
*s) SECS=${dur%s} ;;
*) SECS=$dur ;;
esac
[ "$SECS" -ge 20 ] 2>/dev/null || die "DURATION must be at least 20s (got $dur)"
WARM=$((SECS / 2))
export PERIOD_MS=1000
DB=$T/soak.db

say "soak: $AGENTS agents for ${SECS}s"
start_daemon soak -- --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$DB" --handshake-timeout 2s --http-timeout 3s || die "daemon"
ne=$((AGENTS * 4 / 5))
for i in $(seq 1 "$AGENTS"); do
	if [ "$i" -le "$ne" ]; then
		start_emitter "e$i" "svc$((i % 5))" "h$((i % 10))" 1000 16 2
	else
		DEMO_RATE=50 start_demo "d$i" "shop$((i % 3))" "h$((i % 10))"
	fi
done

SAMPLES=$T/samples.txt
: >"$SAMPLES"
start=$(date +%s)
next_hostile=$((start + 60))
rss0="" fd0=""
while :; do
	now=$(date +%s)
	el=$((now - start))
	[ $el -ge "$SECS" ] && break
	kill -0 "$DPID" 2>/dev/null || die "gentraced died at ${el}s"
	r=$(rss_kb "$DPID") f=$(fds "$DPID")
	echo "$el $r $f $(metric gentrace_generations_committed_total)" >>"$SAMPLES"
	if [ -z "$rss0" ] && [ $el -ge $WARM ]; then rss0=$r fd0=$f; fi
	say "t=${el}s rss=${r}kB fds=$f committed=$(tail -n 1 "$SAMPLES" | cut -d' ' -f4)"
	if [ "$now" -ge "$next_hostile" ] && [ $((SECS - el)) -gt 20 ]; then
		HOSTILE_CLOSE_BOUND=10 "$PY" "$SYSDIR/hostile.py" "$AGENT" "$HTTP" 5 \
			"service=svc1&last=5s" >>"$T/hostile.out" 2>&1 &
		next_hostile=$((now + 60))
	fi
	sleep 10
done
rss1=$(rss_kb "$DPID") fd1=$(fds "$DPID")
rmax=$(awk '$1 >= w && $2 > m { m = $2 } END { print m + 0 }' w="$WARM" "$SAMPLES")
[ -n "$rss0" ] || rss0=$rss1 fd0=$fd1
say "stopping agents"
stop_agents
for n in $EMITTERS; do account "$n" "$DB"; done
check "db: no (session, gen) stored twice" 0 "$(sql "$DB" \
	"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT session_id, gen
	 FROM generations)) FROM generations")"
check "soak: hostile runs all ended as expected" 0 \
	"$(cat "$T/hostile.out" 2>/dev/null | grep -c '^HOSTILE-PROBLEM')"
info "soak: daemon RSS kB half-way/end/max after" "$rss0/$rss1/$rmax"
info "soak: daemon fds half-way/end" "$fd0/$fd1"
slope=$(awk -v w="$WARM" '$1 >= w { if (t0 == "") { t0 = $1; r0 = $2 } t1 = $1; r1 = $2 }
	END { if (t1 > t0) printf "%.0f", (r1 - r0) * 60 / (t1 - t0); else print 0 }' "$SAMPLES")
info "soak: RSS slope over the second half (kB/min)" "$slope"
info "soak: RSS kB at 0s/warm-up/end" "$(head -n 1 "$SAMPLES" | cut -d' ' -f2)/$rss0/$rss1"
check "soak: RSS flat (end <= 1.10 x half-way + 8 MiB)" 1 \
	"$([ "$rss1" -le $((rss0 * 11 / 10 + 8192)) ] && echo 1 || echo 0)"
check "soak: fds flat (end <= start + 8)" 1 \
	"$([ "$fd1" -le $((fd0 + 8)) ] && echo 1 || echo 0)"
stop_daemon
check "db: integrity_check" ok "$(sqlite3 "$DB" 'PRAGMA integrity_check')"
check "logs: no error-level lines" 0 "$(grep -c 'level=error' "$T/soak.log")"
print_table
[ "$FAILED" = 0 ]
