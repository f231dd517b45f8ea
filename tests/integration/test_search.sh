#!/bin/sh
# Search and summary end to end: the real agent (tests/integration/slowspans,
# libgentrace) makes many fast spans and a known set of slow ones in two
# sessions, over many generations; GET /v1/search must find exactly the slow
# ones with every filter, GET /v1/summary must count exactly what was made.
. "$top_srcdir/tests/integration/lib.sh"
SLOW=$top_builddir/tests/integration/slowspans
skip_unless curl python3 "$SLOW" "$GENTRACED" "$GENTRACE"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
H="http://$HTTP"
run() {
	GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=shop GENTRACE_PERIOD_MS=100 \
		"$SLOW" "$@" >>"$T/slow.log" 2>&1 || fail "slowspans $*"
}
# Durations are far apart (sleeps overshoot on a loaded machine, and a fast
# region can be preempted): slow ones of 100 ms and 400 ms, cut at 60 ms and
# 250 ms. Session 1: 6 slow checkout.pay of 100 ms, a task across threads of
# 700 ms (longer than a generation: it is paired across generation edges).
run --fast 20000 --slow 6 --slow-ms 100 --task-ms 700
between=$(date +%s%N)
sleep 0.2
# Session 2: 4 slow checkout.pay of 400 ms.
run --fast 5000 --slow 4 --slow-ms 400

