#!/bin/sh
# test_cli.sh: runs the real gentrace CLI on fixture traces written by
# tests/tools/mktrace (known counts) and checks outputs, exit codes and
# messages. Needs python3 for JSON checks. Run by `make check`, which sets
# top_builddir and top_srcdir; runs standalone from a build dir too.
set -u
top_builddir=${top_builddir:-$(pwd)}
G="$top_builddir/tools/gentrace"
M="$top_builddir/tests/tools/mktrace"
T=$(mktemp -d "${TMPDIR:-/tmp}/gentrace-cli.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT INT TERM
failures=0
checks=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { checks=$((checks + 1)); }
# check DESCRIPTION COMMAND...: the command must succeed.
check() {
	d=$1
	shift
	if "$@"; then ok; else fail "$d"; fi
}
# expect_exit CODE DESCRIPTION COMMAND...: exit status must be CODE;
# stderr is kept in $T/err for later checks.
expect_exit() {
	want=$1 d=$2
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" = "$want" ]; then ok; else
		fail "$d: exit $got, want $want (stderr: $(head -c 300 "$T/err"))"
	fi
}
# count KEY FILE: value of KEY=... in a mktrace report.
count() { sed -n "s/^$1=//p" "$2"; }
eq() { # eq DESCRIPTION GOT WANT
	if [ "$2" = "$3" ]; then ok; else fail "$1: got '$2', want '$3'"; fi
}

[ -x "$G" ] || { echo "no $G" >&2; exit 99; }
[ -x "$M" ] || { echo "no $M" >&2; exit 99; }
command -v python3 >/dev/null || { echo "python3 missing: skip" >&2; exit 77; }

# ------------------------------------------------------------- fixtures
"$M" --sessions 2 --gens 3 "$T/a.gt" >"$T/a.counts" || exit 99
"$M" --sessions 2 --gens 3 --first-session 1 "$T/b.gt" >"$T/b.counts" || exit 99
"$M" --sessions 1 --gens 2 --open-region "$T/open.gt" >"$T/open.counts" || exit 99
events=$(count events "$T/a.counts")
eq "fixture has events" "$([ "$events" -gt 50 ] && echo yes)" yes

# ----------------------------------------------------------------- dump
expect_exit 0 "dump a.gt" "$G" dump "$T/a.gt"
cp "$T/out" "$T/a.dump"
eq "dump: one line per event" "$(wc -l <"$T/a.dump" | tr -d ' ')" "$events"
eq "dump: six tab-separated fields on every line" \
	"$(awk -F'\t' 'NF != 6' "$T/a.dump" | wc -l | tr -d ' ')" 0
eq "dump: RFC 3339 ns UTC times, 32-hex sessions" \
	"$(grep -Evc '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z	[0-9a-f]{32}	[0-9]+	' "$T/a.dump")" 0
for kind in region_begin region_end instant counter log task_begin task_end \
	thread_name region_begin_stack instant_stack log_stack lost; do
	eq "dump: $kind lines" \
		"$(awk -F'\t' -v k="$kind" '$4 == k' "$T/a.dump" | wc -l | tr -d ' ')" \
		"$(count "$kind" "$T/a.counts")"
done
# The log message has a tab, a newline, quotes, a backslash and a bad byte:
# all escaped, on one line.
check "dump: log message escaped on one line" \
	grep -qF 'message="GET /a\tb\nc \"q\" \\ \xff café"' "$T/a.dump"
check "dump: counter value is signed" grep -q '	counter	queue	value=-5$' "$T/a.dump"
check "dump: task args" grep -q '	task_begin	job	task=1 parent=0$' "$T/a.dump"
check "dump: stack pcs" \
	grep -q '	instant_stack	mark	stack=0x401000,0x402abc,0x7f0000001234$' "$T/a.dump"
check "dump: lost count" grep -q '	lost	-	count=4$' "$T/a.dump"
# Events of one session come out in time order (threads merged).
eq "dump: time order within each session" "$(awk -F'\t' '
	prev[$2] != "" && $1 < prev[$2] { bad++ } { prev[$2] = $1 }
	END { print bad + 0 }' "$T/a.dump")" 0

# stdin gives the same as the file.
"$G" dump - <"$T/a.gt" >"$T/stdin.dump" 2>"$T/err"
eq "dump -: exit" "$?" 0
check "dump -: same as the file" cmp -s "$T/stdin.dump" "$T/a.dump"
cat "$T/a.gt" | "$G" dump - >"$T/pipe.dump"
check "dump - from a pipe: same as the file" cmp -s "$T/pipe.dump" "$T/a.dump"

# -o writes the file, nothing on stdout, no temporary left behind.
expect_exit 0 "dump -o" "$G" dump -o "$T/o.dump" "$T/a.gt"
check "dump -o: file written" cmp -s "$T/o.dump" "$T/a.dump"
eq "dump -o: stdout empty" "$(wc -c <"$T/out" | tr -d ' ')" 0
eq "dump -o: no temporary files" "$(ls "$T" | grep -c '\.tmp\.')" 0
expect_exit 0 "options after the file" "$G" dump "$T/a.gt" --output="$T/o2.dump"
check "--output=FILE form" cmp -s "$T/o2.dump" "$T/a.dump"

# ----------------------------------------------------------------- stat
expect_exit 0 "stat" "$G" stat "$T/a.gt"
check "stat: totals line" \
	grep -q "^total  sessions=2 generations=6 events=$events " "$T/out"
check "stat: ledger totals" \
	grep -q "lost=$(count lost_ledger "$T/a.counts") (dropped=6 evicted=4 rejected=0) lost_markers=$(count lost_markers "$T/a.counts")" "$T/out"
eq "stat: one block per session" "$(grep -c '^session ' "$T/out")" 2
check "stat: generation rows" grep -Eq '^ +1  2026-11-22T03:04:06\.000000000Z +1\.000000s ' "$T/out"

expect_exit 0 "stat --json" "$G" stat --json "$T/a.gt"
cp "$T/out" "$T/a.stat.json"
check "stat --json: totals and per-kind counts match the fixture" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
want = dict(l.strip().split("=") for l in open(sys.argv[2]))
t = d["totals"]
assert t["events"] == int(want["events"]), t
assert t["sessions"] == 2 and t["generations"] == 6, t
assert t["lost"] == int(want["lost_ledger"]), t
assert t["lost_markers"] == int(want["lost_markers"]), t
for k, v in t["kinds"].items():
    assert v == int(want[k]), (k, v)
assert [len(s["generations"]) for s in d["sessions"]] == [3, 3]
assert sum(g["bytes"] for s in d["sessions"] for g in s["generations"]) == \
    int(want["bytes"]) - 16
assert d["sessions"][1]["generations"][1]["dropped"] == 3
' "$T/a.stat.json" "$T/a.counts"
cat "$T/a.gt" | "$G" stat --json - >"$T/stdin.stat.json"
check "stat -: same as the file" cmp -s "$T/stdin.stat.json" "$T/a.stat.json"

# -------------------------------------------------------------- convert
expect_exit 0 "convert --to chrome" "$G" convert --to chrome "$T/a.gt"
cp "$T/out" "$T/a.json"
check "convert: json.tool parses it" python3 -m json.tool "$T/a.json" /dev/null
check "convert: events by phase match the fixture" python3 -c '
import json, sys, collections
d = json.load(open(sys.argv[1]))
w = {k: int(v) for k, v in (l.strip().split("=") for l in open(sys.argv[2]))}
ph = collections.Counter(e["ph"] for e in d["traceEvents"])
ledger_gens = 2  # generation index 1 of each session carries a ledger
want = {
  "B": w["region_begin"] + w["region_begin_stack"],
  "E": w["region_end"],
  "C": w["counter"],
  "b": w["task_begin"], "e": w["task_end"],
  "i": w["instant"] + w["instant_stack"] + w["log"] + w["log_stack"]
       + w["lost"] + ledger_gens,
  "M": w["sessions"] + w["thread_name"],
}
assert dict(ph) == want, (dict(ph), want)
ev = d["traceEvents"]
assert len({e["pid"] for e in ev}) == 2
assert {e["args"]["name"] for e in ev if e.get("name") == "process_name"} \
    == {"api (host-1 4000)", "db (host-1 4001)"}
logs = [e for e in ev if e.get("cat") == "log" and e["name"] == "http"]
assert logs and logs[0]["args"]["message"] == "GET /a\tb\nc \"q\" \\ \ufffd caf\u00e9", logs[0]
lost = [e for e in ev if e.get("name") == "gentrace.lost"]
assert sum(e["args"]["count"] for e in lost) == w["lost_markers"] + w["lost_ledger"]
assert all(isinstance(e["ts"], (int, float)) for e in ev if e["ph"] != "M")
m = d["metadata"]
assert m["gentrace_start"] == "2026-11-22T03:04:05.000000000Z", m
assert int(m["gentrace_start_ns"]) == 1795316645000000000
assert len(m["sessions"]) == 2
' "$T/a.json" "$T/a.counts"
expect_exit 0 "convert defaults to chrome" "$G" convert "$T/a.gt"
check "convert without --to: same output" cmp -s "$T/out" "$T/a.json"
"$G" convert --to chrome - <"$T/a.gt" >"$T/stdin.json"
check "convert -: same as the file" cmp -s "$T/stdin.json" "$T/a.json"

expect_exit 0 "convert open region" "$G" convert --to chrome "$T/open.gt"
check "convert: a region open at the end is closed (B == E per thread)" python3 -c '
import json, sys, collections
d = json.load(open(sys.argv[1]))
depth = collections.Counter()
for e in d["traceEvents"]:
    if e["ph"] == "B": depth[(e["pid"], e["tid"])] += 1
    if e["ph"] == "E":
        depth[(e["pid"], e["tid"])] -= 1
        assert depth[(e["pid"], e["tid"])] >= 0
assert all(v == 0 for v in depth.values()), depth
closed = [e for e in d["traceEvents"] if e["ph"] == "E" and e.get("args")]
assert len(closed) == 1, closed
' "$T/out"

# ------------------------------------------------------------------ cat
expect_exit 0 "cat a b" "$G" cat -o "$T/ab.gt" "$T/a.gt" "$T/b.gt"
expect_exit 0 "cat b a" "$G" cat "$T/b.gt" "$T/a.gt"
check "cat: input order does not matter" cmp -s "$T/out" "$T/ab.gt"
expect_exit 0 "stat of the merged file" "$G" stat "$T/ab.gt"
# a: sessions 0,1; b: sessions 1,2 (session 1 identical): the union.
check "cat: union has 3 sessions, 9 generations, no duplicate" \
	grep -q "^total  sessions=3 generations=9 events=$((events / 2 * 3)) " "$T/out"
"$G" dump "$T/ab.gt" | sort >"$T/ab.dump.sorted"
{ "$G" dump "$T/a.gt"; "$G" dump "$T/b.gt"; } | sort -u >"$T/union.sorted"
check "cat: dump of the merge is the union of the dumps" \
	cmp -s "$T/ab.dump.sorted" "$T/union.sorted"
expect_exit 0 "cat a a" "$G" cat "$T/a.gt" "$T/a.gt"
check "cat a a == a (time-ordered input, duplicates once)" cmp -s "$T/out" "$T/a.gt"
cp "$T/a.gt" "$T/inplace.gt"
expect_exit 0 "cat -o onto one of its inputs" \
	"$G" cat -o "$T/inplace.gt" "$T/inplace.gt" "$T/b.gt"
check "cat -o onto an input gives the merge" cmp -s "$T/inplace.gt" "$T/ab.gt"
expect_exit 0 "cat with stdin" "$G" cat "$T/a.gt" - <"$T/b.gt"
check "cat with stdin: same merge" cmp -s "$T/out" "$T/ab.gt"

# ------------------------------------------------------------ bad input
size=$(wc -c <"$T/a.gt" | tr -d ' ')
last_gen_bytes=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["sessions"][1]["generations"][-1]["bytes"])' "$T/a.stat.json")
last_off=$((size - last_gen_bytes))
head -c $((size - 1)) "$T/a.gt" >"$T/trunc.gt"
for cmd in dump stat convert cat; do
	expect_exit 1 "$cmd truncated" "$G" $cmd "$T/trunc.gt"
	check "$cmd truncated: message names the last generation's offset" \
		grep -q "^gentrace: $T/trunc.gt: offset $last_off: " "$T/err"
