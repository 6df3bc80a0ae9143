/*
 * collie debug trace: start, stop, status, cat. The wire format is the
 * comment block of include/internal_proto.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collie.h"

#define TRACE_CHUNK (UINT32_C(1) << 20)

/* payload: the tracer name, then each pattern, each with its NUL */
static int trace_start(int argc, char **argv)
{
	const char *tracer = opts.tracer ? opts.tracer : "";
	struct sd_req hdr;
	struct sd_rsp rsp;
	size_t len = strlen(tracer) + 1;
	char *buf, *p;
	int ret;

	for (int i = 0; i < opts.nr_functions; i++)
		len += strlen(opts.functions[i]) + 1;
	buf = malloc(len);
	if (!buf) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	p = stpcpy(buf, tracer) + 1;
	for (int i = 0; i < opts.nr_functions; i++)
		p = stpcpy(p, opts.functions[i]) + 1;
	collie_init_req(&hdr, SD_OP_TRACE_START);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = (uint32_t)len;
	hdr.trace.depth = opts.has_depth ? opts.depth : 0;
	hdr.trace.buffer_size = opts.has_buffer_size ? opts.buffer_size : 0;
	ret = collie_run("failed to start the tracer", &hdr, buf, (uint32_t)len, 0, &rsp);
	free(buf);
	return ret;
}

static int trace_stop(int argc, char **argv)
{
	struct sd_req hdr;
	struct sd_rsp rsp;

	collie_init_req(&hdr, SD_OP_TRACE_STOP);
	return collie_run("failed to stop the tracer", &hdr, NULL, 0, 0, &rsp);
}

static const char *state_str(uint32_t state)
{
	switch (state) {
	case SD_TRACE_STATE_OFF:
		return "off";
	case SD_TRACE_STATE_ON:
		return "on";
	case SD_TRACE_STATE_BROKEN:
		return "broken";
	default:
		return "unknown";
	}
}

static int trace_status(int argc, char **argv)
{
	struct sd_trace_status st;
	struct sd_req hdr;
	struct sd_rsp rsp;
	char tracer[sizeof(st.tracer) + 1], size[32];
	int ret;

	memset(&st, 0, sizeof(st));
	collie_init_req(&hdr, SD_OP_TRACE_STATUS);
	hdr.data_length = sizeof(st);
	ret = collie_run("failed to get the tracer status", &hdr, &st, 0, sizeof(st), &rsp);
	if (ret)
		return ret;
	memcpy(tracer, st.tracer, sizeof(st.tracer));
	tracer[sizeof(st.tracer)] = '\0';
	if (!tracer[0])
		strcpy(tracer, "-");
	collie_fmt_size(st.buffer_size, size, sizeof(size));
	if (opts.raw) {
		printf("%s %s %u %u %u %llu %llu %s %u\n", tracer, state_str(st.state),
		       st.nr_sites_patched, st.nr_sites_total, st.nr_threads,
		       (unsigned long long)st.nr_events, (unsigned long long)st.nr_lost, size,
		       st.depth);
		return EXIT_OK;
	}
	printf("Tracer:          %s\n", tracer);
	printf("State:           %s\n", state_str(st.state));
	printf("Sites patched:   %u / %u\n", st.nr_sites_patched, st.nr_sites_total);
	printf("Threads:         %u\n", st.nr_threads);
	printf("Events recorded: %llu\n", (unsigned long long)st.nr_events);
	printf("Events lost:     %llu\n", (unsigned long long)st.nr_lost);
	printf("Buffer size:     %s\n", size);
	printf("Depth:           %u\n", st.depth);
	return EXIT_OK;
}

static int parse_format(uint32_t *fmt)
{
	static const char *const names[] = {
		[SD_TRACE_FMT_GRAPH] = "graph",
		[SD_TRACE_FMT_FOLDED] = "folded",
		[SD_TRACE_FMT_CHROME] = "chrome",
		[SD_TRACE_FMT_CSV] = "csv",
	};

	*fmt = SD_TRACE_FMT_GRAPH;
	if (!opts.format)
		return EXIT_OK;
	for (uint32_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (!strcmp(opts.format, names[i])) {
			*fmt = i;
			return EXIT_OK;
		}
	}
	return collie_usage_err("unknown format '%s' (graph, folded, chrome, csv or svg)",
				opts.format);
}

