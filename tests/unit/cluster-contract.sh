#!/bin/sh
# The cluster driver contract, one script for every driver: real member
# processes (cluster-contract) join, broadcast, die and leave, and every
# member must record the same sequence of events.
#
# usage: cluster-contract.sh BIN DRIVER[:OPTION] WORKDIR [STOP_BOUND_MS [KILL_BOUND_MS]]
#
# With STOP_BOUND_MS, a member is also stopped with SIGSTOP: the others
# must see it leave within that bound, and the member, once continued,
# must find itself evicted (drivers with their own liveness check).
# KILL_BOUND_MS (default 1000) bounds how long a member killed with -9
# takes to be seen leaving: a driver that learns of a death only when a
# session expires (zookeeper) gives its session timeout and a margin.
set -u

BIN=$1
SPEC=$2
W=$3
STOP_MS=${4:-}
KILL_MS=${5:-1000}
FAILED=0
PORTS=""

now_ms() { echo $(($(date +%s%N) / 1000000)); }
say() { echo "contract[$SPEC]: $*"; }
fail() {
	say "FAIL: $*"
	FAILED=1
}

cleanup() {
	for p in $PORTS; do
		[ -f "$W/pid.$p" ] && kill -9 "$(cat "$W/pid.$p")" 2>/dev/null
	done
	wait 2>/dev/null
}
trap cleanup EXIT

start_member() {
	rm -f "$W/ev.$1" "$W/ctl.$1"
	mkfifo "$W/ctl.$1"
	"$BIN" "$SPEC" "$1" "$W/ev.$1" "$W/ctl.$1" 2>"$W/err.$1" &
	echo $! >"$W/pid.$1"
	PORTS="$PORTS $1"
}

cmd() { echo "$2" >"$W/ctl.$1"; }

# send_all COMMAND PORT...: to all members at once
send_all() {
	c=$1
	shift
	for p in "$@"; do echo "$c" >"$W/ctl.$p" & done
	for p in "$@"; do wait %+ 2>/dev/null; done
}

# wait_for PORT LINE [TIMEOUT_MS]: until the event file of PORT holds LINE
wait_for() {
	deadline=$(($(now_ms) + ${3:-10000}))
	while ! grep -qxF "$2" "$W/ev.$1" 2>/dev/null; do
		if [ "$(now_ms)" -gt "$deadline" ]; then
			fail "member $1 did not see '$2'"
			return 1
		fi
		sleep 0.01
	done
}

# wait_msgs PORT SENDER COUNT: until PORT delivered COUNT messages of SENDER
wait_msgs() {
	deadline=$(($(now_ms) + 20000))
	while [ "$(grep -c "^msg $2 " "$W/ev.$1" 2>/dev/null)" -lt "$3" ]; do
		if [ "$(now_ms)" -gt "$deadline" ]; then
			fail "member $1 has $(grep -c "^msg $2 " "$W/ev.$1") messages of $2, not $3"
			return 1
		fi
		sleep 0.02
	done
}

# the events of PORT from the line FROM on, without the eviction line
from_line() { sed -n "/^$2\$/,\$p" "$W/ev.$1" | grep -v '^evicted'; }

# same A B FROM: identical sequences from FROM on
same() {
	from_line "$1" "$3" >"$W/seq.a"
	from_line "$2" "$3" >"$W/seq.b"
	if [ ! -s "$W/seq.a" ] || ! cmp -s "$W/seq.a" "$W/seq.b"; then
		fail "members $1 and $2 differ after '$3'"
		diff "$W/seq.a" "$W/seq.b" | head -5
		return 1
	fi
}

# prefix A B FROM: the sequence of A from FROM on is a prefix of B's
prefix() {
	from_line "$1" "$3" >"$W/seq.a"
	from_line "$2" "$3" | head -n "$(wc -l <"$W/seq.a")" >"$W/seq.b"
	if [ ! -s "$W/seq.a" ] || ! cmp -s "$W/seq.a" "$W/seq.b"; then
		fail "members $1 and $2 diverge after '$3'"
		return 1
	fi
}

mkdir -p "$W"
start=$(now_ms)

# 1. three members join one by one; each sees its own join first
start_member 7001
wait_for 7001 "join 7001 : 7001"
start_member 7002
wait_for 7002 "join 7002 : 7001 7002" && wait_for 7001 "join 7002 : 7001 7002"
start_member 7003
for p in 7001 7002 7003; do
	wait_for $p "join 7003 : 7001 7002 7003"
done
for p in 7002 7003; do
	[ "$(head -n 1 "$W/ev.$p")" = "join $p : $(seq -s ' ' 7001 $p)" ] ||
		fail "member $p did not start at its own join: $(head -n 1 "$W/ev.$p")"
done
say "3 members joined in $(($(now_ms) - start)) ms"

# 2. 100 messages from each, concurrently: one order everywhere
t=$(now_ms)
send_all "send 100" 7001 7002 7003
for p in 7001 7002 7003; do
	for s in 7001 7002 7003; do wait_msgs $p $s 100; done
done
same 7001 7002 "join 7003 : 7001 7002 7003"
same 7001 7003 "join 7003 : 7001 7002 7003"
say "300 messages in one order on 3 members in $(($(now_ms) - t)) ms"

