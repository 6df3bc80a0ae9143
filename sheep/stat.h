/*
 * Always-on request statistics: what `collie node stat` and /metrics show.
 *
 * Per opcode: requests in flight, completions (the sum of the histogram),
 * errors, bytes, summed await (dispatch to reply), busy time and a log2
 * latency histogram; the TOTAL row's busy time (any op in flight) too.
 * Busy time is kept at its transitions only: entering busy subtracts the
 * clock, leaving adds it, and a reader adds its own clock while requests
 * are in flight, so a request that never ends shows as 100% busy at once.
 *
 * 1. Requests of the main thread (stat_req_*, all of sheep's): a static
 *    slot that only the main thread writes and reads (stat_snapshot runs
 *    there), the hang check's list of every request struct (linked when
 *    the struct is allocated, not per request: the check walks them all
 *    and looks at the active ones), and a small per-VDI table of client
 *    object I/O whose entry each connection caches.
 * 2. Any other thread (stat_op_*): its own slot, written inside a sequence
 *    count; a reader copies each slot under its count and merges. A
 *    request begins and ends on the same thread; merged busy time is the
 *    largest of the slots'.
 *
 * The hot path is inline here, no lock, no atomic read-modify-write, no
 * call, one more clock read (at a request's end; its begin is the
 * request's start, which both builds read). Its instructions per request
 * (gcc 12 -O2, x86-64, a 4 KiB read at queue depth 1, where every request
 * enters and leaves a busy interval; counted in the disassembly, and
 * callgrind agrees function by function against a --disable-stats build):
 *   begin (client_rx) 11: the opcode 1, skip STAT_READ 2, the op's
 *   counters 1 + a store 1, busy 3 + 3 (the in-flight count, its jump, the
 *   clock);
 *   end (request_done) 37: active check 3, the reply's length and
 *   result 2, clock 3, a write's payload 2 (3 for a write: the flag
 *   tested in memory, the add), not active any more 1, busy 3 + 3, await
 *   2 (a subtraction from memory, the clamp's jump), sums 2, the error
 *   test 2, the VDI table 10 (the opcode 1, op check 2, the connection's
 *   key and entry 4, sums 3), and last the histogram 4 (multiply, or,
 *   bsr, add: the await's last use, no copy);
 *   the work queue counts 4 (on workers: taken, done, the worker's tid
 *   and its reload from the stack).
 * 52 in all, a write 53 (its payload). tests/bench/stat-overhead
 * (callgrind, against a --disable-stats build of the same tree): a 4 KiB
 * read 3,240 against 3,188 instructions, 0.984, short of the 0.99 target
 * (~32); since a read from the page cache is answered on the main thread
 * (gateway_read_obj_inline), 1,106 against 1,054, 0.953: the same 52 over
 * a third of the base; a write's event loop turns per request vary from run to run
 * (1.5-2.3), which moves its totals by more than the statistics cost. The
 * counters and busy times alone are 38, the VDI table and the queue
 * counts the rest: no part fits in 32 without dropping a counter. Tried
 * and left: STAT_READ in a row of its own whose TOTAL busy time is
 * reached through the row, so that no end tests for an active request
 * (the begin's compare goes, each end pays that load and the row's
 * address to mark the end: nothing saved; NULL as the mark would save one,
 * and make a second end a NULL dereference); no await clamp (a TSC need
 * not be synchronized between the CPUs the main thread runs on). The hang
 * check costs nothing per request (from 11), and the stall check before a
 * request reads no clock of its own any more, in both builds
 * (group_catch_up, from ~40 to ~5).
 *
 * Without STAT_ENABLED (configure --disable-stats, for the benchmark) the
 * hooks compile to nothing and STAT_READ answers SD_RES_NO_SUPPORT.
 */
#ifndef STAT_H
#define STAT_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "internal_proto.h"
#include "list.h"
#include "util.h"

/* the hot path's functions: always inlined, never a call */
#define STAT_INLINE static inline __attribute__((always_inline))

