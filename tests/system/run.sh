#!/bin/bash
# run.sh: whole-system scenario runner for gentrace.
#
#   run.sh [--short|--full]      (make check runs --short, make check-system --full)
#
# Scenario A, one database, agents streaming the whole time:
#   emitters (exact counts, tests/system/emitter) of several services and
#   "hosts" (GENTRACE_TAGS host=...), in two groups: "n" with the default
#   spool, "s" with GENTRACE_SPOOL_MB=1 at a higher rate and a GENTRACE_ADDR
#   failover list whose first address refuses; plus demo services.
#   1. steady streaming
#   2. kill -9 of gentraced, integrity_check, restart on the same ports and db
#   3. steady streaming
#   4. gentraced stopped (SIGTERM) for longer than the s group's spool holds
#   5. disk full: restart with GENTRACE_TEST_MAX_PAGES just above the
#      database's size plus a ballast table (so "space frees" is real); ingest
#      must pause, /v1/agents and /v1/trace keep answering, /healthz says 503;
#      deleting the ballast frees space and ingest resumes in the same
#      process; then a graceful restart (SIGTERM under load) lifts the limit
#   6. hostile clients on both ports during ingest (tests/system/hostile.py)
#   7. steady streaming, then every agent stops (gt_stop, daemon reachable)
#   Checks, per emitter: emitted = events in its /v1/trace window (counted
#   with `gentrace stat --json`, LOST markers excluded) + ledger of its stored
#   generations, exactly, and both halves agree with the agent's own final
#   gt_stats; the generations missing from the database are exactly the ones
#   the agent evicted; the n group lost nothing through kill -9, the outage
#   and the disk-full pause; the s group's eviction shows in the ledger.
#   Whole database: no (session, gen) twice, PRAGMA integrity_check ok, no
#   error-level log line except the disk-full ones that phase 5 provokes.
# Scenario B, its own database: retention (--retain) deletes old generations
#   while windows are downloaded in a loop and by a rate-limited slow client;
#   every download must be a valid file, retention must have deleted, and what
#   is left must be whole (no holes after the oldest kept generation) and
#   agree with the window served afterwards.
#
# Prints a table of every check; exit 0 when all hold, 1 otherwise, 77 when a
# tool is missing. GT_SYSTEM_KEEP=1 keeps the work directory.
. "$(dirname "$0")/lib.sh"
skip_unless curl sqlite3 bc "$PY" "$GENTRACED" "$GENTRACE" "$DEMO" "$EMITTER"

MODE=${1:---short}
if [ "$MODE" = --full ]; then
	P_STEADY=8 P_AFTER_KILL=6 P_OUTAGE=12 P_HOSTILE=15 P_FINAL=6 P_RET=20
	N_RATE=8000 S_RATE=60000 NSVC="api db cache"
	NDEMO=3
else
	P_STEADY=3 P_AFTER_KILL=2 P_OUTAGE=6 P_HOSTILE=6 P_FINAL=2 P_RET=8
	N_RATE=4000 S_RATE=60000 NSVC="api db"
	NDEMO=1
fi
export PERIOD_MS=250
DFLAGS=(--handshake-timeout 2s --http-timeout 3s)
DB=$T/a.db

say "scenario A: start"
start_daemon d1 -- --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$DB" "${DFLAGS[@]}" || die "d1 did not start"
A_PORTS=(--agent-listen "$AGENT" --http-listen "$HTTP")
i=0
for svc in $NSVC; do
	for h in h1 h2; do
		i=$((i + 1))
		start_emitter "n$i" "$svc" "$h" "$N_RATE" 64 3
	done
done
# The s group also gets a failover list whose first address refuses (port 1
# on loopback): every (re)connect must fall over to the daemon.
EMIT_ADDR="127.0.0.1:1,$AGENT" start_emitter s1 ingest h1 "$S_RATE" 1 2
EMIT_ADDR="127.0.0.1:1,$AGENT" start_emitter s2 ingest h2 "$S_RATE" 1 2
for j in $(seq 1 $NDEMO); do start_demo "demo$j" shop "h$j"; done

committed() { metric gentrace_generations_committed_total; }
# The s group reconnects with backoff (up to 10 s with jitter) through its
# failover list; a daemon that lives only a few seconds can come and go
# between two attempts. Each phase therefore waits until both s agents have
# handshaken with the current daemon, so "reconnected to each daemon" below
# is a fact the scenario establishes, not a race it hopes to win.
s_connected() {
	[ "$(grep -c 'msg="agent connected".* service=ingest ' "$DLOG")" -ge 2 ]
}
wait_s_group() {
	wait_for 30 "s group on $1" s_connected ||
		check "s group handshook with $1 within 30 s" yes no
}
committed_above() { [ "$(committed)" -gt "$1" ] 2>/dev/null; }
wait_for 30 "first commits" committed_above 10 || die "no generations committed"
wait_s_group d1
say "phase 1: steady streaming ${P_STEADY}s"
sleep "$P_STEADY"