# 3. kill -9 a member while all send: it leaves at one place of the order
send_all "send 100" 7001 7002 7003
sleep 0.02
kill -9 "$(cat "$W/pid.7002")"
t=$(now_ms)
wait_for 7001 "leave 7002 : 7001 7003" $KILL_MS && wait_for 7003 "leave 7002 : 7001 7003" $KILL_MS
say "killed member seen leaving after $(($(now_ms) - t)) ms (bound $KILL_MS ms)"
for p in 7001 7003; do
	for s in 7001 7003; do wait_msgs $p $s 200; done
done
same 7001 7003 "join 7003 : 7001 7002 7003"
prefix 7002 7001 "join 7003 : 7001 7002 7003"

# 4. a 4th member joins: it gets the list, and no older history
start_member 7004
for p in 7001 7003 7004; do
	wait_for $p "join 7004 : 7001 7003 7004"
done
[ "$(head -n 1 "$W/ev.7004")" = "join 7004 : 7001 7003 7004" ] ||
	fail "member 7004 did not start at its own join"
cmd 7004 "send 20"
cmd 7001 "send 20"
for p in 7001 7003 7004; do wait_msgs $p 7004 20; done
for p in 7001 7003; do wait_msgs $p 7001 220; done
wait_msgs 7004 7001 20
same 7001 7004 "join 7004 : 7001 7003 7004"
same 7001 7003 "join 7003 : 7001 7002 7003"

# 5. a stopped member is declared dead (drivers with a liveness check)
remaining="7001 7004"
if [ -n "$STOP_MS" ]; then
	kill -STOP "$(cat "$W/pid.7003")"
	t=$(now_ms)
	wait_for 7001 "leave 7003 : 7001 7004" "$STOP_MS" &&
		wait_for 7004 "leave 7003 : 7001 7004" "$STOP_MS"
	say "stopped member seen leaving after $(($(now_ms) - t)) ms (bound $STOP_MS ms)"
	kill -CONT "$(cat "$W/pid.7003")"
	wait "$(cat "$W/pid.7003")"
	rc=$?
	[ $rc -eq 3 ] || fail "the stopped member did not find itself evicted (exit $rc)"
	prefix 7003 7001 "join 7003 : 7001 7002 7003"
	grep -q '^evicted : 7001 7004$' "$W/ev.7003" || fail "member 7003: no eviction line"
else
	remaining="7001 7003 7004"
fi

# 6. graceful leave
cmd 7004 "leave"
wait "$(cat "$W/pid.7004")" || fail "member 7004 failed to leave"
rest=${remaining% 7004}
for p in ${remaining% 7004}; do
	wait_for $p "leave 7004 : $rest"
done
cmd 7001 "send 5"
for p in ${remaining% 7004}; do wait_msgs $p 7001 225; done
prefix 7004 7001 "join 7004 : 7001 7003 7004"
[ -z "$STOP_MS" ] && same 7001 7003 "join 7003 : 7001 7002 7003"
for p in ${remaining% 7004}; do cmd $p "leave"; done
for p in ${remaining% 7004}; do
	wait "$(cat "$W/pid.$p")" || fail "member $p failed to leave"
done

# 7. concurrent joins: three members start at once, twice; the first
# time into an empty cluster (they found it together), then while one of
# them broadcasts. All end with one list and one order.
for round in 1 2; do
	base=$((7100 + round * 10))
	[ $round -eq 2 ] && cmd 7111 "send 50"
	for p in $((base + 1)) $((base + 2)) $((base + 3)); do start_member $p; done
	members=$(seq -s ' ' $((base + 1)) $((base + 3)))
	[ $round -eq 2 ] && members="7111 7112 7113 $members"
	want=$((3 + 3 * round)) # words in "join P : PORT..."
	deadline=$(($(now_ms) + 10000))
	for p in $members; do
		while [ "$(grep '^join' "$W/ev.$p" 2>/dev/null | tail -n 1 | wc -w)" -lt $want ]; do
			if [ "$(now_ms)" -gt $deadline ]; then
				fail "concurrent joins, round $round: member $p does not see all"
				break
			fi
			sleep 0.02
		done
	done
	[ $round -eq 2 ] && wait_msgs 7111 7111 50
	cmd $((base + 1)) "send 1"
	for p in $members; do wait_msgs $p $((base + 1)) 1; done
	lastjoin=$(grep '^join' "$W/ev.$((base + 1))" | tail -n 1)
	for p in $members; do same $((base + 1)) $p "$lastjoin"; done
	say "concurrent joins, round $round: $lastjoin"
done
for p in 7111 7112 7113 7121 7122 7123; do cmd $p "leave"; done

for p in $PORTS; do
	grep -q 'Sanitizer\|runtime error\|^notify:\|^leave:' "$W/err.$p" 2>/dev/null &&
		fail "member $p logged errors: $(head -n 3 "$W/err.$p")"
done
if [ $FAILED -ne 0 ]; then
	say "FAILED (files in $W)"
	exit 1
fi
say "passed in $(($(now_ms) - start)) ms"
exit 0