struct trace_buf {
	char *data;
	uint64_t len, cap;
};

static int buf_reserve(struct trace_buf *b, uint64_t cap)
{
	char *p;

	if (cap <= b->cap)
		return 0;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

/*
 * Read a whole rendering. The daemon renders a snapshot when offset is 0;
 * if its generation changes under us (another reader started over, maybe
 * in another format, which the daemon answers with INVALID_PARMS) we start
 * over once, then give up. Nothing reaches stdout until the rendering is
 * complete.
 */
static int read_rendering(uint32_t fmt, struct trace_buf *b)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint64_t gen = 0, total = 0;
	int restarts = 0;

	for (b->len = 0;;) {
		bool changed;

		if (buf_reserve(b, b->len + TRACE_CHUNK)) {
			collie_err("out of memory");
			return EXIT_SYSFAIL;
		}
		collie_init_req(&hdr, SD_OP_TRACE_READ);
		hdr.data_length = TRACE_CHUNK;
		hdr.trace.format = fmt;
		hdr.trace.offset = b->len;
		if (collie_exec(&hdr, b->data + b->len, 0, TRACE_CHUNK, &rsp))
			return EXIT_SYSFAIL;
		changed = b->len && (rsp.result == SD_RES_INVALID_PARMS ||
				     (rsp.result == SD_RES_SUCCESS && rsp.trace.generation != gen));
		if (!changed && rsp.result != SD_RES_SUCCESS) {
			collie_err("failed to read the trace: %s", sd_strerror((int)rsp.result));
			return collie_exit_code((int)rsp.result);
		}
		if (changed) {
			if (restarts++) {
				collie_err("failed to read the trace: it changed twice while "
					   "being read");
				return EXIT_FAIL;
			}
			b->len = 0;
			continue;
		}
		if (b->len == 0) {
			gen = rsp.trace.generation;
			total = rsp.trace.total_length;
		}
		b->len += min_t(uint32_t, rsp.data_length, TRACE_CHUNK);
		if (b->len >= total)
			return EXIT_OK;
		if (rsp.data_length == 0) {
			collie_err("failed to read the trace: the daemon sent %llu of %llu bytes",
				   (unsigned long long)b->len, (unsigned long long)total);
			return EXIT_FAIL;
		}
	}
}

/* svg: the folded stacks, drawn here into a flame graph (flame.c) */
static int trace_cat_svg(void)
{
	struct trace_buf b = { NULL, 0, 0 };
	int ret = read_rendering(SD_TRACE_FMT_FOLDED, &b);

	if (!ret)
		ret = collie_write_flame(b.data, b.len);
	free(b.data);
	return ret;
}

static int trace_cat(int argc, char **argv)
{
	struct trace_buf b = { NULL, 0, 0 };
	uint32_t fmt;
	int ret;

	if (opts.format && !strcmp(opts.format, "svg"))
		return trace_cat_svg();
	if (opts.title)
		return collie_usage_err("--title goes with --format svg");
	ret = parse_format(&fmt);
	if (ret)
		return ret;
	ret = read_rendering(fmt, &b);
	if (!ret)
		ret = collie_write_stdout(b.data, b.len);
	free(b.data);
	return ret;
}

static const struct subcommand trace_cmds[] = {
	{ "start", "", OPT_TRACER | OPT_FUNCTION | OPT_DEPTH | OPT_BUFFER_SIZE,
	  "patch the call sites and start tracing", trace_start, NULL, 0, 0 },
	{ "stop", "", 0, "stop tracing and put the NOPs back (the buffers stay readable)",
	  trace_stop, NULL, 0, 0 },
	{ "status", "", OPT_RAW, "show the tracer's state and counters", trace_status, NULL, 0,
	  0 },
	{ "cat", "", OPT_FORMAT | OPT_TITLE, "write what was traced to stdout", trace_cat, NULL, 0,
	  0 },
	{ NULL },
};

const struct subcommand debug_cmds[] = {
	{ "trace", "start|stop|status|cat", 0, "drive the function tracer", NULL, trace_cmds, 0,
	  0 },
	{ NULL },
};
