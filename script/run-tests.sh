#!/bin/sh
# Install, build and run every test, as CI does: the default build (tracer
# in) and a --disable-trace build; with SANITIZE=1 also an ASan/UBSan build
# and the ThreadSanitizer run of the threaded unit tests (script/tsan, ~30 s).
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/script/install-deps.sh"
(cd "$src" && ./autogen.sh >/dev/null 2>&1)
run() {
	dir=$1
	shift
	echo "== make check in $dir ($*)"
	rm -rf "$dir"
	"$src/script/build.sh" "$dir" "$@"
	make -C "$dir" check || { cat "$dir"/tests/test-suite.log 2>/dev/null | tail -n 80; exit 1; }
}
run "$src/build-check"
run "$src/build-notrace" --disable-trace
if [ "${SANITIZE:-0}" = 1 ]; then
	run "$src/build-asan" --enable-sanitizers
	echo "== script/tsan"
	"$src/script/tsan" || { cat "$src"/build-tsan/tests/unit/*.log | tail -n 80; exit 1; }
fi
echo "== all test runs passed"
