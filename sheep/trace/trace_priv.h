/*
 * The tracer core's internals, shared by the files of sheep/trace and by the
 * unit tests. Nothing here is for the rest of the daemon: it sees trace.h.
 *
 * Pieces, one file each:
 *   site.c     the site table (sorted, read-only once built), the site words
 *   symbol.c   function names of the sites, from /proc/self/exe (libelf)
 *   patch.c    stop-the-world, the one primitive that rewrites text, the stubs
 *   entry.S    the entry and return trampolines (and the per-function stubs)
 *   hook.c     the hot path: shadow stack, recursion guard, dispatch
 *   tbuf.c     per-thread ring buffers, snapshots, the TSC clock
 *   tracer.c   tracer registry, and trace_hot (what the hooks read)
 *   graph.c    the graph tracer
 *   render.c   output formats (graph, folded, chrome, csv)
 *   control.c  trace_init, trace_handle_op, trace_shutdown
 *   read.c     READ: the renderings being read
 *   req.c      request ids, the request mode's choice
 *   render_req.c the formats that know requests (chrome, events)
 *
 * No two files reach each other (tests/unit/layers.sh): site.c gets
 * patch.c's stub writer from trace_init, the hooks reach a tracer through
 * its ops only, control.c keeps the built-in tracers linked.
 *
 * Everything in sheep/trace is built without sites. The hot path (hook.c,
 * graph.c and the inline tbuf_push) is also built general-regs-only, so
 * that the trampolines need not save the vector registers.
 */
#ifndef TRACE_PRIV_H
#define TRACE_PRIV_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal_proto.h"
#include "trace_asm.h"
#include "trace_req.h"
#include "util.h"

#define TRACE_INSN_SIZE 5
#define TRACE_MAX_DEPTH SD_TRACE_MAX_DEPTH /* shadow stack entries per thread */
#define TRACE_DEFAULT_BUFFER (1U << 20)	  /* bytes per thread at first */
#define TRACE_DEFAULT_MAX_BUFFER (64U << 20) /* what a default buffer may grow to */
#define TRACE_GROW_MARGIN 512 /* records: exits pushed after the last entry's check */
#define TRACE_MIN_BUFFER 4096
#define TRACE_MAX_BUFFER SD_TRACE_MAX_BUFFER
/*
 * What every ring of every tracer may take in all (pages populated, kept
 * for reading after a stop, until the tracer's next start): a start whose
 * --buffer-size times the threads would go past it is refused, and a
 * thread that would go past it (a ring that grows, a thread that came
 * later) is not traced in that session.
 */
#define TRACE_MAX_TOTAL SD_TRACE_MAX_TOTAL
extern uint64_t trace_max_total; /* TRACE_MAX_TOTAL; tests lower it */
#define TRACE_STW_TIMEOUT_MS 1000
#define TRACE_MAX_FOLLOWERS 4	   /* cat --follow readers at once (follow.c) */
#define TRACE_FOLLOW_IDLE_SEC 30 /* a follower silent this long gives its slot up */

/* ---- sites (site.c, symbol.c) ---- */

/* One patchable function entry. The table is sorted by addr and read-only. */
struct trace_site {
	uintptr_t addr;
	const char *name; /* function name, NULL if the symbol table has none */
};

extern const struct trace_site *trace_sites;
extern size_t trace_nr_sites;
extern uintptr_t trace_site_base; /* lowest site address: records hold addr - base */

extern const uint8_t trace_nop5[TRACE_INSN_SIZE];

/*
 * Build the table, single-threaded, once: @prepare (patch.c's
 * trace_sites_prepare) writes the stubs and turns every 5x0x90 into one
 * NOP5 before the table is named and published; its error fails it.
 * 0 or -errno.
 */
int trace_sites_init(int (*prepare)(const struct trace_site *sites, size_t nr));
/* The site at exactly @addr, or NULL. Lock-free binary search. */
const struct trace_site *trace_site_find(uintptr_t addr);
/* Its name, or "0x..." written into @buf. */
const char *trace_site_name(const struct trace_site *s, uintptr_t addr, char *buf, size_t len);
/* Name every site from the symbol table of /proc/self/exe. 0 or -errno. */
int trace_symbols_load(struct trace_site *sites, size_t nr_sites);
/* The function of the program that contains @addr, or NULL. */
const char *trace_symbol_name(uintptr_t addr);
/* Where function @name of the program lies: [*start, *end). 0 or -ENOENT. */
int trace_symbol_range(const char *name, uintptr_t *start, uintptr_t *end);

/* ---- patching (patch.c) ---- */

/*
 * per-site state (TRACE_SITE_*), changed only under the trace lock: a NOP,
 * a jump to its stub (hijacking tracers), or a call of trace_func_tramp
 * (entry-only tracers alone at the site)
 */
#define TRACE_SITE_NOP 0
#define TRACE_SITE_STUB 1
#define TRACE_SITE_CALL 2
/*
 * a call of trace_sample_tramp: the graph tracer's request mode alone at
 * the site (a call for a request not chosen costs a thread-local test)
 */
