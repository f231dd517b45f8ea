#!/bin/sh
# The feed across daemons with a deliberately late commit: daemon A holds
# every catalog commit open for 1.5 s after taking its sequence numbers
# (hidden --test-store-delay-ms), daemon B commits at once. A client follows
# B's feed with its cursor the whole time; at the end what it collected must
# equal the complete feed: no generation skipped, none repeated, same order.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl psql python3 "$DEMO" "$GENTRACED"

cluster_start
shared="--catalog $GENTRACE_CATALOG --objects $GENTRACE_OBJECTS/feed --segment-max-age 100ms"
start_daemon "$T/a.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id feed-a --test-store-delay-ms 1500
A_AGENT=$AGENT
start_daemon "$T/b.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id feed-b
B_AGENT=$AGENT B_HTTP=$HTTP

# The follower: pages B's feed with wait=1 until told to stop, writing one
# "session gen" line per generation in the order received.
python3 - "$B_HTTP" "$T/followed.txt" "$T/stop" <<'PY' &
import json, os, sys, time, urllib.request
http, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
cursor, lines, idle = "0", [], 0
while True:
    with urllib.request.urlopen(f"http://{http}/v1/feed?after={cursor}&wait=1&limit=10000", timeout=30) as r:
        d = json.load(r)
    for g in d["generations"]:
        lines.append(f'{g["session"]} {g["gen"]}')
    cursor = d["cursor"]
    if os.path.exists(stop):
        idle = idle + 1 if not d["generations"] else 0
        if idle >= 3:
            break
open(out, "w").write("\n".join(lines) + "\n")
PY
F=$!
PIDS="$PIDS $F"

# GENTRACE_FLUSH_MS: each demo exits once its last generation is ACKed,
# i.e. cataloged: A's 1.5 s commit delay is close to the default 2 s flush,
# after which a late commit could land after the full feed is read below.
GENTRACE_ADDR=$A_AGENT GENTRACE_SERVICE=late GENTRACE_PERIOD_MS=100 GENTRACE_FLUSH_MS=60000 \
	"$DEMO" --duration 5 --threads 2 --quiet >"$T/demo1.log" 2>&1 &
D1=$!
GENTRACE_ADDR=$B_AGENT GENTRACE_SERVICE=prompt GENTRACE_PERIOD_MS=100 GENTRACE_FLUSH_MS=60000 \
	"$DEMO" --duration 5 --threads 2 --quiet >"$T/demo2.log" 2>&1 &
D2=$!
PIDS="$PIDS $D1 $D2"
wait "$D1" || fail "demo late failed"
wait "$D2" || fail "demo prompt failed"
# Everything is cataloged (the demos exited); the follower ends after
# three empty long polls.
touch "$T/stop"
wait "$F" || fail "follower failed"

curl -sf -o "$T/all.json" "http://$B_HTTP/v1/feed?after=0&limit=10000" ||
	fail "full feed"
python3 - "$T/all.json" >"$T/all.txt" <<'PY' || fail "parsing the full feed"
import json, sys
d = json.load(open(sys.argv[1]))
print("\n".join("%s %s" % (g["session"], g["gen"]) for g in d["generations"]))
PY
n=$(wc -l <"$T/all.txt")
late=$(psql -qtA "$GENTRACE_CATALOG" -c "SELECT count(*) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = 'late'")
[ "$late" -ge 20 ] || fail "only $late generations from the late daemon"
[ "$n" -ge 40 ] || fail "only $n generations in the feed"
cmp -s "$T/followed.txt" "$T/all.txt" ||
	fail "the follower's feed differs from the full feed: $(diff "$T/followed.txt" "$T/all.txt" | head -5)"
echo "ok: followed $n generations ($late committed late) with none skipped"
