#!/usr/bin/env python3
"""chrome_go.py CHROME.json: counts what a Chrome export of a Go session
holds, with Python's json module (not the writer's code), as
"regions=R tasks=T logs=L": user regions (B on goroutine threads, tid below
2^48; GC and STW live on pseudo-threads above), task begins, logs. Events
flagged gentrace.begun_before_window / closed_at_window_end are synthetic
and not counted. Exits 1 if a task's begins and ends, or a thread's region
begins and ends, do not pair up.
"""
import collections
import json
import sys

doc = json.load(open(sys.argv[1], encoding="utf-8"))
regions = tasks = logs = 0
open_tasks = collections.Counter()
depth = collections.Counter()
for ev in doc["traceEvents"]:
    ph = ev.get("ph")
    args = ev.get("args", {})
    synthetic = args.get("gentrace.begun_before_window") or args.get(
        "gentrace.closed_at_window_end")
    if ph in ("B", "E"):
        depth[(ev["pid"], ev["tid"])] += 1 if ph == "B" else -1
        if ph == "B" and ev["tid"] < (1 << 48) and not synthetic:
            regions += 1
    elif ph in ("b", "e"):
        open_tasks[(ev["pid"], ev["id"])] += 1 if ph == "b" else -1
        if ph == "b" and not synthetic:
            tasks += 1
    elif ph == "i" and ev.get("cat") == "log":
        logs += 1
print("regions=%d tasks=%d logs=%d" % (regions, tasks, logs))
bad = [k for k, v in open_tasks.items() if v] + [k for k, v in depth.items() if v]
if bad:
    print("unpaired: %s" % bad[:10], file=sys.stderr)
    sys.exit(1)