#define TRACE_SITE_SAMPLE 3
extern uint8_t *trace_site_on;
extern unsigned trace_stw_timeout_ms;

int trace_patch_init(void);
/*
 * Write every site's stub and turn every site into NOP5 (trace_sites_init
 * calls it before other threads exist), and allocate trace_site_on. A site
 * that holds neither 16 + 5 NOPs nor its stub and NOP5 is an anomaly:
 * nothing is written. 0 or -errno.
 */
int trace_sites_prepare(const struct trace_site *sites, size_t nr);
/* Write @len bytes of text at @addr; text stays (or returns to) R-X. 0 or -errno. */
int trace_text_write(uintptr_t addr, const void *buf, size_t len);
/* Park every other thread in the SIGUSR2 handler. 0, -ETIMEDOUT or -errno. */
int trace_stw_stop(void);
void trace_stw_release(void);
/*
 * Make every site's state equal @want (one TRACE_SITE_* byte per site) with
 * the world stopped. Returns 0; -ETIMEDOUT if a thread did not park (nothing changed);
 * -EIO after an anomaly (every site is a NOP again, the caller must mark the
 * tracer broken).
 */
int trace_patch(const uint8_t *want);
/* Put NOP5 back on every patched site, the world stopped. */
int trace_patch_all_off(void);
/* true if some mapping of the process is writable and executable */
bool trace_has_wx_mapping(void);

/* ---- ring buffers (tbuf.c) ---- */

struct trace_rec {
	uint64_t ts;   /* raw TSC */
	uint64_t word; /* site offset 0-31, type 32-33, depth 34-43, lap 44-63 */
};

#define TREC_ENTRY 1
#define TREC_EXIT 2
/*
 * The function tracer's call: two slots, the first with the TSC and the
 * site, the second (depth TREC_CALLER) with the caller's address in ts.
 */
#define TREC_FUNC 3
#define TREC_CALLER 1023
/*
 * Request markers in a graph ring (trace_req_begin/end): type TREC_FUNC,
 * which no graph record has. A begin is one TREC_REQ slot (the TSC; site
 * bits: TREC_REQ_BEGIN | opcode | flags << 8) and three TREC_REQ_ARG slots
 * whose ts holds the id (site 0), the oid (1) and the TSC when it was
 * queued (2); an end is one TREC_REQ slot (TREC_REQ_END | result) and the
 * id (site 0).
 */
#define TREC_REQ 1022
#define TREC_REQ_ARG 1021
#define TREC_REQ_BEGIN (1U << 24)
#define TREC_REQ_END (2U << 24)
#define TREC_REQ_KIND(site) ((site) & (3U << 24))

#define TREC_SITE(w) ((uint32_t)(w))
#define TREC_TYPE(w) ((unsigned)((w) >> 32) & 3)
#define TREC_DEPTH(w) ((unsigned)((w) >> 34) & 1023)
#define TREC_LAP(w) ((uint32_t)((w) >> 44))
#define TREC_LAP_MASK 0xfffffULL

/*
 * One thread's buffer. Only its owner writes it, and only from a hook with
 * the thread's recursion guard held (hook.c): a signal handler that
 * interrupts a push runs no hook of its own, so the push is never
 * interleaved with another one on the same buffer. Buffers are on a global
 * list; a buffer of a thread that exited keeps its records until the next
 * start of its tracer, which reuses it (same size) or frees it
 * (tbuf_reclaim).
 */
struct tbuf {
	struct tbuf *next;
	uint32_t owner;	  /* tid, 0 once its thread is gone */
	uint32_t session; /* the session it was reset for */
	uint32_t tracer;  /* the id of the tracer it belongs to */
	uint32_t on_main; /* its thread is the main one (its tid is the pid) */
	uint32_t inside;  /* graph: roots of --graph-function open on this thread */
	void *top;	  /* profile: the innermost profiled frame of the thread */
	/* profile: the thread's last call, counted in the table at its next one */
	struct trace_prof_ent *pend_ent; /* a profile table's scratch entry at first */
	uint64_t pend_dur;
	uint64_t prof_len;   /* profile: entries the table holds (trace_prof_len) */
	uint64_t frame_key;  /* profile: trace_frame.key of its calls (its session) */
	uint64_t followed[TRACE_MAX_FOLLOWERS]; /* per follower: records before this one were sent */
	uint64_t head;	  /* records ever reserved in this session */
	uint64_t mask;	  /* nr of records - 1 */
	unsigned shift;	  /* log2 nr of records */
	uint64_t grow_at; /* an entry at this head grows the ring first (slow path) */
	uint64_t map_nr;  /* records the mapping holds: what the ring may grow to */
	uint64_t nr_overflow; /* calls not traced: shadow stack full */
	size_t map_len;
	char comm[16];
	struct trace_rec *recs; /* just after it: cache-line aligned (profile entries) */
} __attribute__((aligned(64)));

