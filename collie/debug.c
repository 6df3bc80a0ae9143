/*
 * collie debug trace: start, stop, status, cat. The wire format is the
 * comment block of include/internal_proto.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

#define TRACE_CHUNK (UINT32_C(1) << 20)

int trace_get_state(struct trace_state *ts)
{
	struct sd_req hdr;
	struct sd_rsp rsp;

	memset(ts, 0, sizeof(*ts));
	collie_init_req(&hdr, SD_OP_TRACE_STATUS);
	hdr.data_length = sizeof(ts->st) + sizeof(ts->tracers);
	if (collie_exec(&hdr, ts, 0, hdr.data_length, &rsp))
		return -1;
	if (rsp.result == SD_RES_SUCCESS && rsp.data_length > sizeof(ts->st))
		ts->nr_tracers = (int)((rsp.data_length - sizeof(ts->st)) / sizeof(ts->tracers[0]));
	for (int i = 0; i < ts->nr_tracers; i++)
		ts->tracers[i].name[sizeof(ts->tracers[i].name) - 1] = '\0';
	return (int)rsp.result;
}

static const struct sd_trace_tracer *find_tracer(const struct trace_state *ts, const char *name)
{
	for (int i = 0; i < ts->nr_tracers; i++)
		if (!strcmp(ts->tracers[i].name, name))
			return &ts->tracers[i];
	return NULL;
}

/* "unknown tracer 'x' (there are: graph, function, profile)" */
static int unknown_tracer(const char *what, const char *name)
{
	struct trace_state ts;
	char list[TRACE_MAX_TRACERS * 34] = "";
	size_t len = 0;

	if (trace_get_state(&ts) == SD_RES_SUCCESS)
		for (int i = 0; i < ts.nr_tracers; i++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
						i ? ", " : "", ts.tracers[i].name);
	collie_err("%s: unknown tracer '%s' (there are: %s)", what, name, len ? list : "?");
	return EXIT_FAIL;
}

static void fmt_since(uint64_t since, char *buf, size_t len)
{
	if (since)
		collie_fmt_time(since, "%H:%M:%S", buf, len);
	else
		snprintf(buf, len, "-");
}

static int add_string(char **buf, size_t *len, const char *prefix, const char *s)
{
	size_t n = strlen(prefix) + strlen(s) + 1;
	char *b = realloc(*buf, *len + n);

	if (!b)
		return -ENOMEM;
	snprintf(b + *len, n, "%s%s", prefix, s);
	*buf = b;
	*len += n;
	return 0;
}

/* --vdi NAME's vid, resolved once before the start (on every node with --all) */
static uint32_t start_vid;

/* payload: the tracer name, then each pattern and option, each with its NUL */
static char *start_payload(const char *tracer, size_t *lenp)
{
	char num[32], *buf = NULL;
	size_t len = 0;
	int ret = add_string(&buf, &len, "", tracer);

	for (int i = 0; !ret && i < opts.nr_functions; i++)
		ret = add_string(&buf, &len, "", opts.functions[i]);
	for (int i = 0; !ret && i < opts.nr_skip_pats; i++)
		ret = add_string(&buf, &len, "notrace=", opts.skip_pats[i]);
	for (int i = 0; !ret && i < opts.nr_graph_functions; i++)
		ret = add_string(&buf, &len, "graph-function=", opts.graph_functions[i]);
	for (int i = 0; !ret && i < opts.nr_main_only; i++)
		ret = add_string(&buf, &len, "main=", opts.main_only[i]);
	for (int i = 0; !ret && i < opts.nr_worker_only; i++)
		ret = add_string(&buf, &len, "worker=", opts.worker_only[i]);
	if (!ret && opts.thread)
		ret = add_string(&buf, &len, "thread=", opts.thread);
	if (!ret && opts.has_threshold) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)opts.threshold_ns);
		ret = add_string(&buf, &len, "threshold=", num);
	}
	if (!ret && opts.has_sample) {
		snprintf(num, sizeof(num), "%u", opts.sample);
		ret = add_string(&buf, &len, "sample=", num);
	}
	if (!ret && opts.vdi_name) {
		snprintf(num, sizeof(num), "%u", start_vid);
		ret = add_string(&buf, &len, "vdi=", num);
	}
	if (!ret && opts.has_slower) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)opts.slower_ns);
		ret = add_string(&buf, &len, "slower=", num);
	}
	if (ret) {
		free(buf);
		return NULL;
	}
	*lenp = len;
	return buf;
}

