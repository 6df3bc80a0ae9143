#!/bin/bash
# `make install` puts the daemon, the CLI, the man pages, bash completion,
# the systemd unit, its sysusers entry and corosync's permission in place;
# the installed
# unit names the installed sheep, passes `systemd-analyze verify` with no
# warning, and its sandbox scores OK (exposure below 5) in
# `systemd-analyze security --offline`. Run by make check from the build
# tree's tests/ directory.
set -u
top_builddir=$(cd .. && pwd)
dest=$(mktemp -d "${TMPDIR:-/tmp}/sd-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

make -s -C "$top_builddir" install DESTDIR="$dest" >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: make install"; exit 1; }
rm -f "$dest.log"
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$top_builddir/Makefile" | sed "s|\${prefix}|$prefix|")
unit=$dest$prefix/lib/systemd/system/sheep@.service
for f in sbin/sheep bin/collie share/man/man8/sheep.8 share/man/man8/collie.8 \
	lib/systemd/system/sheep@.service lib/sysusers.d/sheepdog.conf \
	share/bash-completion/completions/collie; do
	[ -e "$dest$prefix/$f" ] || fail "not installed: $prefix/$f"
done
[ -e "$dest$sysconfdir/corosync/uidgid.d/sheepdog" ] || fail "not installed: corosync uidgid"
"$dest$prefix/sbin/sheep" --version | grep -q '^sheep ' || fail "installed sheep does not run"
"$dest$prefix/bin/collie" --help >/dev/null 2>&1 || fail "installed collie does not run"
grep -q "^ExecStart=$prefix/sbin/sheep --foreground " "$unit" ||
	fail "the unit does not start $prefix/sbin/sheep: $(grep ExecStart "$unit")"
grep -q "^EnvironmentFile=-$sysconfdir/sheepdog/%i.conf" "$unit" || fail "no environment file"
grep -q '^u sheepdog ' "$dest$prefix/lib/sysusers.d/sheepdog.conf" || fail "no sysusers entry"

if command -v systemd-analyze >/dev/null; then
	# verify the unit as installed, but with the binary where DESTDIR put it
	sed "s|^ExecStart=$prefix/sbin/sheep|ExecStart=$dest$prefix/sbin/sheep|" "$unit" \
		>"$dest/sheep@.service"
	out=$(cd "$dest" && systemd-analyze verify --man=no ./sheep@test.service 2>&1)
	[ $? = 0 ] && [ -z "$out" ] || fail "systemd-analyze verify: $out"
	score=$(cd "$dest" && systemd-analyze security --offline=yes ./sheep@test.service 2>&1 |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	echo "systemd-analyze security: exposure $score"
	[ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s < 5) }' ||
		fail "exposure level ${score:-unknown}, wanted below 5"
else
	fail "systemd-analyze is not installed (apt-get install systemd)"
fi
[ $failed = 0 ] && echo "install: sheep, collie, man pages, unit, sysusers, uidgid: ok"
exit $failed
