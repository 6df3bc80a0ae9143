/*
 * The thread checker: functions marked main-thread-only that run on
 * another thread, and functions marked worker-only that run on the main
 * thread, are recorded with their caller (the function tracer's record:
 * "func <- caller" lines, per thread). The marks come with the start
 * ("main=PAT", "worker=PAT"), or are the daemon's own rules: the event
 * loop's handlers and the request completions run on the main thread, the
 * work of a request on a worker.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>

#include "internal_proto.h"
#include "trace_priv.h"

const char *const trace_thread_main_only[] = { "client_handler", "listen_handler", "work_done",
					       "request_done", NULL };
const char *const trace_thread_worker_only[] = { "do_work", NULL };

static void thread_entry(struct tbuf *b, struct trace_frame *f, unsigned depth)
{
	if (((f->word & TRACE_WORD_MAIN_ONLY) && !b->on_main) ||
	    ((f->word & TRACE_WORD_WORKER_ONLY) && b->on_main))
		trace_function_record(b, f->ts, f->site, f->ret);
}

/* the checker needs no return; an exit keeps its sites on the dispatch path */
static void thread_exit(struct tbuf *b, struct trace_frame *f, unsigned depth, uint64_t now)
{
}

static int thread_start(struct trace_config *c)
{
	if (c->buffer_size > 65536)
		c->buffer_size = 65536;
	return 0;
}

static void thread_stop(void)
{
}

static int thread_read(int fmt, struct trace_render *r)
{
	if (fmt != SD_TRACE_FMT_GRAPH && fmt != SD_TRACE_FMT_CSV)
		return -EINVAL;
	return trace_render_records(r, TRACER_THREAD, fmt, "thread");
}

const struct tracer_ops trace_thread_tracer = {
	.name = "thread",
	.id = TRACER_THREAD,
	.entry = thread_entry,
	.exit = thread_exit,
	.start = thread_start,
	.stop = thread_stop,
	.read = thread_read,
};

tracer_register(thread, trace_thread_tracer);