/*
 * START refused for the rings' total: the daemon said what they would take
 * in all (rsp.trace.total_length) and for how many threads (generation)
 */
static int start_too_big(const struct sd_rsp *rsp)
{
	uint64_t need = rsp->trace.total_length,
		 nr = rsp->trace.generation ? rsp->trace.generation : 1;
	uint64_t size = opts.has_buffer_size ? opts.buffer_size : 1ULL << 20, ring = 4096, fit;
	char total[32], max[32], per[32];

	while (ring < size)
		ring <<= 1;
	/* what the other tracers' rings hold, and what each thread may have besides */
	fit = need > nr * ring ? need - nr * ring : 0;
	fit = fit < SD_TRACE_MAX_TOTAL ? (SD_TRACE_MAX_TOTAL - fit) / nr : 0;
	for (ring = 4096; ring * 2 + 4096 <= fit;)
		ring <<= 1;
	collie_fmt_size(need, total, sizeof(total));
	collie_fmt_size(SD_TRACE_MAX_TOTAL, max, sizeof(max));
	snprintf(per, sizeof(per), ring >= (1U << 20) ? "%lluM" : "%lluK",
		 (unsigned long long)(ring >> (ring >= (1U << 20) ? 20 : 10)));
	collie_err("failed to start the tracer: its rings on %llu threads would take %s with the "
		   "other tracers' rings, over the total of %s for every ring%s%s",
		   (unsigned long long)nr, total, max, fit >= 8192 ? "; --buffer-size " : "",
		   fit >= 8192 ? per : "");
	return EXIT_FAIL;
}

/* the options of start that the tracer named refuses: EXIT_USAGE after saying so */
static int start_check_options(const char *name)
{
	if ((opts.has_sample || opts.vdi_name || opts.has_slower) && strcmp(name, "graph"))
		return collie_usage_err(
		    "--sample, --vdi and --slower-than are options of the graph "
		    "tracer, not of '%s'",
		    name);
	if (opts.vdi && !opts.vdi_name)
		return collie_usage_err("--vdi needs the name of a VDI");
	if (opts.nr_graph_functions && strcmp(name, "graph"))
		return collie_usage_err("--graph-function is an option of the graph tracer, not "
					"of '%s'",
					name);
	if ((opts.nr_main_only || opts.nr_worker_only) && strcmp(name, "thread"))
		return collie_usage_err("--main-only and --worker-only are options of the thread "
					"tracer, not of '%s'",
					name);
	if (opts.has_threshold && strcmp(name, "graph") && strcmp(name, "loop"))
		return collie_usage_err("--threshold is an option of the graph and loop tracers, "
					"not of '%s'",
					name);
	return EXIT_OK;
}

int trace_start_node(void)
{
	const char *tracer = opts.tracer ? opts.tracer : "";
	const char *name = tracer[0] ? tracer : "graph";
	struct trace_state ts;
	struct sd_req hdr;
	struct sd_rsp rsp;
	size_t len;
	char *buf;
	int ret;

	buf = start_payload(tracer, &len);
	if (!buf) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	collie_init_req(&hdr, SD_OP_TRACE_START);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = (uint32_t)len;
	hdr.trace.depth = opts.has_depth ? opts.depth : 0;
	hdr.trace.buffer_size = opts.has_buffer_size ? opts.buffer_size : 0;
	ret = collie_exec(&hdr, buf, (uint32_t)len, 0, &rsp);
	free(buf);
	if (ret)
		return EXIT_SYSFAIL;
	switch (rsp.result) {
	case SD_RES_SUCCESS:
		return EXIT_OK;
	case SD_RES_NO_TRACER:
		return unknown_tracer("failed to start the tracer", name);
	case SD_RES_TRACE_TOO_BIG:
		return start_too_big(&rsp);
	case SD_RES_TRACE_NO_THREAD:
		collie_err("failed to start the tracer: no thread of the daemon is of kind '%s' "
			   "(main, or the first word of a thread's name: io, peer, cluster, fetch, "
			   "trace, nbd, ...)",
			   opts.thread);
		return EXIT_FAIL;
	case SD_RES_TRACE_BUSY:
		if (trace_get_state(&ts) == SD_RES_SUCCESS && find_tracer(&ts, name)) {
			char since[32];

			fmt_since(find_tracer(&ts, name)->since, since, sizeof(since));
			collie_err("tracing is already on (%s since %s); stop it first", name,
				   since);
			return EXIT_FAIL;
		}
		break;
	}
	collie_err("failed to start the tracer: %s", sd_strerror((int)rsp.result));
	return collie_exit_code((int)rsp.result);
}

