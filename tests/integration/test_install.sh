#!/bin/sh
# `make install` lays out a daemon as Debian admins expect (issue 13):
# gentraced, gentrace, the agent library (shared and static), header,
# pkg-config file, a hardened systemd unit, an example config and the man
# pages gentraced(8) and gentrace(1). Installed into a DESTDIR; the unit is
# checked with `systemd-analyze verify` when that exists (its ExecStart
# pointed at the staged binary, the one substitution), the man pages with
# man's own checker, and `make uninstall` removes every file again.
. "$top_srcdir/tests/integration/lib.sh"
R=$T/root
make -s -C "$top_builddir" install DESTDIR="$R" >"$T/install.log" 2>&1 ||
	fail "make install: $(tail -n 20 "$T/install.log")"
prefix=$(sed -n 's/^prefix=//p' "$top_builddir/agent/gentrace.pc")
P=$R$prefix
for f in bin/gentraced bin/gentrace include/gentrace.h lib/libgentrace.a \
	lib/pkgconfig/gentrace.pc lib/systemd/system/gentraced.service \
	etc/gentrace/gentraced.conf share/man/man8/gentraced.8 \
	share/man/man1/gentrace.1; do
	[ -e "$P/$f" ] || fail "make install did not install $prefix/$f"
done
ls "$P"/lib/libgentrace.so.* >/dev/null 2>&1 || fail "no libgentrace.so.N"
"$P/bin/gentraced" --version >/dev/null || fail "installed gentraced does not run"
LD_LIBRARY_PATH=$P/lib "$P/bin/gentrace" --version >/dev/null || fail "installed gentrace does not run"

U=$P/lib/systemd/system/gentraced.service
for k in 'DynamicUser=yes' 'ProtectSystem=strict' 'StateDirectory=gentrace' \
	'NoNewPrivileges=yes' 'ProtectHome=yes' 'CapabilityBoundingSet='; do
	grep -qx "$k" "$U" || fail "unit lacks $k"
done
grep -q "^ExecStart=$prefix/bin/gentraced " "$U" || fail "ExecStart: $(grep ExecStart "$U")"
if grep -q 'https\?://' "$U"; then fail "unit points outside the installation"; fi
if command -v systemd-analyze >/dev/null 2>&1; then
	sed "s|^ExecStart=$prefix/bin/gentraced|ExecStart=$P/bin/gentraced|" "$U" \
		>"$T/gentraced.service"
	MANPATH=$P/share/man systemd-analyze verify "$T/gentraced.service" \
		>"$T/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$T/verify.log")"
	echo "systemd-analyze verify: ok"
else
	echo "systemd-analyze not installed: unit not verified"
fi
if command -v man >/dev/null 2>&1; then
	for m in "$P/share/man/man8/gentraced.8" "$P/share/man/man1/gentrace.1"; do
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" >"$T/man.txt" 2>"$T/man.err" ||
			fail "man $m failed: $(cat "$T/man.err")"
		[ ! -s "$T/man.err" ] || fail "man warnings for $m: $(head -n 5 "$T/man.err")"
	done
	grep -q -- '--max-db-size' "$T/man.txt" 2>/dev/null || true
fi

make -s -C "$top_builddir" uninstall DESTDIR="$R" >"$T/uninstall.log" 2>&1 ||
	fail "make uninstall: $(tail -n 20 "$T/uninstall.log")"
left=$(find "$R" -type f | head -n 5)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "ok: make install layout, unit and man pages"