done
# What decodes before the damage is still printed on stdout: every
# generation but the last (the damaged one).
last_gen_events=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["sessions"][1]["generations"][-1]["events"])' "$T/a.stat.json")
"$G" dump "$T/trunc.gt" >"$T/trunc.dump" 2>/dev/null
head -n $((events - last_gen_events)) "$T/a.dump" >"$T/trunc.want"
check "dump of a truncated file prints the whole generations before it" \
	cmp -s "$T/trunc.dump" "$T/trunc.want"
# Every truncation point fails cleanly (exit 1, offset named), never a crash
# or a success: a sample of points keeps this fast.
i=1
while [ $i -lt "$size" ]; do
	head -c $i "$T/a.gt" >"$T/cut.gt"
	"$G" stat "$T/cut.gt" >/dev/null 2>"$T/err"
	rc=$?
	case $rc in
	0) ;; # a cut exactly at a generation boundary is a valid shorter file
	1) grep -q "^gentrace: $T/cut.gt: offset [0-9]*: " "$T/err" ||
		fail "truncated at $i: message $(cat "$T/err")" ;;
	*) fail "truncated at $i: exit $rc" ;;
	esac
	i=$((i + 37))
done
ok
# A flipped byte inside the first generation's body: its offset (16).
python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[120] ^= 0x40
open(sys.argv[2], "wb").write(b)' "$T/a.gt" "$T/flip.gt"
expect_exit 1 "dump corrupt" "$G" dump "$T/flip.gt"
check "corrupt: message names offset 16" grep -q "^gentrace: $T/flip.gt: offset 16: " "$T/err"
# An undecodable event inside a generation whose manifest is right: the
# offset named is that event's, inside the last generation.
"$M" --sessions 2 --gens 3 --bad-event "$T/badev.gt" >/dev/null || exit 99
badev_size=$(wc -c <"$T/badev.gt" | tr -d ' ')
for cmd in dump stat convert cat; do
	expect_exit 1 "$cmd with a bad event" "$G" $cmd "$T/badev.gt"
	off=$(sed -n "s/^gentrace: .*badev.gt: offset \([0-9]*\): unknown record, frame or event type$/\1/p" "$T/err")
	eq "$cmd bad event: offset inside the last generation" \
		"$([ -n "$off" ] && [ "$off" -gt "$last_off" ] && [ "$off" -lt "$badev_size" ] && echo yes)" yes