static int trace_start(int argc, char **argv)
{
	const char *name = opts.tracer && opts.tracer[0] ? opts.tracer : "graph";
	int ret = start_check_options(name);

	if (ret)
		return ret;
	if (opts.vdi_name) {
		ret = vdi_lookup(opts.vdi_name, NULL, &start_vid);
		if (ret)
			return ret;
	}
	return opts.all ? trace_start_all() : trace_start_node();
}

int trace_stop_node(void)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint32_t len = opts.tracer ? (uint32_t)strlen(opts.tracer) + 1 : 0;

	collie_init_req(&hdr, SD_OP_TRACE_STOP);
	if (len) {
		hdr.flags = SD_FLAG_CMD_WRITE;
		hdr.data_length = len;
	}
	if (collie_exec(&hdr, (void *)opts.tracer, len, 0, &rsp))
		return EXIT_SYSFAIL;
	switch (rsp.result) {
	case SD_RES_SUCCESS:
		return EXIT_OK;
	case SD_RES_NO_TRACER:
		return unknown_tracer("failed to stop the tracer", opts.tracer);
	case SD_RES_TRACE_OFF:
		collie_err("failed to stop the tracer: %s is not running", opts.tracer);
		return EXIT_FAIL;
	case SD_RES_TRACE_BUSY:
		collie_err("failed to stop the tracer: tracing is off");
		return EXIT_FAIL;
	}
	collie_err("failed to stop the tracer: %s", sd_strerror((int)rsp.result));
	return collie_exit_code((int)rsp.result);
}

static int trace_stop(int argc, char **argv)
{
	return opts.all ? trace_stop_all() : trace_stop_node();
}

const char *trace_state_str(uint32_t state)
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

/*
 * "12 (3.4%: a larger --buffer-size keeps them)", or the bare count when
 * none; @total counts every record written, the lost ones too
 */
static void fmt_lost(uint64_t lost, uint64_t total, char *buf, size_t len)
{
	uint64_t tenths = lost ? lost * 1000 / (lost > total ? lost : total) : 0;

	if (!lost)
		snprintf(buf, len, "0");
	else
		snprintf(buf, len, "%llu (%llu.%llu%%: a larger --buffer-size keeps them)",
			 (unsigned long long)lost, (unsigned long long)(tenths / 10),
			 (unsigned long long)(tenths % 10));
}

/* threads a tracer did not trace for want of buffer memory, if any */
static void print_untraced(const char *label, uint32_t n)
{
	if (n)
		printf("%s%u thread%s (the total for every ring, 512 MiB, was taken: a smaller "
		       "--buffer-size traces them)\n",
		       label, n, n == 1 ? "" : "s");
}

static void print_tracers(const struct trace_state *ts)
{
	printf("\n  %-10s %-6s %9s %7s %12s  %-8s %s\n", "TRACER", "STATE", "FUNCTIONS", "THREADS",
	       "RECORDS", "SINCE", "LOST");
	for (int i = 0; i < ts->nr_tracers; i++) {
		const struct sd_trace_tracer *t = &ts->tracers[i];
		char since[32], lost[96];

		fmt_since(t->since, since, sizeof(since));
		fmt_lost(t->nr_lost, t->nr_records, lost, sizeof(lost));
		printf("  %-10s %-6s %9u %7u %12llu  %-8s %s\n", t->name, trace_state_str(t->state),
		       t->nr_sites_patched, t->nr_threads, (unsigned long long)t->nr_records, since,
		       lost);
	}
	for (int i = 0; i < ts->nr_tracers; i++) {
		char label[64];

		snprintf(label, sizeof(label), "  %s did not trace ", ts->tracers[i].name);
		print_untraced(label, ts->tracers[i].nr_untraced);
	}
}

