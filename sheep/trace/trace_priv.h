/*
 * The tracer core's internals, shared by the files of sheep/trace and by the
 * unit tests. Nothing here is for the rest of the daemon: it sees trace.h.
 *
 * Pieces, one file each:
 *   site.c     the site table (sorted, read-only once built) and NOP setup
 *   symbol.c   function names of the sites, from /proc/self/exe (libelf)
 *   patch.c    stop-the-world and the one primitive that rewrites text
 *   entry.S    the entry and return trampolines (and the per-function stubs)
 *   hook.c     the hot path: shadow stack, recursion guard, dispatch
 *   tbuf.c     per-thread ring buffers, snapshots, the TSC clock
 *   tracer.c   tracer registry
 *   graph.c    the graph tracer
 *   render.c   output formats (graph, folded, chrome, csv)
 *   control.c  trace_init, trace_handle_op, trace_shutdown
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

#include "trace_asm.h"
#include "util.h"

#define TRACE_INSN_SIZE 5
#define TRACE_MAX_DEPTH 128		  /* shadow stack entries per thread */
#define TRACE_DEFAULT_BUFFER (1U << 20) /* bytes per thread */
#define TRACE_MIN_BUFFER 4096
#define TRACE_MAX_BUFFER (256ULL << 20)
#define TRACE_STW_TIMEOUT_MS 1000

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

/* Build the table and turn every 5x0x90 into one NOP5. 0 or -errno. */
int trace_sites_init(void);
/* The site at exactly @addr, or NULL. Lock-free binary search. */
const struct trace_site *trace_site_find(uintptr_t addr);
/* Its name, or "0x..." written into @buf. */
const char *trace_site_name(const struct trace_site *s, uintptr_t addr, char *buf, size_t len);
/* Name every site from the symbol table of /proc/self/exe. 0 or -errno. */
int trace_symbols_load(struct trace_site *sites, size_t nr_sites);

/* ---- patching (patch.c) ---- */

/* per-site state, changed only under the trace lock: 1 if it jumps to its stub */
extern uint8_t *trace_site_on;
extern unsigned trace_stw_timeout_ms;

int trace_patch_init(void);
/* Write @len bytes of text at @addr; text stays (or returns to) R-X. 0 or -errno. */
int trace_text_write(uintptr_t addr, const void *buf, size_t len);
/* Park every other thread in the SIGUSR2 handler. 0, -ETIMEDOUT or -errno. */
int trace_stw_stop(void);
void trace_stw_release(void);
/*
 * Make every site's state equal @want (one byte per site) with the world
 * stopped. Returns 0; -ETIMEDOUT if a thread did not park (nothing changed);
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
 * list and never freed; a buffer of a thread that exited keeps its records
 * until the next session reuses it.
 */
struct tbuf {
	struct tbuf *next;
	uint32_t owner;	  /* tid, 0 once its thread is gone */
	uint32_t session; /* the session it was reset for */
	uint64_t head;	  /* records ever reserved in this session */
	uint64_t mask;	  /* nr of records - 1 */
	unsigned shift;	  /* log2 nr of records */
	uint64_t nr_overflow; /* calls not traced: shadow stack full */
	size_t map_len;
	char comm[16];
	struct trace_rec *recs;
};

/* hot configuration, read by the hooks */
struct trace_hot {
	int active;		/* entries are recorded */
	uint32_t session;	/* bumped by every start */
	uint32_t depth_limit;	/* <= TRACE_MAX_DEPTH */
	uint32_t pad;
	uint64_t nr_records;	/* per buffer, power of two */
	const struct tracer_ops *tracer;
};
extern struct trace_hot trace_hot;

static inline __attribute__((always_inline)) uint64_t trace_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
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

/* Find or make the calling thread's buffer for the current session. */
struct tbuf *tbuf_get(struct tbuf *old, uint32_t tid);
/* Mark buffers of threads that exited as reusable (control path). */
void tbuf_reap(void);
/* Counters of the current session. */
void tbuf_counts(uint32_t *nr_threads, uint64_t *nr_events, uint64_t *nr_lost);

/* A consistent copy of one thread's records, oldest first. */
struct tbuf_snap {
	uint32_t tid;
	char comm[16];
	uint64_t nr_lost; /* overwritten, torn or not traced (overflow) */
	size_t nr_recs;
	struct trace_rec *recs;
};
/* Copy every buffer of the current session. 0 or -ENOMEM. */
int tbuf_snapshot(struct tbuf_snap **snaps, size_t *nr_snaps);
void tbuf_snapshot_free(struct tbuf_snap *snaps, size_t nr_snaps);

/* TSC against CLOCK_MONOTONIC, calibrated once */
void trace_clock_calibrate(void);
uint64_t trace_tsc_to_ns(uint64_t tsc);

/* ---- hooks and trampolines (hook.c, entry.S) ---- */

void trace_entry_tramp(void);
void trace_return_tramp(void);
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

/* ---- tracers (tracer.c) ---- */

struct trace_out;

/*
 * A tracer. entry and exit run on the hot path of any thread, with the
 * recursion guard held and @b the thread's buffer of this session: no lock,
 * no allocation, no syscall, general registers only (built
 * general-regs-only: the trampolines do not save the vector registers). start, stop and read
 * run on the control path under the trace lock; start gets the site table
 * already chosen and returns 0 or -errno; read renders the current session
 * in format @fmt (SD_TRACE_FMT_*) and returns 0 or -errno.
 */
struct tracer_ops {
	const char *name;
	void (*entry)(struct tbuf *b, uintptr_t site, unsigned depth);
	void (*exit)(struct tbuf *b, uintptr_t site, unsigned depth);
	int (*start)(void);
	void (*stop)(void);
	int (*read)(int fmt, struct trace_out *out);
};

/*
 * The graph tracer (graph.c): one record per entry and per exit. The hooks
 * push its records inline when it is the current tracer (it is the default)
 * instead of calling through the ops: that call costs ~2 ns per traced call.
 */
extern const struct tracer_ops trace_graph_tracer;

static inline __attribute__((always_inline)) void trace_graph_record(struct tbuf *b, unsigned type,
								     uintptr_t site, unsigned depth)
{
	tbuf_push(b, trace_rdtsc(), type, depth, (uint32_t)(site - trace_site_base));
}

/* 0, or -EINVAL for an incomplete tracer, -EEXIST, -ENOSPC */
int trace_register_tracer(const struct tracer_ops *ops);
/* by name; "" or NULL is the default (graph) */
const struct tracer_ops *trace_find_tracer(const char *name);

/*
 * Register tracer @ops from a constructor. tracer_link_<name> lets
 * tracer.c pull a built-in tracer's object out of the static library.
 */
#define tracer_register(name, ops)                                             \
	const void *const tracer_link_##name = &(ops);                         \
	static void __attribute__((constructor)) notrace tracer_register_##name(void) \
	{                                                                      \
		trace_register_tracer(&(ops));                                 \
	}

/* ---- output (render.c) ---- */

struct trace_out {
	char *buf;
	size_t len;
	size_t cap;
	bool failed; /* out of memory: the text is incomplete */
};

void tout_printf(struct trace_out *out, const char *fmt, ...) __printf(2, 3);
void tout_free(struct trace_out *out);
/* Render a snapshot of the current session's records. 0 or -errno. */
int trace_render(int fmt, const char *tracer_name, struct trace_out *out);
/* "12.345 us" from ns */
void trace_fmt_us(char *buf, size_t len, uint64_t ns);

#endif
