#!/bin/sh
# gentrace import, end to end: Go programs (tests/goreader/gen) write traces with
# Go 1.26 and 1.22 (generations) and Go 1.19 and 1.21 (the old format; 1.21
# and 1.22 when the go command can fetch them); the format of Go 1.11-1.18
# comes from a real 1.19 trace relabelled and from the test-only encoder
# tests/goreader/oldenc; each is imported into
# a real gentraced and fetched back over HTTP. The Chrome export of the
# stored session holds exactly the regions, tasks and logs the program
# recorded, and golang.org/x/exp/trace (tests/goreader/xtrace) reads the same
# counts from the original file. Damaged and unsupported files are refused
# with their version and offset, and store nothing.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 "$GENTRACED" "$GENTRACE"
GO=$(command -v go || echo /usr/local/go/bin/go)
GO119=/usr/lib/go-1.19/bin/go
[ -x "$GO" ] || { echo "SKIP: no go toolchain"; exit 77; }
COUNT="python3 $top_srcdir/tests/tools/chrome_go.py"

(cd "$top_srcdir/tests/goreader/xtrace" && GOTOOLCHAIN=local "$GO" build -o "$T/xtrace" .) ||
	fail "building tests/goreader/xtrace"
(cd "$top_srcdir/tests/goreader/gen" && GOTOOLCHAIN=local "$GO" build -o "$T/gen126" .) ||
	fail "building tests/goreader/gen"
(cd "$top_srcdir/tests/goreader/oldenc" && GOTOOLCHAIN=local "$GO" build -o "$T/oldenc" .) ||
	fail "building tests/goreader/oldenc"
versions=126
# Go 1.21 (the last old-format version, and 1.22 for the first new one)
# through the go command's toolchain download, when it can be had.
for tc in ${GENTRACE_GO_IMPORT_TOOLCHAINS-go1.21.13 go1.22.12}; do
	v=$(echo "$tc" | sed -n 's/^go1\.\([0-9]*\).*/1\1/p')
	if (cd "$top_srcdir/tests/goreader/gen" && GOTOOLCHAIN=$tc "$GO" build -o "$T/gen$v" . \
		>"$T/build$v.log" 2>&1); then
		versions="$versions $v"
	else
		echo "note: toolchain $tc not available: $(tail -n 1 "$T/build$v.log")"
	fi
done
if [ -x "$GO119" ]; then
	(cd "$top_srcdir/tests/goreader/gen" && GOTOOLCHAIN=local GOFLAGS=-mod=mod \
		"$GO119" build -o "$T/gen119" .) || fail "building tests/goreader/gen with Go 1.19"
	# Go 1.11-1.18 all wrote one format, headed "go 1.11 trace"; 1.19
	# only added CPU samples (none here: no CPU profile runs) and its own
	# header. So a real 1.19 trace relabelled "go 1.11" is a real
	# 1.11-1.18 format file (x/exp/trace refuses it if it holds a sample).
	versions="$versions 119 111r"
else
	echo "note: $GO119 missing (Debian golang-1.19-go, setup.sh installs it): old format not tested"
fi

# No runtime of Go 1.11-1.18 is available: tests/goreader/oldenc writes that
# format from its event table (checked by x/exp/trace below).
versions="$versions 111s"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"

for v in $versions; do
	case $v in
	111r)
		want=$want119
		printf 'go 1.11 trace\0\0\0' >"$T/go$v.trace"
		tail -c +17 "$T/go119.trace" >>"$T/go$v.trace"
		;;
	111s) want=$("$T/oldenc" -o "$T/go$v.trace" -n 300) || fail "oldenc" ;;
	*) want=$("$T/gen$v" -o "$T/go$v.trace" -duration 2200ms) || fail "gen$v" ;;
	esac
	[ "$v" = 119 ] && want119=$want
	x=$("$T/xtrace" "$T/go$v.trace") || fail "xtrace on go$v"
	[ "$x" = "$want" ] || fail "go$v: x/exp/trace read '$x', the program recorded '$want'"
	out=$("$GENTRACE" import --service "imp$v" --addr "$AGENT" "$T/go$v.trace") ||
		fail "import go$v: $out"
	echo "go$v: $out"
	case "$out" in
	*" $want") ;;
	*) fail "go$v: import decoded '$out', the program recorded '$want'" ;;
	esac
	curl -sf -o "$T/imp$v.json" \
		"http://$HTTP/v1/trace?service=imp$v&last=24h&format=chrome" ||
		fail "go$v: chrome download"
	got=$($COUNT "$T/imp$v.json") || fail "go$v: chrome export: $got"
	[ "$got" = "$want" ] || fail "go$v: Chrome export holds '$got', the program recorded '$want'"
	curl -sf -o "$T/imp$v.gtrace" "http://$HTTP/v1/trace?service=imp$v&last=24h" ||
		fail "go$v: native download"
	"$GENTRACE" convert -o "$T/conv$v.json" "$T/imp$v.gtrace" || fail "go$v: convert"
	got=$($COUNT "$T/conv$v.json") || fail "go$v: convert: $got"
	[ "$got" = "$want" ] || fail "go$v: gentrace convert holds '$got', recorded '$want'"
	# format=perfetto (protobuf), read by the independent decoder: every
	# region, GC and STW span of the Chrome export is a slice, and every log
	# and task begin and end an instant.
	curl -sf -o "$T/imp$v.pftrace" \
		"http://$HTTP/v1/trace?service=imp$v&last=24h&format=perfetto" ||
		fail "go$v: perfetto download"
	pf=$(python3 "$top_srcdir/tests/integration/perfetto_decode.py" "$T/imp$v.pftrace") ||
		fail "go$v: perfetto decode: $pf"
	python3 - "$T/imp$v.json" "$pf" <<'PY' || fail "go$v: perfetto and chrome disagree"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
