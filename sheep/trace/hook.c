/*
 * The hot path: what runs at every traced call and return.
 *
 * Per thread (__thread, static TLS of the executable: no allocation, no
 * lookup) a shadow stack keeps, for each call whose return was hijacked,
 * the real return address, the site and where on the stack the address was,
 * and which tracers the call went to. Several tracers may run at once, each
 * on its own set of sites: a site's word (trace_site_words, found by
 * address without a search) says which tracers want it, and each gets the
 * call in its own per-thread buffer.
 * The entry hook pushes and swaps the return address for the function's
 * stub (entry.S), whose call of the function's body puts its own return
 * address there; the exit hook pops and gives the real address back to
 * trace_return_tramp.
 *
 * Rules kept here:
 * - no lock, no allocation, no syscall once the thread has its buffer; the
 *   slow path (first traced call of a thread in a session, or a ring about
 *   to wrap that may grow) runs with the vector registers saved by the
 *   trampoline and with signals blocked;
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
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "trace_priv.h"

struct trace_thread {
	uint32_t depth;	 /* shadow entries in use */
	uint32_t in_hook; /* recursion guard */
	uint32_t tid;
	uint32_t pad;
	struct tbuf *bufs[TRACE_MAX_TRACERS];
	/* the session of each tracer in which this thread is not traced by it */
	uint32_t nobuf_session[TRACE_MAX_TRACERS];
	/*
	 * The request the thread serves (trace_req_begin), and where its
	 * records began in the graph ring: --slower-than gives them back
	 */
	struct {
		uint64_t id;
		uint16_t flags;
		uint32_t session; /* of the ring below */
		struct tbuf *buf; /* the graph ring its begin went to, or NULL */
		uint64_t head;	  /* that ring's head before the begin */
		uint64_t tsc;	  /* when it began */
	} req;
	/*
	 * The shadow stack: the frame of depth d is frames[d + 1] (frame_at);
	 * frames[0] is none, only what the outermost frames' profile exits add
	 * their durations to (trace_profile_exit_fast: to the frame below).
	 */
	struct trace_frame frames[TRACE_MAX_DEPTH + 1];
};

static __thread struct trace_thread self;

/*
 * Not 0 while the thread serves no request that the graph tracer's request
 * mode chose: what trace_sample_tramp tests (one compare with %fs) before
 * anything else. Set by trace_req_begin and trace_req_end only.
 */
__thread uint32_t trace_req_unsampled = 1;

/* the shadow stack's frame of depth @d */
static inline __attribute__((always_inline)) struct trace_frame *frame_at(struct trace_thread *th,
									  uint32_t d)
{
	return &th->frames[d + 1];
}

/* the tracers by id, for the dispatch (tracer.c fills it at registration) */
extern const struct tracer_ops *trace_tracers[TRACE_MAX_TRACERS];

static inline __attribute__((always_inline)) bool buf_ready(const struct tbuf *b, unsigned id)
{
	return b && b->session == trace_hot.session[id];
}

/*
 * The general entry: any set of tracers at a site. Each tracer in the
 * site's mask gets the call if this thread has its buffer; a missing one
 * sends the thread to the slow path once per session. Entry-only tracers
 * run first and need no shadow entry; the others share one.
 */
