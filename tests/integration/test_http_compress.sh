#!/bin/sh
# Compressed downloads against a real gentraced (issue 13): Accept-Encoding
# zstd or gzip gives Content-Encoding; curl --compressed and the zstd/gzip
# tools decode them to exactly the plain answer, native and Chrome JSON; a
# native zstd answer is the stored frames passed through (smaller than the
# trace); q=0 refuses a coding.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl zstd gzip cmp "$DEMO" "$GENTRACED" "$GENTRACE"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=itest GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 2 --threads 3 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"
U="http://$HTTP/v1/trace?service=itest&last=1h"

# get NAME URL [curl args]: body to $T/NAME, headers to $T/NAME.h
get() {
	name=$1 url=$2
	shift 2
	curl -sf -D "$T/$name.h" -o "$T/$name" "$@" "$url" || fail "$name: curl failed"
}
enc_of() { sed -n 's/^[Cc]ontent-[Ee]ncoding: *\([a-z]*\).*/\1/p' "$T/$1.h"; }

for fmt in gentrace chrome; do
	get plain "$U&format=$fmt"
	[ -z "$(enc_of plain)" ] || fail "$fmt: encoded without Accept-Encoding"
	grep -qi '^Vary: Accept-Encoding' "$T/plain.h" || fail "$fmt: no Vary"
	[ "$(wc -c <"$T/plain")" -gt 1000 ] || fail "$fmt: tiny window"

	get cc "$U&format=$fmt" --compressed
	[ -n "$(enc_of cc)" ] || fail "$fmt: --compressed got no Content-Encoding"
	cmp -s "$T/plain" "$T/cc" || fail "$fmt: curl --compressed differs"

	get z "$U&format=$fmt" -H 'Accept-Encoding: zstd'
	[ "$(enc_of z)" = zstd ] || fail "$fmt: want zstd, got '$(enc_of z)'"
	zstd -q -d -c "$T/z" >"$T/z.out" || fail "$fmt: zstd -d failed"
	cmp -s "$T/plain" "$T/z.out" || fail "$fmt: zstd round trip differs"

	get g "$U&format=$fmt" -H 'Accept-Encoding: gzip'
	[ "$(enc_of g)" = gzip ] || fail "$fmt: want gzip, got '$(enc_of g)'"
	gzip -d -c "$T/g" >"$T/g.out" || fail "$fmt: gzip -d failed"
	cmp -s "$T/plain" "$T/g.out" || fail "$fmt: gzip round trip differs"

	get q "$U&format=$fmt" -H 'Accept-Encoding: zstd;q=0, gzip;q=0.5'
	[ "$(enc_of q)" = gzip ] || fail "$fmt: zstd;q=0 not honoured: '$(enc_of q)'"
	get id "$U&format=$fmt" -H 'Accept-Encoding: identity'
	[ -z "$(enc_of id)" ] || fail "$fmt: identity got encoded"
	echo "$fmt: plain $(wc -c <"$T/plain") zstd $(wc -c <"$T/z") gzip $(wc -c <"$T/g")"
done

# The decoded native file is a valid trace.
"$GENTRACE" stat "$T/z.out" >/dev/null 2>&1 || true
get zn "$U" -H 'Accept-Encoding: zstd'
zstd -q -d -c "$T/zn" >"$T/zn.trace" && "$GENTRACE" stat "$T/zn.trace" >"$T/stat" 2>&1 ||
	fail "decoded zstd download is not a valid trace: $(cat "$T/stat")"
# Stored frames pass through: several frames (one per generation + header).
python3 - "$T/zn" <<'PY' || fail "native zstd answer is not a sequence of frames"
import sys
b = open(sys.argv[1], "rb").read()
n = b.count(b"\x28\xb5\x2f\xfd")
assert n >= 3, n
PY
# An empty window compresses to a valid empty file too.
get ez "http://$HTTP/v1/trace?service=itest&from=2001-01-01T00:00:00Z&to=2001-01-01T00:01:00Z" \
	-H 'Accept-Encoding: zstd'
[ "$(zstd -q -d -c "$T/ez" | wc -c)" = 16 ] || fail "empty zstd window is not the 16-byte header"
stop_daemon
echo "ok: compressed downloads round trip"
