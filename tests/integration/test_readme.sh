#!/bin/sh
# README.md as written: its C example, build lines and curl commands run in a
# clean directory against a real gentraced and the demo service, so the quick
# start cannot rot. The only substitutions, all explicit:
#   - the daemon listens on free ports: README's :7171 and 127.0.0.1:7170
#     become those ports (sed below; the agent gets GENTRACE_ADDR);
#   - `build/` is a symlink to this build tree;
#   - pkg-config and the loader see this build's agent, staged with
#     `make install-agent DESTDIR=...` (PKG_CONFIG_PATH, PKG_CONFIG_SYSROOT_DIR,
#     LD_LIBRARY_PATH) instead of the copy ./setup.sh puts in /usr/local.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl cc pkg-config python3 "$DEMO" "$GENTRACED" "$GENTRACE"
# A user builds app.c with plain cc: against a sanitizer build of the agent
# that cannot link or start (its runtime must come first), so only the plain
# build (what ./setup.sh installs) runs this.
if grep -q '^SAN_CFLAGS = .*-fsanitize' "$top_builddir/Makefile"; then
	echo "SKIP: sanitizer build; README's cc lines need the plain agent"
	exit 77
fi
README=$top_srcdir/README.md
X="python3 $top_srcdir/tests/integration/readme_blocks.py $README"

W=$T/work
mkdir -p "$W"
ln -s "$(cd "$top_builddir" && pwd)" "$W/build"
$X "Tracing your service" c >"$W/app.c" || fail "no C example"
$X "Tracing your service" sh >"$T/trace.sh" || fail "no build lines"
$X "What the demo shows" sh >"$T/demo.sh" || fail "no curl block"
grep -q 'gt_start' "$W/app.c" || fail "C example lost gt_start"
grep -q 'rc != 0\|< 0\|!= 0' "$W/app.c" || fail "C example ignores gt_start's return"

# Stage this build's agent as `make install` lays it out.
make -s -C "$top_builddir" install-agent DESTDIR="$T/root" >"$T/install.log" 2>&1 ||
	fail "install-agent: $(tail -n 5 "$T/install.log")"
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/agent/gentrace.pc")
case $libdir in *'${'*) libdir=$(sed -n 's/^prefix=//p' "$top_builddir/agent/gentrace.pc")/lib ;; esac
[ -f "$T/root$libdir/pkgconfig/gentrace.pc" ] || fail "no staged gentrace.pc under $T/root$libdir"
PKG_CONFIG_PATH=$T/root$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$T/root
LD_LIBRARY_PATH=$T/root$libdir
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH

# A port nothing listens on, for the run without a daemon.
closed=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
APORT=${AGENT##*:}
HPORT=${HTTP##*:}
GENTRACE_ADDR=$AGENT GENTRACE_SERVICE=gentrace-demo "$DEMO" --duration 60 --quiet \
	>"$T/demo.log" 2>&1 &
PIDS="$PIDS $!"
# The demo section expects a few committed generations.
i=0
until curl -sf "http://$HTTP/v1/agents" | grep -q gentrace-demo; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "demo never connected"
	sleep 0.05
done
sleep 2.5

subst() { sed -e "s/:7171/:$HPORT/g" -e "s/127\.0\.0\.1:7170/127.0.0.1:$APORT/g" "$1"; }
subst "$T/demo.sh" >"$W/demo.sh"
subst "$T/trace.sh" >"$W/trace.sh"
echo "--- README blocks as run (ports $APORT, $HPORT)"
cat "$W/demo.sh" "$W/trace.sh"

cd "$W" || fail "cd"
GENTRACE_ADDR=127.0.0.1:$APORT bash -eu demo.sh >"$T/demo-out.log" 2>&1 ||
	fail "demo block: $(tail -n 20 "$T/demo-out.log")"
[ -s last30s.gentrace ] && [ -s w.json ] || fail "demo block downloads empty"
python3 -c 'import json,sys; json.load(open("w.json"))' || fail "w.json is not JSON"

GENTRACE_ADDR=127.0.0.1:$APORT bash -eu trace.sh >"$T/trace-out.log" 2>&1 ||
	fail "tracing block: $(tail -n 20 "$T/trace-out.log")"
[ -s app.gentrace ] || fail "no app.gentrace"
python3 "$top_srcdir/tests/integration/perfetto_decode.py" app.pftrace >"$T/app-pf.json" ||
	fail "app.pftrace is not a Perfetto trace"
grep -q '"slice_begin": [1-9]' "$T/app-pf.json" || fail "app.pftrace lacks the region: $(cat "$T/app-pf.json")"
python3 "$top_srcdir/tests/integration/perfetto_decode.py" w.pftrace >/dev/null ||
	fail "w.pftrace is not a Perfetto trace"
grep -qi 'gen' "$T/trace-out.log" || fail "stat printed nothing: $(cat "$T/trace-out.log")"
# The app's own events made it: handle_request is in its trace.
"$GENTRACE" dump app.gentrace | grep -q handle_request || fail "app trace lacks its region"
# app runs as built; app-static carries libgentrace itself.
ldd ./app | grep -q 'libgentrace' || fail "app is not linked to libgentrace.so"
if ldd ./app-static | grep -q 'libgentrace'; then fail "app-static still needs libgentrace.so"; fi
nm ./app-static | grep -q ' T gt_start' || fail "app-static lacks gt_start"
env -u LD_LIBRARY_PATH GENTRACE_ADDR=127.0.0.1:$APORT ./app-static || fail "app-static failed"

# No daemon: the program exits at once (bar 200 ms, asserted at 5x).
t0=$(date +%s%N)
GENTRACE_ADDR=127.0.0.1:$closed ./app || fail "app without daemon failed"
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -lt 1000 ] || fail "app without a daemon took $ms ms"
echo "ok: README blocks ran; app without daemon exited in $ms ms"
