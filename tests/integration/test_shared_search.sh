#!/bin/sh
# Search and summary on the shared store (real PostgreSQL + Swift s3api from
# scripts/cluster-up): the real agent (slowspans) makes many fast spans and
# a known set of slow ones through daemon A; daemon B, which ingested
# nothing, finds exactly the slow ones (/v1/search) and counts exactly what
# was made (/v1/summary). The same generations, replayed into an SQLite
# daemon (tests/integration/replay.c), give byte-identical answers. Cluster
# retention then takes the summary rows with their generations.
. "$top_srcdir/tests/integration/lib.sh"
SLOW=$top_builddir/tests/integration/slowspans
REPLAY=$top_builddir/tests/integration/replay
skip_unless curl psql python3 "$SLOW" "$REPLAY" "$GENTRACED" "$GENTRACE"

cluster_start
SQL() { psql -qtA "$GENTRACE_CATALOG" -c "$1"; }
shared="--catalog $GENTRACE_CATALOG --objects $GENTRACE_OBJECTS/search"
shared="$shared --segment-max-age 200ms"
start_daemon "$T/a.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id search-a
A_AGENT=$AGENT
start_daemon "$T/b.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id search-b
B="http://$HTTP"
start_daemon "$T/s.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/s.db"
S_AGENT=${AGENT##*:}
S="http://$HTTP"

t0=$(date +%s%N)
run() {
	GENTRACE_ADDR=$A_AGENT GENTRACE_SERVICE=shop GENTRACE_PERIOD_MS=100 \
		"$SLOW" "$@" >>"$T/slow.log" 2>&1 || fail "slowspans $*"
}
# As test_search.sh: 6 slow checkout.pay of 100 ms and a 700 ms task across
# threads and generations in session 1, 4 of 400 ms in session 2.
run --fast 20000 --slow 6 --slow-ms 100 --task-ms 700
between=$(date +%s%N)
sleep 0.2
run --fast 5000 --slow 4 --slow-ms 400

# carts H: the checkout.cart count /v1/summary on H reports (25000 once
# every generation is committed and summarized).
carts() {
	curl -sf "$1/v1/summary?service=shop&name=checkout.cart&from=${t0}ns" |
		python3 -c 'import json,sys; d=json.load(sys.stdin)
print(sum(x["count"] for x in d["names"]))' 2>/dev/null || echo 0
}
wait_carts() {
	i=0
	while [ "$(carts "$1")" != 25000 ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || fail "$1: checkout.cart count $(carts "$1"), want 25000"
		sleep 0.1
	done
}
wait_carts "$B"
gens=$(SQL "SELECT count(*) FROM gt_generations")
summ=$(SQL "SELECT count(*) FROM gt_sum_gens WHERE status = 0")
[ "$gens" = "$summ" ] || fail "$summ of $gens generations summarized"
echo "generations stored and summarized on the cluster: $gens"

# count H QUERY: spans found on H, every page (limit 7), none twice.
count() {
	python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request
base, q = sys.argv[1], sys.argv[2]
seen, cursor = set(), None
for _ in range(10000):
    url = base + "/v1/search?" + q + "&limit=7" + ("&cursor=" + cursor if cursor else "")
    d = json.load(urllib.request.urlopen(url))
    for s in d["spans"]:
        key = (s["session"], s["gen"], s["thread"], s["start_ns"], s["name"])
        if key in seen:
            sys.exit("duplicate span %r" % (key,))
        seen.add(key)
    cursor = d["next_cursor"]
    if not cursor:
        break
print(len(seen))
PY
}
expect() { # expect WHAT WANT QUERY, on B
	got=$(count "$B" "$3") || fail "$1: search failed"
	[ "$got" = "$2" ] || fail "$1: found $got spans on B, want $2 ($3)"
	echo "ok: $1 = $got"
}
# The queries whose answer depends on how long sleeps and preemptions
# lasted expect what B's trace holds (expect_truth in lib.sh).
curl -sf -o "$T/all.gentrace" "$B/v1/trace?service=shop&from=${t0}ns&to=now%2B1h" ||
	fail "trace download"
"$GENTRACE" dump "$T/all.gentrace" >"$T/all.dump" || fail "gentrace dump"
expect_made() { # expect_made WHAT MADE QUERY, on B
	made=$(count "$B" "$3") || fail "$1: search failed"
	expect_truth "$1" "$2" "$3" "$made" "$T/all.dump"
}
expect "slow checkout.pay, both sessions" 10 "service=shop&name=checkout.pay&min=60ms"
expect_made "prefix checkout.*" 10 "service=shop&name=checkout.*&min=60ms"
expect_made "min=250ms: session 2 (and any stretched pay)" 4 "service=shop&name=checkout.pay&min=250ms"
over=$made
expect_made "max=250ms: session 1 (less any stretched pay)" 0 "service=shop&name=checkout.pay&min=60ms&max=250ms"
[ $((over + made)) = 10 ] || fail "min=250ms found $over, max=250ms $made: not the 10 pays"
expect_made "any name over 60ms" 21 "service=shop&min=60ms"
expect "task across threads and generations" 1 "service=shop&name=job&min=500ms"
expect "from= after session 1" 4 "service=shop&name=checkout.pay&min=60ms&from=${between}ns"
expect "min=1us (decoded)" 10 "service=shop&name=checkout.pay&min=1us"
expect "fleet-wide" 10 "name=checkout.pay&min=60ms"
code=$(curl -s -o "$T/err.json" -w '%{http_code}' "$B/v1/search?service=nope")
[ "$code" = 404 ] || fail "unknown service on B: HTTP $code"

# The same generations into SQLite: each session's native download from B,
# replayed as that session.
curl -sf "$B/v1/agents?service=shop" | python3 -c 'import json,sys
for a in json.load(sys.stdin)["agents"]: print(a["session"])' >"$T/sessions" ||
	fail "session list"
[ "$(wc -l <"$T/sessions")" = 2 ] || fail "want 2 sessions: $(cat "$T/sessions")"
while read -r sid; do
	curl -sf -o "$T/$sid.gt" "$B/v1/trace?session=$sid&from=${t0}ns&to=now%2B1h" ||
		fail "download $sid"
	"$REPLAY" "$S_AGENT" "$T/$sid.gt" || fail "replay $sid"
done <"$T/sessions"
wait_carts "$S"
sid1=$(head -n 1 "$T/sessions")

# Byte for byte: the same URL (explicit range: the answer echoes it) on B
# and on the SQLite daemon.
to=$(($(date +%s%N) + 60000000000))
same() {
	curl -sf "$B$1" >"$T/b.json" || fail "B: $1"
	curl -sf "$S$1" >"$T/s.json" || fail "SQLite: $1"
	cmp -s "$T/b.json" "$T/s.json" || {
		diff "$T/b.json" "$T/s.json" | head -c 2000
		fail "answers differ: $1"
	}
	echo "ok: same answer ($(wc -c <"$T/b.json") bytes): $1"
}
r="from=${t0}ns&to=${to}ns"
same "/v1/search?service=shop&min=60ms&$r&limit=1000"
same "/v1/search?service=shop&name=checkout.*&min=1us&$r&limit=10000"
same "/v1/search?name=job&$r"
same "/v1/search?session=$sid1&min=1ms&$r&limit=1000"
same "/v1/summary?service=shop&$r"
same "/v1/summary?service=shop&name=checkout.*&$r"
same "/v1/summary?session=$sid1&$r"
same "/v1/summary?$r"

# Cluster retention (a third daemon with --retain) deletes the generations
# and their summaries; B then finds nothing.
sleep 1
start_daemon "$T/c.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id search-c --retain 1s
i=0
while [ "$(SQL "SELECT count(*) FROM gt_generations")" != 0 ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "retention left $(SQL "SELECT count(*) FROM gt_generations") generations"
	sleep 0.1
done
for t in gt_sum_gens gt_sum_names gt_sum_spans gt_sum_counters gt_sum_logs; do
	n=$(SQL "SELECT count(*) FROM $t")
	[ "$n" = 0 ] || fail "$t keeps $n rows after retention"
done
[ "$(count "$B" "service=shop&min=1us&$r")" = 0 ] || fail "B still finds spans"
echo "ok: retention took the summaries"
echo "ok: shared search"
