/*
 * The function tracer (ftrace's "function"): entry only, flat, with the
 * caller. One call is one 32-byte record in the thread's ring (the TSC and
 * the site, then the caller's address); the return is not hijacked: a site
 * that only entry-only tracers want is patched into a call of
 * trace_func_tramp (no stub), so a call costs a predicted call and return,
 * one clock read and two stores. Rendered as "func <- caller"
 * lines, times in us since the first record.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>

#include "internal_proto.h"
#include "trace_priv.h"

/*
 * Beside other tracers at a site, through the dispatch. Alone at a site the
 * site calls trace_func_tramp, whose hook records inline.
 */
static void function_entry(struct tbuf *b, struct trace_frame *f, unsigned depth)
{
	trace_function_record(b, f->ts, f->site, f->ret);
}

static int function_start(struct trace_config *c)
{
	return 0;
}

static void function_stop(void)
{
}

static int function_read(int fmt, struct trace_render *r)
{
	if (fmt != SD_TRACE_FMT_GRAPH && fmt != SD_TRACE_FMT_CSV)
		return -EINVAL;
	return trace_render_records(r, TRACER_FUNCTION, fmt, "function");
}

const struct tracer_ops trace_function_tracer = {
	.name = "function",
	.id = TRACER_FUNCTION,
	.entry = function_entry,
	.start = function_start,
	.stop = function_stop,
	.read = function_read,
};

tracer_register(function, trace_function_tracer);