/*
 * Tracers that can run at once, each with a fixed id (its bit in the masks
 * below). The ids are the wire's SD_TRACER_* minus one.
 */
#define TRACE_MAX_TRACERS 8
#define TRACER_GRAPH 0
#define TRACER_FUNCTION 1
#define TRACER_PROFILE 2
#define TRACER_LOOP 3
#define TRACER_THREAD 4
#define TRACER_BIT(id) (1U << (id))

/*
 * The site word, one per site, found without a search: trace_site_words is
 * indexed by (site >> 4) - (trace_site_base >> 4) (sites are at least 21
 * bytes apart, so no two share a slot). Bits 0-21 are the site's index in the
 * profile tables, bits 22-23 the thread checker's marks, bits 24-30 the
 * tracers that want the site, bit TRACE_WORD_ROOT marks a --graph-function
 * root. Written on the control
 * path (one 32-bit store), read by the hooks.
 */
#define TRACE_WORD_INDEX(w) ((w)&0x3fffffU)
#define TRACE_WORD_MAIN_ONLY (1U << 22)	  /* thread checker: runs on the main thread only */
#define TRACE_WORD_WORKER_ONLY (1U << 23) /* thread checker: never on the main thread */
#define TRACE_WORD_MASK(w) (((w) >> 24) & 0x7fU)
#define TRACE_WORD_ROOT (1U << 31)
extern uint32_t *trace_site_words;
extern size_t trace_nr_site_words;
/* (uintptr_t)trace_site_words - (trace_site_base >> 4) * 4: a site's word in one load */
extern uintptr_t trace_site_words_bias;

static inline __attribute__((always_inline)) uint32_t *trace_site_word(uintptr_t site)
{
	return (uint32_t *)(trace_site_words_bias + (site >> 4) * sizeof(uint32_t));
}

/*
 * One tracer alone is served inline by the hooks, without the dispatch
 * (every patched site is then its): graph, graph with --threshold, profile.
 * A frame pushed on such a path says so in its mask: 0 for graph (as the
 * graph tracer's fast path always did), or a TRACE_FRAME_* value.
 */
#define TRACE_FAST_NONE 0
#define TRACE_FAST_GRAPH 1
#define TRACE_FAST_THRESH 5
#define TRACE_FAST_PROFILE 2
/* the id of the tracer a fast mode serves, without a branch (the values above) */
#define TRACE_FAST_ID(fast) ((fast)&2)
_Static_assert(TRACE_FAST_ID(TRACE_FAST_GRAPH) == TRACER_GRAPH &&
		   TRACE_FAST_ID(TRACE_FAST_THRESH) == TRACER_GRAPH &&
		   TRACE_FAST_ID(TRACE_FAST_PROFILE) == TRACER_PROFILE,
	       "fast modes encode their tracer");
#define TRACE_FRAME_THRESH (1U << 8)
#define TRACE_FRAME_PROFILE (1U << 9)

/* hot configuration, read by the hooks */
struct trace_hot {
	uint32_t active;	   /* TRACER_BIT()s of the tracers on */
	uint32_t fast;		   /* TRACE_FAST_*: one tracer alone, served inline */
	uint32_t depth_limit;	   /* <= TRACE_MAX_DEPTH */
	uint32_t graph_root;	   /* graph records only inside a --graph-function root */
	uint64_t graph_thresh;	   /* graph keeps only calls of at least this many ticks */
	uint64_t loop_lo, loop_hi; /* loop: the event loop's dispatch function */
	uint64_t loop_thresh;	   /* loop: ticks a handler may hold the main thread */
	uint32_t session[TRACE_MAX_TRACERS];	 /* bumped by every start of that tracer */
	uint64_t nr_records[TRACE_MAX_TRACERS];	 /* per buffer at first, power of two */
	uint64_t max_records[TRACE_MAX_TRACERS]; /* what a buffer may grow to */
	/* profile's fast path: a frame of its current session (trace_frame.key) */
	uint64_t prof_key;
	/*
	 * The graph tracer's request mode (--sample, --vdi, --slower-than):
	 * its sites call trace_sample_tramp, and only the requests chosen at
	 * their gateway are recorded (trace_req_unsampled). req_sample: one
	 * in that many; req_vid: only that VDI's (req_has_vid); req_slower:
	 * ticks a request's part must take for its records to stay.
	 */
	uint32_t req_mode;
	uint32_t req_sample;
	uint32_t req_vid;
	uint32_t req_has_vid;
	uint64_t req_slower;
};
extern struct trace_hot trace_hot;

static inline __attribute__((always_inline)) uint64_t trace_rdtsc(void)
{
	uint64_t lo, hi;

	/* 64-bit outputs: rdtsc clears the upper halves, no zero-extension needed */
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (hi << 32) | lo;
}

/*
 * Reserve and fill one record. Call it only with the recursion guard held
 * (a tracer's entry and exit are): no other push of this buffer can run
 * between the load and the store of the head, not even a signal handler's,
 * so a plain increment does (a locked or xadd one costs 1-2 ns per call).
 */
