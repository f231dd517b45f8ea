#!/bin/sh
# kill -9 of the daemon while the real agent streams; a restart on the same
# database and port: the agent resends what was not ACKed, nothing is lost
# or stored twice, and the database passes integrity_check.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless sqlite3 "$DEMO" "$GENTRACED"

start_daemon "$T/d1.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=kill9 GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 4 --threads 2 --quiet >"$T/demo.log" 2>&1 &
APID=$!
PIDS="$PIDS $APID"

# Wait for a few committed generations, then kill -9.
i=0
while :; do
	n=$(sqlite3 "file:$T/g.db?mode=ro" "SELECT count(*) FROM generations" 2>/dev/null || echo 0)
	[ "${n:-0}" -ge 3 ] && break
	i=$((i + 1))
	[ $i -lt 200 ] || fail "no generations stored"
	sleep 0.05
done
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null

[ "$(sqlite3 "$T/g.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity"

# Same agent port so the agent reconnects to it.
start_daemon "$T/d2.log" --agent-listen "$AGENT" --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
wait "$APID" || fail "demo failed"

[ "$(sqlite3 "$T/g.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity"
read -r total gaps dups <<EOF2
$(sqlite3 -separator ' ' "file:$T/g.db?mode=ro" "SELECT count(*), max(gen) - min(gen) + 1 - count(*), count(*) - count(DISTINCT gen) FROM generations")
EOF2
[ "$gaps" = 0 ] || fail "$gaps generations missing of $total"
[ "$dups" = 0 ] || fail "$dups stored twice"
[ "$total" -ge 10 ] || fail "only $total generations in 4 s at 200 ms"
stop_daemon
echo "ok: $total generations, none missing, none twice"
