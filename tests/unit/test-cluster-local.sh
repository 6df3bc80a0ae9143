#!/bin/sh
# The cluster contract against the local driver, in a directory of its own.
srcdir=${srcdir:-$(dirname "$0")/..}
W=$(mktemp -d /tmp/cluster-local.XXXXXX) || exit 1
sh "$srcdir/unit/cluster-contract.sh" ./unit/cluster-contract "local:$W/cluster" "$W"
rc=$?
[ $rc -eq 0 ] && rm -rf "$W"
exit $rc