static inline __attribute__((always_inline)) void tbuf_push(struct tbuf *b, uint64_t ts,
							    unsigned type, unsigned depth,
							    uint32_t site_off)
{
	uint64_t i = b->head;
	struct trace_rec *r;

	/* relaxed: readers on other threads load head with acquire */
	__atomic_store_n(&b->head, i + 1, __ATOMIC_RELAXED);
	__asm__ volatile("" ::: "memory"); /* the slot is ours before it is written */
	r = &b->recs[i & b->mask];
	r->ts = ts;
	/*
	 * The word goes last: a reader that sees the lap of this pass in it
	 * also sees the timestamp (x86 keeps stores in order; the release
	 * store keeps the compiler from swapping them).
	 */
	__atomic_store_n(&r->word,
			 (uint64_t)site_off | (uint64_t)type << 32 | (uint64_t)(depth & 1023) << 34 |
				 ((i >> b->shift) & TREC_LAP_MASK) << 44,
			 __ATOMIC_RELEASE);
}

/* Find or make the calling thread's buffer of tracer @id for its current session. */
struct tbuf *tbuf_get(struct tbuf *old, uint32_t tid, unsigned id);
/*
 * Double the ring of the calling thread's buffer @b, which reached grow_at
 * before it wrapped (slow path: it faults pages in). 0 or -ENOSPC.
 */
int tbuf_grow(struct tbuf *b);
/* Mark buffers of threads that exited as reusable (control path). */
void tbuf_reap(void);
/*
 * At a start of tracer @id (its session already bumped), with the world
 * stopped and every thread's stale references dropped
 * (trace_thread_drop_stale): free each buffer of @id from an older session
 * that no thread holds, unless @keep_reusable and a thread of the new
 * session can reuse it as it is (tbuf_reusable). Returns the bytes given
 * back.
 */
uint64_t tbuf_reclaim(unsigned id, bool keep_reusable);
/* a buffer of an older session that the new one of its tracer takes as it is */
bool tbuf_reusable(const struct tbuf *b, uint64_t nr_records, uint64_t max_records);
/* bytes of ring pages populated (under trace_max_total), buffers on the list */
void tbuf_memory(uint64_t *bytes, uint32_t *nr_bufs);
/* bytes of ring pages that tracer @id's buffers hold, every session's */
uint64_t tbuf_held(unsigned id);
/* req.c: --sample counts from the first request of the new session */
void trace_req_reset_count(void);
/* Counters of tracer @id's current session. */
void tbuf_counts(unsigned id, uint32_t *nr_threads, uint64_t *nr_events, uint64_t *nr_lost);
/* Call @fn on each buffer of tracer @id's current session. */
void tbuf_for_each(unsigned id, void (*fn)(const struct tbuf *b, void *arg), void *arg);
/* The same, for the control path that updates the buffers' follow cursors. */
void tbuf_for_each_mut(unsigned id, int (*fn)(struct tbuf *b, void *arg), void *arg);

/* A consistent copy of one thread's records, oldest first. */
struct tbuf_snap {
	uint32_t tid;
	char comm[16];
	uint64_t nr_lost; /* overwritten, torn or not traced (overflow) */
	size_t nr_recs;
	struct trace_rec *recs;
	size_t map_len; /* the pages of recs */
};
/*
 * The buffers of tracer @id's current session, in a new array (free it).
 * They stay valid until the tracer's next start (or a start that frees a
 * stopped tracer's rings): control.c ends every rendering then.
 */
int tbuf_list_current(unsigned id, struct tbuf ***bufs, size_t *nr);
/*
 * Copy the records of @b, if it still is of tracer @id's current session:
 * 0, -ESTALE (it is not) or -ENOMEM. tbuf_snap_release gives the copy back.
 */
int tbuf_snap_one(const struct tbuf *b, unsigned id, struct tbuf_snap *s);
void tbuf_snap_release(struct tbuf_snap *s);

/* TSC against CLOCK_MONOTONIC, calibrated once */
void trace_clock_calibrate(void);
uint64_t trace_tsc_to_ns(uint64_t tsc);

/* ---- hooks and trampolines (hook.c, entry.S) ---- */

void trace_entry_tramp(void);
void trace_return_tramp(void);
void trace_func_tramp(void);
void trace_sample_tramp(void);
/*
 * the sample form's hooks: @ip is the site + 5, @parent as for
 * trace_entry_hook, @ret_tramp trace_return_tramp
 */
int trace_sample_hook(uintptr_t ip, uintptr_t *parent, uintptr_t ret_tramp);
int trace_sample_slow(uintptr_t ip, uintptr_t *parent, uintptr_t ret_tramp);
/* not 0 while the thread serves no request the request mode chose (hook.c) */
extern __thread uint32_t trace_req_unsampled;
/* entry-only sites (trace_func_tramp): @ip is the site + 5, @ret the caller */
int trace_func_hook(uintptr_t ip, uintptr_t ret);
int trace_func_slow(uintptr_t ip, uintptr_t ret);
/* TRACE_HOOK_* (trace_asm.h) */
int trace_entry_hook(uintptr_t ip, uintptr_t *parent);
int trace_entry_slow(uintptr_t ip, uintptr_t *parent);
uintptr_t trace_exit_hook(uintptr_t sp);
/*
 * The real return address stored at @slot of the calling thread's stack:
 * *slot itself unless the tracer swapped it for the function's stub.
 */