/* the op slots: 0 counts unknown opcodes and bad headers */
#define STAT_IDX_INVALID 0

/*
 * The statistics' clock: the TSC on x86_64 (one instruction; calibrated
 * against CLOCK_MONOTONIC at stat_init, as the tracer's), CLOCK_MONOTONIC
 * elsewhere. Counters hold clock ticks; readers get nanoseconds.
 */
STAT_INLINE uint64_t stat_clock(void)
{
#if defined(__x86_64__)
	uint64_t lo, hi; /* rdtsc clears the upper halves of rax and rdx */

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (hi << 32) | lo;
#else
	return sd_now_ns();
#endif
}

/*
 * The same clock for the end of a request: on x86-64 the shift and the or
 * in asm too, so that now is in rax, where the await is computed after the
 * busy times (gcc puts the or's result in another register, and then
 * copies it around the subtraction).
 */
STAT_INLINE uint64_t stat_clock_end(void)
{
#if defined(__x86_64__)
	uint64_t now;

	__asm__ volatile("rdtsc\n\t"
			 "shlq $32, %%rdx\n\t"
			 "orq %%rdx, %%rax"
			 : "=a"(now)
			 :
			 : "rdx", "cc");
	return now;
#else
	return stat_clock();
#endif
}

/* ticks to ns, ns to ticks (after stat_init or stat_clock_set_scale) */
uint64_t stat_clock_ns(uint64_t ticks);
uint64_t stat_clock_ticks(uint64_t ns);
/* tests: ns_per_tick_32 is ns per tick << 32 (1 << 32: ticks are ns) */
void stat_clock_set_scale(uint64_t ns_per_tick_32);

/*
 * The hot path's stores. Only the owner thread writes a slot, so an add
 * needs no lock and no atomic read-modify-write: on x86-64 it is one
 * unlocked add to memory (inline asm: the compiler cannot split or merge
 * it, and an aligned 8-byte store is single-copy atomic, so a reader on
 * another thread sees the old or the new word). Elsewhere, and under
 * ThreadSanitizer (script/tsan, which then checks the protocol: the
 * reader's loads against these stores), a relaxed atomic load and store.
 */
#if defined(__SANITIZE_THREAD__)
#define STAT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STAT_TSAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(STAT_TSAN)
#define STAT_ASM 1
#endif

