#!/bin/sh
# HTTP conventions against a real gentraced (issue 13): a name that does not
# exist (service, host, session) is 404 with a JSON error naming it; a known
# service with no data in the window is 200 with a valid empty file;
# malformed values are 400 JSON.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 "$DEMO" "$GENTRACED" "$GENTRACE"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=itest GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 1 --threads 2 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"
sid=$(curl -sf "http://$HTTP/v1/agents?service=itest" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["agents"][0]["session"])') ||
	fail "no session listed"

# expect STATUS PATH [TEXT]: the status, a JSON error body when >= 400 whose
# message holds TEXT.
expect() {
	want=$1 path=$2 text=${3:-}
	got=$(curl -s -o "$T/body" -w '%{http_code}' "http://$HTTP$path")
	[ "$got" = "$want" ] || fail "$path: status $got, want $want: $(head -c 300 "$T/body")"
	if [ "$want" -ge 400 ]; then
		python3 - "$T/body" "$text" <<'PY' || fail "$path: not a JSON error naming '$text': $(head -c 300 "$T/body")"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d.get("error"), str) and isinstance(d.get("message"), str)
assert sys.argv[2] in d["message"], d
PY
	fi
}

expect 404 '/v1/trace?service=nosuch&last=1h' nosuch
expect 404 '/v1/trace?service=nosuch&last=1h&format=chrome' nosuch
expect 404 '/v1/trace?service=itest&host=nosuchhost&last=1h' nosuchhost
expect 404 '/v1/trace?session=0123456789abcdef0123456789abcdef&last=1h' \
	0123456789abcdef0123456789abcdef
expect 404 '/v1/agents/0123456789abcdef0123456789abcdef/generations' \
	0123456789abcdef0123456789abcdef
expect 404 '/v1/agents/0123456789abcdef0123456789abcdef/generations/1' \
	0123456789abcdef0123456789abcdef

# Known, but nothing in the window: 200 and a valid empty file.
old='from=2001-01-01T00:00:00Z&to=2001-01-01T00:01:00Z'
expect 200 "/v1/trace?service=itest&$old"
cp "$T/body" "$T/empty.gentrace"
"$GENTRACE" stat "$T/empty.gentrace" >"$T/stat.txt" 2>&1 ||
	fail "empty window is not a valid trace file: $(cat "$T/stat.txt")"
expect 200 "/v1/trace?session=$sid&$old"
expect 200 "/v1/trace?service=itest&$old&format=chrome"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body" ||
	fail "empty chrome window is not JSON"

# Known with data: 200 and generations.
expect 200 "/v1/trace?service=itest&last=1h"
"$GENTRACE" stat "$T/body" >"$T/stat.txt" 2>&1 || fail "window not valid"

# Malformed values: 400 JSON naming the parameter.
expect 400 '/v1/trace?service=itest&last=abc' last
expect 400 '/v1/trace?service=itest&from=yesterday' from
expect 400 '/v1/trace?service=itest&last=1h&format=bogus' format
expect 400 '/v1/trace?session=xyz&last=1h' session
expect 400 '/v1/feed?after=banana' after
# The demo's clean exit (GOODBYE, then EOF) is one log line, not two.
n=$(grep -c 'msg="agent disconnected"' "$T/d.log")
[ "$n" = 1 ] || fail "clean disconnect logged $n times"
stop_daemon
echo "ok: 404 for unknown names, 200 empty for empty windows, 400 for bad values"
