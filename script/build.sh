#!/bin/sh
# Configure and build out of tree: script/build.sh BUILDDIR [configure options...]
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
build=$1
shift
[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh >/dev/null 2>&1) || {
	echo "build.sh: autogen.sh failed (autoconf missing? script/install-deps.sh installs it)" >&2
	exit 1
}
mkdir -p "$build"
cd "$build"
# the test hooks (ops only tests use) are on in the builds that run make check
[ -f Makefile ] || "$src/configure" --enable-werror --enable-test-hooks "$@" >/dev/null
make -j"$(nproc)" >/dev/null