uintptr_t trace_real_return(const uintptr_t *slot);
/* shadow stack depth of the calling thread (tests) */
unsigned trace_shadow_depth(void);
/*
 * Reclaiming buffers: the controller sets trace_drop_mask (TRACER_BIT()s)
 * and stops the world; each thread, from the stop-the-world handler (or
 * the controller itself), drops its references to buffers of those
 * tracers from an older session and disowns them, unless it was stopped
 * inside a hook (trace_thread_drop_stale; async-signal-safe).
 */
extern uint32_t trace_drop_mask;
void trace_thread_drop_stale(void);
/* per tracer: threads not traced in its session for want of buffer memory */
extern uint32_t trace_nr_nobuf[TRACE_MAX_TRACERS];

/* ---- tracers (tracer.c) ---- */

struct trace_out;
struct trace_render;

/*
 * One shadow stack entry: what the hooks keep of a traced call whose return
 * they hijacked. Tracers see it at entry and exit and may use ts, child and
 * parent; the hooks own the rest.
 */
struct trace_frame {
	uintptr_t ret;		    /* the real return address (the caller) */
	uintptr_t site;		    /* the site of the call */
	const uintptr_t *slot;	    /* where the return address lives on the stack */
	union {
		struct {
			uint32_t word; /* the site word at entry */
			uint32_t mask; /* the tracers this call went to */
		};
		/* profile's fast path: the session | TRACE_FRAME_PROFILE << 32 */
		uint64_t key;
	};
	uint64_t ts;		    /* TSC at entry (not set on graph's fast path) */
	/*
	 * profile's fast path: the durations of the profiled calls that
	 * returned directly inside this one (each adds its own to the frame
	 * below it)
	 */
	uint64_t inner;
	union {
		struct trace_frame *parent;  /* profile: the enclosing profiled frame */
		struct trace_prof_ent *ent; /* profile's fast path: the site's entry */
	};
	uint64_t spare; /* 64 bytes: a frame's address is a shift away */
};

/* what a start asks of a tracer */
struct trace_config {
	size_t nr_sites;      /* sites chosen for it (profile index 0..nr_sites-1) */
	uint64_t buffer_size; /* bytes per thread; start may change it */
	uint64_t thresh_ns;   /* graph: --threshold (0: none) */
	bool has_root;	      /* graph: --graph-function given */
};

/*
 * A tracer. entry and exit run on the hot path of any thread, with the
 * recursion guard held and @b the thread's buffer of this tracer's session:
 * no lock, no allocation, no syscall, general registers only (built
 * general-regs-only: the trampolines do not save the vector registers).
 * exit is NULL for an entry-only tracer (the return is not hijacked for
 * it); @now is the TSC at the return. start, stop and read run on the
 * control path under the trace lock; start returns 0 or -errno; read
 * sets up @r, a rendering of the tracer's current session in format @fmt
 * (SD_TRACE_FMT_*): the records' walk (trace_render_records) or a text
 * made at once (trace_render_text), and returns 0 or -errno (-EINVAL: not
 * a format of this tracer).
 */
struct tracer_ops {
	const char *name;
	unsigned id; /* TRACER_*: its bit in the masks */
	void (*entry)(struct tbuf *b, struct trace_frame *f, unsigned depth);
	void (*exit)(struct tbuf *b, struct trace_frame *f, unsigned depth, uint64_t now);
	int (*start)(struct trace_config *c);
	void (*stop)(void);
	int (*read)(int fmt, struct trace_render *r);
	/*
	 * optional: the hooks' slow path calls it at a thread's next traced
	 * entry once the tracer's exit marked its buffer (b->inside), with
	 * signals blocked and errno saved: there it may log (the loop checker)
	 */
	void (*flush)(struct tbuf *b);
};

/*
 * The graph tracer (graph.c): one record per entry and per exit. The hooks
 * push its records inline when it runs alone without options (the common
 * case) instead of calling through the ops: that call costs ~2 ns per
 * traced call.
 */
extern const struct tracer_ops trace_graph_tracer;

static inline __attribute__((always_inline)) void trace_graph_record(struct tbuf *b, unsigned type,
								     uintptr_t site, unsigned depth)
{
	tbuf_push(b, trace_rdtsc(), type, depth, (uint32_t)(site - trace_site_base));
}

/* the function tracer's record (function.c): the TSC and the site, then the caller */
static inline __attribute__((always_inline)) void
trace_function_record(struct tbuf *b, uint64_t ts, uintptr_t site, uintptr_t caller)
{
	uint32_t off = (uint32_t)(site - trace_site_base);

	tbuf_push(b, ts, TREC_FUNC, 0, off);
	tbuf_push(b, caller, TREC_FUNC, TREC_CALLER, off);
}

