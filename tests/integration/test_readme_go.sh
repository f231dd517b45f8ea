#!/bin/sh
# README.md's "Tracing a Go service" as written: its module lines, its
# main.go and its build/curl lines run in a clean directory against a real
# gentraced, and the downloaded window is read by the Go tools. The only
# substitutions, all explicit:
#   - the checkout is a directory holding a `go` symlink to this tree's go/
#     (README's `src=$PWD` is "the checkout's root");
#   - README's :7171 becomes the daemon's free HTTP port, and the program
#     gets GENTRACE_ADDR for its free agent port;
#   - `go tool trace w.trace` (it serves a viewer and opens a browser)
#     becomes `go tool trace -d=parsed w.trace`, which reads the same file
#     and prints its events instead.
. "$top_srcdir/tests/integration/lib.sh"
skip_unless curl python3 "$GENTRACED"
if ! command -v go >/dev/null 2>&1; then
	echo "SKIP: no Go toolchain on PATH"
	exit 77
fi
minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$minor" ] || [ "$minor" -lt 22 ]; then
	echo "SKIP: $(go env GOVERSION) is older than the Go client's 1.22"
	exit 77
fi
README=$top_srcdir/README.md
X="python3 $top_srcdir/tests/integration/readme_blocks.py $README"
SEC="Tracing a Go service"

W=$T/checkout
mkdir -p "$W/myservice"
ln -s "$(cd "$top_srcdir" && pwd)/go" "$W/go"
$X "$SEC" go >"$W/myservice/main.go" || fail "no Go example"
$X "$SEC" sh >"$T/go.sh" || fail "no sh blocks"
grep -q 'gentrace.Start' "$W/myservice/main.go" || fail "Go example lost gentrace.Start"
grep -q 'gentrace.Stop' "$W/myservice/main.go" || fail "Go example lost gentrace.Stop"
grep -q 'go tool trace w.trace' "$T/go.sh" || fail "README no longer opens w.trace with go tool trace"

# Never let the build reach for a module proxy or the user's settings.
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off
export GOCACHE="${GOCACHE:-$(go env GOCACHE)}"

start_daemon "$T/d.log" --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
	--db "$T/g.db"
HPORT=${HTTP##*:}
sed -e "s/:7171/:$HPORT/g" \
	-e 's/^go tool trace w\.trace$/go tool trace -d=parsed w.trace >parsed.txt/' \
	"$T/go.sh" >"$T/run.sh"
echo "--- README blocks as run (agent $AGENT, http $HPORT)"
cat "$T/run.sh"

cd "$W" || fail "cd"
GENTRACE_ADDR=$AGENT timeout 120 bash -eu "$T/run.sh" >"$T/run.log" 2>&1 ||
	fail "Go section: $(tail -n 30 "$T/run.log")"
[ -s myservice/w.trace ] || fail "w.trace is empty"
head -c 16 myservice/w.trace | grep -q 'go 1\.' || fail "w.trace lacks the Go trace header"
# The program's own task, region and log came through the daemon.
grep -q 'handle_request' myservice/parsed.txt || fail "the window lacks the handle_request region"
grep -q 'order' myservice/parsed.txt || fail "the window lacks the order log"
n=$(grep -c 'handle_request' myservice/parsed.txt)
echo "ok: README's Go section ran; go tool trace read $n handle_request events"
