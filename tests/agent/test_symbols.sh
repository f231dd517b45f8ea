#!/bin/bash
# libgentrace.so must export only gt_* symbols (the rest is hidden).
set -eu
so="$top_builddir/agent/.libs/libgentrace.so"
[ -f "$so" ] || { echo "missing $so"; exit 1; }
syms=$(nm -D --defined-only "$so" | awk '{print $3}')
[ -n "$syms" ] || { echo "no symbols exported"; exit 1; }
bad=$(echo "$syms" | grep -v '^gt_[a-z]' || true)
if [ -n "$bad" ]; then echo "unexpected exports:"; echo "$bad"; exit 1; fi
for f in gt_start gt_stop gt_instant gt_region_begin gt_region_end gt_counter \
	gt_log gt_task_begin gt_task_end gt_thread_name gt_stats gt_snapshot gt_config_init; do
	echo "$syms" | grep -qx "$f" || { echo "missing export $f"; exit 1; }
done
# The agent never aborts, exits or prints inside its host: none of those
# may even be linked in (proto/check.h keeps the daemon's abort header-only).
imports=$(nm -D --undefined-only "$so" | awk '{print $2}' | sed 's/@.*//')
for f in abort exit _exit __assert_fail printf fprintf puts fputs perror \
	vfprintf vprintf putchar; do
	if echo "$imports" | grep -qx "$f"; then
		echo "libgentrace.so imports $f (the agent must never abort, exit or print)"
		exit 1
	fi
done
# Stack symbolization (libdw, sym/) belongs to the daemon and the CLI: the
# agent names no frames and must not pull elfutils into its hosts.
if objdump -p "$so" 2>/dev/null | grep -E 'NEEDED +lib(dw|elf)\.' >/dev/null; then
	echo "libgentrace.so links libdw/libelf (only sym/ may)"
	exit 1
fi
# The static archive must carry proto inside (self-contained).
a="$top_builddir/agent/.libs/libgentrace.a"
nm "$a" | grep -q ' T gtp_manifest_compute' || { echo "libgentrace.a lacks proto"; exit 1; }
echo "ok: $(echo "$syms" | wc -l) gt_* exports"
