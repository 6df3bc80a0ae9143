#!/bin/sh
# Every SD_RES_* code that the tree uses is defined once, in include/ (the
# wire's and the daemons' headers, not in a .c file), with a value of its
# own, and has a message in lib/strerror.c's one table: sd_strerror never
# says "unknown result code" for a code the daemon or collie can produce.
srcdir=${srcdir:-$(dirname "$0")/..}
top=$srcdir/..
T=$(mktemp -d /tmp/strerror-codes.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0

# the names used anywhere in the C sources
find "$top/sheep" "$top/collie" "$top/lib" "$top/include" "$top/tests" -name '*.[ch]' \
	-exec grep -ohE '\bSD_RES_[A-Z0-9_]+\b' {} + | sort -u >"$T/used"
# the definitions: file name value
grep -rnE '^#define[[:space:]]+SD_RES_[A-Z0-9_]+[[:space:]]' "$top/sheep" "$top/collie" \
	"$top/lib" "$top/include" --include='*.[ch]' |
	awk '{ split($1, f, ":"); print f[1], $2, $3 }' >"$T/defs"
n=0
while read -r name; do
	n=$((n + 1))
	where=$(awk -v n="$name" '$2 == n { print $1 }' "$T/defs")
	case "$where" in
	"")
		echo "FAIL: $name is used but defined nowhere"
		fail=1
		;;
	*" "*)
		echo "FAIL: $name is defined more than once: $where"
		fail=1
		;;
	*/include/*) ;;
	*)
		echo "FAIL: $name is defined in $where, not in include/"
		fail=1
		;;
	esac
	if ! grep -qE "^[[:space:]]*\[$name\][[:space:]]*=" "$top/lib/strerror.c"; then
		echo "FAIL: $name has no message in lib/strerror.c"
		fail=1
	fi
done <"$T/used"
# no two codes share a value
dups=$(awk '{ print tolower($3) }' "$T/defs" | sort | uniq -d)
if [ -n "$dups" ]; then
	echo "FAIL: codes share a value: $dups"
	fail=1
fi
[ "$n" -gt 40 ] || { echo "FAIL: only $n codes found: wrong source tree?"; fail=1; }
# a man page that gives a code's value names it ("result 0xA1,
# SD_RES_ACCESS_DENIED"): the value is the header's (sheep.8 said 0xA0)
tr '\n' ' ' <"$top/man/sheep.8" | grep -oE 'result 0x[0-9A-Fa-f]+, *SD_RES_[A-Z0-9_]+' |
	sed 's/result //; s/, */ /' >"$T/man"
[ -s "$T/man" ] || { echo "FAIL: sheep.8 gives no result code with its name"; fail=1; }
while read -r value name; do
	def=$(awk -v n="$name" '$2 == n { print tolower($3) }' "$T/defs")
	if [ "$def" != "$(echo "$value" | tr 'A-F' 'a-f')" ]; then
		echo "FAIL: sheep.8 says $name is $value, include/ says ${def:-nothing}"
		fail=1
	fi
done <"$T/man"
[ $fail -eq 0 ] && echo "ok: $n result codes, each defined once in include/ with a message"
exit $fail
