#!/bin/sh
# The dashboard in headless Chromium (playwright-core) against a real
# gentraced with a read token, fed by the real demo service: the fleet lists
# the service, the session timeline grows live, a dragged window draws lanes
# and regions, the download is a file `gentrace stat` accepts (dashboard.mjs
# has the steps). Skips (77) without /usr/bin/chromium, node or
# tests/browser/node_modules (`npm ci` in tests/browser). Every process it
# starts is stopped by PID on exit; screenshots stay in
# $top_builddir/tests/browser/artifacts/.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
HERE=$top_srcdir/tests/browser
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
# Daemon start, PID bookkeeping and fail(): the integration tests' helpers.
. "$top_srcdir/tests/integration/lib.sh"

skip() {
	echo "SKIP: $*"
	exit 77
}
[ -x "$CHROMIUM" ] || skip "$CHROMIUM not installed (apt-get install chromium)"
command -v node >/dev/null 2>&1 || skip "node not installed"
# playwright-core (package-lock.json) needs Node.js 20 or later.
[ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 20 ] ||
	skip "node $(node --version) is older than 20 (playwright-core needs 20)"
[ -d "$HERE/node_modules/playwright-core" ] ||
	skip "no $HERE/node_modules (run: npm ci --prefix $HERE)"
for b in "$GENTRACED" "$DEMO" "$GENTRACE"; do
	[ -x "$b" ] || skip "$b not built"
done

ART=$top_builddir/tests/browser/artifacts
mkdir -p "$ART"
rm -f "$ART"/*.png "$ART"/*.gentrace
before_cleanup() {
	# The browser first (its PIDs, written by dashboard.mjs; Playwright
	# starts it in its own process group, so its group goes with it).
	if [ -s "$T/browser.pid" ]; then
		for p in $(cat "$T/browser.pid"); do
			kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
		done
	fi
}

TOKEN=tok-$$-$(date +%s)
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
# the flame view's stack tree.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=dashtest GENTRACE_PERIOD_MS=500 GENTRACE_STACKS=1 \
	"$DEMO" --duration 120 --threads 3 --rate 300 --quiet >"$T/demo.log" 2>&1 &
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
