#!/usr/bin/env python3
"""spans_truth.py DUMP QUERY: how many spans of a trace a search QUERY
should find, from `gentrace dump` of that trace (gentrace's own decoder,
not the search's code), for the search tests (test_search.sh,
test_shared_search.sh).

Regions pair per (session, thread) in dump order, tasks per (session, task
id). QUERY is the search's query string; its name (exact, or a prefix with a
trailing *), min, max, from and to (as NNNns/us/ms/s; from=now... is taken
as no bound) filter the spans. Prints "LO HI": LO spans clearly match, HI
adds those within 1 ms of a duration bound (the dump's times and the
summary's tick-rate durations may round a few ns apart; no span of the
tests lies that close, but a check must not hang on it).
"""
import calendar
import re
import sys
import urllib.parse

NEAR_NS = 10**6


def wall_ns(ts):  # 2026-01-02T03:04:05.123456789Z
    whole, frac = ts.rstrip("Z").split(".")
    secs = calendar.timegm(tuple(map(int, re.split("[-T:]", whole))))
    return secs * 10**9 + int(frac.ljust(9, "0"))


def dur_ns(v):
    m = re.fullmatch(r"(\d+)(ns|us|ms|s)", v)
    if not m:
        sys.exit("spans_truth: cannot read duration %r" % v)
    return int(m[1]) * {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}[m[2]]


def spans(path):
    out, stacks, tasks = [], {}, {}
    for line in open(path, encoding="utf-8", errors="replace"):
        f = line.rstrip("\n").split("\t")
        if len(f) < 5:
            continue
        t, sess, thread, kind, name = wall_ns(f[0]), f[1], f[2], f[3], f[4]
        args = f[5] if len(f) > 5 else ""
        if kind in ("region_begin", "region_begin_stack"):
            stacks.setdefault((sess, thread), []).append((name, t))
        elif kind == "region_end" and stacks.get((sess, thread)):
            n, t0 = stacks[(sess, thread)].pop()
            out.append((n, t0, t - t0))
        elif kind == "task_begin":
            tasks[(sess, args.split()[0])] = (name, t)
        elif kind == "task_end" and (sess, args) in tasks:
            n, t0 = tasks.pop((sess, args))
            out.append((n, t0, t - t0))
    return out


def main():
    q = dict(urllib.parse.parse_qsl(sys.argv[2]))
    name = q.get("name")
    lo = dur_ns(q.get("min", "0ns"))
    hi = dur_ns(q["max"]) if "max" in q else None
    frm = dur_ns(q["from"]) if "from" in q and not q["from"].startswith("now") else None
    to = dur_ns(q["to"]) if "to" in q and not q["to"].startswith("now") else None
    sure = near = 0
    for n, t0, d in spans(sys.argv[1]):
        if name and not (n.startswith(name[:-1]) if name.endswith("*") else n == name):
            continue
        if (frm is not None and t0 < frm) or (to is not None and t0 >= to):
            continue
        if abs(d - lo) < NEAR_NS or (hi is not None and abs(d - hi) < NEAR_NS):
            near += 1
        elif d >= lo and (hi is None or d <= hi):
            sure += 1
    print(sure, sure + near)


main()