static __attribute__((noinline)) int entry_general(struct trace_thread *th, uintptr_t ip,
						   uintptr_t *parent, uintptr_t site)
{
	uint32_t word = __atomic_load_n(trace_site_word(site), __ATOMIC_RELAXED);
	uint32_t mask = TRACE_WORD_MASK(word) & trace_hot.active, hijack = 0;
	uint32_t depth = th->depth;
	struct trace_frame *e, tmp;
	uint64_t now;

	/* the graph tracer's request mode: a call for a request it did not choose */
	if (unlikely(trace_hot.req_mode) && trace_req_unsampled)
		mask &= ~TRACER_BIT(TRACER_GRAPH);
	for (uint32_t m = mask; m; m &= m - 1) {
		unsigned id = (unsigned)__builtin_ctz(m);

		if (buf_ready(th->bufs[id], id)) {
			if (unlikely(th->bufs[id]->head >= th->bufs[id]->grow_at))
				return TRACE_HOOK_SLOW;
			continue;
		}
		if (th->nobuf_session[id] != trace_hot.session[id])
			return TRACE_HOOK_SLOW;
		mask &= ~TRACER_BIT(id);
	}
	if (!mask)
		return TRACE_HOOK_UNTRACED;
	/* slow handlers to log: at a handler's entry, in the slow path */
	if (unlikely(mask & TRACER_BIT(TRACER_LOOP)) && th->bufs[TRACER_LOOP]->inside &&
	    trace_is_handler(*parent))
		return TRACE_HOOK_SLOW;
	now = trace_rdtsc();
	for (uint32_t m = mask; m; m &= m - 1) {
		unsigned id = (unsigned)__builtin_ctz(m);
		const struct tracer_ops *t = trace_tracers[id];

		if (t->exit) {
			hijack |= TRACER_BIT(id);
			continue;
		}
		tmp.ret = *parent;
		tmp.site = site;
		tmp.ts = now;
		tmp.word = word;
		t->entry(th->bufs[id], &tmp, depth);
	}
	if (!hijack)
		goto out_untraced;
	if (unlikely(depth >= trace_hot.depth_limit)) {
		if (depth >= TRACE_MAX_DEPTH)
			th->bufs[__builtin_ctz(hijack)]->nr_overflow++;
		goto out_untraced;
	}
	e = frame_at(th, depth);
	e->ret = *parent;
	e->site = site;
	e->slot = parent;
	e->word = word;
	e->mask = hijack;
	e->ts = now;
	th->depth = depth + 1;
	*parent = ip;
	for (uint32_t m = hijack; m; m &= m - 1) {
		unsigned id = (unsigned)__builtin_ctz(m);

		trace_tracers[id]->entry(th->bufs[id], e, depth);
	}
	return TRACE_HOOK_TRACED;
out_untraced:
	return TRACE_HOOK_UNTRACED;
}

/* keep the call's real return on the shadow stack (@e, at @depth) and hijack it */
static inline __attribute__((always_inline)) void push_frame(struct trace_thread *th,
							     struct trace_frame *e, uint32_t depth,
							     uintptr_t ip, uintptr_t *parent,
							     uintptr_t site)
{
	e->ret = *parent;
	e->site = site;
	e->slot = parent;
	th->depth = depth + 1;
	*parent = ip;
}

/*
 * The entry of a traced call at @site, whose return address is at @parent:
 * @ip goes in its place when the call is traced (the stub's return point,
 * or trace_return_tramp for a site in the sample form). See
 * trace_entry_hook.
 */
static inline __attribute__((always_inline)) int entry_hook(uintptr_t ip, uintptr_t *parent,
							    uintptr_t site)
{
	struct trace_thread *th = &self;
	uint32_t depth, fast;
	struct trace_frame *e;
	struct tbuf *b;
	unsigned id;
	int ret = TRACE_HOOK_UNTRACED;

	if (unlikely(th->in_hook))
		return TRACE_HOOK_UNTRACED;
	/*
	 * The guard goes up before any buffer is looked at: a stop-the-world
	 * that finds it down may take the thread's stale buffers away
	 * (trace_thread_drop_stale).
	 */
	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	depth = th->depth;
	fast = trace_hot.fast;
	id = TRACE_FAST_ID(fast);
	if (unlikely(fast == TRACE_FAST_NONE)) {
		if (trace_hot.active)
			ret = entry_general(th, ip, parent, site);
		goto out;
	}
	b = th->bufs[id];
	/* no buffer yet in this session, or a ring to grow before it wraps */
	if (unlikely(!buf_ready(b, id) || b->head >= b->grow_at)) {
		if (th->nobuf_session[id] != trace_hot.session[id])
			ret = TRACE_HOOK_SLOW;
		goto out;
	}
	if (unlikely(depth >= trace_hot.depth_limit)) {
		if (depth >= TRACE_MAX_DEPTH)
			b->nr_overflow++;
		goto out;
	}
	e = frame_at(th, depth);
	/* one register for it: GCC would compute the TLS address anew for each field */
	__asm__("" : "+r"(e));
	if (likely(fast == TRACE_FAST_GRAPH)) {
		push_frame(th, e, depth, ip, parent, site);
		e->mask = 0;
		trace_graph_record(b, TREC_ENTRY, site, depth);
	} else if (likely(fast == TRACE_FAST_PROFILE)) {
		struct trace_prof_ent *t =
		    trace_prof_ent_fast(b, TRACE_WORD_INDEX(*trace_site_word(site)));

		push_frame(th, e, depth, ip, parent, site);
		e->ent = t;
		e->key = b->frame_key;
		e->inner = 0;
		e->ts = trace_rdtsc();
	} else {
		push_frame(th, e, depth, ip, parent, site);
		e->mask = TRACE_FRAME_THRESH;
		e->ts = trace_rdtsc();
	}
	ret = TRACE_HOOK_TRACED;
out:
	__asm__ volatile("" ::: "memory");
	th->in_hook = 0;
	return ret;
}

