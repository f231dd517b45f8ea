#!/usr/bin/env python3
"""count.py: small JSON readers for the system tests (tests/system/).

  count.py stat FILE.json   `gentrace stat --json` output -> one line:
                            generations events retrievable dropped evicted rejected
                            where retrievable = events that are not LOST markers
                            and not THREAD_NAME repeats (the agent's ledger
                            identity counts neither, docs/AGENT.md).
  count.py sessions         /v1/agents answer on stdin -> one session id a line.
"""
import json
import sys


def stat(path):
    with open(path) as f:
        d = json.load(f)
    t = d["totals"]
    k = t.get("kinds", {})
    retr = t["events"] - k.get("lost", 0) - k.get("thread_name", 0)
    print(t["generations"], t["events"], retr, t["dropped"], t["evicted"],
          t["rejected"])


def sessions():
    d = json.load(sys.stdin)
    for a in d.get("agents", []):
        print(a["session"])


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "stat":
        stat(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "sessions":
        sessions()
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
