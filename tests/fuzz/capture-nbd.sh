#!/bin/bash
# Record real NBD exchanges for the seed corpora of the NBD harnesses
# (tests/fuzz/corpus/nbd-opt and nbd-req):
#
#   tests/fuzz/capture-nbd.sh SHEEP COLLIE
#
# Starts one sheep with --nbd on loopback in a scratch directory, formats
# it, makes two VDIs and a snapshot, and runs qemu-img, qemu-io, nbdinfo and
# nbdcopy against it through capture.py (a loopback proxy that records what
# each client sends). nbd-seeds.py then turns each recorded connection into
# a handshake seed (every byte the client sent) and, when it reached the
# transmission phase, a request seed (the bytes after the handshake, behind
# a byte naming what the handshake negotiated). Stops what it started.
set -u
here=$(cd "$(dirname "$0")" && pwd)
sheep=${1:?usage: capture-nbd.sh SHEEP COLLIE}
collie=${2:?usage: capture-nbd.sh SHEEP COLLIE}
for t in qemu-img qemu-io nbdinfo nbdcopy python3; do
	command -v $t >/dev/null || { echo "capture-nbd: $t missing" >&2; exit 2; }
done
dir=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(port) nport=$(port) cport=$(port)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
"$sheep" -f -p "$sport" -c "local:$dir/cl" --nbd "127.0.0.1:$nport" "$dir/s0" \
	>"$dir/sheep.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	"$collie" cluster info -p "$sport" >/dev/null 2>&1; [ $? -ne 2 ] && break
	sleep 0.1
done
c() { "$collie" "$@" -p "$sport"; }
c cluster format -c 1 >/dev/null && c vdi create alpha 16M && c vdi create beta 8M &&
	c vdi write alpha 0 4096 </dev/urandom && c vdi snapshot -s snap1 alpha ||
	{ cat "$dir/sheep.log" >&2; exit 2; }
python3 "$here/capture.py" "$cport" "$nport" "$dir/out" &
pids+=($!)
sleep 0.5
url=nbd://127.0.0.1:$cport
run() { timeout 60 "$@" >/dev/null 2>&1 || echo "capture-nbd: '$*' failed" >&2; }
# a refusal the server must answer (an unknown export, an empty tag)
run_fails() { timeout 60 "$@" >/dev/null 2>&1 && echo "capture-nbd: '$*' succeeded" >&2; true; }
run qemu-img info "$url/alpha"
run qemu-img map --output=json -f raw "$url/alpha"
run nbdinfo --list "$url"
run nbdinfo --map "$url/alpha"
run nbdinfo "$url/alpha@snap1"
run nbdinfo "$url/beta"
run qemu-io -f raw -c "write -P 0x5a 0 64k" -c "write -z 1M 64k" -c "discard 2M 1M" \
	-c "read -P 0x5a 0 64k" -c flush "$url/alpha"
run qemu-io -f raw -c "write -P 0x11 4194000 1000" -c "read 4194000 1000" "$url/beta"
run qemu-io -r -f raw -c "read 0 8k" "$url/alpha@snap1"
run nbdcopy "$url/beta" "$dir/copy"
run_fails nbdinfo "$url/nosuch"
run_fails qemu-img info "$url/alpha@"
sleep 0.5
python3 "$here/nbd-seeds.py" "$dir/out"
