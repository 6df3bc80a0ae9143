#!/bin/sh
# The tracer core and whatever it calls in sheep must be free of trace sites:
# a traced function called from the control path or a handler would recurse
# into the tracer under its own lock. Checks the built objects: libtrace.a
# has no site section, and every function of sheep that libtrace.a calls
# (the logger above all) does not start with a site's NOPs.
LIBTRACE=${LIBTRACE:-../sheep/trace/libtrace.a}
SHEEP=${SHEEP:-../sheep/sheep}
T=$(mktemp -d /tmp/trace-nosites.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0

if objdump -h "$LIBTRACE" | grep -q __patchable_function_entries; then
	echo "FAIL: $LIBTRACE has trace sites"
	fail=1
fi
nm -u "$LIBTRACE" | awk '{ print $NF }' | sort -u >"$T/undef"
nm --defined-only "$LIBTRACE" | awk 'NF == 3 { print $3 }' | sort -u >"$T/own"
nm --defined-only "$SHEEP" | awk '$2 ~ /^[Tt]$/ { print $3 }' | sort -u >"$T/sheep"
comm -23 "$T/undef" "$T/own" | comm -12 - "$T/sheep" >"$T/called"
n=0
while read -r fn; do
	n=$((n + 1))
	# a site: five one-byte NOPs (or one five-byte NOP) at the function's entry
	first=$(objdump -d --no-show-raw-insn --disassemble="$fn" "$SHEEP" |
		awk '/^ +[0-9a-f]+:/ { sub(/^ +[0-9a-f]+:[ \t]+/, ""); print; if (++k == 5) exit }' |
		tr '\n' ';')
	case "$first" in
	"nop;nop;nop;nop;nop;"* | "nopl 0x0(%rax,%rax,1);"*)
		echo "FAIL: $fn, called by the tracer, has a trace site"
		fail=1
		;;
	esac
done <"$T/called"
if ! grep -qx sd_log_write "$T/called"; then
	echo "FAIL: the tracer does not call sd_log_write: this check looks at the wrong files"
	fail=1
fi
[ $fail -eq 0 ] && echo "ok: libtrace.a has no sites, and none of the $n functions of sheep it calls has one"
exit $fail