pf = json.loads(sys.argv[2])
spans = sum(1 for e in ev if e.get("ph") == "B")
inst = sum(1 for e in ev if e.get("ph") in ("b", "e") or e.get("cat") == "log")
ok = pf["slice_begin"] == spans and pf["instant"] == inst
print("perfetto slices=%d instants=%d, chrome spans=%d logs+task edges=%d"
      % (pf["slice_begin"], pf["instant"], spans, inst))
sys.exit(0 if ok else 1)
PY
	"$GENTRACE" stat "$T/imp$v.gtrace" >"$T/stat$v.txt" || fail "go$v: stat"
	tasks=$(echo "$want" | sed -n 's/.*tasks=\([0-9]*\).*/\1/p')
	grep -Eq "^    task_begin +$tasks\$" "$T/stat$v.txt" ||
		fail "go$v: stat does not show $tasks task begins: $(cat "$T/stat$v.txt")"
	echo "go$v: recorded $want; x/exp/trace $x; stored and exported $got"
	# A 1.22+ import keeps the runtime's bytes: the format=go window is a
	# Go trace again, and x/exp/trace reads the same counts from it (when
	# this daemon has format=go; before that it names the formats it has).
	if [ "${v%%[!0-9]*}" -ge 122 ]; then
		code=$(curl -s -o "$T/imp$v.go" -w '%{http_code}' \
			"http://$HTTP/v1/trace?service=imp$v&last=24h&format=go")
		if [ "$code" = 200 ]; then
			back=$("$T/xtrace" "$T/imp$v.go") || fail "go$v: xtrace on the format=go window"
			[ "$back" = "$want" ] || fail "go$v: format=go window holds '$back', recorded '$want'"
			echo "go$v: format=go window read back by x/exp/trace: $back"
		elif grep -q 'format: expected gentrace' "$T/imp$v.go"; then
			echo "note: this gentraced has no format=go yet"
		else
			fail "go$v: format=go answered $code: $(cat "$T/imp$v.go")"
		fi
	fi
done

# A damaged 1.26 file (cut in its second generation) and an unsupported
# version: refused with version and offset, nothing stored.
size=$(wc -c <"$T/go126.trace")
head -c $((size * 2 / 3)) "$T/go126.trace" >"$T/cut.trace"
if "$GENTRACE" import --service cut --addr "$AGENT" "$T/cut.trace" 2>"$T/cut.err"; then
	fail "a truncated trace was imported"
fi
grep -q "go 1.26 trace: offset [0-9]*: " "$T/cut.err" || fail "cut: $(cat "$T/cut.err")"
printf 'go 1.10 trace\0\0\0' >"$T/old.trace"
if "$GENTRACE" import --service old --addr "$AGENT" "$T/old.trace" 2>"$T/old.err"; then
	fail "a Go 1.10 trace was imported"
fi
grep -q "go 1.10 trace: offset 0: unsupported version" "$T/old.err" ||
	fail "old: $(cat "$T/old.err")"
# A "go 1.11" file holding a CPU sample (an event of 1.19 and later) is
# refused by x/exp/trace and by the importer, with version and offset.
"$T/oldenc" -o "$T/cpu111.trace" -cpusample >/dev/null || fail "oldenc -cpusample"
"$T/xtrace" "$T/cpu111.trace" >/dev/null 2>&1 && fail "x/exp/trace read a 1.11 file with a CPU sample"
if "$GENTRACE" import --service cpu111 --addr "$AGENT" "$T/cpu111.trace" 2>"$T/cpu111.err"; then
	fail "a 1.11 trace with a CPU sample was imported"
fi
grep -q "go 1.11 trace: offset [0-9]*: " "$T/cpu111.err" || fail "cpu111: $(cat "$T/cpu111.err")"
# Usage: the service is required (exit 2, nothing sent).
"$GENTRACE" import --addr "$AGENT" "$T/go126.trace" 2>"$T/usage.err"
[ $? = 2 ] || fail "import without --service: want exit 2"
grep -q -- "--service NAME is required" "$T/usage.err" || fail "usage: $(cat "$T/usage.err")"
for s in cut old cpu111; do
	n=$(curl -sf "http://$HTTP/v1/agents?service=$s" | grep -c '"session"')
	[ "$n" = 0 ] || fail "service $s has a stored session"
done
stop_daemon
echo ok
