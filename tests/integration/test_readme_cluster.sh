#!/bin/sh
# README.md's "Running several daemons" block as written: its own throw-away
# PostgreSQL + Swift (scripts/cluster-up), two gentraced on that one store,
# the demo with a failover list, a session list from daemon B and a window
# from daemon A, then cluster-down. The only substitutions, all explicit:
#   - `./setup.sh` is not run again (this tree is already set up);
#   - the four ports (7170, 7171, 7180, 7181) become free ones;
#   - `build/` and `scripts/` are symlinks to this build and source tree;
#   - a trap stops the block's daemons and cluster if the block fails
#     half-way (on success the block stops them itself).
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 "$DEMO" "$GENTRACED" "$GENTRACE"
# What scripts/cluster-up needs (it exits 3 without them).
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 ||
	! command -v swift-proxy-server >/dev/null 2>&1 ||
	! command -v memcached >/dev/null 2>&1; then
	echo "SKIP: PostgreSQL/Swift not installed (./setup.sh installs them)"
	exit 77
fi
README=$top_srcdir/README.md
W=$T/work
mkdir -p "$W"
ln -s "$(cd "$top_builddir" && pwd)" "$W/build"
ln -s "$(cd "$top_srcdir" && pwd)/scripts" "$W/scripts"
python3 "$top_srcdir/tests/integration/readme_blocks.py" "$README" \
	"Running several daemons" sh >"$T/cluster.sh" || fail "no cluster block"
grep -q 'cluster-up' "$T/cluster.sh" || fail "the block lost cluster-up"

# Ports outside the ephemeral range: the block's daemons bind them later.
set -- $("$top_srcdir/scripts/free-ports" 4)
P70=$1 P71=$2 P80=$3 P81=$4
{
	echo 'trap '"'"'rc=$?; if [ $rc != 0 ]; then kill ${A:-} ${B:-} 2>/dev/null; wait; [ -n "${GENTRACE_CLUSTER_DIR:-}" ] && scripts/cluster-down "$GENTRACE_CLUSTER_DIR"; fi'"'"' EXIT'
	sed -e 's|^\./setup\.sh|: ./setup.sh|' \
		-e "s/:7170/:$P70/g" -e "s/:7171/:$P71/g" \
		-e "s/:7180/:$P80/g" -e "s/:7181/:$P81/g" "$T/cluster.sh"
} >"$W/cluster.sh"
echo "--- README block as run"
cat "$W/cluster.sh"

cd "$W" || fail "cd"
timeout 600 bash -eu cluster.sh >"$T/out.log" 2>"$T/err.log" ||
	fail "cluster block: $(tail -n 20 "$T/err.log") $(tail -n 5 "$T/out.log")"
echo "--- its output"
cat "$T/out.log"
# Daemon B lists the demo's one session, with the events it stored.
python3 - "$T/out.log" <<'PY' || fail "daemon B did not list the demo session"
import json, sys
text = open(sys.argv[1]).read()
start = text.index("{")
doc, _ = json.JSONDecoder().raw_decode(text[start:])
rows = doc.get("agents") or doc.get("sessions") or []
assert any(r.get("service") == "demo" and r.get("events", 0) > 0 for r in rows), doc
PY
[ -s w.trace ] || fail "daemon A's window is empty"
"$GENTRACE" stat w.trace >"$T/stat.log" 2>&1 || fail "gentrace stat: $(tail -n 5 "$T/stat.log")"
grep -q 'service=demo' "$T/stat.log" || fail "the window is not the demo's: $(head -n 5 "$T/stat.log")"
echo "ok: README cluster block ran; B listed the demo, A's window holds it"
