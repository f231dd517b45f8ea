#!/bin/sh
# zstd's fast (negative) levels and the level while behind, against real
# gentraceds: the real agent's generations, downloaded from a daemon that
# stored them raw (--zstd-level 0), replayed (tests/integration/replay.c)
# into a raw daemon again and into daemons at --zstd-level -5 with
# --zstd-fast-level -50, and at -100, come back through the HTTP API byte
# for byte the same from all three, plain and as zstd frames passed
# through; the compressed daemons' rows are zstd frames smaller than the
# payload, and the metric counts them. Levels outside -100..19, or not numbers, are refused at
# start with a message naming the flag (or file:line) and the range.
. "$top_srcdir/tests/integration/lib.sh"
REPLAY=$top_builddir/tests/integration/replay
skip_unless curl sqlite3 zstd cmp python3 "$REPLAY" "$DEMO" "$GENTRACED"

# A level out of range or not a number: exit 2 and a message that says
# which flag and what it accepts. Nothing starts.
refused() { # what-the-message-says ARGS...
	want=$1
	shift
	"$GENTRACED" --db "$T/never.db" --agent-listen 127.0.0.1:0 \
		--http-listen 127.0.0.1:0 "$@" >"$T/bad.out" 2>&1 </dev/null
	st=$?
	[ $st = 2 ] || fail "$*: exit $st, want 2 ($(cat "$T/bad.out"))"
	grep -q -- "$want" "$T/bad.out" || fail "$*: no \"$want\" in: $(cat "$T/bad.out")"
}
refused '--zstd-level: -101 is out of range (-100..19)' --zstd-level -101
refused '--zstd-level: 20 is out of range (-100..19)' --zstd-level 20
refused '--zstd-level: "fast" is not a whole number' --zstd-level fast
refused '--zstd-level: "-" is not a whole number' --zstd-level -
refused '--zstd-fast-level: "1.5" is not a whole number' --zstd-fast-level 1.5
refused '--zstd-fast-level: -9999 is out of range' --zstd-fast-level -9999
printf 'zstd-level = -300\n' >"$T/bad.conf"
refused 'bad.conf:1: zstd-level: -300 is out of range' --config "$T/bad.conf"
[ ! -e "$T/never.db" ] || fail "a refused start made a database"

# The workload: the real agent into a daemon that stores it raw.
start_daemon "$T/raw.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/raw.db" --zstd-level 0
t0=$(date +%s%N)
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=zlev GENTRACE_PERIOD_MS=200 \
	"$DEMO" --duration 2 --threads 3 --quiet >"$T/demo.log" 2>&1 ||
	fail "demo failed"
to=$(($(date +%s%N) + 60000000000))
sid=$(curl -sf "http://$HTTP/v1/agents?service=zlev" | python3 -c 'import json,sys
print(json.load(sys.stdin)["agents"][0]["session"])') || fail "no session"
W="/v1/trace?session=$sid&from=${t0}ns&to=${to}ns"
curl -sf -o "$T/raw.gt" "http://$HTTP$W" || fail "raw download"
[ "$(wc -c <"$T/raw.gt")" -gt 10000 ] || fail "tiny workload"
[ "$(sqlite3 "$T/raw.db" "SELECT count(*) FROM generations WHERE codec <> 'none'")" = 0 ] ||
	fail "--zstd-level 0 stored compressed rows"
stop_daemon

# A replay is a new HELLO, so the reference is the replay into a raw store.
for args in "--zstd-level 0" "--zstd-level -5 --zstd-fast-level -50" \
	"--zstd-level -100"; do
	# shellcheck disable=SC2086 # two flags and their values
	start_daemon "$T/z.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
		--db "$T/z.db" $args
	"$REPLAY" "${AGENT##*:}" "$T/raw.gt" || fail "$args: replay"
	curl -sf -o "$T/z.gt" "http://$HTTP$W" || fail "$args: download"
	[ "$args" = "--zstd-level 0" ] && cp "$T/z.gt" "$T/ref.gt"
	cmp -s "$T/ref.gt" "$T/z.gt" || fail "$args: download differs from the raw store's"
	curl -sf -H 'Accept-Encoding: zstd' -o "$T/z.zst" "http://$HTTP$W" ||
		fail "$args: zstd download"
	zstd -q -d -c "$T/z.zst" >"$T/z.out" || fail "$args: zstd -d failed"
	cmp -s "$T/ref.gt" "$T/z.out" || fail "$args: zstd download differs"
	if [ "$args" = "--zstd-level 0" ]; then
		stop_daemon
		rm -f "$T/z.db" "$T/z.db-wal" "$T/z.db-shm"
		continue
	fi
	zg=$(sqlite3 "$T/z.db" "SELECT count(*) FROM generations
		WHERE codec = 'zstd' AND stored_bytes < bytes")
	[ "$zg" -ge 1 ] || fail "$args: no generation stored as zstd"
	m=$(curl -sf "http://$HTTP/metrics" |
		sed -n 's/^gentrace_store_codec_generations_total{codec="zstd",level="configured"} //p')
	[ "$m" = "$zg" ] || fail "$args: metric says $m zstd generations, the rows $zg"
	echo "ok: $args: $zg zstd rows, $(sqlite3 "$T/z.db" "SELECT sum(stored_bytes) || ' of ' || sum(bytes) FROM generations") bytes stored, the same download"
	stop_daemon
	rm -f "$T/z.db" "$T/z.db-wal" "$T/z.db-shm"
done
echo "ok: negative levels round trip; bad levels refused"