/* status --tracer NAME: that tracer alone */
static int status_one(const struct trace_state *ts, const char *name)
{
	const struct sd_trace_tracer *t = find_tracer(ts, name);
	char since[32], lost[96], size[32];

	if (!t)
		return unknown_tracer("failed to get the tracer status", name);
	fmt_since(t->since, since, sizeof(since));
	collie_fmt_size(t->buffer_size, size, sizeof(size));
	if (opts.raw) {
		printf("%s %s %u %u %llu %llu %s %llu\n", t->name, trace_state_str(t->state),
		       t->nr_sites_patched, t->nr_threads, (unsigned long long)t->nr_records,
		       (unsigned long long)t->nr_lost, size, (unsigned long long)t->since);
		return EXIT_OK;
	}
	fmt_lost(t->nr_lost, t->nr_records, lost, sizeof(lost));
	printf("Tracer:          %s\n", t->name);
	printf("State:           %s\n", trace_state_str(t->state));
	printf("Functions:       %u\n", t->nr_sites_patched);
	printf("Threads:         %u\n", t->nr_threads);
	printf("Records:         %llu\n", (unsigned long long)t->nr_records);
	printf("Lost:            %s\n", lost);
	print_untraced("Untraced:        ", t->nr_untraced);
	printf("Buffer size:     %s\n", size);
	printf("Since:           %s\n", since);
	return EXIT_OK;
}

static int trace_status(int argc, char **argv)
{
	struct trace_state ts;
	struct sd_trace_status *st = &ts.st;
	char tracer[sizeof(st->tracer) + 1], size[32], lost[96], max[32];
	int ret;

	if (opts.all)
		return trace_status_all();
	ret = trace_get_state(&ts);
	if (ret < 0)
		return EXIT_SYSFAIL;
	if (ret != SD_RES_SUCCESS) {
		collie_err("failed to get the tracer status: %s", sd_strerror(ret));
		return collie_exit_code(ret);
	}
	if (opts.tracer)
		return status_one(&ts, opts.tracer);
	memcpy(tracer, st->tracer, sizeof(st->tracer));
	tracer[sizeof(st->tracer)] = '\0';
	if (!tracer[0])
		strcpy(tracer, "-");
	collie_fmt_size(st->buffer_size, size, sizeof(size));
	if (opts.raw) {
		printf("%s %s %u %u %u %llu %llu %s %u\n", tracer, trace_state_str(st->state),
		       st->nr_sites_patched, st->nr_sites_total, st->nr_threads,
		       (unsigned long long)st->nr_events, (unsigned long long)st->nr_lost, size,
		       st->depth);
		return EXIT_OK;
	}
	fmt_lost(st->nr_lost, st->nr_events, lost, sizeof(lost));
	printf("Tracer:          %s\n", tracer);
	printf("State:           %s\n", trace_state_str(st->state));
	printf("Sites patched:   %u / %u\n", st->nr_sites_patched, st->nr_sites_total);
	printf("Threads:         %u\n", st->nr_threads);
	printf("Events recorded: %llu\n", (unsigned long long)st->nr_events);
	printf("Events lost:     %s\n", lost);
	print_untraced("Untraced:        ", st->nr_untraced);
	printf("Buffer size:     %s\n", size);
	printf("Depth:           %u\n", st->depth);
	collie_fmt_size(st->mem_bytes, size, sizeof(size));
	collie_fmt_size(st->mem_max, max, sizeof(max));
	printf("Memory:          %s of %s (every tracer's rings: kept for reading until that "
	       "tracer starts again)\n",
	       size, max);
	if (ts.nr_tracers)
		print_tracers(&ts);
	return EXIT_OK;
}

