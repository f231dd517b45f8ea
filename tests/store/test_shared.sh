#!/bin/bash
# test_shared.sh: runs the shared-backend tests (store/s3.c, store/pg*.c,
# store/segment.c) against one private PostgreSQL + Swift s3api cluster that
# scripts/cluster-up starts on loopback ports for this run, and stops by PID
# at the end; also tests/integration/test_shared_door (real daemons on that
# cluster). Skips (77) only when the servers are not installed; a cluster
# that is installed but does not come up is a failure.
set -u
build=${top_builddir:-.}
src=${top_srcdir:-.}
env_file=$(mktemp)
trap 'rm -f "$env_file"' EXIT
"$src/scripts/cluster-up" >"$env_file"
rc=$?
if [ $rc = 3 ]; then
	echo "SKIP: PostgreSQL/Swift not installed (./setup.sh installs them)"
	exit 77
fi
[ $rc = 0 ] || { echo "FAIL: scripts/cluster-up exited $rc"; exit 1; }
. "$env_file"
trap '"$src/scripts/cluster-down" "$GENTRACE_CLUSTER_DIR"; rm -f "$env_file"' EXIT
export GENTRACE_CLUSTER_SCRIPT="$src/scripts/cluster-up"

fail=0
for t in ${GENTRACE_SHARED_TESTS:-test_s3 test_pg_cat test_segment test_storage test_storage_search test_shared_retain test_pg_live ../integration/test_shared_door}; do
	bin=$build/tests/store/$t
	[ -x "$bin" ] || { echo "FAIL: $bin not built"; fail=1; continue; }
	echo "== $t"
	"$bin" || { echo "FAIL: $t"; fail=1; }
done
exit $fail
