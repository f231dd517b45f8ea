# tests/lib/common.sh: what every shell test library shares (sourced by
# tests/integration/lib.sh and tests/system/lib.sh, so by every shell test):
# where the built programs are, skipping, and showing logs on failure.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
GENTRACED=$top_builddir/daemon/gentraced
DEMO=$top_builddir/examples/gentrace-demo
GENTRACE=$top_builddir/tools/gentrace

# skip_unless BIN...: exit 77 (skipped) unless each is a command on PATH or
# an executable path.
skip_unless() {
	for b in "$@"; do
		command -v "$b" >/dev/null 2>&1 || [ -x "$b" ] || {
			echo "SKIP: $b not available"
			exit 77
		}
	done
}

# show_logs N: the last N lines of every *.log in $T, on stderr.
show_logs() {
	for f in "$T"/*.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; tail -n "$1" "$f" >&2; }
	done
}
