#!/usr/bin/env python3
"""symbols_check.py KIND FILE SOURCE EXPECT: checks the stack frame names a
gentrace export holds against the CALL:NAME markers of SOURCE
(tests/integration/stackprog.c).

KIND: chrome (Chrome JSON: args.stack of the first event of each name),
perfetto (perfetto_decode.py's JSON: "stacks"), stat (gentrace stat --json:
stacks.top). EXPECT:
  named   the program's frames are "FUNC (PATH/stackprog.c:LINE)" with the
          LINE of FUNC's marked call;
  module  they are "stackprog+0xOFF" (module known, not symbolized);
  hex     they are "0x..." hex pcs.
Exits 1 with a message when a frame differs."""
import json
import re
import sys

kind, path, source, expect = sys.argv[1:5]

lines = {}
for no, text in enumerate(open(source), 1):
    m = re.search(r"CALL:(\w+)", text)
    if m:
        lines[m.group(1)] = no

# Innermost first: what each event's stack starts with.
WANT = {
    "sym.leaf": ["sym_leaf", "sym_middle", "sym_outer", "main"],
    "sym.outer": ["sym_outer_region", "main"],
}

stacks = {}
doc = json.load(open(path))
if kind == "chrome":
    for ev in doc["traceEvents"]:
        st = ev.get("args", {}).get("stack")
        if st is not None:
            stacks.setdefault(ev["name"], st)
elif kind == "perfetto":
    stacks = doc["stacks"]
elif kind == "stat":
    for row in doc["stacks"]["top"]:
        f = row["frames"]
        # The leaf's stack is the deeper one.
        stacks["sym.leaf" if len(f) > 3 or "sym_leaf" in f[0] else "sym.outer"] = f
        if row["events"] < 1:
            sys.exit("stat: a stack with no events: %r" % row)
else:
    sys.exit("unknown kind " + kind)

for name, want in WANT.items():
    got = stacks.get(name)
    if not got or len(got) < len(want):
        sys.exit("%s: no stack of %d+ frames for %s: %r" % (kind, len(want),
                                                          name, got))
    for i, marker in enumerate(want):
        frame = got[i]
        func = "sym_outer" if marker == "sym_outer_region" else marker
        if expect == "named":
            ok = re.fullmatch(r"%s \(/.*/stackprog\.c:%d\)" % (func, lines[marker]),
                              frame) and "/../" not in frame
        elif expect == "module":
            ok = re.fullmatch(r"stackprog(_[a-z]+)?\+0x[0-9a-f]+", frame)
        else:
            ok = re.fullmatch(r"0x[0-9a-f]+", frame)
        if not ok:
            sys.exit("%s: %s frame %d is %r, want %s %s (line %d)" %
                     (kind, name, i, frame, expect, func, lines[marker]))
print("ok: %s %s %s" % (kind, expect, {k: len(v) for k, v in stacks.items()}))
