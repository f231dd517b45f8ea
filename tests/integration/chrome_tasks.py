#!/usr/bin/env python3
"""chrome_tasks.py CHROME.json DUMP.txt: checks a Chrome export against the
native trace it came from, with Python's own JSON parser (not the writer's).

DUMP.txt is `gentrace dump` of the same window. Checks: every task_begin,
task_end, region_begin and region_end of the dump appears once in the JSON
(synthetic events, flagged gentrace.begun_before_window or
gentrace.closed_at_window_end, are counted apart), and begins and ends pair
up per (pid, task id) and per (pid, tid) for regions. Prints the counts.
"""
import collections
import json
import sys

doc = json.load(open(sys.argv[1], encoding="utf-8"))
want = collections.Counter()
for line in open(sys.argv[2], encoding="utf-8", errors="replace"):
    f = line.split("\t")
    if len(f) > 3:
        want[{"region_begin_stack": "region_begin"}.get(f[3], f[3])] += 1

got = collections.Counter()
synth = collections.Counter()
tasks = collections.Counter()
names = {}
depth = collections.Counter()
bad = []
for ev in sorted(doc["traceEvents"], key=lambda e: (e.get("ts", 0))):
    ph = ev.get("ph")
    args = ev.get("args", {})
    flagged = args.get("gentrace.begun_before_window") or args.get(
        "gentrace.closed_at_window_end")
    kind = {"b": "task_begin", "e": "task_end", "B": "region_begin",
            "E": "region_end"}.get(ph)
    if not kind:
        continue
    (synth if flagged else got)[kind] += 1
    if ph in "be":
        key = (ev["pid"], ev["id"])
        tasks[key] += 1 if ph == "b" else -1
        if ph == "b":
            names[key] = ev.get("name")
        elif not flagged and ev.get("name") != names.get(key):
            bad.append("task %s ended as %r, began as %r" %
                       (key, ev.get("name"), names.get(key)))
    else:
        depth[(ev["pid"], ev["tid"])] += 1 if ph == "B" else -1

for k in ("task_begin", "task_end", "region_begin", "region_end"):
    if got[k] != want[k]:
        bad.append("%s: %d in the JSON, %d in the trace" % (k, got[k], want[k]))
bad += ["task %s: %d unmatched begins" % (k, v) for k, v in tasks.items() if v]
bad += ["thread %s: depth %d at the end" % (k, v) for k, v in depth.items() if v]
print("tasks=%d/%d regions=%d/%d synthetic=%s" % (
    got["task_begin"], got["task_end"], got["region_begin"],
    got["region_end"], dict(synth)))
if bad:
    print("\n".join(bad[:20]), file=sys.stderr)
    sys.exit(1)
