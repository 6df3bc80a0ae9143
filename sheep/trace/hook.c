/*
 * The hot path: what runs at every traced call and return.
 *
 * Per thread (__thread, static TLS of the executable: no allocation, no
 * lookup) a shadow stack keeps, for each call whose return was hijacked,
 * the real return address, the site and where on the stack the address was.
 * The entry hook pushes and swaps the return address for the function's
 * stub (entry.S), whose call of the function's body puts its own return
 * address there; the exit hook pops and gives the real address back to
 * trace_return_tramp.
 *
 * Rules kept here:
 * - no lock, no allocation, no syscall once the thread has its buffer; the
 *   slow path (first traced call of a thread in a session) runs with the
 *   vector registers saved by the trampoline and with signals blocked;
 * - a recursion guard: a traced function called from a signal handler that
 *   interrupted a hook is not traced (it cannot corrupt the shadow stack);
 * - errno is not touched on the fast path and is kept on the slow path;
 * - the shadow stack outlives tracing: a thread inside a hijacked function
 *   when tracing stops still returns through the trampoline;
 * - a frame skipped by longjmp is found stale by its stack slot and dropped.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "trace_priv.h"

struct shadow_entry {
	uintptr_t ret;	      /* the real return address */
	uintptr_t site;	      /* the site of the call */
	const uintptr_t *slot; /* where the return address lives on the stack */
};

struct trace_thread {
	uint32_t depth;	 /* shadow entries in use */
	uint32_t in_hook; /* recursion guard */
	uint32_t tid;
	uint32_t nobuf_session; /* no buffer could be had in this session */
	struct tbuf *buf;
	struct shadow_entry stack[TRACE_MAX_DEPTH];
};

static __thread struct trace_thread self;

struct trace_hot trace_hot = {
	.depth_limit = TRACE_MAX_DEPTH,
	.nr_records = TRACE_DEFAULT_BUFFER / sizeof(struct trace_rec),
};

/* a tracer's entry or exit; the default one inline, without an indirect call */
static inline __attribute__((always_inline)) void tracer_record(const struct tracer_ops *tracer,
								struct tbuf *b, unsigned type,
								uintptr_t site, unsigned depth)
{
	if (likely(tracer == &trace_graph_tracer))
		trace_graph_record(b, type, site, depth);
	else if (type == TREC_ENTRY)
		tracer->entry(b, site, depth);
	else
		tracer->exit(b, site, depth);
}

/*
 * Called by trace_entry_tramp. @ip is the stub + 5 (its call returns there),
 * @parent the address of the traced function's return address. Returns
 * TRACE_HOOK_TRACED once it kept *parent on the shadow stack and put @ip
 * in its place, TRACE_HOOK_UNTRACED when this call is not traced, and
 * TRACE_HOOK_SLOW when the thread needs its buffer first (the trampoline
 * then calls trace_entry_slow).
 */
int trace_entry_hook(uintptr_t ip, uintptr_t *parent)
{
	struct trace_thread *th = &self;
	const struct tracer_ops *tracer = trace_hot.tracer;
	uintptr_t site = ip - TRACE_STUB_CALL_RET + TRACE_STUB_SIZE;
	uint32_t depth = th->depth;
	struct shadow_entry *e;
	struct tbuf *b;

	if (unlikely(th->in_hook || !trace_hot.active || !tracer))
		return TRACE_HOOK_UNTRACED;
	b = th->buf;
	if (unlikely(!b || b->session != trace_hot.session))
		return th->nobuf_session != trace_hot.session ? TRACE_HOOK_SLOW
							      : TRACE_HOOK_UNTRACED;
	if (unlikely(depth >= trace_hot.depth_limit)) {
		if (depth >= TRACE_MAX_DEPTH)
			b->nr_overflow++;
		return TRACE_HOOK_UNTRACED;
	}
	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	e = &th->stack[depth];
	e->ret = *parent;
	e->site = site;
	e->slot = parent;
	th->depth = depth + 1;
	*parent = ip;
	tracer_record(tracer, b, TREC_ENTRY, site, depth);
	__asm__ volatile("" ::: "memory");
	th->in_hook = 0;
	return TRACE_HOOK_TRACED;
}

/* First traced call of this thread in this session: get a buffer. */
int trace_entry_slow(uintptr_t ip, uintptr_t *parent)
{
	struct trace_thread *th = &self;
	int saved_errno = errno;
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	th->in_hook = 1;
	if (!th->tid)
		th->tid = (uint32_t)syscall(SYS_gettid);
	th->buf = tbuf_get(th->buf, th->tid);
	if (!th->buf)
		th->nobuf_session = trace_hot.session;
	th->in_hook = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
	if (!th->buf)
		return TRACE_HOOK_UNTRACED;
	ret = trace_entry_hook(ip, parent);
	/* a stop or a new session in between: not traced this time */
	return ret == TRACE_HOOK_SLOW ? TRACE_HOOK_UNTRACED : ret;
}

/*
 * Called by trace_return_tramp with the stack pointer it arrived with: the
 * returning function's slot is just below (it held stub + 10). Returns
 * where to go.
 */
uintptr_t trace_exit_hook(uintptr_t sp)
{
	struct trace_thread *th = &self;
	const uintptr_t *slot = (const uintptr_t *)(sp - sizeof(uintptr_t));
	const struct tracer_ops *tracer = trace_hot.tracer;
	uint32_t saved_guard = th->in_hook;
	uint32_t d = th->depth;
	struct shadow_entry *e;
	struct tbuf *b;
	uintptr_t ret;

	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	/* entries above ours belong to frames that longjmp skipped */
	while (d > 0 && th->stack[d - 1].slot != slot)
		d--;
	if (unlikely(d == 0))
		__builtin_trap(); /* no record of this return: nowhere to go */
	e = &th->stack[d - 1];
	ret = e->ret;
	b = th->buf;
	if (b && tracer && b->session == trace_hot.session)
		tracer_record(tracer, b, TREC_EXIT, e->site, d - 1);
	th->depth = d - 1;
	__asm__ volatile("" ::: "memory");
	th->in_hook = saved_guard;
	return ret;
}

uintptr_t trace_real_return(const uintptr_t *slot)
{
	const struct trace_thread *th = &self;

	for (uint32_t d = th->depth; d > 0; d--) {
		const struct shadow_entry *e = &th->stack[d - 1];

		/* stub + 5 until the stub calls the body, stub + 10 after */
		if (e->slot == slot && *slot >= e->site - TRACE_STUB_SIZE && *slot < e->site)
			return e->ret;
	}
	return *slot;
}

unsigned trace_shadow_depth(void)
{
	return self.depth;
}