done
printf 'this is not a trace file at all' >"$T/junk.gt"
expect_exit 1 "junk" "$G" stat "$T/junk.gt"
check "junk: bad magic at offset 0" grep -q "offset 0: bad magic number" "$T/err"
: >"$T/empty.gt"
expect_exit 1 "empty file" "$G" dump "$T/empty.gt"
check "empty: offset 0" grep -q "offset 0: " "$T/err"
expect_exit 1 "missing file" "$G" dump "$T/nope.gt"
check "missing file: says so" grep -q "nope.gt: No such file" "$T/err"
head -c 16 "$T/a.gt" >"$T/hdr.gt"
expect_exit 0 "header-only file is a valid empty trace" "$G" dump "$T/hdr.gt"
eq "header-only: no lines" "$(wc -c <"$T/out" | tr -d ' ')" 0
expect_exit 0 "convert header-only" "$G" convert "$T/hdr.gt"
check "convert header-only: valid JSON, no events" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); assert d["traceEvents"] == [], d' "$T/out"

# -o with bad input: no file, no temporary; an existing file is kept.
expect_exit 1 "-o with bad input" "$G" convert -o "$T/bad.json" "$T/trunc.gt"
check "-o with bad input: no output file" test ! -e "$T/bad.json"
echo keep >"$T/keep.txt"
expect_exit 1 "-o over an existing file, bad input" "$G" dump -o "$T/keep.txt" "$T/flip.gt"
eq "-o with bad input: old file untouched" "$(cat "$T/keep.txt")" keep
expect_exit 1 "cat with one bad input" "$G" cat -o "$T/badcat.gt" "$T/a.gt" "$T/flip.gt"
check "cat with one bad input: nothing written" test ! -e "$T/badcat.gt"
eq "no temporary files left" "$(ls "$T" | grep -c '\.tmp\.')" 0

