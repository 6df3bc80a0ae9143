#!/bin/sh
# The main job on a fresh Debian 12 machine, as root: install, build, start
# a local cluster of three sheep (ports PORT..PORT+2) formatted with three
# copies, create a VDI, write and read 10 MiB through collie while tracing
# the I/O, show where the replicas went, and stop the cluster.
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$src/build}
port=${PORT:-7000}

"$src/script/install-deps.sh"
echo "== building in $build"
"$src/script/build.sh" "$build"
export SHEEP="$build/sheep/sheep" COLLIE="$build/collie/collie"
collie="$COLLIE -p $port"

dir=$(mktemp -d /tmp/sheep-quick.XXXXXX)
echo "== starting 3 sheep on ports $port-$((port + 2)), directories $dir/0..2, copies=3"
trap '"$src/script/stop-cluster" --base "$dir"' EXIT
PORT0=$port "$src/script/start-cluster" 3 --base "$dir" --copies 3
echo "== collie node list"
$collie node list
echo "== collie vdi create test 1G"
$collie vdi create test 1G
head -c 10M /dev/urandom > "$dir/data"
echo "== tracing: collie debug trace start"
$collie debug trace start || echo "(tracer unavailable in this build)"
echo "== collie vdi write test 0 10M < data"
$collie vdi write test 0 10M < "$dir/data"
echo "== collie vdi read test 0 10M | cmp - data (through each node)"
for i in 0 1 2; do
	$COLLIE vdi read test 0 10M -p $((port + i)) | cmp - "$dir/data" &&
		echo "node $i: 10 MiB read back identical"
done
$collie debug trace stop >/dev/null 2>&1 || true
$collie debug trace cat > "$dir/trace.txt" 2>/dev/null || true
echo "== the trace: $(wc -l < "$dir/trace.txt") lines in $dir/trace.txt; a few:"
grep -m 12 -E 'gateway|store|plain' "$dir/trace.txt" || head -n 12 "$dir/trace.txt"
echo "== collie vdi list"
$collie vdi list
echo "== collie node info (every object is stored on the three nodes)"
$collie node info
echo "== collie cluster info"
$collie cluster info
echo "== stopping the cluster"
"$src/script/stop-cluster" --base "$dir"
trap - EXIT
echo "done: data, logs and the trace are in $dir"
