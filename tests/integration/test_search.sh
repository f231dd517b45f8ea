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

# The spans as the machine made them (a sleep of 100 ms can last past 250 ms
# on a loaded machine, a fast region be preempted past 60 ms): the queries
# whose answer depends on that expect what the stored trace holds.
curl -sf -o "$T/all.gentrace" "$H/v1/trace?service=shop&last=1h" || fail "trace download"
"$GENTRACE" dump "$T/all.gentrace" >"$T/all.dump" || fail "gentrace dump"

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
# expect_made WHAT MADE QUERY: the search finds what the trace holds
# (expect_truth in lib.sh).
expect_made() {
	made=$(count "$3") || fail "$1: search failed"
	expect_truth "$1" "$2" "$3" "$made" "$T/all.dump"
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
