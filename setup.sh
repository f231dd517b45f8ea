#!/bin/sh
# setup.sh: one-step set-up on a fresh Debian 12 machine, and a fast no-op
# when nothing changed. Installs the Debian packages the build and the tests
# need (as root, or with sudo; otherwise says what to install), then runs
# autoreconf, configure (into ./build) and make.
#
# The shared store (store/pg*.c, store/s3.c) builds on libpq and libcurl;
# its tests start a real PostgreSQL and a real OpenStack Swift (with its S3
# API, and memcached for tempauth's tokens) through scripts/cluster-up. The
# libcurl flavour is OpenSSL's: the same TLS library libpq already links,
# so gentraced carries one TLS stack, and it is the flavour the curl tool
# itself uses on Debian. The server packages' own services stay off unless
# the machine enables them; cluster-up runs private instances.
#
#   ./setup.sh            install what is missing, configure, build
#   BUILD=dir ./setup.sh  build somewhere else (configure flags: CONFIGURE_FLAGS)
#   SETUP_INSTALL=0 ./setup.sh   do not install the agent (see below)
#   ./setup.sh --bench    also install the benchmarks' baselines (lttng-tools,
#                         liblttng-ust-dev, babeltrace2, nginx, iperf3,
#                         valgrind) and build into build-bench/ with
#                         --disable-debug (unless BUILD/CONFIGURE_FLAGS say
#                         otherwise): what `make bench-quick` measures.
#                         Debian's nginx package starts its system service;
#                         the benchmarks run their own nginx on a free port.
#
# A plain build (no CONFIGURE_FLAGS) run as root or with sudo also installs
# the agent library, header and gentrace.pc into the configure prefix
# (/usr/local) and runs ldconfig, so `pkg-config gentrace` works and programs
# built with it start, as README.md's "Tracing your service" says. Sanitizer
# builds never install. Without root it prints the one command to run.
set -eu
cd "$(dirname "$0")"
BENCH=0
[ "${1:-}" = --bench ] && BENCH=1
if [ $BENCH = 1 ]; then
	BUILD=${BUILD:-build-bench}
	CONFIGURE_FLAGS=${CONFIGURE_FLAGS:---disable-debug}
fi
BUILD=${BUILD:-build}
CONFIGURE_FLAGS=${CONFIGURE_FLAGS:-}

PKGS="build-essential autoconf automake libtool pkg-config \
libuv1-dev libmicrohttpd-dev libsqlite3-dev libzstd-dev libcmocka-dev \
curl sqlite3 python3 clang libclang-rt-14-dev clang-format zlib1g-dev zstd \
libgnutls28-dev gnutls-bin libdw-dev elfutils libnss3-tools \
libpq-dev libcurl4-openssl-dev libssl-dev postgresql \
swift swift-proxy swift-object swift-container swift-account memcached golang-1.19-go"
[ $BENCH = 1 ] && PKGS="$PKGS lttng-tools liblttng-ust-dev babeltrace2 nginx \
iperf3 valgrind"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	echo "setup.sh: installing Debian packages:$missing"
	if [ "$(id -u)" = 0 ]; then SUDO=""
	elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"
	else
		echo "setup.sh: not root and no sudo; please install:$missing" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# A fresh machine has empty package lists: update once, then install.
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends $missing </dev/null
fi

# Regenerate only when an autotools input is newer than configure.
need_autoreconf=0
[ -x configure ] || need_autoreconf=1
if [ $need_autoreconf = 0 ]; then
	for f in configure.ac Makefile.am */Makefile.inc tests/*/Makefile.inc; do
		[ "$f" -nt configure ] && need_autoreconf=1 && break
	done
fi
if [ $need_autoreconf = 1 ]; then
	echo "setup.sh: autoreconf"
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi

mkdir -p "$BUILD"
if [ ! -f "$BUILD/Makefile" ] || [ configure -nt "$BUILD/config.status" ]; then
	echo "setup.sh: configure in $BUILD/ $CONFIGURE_FLAGS"
	(cd "$BUILD" && ../configure -q $CONFIGURE_FLAGS)
fi
make -s -C "$BUILD" -j"$(nproc)"

if [ -z "$CONFIGURE_FLAGS" ] && [ "${SETUP_INSTALL:-1}" != 0 ]; then
	if [ "$(id -u)" = 0 ]; then SUDO=""
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"
	else SUDO="none"
	fi
	if [ "$SUDO" = none ]; then
		echo "setup.sh: to build programs with libgentrace, run: sudo make -C $BUILD install-agent && sudo ldconfig"
	else
		$SUDO make -s -C "$BUILD" install-agent >"$BUILD/install-agent.log" 2>&1 ||
			{ cat "$BUILD/install-agent.log" >&2; exit 1; }
		$SUDO ldconfig
		echo "setup.sh: libgentrace, gentrace.h and gentrace.pc installed under $(sed -n 's/^prefix=//p' "$BUILD/agent/gentrace.pc")"
	fi
fi
echo "setup.sh: build ready in $BUILD/ (make demo | make check)"
