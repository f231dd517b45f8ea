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
GENTRACED=$top_builddir/daemon/gentraced
DEMO=$top_builddir/examples/gentrace-demo
GENTRACE=$top_builddir/tools/gentrace

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

T=$(mktemp -d "${TMPDIR:-/tmp}/gt-browser-XXXXXX")
ART=$top_builddir/tests/browser/artifacts
mkdir -p "$ART"
rm -f "$ART"/*.png "$ART"/*.gentrace
PIDS=""
cleanup() {
	# The browser first (its PIDs, written by dashboard.mjs; Playwright
	# starts it in its own process group, so its group goes with it).
	if [ -s "$T/browser.pid" ]; then
		for p in $(cat "$T/browser.pid"); do
			kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
		done
	fi
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$T"/*.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
	done
	exit 1
}

TOKEN=tok-$$-$(date +%s)
"$GENTRACED" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --read-token "$TOKEN" --log "$T/d.log" >"$T/stderr.log" 2>&1 &
DPID=$!
PIDS="$PIDS $DPID"
i=0
while ! grep -q 'msg=listening ' "$T/d.log" 2>/dev/null; do
	kill -0 "$DPID" 2>/dev/null || fail "gentraced exited at start"
	i=$((i + 1))
	[ $i -lt 400 ] || fail "no listening line in 20 s"
	sleep 0.05
done
line=$(grep 'msg=listening ' "$T/d.log" | tail -n 1)
AGENT=$(echo "$line" | sed -n 's/.* agent=\([^ ]*\).*/\1/p')
HTTP=$(echo "$line" | sed -n 's/.* http=\([^ ]*\).*/\1/p')
[ -n "$AGENT" ] && [ -n "$HTTP" ] || fail "cannot parse: $line"

# Half-second generations so the timeline visibly grows during the test;
# a modest rate keeps the windows small and the machine free.
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=dashtest GENTRACE_PERIOD_MS=500 \
	"$DEMO" --duration 120 --threads 3 --rate 300 --quiet >"$T/demo.log" 2>&1 &
PIDS="$PIDS $!"

HTTP=$HTTP TOKEN=$TOKEN SERVICE=dashtest GENTRACE=$GENTRACE ARTIFACTS=$ART \
	PROFILE=$T/profile PIDFILE=$T/browser.pid CHROMIUM=$CHROMIUM \
	node "$HERE/dashboard.mjs" >"$T/node.log" 2>&1 &
NPID=$!
PIDS="$PIDS $NPID"
wait "$NPID"
st=$?
cat "$T/node.log"
[ $st -eq 0 ] || fail "dashboard.mjs exited with $st (screenshots in $ART)"
echo "ok: screenshots in $ART"
