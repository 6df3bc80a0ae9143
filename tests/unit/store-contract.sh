#!/bin/sh
# The store driver contract (unit/store-contract.c) for every registered
# driver, each on an empty directory of its own, plain's also under small
# descriptor limits, and the registry's refusal of incomplete drivers.
T=$(mktemp -d /tmp/store-contract.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
prog=./unit/store-contract
fail=0
drivers=$($prog --list) || exit 1
[ -n "$drivers" ] || { echo "FAIL: no store driver registered"; exit 1; }
for d in $drivers; do
	mkdir "$T/$d"
	$prog "$d" "$T/$d" || fail=1
done
# plain's descriptor cache takes its shape from the descriptor limit: one
# set of 6 under 48, 4 sets of 8 under 300 (the contract's eviction check
# runs on each)
for lim in 48 300; do
	mkdir "$T/plain-$lim"
	(ulimit -n $lim && $prog plain "$T/plain-$lim") || fail=1
done
$prog --registry || fail=1
exit $fail
