#!/bin/sh
# Configure and build out of tree: script/build.sh BUILDDIR [configure options...]
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
build=$1
shift
[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh >/dev/null 2>&1)
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$src/configure" --enable-werror "$@" >/dev/null
make -j"$(nproc)" >/dev/null
