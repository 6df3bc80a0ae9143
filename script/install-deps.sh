#!/bin/sh
# Install what building and testing need, from Debian 12's packages.
# Run as root. Quiet unless something fails.
set -e
# what the tests use besides: python3, iproute2 (ip, ss), man-db (326 renders
# the man pages), systemd
# (systemd-analyze checks the unit), librsvg2-bin (rsvg-convert renders the
# flame graph of test 120), prometheus (and its promtool: the /metrics test
# scrapes a sheep with a real one), qemu-utils, libnbd-bin and nbdkit (real
# NBD clients for the NBD tests)
PKGS="build-essential autoconf automake libtool pkg-config check libelf-dev corosync libcpg-dev libquorum-dev libcfg-dev"
# the zookeeper cluster driver: its C client, and the server (Java) the tests start
PKGS="$PKGS libzookeeper-mt-dev zookeeper"
# libsystemd-dev: sd_notify, so that sheep@.service is Type=notify
PKGS="$PKGS libsystemd-dev"
PKGS="$PKGS python3 iproute2 systemd librsvg2-bin prometheus man-db"
PKGS="$PKGS qemu-utils libnbd-bin nbdkit"
# collie's backup streams and cluster snapshots (zstd, xxHash); xxhsum re-signs
# the headers that the backup tests alter
PKGS="$PKGS libzstd-dev libxxhash-dev xxhash"
# erasure-coded VDIs: ISA-L encodes and rebuilds the strips
PKGS="$PKGS libisal-dev"
# tests/bench/trace-overhead: the user-space anchor of the tracer's costs
PKGS="$PKGS uftrace valgrind"
# clang: the libFuzzer harnesses (script/fuzz, configure --enable-fuzz)
PKGS="$PKGS clang"
# the Debian packages (debian/, script/deb-check): build and lint them
PKGS="$PKGS dpkg-dev debhelper lintian"
# apt_retry ARGS: apt-get ARGS, waiting (up to 10 minutes) while another apt
# or dpkg holds its lock instead of giving up at once
apt_retry() {
	i=0
	while :; do
		out=$(apt-get -o DPkg::Lock::Timeout=60 "$@" 2>&1) && { printf '%s' "$out"; return 0; }
		case "$out" in
		*"Could not get lock"* | *"Unable to lock"* | *"is another process using it"*) ;;
		*) printf '%s\n' "$out" >&2; return 1 ;;
		esac
		i=$((i + 1))
		[ $i -lt 60 ] || { printf '%s\n' "$out" >&2; return 1; }
		[ $i = 1 ] && echo "install-deps: another apt holds the lock; waiting for it" >&2
		sleep 10
	done
}
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt_retry update -qq
	apt_retry install -y -qq $missing >/dev/null
fi