say "phase 2: kill -9 during ingest, restart on the same ports"
kill9_daemon
check "kill -9: integrity_check" ok "$(sqlite3 "$DB" 'PRAGMA integrity_check')"
rows_before=$(sql "$DB" "SELECT count(*) FROM generations")
start_daemon d2 -- "${A_PORTS[@]}" --db "$DB" "${DFLAGS[@]}" ||
	die "d2 could not bind the same ports"
wait_for 30 "commits after restart" committed_above 5 ||
	die "nothing committed after the restart"
check_ge "kill -9: rows kept after restart" 1 "$rows_before"
wait_s_group d2
sleep "$P_AFTER_KILL"

say "phase 3: gentraced stopped for ${P_OUTAGE}s (past the s spool)"
stop_daemon
sleep "$P_OUTAGE"
start_daemon d3 -- "${A_PORTS[@]}" --db "$DB" "${DFLAGS[@]}" || die "d3"
# Let the resent backlog land before the disk fills; measure the normal
# commit rate meanwhile (rows in 2 s) to judge the pause against it.
wait_for 30 "backlog" committed_above 20 || die "no resend after the outage"
wait_s_group d3
sleep 1
r0=$(sql "$DB" "SELECT count(*) FROM generations")
sleep 2
normal2s=$(($(sql "$DB" "SELECT count(*) FROM generations") - r0))

say "phase 4: disk full"
stop_daemon
# A ballast of 128 MiB (16 rows of 8 MiB) that the operator can delete
# later, then a page limit a little above the database's size: the agents'
# next seconds fill it. Deleting the ballast must leave room for all the
# agents hold by then: on a loaded machine the restart alone took 35 s, and
# 8 MiB filled again with that backlog within a second of the delete (the
# flag cleared for milliseconds, between two of the check's polls, and
# stayed set until the daemon stopped, so the demo's spool evicted). The
# whole short scenario stores under 40 MB. Rows of 8 MiB, deleted one per
# transaction: one 128 MiB delete held the write lock past the daemon's
# 5 s busy timeout there.
sqlite3 -cmd '.timeout 10000' "$DB" \
	"CREATE TABLE IF NOT EXISTS system_test_ballast(b BLOB);
	 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 16)
	 INSERT INTO system_test_ballast SELECT zeroblob(8388608) FROM n;" ||
	die "ballast"
pages=$(sqlite3 "$DB" "PRAGMA page_count")
start_daemon d4 GENTRACE_TEST_MAX_PAGES=$((pages + 8)) -- "${A_PORTS[@]}" \
	--db "$DB" "${DFLAGS[@]}" || die "d4"
full() { [ "$(metric gentrace_disk_full)" = 1 ]; }
wait_for 60 "disk full" full
check "disk full: daemon reports gentrace_disk_full" 1 "$(metric gentrace_disk_full)"
rows_full=$(sql "$DB" "SELECT count(*) FROM generations")
# A small generation that still fits clears the flag until the next batch
# fails (below), so /healthz may read 200 for a moment: it must read 503
# while the disk stays full, not on one exact request.
hz=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/healthz")
for _ in $(seq 100); do
	[ "$hz" != 503 ] || break
	sleep 0.1
	hz=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/healthz")
done
check "disk full: /healthz" 503 "$hz"
check "disk full: /v1/agents answers" 200 \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/agents")"
curl -s -o "$T/full.gentrace" -w '%{http_code}' \
	"http://$HTTP/v1/trace?service=api&from=0&to=now" >"$T/full.code"
check "disk full: /v1/trace answers" 200 "$(cat "$T/full.code")"
"$GENTRACE" stat "$T/full.gentrace" >/dev/null 2>&1
check "disk full: that window decodes" 0 $?
sleep 2
# Paused, not frozen: small generations that still fit in the last free
# pages commit (and a commit clears the flag until the next batch fails), so
# the check is against the normal rate measured before: under half of it.
dfull=$(($(sql "$DB" "SELECT count(*) FROM generations") - rows_full))
check "disk full: ingest paused (rows in 2 s < half of normal)" 1 \
	"$([ $((dfull * 2)) -lt "$normal2s" ] && echo 1 || echo 0)"
