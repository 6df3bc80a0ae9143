#!/bin/sh
# The cluster contract against the zookeeper driver, with a private
# ZooKeeper server on loopback (script/zookeeper-server: a free port, its
# data in the test's directory), stopped by pid at the end. Skipped (77)
# only when configure found no ZooKeeper client, so the driver is not
# built; a built driver that cannot be tested is a failure.
srcdir=${srcdir:-$(dirname "$0")/..}
BIN=./unit/cluster-contract
ZKS="$srcdir/../script/zookeeper-server"

if ! "$BIN" --list | grep -qw zookeeper; then
	echo "zookeeper driver not built (configure found no libzookeeper-mt-dev): contract NOT run"
	exit 77
fi
if ! command -v java >/dev/null || [ ! -r /usr/share/java/zookeeper.jar ]; then
	echo "FAIL: the zookeeper driver is built but the server is missing (apt-get install zookeeper)"
	exit 1
fi
W=$(mktemp -d /tmp/cluster-zookeeper.XXXXXX) || exit 1
t0=$(date +%s%N)
hosts=$(sh -c "exec bash '$ZKS' start '$W/zk'") || {
	echo "FAIL: the test's ZooKeeper did not start (see $W/zk)"
	bash "$ZKS" stop "$W/zk"
	exit 1
}
echo "zookeeper $hosts serving after $((($(date +%s%N) - t0) / 1000000)) ms"

# the contract, plus SIGSTOP: silent 5 s (the session timeout) = dead, bound
# 8 s; a killed member's session expires after those 5 s too (ZooKeeper
# keeps a session whose connection closed, for its client to come back)
sh "$srcdir/unit/cluster-contract.sh" "$BIN" "zookeeper:$hosts/contract" "$W" 8000 8000
rc=$?

bash "$ZKS" stop "$W/zk"
[ $rc -eq 0 ] && rm -rf "$W"
exit $rc