static int parse_format(uint32_t *fmt)
{
	static const char *const names[] = {
		[SD_TRACE_FMT_GRAPH] = "graph",	  [SD_TRACE_FMT_FOLDED] = "folded",
		[SD_TRACE_FMT_CHROME] = "chrome", [SD_TRACE_FMT_CSV] = "csv",
		[SD_TRACE_FMT_PROFILE] = NULL,	  [SD_TRACE_FMT_EVENTS] = "events",
	};

	*fmt = SD_TRACE_FMT_GRAPH;
	if (!opts.format)
		return EXIT_OK;
	for (uint32_t i = 0; i < ARRAY_SIZE(names); i++) {
		if (names[i] && !strcmp(opts.format, names[i])) {
			*fmt = i;
			return EXIT_OK;
		}
	}
	return collie_usage_err("unknown format '%s' (graph, folded, chrome, csv, svg or events)",
				opts.format);
}

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
 * Read a rendering as the daemon makes it, chunk after chunk, each given
 * to @sink (which returns EXIT_OK or an exit code): READ at offset 0
 * starts it, later READs name it by its generation; the answer that ends
 * it says its size (internal_proto.h). Neither side holds the whole of it.
 */
int trace_read_stream(uint32_t fmt, uint32_t tracer, trace_sink_fn sink, void *arg)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint64_t gen = 0, off = 0;
	char *chunk = malloc(TRACE_CHUNK);
	int ret = EXIT_OK;

	if (!chunk) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	for (;;) {
		collie_init_req(&hdr, SD_OP_TRACE_READ);
		hdr.data_length = TRACE_CHUNK;
		hdr.trace.format = fmt;
		hdr.trace.tracer_flags = tracer;
		hdr.trace.offset = off;
		hdr.trace.buffer_size = gen;
		if (collie_exec(&hdr, chunk, 0, TRACE_CHUNK, &rsp)) {
			ret = EXIT_SYSFAIL;
			break;
		}
		if (rsp.result != SD_RES_SUCCESS) {
			if (rsp.result == SD_RES_INVALID_PARMS && !off)
				collie_err(
				    "failed to read the trace: that tracer has no such format");
			else if (rsp.result == SD_RES_INVALID_PARMS)
				collie_err(
				    "failed to read the trace: its rendering ended after %llu "
				    "bytes (a start, or two other readers at once)",
				    (unsigned long long)off);
			else
				collie_err("failed to read the trace: %s",
					   sd_strerror((int)rsp.result));
			ret = collie_exit_code((int)rsp.result);
			break;
		}
		gen = rsp.trace.generation;
		rsp.data_length = min_t(uint32_t, rsp.data_length, TRACE_CHUNK);
		if (rsp.data_length) {
			ret = sink(chunk, rsp.data_length, arg);
			if (ret)
				break;
		}
		off += rsp.data_length;
		if (off >= rsp.trace.total_length)
			break;
		if (!rsp.data_length) {
			collie_err(
			    "failed to read the trace: the daemon sent %llu bytes and no end",
			    (unsigned long long)off);
			ret = EXIT_FAIL;
			break;
		}
	}
	free(chunk);
	return ret;
}

static int sink_buf(const char *data, size_t len, void *arg)
{
	struct trace_buf *b = arg;

	/* (reserving len + 1 > 0 bytes leaves data set: said for gcc -fanalyzer) */
	if (buf_reserve(b, b->len + len + 1) || !b->data) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return EXIT_OK;
}

/* the whole of a rendering in @b (small ones: the profile's table, folded stacks) */
int trace_read_rendering(uint32_t fmt, uint32_t tracer, struct trace_buf *b)
{
	b->len = 0;
	return trace_read_stream(fmt, tracer, sink_buf, b);
}

static int sink_stdout(const char *data, size_t len, void *arg)
{
	return collie_write_stdout(data, len);
}

/* ---- cat --follow ---- */

#define FOLLOW_CHUNK (UINT32_C(1) << 20)
#define FOLLOW_MAX_THREADS 256
#define FOLLOW_DEPTH 130

struct follow_frame {
	unsigned depth;
	uint64_t ts;
	char name[64];
};

