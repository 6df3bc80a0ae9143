/*
 * The graph tracer: one record at each entry and each exit of a traced
 * function, timestamped with the TSC, into the thread's ring buffer. The
 * core did the rest (shadow stack, return hijack, buffer); reading renders
 * the records in any format (render.c). The hooks push its records inline
 * (trace_graph_record in trace_priv.h); the ops below are the same code.
 */
#pragma GCC target("general-regs-only")

#include "trace_priv.h"

/* the hooks inline these (trace_graph_record): kept for the ops contract */
static void graph_entry(struct tbuf *b, uintptr_t site, unsigned depth)
{
	trace_graph_record(b, TREC_ENTRY, site, depth);
}

static void graph_exit(struct tbuf *b, uintptr_t site, unsigned depth)
{
	trace_graph_record(b, TREC_EXIT, site, depth);
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

const struct tracer_ops trace_graph_tracer = {
	.name = "graph",
	.entry = graph_entry,
	.exit = graph_exit,
	.start = graph_start,
	.stop = graph_stop,
	.read = graph_read,
};

tracer_register(graph, trace_graph_tracer);
