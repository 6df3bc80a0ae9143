#!/bin/sh
# The cluster contract against the local driver, in a directory of its own,
# with SIGSTOP: silent 5 s (the default heartbeat timeout) = dead, bound 8 s
srcdir=${srcdir:-$(dirname "$0")/..}
W=$(mktemp -d /tmp/cluster-local.XXXXXX) || exit 1
sh "$srcdir/unit/cluster-contract.sh" ./unit/cluster-contract "local:$W/cluster" "$W" 8000
rc=$?
[ $rc -eq 0 ] && rm -rf "$W"
exit $rc
