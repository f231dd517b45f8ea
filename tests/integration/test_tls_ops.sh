#!/bin/sh
# TLS operations (issue 15): SIGHUP reloads the certificate on both ports
# while a live mTLS agent keeps its connection and loses nothing; an expired
# client certificate is refused (the agent counts it and keeps spooling); a
# key that does not match the certificate stops the daemon with a clear
# error; kill -9 of the daemon and a restart over TLS stays exact.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless certtool curl sqlite3 python3 "$DEMO" "$GENTRACED" "$GENTRACE"
. "$top_srcdir/tests/integration/tls_pki.sh"

# A key that is not the certificate's: a clear error at start.
"$GENTRACED" --db "$T/x.db" --agent-listen 127.0.0.1:0 \
	--http-listen 127.0.0.1:0 --tls-cert "$C/server.pem" \
	--tls-key "$C/server2.key" >"$T/wrongkey.out" 2>&1 &
WPID=$!
PIDS="$PIDS $WPID"
wait "$WPID" && fail "a key of another certificate was accepted"
grep -q -- "--tls-key" "$T/wrongkey.out" || fail "no clear error: $(cat "$T/wrongkey.out")"

cp "$C/server.pem" "$C/live.pem"
cp "$C/server.key" "$C/live.key"
start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --tls-cert "$C/live.pem" --tls-key "$C/live.key" \
	--tls-client-ca "$C/ca.pem" --handshake-timeout 2s
