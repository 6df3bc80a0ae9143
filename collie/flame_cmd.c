/*
 * collie debug trace cat --format svg: the folded stacks the daemon
 * renders, drawn into a flame graph here (flame.c) and written to stdout
 * whole, or not at all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"
#include "flame.h"

int collie_write_flame(const char *folded, size_t len)
{
	struct flame_opts fo = { .title = opts.title };
	struct flame_result res;
	char *svg = NULL;
	size_t svg_len = 0;
	FILE *out;
	int ret;

	out = open_memstream(&svg, &svg_len);
	if (!out) {
		collie_err("failed to draw the flame graph: %s", strerror(errno));
		return EXIT_SYSFAIL;
	}
	ret = flame_render(folded, len, &fo, out, &res);
	if (fclose(out) && !ret)
		ret = -EIO;
	if (ret) {
		collie_err("failed to draw the flame graph: %s", strerror(-ret));
		free(svg);
		return EXIT_SYSFAIL;
	}
	if (res.nr_skipped)
		collie_err("%zu malformed line%s of the folded trace left out of the flame graph",
			   res.nr_skipped, res.nr_skipped == 1 ? "" : "s");
	ret = collie_write_stdout(svg, svg_len);
	free(svg);
	return ret;
}
