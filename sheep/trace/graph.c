/*
 * The graph tracer: one record at each entry and each exit of a traced
 * function, timestamped with the TSC, into the thread's ring buffer. The
 * core did the rest (shadow stack, return hijack, buffer); reading renders
 * the records in any format (render.c). Alone and without options, the
 * hooks push its records inline (trace_graph_record in trace_priv.h); the
 * ops below serve it beside other tracers and with its options:
 *
 *   --threshold T      nothing at entry; at the exit of a call that took at
 *                      least T, its entry and exit records (ftrace's
 *                      tracing_thresh): a slow call shows as a leaf with its
 *                      duration, and a quiet system writes nothing
 *   --graph-function F records only while a call of F is open on the thread
 */
#pragma GCC target("general-regs-only")

#include "trace_priv.h"

static inline uint32_t site_off(const struct trace_frame *f)
{
	return (uint32_t)(f->site - trace_site_base);
}

static void graph_entry(struct tbuf *b, struct trace_frame *f, unsigned depth)
{
	if (f->word & TRACE_WORD_ROOT)
		b->inside++;
	if ((trace_hot.graph_root && !b->inside) || trace_hot.graph_thresh)
		return;
	tbuf_push(b, f->ts, TREC_ENTRY, depth, site_off(f));
}

static void graph_exit(struct tbuf *b, struct trace_frame *f, unsigned depth, uint64_t now)
{
	uint64_t thresh = trace_hot.graph_thresh;

	if (!trace_hot.graph_root || b->inside) {
		if (!thresh) {
			tbuf_push(b, now, TREC_EXIT, depth, site_off(f));
		} else if (now - f->ts >= thresh) {
			tbuf_push(b, f->ts, TREC_ENTRY, depth, site_off(f));
			tbuf_push(b, now, TREC_EXIT, depth, site_off(f));
		}
	}
	if ((f->word & TRACE_WORD_ROOT) && b->inside)
		b->inside--;
}

static int graph_start(struct trace_config *c)
{
	return 0;
}

static void graph_stop(void)
{
}

static int graph_read(int fmt, struct trace_render *r)
{
	return trace_render_records(r, TRACER_GRAPH, fmt, "graph");
}

const struct tracer_ops trace_graph_tracer = {
	.name = "graph",
	.id = TRACER_GRAPH,
	.entry = graph_entry,
	.exit = graph_exit,
	.start = graph_start,
	.stop = graph_stop,
	.read = graph_read,
};

tracer_register(graph, trace_graph_tracer);