struct follow_thread {
	uint32_t tid;
	unsigned nr;
	struct follow_frame stack[FOLLOW_DEPTH];
};

static struct follow_thread *follow_threads;
static int nr_follow_threads;

static struct follow_thread *follow_thread(uint32_t tid)
{
	for (int i = 0; i < nr_follow_threads; i++)
		if (follow_threads[i].tid == tid)
			return &follow_threads[i];
	if (nr_follow_threads == FOLLOW_MAX_THREADS)
		return NULL;
	follow_threads[nr_follow_threads].tid = tid;
	follow_threads[nr_follow_threads].nr = 0;
	return &follow_threads[nr_follow_threads++];
}

static void follow_entry(uint32_t fmt, uint32_t tid, unsigned depth, uint64_t ts, const char *name)
{
	struct follow_thread *th = follow_thread(tid);
	struct follow_frame *f;

	if (!th)
		return;
	/* frames at this depth or deeper never saw their exit */
	while (th->nr && th->stack[th->nr - 1].depth >= depth)
		th->nr--;
	if (th->nr == FOLLOW_DEPTH)
		return;
	f = &th->stack[th->nr++];
	f->depth = depth;
	f->ts = ts;
	snprintf(f->name, sizeof(f->name), "%s", name);
	if (fmt == SD_TRACE_FMT_GRAPH)
		printf(" %10u | %13s | %*s%s() {\n", tid, "", (int)(2 * depth), "", name);
}

static void follow_exit(uint32_t fmt, uint32_t tid, unsigned depth, uint64_t ts, const char *name)
{
	struct follow_thread *th = follow_thread(tid);
	unsigned k;
	uint64_t dur;

	if (!th)
		return;
	for (k = th->nr; k > 0; k--)
		if (th->stack[k - 1].depth == depth && !strcmp(th->stack[k - 1].name, name))
			break;
	if (k == 0)
		return; /* its entry was not streamed */
	dur = ts > th->stack[k - 1].ts ? ts - th->stack[k - 1].ts : 0;
	if (fmt == SD_TRACE_FMT_CSV)
		printf("%u,%u,%s,%llu,%llu\n", tid, depth, name,
		       (unsigned long long)th->stack[k - 1].ts, (unsigned long long)dur);
	else
		printf(" %10u | %6llu.%03llu us | %*s} /* %s */\n", tid,
		       (unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000),
		       (int)(2 * depth), "", name);
	th->nr = k - 1;
}

/* one line of a FOLLOW answer (see internal_proto.h) */
static void follow_line(uint32_t fmt, char *line)
{
	char name[64], caller[64];
	unsigned tid, depth;
	unsigned long long ts, n;

	if (sscanf(line, "E %u %u %llu %63s", &tid, &depth, &ts, name) == 4)
		follow_entry(fmt, tid, depth, ts, name);
	else if (sscanf(line, "X %u %u %llu %63s", &tid, &depth, &ts, name) == 4)
		follow_exit(fmt, tid, depth, ts, name);
	else if (sscanf(line, "F %u %llu %63s %63s", &tid, &ts, name, caller) == 4 &&
		 fmt == SD_TRACE_FMT_CSV)
		printf("%u,%llu,%s,%s\n", tid, ts, name, caller);
	else if (sscanf(line, "F %u %llu %63s %63s", &tid, &ts, name, caller) == 4)
		printf(" %10u | %9llu.%06llu | %s <- %s\n", tid, ts / 1000000000ULL,
		       ts / 1000 % 1000000, name, caller);
	else if (sscanf(line, "L %u %llu", &tid, &n) == 2)
		collie_err("thread %u lost %llu records before they could be streamed (a larger "
			   "--buffer-size keeps them)",
			   tid, n);
}

/*
 * Print the records as they come until interrupted (or stdout closes):
 * FOLLOW every 100 ms, at once again while the answers come full.
 */