info "disk full: rows in 2 s full / normal" "$dfull / $normal2s"
check "disk full: daemon alive" 0 "$(kill -0 "$DPID" 2>/dev/null; echo $?)"
# The operator frees space; ingest must resume in the same process.
for _ in $(seq 16); do
	sqlite3 -cmd '.timeout 10000' "$DB" "DELETE FROM system_test_ballast
		WHERE rowid = (SELECT min(rowid) FROM system_test_ballast)" ||
		die "ballast delete"
done
notfull() { [ "$(metric gentrace_disk_full)" = 0 ]; }
wait_for 60 "resume" notfull
check "disk full: resumes after space frees" 0 "$(metric gentrace_disk_full)"
rows_more() { [ "$(sql "$DB" "SELECT count(*) FROM generations")" -gt "$rows_full" ]; }
wait_for 30 "rows after resume" rows_more
check "disk full: rows committed after resume" 1 "$(rows_more && echo 1 || echo 0)"
wait_s_group d4
# The page limit stays with this process; the rest of the run needs room, so
# a graceful restart (SIGTERM drains under load) lifts it.
stop_daemon
start_daemon d5 -- "${A_PORTS[@]}" --db "$DB" "${DFLAGS[@]}" || die "d5"

say "phase 5: hostile clients for ${P_HOSTILE}s during ingest"
c0=$(committed)
HOSTILE_CLOSE_BOUND=10 "$PY" "$SYSDIR/hostile.py" "$AGENT" "$HTTP" "$P_HOSTILE" \
	"service=shop&from=0&to=now" >"$T/hostile.out" 2>&1 &
HPID=$!
PIDS="$PIDS $HPID"
sleep $((P_HOSTILE / 2))
check "hostile: /healthz from a fresh client meanwhile" 200 \
	"$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://$HTTP/healthz")"
wait "$HPID"
hst=$?
forget_pid "$HPID"
grep '^HOSTILE' "$T/hostile.out" | sed 's/^/    /'
check "hostile: every bad connection refused or closed" 0 "$hst"
hv() { sed -n "s/^HOSTILE .*[ ]$1=\([^ ]*\).*/\1/p" "$T/hostile.out"; }
h1=$(hv http_slowloris_cut) h2=$(hv http_slowloris) h3=$(hv http_slowreader_ended)
h4=$(hv http_slowreader)
info "hostile: slowloris conns the daemon cut (of)" "${h1:-0}/${h2:-0}"
info "hostile: slow readers the daemon cut (of)" "${h3:-0}/${h4:-0}"
# agent_claim is the first key of the line: hv needs a key before it.
hc() { sed -n "s/^HOSTILE.* $1=\([^ ]*\).*/\1/p" "$T/hostile.out"; }
h5=$(hc agent_claim_refused) h6=$(hc agent_claim)
check "hostile: claims on listed sessions all refused with AUTH" "${h6:-x}" \
	"${h5:-0}"
check_ge "hostile: ingest went on meanwhile (commits)" 5 $(($(committed) - c0))
check "hostile: daemon alive" 0 "$(kill -0 "$DPID" 2>/dev/null; echo $?)"

say "phase 6: steady ${P_FINAL}s, then every agent stops"
sleep "$P_FINAL"
wait_s_group d5
stop_agents

say "checks"
for n in $EMITTERS; do
	account "$n" "$DB"
	case $n in
	n*) check "emitter $n (default spool): nothing lost" 0/0 \
		"$ACC_DROPPED/$ACC_EVICTED" ;;
	s*) check_ge "emitter $n (1 MiB spool): eviction in the ledger" 1 "$ACC_EVICTED"
		# d1, d2 (after kill -9), d3 (after the outage), d4, d5: one
		# handshake each through the failover list.
		check_ge "emitter $n (failover list): reconnected to each daemon" 5 \
			"$(kv "$T/em-$n.out" connects)" ;;
	esac
done
for n in $DEMOS; do check_demo "$n" "$DB"; done
check "db: no (session, gen) stored twice" 0 "$(sql "$DB" \
	"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT session_id, gen
	 FROM generations)) FROM generations")"
check "db: every generation has its payload" 0 "$(sql "$DB" \
	"SELECT count(*) FROM generations g LEFT JOIN payloads p USING (seq)
	 WHERE p.seq IS NULL")"
stop_daemon
check "db: integrity_check" ok "$(sqlite3 "$DB" 'PRAGMA integrity_check')"
# Error-level lines: only d4 may have them, and only about the full disk.
errs=$(cat "$T"/d[1235].log 2>/dev/null | grep -c 'level=error')
check "logs: no error lines outside the disk-full phase" 0 "$errs"
errs=$(grep 'level=error' "$T/d4.log" |
	grep -v -E 'msg="storage full, ingest paused"|msg="store: [a-z ()]* failed".*(full|FULL)' |
	grep -c .)
