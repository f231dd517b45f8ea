#!/bin/sh
# Retention pins on the shared store (real PostgreSQL + Swift s3api from
# scripts/cluster-up): a pin made through daemon A keeps its window from the
# retention that daemon B runs (A runs none), while B deletes the unpinned
# service streamed at the same time; B lists A's pin and counts it in its
# metrics; deleting the pin through B hands the rows back to retention; the
# cap answers 507 on either daemon.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl psql python3 "$DEMO" "$GENTRACED"

cluster_start
SQL() { psql -qtA "$GENTRACE_CATALOG" -c "$1"; }
count() {
	SQL "SELECT count(*) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = '$1'"
}

umask 077
printf 'admin-%s\n' "$$" >"$T/admin.token"
A="Authorization: Bearer admin-$$"
shared="--catalog $GENTRACE_CATALOG --objects $GENTRACE_OBJECTS/pins"
shared="$shared --segment-max-age 200ms --admin-token-file $T/admin.token"
# A: no retention of its own. B: --retain 2s, so every deletion is B's.
start_daemon "$T/a.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id pins-a
A_HTTP=$HTTP A_AGENT=$AGENT
start_daemon "$T/b.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id pins-b --retain 2s --max-db-size 1G
B_HTTP=$HTTP

code=$(curl -s -o "$T/pin.json" -w '%{http_code}' -X POST -H "$A" \
	--data-binary '{"service":"keep","from":"now-1m","to":"now+1h","reason":"shared"}' \
	"http://$A_HTTP/v1/pins")
[ "$code" = 201 ] || fail "pin through A: HTTP $code $(cat "$T/pin.json")"
id=$(sed -n 's/^{"id":\([0-9]*\),.*/\1/p' "$T/pin.json")
curl -sf "http://$B_HTTP/v1/pins" | grep -q "\"id\":$id,\"service\":\"keep\"" ||
	fail "B does not list A's pin: $(curl -s "http://$B_HTTP/v1/pins")"

for svc in keep drop; do
	GENTRACE_ADDR=$A_AGENT GENTRACE_SERVICE=$svc GENTRACE_PERIOD_MS=200 \
		"$DEMO" --duration 2 --threads 2 --quiet >"$T/demo-$svc.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "D_$svc=\$!"
done
wait "$D_keep" || fail "demo keep"
wait "$D_drop" || fail "demo drop"
sleep 1 # the last segments close (200 ms) and are cataloged
kept=$(count keep)
[ "$kept" -ge 5 ] || fail "keep stored only $kept generations"
# B's retention may already have deleted some of drop (or all of it, on a
# loaded machine where the demo ran long): its session row still says how
# many generations were committed.
drop_gens=$(SQL "SELECT coalesce(max(last_gen), -1) FROM gt_sessions WHERE service = 'drop'")
[ "$drop_gens" -ge 4 ] || fail "drop committed only up to generation $drop_gens"
# B's retention (5 s tick) deletes drop; keep stays whole.
i=0
while [ "$(count drop)" != 0 ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "B never deleted drop ($(count drop) left)"
	sleep 0.05
done
[ "$(count keep)" = "$kept" ] || fail "keep lost generations: $(count keep) of $kept"
sleep 6 # another pass of B's
[ "$(count keep)" = "$kept" ] || fail "keep lost generations later: $(count keep) of $kept"
stored=$(SQL "SELECT sum(g.stored_bytes) FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id WHERE s.service = 'keep'")
curl -sf "http://$B_HTTP/metrics" >"$T/metrics"
grep -qx 'gentrace_pins 1' "$T/metrics" || fail "B metrics: $(grep gentrace_pin "$T/metrics")"
grep -qx "gentrace_pinned_bytes $stored" "$T/metrics" ||
	fail "B pinned bytes, want $stored: $(grep gentrace_pin "$T/metrics")"
curl -sf "http://$A_HTTP/v1/pins" | grep -q "\"bytes\":$stored}" ||
	fail "A's listing bytes: $(curl -s "http://$A_HTTP/v1/pins")"

# The cap (--max-db-size 1G: a quarter) is far; a daemon with a tiny cap
# refuses a pin on new rows with 507 and stores nothing.
start_daemon "$T/c.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	$shared --daemon-id pins-c --max-pinned-bytes 1K
C_HTTP=$HTTP
sess=$(SQL "SELECT session FROM gt_sessions WHERE service = 'keep'")
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$A" "http://$C_HTTP/v1/pins/$id")
[ "$code" = 204 ] || fail "DELETE through C: HTTP $code"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST -H "$A" \
	--data-binary "{\"session\":\"$sess\",\"from\":\"now-1h\",\"to\":\"now\",\"reason\":\"big\"}" \
	"http://$C_HTTP/v1/pins")
[ "$code" = 507 ] || fail "over the cap: HTTP $code $(cat "$T/out")"
[ "$(SQL 'SELECT count(*) FROM gt_retention_pins')" = 0 ] || fail "507 left a row"

# Without the pin, B's next pass deletes keep too.
i=0
while [ "$(count keep)" != 0 ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "keep kept after its pin went ($(count keep) left)"
	sleep 0.05
done
echo "ok: a pin made on A held B's retention; deleted on C, B deleted the rows"