static int trace_follow(uint32_t fmt, uint32_t id)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char *buf = malloc(FOLLOW_CHUNK + 1);
	int ret = EXIT_OK;

	follow_threads = calloc(FOLLOW_MAX_THREADS, sizeof(*follow_threads));
	if (!buf || !follow_threads) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out_free;
	}
	if (fmt != SD_TRACE_FMT_GRAPH && fmt != SD_TRACE_FMT_CSV) {
		ret = collie_usage_err("--follow prints graph or csv");
		goto out_free;
	}
	if (id == SD_TRACER_PROFILE) {
		ret = collie_usage_err("the profile tracer streams nothing: see 'collie debug "
				       "trace stat'");
		goto out_free;
	}
	if (fmt == SD_TRACE_FMT_CSV)
		printf(id == SD_TRACER_FUNCTION ? "tid,ts_ns,function,caller\n"
						: "tid,depth,function,entry_ns,duration_ns\n");
	for (uint64_t handle = 0;;) {
		char *line, *save = NULL;

		collie_init_req(&hdr, SD_OP_TRACE_FOLLOW);
		hdr.data_length = FOLLOW_CHUNK;
		hdr.trace.tracer_flags = id;
		hdr.trace.offset = handle; /* 0 the first time: a new follower */
		if (collie_exec(&hdr, buf, 0, FOLLOW_CHUNK, &rsp)) {
			ret = EXIT_SYSFAIL;
			break;
		}
		if (rsp.result != SD_RES_SUCCESS) {
			collie_err("failed to follow the trace: %s", sd_strerror((int)rsp.result));
			ret = collie_exit_code((int)rsp.result);
			break;
		}
		handle = rsp.trace.generation;
		buf[min_t(uint32_t, rsp.data_length, FOLLOW_CHUNK)] = '\0';
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			follow_line(fmt, line);
		if (fflush(stdout) || ferror(stdout)) {
			ret = EXIT_SYSFAIL;
			break;
		}
		if (rsp.data_length < FOLLOW_CHUNK / 2)
			usleep(100 * 1000);
	}
out_free:
	free(buf);
	free(follow_threads);
	return ret;
}

int trace_tracer_id(const char *name, uint32_t *id)
{
	static const char *const names[] = {
		[SD_TRACER_GRAPH] = "graph",	 [SD_TRACER_FUNCTION] = "function",
		[SD_TRACER_PROFILE] = "profile", [SD_TRACER_LOOP] = "loop",
		[SD_TRACER_THREAD] = "thread",
	};

	*id = 0;
	if (!name)
		return 0;
	for (uint32_t i = 1; i < ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i])) {
			*id = i;
			return 0;
		}
	return -ENOENT;
}

/* say on stderr what the ring of the tracer read lost, as a share */
static void warn_lost(const char *name)
{
	struct trace_state ts;
	const struct sd_trace_tracer *t;
	char lost[96];

	if (trace_get_state(&ts) != SD_RES_SUCCESS)
		return;
	t = find_tracer(&ts, name ? name : ts.st.tracer);
	if (!t || !t->nr_lost || !strcmp(t->name, "profile"))
		return;
	fmt_lost(t->nr_lost, t->nr_records, lost, sizeof(lost));
	collie_err("%s lost %s records", t->name, lost);
}

/* svg: the folded stacks, drawn here into a flame graph (flame.c) */
static int trace_cat_svg(void)
{
	struct trace_buf b = { NULL, 0, 0 };
	uint32_t id;
	int ret;

	if (trace_tracer_id(opts.tracer, &id))
		return unknown_tracer("failed to read the trace", opts.tracer);
	ret = trace_read_rendering(SD_TRACE_FMT_FOLDED, id, &b);
	if (!ret)
		ret = collie_write_flame(b.data, b.len);
	free(b.data);
	return ret;
}

static int trace_cat(int argc, char **argv)
{
	uint32_t fmt, id;
	int ret;

	if (opts.format && !strcmp(opts.format, "svg"))
		return trace_cat_svg();
	if (opts.title)
		return collie_usage_err("--title goes with --format svg");
	ret = parse_format(&fmt);
	if (ret)
		return ret;
	if (trace_tracer_id(opts.tracer, &id))
		return unknown_tracer("failed to read the trace", opts.tracer);
	if (opts.follow)
		return trace_follow(fmt, id);
	if (opts.all) {
		if (id && id != SD_TRACER_GRAPH)
			return collie_usage_err("--all merges the graph tracer's records");
		return trace_cat_all(fmt);
	}
	ret = trace_read_stream(fmt, id, sink_stdout, NULL);
	if (!ret)
		warn_lost(opts.tracer);
	return ret;
}