check "logs: disk-full phase errors are only about space" 0 "$errs"
check_ge "logs: the disk-full pause was logged" 1 \
	"$(grep -c 'level=error msg="storage full, ingest paused"' "$T/d4.log")"

say "scenario B: retention while windows download"
EMITTERS="" DEMOS=""
RDB=$T/r.db
start_daemon r1 -- --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$RDB" --retain 2s "${DFLAGS[@]}" || die "r1"
start_emitter r1 ret h1 20000 64 2
start_emitter r2 ret h2 20000 64 2
wait_for 30 "first commits" committed_above 4 || die "retention: nothing committed"
# A slow download of everything there is, rate-limited so it spans many
# retention ticks (its pin protects what it promised).
curl -s --limit-rate 40k -D "$T/slow.hdr" -o "$T/slow.gentrace" \
	"http://$HTTP/v1/trace?service=ret&from=0&to=now" &
SLOW=$!
PIDS="$PIDS $SLOW"
ndl=0 bad=0 fewer=0
end=$(($(date +%s) + P_RET))
while [ "$(date +%s)" -lt "$end" ]; do
	ndl=$((ndl + 1))
	curl -s --max-time 30 -D "$T/dl.hdr" -o "$T/dl.gentrace" \
		"http://$HTTP/v1/trace?service=ret&from=0&to=now"
	if ! "$GENTRACE" stat --json "$T/dl.gentrace" >"$T/dl.json" 2>"$T/dl.err"; then
		bad=$((bad + 1))
		cp "$T/dl.gentrace" "$T/bad-$ndl.gentrace"
		continue
	fi
	h=$(tr -d '\r' <"$T/dl.hdr" | sed -n 's/^X-Gentrace-Generations: //Ip')
	g=$("$PY" "$SYSDIR/count.py" stat "$T/dl.json" | cut -d' ' -f1)
	[ "$g" -le "${h:-0}" ] || bad=$((bad + 1))
	[ "$g" -lt "${h:-0}" ] && fewer=$((fewer + 1))
	sleep 0.2
done
check "retention: downloads during deletion are valid files" "0 of $ndl bad" \
	"$bad of $ndl bad"
deleted=$(sql "$RDB" "SELECT min(gen) > 1 FROM generations")
check "retention: deleted the oldest generations" 1 "$deleted"
stop_agents
# Give the slow download time to finish the window it promised.
wait_for 120 "slow download" bash -c "! kill -0 $SLOW 2>/dev/null"
wait "$SLOW"
check "retention: slow download finished ok" 0 $?
forget_pid "$SLOW"
"$GENTRACE" stat "$T/slow.gentrace" >/dev/null 2>&1
check "retention: slow download is a valid file" 0 $?
# Freeze the database (restart without --retain) and compare what is kept
# with what the window serves.
stop_daemon
start_daemon r2 -- --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$RDB" "${DFLAGS[@]}" || die "r2"
for n in r1 r2; do
	sess=$(session_of emitter "$n" | head -n 1)
	read -r kgen kev kmin kmax <<EOF
$(sql "$RDB" "SELECT count(*), sum(g.events), min(gen), max(gen) FROM generations g
	JOIN sessions s ON s.id = g.session_id WHERE s.session = '$sess'" | tr '|' ' ')
EOF
	check "retention $n: kept gens are whole (no hole after oldest)" \
		"$((kmax - kmin + 1))" "$kgen"
	curl -s -o "$T/kept-$n.gentrace" "http://$HTTP/v1/trace?session=$sess&from=0&to=now"
	"$GENTRACE" stat --json "$T/kept-$n.gentrace" >"$T/kept-$n.json" 2>/dev/null
	read -r wg we _ <<EOF
$("$PY" "$SYSDIR/count.py" stat "$T/kept-$n.json")
EOF
	check "retention $n: window = kept rows (gens/events)" "$kgen/$kev" "$wg/$we"
	w=$(kv "$T/em-$n.out" written)
	check "retention $n: kept events <= emitted" 1 "$([ "$kev" -le "$w" ] && echo 1 || echo 0)"
done
check "retention: integrity_check" ok "$(sql "$RDB" 'PRAGMA integrity_check')"
stop_daemon
check "retention: no error lines" 0 "$(cat "$T"/r1.log "$T"/r2.log | grep -c 'level=error')"

print_table
say "done"
[ "$FAILED" = 0 ]