/* 0, or -EINVAL for an incomplete tracer, -EEXIST, -ENOSPC */
int trace_register_tracer(const struct tracer_ops *ops);
/* by name; "" or NULL is the default (graph) */
const struct tracer_ops *trace_find_tracer(const char *name);
/* by id, NULL if none */
const struct tracer_ops *trace_tracer_by_id(unsigned id);

/*
 * Register tracer @ops from a constructor. tracer_link_<name> lets
 * control.c pull a built-in tracer's object out of the static library.
 */
#define tracer_register(name, ops)                                             \
	const void *const tracer_link_##name = &(ops);                         \
	static void __attribute__((constructor)) notrace tracer_register_##name(void) \
	{                                                                      \
		trace_register_tracer(&(ops));                                 \
	}

/* ---- the profile tracer (profile.c) ---- */

#define TRACE_PROF_BUCKETS 40 /* log2 of ns: [2^k, 2^(k+1)), the last one open */
#define TRACE_PROF_NR_LZ 64   /* lzcnt of the call's ns << 32: 0..64 */
#define TRACE_PROF_BIG 31     /* the first bucket past that product's 63 bits */

/*
 * One site's figures in one thread's table; times in TSC ticks. The calls
 * are the sum of the histogram (plus the thread's pending call): one
 * increment less per call. The self time is total - child: child sums the
 * durations of the profiled calls made directly inside this function's
 * calls, which is the sum over its calls of their children's time: no
 * per-call subtraction.
 *
 * The histogram is kept as the hot path finds it cheapest: a call of
 * @dur ticks is dur * trace_clk_mult = its ns << 32 (32.32 fixed point,
 * the definition of its ns), whose leading zeros say its log2 bucket
 * (31 - lz; 0 from lz 31 on) with one signed multiply and one lzcnt, no
 * table. Calls of 2^31 ns (2.1 s) and more overflow the product: those
 * count by bucket in big[] (the reference computation, off the common
 * path). A negative product (lz 0) is a duration of 2^63 ticks or more, a
 * clock that went backwards: the last bucket, as the definition says.
 * trace_prof_hist() gives the buckets.
 */
struct trace_prof_ent {
	uint64_t total;
	uint64_t child;
	uint64_t min; /* UINT64_MAX: none yet (a table's reset sets it) */
	uint64_t max;
	uint64_t by_lz[TRACE_PROF_NR_LZ + 1]; /* by what the lzcnt encoding answers */
	uint64_t big[TRACE_PROF_BUCKETS - TRACE_PROF_BIG];
	uint64_t pad[2]; /* 640 bytes: each entry starts a cache line */
};
_Static_assert(sizeof(struct trace_prof_ent) % 64 == 0, "profile entries start cache lines");

extern uint64_t trace_clk_mult;

/* the histogram bucket of a call of @dur ticks: log2 of its ns (the definition) */
static inline unsigned trace_prof_bucket_ref(uint64_t dur)
{
	unsigned __int128 ns = ((unsigned __int128)dur * trace_clk_mult) >> 32;

	if (ns >> (TRACE_PROF_BUCKETS - 1))
		return TRACE_PROF_BUCKETS - 1;
	return 63 - (unsigned)__builtin_clzll((uint64_t)ns | 1);
}

/*
 * The lzcnt encoding is bsr's with a prefix: a CPU without lzcnt answers
 * 63 - lz. Set at calibration (trace_prof_lz_init), read when a histogram
 * is read, never on the hot path.
 */
extern bool trace_prof_lz_is_bsr;
void trace_prof_lz_init(void);

/*
 * What the lzcnt encoding answers for @v: 0..64 (lzcnt), or 63 - lz for a
 * non-zero @v and 0 for 0 (bsr leaves its destination, tied to @v, as it
 * was): an index of by_lz[] either way.
 */
static inline __attribute__((always_inline)) uint64_t trace_prof_lzcnt(uint64_t v)
{
	__asm__("lzcnt %0, %0" : "+r"(v) : : "cc");
	return v;
}

/*
 * *@x = @dur * trace_clk_mult, signed, unless that overflows (false). One
 * imul with the factor from memory and one jo: what GCC makes of
 * __builtin_mul_overflow takes two moves more.
 */
static inline __attribute__((always_inline)) bool trace_prof_mul(uint64_t dur, uint64_t *x)
{
	uint64_t v = dur;

	__asm__ goto("imul %[m], %[v]\n\tjo %l[overflow]"
		     : [v] "+r"(v)
		     : [m] "m"(trace_clk_mult)
		     : "cc"
		     : overflow);
	*x = v;
	return true;
overflow:
	return false;
}

