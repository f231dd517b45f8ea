#!/bin/bash
# tests/go/run.sh: the Go client's tests, run by make check.
#   go/        unit tests and the package example (no daemon needed)
#   tests/go/  the client against the built gentraced on free loopback
#              ports, read back with golang.org/x/exp/trace (a module of
#              its own, so the client keeps no dependency)
# Needs Go 1.22 or later for go/ and Go 1.26 for tests/go (the x/exp
# reader of Go 1.26 traces); skipped (77) without a Go toolchain.
set -euo pipefail
: "${top_srcdir:?}" "${top_builddir:?}"
if ! command -v go >/dev/null 2>&1; then
	echo "SKIP: no Go toolchain on PATH"
	exit 77
fi
v=$(go env GOVERSION) # go1.26.8
minor=${v#go1.}
minor=${minor%%.*}
minor=${minor%%[!0-9]*}
if [ -z "$minor" ] || [ "$minor" -lt 22 ]; then
	echo "SKIP: $v is older than Go 1.22"
	exit 77
fi
export GENTRACED="$top_builddir/daemon/gentraced"
export GENTRACE_CLI="$top_builddir/tools/gentrace"
# Never let the traced client find a real daemon of the machine.
unset GENTRACE_ADDR GENTRACE_SERVICE GENTRACE_TAGS GENTRACE_TOKEN
# The race detector (it needs cgo) checks the client's goroutines, the
# runtime's trace reader against the sender, in every test.
race=""
[ "$(go env CGO_ENABLED)" = 1 ] && command -v gcc >/dev/null 2>&1 && race=-race
echo "== go test $race ./... in go/ ($v)"
(cd "$top_srcdir/go" && go vet ./... && go test $race -count=1 ./...)
if [ "$minor" -lt 26 ]; then
	echo "SKIP: tests/go needs Go 1.26 (have $v); go/ passed"
	exit 77
fi
echo "== go test ./... in tests/go"
(cd "$top_srcdir/tests/go" && go mod download && go vet ./... &&
	go test $race -count=1 -timeout 300s ./...)
