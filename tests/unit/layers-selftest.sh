#!/bin/bash
# layers.sh on a tree of five objects made here, with known circles: it
# must see a data reference, a static inline function of a header and the
# tracer's files, find each circle, and fail on a circle too big, on one
# the baseline does not explain and on a baseline entry that is stale.
src=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
T=$(mktemp -d /tmp/layers-selftest.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/sheep/trace" "$T/src/trace"
cd "$T/src" || exit 1

# top calls mid; mid reads top's data (a circle of data and calls)
cat >top.c <<'EOF'
int mid_fn(void);
int top_state;
int top_main(void) { return mid_fn(); }
EOF
cat >mid.c <<'EOF'
#include "low.h"
extern int top_state;
int mid_fn(void) { return top_state + low_get(); }
EOF
# low calls mid; mid uses low.h's inline function only (no symbol left)
cat >low.h <<'EOF'
static inline __attribute__((always_inline)) int low_get(void) { return 7; }
EOF
cat >low.c <<'EOF'
int mid_fn(void);
int low_call(void) { return mid_fn(); }
EOF
# two files of the tracer that reach each other
cat >trace/x.c <<'EOF'
int trace_y(void);
int trace_x_word;
int trace_x(void) { return trace_y(); }
EOF
cat >trace/y.c <<'EOF'
extern int trace_x_word;
int trace_y(void) { return trace_x_word; }
EOF
for f in top mid low; do
	$CC -g -O2 -c -o "$T/sheep/sheep-$f.o" "$f.c" || exit 1
done
for f in x y; do
	$CC -g -O2 -c -o "$T/sheep/trace/libtrace_a-$f.o" "trace/$f.c" || exit 1
done

fail=0
# expect NAME EXIT-STATUS [ENV...]: runs layers.sh, compares with stdin
expect()
{
	local name=$1 want=$2 got
	shift 2
	env "$@" bash "$src/layers.sh" --report "$T" >"$T/out" 2>&1
	got=$?
	if [ "$got" != "$want" ] || ! diff -u - "$T/out" >"$T/diff"; then
		echo "FAIL: $name (exit $got, want $want)"
		cat "$T/diff"
		fail=1
	else
		echo "ok: $name"
	fi
}

: >"$T/none"
expect "no baseline: both circles are new" 1 LAYERS_BASELINE="$T/none" \
	LAYERS_MAX_CIRCLE=3 LAYERS_MAX_TRACE_CIRCLE=1 <<'EOF'
FAIL: a circle of 2 files (at most 1 allowed): trace/x trace/y
FAIL: a circle that no baseline back-edge explains (a new back-edge: break it): low mid top
    low -> mid: mid_fn()
    mid -> low: low_get() inline
    mid -> top: top_state
    top -> mid: mid_fn()
FAIL: a circle that no baseline back-edge explains (a new back-edge: break it): trace/x trace/y
    trace/x -> trace/y: trace_y()
    trace/y -> trace/x: trace_x_word
Floors of sheep/ (a file uses only files on lower floors; a circle {...} is one floor):
    0 {low mid top} {trace/x trace/y}

Floors once the baseline back-edges are gone (the layering they break):
    0 {low mid top} {trace/x trace/y}

Circle of 3 files (floor 0): low mid top
    low -> mid: mid_fn()
    mid -> low: low_get() inline
    mid -> top: top_state
    top -> mid: mid_fn()

Circle of 2 files (floor 0): trace/x trace/y
    trace/x -> trace/y: trace_y()
    trace/y -> trace/x: trace_x_word

Baseline (back-edges allowed until issue 21 removes them):

EOF

printf '%s\t%s\n' "mid -> top *" "why" "mid -> low low_get" "why" \
	"trace/y -> trace/* trace_x_*" "why" >"$T/base"
expect "a baseline that explains them" 0 LAYERS_BASELINE="$T/base" \
	LAYERS_MAX_CIRCLE=3 LAYERS_MAX_TRACE_CIRCLE=2 <<'EOF'
Floors of sheep/ (a file uses only files on lower floors; a circle {...} is one floor):
    0 {low mid top} {trace/x trace/y}

Floors once the baseline back-edges are gone (the layering they break):
    1 low top trace/x
    0 mid trace/y

Circle of 3 files (floor 0): low mid top
    low -> mid: mid_fn()
    mid -> low: low_get() inline
    mid -> top: top_state
    top -> mid: mid_fn()

Circle of 2 files (floor 0): trace/x trace/y
    trace/x -> trace/y: trace_y()
    trace/y -> trace/x: trace_x_word

Baseline (back-edges allowed until issue 21 removes them):
  mid -> low low_get                       1 edges, 1 on a circle: why
  mid -> top *                             1 edges, 1 on a circle: why
  trace/y -> trace/* trace_x_*             1 edges, 1 on a circle: why

ok: 5 objects, 6 edges (3 calls, 2 data, 1 inline) between 6 pairs, 1 floors; 2 circles, the largest 3 files in sheep/ (at most 3), 2 in sheep/trace (at most 2); 3 baseline back-edges
EOF

printf '%s\t%s\n' "top -> mid *" "down, on no circle once low is gone" "low -> top *" "gone" >>"$T/base"
expect "too big a circle, stale entries" 1 LAYERS_BASELINE="$T/base" \
	LAYERS_MAX_CIRCLE=2 LAYERS_MAX_TRACE_CIRCLE=2 <<'EOF'
FAIL: a circle of 3 files (at most 2 allowed): low mid top
FAIL: the baseline back-edge "low -> top *" no longer occurs: take it off the list
Floors of sheep/ (a file uses only files on lower floors; a circle {...} is one floor):
    0 {low mid top} {trace/x trace/y}

Floors once the baseline back-edges are gone (the layering they break):
    1 low trace/x
    0 mid top trace/y

Circle of 3 files (floor 0): low mid top
    low -> mid: mid_fn()
    mid -> low: low_get() inline
    mid -> top: top_state
    top -> mid: mid_fn()

Circle of 2 files (floor 0): trace/x trace/y
    trace/x -> trace/y: trace_y()
    trace/y -> trace/x: trace_x_word

Baseline (back-edges allowed until issue 21 removes them):
  low -> top *                             0 edges, 0 on a circle: gone
  mid -> low low_get                       1 edges, 1 on a circle: why
  mid -> top *                             1 edges, 1 on a circle: why
  top -> mid *                             1 edges, 1 on a circle: down, on no circle once low is gone
  trace/y -> trace/* trace_x_*             1 edges, 1 on a circle: why

EOF

# low no longer calls mid: mid -> low is on no circle
cat >low.c <<'EOF'
int low_call(void) { return 1; }
EOF
$CC -g -O2 -c -o "$T/sheep/sheep-low.o" low.c || exit 1
printf '%s\t%s\n' "mid -> top *" "why" "mid -> low low_get" "why" \
	"trace/y -> trace/* trace_x_*" "why" >"$T/base"
expect "an entry on no circle" 1 LAYERS_BASELINE="$T/base" LAYERS_MAX_TRACE_CIRCLE=2 <<'EOF'
FAIL: the baseline back-edge "mid -> low low_get" lies on no circle any more: take it off the list
Floors of sheep/ (a file uses only files on lower floors; a circle {...} is one floor):
    1 {mid top}
    0 low {trace/x trace/y}

Floors once the baseline back-edges are gone (the layering they break):
    1 top trace/x
    0 low mid trace/y

Circle of 2 files (floor 1): mid top
    mid -> top: top_state
    top -> mid: mid_fn()

Circle of 2 files (floor 0): trace/x trace/y
    trace/x -> trace/y: trace_y()
    trace/y -> trace/x: trace_x_word

Baseline (back-edges allowed until issue 21 removes them):
  mid -> low low_get                       1 edges, 0 on a circle: why
  mid -> top *                             1 edges, 1 on a circle: why
  trace/y -> trace/* trace_x_*             1 edges, 1 on a circle: why

EOF
exit $fail