/* count a call of @dur ticks in entry @t */
static inline __attribute__((always_inline)) void trace_prof_add(struct trace_prof_ent *t,
								 uint64_t dur)
{
	uint64_t x;

	if (dur < t->min)
		t->min = dur;
	if (dur > t->max)
		t->max = dur;
	t->total += dur;
	if (likely(trace_prof_mul(dur, &x)))
		t->by_lz[trace_prof_lzcnt(x)]++;
	else
		t->big[trace_prof_bucket_ref(dur) - TRACE_PROF_BIG]++;
}

/* the calls of entry @t in histogram bucket @k */
static inline uint64_t trace_prof_hist(const struct trace_prof_ent *t, unsigned k)
{
	uint64_t n = 0;

	if (k >= TRACE_PROF_BIG) {
		n = __atomic_load_n(&t->big[k - TRACE_PROF_BIG], __ATOMIC_RELAXED);
		/* lz 0: a negative product */
		if (k == TRACE_PROF_BUCKETS - 1)
			n += __atomic_load_n(&t->by_lz[trace_prof_lz_is_bsr ? 63 : 0],
					     __ATOMIC_RELAXED);
		return n;
	}
	/* lz 31 - k, or 31 to 64 (a product of 0) for bucket 0 */
	for (unsigned lz = 31 - k; lz < (k ? 32 - k : TRACE_PROF_NR_LZ + 1); lz++) {
		if (!trace_prof_lz_is_bsr)
			n += __atomic_load_n(&t->by_lz[lz], __ATOMIC_RELAXED);
		else if (lz < TRACE_PROF_NR_LZ) /* bsr: 63 - lz, and 0 for a product of 0 too */
			n += __atomic_load_n(&t->by_lz[63 - lz], __ATOMIC_RELAXED);
	}
	return n;
}

/* the shortest call of entry @t (0 if none) */
static inline uint64_t trace_prof_min(const struct trace_prof_ent *t)
{
	return t->min != UINT64_MAX ? t->min : 0;
}

/* the self time of entry @t */
static inline uint64_t trace_prof_self(const struct trace_prof_ent *t)
{
	return t->total > t->child ? t->total - t->child : 0;
}

/*
 * The calls counted in @t of buffer @b's table, with the pending one. A
 * reader on another thread may count a call twice or miss one while the
 * owner moves its pending call into the table (a live view).
 */
static inline uint64_t trace_prof_calls(const struct tbuf *b, const struct trace_prof_ent *t)
{
	uint64_t n = __atomic_load_n(&b->pend_ent, __ATOMIC_RELAXED) == t;

	for (unsigned k = 0; k <= TRACE_PROF_NR_LZ; k++)
		n += __atomic_load_n(&t->by_lz[k], __ATOMIC_RELAXED);
	for (unsigned k = 0; k < TRACE_PROF_BUCKETS - TRACE_PROF_BIG; k++)
		n += __atomic_load_n(&t->big[k], __ATOMIC_RELAXED);
	return n;
}

/* the sites profiled, by profile index (control.c sets them before a start) */
extern uint32_t *trace_prof_sites;
extern size_t trace_nr_prof_sites;

/*
 * Entries of a profile table (the buffer of one thread), the last of which
 * is the thread's scratch entry (b->prof_len is its index): it takes what
 * has no entry of its own (a site index of another session than the
 * table's, the pending call of a thread that made none yet), so that the
 * hot path needs no test for it. Readers stop before it.
 */
static inline __attribute__((always_inline)) size_t trace_prof_len(const struct tbuf *b)
{
	return (size_t)((b->mask + 1) * sizeof(struct trace_rec) / sizeof(struct trace_prof_ent));
}

/*
 * A profiled call of duration @dur (ticks), to count in entry @t of its
 * thread's table @b. Its duration comes from the clock read just before:
 * the table's work on it (compares, the multiply and lzcnt, stores to an
 * address known last) would hold up everything after it. So the call
 * waits in the buffer (pend_*) and is counted at the thread's next profiled
 * return, whose own clock read it then overlaps; readers add the pending
 * call. pend_ent is never NULL in a profile table (the scratch entry at
 * first).
 */
static inline __attribute__((always_inline)) void
trace_profile_count(struct tbuf *b, struct trace_prof_ent *t, uint64_t dur)
{
	trace_prof_add(b->pend_ent, b->pend_dur);
	b->pend_dur = dur;
	__atomic_store_n(&b->pend_ent, t, __ATOMIC_RELAXED);
}

/* the entry of profile index @idx in @b's table, NULL if it has none */
static inline __attribute__((always_inline)) struct trace_prof_ent *
trace_prof_ent_of(const struct tbuf *b, uint32_t idx)
{
	if (unlikely(idx >= b->prof_len))
		return NULL; /* an index of another session than the table's */
	return (struct trace_prof_ent *)b->recs + idx;
}

/* the same, the scratch entry for none (profile's fast path) */
static inline __attribute__((always_inline)) struct trace_prof_ent *
trace_prof_ent_fast(const struct tbuf *b, uint32_t idx)
{
	uint64_t i = idx;

	/* a cmov: GCC would branch, and lay the common case out as the jump */
	__asm__("cmp %1, %0\n\tcmova %1, %0" : "+r"(i) : "r"(b->prof_len) : "cc");
	return (struct trace_prof_ent *)b->recs + i;
}

