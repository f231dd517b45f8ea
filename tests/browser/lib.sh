# tests/browser/lib.sh: what every headless-Chromium test needs before its
# own steps, sourced first by tests/browser/test_*.sh: it sources the integration tests' lib.sh (daemon start, PID bookkeeping,
# fail()), skips (77) without Chromium, Node.js 20+, playwright-core in
# tests/browser/node_modules, gentraced or the demo, makes
# $ART (screenshots and figures stay there) and stops the browser's process
# group on exit. $TOKEN is a fresh read token.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
HERE=$top_srcdir/tests/browser
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
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
for b in "$GENTRACED" "$DEMO"; do
	[ -x "$b" ] || skip "$b not built"
done

ART=$top_builddir/tests/browser/artifacts
mkdir -p "$ART"
before_cleanup() {
	# The browser first (its PIDs, written by the .mjs script; Playwright
	# starts it in its own process group, so its group goes with it).
	if [ -s "$T/browser.pid" ]; then
		for p in $(cat "$T/browser.pid"); do
			kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
		done
	fi
}

TOKEN=tok-$$-$(date +%s)
