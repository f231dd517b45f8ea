#!/bin/sh
# make bench-tls in smoke mode (bench/tls_floor.c), so the TLS floor cannot
# rot: one short round of B2 over TLS beside plain text (bench_ingest b2tls)
# and of D1 over HTTPS (bench_download tls). It fails when either program
# fails or a floor line is missing or out of range (a cipher cost of 0, a
# ceiling outside (0, 1]); the figures themselves never fail it. Both
# programs stop every process they start by PID.
. "$top_srcdir/tests/integration/lib.sh"
B=$top_builddir/bench
skip_unless certtool curl "$GENTRACED" "$B/bench_ingest" "$B/bench_download"

BENCH_TLS_ROUNDS=1 "$B/bench_ingest" b2tls 8 >"$T/b2.out" 2>"$T/b2.err" ||
	fail "bench_ingest b2tls: $(tail -n 5 "$T/b2.err")"
BENCH_D1_ROUNDS=1 "$B/bench_download" 8 tls >"$T/d1.out" 2>"$T/d1.err" ||
	fail "bench_download tls: $(tail -n 5 "$T/d1.err")"
cat "$T/b2.out" "$T/d1.out"
for id in B2 D1; do
	f=$T/$(echo "$id" | tr 'A-Z' 'a-z').out
	for l in TLS TLS-cpu TLS-aead TLS-ceiling TLS-ceiling-wall \
		TLS-cpu-of-ceiling TLS-wall-of-ceiling; do
		grep -q "^BENCH id=$id-$l value=" "$f" || fail "no $id-$l line"
	done
	grep -q "^tls_floor: $id-TLS cipher AES-..." "$f" ||
		grep -q "^tls_floor: $id-TLS cipher CHACHA20" "$f" ||
		fail "$id: no cipher account"
	grep -q "^tls_floor: $id-TLS .*load average" "$f" || fail "$id: no load average"
	# The floor is a cost and the ceilings are ratios of at most 1.
	awk -v id="$id" '
		$2 == "id=" id "-TLS-aead" { split($3, v, "="); if (v[2] + 0 <= 0) bad = 1; n++ }
		$2 ~ "^id=" id "-TLS-ceiling" { split($3, v, "=");
			if (v[2] + 0 <= 0 || v[2] + 0 > 1) bad = 1; n++ }
		END { exit bad || n != 3 }' "$f" || fail "$id: floor out of range"
done
grep -q "^tls_floor: B2-TLS server's TLS thread alone" "$T/b2.out" ||
	fail "B2: no loop-thread account"
echo "ok: the TLS floor is measured and printed for B2 and D1"
