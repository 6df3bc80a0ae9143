#!/bin/sh
# The cluster contract against the corosync driver, with a private corosync
# on loopback only, inside new mount and network namespaces (unshare -m -n)
# so that no other corosync can interfere. Skipped (77) only when configure
# found no corosync, so the driver is not built; a built driver that cannot
# be tested is a failure.
srcdir=${srcdir:-$(dirname "$0")/..}
BIN=./unit/cluster-contract

if ! "$BIN" --list | grep -qw corosync; then
	echo "corosync driver not built (configure found no corosync): contract NOT run"
	exit 77
fi
if [ -z "${CLUSTER_IN_NAMESPACE:-}" ]; then
	for t in corosync corosync-cfgtool unshare ip; do
		if ! command -v $t >/dev/null; then
			echo "FAIL: the corosync driver is built but $t is missing: contract not run"
			exit 1
		fi
	done
	CLUSTER_IN_NAMESPACE=1 exec unshare -m -n sh "$srcdir/unit/test-cluster-corosync.sh"
fi

# inside the namespaces: lo up, a /run of our own (/var/run is /run)
ip link set lo up || exit 1
mount -t tmpfs tmpfs /run || exit 1
W=$(mktemp -d /tmp/cluster-corosync.XXXXXX) || exit 1
"$srcdir/../script/corosync-conf" "$W" sheepdog-test || exit 1

corosync -f -c "$W/corosync.conf" >"$W/corosync.out" 2>&1 &
CPID=$!
i=0
until corosync-cfgtool -s >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $CPID 2>/dev/null; then
		echo "FAIL: the test's corosync did not start (see $W)"
		kill -TERM $CPID 2>/dev/null
		exit 1
	fi
	sleep 0.1
done
echo "corosync $CPID ready after $((i * 100)) ms"

# the contract, plus SIGSTOP: silent 5 s = dead, bound 8 s
sh "$srcdir/unit/cluster-contract.sh" "$BIN" corosync:sheepdog-test "$W" 8000
rc=$?

kill -TERM $CPID
wait $CPID
rm -f /dev/shm/qb-corosync-$CPID-* /dev/shm/qb-$CPID-* 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$W"
exit $rc