/*
 * Called by trace_entry_tramp. @ip is the stub + 5 (its call returns there),
 * @parent the address of the traced function's return address. Returns
 * TRACE_HOOK_TRACED once it kept *parent on the shadow stack and put @ip
 * in its place, TRACE_HOOK_UNTRACED when this call is not traced, and
 * TRACE_HOOK_SLOW when the thread needs a buffer first (the trampoline
 * then calls trace_entry_slow). One tracer alone (trace_hot.fast) is
 * served inline; every patched site is then its.
 */
int trace_entry_hook(uintptr_t ip, uintptr_t *parent)
{
	return entry_hook(ip, parent, ip - TRACE_STUB_CALL_RET + TRACE_STUB_SIZE);
}

/* trace_return_tramp, once a site in the sample form was taken (trace_sample_slow) */
static uintptr_t sample_return;

/*
 * Called by trace_sample_tramp (a site in the sample form: "call
 * trace_sample_tramp", the graph tracer's request mode) once it found the
 * thread serving a chosen request. @ip is the site + 5, where the
 * trampoline returns in every case, @ret_tramp trace_return_tramp (the
 * trampoline passes it: no file of the tracer reaches entry.S's). A traced
 * call's return goes to it directly (no stub): it costs a mispredicted return,
 * paid only by the requests chosen; the others' calls cost the
 * trampoline's test of trace_req_unsampled and nothing else.
 */
int trace_sample_hook(uintptr_t ip, uintptr_t *parent, uintptr_t ret_tramp)
{
	return entry_hook(ret_tramp, parent, ip - TRACE_INSN_SIZE);
}

/*
 * Called by trace_func_tramp from an entry-only site (only the function
 * tracer wants it): record the call and let it run. TRACE_HOOK_SLOW when
 * the thread needs its buffer first.
 */
int trace_func_hook(uintptr_t ip, uintptr_t ret)
{
	struct trace_thread *th = &self;
	struct tbuf *b;
	int r = TRACE_HOOK_UNTRACED;

	if (unlikely(th->in_hook))
		return TRACE_HOOK_UNTRACED;
	th->in_hook = 1; /* before the buffer is looked at, as in trace_entry_hook */
	__asm__ volatile("" ::: "memory");
	b = th->bufs[TRACER_FUNCTION];
	if (unlikely(!(trace_hot.active & TRACER_BIT(TRACER_FUNCTION))))
		goto out;
	if (unlikely(!buf_ready(b, TRACER_FUNCTION) || b->head >= b->grow_at)) {
		if (th->nobuf_session[TRACER_FUNCTION] != trace_hot.session[TRACER_FUNCTION])
			r = TRACE_HOOK_SLOW;
		goto out;
	}
	trace_function_record(b, trace_rdtsc(), ip - TRACE_INSN_SIZE, ret);
out:
	__asm__ volatile("" ::: "memory");
	th->in_hook = 0;
	return r;
}

char trace_thread_kind[TRACE_MAX_TRACERS][16];

/*
 * Whether tracer @id wants this thread: every thread, or its kind only
 * ("main" is the thread whose tid is the pid; any other kind is the first
 * word of the thread's name: "io 3" is an io thread). Slow path only.
 */
