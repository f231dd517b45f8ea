#!/bin/bash
# test_layers.sh: the dependency rule of docs/ARCHITECTURE.md, checked on the
# sources (per-target include paths make most wrong includes fail to build;
# this also catches what a path cannot: a file including a header of a
# folder its target happens to see, and modules calling each other).
#
#   proto  <-  store  <-  {daemon, web};   agent apart;   tools <- proto
#   proto  <-  sym (libdw)  <-  {web, tools}
#   only daemon/main.c sees both daemon/ and web/ headers
#   no two files of one folder call each other's functions (a cycle is one
#   module split in two, or a missing interface)
#   nothing points at a file outside the repository
set -eu
cd "${top_srcdir:-$(dirname "$0")/..}"
exec python3 - "$@" <<'PY'
import os, re, sys

# folder -> folders whose headers it may include (besides its own and the
# system's). Production code only; tests and benches may reach further.
ALLOWED = {
    "proto": set(),
    "agent": {"proto"},
    "store": {"proto"},
    "sym": {"proto"},
    "daemon": {"proto", "store"},
    "web": {"proto", "store", "sym"},
    "tools": {"proto", "sym"},
    "examples": {"agent"},
}
# Pairs of files allowed to call each other: none. A cycle that has to land
# before it can be split would be listed here as ("a.c", "b.c"), and the
# check fails once the pair stops calling each other, so it cannot linger.
CYCLE_ALLOW = set()

def headers_of(folder):
    return {f for f in os.listdir(folder) if f.endswith(".h")}

owner = {}  # header name -> folder
for folder in ALLOWED:
    for h in headers_of(folder):
        owner.setdefault(h, set()).add(folder)

inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
errors = []
files = {}
for folder in ALLOWED:
    for f in sorted(os.listdir(folder)):
        if f.endswith((".c", ".h")):
            path = f"{folder}/{f}"
            with open(path, encoding="utf-8", errors="replace") as fh:
                files[path] = fh.read()

for path, text in files.items():
    folder = path.split("/")[0]
    seen = set()
    for inc in inc_re.findall(text):
        name = os.path.basename(inc)
        if name == "config.h":
            continue
        homes = owner.get(name)
        if not homes:
            if "/" in inc or name not in headers_of(folder):
                errors.append(f"{path}: includes \"{inc}\", a header of no part")
            continue
        if folder in homes:
            continue
        home = sorted(homes)[0]
        seen.add(home)
        if home not in ALLOWED[folder] and not (
                path == "daemon/main.c" and home == "web"):
            errors.append(f"{path}: includes {home}/{name}; {folder}/ may "
                          f"include only {sorted(ALLOWED[folder] | {folder})}")
    if path != "daemon/main.c" and folder in ("daemon", "web"):
        other = "web" if folder == "daemon" else "daemon"
        if other in seen:
            errors.append(f"{path}: includes both daemon/ and web/ headers "
                          "(only daemon/main.c joins them)")

# Cycles: A calls a function B defines and B calls one A defines.
def_re = re.compile(r'^(?!static\b)[A-Za-z_][\w \*]*?\b([a-z_][a-z0-9_]*)\([^;]*\)\s*\{',
                    re.M)
strip_re = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"', re.S)
defs, bodies = {}, {}
for path, text in files.items():
    if not path.endswith(".c"):
        continue
    body = strip_re.sub(" ", text)
    bodies[path] = body
    defs[path] = set(def_re.findall(body))

def calls(a, b):
    return any(re.search(r'\b%s\s*\(' % re.escape(fn), bodies[a])
               for fn in defs[b])

cs = sorted(bodies)
for i, a in enumerate(cs):
    for b in cs[i + 1:]:
        if a.split("/")[0] != b.split("/")[0]:
            continue
        if calls(a, b) and calls(b, a) and (a, b) not in CYCLE_ALLOW:
            errors.append(f"{a} and {b} call each other (one module split "
                          "in two, or a missing interface)")
for a, b in sorted(CYCLE_ALLOW):
    if a in bodies and b in bodies and not (calls(a, b) and calls(b, a)):
        errors.append(f"{a} and {b} no longer call each other: drop them "
                      "from CYCLE_ALLOW in tests/test_layers.sh")

# Nothing in code, build or docs points at a file outside the repository
# (design notes kept elsewhere, a sibling checkout, a machine's paths).
import subprocess
try:
    tracked = subprocess.run(["git", "ls-files"], capture_output=True,
                             text=True, check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):
    # A tarball: its sources only (no build trees, generated files or
    # installed packages, which may name the machine's paths).
    tracked = [os.path.join(r, f)[2:] for r, _, fs in os.walk(".")
               for f in fs if f.endswith((".c", ".h", ".md", ".inc", ".js",
                                          ".sh", ".am", ".ac"))
               and "/." not in r and "node_modules" not in r
               and "build" not in r]
outside = re.compile(r"DESIGN\.md|PEERS\.md|\.\./shared|/work/")
for path in tracked:
    if path == "tests/test_layers.sh" or not os.path.isfile(path):
        continue
    try:
        with open(path, encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                if outside.search(line):
                    errors.append(f"{path}:{no}: points outside the repository: "
                                  f"{line.strip()[:80]}")
    except UnicodeDecodeError:
        pass

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"ok: {len(files)} files follow the dependency rule")
PY
