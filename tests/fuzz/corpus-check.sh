#!/bin/sh
# make check's fuzz regression run: every harness built with the plain
# driver (fuzz/run-NAME) replays its seed corpus (fuzz/corpus/NAME, real
# requests and the inputs of past findings). A crash, a sanitizer report
# (in a sanitizer build) or a broken invariant fails it.
srcdir=${srcdir:-$(dirname "$0")/..}
# a UBSan report fails the run too (in a --enable-sanitizers build)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
pass=0
fail=0
for run in fuzz/run-*; do
	[ -x "$run" ] || continue
	name=${run#fuzz/run-}
	corpus=$srcdir/fuzz/corpus/$name
	if [ ! -d "$corpus" ]; then
		echo "FAIL: $name: no seed corpus in $corpus"
		fail=$((fail + 1))
		continue
	fi
	if out=$("$run" "$corpus" 2>&1); then
		echo "ok: $name: $(ls "$corpus" | wc -l) inputs"
		pass=$((pass + 1))
	else
		printf '%s\n' "$out" | tail -30
		echo "FAIL: $name"
		fail=$((fail + 1))
	fi
done
echo "fuzz corpus: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