STAT_INLINE void stat_add(uint64_t *x, uint64_t v)
{
#ifdef STAT_ASM
	__asm__ volatile("addq %1, %0" : "+m"(*x) : "er"(v));
#else
	__atomic_store_n(x, __atomic_load_n(x, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
#endif
}

STAT_INLINE void stat_sub(uint64_t *x, uint64_t v)
{
#ifdef STAT_ASM
	__asm__ volatile("subq %1, %0" : "+m"(*x) : "er"(v));
#else
	__atomic_store_n(x, __atomic_load_n(x, __ATOMIC_RELAXED) - v, __ATOMIC_RELAXED);
#endif
}

/* *x -= 1; true when it was 0 (the borrow: one subq and a jump on x86-64) */
STAT_INLINE bool stat_dec_was_zero(uint64_t *x)
{
#ifdef STAT_ASM
	bool borrow;

	__asm__ volatile("subq $1, %0" : "+m"(*x), "=@ccc"(borrow));
	return borrow;
#else
	uint64_t v = __atomic_load_n(x, __ATOMIC_RELAXED);

	__atomic_store_n(x, v - 1, __ATOMIC_RELAXED);
	return v == 0;
#endif
}

/* *x += 1; true when it is now 0 */
STAT_INLINE bool stat_inc_is_zero(uint64_t *x)
{
#ifdef STAT_ASM
	bool zero;

	__asm__ volatile("addq $1, %0" : "+m"(*x), "=@ccz"(zero));
	return zero;
#else
	uint64_t v = __atomic_load_n(x, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(x, v, __ATOMIC_RELAXED);
	return v == 0;
#endif
}

/*
 * Busy time of one kind of request (one op, or any): idle is minus the
 * requests of the kind in flight, busy the closed busy intervals' ticks
 * minus the start of the open one while idle != 0. Entering from idle
 * subtracts now, leaving to idle adds now: one add each, and the reader
 * adds its own clock to close the open interval.
 */
struct stat_busy {
	uint64_t idle;
	uint64_t busy;
};

/*
 * The likely() is for the layout, not a guess: the clock's add falls
 * through and a request that changes no busy interval jumps over it, one
 * jump either way, where an add out of line (gcc's choice in some copies)
 * costs a jump back too.
 */
STAT_INLINE void stat_busy_enter(struct stat_busy *b, uint64_t now)
{
	if (likely(stat_dec_was_zero(&b->idle)))
		stat_sub(&b->busy, now);
}

STAT_INLINE void stat_busy_leave(struct stat_busy *b, uint64_t now)
{
	if (likely(stat_inc_is_zero(&b->idle)))
		stat_add(&b->busy, now);
}

/*
 * The histogram in a slot has a bucket for every log2 a 64-bit count of
 * microseconds can have, so the hot path needs no bound check; a reader
 * folds the ones past SD_STAT_NR_BUCKETS - 1 into the last.
 */
#define STAT_HIST_SLOTS 64

/* one op's counters in one thread's slot: only uint64_t, copied word by word */
struct stat_counters {
	uint64_t hist[STAT_HIST_SLOTS]; /* completions: their sum is nr_done; first, at offset 0 */
	struct stat_busy b;
	uint64_t nr_errors;
	uint64_t bytes;
	uint64_t await; /* ticks */
};

struct stat_slot {
	unsigned int seq;     /* odd while the owner writes */
	struct stat_busy all; /* any op: busy time of the TOTAL row */
	struct stat_counters op[SD_STAT_MAX_OPS];
} __attribute__((aligned(64)));

extern __thread struct stat_slot *stat_my_slot;
/* the calling thread's slot, made at its first count (NULL if none is left) */
struct stat_slot *stat_slot_new(void);
/*
 * Microseconds per tick << 64, rounded up: a latency's microseconds are the
 * upper half of one multiply (a tick is below a microsecond on every clock
 * sheep uses: the TSC, nanoseconds).
 */
extern uint64_t stat_us_mult;

/* one request's part of the bookkeeping, embedded in struct request */
struct stat_req {
	uint64_t begin;		 /* stat_clock(); first: struct request's start shares it */
	struct stat_counters *c; /* its op's counters in the main slot; NULL: not active */
	bool hung;		 /* its hang was reported */
};

/*
 * The hang check's view of the requests (main thread): every struct that
 * can hold a counted request is on one list from its allocation to its
 * free, in flight or not (request_reply.c keeps freed requests in a cache and
 * reuses them), so beginning and ending a request link nothing; the check
 * walks them all and looks at the active ones. Its node must survive the
 * request's reuse: request.c keeps it out of the struct it clears.
 */
/* report a request in flight past the threshold (main thread, once per request) */
typedef void (*stat_hang_fn)(struct stat_req *sr, uint64_t age_ns);

struct stat_track {
	struct list_node node;
	struct stat_req *sr;
	stat_hang_fn report; /* the front-end's: it knows the struct around sr */
};
#ifdef STAT_ENABLED
void stat_req_track(struct stat_track *t, struct stat_req *sr, stat_hang_fn report);
void stat_req_untrack(struct stat_track *t);
#else
static inline void stat_req_track(struct stat_track *t, struct stat_req *sr, stat_hang_fn report)
{
	(void)t;
	(void)sr;
	(void)report;
}

static inline void stat_req_untrack(struct stat_track *t)
{
	(void)t;
}
#endif

/*
 * Start counting: name the op slots with stat_register_op() next. Main
 * thread, once, before any other thread counts; it calibrates the clock
 * (20 ms). threshold_ns 0: no hang detection. 0 or -errno.
 */
int stat_init(uint64_t threshold_ns);
/*
 * An opcode gets its own slot and a short name; queue names the work queue
 * that runs it (NULL: none). The slot, or -ENOSPC when the table is full.
 */
int stat_register_op(uint8_t opcode, const char *name, const char *queue);
/* the slot of an opcode (STAT_IDX_INVALID when not registered) */
extern uint8_t stat_idx_of[256];
static inline int stat_op_idx(uint8_t opcode)
{
	return stat_idx_of[opcode];
}

/* the histogram slot of a latency in ticks: log2 of microseconds, 0 for 0-1 us */
STAT_INLINE uint64_t stat_hist_slot(uint64_t ticks)
{
#ifdef __x86_64__
	uint64_t us;

	/* gcc copies the upper half of its multiply out of rdx first: bsr it there */
	__asm__("mulq %2" : "+a"(ticks), "=d"(us) : "rm"(stat_us_mult) : "cc");
	us |= 1;
	__asm__("bsrq %0, %0" : "+r"(us) : : "cc");
	return us;
#else
	uint64_t us = (uint64_t)(((unsigned __int128)ticks * stat_us_mult) >> 64);

	return 63 - (uint64_t)__builtin_clzll(us | 1);
#endif
}

/*
 * The bucket of a latency in ticks: 0 for 0-1 us, k for 2^k .. 2^(k+1)-1
 * us, the last one for everything above.
 */
static inline int stat_bucket(uint64_t ticks)
{
	unsigned int b = stat_hist_slot(ticks);

	return b < SD_STAT_NR_BUCKETS ? (int)b : SD_STAT_NR_BUCKETS - 1;
}

/*
 * Any thread (2. above): adds into its own slot inside its sequence count
 * (odd while it writes); a reader on another thread copies a slot word by
 * word with relaxed atomic loads and retries while the count moves.
 */
STAT_INLINE void stat_seq_begin(struct stat_slot *s)
{
#ifdef STAT_ASM
	/* x86 keeps stores in order: the compiler barrier is the release fence */
	__asm__ volatile("addl $1, %0" : "+m"(s->seq)::"memory");
#else
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

STAT_INLINE void stat_seq_end(struct stat_slot *s)
{
#ifdef STAT_ASM
	__asm__ volatile("addl $1, %0" : "+m"(s->seq)::"memory");
#else
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
#endif
}

/*
 * now - begin, 0 if the clock went back (a TSC that is not synchronized
 * between CPUs, the thread having moved: the clamp stays). On x86-64 the
 * subtraction from memory and a jump on its sign, in rax, where
 * stat_clock_end leaves now: in C, gcc makes the clamp a cmov (two
 * instructions where the jump is one) or copies the difference in and out
 * of another register around the jump.
 */
STAT_INLINE uint64_t stat_since(uint64_t now, const uint64_t *begin)
{
#ifdef __x86_64__
	__asm__("subq %2, %0\n\t"
		"jns 1f\n\t"
		"xorl %k0, %k0\n"
		"1:"
		: "=a"(now)
		: "0"(now), "m"(*begin)
		: "cc");
	return now;
#else
	uint64_t d = now - *begin;

	return (int64_t)d < 0 ? 0 : d;
#endif
}

/* a request of op idx begins: its counters, for stat_counters_end (NULL: not counted) */
STAT_INLINE struct stat_counters *stat_op_begin(int idx, uint64_t now)
{
	struct stat_slot *s = stat_my_slot;
	struct stat_counters *c;

	if (unlikely(!s) && !(s = stat_slot_new()))
		return NULL;
	c = &s->op[idx];
	stat_seq_begin(s);
	stat_busy_enter(&c->b, now);
	stat_busy_enter(&s->all, now);
	stat_seq_end(s);
	return c;
}

/*
 * The counting of an end, inside the slot's sequence count if it has one,
 * in two steps: the sums (busy times, await, bytes, error), which return
 * the await, then the completion in the histogram. A caller with more to
 * add of the await (the VDI table) does it between the two, so that the
 * histogram's multiply, which takes rax, is the await's last use (no copy).
 */
STAT_INLINE uint64_t stat_count_sums(struct stat_busy *all, struct stat_counters *c,
				     const uint64_t *begin, uint64_t now, uint64_t bytes,
				     bool error)
{
	uint64_t await;

	/* the busy times first: now is dead after them, the await takes its register */
	stat_busy_leave(&c->b, now);
	stat_busy_leave(all, now);
	await = stat_since(now, begin);
	stat_add(&c->await, await);
	stat_add(&c->bytes, bytes);
	if (unlikely(error))
		stat_add(&c->nr_errors, 1);
	return await;
}

STAT_INLINE void stat_count_hist(struct stat_counters *c, uint64_t await)
{
	stat_add(&c->hist[stat_hist_slot(await)], 1);
}

/* both: its await */
STAT_INLINE uint64_t stat_count_end(struct stat_busy *all, struct stat_counters *c,
				    const uint64_t *begin, uint64_t now, uint64_t bytes, bool error)
{
	uint64_t await = stat_count_sums(all, c, begin, now, bytes, error);

	stat_count_hist(c, await);
	return await;
}

/* it ends, on the thread it began on; returns its await (ticks) */
STAT_INLINE uint64_t stat_counters_end(struct stat_counters *c, uint64_t begin, uint64_t now,
				       uint64_t bytes, bool error)
{
	struct stat_slot *s = stat_my_slot;
	uint64_t await;

	stat_seq_begin(s);
	await = stat_count_end(&s->all, c, &begin, now, bytes, error);
	stat_seq_end(s);
	return await;
}

static inline void stat_op_end(int idx, uint64_t begin, uint64_t now, uint64_t bytes, bool error)
{
	if (stat_my_slot)
		stat_counters_end(&stat_my_slot->op[idx], begin, now, bytes, error);
}

/*
 * Requests on the main thread (1. above), which is also the only reader of
 * their slot (stat_snapshot runs there): a static slot, no sequence count.
 */
extern struct stat_slot stat_main_slot;

/* by opcode, its counters in the main slot: one load on the hot path */
extern struct stat_counters *stat_main_ops[256];

STAT_INLINE void stat_req_begin(struct stat_req *sr, uint8_t opcode, uint64_t now)
{
	struct stat_counters *c = stat_main_ops[opcode];

	sr->begin = now;
	sr->c = c;
	stat_busy_enter(&c->b, now);
	stat_busy_enter(&stat_main_slot.all, now);
}

static inline bool stat_req_active(const struct stat_req *sr)
{
	return sr->c != NULL;
}

/*
 * The request ends, but for its completion, which the caller counts with
 * stat_count_hist(its counters, *await) next: its counters, NULL when it
 * is not active (a second end is ignored; *await is 0).
 */
STAT_INLINE struct stat_counters *stat_req_end_sums(struct stat_req *sr, uint64_t now,
						    uint64_t bytes, bool error, uint64_t *await)
{
	struct stat_counters *c = sr->c;

	*await = 0;
	if (!c)
		return NULL;
	sr->c = NULL;
	*await = stat_count_sums(&stat_main_slot.all, c, &sr->begin, now, bytes, error);
	return c;
}

/* the request ends (a second end is ignored): its await in ticks */
STAT_INLINE uint64_t stat_req_end(struct stat_req *sr, uint64_t now, uint64_t bytes, bool error)
{
	uint64_t await;
	struct stat_counters *c = stat_req_end_sums(sr, now, bytes, error, &await);

	if (c)
		stat_count_hist(c, await);
	return await;
}

/*
 * A client object request of vid ended (main thread, which is also the
 * only reader: plain adds): a direct-mapped table, so the busiest VDIs
 * keep their entries (an entry is never given back); a VDI that finds its
 * entry taken counts in the overflow entry (vid 0). Exact counts, one
 * entry per request. A connection caches the entry of the VDI it served
 * last (a QEMU connection serves one VDI): the hot path compares the vid
 * and adds; stat_vdi_lookup() fills the cache when the vid changes.
 */
#define STAT_VDI_SLOTS 32 /* a power of two, below SD_STAT_MAX_VDIS */
struct stat_vdi_entry {
	/* by opcode (SD_OP_CREATE_AND_WRITE_OBJ, _READ_OBJ, _WRITE_OBJ: 1-3; 0 unused) */
	uint64_t nr[4];
	uint64_t bytes;
	uint64_t await;
	uint64_t vid;
};
/* by slot, the last one the overflow */
extern struct stat_vdi_entry stat_vdis[STAT_VDI_SLOTS + 1];

/*
 * Per connection; stat_vdi_cache_init() before its first count. Its key is
 * an oid's upper half, the vid of a data object; an inode object's has
 * VDI_BIT too, a miss that stat_vdi_count_miss() masks to the same entry.
 */
struct stat_vdi_cache {
	uint32_t key;
	struct stat_vdi_entry *e;
};

/* an empty cache: its entry is the overflow one, whose vid 0 is no VDI's */
static inline void stat_vdi_cache_init(struct stat_vdi_cache *vc)
{
	vc->key = 0;
	vc->e = &stat_vdis[STAT_VDI_SLOTS];
}

/*
 * The count of an oid whose key is not in the cache: its entry into the
 * cache, the adds, and last the completion in c's histogram
 * (stat_count_hist; none if c is NULL).
 */
__attribute__((cold)) void stat_vdi_count_miss(struct stat_vdi_cache *vc, const uint64_t *oid,
					       unsigned int opcode, uint64_t bytes, uint64_t await,
					       struct stat_counters *c);

/*
 * Of the object *oid (its key: the upper 32 bits) by a client object op
 * (opcode 1-3; the caller checked it): counted by opcode, a reader adds the
 * two writes, so the hot path needs the write flag as no index. Then the
 * completion in c's histogram (none if c is NULL), the caller's last
 * count (see stat_count_sums), done by the miss's call too: a call that
 * returns nothing, no register of the caller's lives across it.
 */
STAT_INLINE void stat_vdi_count(struct stat_vdi_cache *vc, const uint64_t *oid, unsigned int opcode,
				uint64_t bytes, uint64_t await, struct stat_counters *c)
{
	struct stat_vdi_entry *e = vc->e;

	if (unlikely(vc->key != (uint32_t)(*oid >> 32))) {
		stat_vdi_count_miss(vc, oid, opcode, bytes, await, c);
		return;
	}
	e->nr[opcode]++;
	e->bytes += bytes;
	e->await += await;
	if (c)
		stat_count_hist(c, await);
}

/* report each request in flight past the threshold, once; returns how many are now */
int stat_check_hangs(uint64_t now);
/* check for hangs on the event loop, often enough for the threshold: 0 or -errno */
int stat_start_hang_timer(void);

/* merge every slot into out (the ops with a slot, in slot order); how many */
int stat_read_ops(struct sd_stat_op *out, int max, struct sd_stat_op *total, uint64_t now);
/* the VDI table (the entries in use); how many entries */
int stat_read_vdis(struct sd_stat_vdi *out, int max);
/*
 * Where the snapshot's cache rows come from (the store's caches callback,
 * store.h): fn fills at most max rows and says how many. NULL: none.
 * Main thread, before the first snapshot that should show them.
 */
void stat_set_caches(int (*fn)(struct sd_stat_cache *out, int max));
/*
 * The whole STAT_READ payload into buf (len bytes) at clock now: the bytes
 * written, -ENOSPC when it does not fit, -EOPNOTSUPP with --disable-stats.
 */
int stat_snapshot(void *buf, uint32_t len, uint64_t now);
uint64_t stat_nr_hangs(void);

#endif
