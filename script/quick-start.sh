#!/bin/sh
# The main job on a fresh Debian 12 machine, as root: install, build, start
# a sheep on a temporary directory, format, create a VDI, write and read
# 10 MiB through collie, trace the I/O, and stop.
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$src/build}
port=${PORT:-7000}

"$src/script/install-deps.sh"
echo "== building in $build"
"$src/script/build.sh" "$build"
sheep=$build/sheep/sheep
collie="$build/collie/collie -p $port"

dir=$(mktemp -d /tmp/sheep-quick.XXXXXX)
echo "== starting sheep on port $port, dir $dir"
"$sheep" -p "$port" -c "local:$dir/cluster" "$dir"
trap 'kill $(cat "$dir/sheep.pid") 2>/dev/null || true' EXIT
for i in $(seq 50); do $collie node list >/dev/null 2>&1 && break; sleep 0.1; done

echo "== collie cluster format"
$collie cluster format
echo "== collie vdi create test 1G"
$collie vdi create test 1G
head -c 10M /dev/urandom > "$dir/data"
echo "== tracing: collie debug trace start"
$collie debug trace start || echo "(tracer unavailable in this build)"
echo "== collie vdi write test 0 10M < data"
$collie vdi write test 0 10M < "$dir/data"
echo "== collie vdi read test 0 10M | cmp - data"
$collie vdi read test 0 10M | cmp - "$dir/data" && echo "10 MiB read back identical"
$collie debug trace stop >/dev/null 2>&1 || true
$collie debug trace cat > "$dir/trace.txt" 2>/dev/null || true
echo "== the trace: $(wc -l < "$dir/trace.txt") lines in $dir/trace.txt; a few:"
grep -m 12 -E 'gateway|store|plain' "$dir/trace.txt" || head -n 12 "$dir/trace.txt"
echo "== collie vdi list"
$collie vdi list
echo "== collie node info"
$collie node info
echo "== collie cluster shutdown"
$collie cluster shutdown
trap - EXIT
echo "done: data and log are in $dir"
