#!/bin/sh
# The dashboard's files as the daemon serves them (no browser needed): every
# file of web/dashboard/ is served byte for byte at /<name> with its
# Content-Type, an ETag that answers 304, and Cache-Control: no-cache; every
# module a script imports is served; assets need no token while the API
# still does. Stops the daemon it starts by PID.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
SRC=$top_srcdir/web/dashboard
# Daemon start, PID bookkeeping and fail(): the integration tests' helpers.
. "$top_srcdir/tests/integration/lib.sh"
command -v curl >/dev/null 2>&1 || { echo "SKIP: curl not installed"; exit 77; }
[ -x "$GENTRACED" ] || { echo "SKIP: $GENTRACED not built"; exit 77; }

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --read-token secret
H=http://$HTTP

# header FILE NAME: the value of header NAME in a curl -D dump.
header() {
	tr -d '\r' <"$1" | sed -n "s/^$2: //Ip" | tail -n 1
}

n=0
for f in "$SRC"/*; do
	name=${f##*/}
	code=$(curl -s -o "$T/body" -D "$T/h" -w '%{http_code}' "$H/$name")
	[ "$code" = 200 ] || fail "/$name: status $code"
	cmp -s "$f" "$T/body" || fail "/$name: served bytes differ from $f"
	ct=$(header "$T/h" Content-Type)
	case $name in
	*.html) want=text/html ;;
	*.js) want=text/javascript ;;
	*.css) want=text/css ;;
	*.svg) want=image/svg+xml ;;
	*) want=? ;;
	esac
	case $ct in "$want"*) ;; *) fail "/$name: Content-Type '$ct', want $want" ;; esac
	[ "$(header "$T/h" Cache-Control)" = no-cache ] || fail "/$name: Cache-Control"
	etag=$(header "$T/h" ETag)
	[ -n "$etag" ] || fail "/$name: no ETag"
	code=$(curl -s -o "$T/body2" -w '%{http_code}' -H "If-None-Match: $etag" "$H/$name")
	[ "$code" = 304 ] && [ ! -s "$T/body2" ] || fail "/$name: If-None-Match $etag gave $code"
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: \"x\", W/$etag" "$H/$name")
	[ "$code" = 304 ] || fail "/$name: weak ETag in a list gave $code"
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'If-None-Match: "0000"' "$H/$name")
	[ "$code" = 200 ] || fail "/$name: a stale ETag gave $code"
	# Every module a script imports must be served too (a file left out
	# of DASHBOARD_FILES would fail above; a typo in an import here).
	if [ "${name%.js}" != "$name" ]; then
		for dep in $(sed -n "s/.*from '\.\/\([A-Za-z0-9_.-]*\)'.*/\1/p" "$f"); do
			[ -f "$SRC/$dep" ] || fail "/$name imports ./$dep, which does not exist"
		done
	fi
	n=$((n + 1))
done
[ $n -ge 5 ] || fail "only $n files in $SRC"

# / is index.html; it names the API for browsers without JavaScript.
curl -s -D "$T/h" -o "$T/index" "$H/" || fail "GET /"
cmp -s "$SRC/index.html" "$T/index" || fail "/ is not index.html"
header "$T/h" Content-Security-Policy | grep -q "default-src 'self'" || fail "no CSP on /"
grep -q 'src="/app.js"' "$T/index" || fail "index.html does not load /app.js"
code=$(curl -s -o "$T/headbody" -w '%{http_code}' -I "$H/app.js")
[ "$code" = 200 ] || fail "HEAD /app.js: $code"
# Assets need no token; the API still does; unknown files are JSON 404s.
code=$(curl -s -o /dev/null -w '%{http_code}' "$H/v1/agents")
[ "$code" = 401 ] || fail "/v1/agents without token: $code"
code=$(curl -s -o "$T/nf" -w '%{http_code}' "$H/nope.js?token=secret")
[ "$code" = 404 ] && grep -q '"error":"not_found"' "$T/nf" || fail "/nope.js: $code"
echo "ok: $n assets"
