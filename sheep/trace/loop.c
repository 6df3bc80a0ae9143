/*
 * The loop checker: every call the event loop's dispatch makes (a handler:
 * its return address lies in ev_loop_once) that held the main thread
 * longer than the threshold (--threshold, 10 ms by default) is recorded as
 * an entry and exit pair in the thread's ring, read like the graph's, and
 * logged: not from the exit hook (it must not call the logger: it keeps
 * the vector registers of the returning function), but at the next
 * handler's entry, which the hooks then send down the slow path.
 * It runs on the main thread only (start sets --thread main).
 */
#pragma GCC target("general-regs-only")

#include <errno.h>

#include "internal_proto.h"
#include "logger.h"
#include "trace_priv.h"

/* the hooks timed the call (f->ts); nothing to do until it returns */
static void loop_entry(struct tbuf *b, struct trace_frame *f, unsigned depth)
{
}

static void loop_exit(struct tbuf *b, struct trace_frame *f, unsigned depth, uint64_t now)
{
	uint32_t off = (uint32_t)(f->site - trace_site_base);

	if (!trace_is_handler(f->ret) || now - f->ts < trace_hot.loop_thresh)
		return;
	tbuf_push(b, f->ts, TREC_ENTRY, 0, off);
	tbuf_push(b, now, TREC_EXIT, 0, off);
	b->inside++; /* to log */
}

/*
 * Log the slow handlers counted in @b and not logged yet (b->inside of
 * them): the hooks call it through the ops on the slow path, at a handler's
 * entry (the main thread holds no lock there).
 */
static void loop_flush(struct tbuf *b)
{
	uint64_t head = b->head, n = b->inside;

	b->inside = 0;
	if (n > (b->mask + 1) / 2)
		n = (b->mask + 1) / 2; /* the older ones were overwritten */
	for (uint64_t i = head - 2 * n; i < head; i += 2) {
		const struct trace_rec *e = &b->recs[i & b->mask], *x = &b->recs[(i + 1) & b->mask];
		uintptr_t addr = trace_site_base + TREC_SITE(e->word);
		uint64_t ns = trace_tsc_to_ns(x->ts) - trace_tsc_to_ns(e->ts);
		char buf[32];

		sd_warn("loop: handler %s held the main thread for %llu us",
			trace_site_name(trace_site_find(addr), addr, buf, sizeof(buf)),
			(unsigned long long)(ns / 1000));
	}
}

static int loop_start(struct trace_config *c)
{
	uintptr_t lo, hi;

	if (trace_symbol_range(TRACE_LOOP_FUNCTION, &lo, &hi) < 0)
		return -ENOENT;
	trace_hot.loop_lo = lo;
	trace_hot.loop_hi = hi;
	trace_hot.loop_thresh = c->thresh_ns ? c->thresh_ns : TRACE_LOOP_DEFAULT_NS;
	/* ns to ticks */
	trace_hot.loop_thresh =
	    (uint64_t)(((unsigned __int128)trace_hot.loop_thresh << 32) / trace_clk_mult);
	if (c->buffer_size > 65536)
		c->buffer_size = 65536; /* 2048 slow handlers: plenty */
	return 0;
}

static void loop_stop(void)
{
}

static int loop_read(int fmt, struct trace_render *r)
{
	return trace_render_records(r, TRACER_LOOP, fmt, "loop");
}

const struct tracer_ops trace_loop_tracer = {
	.name = "loop",
	.id = TRACER_LOOP,
	.entry = loop_entry,
	.exit = loop_exit,
	.start = loop_start,
	.stop = loop_stop,
	.read = loop_read,
	.flush = loop_flush,
};

tracer_register(loop, trace_loop_tracer);