static bool thread_wanted(unsigned id, uint32_t tid)
{
	const char *kind = trace_thread_kind[id];
	char comm[17] = "";
	size_t n;

	if (!kind[0])
		return true;
	if (!strcmp(kind, "main"))
		return tid == (uint32_t)getpid();
	if (tid == (uint32_t)getpid())
		return false;
	prctl(PR_GET_NAME, comm, 0, 0, 0);
	n = strlen(kind);
	return !strncmp(comm, kind, n) && (comm[n] == '\0' || comm[n] == ' ');
}

/*
 * Get the calling thread's buffers of the tracers in @mask that it has none
 * for in their current session (or mark it untraced by them), with signals
 * blocked and errno kept.
 */
static void get_buffers(struct trace_thread *th, uint32_t mask, const uintptr_t *parent)
{
	uint32_t mask_all = mask;
	int saved_errno = errno;
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	th->in_hook = 1;
	if (!th->tid)
		th->tid = (uint32_t)syscall(SYS_gettid);
	for (; mask; mask &= mask - 1) {
		unsigned id = (unsigned)__builtin_ctz(mask);
		uint32_t session = trace_hot.session[id];

		if (buf_ready(th->bufs[id], id)) {
			if (th->bufs[id]->head >= th->bufs[id]->grow_at)
				tbuf_grow(th->bufs[id]); /* grow_at is past head after */
			continue;
		}
		if (th->nobuf_session[id] == session)
			continue;
		if (thread_wanted(id, th->tid)) {
			th->bufs[id] = tbuf_get(th->bufs[id], th->tid, id);
			/* the total of every ring is taken: said by the status */
			if (!th->bufs[id])
				__atomic_add_fetch(&trace_nr_nobuf[id], 1, __ATOMIC_RELAXED);
		} else {
			th->bufs[id] = NULL;
		}
		if (!th->bufs[id])
			th->nobuf_session[id] = session;
	}
	if ((mask_all & TRACER_BIT(TRACER_LOOP)) && parent && trace_is_handler(*parent) &&
	    buf_ready(th->bufs[TRACER_LOOP], TRACER_LOOP) && th->bufs[TRACER_LOOP]->inside &&
	    trace_tracers[TRACER_LOOP]->flush)
		trace_tracers[TRACER_LOOP]->flush(th->bufs[TRACER_LOOP]);
	th->in_hook = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
}

/* the buffers that the call at @site needs, got with signals blocked */
static void entry_buffers(uintptr_t site, const uintptr_t *parent)
{
	uint32_t fast = trace_hot.fast;

	get_buffers(&self,
		    fast != TRACE_FAST_NONE
			? TRACER_BIT(TRACE_FAST_ID(fast))
			: TRACE_WORD_MASK(*trace_site_word(site)) & trace_hot.active,
		    parent);
}

/* First traced call of this thread in some tracer's session: get its buffers. */
int trace_entry_slow(uintptr_t ip, uintptr_t *parent)
{
	int ret;

	entry_buffers(ip - TRACE_STUB_CALL_RET + TRACE_STUB_SIZE, parent);
	ret = trace_entry_hook(ip, parent);
	/* a stop or a new session in between: not traced this time */
	return ret == TRACE_HOOK_SLOW ? TRACE_HOOK_UNTRACED : ret;
}

int trace_sample_slow(uintptr_t ip, uintptr_t *parent, uintptr_t ret_tramp)
{
	int ret;

	/*
	 * for trace_real_return: the trampoline says where it is (entry.S
	 * lies above this file); every thread comes here before its first
	 * call in the sample form
	 */
	__atomic_store_n(&sample_return, ret_tramp, __ATOMIC_RELAXED);
	entry_buffers(ip - TRACE_INSN_SIZE, parent);
	ret = trace_sample_hook(ip, parent, ret_tramp);
	return ret == TRACE_HOOK_SLOW ? TRACE_HOOK_UNTRACED : ret;
}

int trace_func_slow(uintptr_t ip, uintptr_t ret)
{
	int r;

	get_buffers(&self, TRACER_BIT(TRACER_FUNCTION) & trace_hot.active, NULL);
	r = trace_func_hook(ip, ret);
	return r == TRACE_HOOK_SLOW ? TRACE_HOOK_UNTRACED : r;
}

