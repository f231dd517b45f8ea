#!/bin/sh
# Symbolized stacks end to end (docs/SYMBOLS.md): stackprog, built with -g
# and a GNU build id, records stacks through libgentrace into a real
# gentraced; its frames must come out as "FUNC (FILE:LINE)" with the line
# of each call (the CALL: markers of stackprog.c) in the HTTP Chrome and
# Perfetto exports (Perfetto checked by the independent decoder) and in
# `gentrace stat`; symbols=no keeps hex pcs. Then the ways a module cannot
# be read: a stripped binary named through a --symbols build-id tree (and
# not without it), a file whose build id no longer matches, a deleted file,
# host files switched off or outside --symbols-from-host's directories:
# module+offset every time, and the refusal counted in /metrics.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 objcopy strip "$GENTRACED" "$GENTRACE"
PROG=$top_builddir/tests/integration/stackprog
OTHER=$top_builddir/tests/integration/stackprog_other
SRC=$top_srcdir/tests/integration/stackprog.c
CHECK="python3 $top_srcdir/tests/integration/symbols_check.py"
DEC="python3 $top_srcdir/tests/integration/perfetto_decode.py"
W="from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z"
N=7

# run SERVICE BINARY: records N stacks of each kind into the daemon at $AGENT.
run() {
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=$1 GENTRACE_STACKS=1 \
		GENTRACE_PERIOD_MS=100 "$2" $N >>"$T/prog.log" 2>&1 ||
		fail "$2 failed"
}
# export SERVICE FORMAT OUT [QUERY]: one window download.
export_() {
	curl -sf -o "$3" "http://$HTTP/v1/trace?service=$1&$W&format=$2${4:-}" ||
		fail "download $1 $2"
}
metric() {
	curl -sf "http://$HTTP/metrics" | sed -n "s/^gentrace_symbols_$1 //p"
}

# 1. Host files (the default): the binary that ran is read, by build id.
start_daemon "$T/d1.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/d1.db"
run sym "$PROG"
export_ sym chrome "$T/c.json"
$CHECK chrome "$T/c.json" "$SRC" named || fail "Chrome frames"
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["metadata"]["gentrace_frames"]
assert m["symbolized"] >= 6 * int(sys.argv[2]), m' "$T/c.json" $N ||
	fail "frame summary: $(tail -c 300 "$T/c.json")"
export_ sym perfetto "$T/p.pftrace"
$DEC "$T/p.pftrace" >"$T/p.json" || fail "decoder refused the trace"
$CHECK perfetto "$T/p.json" "$SRC" named || fail "Perfetto frames"
export_ sym chrome "$T/hex.json" "&symbols=no"
$CHECK chrome "$T/hex.json" "$SRC" hex || fail "symbols=no"
curl -s "http://$HTTP/v1/trace?service=sym&$W&format=chrome&symbols=maybe" |
	grep -q '"symbols: expected yes or no"' || fail "bad symbols= not refused"
# The CLI names the same frames from the native window, and counts them.
export_ sym gentrace "$T/w.gentrace"
"$GENTRACE" stat --json "$T/w.gentrace" >"$T/stat.json" || fail "stat"
$CHECK stat "$T/stat.json" "$SRC" named || fail "stat frames"
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stacks"]
assert s["events"] == 2 * int(sys.argv[2]) and s["distinct"] == 2, s
assert [r["events"] for r in s["top"]] == [int(sys.argv[2])] * 2, s' \
	"$T/stat.json" $N || fail "stat counts: $(cat "$T/stat.json")"
"$GENTRACE" stat "$T/w.gentrace" | grep -q "^top stacks  events_with_stack=$((2 * N)) " ||
	fail "stat text has no top stacks"
"$GENTRACE" convert --to chrome -o "$T/cli.json" "$T/w.gentrace" || fail "convert"
$CHECK chrome "$T/cli.json" "$SRC" named || fail "convert frames"
"$GENTRACE" stat --symbols-from-host no --json "$T/w.gentrace" >"$T/stat2.json" ||
	fail "stat --symbols-from-host no"
$CHECK stat "$T/stat2.json" "$SRC" module || fail "stat without host files"
"$GENTRACE" stat --symbols-from-host perhaps "$T/w.gentrace" 2>"$T/e.txt" &&
	fail "a bad --symbols-from-host was accepted"
grep -q "symbols-from-host" "$T/e.txt" || fail "message: $(cat "$T/e.txt")"

stop_daemon

