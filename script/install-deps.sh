#!/bin/sh
# Install what building and testing need, from Debian 12's packages.
# Run as root. Quiet unless something fails.
set -e
# python3 and iproute2 (ip, ss): functional tests use them
PKGS="build-essential autoconf automake libtool pkg-config check libelf-dev corosync libcpg-dev libquorum-dev libcfg-dev python3 iproute2 qemu-utils libnbd-bin nbdkit"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $missing >/dev/null
fi