# ---------------------------------------------------------------- usage
expect_exit 2 "no command" "$G"
expect_exit 2 "unknown command" "$G" frobnicate
check "unknown command: says which" grep -q "unknown command 'frobnicate'" "$T/err"
expect_exit 2 "dump without file" "$G" dump
expect_exit 2 "dump with two files" "$G" dump "$T/a.gt" "$T/b.gt"
expect_exit 2 "unknown option" "$G" stat --bogus "$T/a.gt"
check "unknown option: names it" grep -q "unknown option '--bogus'" "$T/err"
expect_exit 2 "-o without value" "$G" dump "$T/a.gt" -o
expect_exit 2 "convert to an unknown format" "$G" convert --to xml "$T/a.gt"
expect_exit 2 "--json is not a dump option" "$G" dump --json "$T/a.gt"
expect_exit 2 "cat without files" "$G" cat
expect_exit 2 "cat reading stdin twice" "$G" cat - -

# ----------------------------------------------------------------- help
expect_exit 0 "--help" "$G" --help
for s in SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" EXAMPLES; do
	check "--help has $s" grep -q "^$s" "$T/out"
done
for cmd in dump stat convert cat; do
	expect_exit 0 "$cmd --help" "$G" $cmd --help
	for s in SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" EXAMPLES; do
		check "$cmd --help has $s" grep -q "^$s" "$T/out"
	done
	check "$cmd --help names the command" grep -q "gentrace $cmd" "$T/out"
done
expect_exit 0 "--version" "$G" --version
check "--version prints the version" grep -Eq '^gentrace [0-9]+\.[0-9]+' "$T/out"

echo "test_cli: $checks checks, $failures failures"
[ "$failures" = 0 ]