# Everything is committed once the cart count is whole (gt_stop flushed).
i=0
while :; do
	n=$(curl -sf "$H/v1/summary?service=shop&name=checkout.cart" |
		python3 -c 'import json,sys; d=json.load(sys.stdin)
print(sum(x["count"] for x in d["names"]))') || n=0
	[ "$n" = 25000 ] && break
	i=$((i + 1))
	[ $i -lt 200 ] || fail "summary count of checkout.cart: $n, want 25000"
	sleep 0.1
done
gens=$(sqlite3 "file:$T/g.db?mode=ro" "SELECT count(*) FROM generations" \
	2>/dev/null) || gens=unknown
echo "generations stored: $gens"

# The spans as the machine made them: a sleep of 100 ms can last past 250 ms
# on a loaded machine and a fast region can be preempted past 60 ms, so the
# queries whose answer depends on that take their expected count from the
# stored trace itself, decoded by `gentrace dump` (not the search's code):
# regions paired per session and thread, tasks per session and id.
curl -sf -o "$T/all.gentrace" "$H/v1/trace?service=shop&last=1h" || fail "trace download"
"$GENTRACE" dump "$T/all.gentrace" >"$T/all.dump" || fail "gentrace dump"

# truth QUERY: "LO HI", the number of spans in the dump that QUERY's filters
# (name, min, max, from, to) take: LO those clearly in, HI with those within
# 1 ms of a duration bound too (the dump's times and the summary's durations
# may round apart by a few ns; no span lies that close in practice, but a
# check must not hang on it).
truth() {
	python3 - "$T/all.dump" "$1" <<'PY'
import calendar, re, sys, urllib.parse
def ns(ts):  # 2026-01-02T03:04:05.123456789Z
    whole, frac = ts.rstrip("Z").split(".")
    return calendar.timegm(tuple(map(int, re.split("[-T:]", whole)))) * 10**9 + int(frac.ljust(9, "0"))
def dur(v):
    m = re.fullmatch(r"(\d+)(ns|us|ms|s)", v)
    return int(m[1]) * {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}[m[2]]
q = dict(urllib.parse.parse_qsl(sys.argv[2]))
spans, stacks, tasks = [], {}, {}
for line in open(sys.argv[1], encoding="utf-8"):
    f = line.rstrip("\n").split("\t")
    t, sess, th, kind, name = ns(f[0]), f[1], f[2], f[3], f[4]
    if kind in ("region_begin", "region_begin_stack"):
        stacks.setdefault((sess, th), []).append((name, t))
    elif kind == "region_end" and stacks.get((sess, th)):
        n, t0 = stacks[(sess, th)].pop()
        spans.append((n, t0, t - t0))
    elif kind == "task_begin":
        tasks[(sess, f[5].split()[0])] = (name, t)
    elif kind == "task_end" and (sess, f[5]) in tasks:
        n, t0 = tasks.pop((sess, f[5]))
        spans.append((n, t0, t - t0))
name = q.get("name")
lo_d = dur(q.get("min", "0ns"))
hi_d = dur(q["max"]) if "max" in q else None
frm = dur(q["from"]) if "from" in q and not q["from"].startswith("now") else None
to = dur(q["to"]) if "to" in q else None
sure = near = 0
for n, t0, d in spans:
    if name and not (n.startswith(name[:-1]) if name.endswith("*") else n == name):
        continue
    if (frm is not None and t0 < frm) or (to is not None and t0 >= to):
        continue
    inside = d >= lo_d and (hi_d is None or d <= hi_d)
    edge = abs(d - lo_d) < 10**6 or (hi_d is not None and abs(d - hi_d) < 10**6)
    if edge:
        near += 1
    elif inside:
        sure += 1
print(sure, sure + near)
PY
}

# count QUERY: how many spans the search finds (all pages, limit 7), with a
# check that no span comes twice and that every one matches the filters.
count() {
	python3 - "$H" "$1" <<'PY'
import json, sys, urllib.request
base, q = sys.argv[1], sys.argv[2]
seen, cursor, pages = set(), None, 0
while True:
    url = base + "/v1/search?" + q + "&limit=7" + ("&cursor=" + cursor if cursor else "")
    d = json.load(urllib.request.urlopen(url))
    pages += 1
    for s in d["spans"]:
        key = (s["session"], s["gen"], s["thread"], s["start_ns"], s["name"])
        if key in seen:
            sys.exit("duplicate span %r" % (key,))
        seen.add(key)
        assert int(s["duration_ns"]) >= 0 and s["window"].startswith("/v1/trace?session=")
    cursor = d["next_cursor"]
    if not cursor or pages > 10000:
        break
print(len(seen))
PY
}
expect() { # expect WHAT WANT QUERY
	got=$(count "$3") || fail "$1: search failed"
	[ "$got" = "$2" ] || fail "$1: found $got spans, want $2 ($3)"
	echo "ok: $1 = $got"
}
# expect_made WHAT AT-LEAST QUERY: the search finds exactly what the dump
# holds for QUERY (truth), and that is at least what slowspans was asked to
# make (sleeps only ever last longer, so more may qualify, never fewer).
expect_made() {
	tr=$(truth "$3") || fail "$1: truth from the dump"
	set -- "$1" "$2" "$3" $tr
	got=$(count "$3") || fail "$1: search failed"
	[ "$got" -ge "$4" ] && [ "$got" -le "$5" ] ||
		fail "$1: found $got spans, the trace holds $4 ($5 counting those within 1 ms of a bound) ($3)"
	[ "$4" -ge "$2" ] || fail "$1: the trace holds $4 such spans, slowspans made at least $2 ($3)"
	echo "ok: $1 = $got (the trace holds $4, slowspans made at least $2)"
	made=$got
}
expect "slow checkout.pay, both sessions" 10 "service=shop&name=checkout.pay&min=60ms"
# A fast checkout.cart preempted for 60 ms qualifies too: that is a span of
# 60 ms all the same, and the trace says so.
expect_made "prefix checkout.* leaves other.pay out" 10 "service=shop&name=checkout.*&min=60ms"
# Session 1's 100 ms pays can outlast 250 ms on a loaded machine.
expect_made "min=250ms: session 2 (and any stretched pay)" 4 "service=shop&name=checkout.pay&min=250ms"
over=$made
expect_made "max=250ms: session 1 (less any stretched pay)" 0 "service=shop&name=checkout.pay&min=60ms&max=250ms"
# The two split the 10 pays between them, whatever their lengths.
[ $((over + made)) = 10 ] || fail "min=250ms found $over, max=250ms $made: not the 10 pays"
expect_made "any name over 60ms (pay, other, job)" 21 "service=shop&min=60ms"
expect "task across threads and generations" 1 "service=shop&name=job&min=500ms"
expect "from= after session 1" 4 "service=shop&name=checkout.pay&min=60ms&from=${between}ns"
expect "to= before session 2" 6 "service=shop&name=checkout.pay&min=60ms&to=${between}ns&from=now-1h"
# Below the index floor (1 ms) the generations are decoded: still exact.
expect "min=1us (decoded)" 10 "service=shop&name=checkout.pay&min=1us"
expect "fleet-wide (no service)" 10 "name=checkout.pay&min=60ms"

# Summary: counts equal what was made, percentiles in the right bucket.
curl -sf "$H/v1/summary?service=shop&last=1h" >"$T/sum.json" || fail "summary"
python3 - "$T/sum.json" <<'PY' || fail "summary contents"
import json, sys
d = json.load(open(sys.argv[1]))
by = {(x["kind"], x["name"]): x for x in d["names"]}
assert by[("region", "checkout.cart")]["count"] == 25000, by[("region", "checkout.cart")]
assert by[("region", "checkout.pay")]["count"] == 10
assert by[("region", "other.pay")]["count"] == 10
assert by[("task", "job")]["count"] == 1
pay = by[("region", "checkout.pay")]
assert int(pay["max_ns"]) >= 400_000_000 and int(pay["min_ns"]) >= 100_000_000
assert 100_000_000 <= int(pay["p50_ns"]) <= int(pay["p99_ns"]) <= int(pay["max_ns"])
assert sum(b["count"] for b in pay["buckets"]) == 10
print("ok: summary counts")
PY

# A range holding whole slots reads their rollups (store/store_rollup.c): the
# same answer, number for number, as last=1h.
from=$(date -u -d '-3 hours' +%FT%TZ)
to=$(date -u -d '+2 hours' +%FT%TZ)
curl -sf "$H/v1/summary?service=shop&from=$from&to=$to" >"$T/sum2.json" ||
	fail "summary over whole hours"
python3 - "$T/sum.json" "$T/sum2.json" <<'PY' || fail "rollup summary differs"
import json, sys
a, b = (json.load(open(p))["names"] for p in sys.argv[1:3])
assert a == b, (a, b)
print("ok: summary over whole hours equals the raw one")
PY

# The window of a found span downloads.
w=$(curl -sf "$H/v1/search?service=shop&name=checkout.pay&min=250ms&limit=1" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["spans"][0]["window"])') ||
	fail "first span"
curl -sf -o "$T/w.trace" "$H$w" || fail "window download $w"
[ -s "$T/w.trace" ] || fail "empty window"

# Bad parameters: 400 JSON; unknown service: 404.
code() { curl -s -o "$T/err.json" -w '%{http_code}' "$H$1"; }
[ "$(code '/v1/search?service=nope')" = 404 ] || fail "unknown service"
[ "$(code '/v1/search?min=fast')" = 400 ] || fail "bad min"
[ "$(code '/v1/search?name=a*b')" = 400 ] || fail "inner *"
[ "$(code '/v1/search?cursor=zz')" = 400 ] || fail "bad cursor"
[ "$(code '/v1/search?min=2s&max=1s')" = 400 ] || fail "max < min"
[ "$(code '/v1/summary?last=1h&from=now-1h')" = 400 ] || fail "last+from"
grep -q '"error"' "$T/err.json" || fail "400 body is not JSON error"
stop_daemon
echo "ok: search"
