/*
 * Flame graphs drawn by collie alone: folded stacks in, one self-contained
 * SVG out (no external tool, no network, no resource outside the file).
 *
 * The input is what `collie debug trace cat --format folded` prints: one
 * line per distinct stack, "root;child;leaf N", N the self time of that
 * stack in nanoseconds. Lines starting with '#' are comments; empty lines
 * are ignored; the last line may lack its newline.
 */
#ifndef COLLIE_FLAME_H
#define COLLIE_FLAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FLAME_DEFAULT_WIDTH 1200
#define FLAME_MAX_DEPTH 1024		    /* frames per stack; deeper lines are skipped */
#define FLAME_MAX_COUNT (UINT64_C(1) << 62) /* per line and in total, ns */

struct flame_opts {
	const char *title;  /* NULL: "Flame Graph" */
	unsigned int width; /* image width in px; 0: FLAME_DEFAULT_WIDTH (200-100000) */
};

/* what the input held, filled by flame_render() */
struct flame_result {
	size_t nr_lines;	/* stack lines used */
	size_t nr_skipped;	/* malformed lines left out (no count, not a number, too big) */
	size_t nr_frames;	/* frames after merging identical prefixes, the root included */
	size_t nr_drawn;	/* frames drawn; the others are too narrow to see */
	unsigned int max_depth; /* frames in the deepest stack */
	uint64_t total;		/* the root's time in ns: the sum of every line's count */
};

/*
 * Render the folded stacks text[0..len) as an SVG flame graph to out. The
 * root frame "all" spans the whole width; above it each frame is as wide as
 * the time spent in it and in what it called, siblings sorted by name.
 * Each frame has a hover title (name, time with its unit, share of the
 * total); the page zooms on a click and highlights the frames matching a
 * search. Malformed lines are skipped and counted, never fatal; with no
 * usable line the picture says "no samples".
 *
 * text need not be NUL-terminated. out may be a file or an open_memstream()
 * buffer. res may be NULL. Returns 0, -ENOMEM, -EINVAL (a width out of
 * range), or -EIO when writing failed.
 */
int flame_render(const char *text, size_t len, const struct flame_opts *opts, FILE *out,
		 struct flame_result *res);

/* ns as a short time with its unit: "740 ns", "12.50 us", "3.20 ms", "1.05 s" */
void flame_fmt_time(uint64_t ns, char *buf, size_t len);

#endif