/*
 * Beside other tracers (profile.c): a profiled call returns at TSC @now;
 * count it and add it to the children of @parent, its innermost profiled
 * caller (NULL: none), found through a chain of the frames.
 */
static inline __attribute__((always_inline)) void
trace_profile_exit(struct tbuf *b, struct trace_frame *f, struct trace_frame *parent, uint64_t now)
{
	struct trace_prof_ent *t = trace_prof_ent_of(b, TRACE_WORD_INDEX(f->word)), *pt;
	uint64_t dur = now - f->ts;

	if (!t)
		return;
	if (parent && (pt = trace_prof_ent_of(b, TRACE_WORD_INDEX(parent->word))))
		pt->child += dur;
	trace_profile_count(b, t, dur);
}

/*
 * Profile alone (the hooks' fast path): the entry found the site's entry
 * of the table (f->ent, maybe the scratch one), noted the session and
 * TRACE_FRAME_PROFILE (f->key) and set f->inner to 0. The exit adds what
 * the profiled calls made directly inside this one took (f->inner, which
 * their exits filled) to the entry's child, which gives the self time
 * (total - child), and its own duration to the frame below it on the
 * shadow stack (f - 1: its caller's, or a slot below the outermost one),
 * no parent looked for. It reads the clock, adds, and leaves the call
 * pending. Called only if f->key is trace_hot.prof_key: the call began in
 * the current session, so its table is still the thread's, @b.
 */
static inline __attribute__((always_inline)) void
trace_profile_exit_fast(struct tbuf *b, struct trace_frame *f, uint64_t now)
{
	uint64_t dur = now - f->ts;

	f->ent->child += f->inner;
	f[-1].inner += dur;
	trace_profile_count(b, f->ent, dur);
}

/* ---- the loop checker (loop.c) ---- */

#define TRACE_LOOP_FUNCTION "ev_loop_once" /* calls it makes are handlers */
#define TRACE_LOOP_DEFAULT_NS (10ULL * 1000 * 1000)

/* a call that returns into the event loop's dispatch: a handler */
static inline __attribute__((always_inline)) bool trace_is_handler(uintptr_t ret)
{
	return ret >= trace_hot.loop_lo && ret < trace_hot.loop_hi;
}

/* ---- the thread checker (thread.c) ---- */

/* its own rules, used when a start gives no main= or worker= pattern */
extern const char *const trace_thread_main_only[];
extern const char *const trace_thread_worker_only[];

/* ---- streaming (follow.c) ---- */

/*
 * SD_OP_TRACE_FOLLOW: the records of tracer @id written since the follower
 * *@handle's last call (*@handle 0: a new follower, from the oldest record
 * still held; its handle is stored there), as lines into @buf (at most
 * @len bytes); *@out_len is what was written. 0, -EBUSY (every slot taken),
 * -ESTALE (the handle's slot went to another follower) or -EINVAL.
 */
int trace_follow(unsigned id, uint64_t *handle, char *buf, size_t len, size_t *out_len);

/* ---- the control path (control.c, read.c) ---- */

/* SD_RES_* of a -errno of the tracer (read.c) */
int trace_errno_to_res(int err);
/*
 * READ of tracer @id (it exists; the format is one of the wire's): start a
 * rendering at offset 0, or go on with the one req->trace.buffer_size
 * names (0: the newest). SD_RES_*.
 */
int trace_read_op(const struct sd_req *req, struct sd_rsp *rsp, void *data, unsigned id);
/* end every rendering (a start: the buffers they walk may go) */
void trace_renderings_end(void);

/* ---- output (render.c) ---- */

struct trace_out {
	char *buf;
	size_t len;
	size_t cap;
	bool failed; /* out of memory: the text is incomplete */
};

void tout_printf(struct trace_out *out, const char *fmt, ...) __printf(2, 3);
void tout_free(struct trace_out *out);

/*
 * A rendering, read as it is made (render.c): new, then set up by the
 * tracer's read op, then read in pieces until done, then freed.
 */
struct trace_render *trace_render_new(void);
/* walk tracer @id's records in @fmt (tracer: its name): 0 or -errno (-EINVAL) */
int trace_render_records(struct trace_render *r, unsigned id, int fmt, const char *tracer);
/* or a text made at once: what the tracer writes to it is the rendering */
struct trace_out *trace_render_text(struct trace_render *r);
/* up to @len bytes more into @buf: how many (0: the end), or -errno */
ssize_t trace_render_read(struct trace_render *r, char *buf, size_t len);
/* every byte of it was read */
bool trace_render_done(const struct trace_render *r);
void trace_render_free(struct trace_render *r);
/* "12.3%: a larger --buffer-size keeps them", or "none" */
void trace_fmt_loss(char *buf, size_t len, uint64_t lost, uint64_t total);
/* "12.345 us" from ns */
void trace_fmt_us(char *buf, size_t len, uint64_t ns);

#endif
