#!/bin/sh
# format=perfetto over HTTP against a real gentraced (issue 13): Perfetto's
# protobuf trace, checked by an independent decoder (perfetto_decode.py)
# against the native window's own event counts (gentrace dump); the same
# bytes as `gentrace convert --to perfetto` of that window; compressible;
# readable cross-origin by the Perfetto UI when --cors-origin allows it.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 cmp zstd "$DEMO" "$GENTRACED" "$GENTRACE"
DEC="python3 $top_srcdir/tests/integration/perfetto_decode.py"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db" --cors-origin https://ui.perfetto.dev
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=itest GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 1 --threads 3 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"
W="from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z"
U="http://$HTTP/v1/trace?service=itest&$W"

curl -sf -o "$T/w.gentrace" "$U" || fail "native download"
curl -sf -D "$T/p.h" -o "$T/w.pftrace" -H 'Origin: https://ui.perfetto.dev' \
	"$U&format=perfetto" || fail "perfetto download"
grep -qi '^Access-Control-Allow-Origin: https://ui.perfetto.dev' "$T/p.h" ||
	fail "no CORS grant for the Perfetto UI: $(cat "$T/p.h")"
grep -qi 'filename=".*\.pftrace"' "$T/p.h" || fail "file name: $(cat "$T/p.h")"

$DEC "$T/w.pftrace" >"$T/counts.json" || fail "decoder refused the trace"
"$GENTRACE" dump "$T/w.gentrace" >"$T/dump.txt" || fail "dump"
python3 - "$T/counts.json" "$T/dump.txt" <<'PY' || fail "counts differ: $(cat "$T/counts.json")"
import json, sys
c = json.load(open(sys.argv[1]))
kinds = {}
for line in open(sys.argv[2]):
    k = line.split("\t")[3]
    kinds[k] = kinds.get(k, 0) + 1
begins = kinds.get("region_begin", 0) + kinds.get("region_begin_stack", 0)
assert begins > 0, kinds
assert c["slice_begin"] == begins, (c, kinds)
assert c["counter"] == kinds.get("counter", 0), (c, kinds)
inst = sum(kinds.get(k, 0) for k in ("instant", "instant_stack", "log",
                                      "log_stack", "task_begin", "task_end", "lost"))
assert c["instant"] >= inst, (c, kinds)
assert len(c["processes"]) == 1 and c["processes"][0].startswith("itest ("), c
assert c["threads"] >= 3, c
PY

# The CLI's writer gives the same bytes from the native window.
"$GENTRACE" convert --to perfetto -o "$T/cli.pftrace" "$T/w.gentrace" ||
	fail "gentrace convert --to perfetto"
cmp -s "$T/cli.pftrace" "$T/w.pftrace" || fail "CLI and HTTP perfetto differ"

# Compressed, and an empty window is a valid (empty) trace.
curl -sf -H 'Accept-Encoding: zstd' "$U&format=perfetto" | zstd -q -d -c >"$T/z.pftrace" ||
	fail "zstd perfetto"
cmp -s "$T/z.pftrace" "$T/w.pftrace" || fail "zstd perfetto differs"
curl -sf -o "$T/e.pftrace" \
	"http://$HTTP/v1/trace?service=itest&from=2001-01-01T00:00:00Z&to=2001-01-02T00:00:00Z&format=perfetto" ||
	fail "empty perfetto window"
[ ! -s "$T/e.pftrace" ] || fail "empty window is not an empty trace"
stop_daemon
echo "ok: perfetto $(cat "$T/counts.json")"
