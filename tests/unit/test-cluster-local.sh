#!/bin/sh
# The cluster contract against the local driver, in a directory of its own,
# with SIGSTOP: silent 5 s (the default heartbeat timeout) = dead, bound 8 s.
# The member killed with -9 (7002) must be noticed through the others'
# pidfds (their log says so), not only by the liveness tick.
srcdir=${srcdir:-$(dirname "$0")/..}
W=$(mktemp -d /tmp/cluster-local.XXXXXX) || exit 1
sh "$srcdir/unit/cluster-contract.sh" ./unit/cluster-contract "local:$W/cluster" "$W" 8000
rc=$?
pid=$(cat "$W/pid.7002")
for p in 7001 7003; do
	if ! grep -q "its process $pid exited" "$W/err.$p"; then
		echo "contract[local]: FAIL: member $p did not notice 7002's exit through its pidfd"
		rc=1
	fi
done
[ $rc -eq 0 ] && rm -rf "$W"
exit $rc
