# bench/summary.awk: the summary of bench/quick and bench/limit. Input: raw
# BENCH lines, each prefixed with its repeat number. Output: one BENCH line
# per figure (id, unit, baseline name): the median, min and max of its
# repeats and the median of its baseline over the same repeats; ratio =
# median / median baseline. Bars of issue 19 where they are tighter than a
# program's own (B2 >= 0.8 of iperf3).
function med(s,   n, a, i, j, t) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	lo = a[1]; hi = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	delete f
	for (i = 3; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = substr($i, length(k) + 2); f[k] = v }
	b = f["baseline"]; bn = b; sub(/:[^:]*$/, "", bn); bv = substr(b, length(bn) + 2)
	key = f["id"] SUBSEP f["unit"] SUBSEP bn
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key; bar[key] = f["bar"] }
	vals[key] = vals[key] " " f["value"]
	bvals[key] = bvals[key] " " bv
	if (bn != "none" && (bv == "missing" || bv + 0 <= 0)) miss[key] = 1
}
END {
	for (i = 1; i <= nk; i++) {
		key = order[i]; split(key, p, SUBSEP)
		v = med(vals[key]); vlo = lo; vhi = hi
		if (miss[key]) { bs = "missing"; r = "nan" }
		else if (p[3] == "none") { bs = "0"; r = "1" } # a figure without a baseline
		else { bm = med(bvals[key]); bs = sprintf("%g", bm); r = sprintf("%.3f", v / bm) }
		br = bar[key]; if (p[1] == "B2") br = ">=0.8"
		g = br; sub(/^[<>=]*/, "", g); g += 0
		pass = 0
		if (br ~ /^<[0-9.]+ms$/) { g = br; gsub(/[^0-9.]/, "", g); pass = (v + 0 < g + 0) }
		else if (r != "nan") {
			if (br ~ /^<=/) pass = (r + 0 <= g); else if (br ~ /^</) pass = (r + 0 < g)
			else if (br ~ /^>=/) pass = (r + 0 >= g); else if (br ~ /^[0-9.]+$/) pass = (r + 0 >= g)
			else pass = 1
		}
		n = split(vals[key], tmp, " ")
		printf "BENCH id=%s value=%g min=%g max=%g reps=%d unit=%s baseline=%s:%s ratio=%s bar=%s pass=%d\n",
			p[1], v, vlo, vhi, n, p[2], p[3], bs, r, br, pass
	}
}
