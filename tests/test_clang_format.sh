#!/bin/sh
# test_clang_format.sh (`make format-check`): the C sources follow
# .clang-format. Runs with Debian 12's clang-format 14 (setup.sh installs
# it); other versions format a few constructs differently, so they skip.
#
# Files still unformatted are listed in tests/clang-format.todo: they were
# being edited on other branches when the check arrived and are formatted
# once those merge (then their line goes). A file not listed there must stay
# formatted.
: "${top_srcdir:=.}"
cd "$top_srcdir" || exit 1
command -v clang-format >/dev/null 2>&1 || { echo "SKIP: no clang-format"; exit 77; }
v=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$v" = 14 ] || { echo "SKIP: clang-format $v (the check pins 14)"; exit 77; }
if git rev-parse --git-dir >/dev/null 2>&1; then
	files=$(git ls-files '*.c' '*.h')
else
	files=$(find agent proto store daemon web tools examples tests bench \
		-name '*.[ch]' 2>/dev/null)
fi
bad=0
for f in $files; do
	grep -qx "$f" tests/clang-format.todo 2>/dev/null && continue
	if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run: clang-format -i $f)"
		bad=1
	fi
done
[ $bad = 0 ] && echo "ok: C sources follow .clang-format"
exit $bad