/* the general exit: every hijacking tracer the call went to */
static __attribute__((noinline)) void exit_general(struct trace_thread *th, struct trace_frame *e,
						   unsigned depth)
{
	uint64_t now = trace_rdtsc();

	/* the tracers' bits only (not the TRACE_FRAME_* of the fast paths) */
	for (uint32_t m = e->mask & (TRACER_BIT(TRACE_MAX_TRACERS) - 1); m; m &= m - 1) {
		unsigned id = (unsigned)__builtin_ctz(m);
		struct tbuf *b = th->bufs[id];

		if (buf_ready(b, id))
			trace_tracers[id]->exit(b, e, depth, now);
	}
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
	uint32_t saved_guard = th->in_hook;
	uint32_t d = th->depth; /* then the depth of the returning frame */
	struct trace_frame *e;
	struct tbuf *b;
	uintptr_t ret;

	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	/* one register for it, walked down: GCC would compute it anew from d */
	e = frame_at(th, d);
	__asm__("" : "+r"(e));
	/* entries above ours belong to frames that longjmp skipped */
	do {
		if (unlikely(d == 0))
			__builtin_trap(); /* no record of this return: nowhere to go */
		d--;
		e--;
	} while (e->slot != slot);
	ret = e->ret;
	if (likely(!e->mask)) {
		b = th->bufs[TRACER_GRAPH];
		if (buf_ready(b, TRACER_GRAPH))
			trace_graph_record(b, TREC_EXIT, e->site, d);
	} else if (likely(e->key == trace_hot.prof_key)) {
		/* profile alone, a call of its current session */
		trace_profile_exit_fast(th->bufs[TRACER_PROFILE], e, trace_rdtsc());
	} else if (e->mask == TRACE_FRAME_THRESH) {
		uint64_t now = trace_rdtsc();

		b = th->bufs[TRACER_GRAPH];
		if (unlikely(now - e->ts >= trace_hot.graph_thresh) && buf_ready(b, TRACER_GRAPH)) {
			uint32_t off = (uint32_t)(e->site - trace_site_base);

			tbuf_push(b, e->ts, TREC_ENTRY, d, off);
			tbuf_push(b, now, TREC_EXIT, d, off);
		}
	} else {
		/* a profile frame of an older session falls here: no tracer bit, nothing done */
		exit_general(th, e, d);
	}
	th->depth = d;
	__asm__ volatile("" ::: "memory");
	th->in_hook = saved_guard;
	return ret;
}

uint32_t trace_drop_mask;
uint32_t trace_nr_nobuf[TRACE_MAX_TRACERS];

void trace_thread_drop_stale(void)
{
	struct trace_thread *th = &self;
	uint32_t mask = __atomic_load_n(&trace_drop_mask, __ATOMIC_ACQUIRE);

	/* inside a hook: it may hold a buffer in a register, leave them all */
	if (!mask || th->in_hook)
		return;
	for (; mask; mask &= mask - 1) {
		unsigned id = (unsigned)__builtin_ctz(mask);
		struct tbuf *b = th->bufs[id];

		if (!b || __atomic_load_n(&b->session, __ATOMIC_ACQUIRE) == trace_hot.session[id])
			continue;
		th->bufs[id] = NULL;
		__atomic_store_n(&b->owner, 0, __ATOMIC_RELEASE);
	}
}

uintptr_t trace_real_return(const uintptr_t *slot)
{
	const struct trace_thread *th = &self;

	for (uint32_t d = th->depth; d > 0; d--) {
		const struct trace_frame *e = &th->frames[d];

		/*
		 * stub + 5 until the stub calls the body, stub + 10 after; a
		 * site in the sample form: trace_return_tramp
		 */
		if (e->slot == slot && ((*slot >= e->site - TRACE_STUB_SIZE && *slot < e->site) ||
					*slot == __atomic_load_n(&sample_return, __ATOMIC_RELAXED)))
			return e->ret;
	}
	return *slot;
}

unsigned trace_shadow_depth(void)
{
	return self.depth;
}

