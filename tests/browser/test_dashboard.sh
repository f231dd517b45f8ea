#!/bin/sh
# The dashboard in headless Chromium (playwright-core) against a real
# gentraced with a read token, fed by the real demo service: the fleet lists
# the service, the session timeline grows live, a dragged window draws lanes
# and regions, the download is a file `gentrace stat` accepts (dashboard.mjs
# has the steps). Skips (77) without /usr/bin/chromium, node or
# tests/browser/node_modules (`npm ci` in tests/browser). Every process it
# starts is stopped by PID on exit; screenshots stay in
# $top_builddir/tests/browser/artifacts/.
: "${top_srcdir:=.}"
. "$top_srcdir/tests/browser/lib.sh"
[ -x "$GENTRACE" ] || skip "$GENTRACE not built"
rm -f "$ART"/*.png "$ART"/*.gentrace
# Retention pins need the admin token; a daemon without pins (its --help
# does not know the flag) runs without it and the page must say so.
ADMIN=""
PINFLAGS=""
if "$GENTRACED" --help 2>&1 | grep -q -- '--admin-token'; then
	ADMIN=adm-$$-$(date +%s)
	PINFLAGS="--admin-token $ADMIN"
fi
# shellcheck disable=SC2086 # PINFLAGS is two words or none
start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --read-token "$TOKEN" $PINFLAGS

# A session that ended before the page opens: the fleet keeps it, greyed,
# with its time range, while its generations are retained.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=dashtest GENTRACE_PERIOD_MS=500 \
	"$DEMO" --duration 2 --threads 2 --rate 200 --quiet >"$T/demo0.log" 2>&1 ||
	fail "the short demo failed: $(cat "$T/demo0.log")"

# Half-second generations so the timeline visibly grows during the test;
# a modest rate keeps the windows small and the machine free. Stacks on, for
# the flame view's stack tree. It runs until stopped by PID at exit: the
# late steps open windows of the last 2 s, which must hold its generations
# however long a loaded machine takes to get there.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=dashtest GENTRACE_PERIOD_MS=500 GENTRACE_STACKS=1 \
	"$DEMO" --duration 3600 --threads 3 --rate 300 --quiet >"$T/demo.log" 2>&1 &
PIDS="$PIDS $!"

HTTP=$HTTP TOKEN=$TOKEN ADMIN=$ADMIN SERVICE=dashtest GENTRACE=$GENTRACE ARTIFACTS=$ART \
	PROFILE=$T/profile PIDFILE=$T/browser.pid CHROMIUM=$CHROMIUM \
	node "$HERE/dashboard.mjs" >"$T/node.log" 2>&1 &
NPID=$!
PIDS="$PIDS $NPID"
wait "$NPID"
st=$?
cat "$T/node.log"
[ $st -eq 0 ] || fail "dashboard.mjs exited with $st (screenshots in $ART)"
echo "ok: screenshots in $ART"
