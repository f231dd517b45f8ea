#!/bin/sh
# The dashboard and the feed over HTTPS in headless Chromium: gentraced
# serves both ports with a certificate from a throwaway CA (made here with
# certtool, tests/integration/tls_pki.sh), the demo streams over TLS, and
# Chromium trusts the CA the way a user's machine would: through the NSS
# database in its $HOME (certutil), not by ignoring certificate errors
# (https.mjs has the steps). Skips (77) without /usr/bin/chromium, node,
# tests/browser/node_modules, certtool or certutil (libnss3-tools). Every
# process it starts is stopped by PID on exit; screenshots go to
# $top_builddir/tests/browser/artifacts/https-*.png.
: "${top_srcdir:=.}"
. "$top_srcdir/tests/browser/lib.sh"
command -v certtool >/dev/null 2>&1 || skip "certtool not installed (gnutls-bin)"
command -v certutil >/dev/null 2>&1 || skip "certutil not installed (libnss3-tools)"
rm -f "$ART"/https-*.png

. "$top_srcdir/tests/integration/tls_pki.sh"

# The browser's own certificate store: an NSS database in a fresh $HOME,
# holding the test CA as a trusted issuer of server certificates ("C,,").
BHOME=$T/home
mkdir -p "$BHOME/.pki/nssdb"
certutil -d "sql:$BHOME/.pki/nssdb" -N --empty-password >"$T/certutil.log" 2>&1 ||
	fail "certutil -N: $(cat "$T/certutil.log")"
certutil -d "sql:$BHOME/.pki/nssdb" -A -t "C,," -n "gentrace test CA" \
	-i "$C/ca.pem" >>"$T/certutil.log" 2>&1 ||
	fail "certutil -A: $(cat "$T/certutil.log")"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --read-token "$TOKEN" \
	--tls-cert "$C/server.pem" --tls-key "$C/server.key"

# The same HTTPS port is refused to a client that does not trust the CA
# (curl without --cacert), and answers one that does.
if command -v curl >/dev/null 2>&1; then
	curl -sf -o /dev/null "https://$HTTP/healthz" 2>/dev/null &&
		fail "curl without the CA was answered"
	curl -sf --cacert "$C/ca.pem" -o /dev/null "https://$HTTP/healthz" ||
		fail "curl --cacert: no answer over HTTPS"
fi

GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=httpstest GENTRACE_PERIOD_MS=500 \
	GENTRACE_TLS_CA=$C/ca.pem \
	"$DEMO" --duration 120 --threads 2 --rate 200 --quiet >"$T/demo.log" 2>&1 &
PIDS="$PIDS $!"

HTTP=$HTTP TOKEN=$TOKEN SERVICE=httpstest ARTIFACTS=$ART BROWSER_HOME=$BHOME \
	PROFILE=$T/profile PIDFILE=$T/browser.pid CHROMIUM=$CHROMIUM \
	node "$HERE/https.mjs" >"$T/node.log" 2>&1 &
NPID=$!
PIDS="$PIDS $NPID"
wait "$NPID"
st=$?
cat "$T/node.log"
[ $st -eq 0 ] || fail "https.mjs exited with $st (screenshots in $ART)"
echo "ok: screenshots in $ART"