APORT=${AGENT##*:}
HPORT=${HTTP##*:}

peer_cn() { # port [client cert]: the CN of the certificate the port serves
	python3 - "$1" "$C/ca.pem" "$C/agenta.pem" "$C/agenta.key" <<'PY'
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20) as s:
    with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
        print(dict(x[0] for x in t.getpeercert()["subject"])["commonName"])
PY
}
[ "$(peer_cn "$APORT")" = gentraced ] || fail "agent port CN before reload"
[ "$(peer_cn "$HPORT")" = gentraced ] || fail "HTTP port CN before reload"

GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=svc-a GENTRACE_PERIOD_MS=200 \
	GENTRACE_TLS_CA=$C/ca.pem GENTRACE_TLS_CERT=$C/agenta.pem \
	GENTRACE_TLS_KEY=$C/agenta.key \
	"$DEMO" --duration 4 --threads 2 >"$T/a.out" 2>&1 &
APID=$!
PIDS="$PIDS $APID"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=svc-a GENTRACE_TLS_CA=$C/ca.pem \
	GENTRACE_TLS_CERT=$C/expired.pem GENTRACE_TLS_KEY=$C/expired.key \
	"$DEMO" --duration 2 --threads 1 >"$T/exp.out" 2>&1 &
EPID=$!
PIDS="$PIDS $EPID"
i=0
until grep -q 'msg="agent connected".*service=svc-a' "$T/d.log"; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "agent A did not connect"
	sleep 0.05
done
sleep 1
cp "$C/server2.pem" "$C/live.pem"
cp "$C/server2.key" "$C/live.key"
kill -HUP "$DPID"
i=0
until [ "$(grep -c 'msg="TLS credentials reloaded"' "$T/d.log")" -ge 2 ]; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "no reload on SIGHUP"
	sleep 0.05
done
[ "$(peer_cn "$APORT")" = gentraced-2 ] || fail "agent port CN after reload"
[ "$(peer_cn "$HPORT")" = gentraced-2 ] || fail "HTTP port CN after reload"
# The expiry follows the reload: server.pem (2 days) was warned about at
# start, server2.pem (30 days) shows in /metrics and is not warned about.
left=$(curl -sf --cacert "$C/ca.pem" "https://127.0.0.1:$HPORT/metrics" |
	sed -n 's/^gentrace_tls_cert_expiry_seconds //p')
[ "${left:-0}" -gt $((29 * 86400)) ] || fail "expiry after reload: $left s"
[ "$(grep -c 'msg="TLS certificate expires within a week"' "$T/d.log")" = 1 ] ||
	fail "expiry warnings: $(grep 'expires within' "$T/d.log")"
wait "$APID" || fail "agent A"
wait "$EPID" || fail "expired agent"

[ "$(grep -c 'msg="agent connected".*service=svc-a' "$T/d.log")" = 1 ] ||
	fail "agent A reconnected: the reload dropped its connection"
val() { echo "$2" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
final=$(grep '^final ' "$T/a.out") || fail "no final stats from agent A"
[ "$(val delivered "$final")" = "$(val events "$final")" ] || fail "A: $final"
exp=$(grep '^final ' "$T/exp.out") || fail "no final stats (expired)"
[ "$(val tls_failures "$exp")" -gt 0 ] || fail "expired cert not counted: $exp"
[ "$(val delivered "$exp")" = 0 ] || fail "expired cert delivered: $exp"
grep -q 'reason="client certificate".*expired' "$T/d.log" ||
	fail "expired certificate not logged"

# kill -9 mid-stream, restart on the same port over TLS: exact.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=svc-a GENTRACE_PERIOD_MS=200 \
	GENTRACE_TLS_CA=$C/ca.pem GENTRACE_TLS_CERT=$C/agenta.pem \
	GENTRACE_TLS_KEY=$C/agenta.key \
	"$DEMO" --duration 4 --threads 2 >"$T/k.out" 2>&1 &
KPID=$!
PIDS="$PIDS $KPID"
K="g.session_id = (SELECT max(id) FROM sessions WHERE service = 'svc-a' AND pid = $KPID)"
i=0
while :; do
	n=$(sqlite3 "file:$T/g.db?mode=ro" "SELECT count(*) FROM generations g WHERE $K" 2>/dev/null || echo 0)
	[ "${n:-0}" -ge 3 ] && break
	i=$((i + 1))
	[ $i -lt 200 ] || fail "no kill9 generations stored"
	sleep 0.05
done
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null
start_daemon "$T/d2.log" --agent-listen "$AGENT" --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --tls-cert "$C/live.pem" --tls-key "$C/live.key" \
	--tls-client-ca "$C/ca.pem"
wait "$KPID" || fail "kill9 agent"
[ "$(sqlite3 "$T/g.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity"
read -r stored gaps dups <<EOF2
$(sqlite3 -separator ' ' "file:$T/g.db?mode=ro" "SELECT sum(g.events), max(g.gen) - min(g.gen) + 1 - count(*), count(*) - count(DISTINCT g.gen) FROM generations g WHERE $K")
EOF2
[ "$gaps" = 0 ] && [ "$dups" = 0 ] || fail "kill9: gaps=$gaps dups=$dups"
final=$(grep '^final ' "$T/k.out") || fail "no final stats (kill9)"
written=$(val events "$final")
[ "$(val delivered "$final")" = "$written" ] || fail "kill9 agent: $final"
SK=$(sqlite3 "file:$T/g.db?mode=ro" "SELECT session FROM sessions WHERE service = 'svc-a' AND pid = $KPID")
curl -sf --cacert "$C/ca.pem" -o "$T/k.gtr" \
	"https://127.0.0.1:${HTTP##*:}/v1/trace?session=$SK" || fail "HTTPS download"
"$GENTRACE" dump "$T/k.gtr" >"$T/k.dump" || fail "dump"
names=$(awk -F '\t' '$4 == "thread_name"' "$T/k.dump" | wc -l)
threads=$(awk -F '\t' '$4 == "thread_name" { print $3 "/" $5 }' "$T/k.dump" | sort -u | wc -l)
[ $((stored - names + threads)) = "$written" ] ||
	fail "kill9: stored $stored ($names names of $threads threads), written $written"
stop_daemon
echo "ok: reload kept the live agent, expired cert refused, kill -9 exact ($written events)"