# 2. A file that changed since (another build id) and a deleted file: the
# module is known, its file is not that module any more. (A daemon of its
# own: the first one has this build id cached, rightly, from step 1.)
start_daemon "$T/d1b.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/d1b.db"
mkdir -p "$T/bin"
cp "$PROG" "$T/bin/stackprog"
run changed "$T/bin/stackprog"
cp "$OTHER" "$T/bin/stackprog"
export_ changed chrome "$T/changed.json"
$CHECK chrome "$T/changed.json" "$SRC" module || fail "changed binary"
[ "$(metric mismatch_total)" -ge 1 ] || fail "no mismatch counted"
cp "$PROG" "$T/bin/gone"
mv "$T/bin/gone" "$T/bin/stackprog_gone" # a name of its own, then removed
cp "$PROG" "$T/bin/stackprog"
run gone "$T/bin/stackprog_gone"
rm "$T/bin/stackprog_gone"
export_ gone chrome "$T/gone.json"
python3 -c '
import json, re, sys
for ev in json.load(open(sys.argv[1]))["traceEvents"]:
    for f in ev.get("args", {}).get("stack", [])[:2]:
        assert re.fullmatch(r"stackprog_gone\+0x[0-9a-f]+", f), f' \
	"$T/gone.json" || fail "deleted binary: $(head -c 600 "$T/gone.json")"
stop_daemon

# 3. A stripped binary: nothing to read on the host; the --symbols tree in
# build-id layout has its debug file (and the plain binary).
cp "$PROG" "$T/bin/stackprog_stripped"
bid=$(python3 - "$PROG" <<'PY'
import struct, sys
# The GNU build id from the ELF notes (readelf may be missing).
d = open(sys.argv[1], "rb").read()
i = d.find(b"GNU\0", 0)
while i >= 0:
    namesz, descsz, typ = struct.unpack_from("<III", d, i - 12)
    if namesz == 4 and typ == 3:
        print(d[i + 4:i + 4 + descsz].hex())
        break
    i = d.find(b"GNU\0", i + 1)
PY
)
[ -n "$bid" ] || fail "no build id in $PROG"
tree=$T/sym/.build-id/$(echo "$bid" | cut -c1-2)
mkdir -p "$tree"
rest=$(echo "$bid" | cut -c3-)
objcopy --only-keep-debug "$T/bin/stackprog_stripped" "$tree/$rest.debug"
strip --strip-all "$T/bin/stackprog_stripped"
cp "$T/bin/stackprog_stripped" "$tree/$rest"
start_daemon "$T/d2.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/d2.db" --symbols "$T/sym" --symbols-from-host no
run stripped "$T/bin/stackprog_stripped"
run plain "$OTHER" # another build id: not in the tree
export_ stripped chrome "$T/s.json"
$CHECK chrome "$T/s.json" "$SRC" named || fail "stripped binary via --symbols"
# Host files off: an unstripped binary not in the tree stays unnamed.
export_ plain chrome "$T/plain.json"
$CHECK chrome "$T/plain.json" "$SRC" module || fail "--symbols-from-host no"
export_ stripped gentrace "$T/s.gentrace"
stop_daemon
"$GENTRACE" stat --symbols "$T/sym" --symbols-from-host no --json \
	"$T/s.gentrace" >"$T/s.stat" || fail "stat --symbols"
$CHECK stat "$T/s.stat" "$SRC" named || fail "stat --symbols frames"
"$GENTRACE" stat --symbols-from-host no --json "$T/s.gentrace" >"$T/s2.stat" ||
	fail "stat without the tree"
$CHECK stat "$T/s2.stat" "$SRC" module || fail "stripped without the tree"

# 4. Host files only under given directories: the binary outside them is
# refused (and counted), the one inside is read.
mkdir -p "$T/allowed"
cp "$PROG" "$T/allowed/stackprog"
start_daemon "$T/d3.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/d3.db" --symbols-from-host "$T/allowed"
run outside "$T/bin/stackprog"
run inside "$T/allowed/stackprog"
export_ outside chrome "$T/out.json"
$CHECK chrome "$T/out.json" "$SRC" module || fail "file outside the roots"
[ "$(metric refused_total)" -ge 1 ] || fail "no refusal counted"
export_ inside chrome "$T/in.json"
$CHECK chrome "$T/in.json" "$SRC" named || fail "file inside the roots"
stop_daemon
if "$GENTRACED" --symbols-from-host sometimes --db "$T/x.db" \
	--agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 >"$T/bad.log" 2>&1; then
	fail "gentraced accepted a bad --symbols-from-host"
fi
grep -q "symbols-from-host" "$T/bad.log" || fail "message: $(cat "$T/bad.log")"
echo "ok: stacks named in Chrome, Perfetto and stat; tree, mismatch, missing, roots"