/* ---- requests: what a thread serves (trace_req.h) ---- */

/*
 * The graph ring of the calling thread for the current session, got (or
 * grown) through the slow path if need be; NULL when the thread is not
 * traced by the graph tracer. Not on a site's path: called around a
 * request's work.
 */
static struct tbuf *req_ring(struct trace_thread *th)
{
	struct tbuf *b = th->bufs[TRACER_GRAPH];

	if (buf_ready(b, TRACER_GRAPH) && b->head < b->grow_at)
		return b;
	if (!buf_ready(b, TRACER_GRAPH) &&
	    th->nobuf_session[TRACER_GRAPH] == trace_hot.session[TRACER_GRAPH])
		return NULL;
	get_buffers(th, TRACER_BIT(TRACER_GRAPH), NULL);
	b = th->bufs[TRACER_GRAPH];
	return buf_ready(b, TRACER_GRAPH) ? b : NULL;
}

/* a marker's slots (trace_priv.h: TREC_REQ, TREC_REQ_ARG), the guard held */
static inline void push_mark(struct tbuf *b, uint64_t ts, uint32_t what)
{
	tbuf_push(b, ts, TREC_FUNC, TREC_REQ, what);
}

static inline void push_arg(struct tbuf *b, uint64_t v, uint32_t idx)
{
	tbuf_push(b, v, TREC_FUNC, TREC_REQ_ARG, idx);
}

void trace_req_begin(const struct trace_req *r)
{
	struct trace_thread *th = &self;
	struct tbuf *b;
	uint64_t now;

	th->req.id = r->id;
	th->req.flags = r->flags;
	th->req.buf = NULL;
	if (!r->id ||
	    !(__atomic_load_n(&trace_hot.active, __ATOMIC_ACQUIRE) & TRACER_BIT(TRACER_GRAPH)))
		return;
	if (trace_hot.req_mode ? !(r->flags & SD_REQ_TRACE_SAMPLED)
			       : trace_hot.graph_thresh || trace_hot.graph_root)
		return; /* not chosen; or a graph that keeps slow or rooted calls only */
	/* a new ring, or one to clear, first: the tracer's own time is not the request's */
	b = req_ring(th);
	if (!b)
		return;
	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	now = trace_rdtsc();
	th->req.buf = b;
	th->req.session = b->session;
	th->req.head = b->head;
	th->req.tsc = now;
	push_mark(b, now, TREC_REQ_BEGIN | r->opcode | (uint32_t)r->flags << 8);
	push_arg(b, r->id, 0);
	push_arg(b, r->oid, 1);
	push_arg(b, r->queued, 2);
	__asm__ volatile("" ::: "memory");
	th->in_hook = 0;
	if (trace_hot.req_mode)
		trace_req_unsampled = 0;
}

void trace_req_end(int result)
{
	struct trace_thread *th = &self;
	struct tbuf *b = th->req.buf;
	uint64_t now;

	trace_req_unsampled = 1;
	th->req.buf = NULL;
	if (!b || th->bufs[TRACER_GRAPH] != b || b->session != th->req.session ||
	    !buf_ready(b, TRACER_GRAPH))
		goto out;
	th->in_hook = 1;
	__asm__ volatile("" ::: "memory");
	now = trace_rdtsc();
	if (trace_hot.req_slower && now - th->req.tsc < trace_hot.req_slower) {
		/*
		 * Faster than --slower-than: give its records back. Only this
		 * thread writes the ring; a reader that copied some of them
		 * meanwhile keeps its copy, and records written later over
		 * these slots carry the laps of their own indexes.
		 */
		__atomic_store_n(&b->head, th->req.head, __ATOMIC_RELEASE);
	} else {
		push_mark(b, now, TREC_REQ_END | ((uint32_t)result & 0xff));
		push_arg(b, th->req.id, 0);
	}
	__asm__ volatile("" ::: "memory");
	th->in_hook = 0;
out:
	th->req.id = 0;
	th->req.flags = 0;
}

uint64_t trace_req_current(uint16_t *flags)
{
	const struct trace_thread *th = &self;

	*flags = th->req.flags & SD_REQ_TRACE_SAMPLED;
	return th->req.id;
}
