#!/bin/bash
# The layering of sheep/: every call between two of its files goes down,
# in this order (a file calls only files of a lower rank):
#
#   sheep (main) > listen > request, nbd*, metrics (front-ends) > payload (their
#   payload memory) > ordered > ops > peer (the peer ops)
#   > recovery > vdi, vdi_sync > gateway > replica > deleted
#   > peer_io (requests to peers) > vdi_table > store/* > group > group_disk (its files)
#   > cluster/* > inode, stat > work
#
# News that travels up goes through a callback that the upper layer
# registered (a function pointer: no symbol reference, so no edge here).
# The call graph comes from the objects sheep is linked from: for each
# file, the functions it references (nm -u) that another file of sheep/
# defines (nm, type T). A back-edge fails the test unless the table of
# known exceptions below lists it, with its reason; an exception that no
# longer occurs fails too (take it off the list). Prints every edge with
# -v. Run from the build tree's tests/ (make check does), or set OBJDIR to
# the sheep/ directory of a build.
objdir=${OBJDIR:-../sheep}
verbose=${1:-}

# rank of each unit (a file, or a family of files: nbd*, store/*, cluster/*)
declare -A rank=(
	[sheep]=100
	[listen]=95
	[request]=90 [nbd]=90 [metrics]=90
	[payload]=88
	[ordered]=86 [ops]=85 [peer]=82 [access]=80
	[recovery]=72 [vdi]=70 [vdi_sync]=70
	[gateway]=60
	[replica]=48 [deleted]=46 [peer_io]=44 [vdi_table]=42
	[store]=40
	[group]=30
	[group_disk]=28
	[cluster]=20
	[inode]=10 [stat]=10
	[work]=5
)

# the known back-edges: "from -> to symbol" ("*": from any unit) and why
# they stay
declare -A allowed=(
	["* -> sheep sheep_request_shutdown"]="a request to stop (SHUTDOWN, lost quorum, eviction, a fatal store error) sets main's flag and returns: no call comes back down"
	["cluster -> group sd_join_handler"]="the cluster driver interface (cluster.h): drivers report to group's named handlers"
	["cluster -> group sd_leave_handler"]="the cluster driver interface"
	["cluster -> group sd_notify_handler"]="the cluster driver interface"
	["cluster -> group sd_quorum_lost_handler"]="the cluster driver interface"
)

T=$(mktemp -d /tmp/layers.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT

unit_of() { # object path -> unit
	local f=${1#"$objdir"/}
	f=${f%.o}
	case "$f" in
	store/*) echo store ;;
	cluster/*) echo cluster ;;
	*) f=${f##*/}; f=${f#sheep-}; case "$f" in nbd*) echo nbd ;; *) echo "$f" ;; esac ;;
	esac
}

n=0
for o in "$objdir"/sheep-*.o "$objdir"/store/sheep-*.o "$objdir"/cluster/sheep-*.o; do
	[ -f "$o" ] || continue
	u=$(unit_of "$o")
	[ -n "${rank[$u]:-}" ] || { echo "FAIL: $o: no rank for unit '$u' (add it to layers.sh)"; exit 1; }
	nm --defined-only "$o" | awk -v u="$u" '$2 == "T" { print $3, u }' >>"$T/defs"
	nm -u "$o" | awk -v u="$u" '{ print u, $2 }' >>"$T/uses"
	n=$((n + 1))
done
[ "$n" -gt 10 ] || { echo "FAIL: only $n objects under $objdir: build sheep first"; exit 1; }

# edges: from to symbol
awk 'NR == FNR { def[$1] = $2; next } ($2 in def) && def[$2] != $1 { print $1, def[$2], $2 }' \
	"$T/defs" "$T/uses" | sort -u >"$T/edges"

fail=0
declare -A seen
while read -r from to sym; do
	key="$from -> $to $sym"
	if [ "${rank[$from]}" -gt "${rank[$to]}" ]; then
		[ -n "$verbose" ] && echo "down: $key"
		continue
	fi
	for k in "$key" "* -> $to $sym"; do
		if [ -n "${allowed[$k]:-}" ]; then
			seen[$k]=1
			[ -n "$verbose" ] && echo "known: $key (${allowed[$k]})"
			continue 2
		fi
	done
	echo "FAIL: back-edge $key (rank ${rank[$from]} calls rank ${rank[$to]})"
	fail=1
done <"$T/edges"
for key in "${!allowed[@]}"; do
	if [ -z "${seen[$key]:-}" ]; then
		echo "FAIL: the known exception '$key' no longer occurs: take it off the list"
		fail=1
	fi
done
[ $fail -eq 0 ] &&
	echo "ok: $(wc -l <"$T/edges") calls between $n objects go down, but for ${#seen[@]} known exceptions"
exit $fail
