/*
 * The graph tracer: one record at each entry and each exit of a traced
 * function, timestamped with the TSC, into the thread's ring buffer. The
 * core did the rest (shadow stack, return hijack, buffer); reading renders
 * the records in any format (render.c).
 */
#pragma GCC target("general-regs-only")

#include "trace_priv.h"

static void graph_entry(struct tbuf *b, uintptr_t site, unsigned depth)
{
	tbuf_push(b, trace_rdtsc(), TREC_ENTRY, depth, (uint32_t)(site - trace_site_base));
}

static void graph_exit(struct tbuf *b, uintptr_t site, unsigned depth)
{
	tbuf_push(b, trace_rdtsc(), TREC_EXIT, depth, (uint32_t)(site - trace_site_base));
}

static int graph_start(void)
{
	return 0;
}

static void graph_stop(void)
{
}

static int graph_read(int fmt, struct trace_out *out)
{
	return trace_render(fmt, "graph", out);
}

static const struct tracer_ops graph_tracer = {
	.name = "graph",
	.entry = graph_entry,
	.exit = graph_exit,
	.start = graph_start,
	.stop = graph_stop,
	.read = graph_read,
};

tracer_register(graph, graph_tracer);