static const struct subcommand trace_cmds[] = {
	{ "start", "",
	  OPT_TRACER | OPT_FUNCTION | OPT_NOTRACE | OPT_GRAPH_FUNCTION | OPT_THRESHOLD |
	      OPT_THREAD | OPT_DEPTH | OPT_BUFFER_SIZE | OPT_MAIN_ONLY | OPT_WORKER_ONLY | OPT_ALL |
	      OPT_SAMPLE | OPT_VDI | OPT_SLOWER_THAN,
	  "patch the call sites and start a tracer (--all: on every node)", trace_start, NULL, 0, 0,
	  "  collie debug trace start --function 'gateway_*' --notrace 'gateway_io_*'\n"
	  "  collie debug trace start --tracer profile --function 'plain_*'\n"
	  "  collie debug trace start --threshold 2ms --thread io\n"
	  "  collie debug trace start --tracer loop --threshold 5ms\n"
	  "  collie debug trace start --tracer thread --worker-only 'plain_*'\n"
	  "  collie debug trace start --all --sample 100 --vdi vm1 --slower-than 10ms\n",
	  "With --sample, --vdi or --slower-than the graph tracer records only the client\n"
	  "requests it chooses at their gateway, on every node they reach; the calls made for\n"
	  "other requests cost a test of a thread-local flag.\n" },
	{ "stop", "", OPT_TRACER | OPT_ALL,
	  "stop one tracer or all, and put the NOPs back (the buffers stay readable)", trace_stop,
	  NULL, 0, 0,
	  "  collie debug trace stop\n  collie debug trace stop --tracer profile\n"
	  "  collie debug trace stop --all\n" },
	{ "status", "", OPT_RAW | OPT_TRACER | OPT_ALL,
	  "show the state and counters, one line per tracer (--all: per node)", trace_status, NULL,
	  0, 0,
	  "  collie debug trace status\n  collie debug trace status --tracer graph -r\n"
	  "  collie debug trace status --all\n" },
	{ "cat", "", OPT_FORMAT | OPT_TRACER | OPT_FOLLOW | OPT_TITLE | OPT_ALL,
	  "write what was traced to stdout (--all: every node's, merged)", trace_cat, NULL, 0, 0,
	  "  collie debug trace cat > trace.txt\n"
	  "  collie debug trace cat --format svg --title 'gateway writes' > flame.svg\n"
	  "  collie debug trace cat --format folded > stacks.folded\n"
	  "  collie debug trace cat --follow --format csv\n"
	  "  collie debug trace cat --all --format chrome > cluster.json\n"
	  "  collie debug trace cat --all --format graph\n" },
	{ "slow", "", OPT_ALL | OPT_TOP | OPT_OP | OPT_REQUEST,
	  "the slowest requests traced, and where their time went per node", trace_slow, NULL, 0, 0,
	  "  collie debug trace slow --all --top 5\n"
	  "  collie debug trace slow --all --op write_obj\n"
	  "  collie debug trace slow --all --request 3fa2c1000000002a\n" },
	{ "stat", "", OPT_SORT | OPT_TOP | OPT_CSV,
	  "the profile tracer's table: calls, total, self, avg, min, max per function", trace_stat,
	  NULL, 0, 0,
	  "  collie debug trace stat --sort self --top 20\n"
	  "  collie debug trace stat --csv > profile.csv\n" },
	{ "hist", "FUNCTION", 0, "a profiled function's latency distribution (log2 buckets)",
	  trace_hist, NULL, 1, 1, "  collie debug trace hist gateway_write_obj\n" },
	{ NULL },
};

const struct subcommand debug_cmds[] = {
	{ "trace", "start|stop|status|cat|slow|stat|hist", 0, "drive the function tracer", NULL,
	  trace_cmds, 0, 0, NULL },
	{ NULL },
};
