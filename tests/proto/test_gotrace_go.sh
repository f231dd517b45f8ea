#!/bin/sh
# The Go trace reader (proto/gotrace.c, through tests/proto/gocount) on
# traces the real Go runtime writes at test time: tests/goreader/gen records a
# workload with known regions, tasks (handed between goroutines) and logs
# over three generations; gocount's counts must equal what the program
# recorded and what golang.org/x/exp/trace (tests/goreader/xtrace) reads.
#
# Versions: the installed toolchain (1.26) always; Go 1.22, 1.23 and 1.25
# too (GENTRACE_GO_TOOLCHAINS, fetched by the go command as modules) when
# they can be had: a version whose toolchain cannot be fetched is reported
# and skipped, the installed one never is.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
GO=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$GO" ] || { echo "SKIP: no go toolchain"; exit 77; }
GOCOUNT=$top_builddir/tests/proto/gocount
T=$(mktemp -d "${TMPDIR:-/tmp}/gt-gotrace-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$top_srcdir/tests/goreader/xtrace" && GOTOOLCHAIN=local "$GO" build -o "$T/xtrace" .) ||
	fail "building tests/goreader/xtrace"

for tc in local ${GENTRACE_GO_TOOLCHAINS-go1.22.12 go1.23.12 go1.25.5}; do
	if ! (cd "$top_srcdir/tests/goreader/gen" &&
		GOTOOLCHAIN=$tc "$GO" build -o "$T/gen-$tc" . >"$T/build-$tc.log" 2>&1); then
		[ "$tc" = local ] && fail "building tests/goreader/gen: $(cat "$T/build-$tc.log")"
		echo "skip $tc: toolchain not available ($(tail -n 1 "$T/build-$tc.log"))"
		continue
	fi
	want=$("$T/gen-$tc" -o "$T/$tc.trace" -duration 2200ms) || fail "$tc: gen"
	ver=$(head -c 13 "$T/$tc.trace")
	got=$("$GOCOUNT" "$T/$tc.trace") || fail "$tc ($ver): gocount: $got"
	x=$("$T/xtrace" "$T/$tc.trace") || fail "$tc ($ver): xtrace"
	echo "$tc ($ver): recorded $want; x/exp/trace $x; gentrace $got"
	[ "$x" = "$want" ] || fail "$tc: x/exp/trace disagrees with the program"
	case "$got" in
	"$want "*) ;;
	*) fail "$tc: gentrace read '$got', the program recorded '$want'" ;;
	esac
	gens=$(echo "$got" | sed -n 's/.* gens=\([0-9]*\).*/\1/p')
	[ "$gens" -ge 2 ] || fail "$tc: only $gens generation(s): nothing crossed one"
done
echo ok
