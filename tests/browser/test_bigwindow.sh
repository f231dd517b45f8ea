#!/bin/sh
# A window of a few hundred MB of Chrome JSON in the dashboard's viewer, in
# headless Chromium (playwright-core) against a real gentraced fed by the
# real demo service at a high rate: the overview paints quickly, zooming in
# loads the generations in view, the JS heap stays bounded, tooltips go away
# and the page has one scroll bar (bigwindow.mjs has the steps). Skips (77)
# like test_dashboard.sh. BIG_SECONDS (default 35) sets how long the demo
# runs; every process started is stopped by PID; the screenshot and the
# figures (bigwindow.txt) stay in $top_builddir/tests/browser/artifacts/.
: "${top_srcdir:=.}"
. "$top_srcdir/tests/browser/lib.sh"
rm -f "$ART"/bigwindow*
start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --read-token "$TOKEN"

# Two demo processes of one service (a service window, two sessions), as
# many events as they make in BIG_SECONDS (about 80k/s each per free core), about 70
# bytes of Chrome JSON per event (14x the native size).
SECS=${BIG_SECONDS:-35}
FROM=$(($(date +%s) - 1))
for i in 1 2; do
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=bigwin GENTRACE_FLUSH_MS=60000 \
		"$DEMO" --duration "$SECS" --threads 16 --rate 100000 --quiet >"$T/demo$i.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "DEMO$i=\$!"
done
wait "$DEMO1" || fail "demo 1 exited with $?"
wait "$DEMO2" || fail "demo 2 exited with $?"
# GENTRACE_FLUSH_MS: each exited once its last generation was ACKed
# (stored), so the window below is whole on a loaded machine too.
TO=$(($(date +%s) + 1))

# The size of the window as one Chrome JSON document: what the viewer used
# to refuse above 64 MB.
JSON_BYTES=$(curl -sf -H "Authorization: Bearer $TOKEN" \
	"http://$HTTP/v1/trace?service=bigwin&from=${FROM}s&to=${TO}s&format=chrome" | wc -c)
echo "window: service bigwin, 2 sessions, ${SECS}s, $JSON_BYTES bytes of Chrome JSON"
[ "$JSON_BYTES" -gt 64000000 ] || fail "window is only $JSON_BYTES bytes: not a big window"

HTTP=$HTTP TOKEN=$TOKEN SERVICE=bigwin FROM_NS=${FROM}000000000 TO_NS=${TO}000000000 \
	JSON_BYTES=$JSON_BYTES ARTIFACTS=$ART PROFILE=$T/profile PIDFILE=$T/browser.pid \
	CHROMIUM=$CHROMIUM node "$HERE/bigwindow.mjs" >"$T/node.log" 2>&1 &
NPID=$!
PIDS="$PIDS $NPID"
wait "$NPID"
st=$?
cat "$T/node.log"
[ $st -eq 0 ] || fail "bigwindow.mjs exited with $st (screenshots in $ART)"
echo "ok: screenshot in $ART"
