#!/usr/bin/env python3
"""readme_blocks.py README SECTION LANG: prints the fenced code blocks of
language LANG found under the level-2 heading SECTION of README, in order,
separated by blank lines. Exits 1 when there is none, so a renamed heading or
a removed example fails the README test instead of testing nothing."""
import sys


def blocks(text, section, lang):
    out, in_sec, fence = [], False, None
    for line in text.splitlines():
        if fence is None and line.startswith("## "):
            in_sec = line[3:].strip() == section
            continue
        if line.startswith("```"):
            if fence is None:
                fence = line[3:].strip()
                cur = []
            else:
                if in_sec and fence == lang:
                    out.append("\n".join(cur))
                fence = None
            continue
        if fence is not None:
            cur.append(line)
    return out


def main():
    readme, section, lang = sys.argv[1:4]
    with open(readme, encoding="utf-8") as f:
        found = blocks(f.read(), section, lang)
    if not found:
        sys.stderr.write("no ```%s block under '## %s'\n" % (lang, section))
        return 1
    sys.stdout.write("\n\n".join(found) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
