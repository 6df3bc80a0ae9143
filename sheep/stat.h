/*
 * Always-on request statistics: what `collie node stat` and /metrics show.
 *
 * Two layers:
 *
 * 1. Counters per opcode in per-thread slots: requests started and done,
 *    errors, bytes, summed await (dispatch to reply), busy time and a log2
 *    latency histogram. The owner thread writes its slot with plain stores
 *    inside a sequence count (no lock, no atomic read-modify-write); a
 *    reader on any thread copies every slot under its count and merges.
 *    Busy time is the time the owner had at least one request of the op in
 *    flight; a read counts the open interval up to its own clock, so a
 *    request that never ends shows as 100% busy at once. A request must
 *    begin and end on the same thread (the main thread, in sheep); merged
 *    busy time is the largest of the slots', exact with one such thread.
 *
 * 2. Requests in flight (stat_req_*), on the main thread only: a list in
 *    start order that the hang check walks from its oldest end, and a small
 *    per-VDI table of client object I/O.
 *
 * The hot path is inline here: per request two TSC reads and about 180
 * instructions in all, the in-flight list, the VDI table and the work
 * queue counts included (tests/bench/stat-overhead measures it: 0.965 of
 * the instructions per request of a --disable-stats build).
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

/* the op slots: 0 counts unknown opcodes and bad headers */
#define STAT_IDX_INVALID 0

/*
 * The statistics' clock: the TSC on x86_64 (one instruction; calibrated
 * against CLOCK_MONOTONIC at stat_init, as the tracer's), CLOCK_MONOTONIC
 * elsewhere. Counters hold clock ticks; readers get nanoseconds.
 */
static inline __attribute__((always_inline)) uint64_t stat_clock(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	return sd_now_ns();
#endif
}

/* ticks to ns, ns to ticks (after stat_init or stat_clock_set_scale) */
uint64_t stat_clock_ns(uint64_t ticks);
uint64_t stat_clock_ticks(uint64_t ns);
/* tests: ns_per_tick_32 is ns per tick << 32 (1 << 32: ticks are ns) */
void stat_clock_set_scale(uint64_t ns_per_tick_32);

/* one op's counters in one thread's slot: only uint64_t, copied word by word */
struct stat_counters {
	uint64_t nr_started;
	uint64_t nr_done;
	uint64_t nr_errors;
	uint64_t bytes;
	uint64_t await;	     /* ticks */
	uint64_t busy;	     /* ticks of closed busy intervals */
	uint64_t busy_since; /* start of the open one, while started > done */
	uint64_t hist[SD_STAT_NR_BUCKETS];
};

struct stat_slot {
	unsigned int seq;	  /* odd while the owner writes */
	struct stat_counters all; /* any op: busy time of the TOTAL row */
	struct stat_counters op[SD_STAT_MAX_OPS];
} __attribute__((aligned(64)));

extern __thread struct stat_slot *stat_my_slot;
/* the calling thread's slot, made at its first count (NULL if none is left) */
struct stat_slot *stat_slot_new(void);
/* microseconds per tick << 32, rounded up: bucket from ticks in a multiply */
extern uint64_t stat_us_mult;

/* one request's part of the bookkeeping, embedded in struct request */
struct stat_req {
	struct list_node node; /* in the in-flight list while active */
	uint64_t begin;	       /* stat_clock() */
	uint8_t idx;
	bool active;
	bool hung; /* its hang was reported */
};

/* report a request in flight past the threshold (main thread, once per request) */
typedef void (*stat_hang_fn)(struct stat_req *sr, uint64_t age_ns);

/*
 * Start counting: name the op slots with stat_register_op() next. Main
 * thread, once, before any other thread counts; it calibrates the clock
 * (20 ms). threshold_ns 0: no hang detection. 0 or -errno.
 */
int stat_init(uint64_t threshold_ns, stat_hang_fn report);
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

/*
 * The bucket of a latency in ticks: 0 for 0-1 us, k for 2^k .. 2^(k+1)-1
 * us, the last one for everything above.
 */
static inline int stat_bucket(uint64_t ticks)
{
	uint64_t us = (uint64_t)(((unsigned __int128)ticks * stat_us_mult) >> 32);
	int b = us < 2 ? 0 : 63 - __builtin_clzll(us);

	return b < SD_STAT_NR_BUCKETS ? b : SD_STAT_NR_BUCKETS - 1;
}

/*
 * Layer 1, the hot path: any thread, plain adds and stores into its own
 * slot inside its sequence count. Only the owner writes a slot; a reader
 * on another thread copies it word by word with relaxed atomic loads and
 * retries while the count moves (aligned 8-byte stores are single-copy
 * atomic on x86-64, and GCC does not split them). A request begins and
 * ends on the same thread. The stores are relaxed atomic ones: the same
 * single mov as a plain store, and no data race in the C model (TSan,
 * script/tsan, checks it).
 */
#define STAT_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define STAT_ADD(x, v) __atomic_store_n(&(x), (x) + (v), __ATOMIC_RELAXED)

static inline void stat_busy_enter(struct stat_counters *c, uint64_t now)
{
	if (c->nr_started == c->nr_done)
		STAT_STORE(c->busy_since, now);
	STAT_ADD(c->nr_started, 1);
}

static inline void stat_busy_leave(struct stat_counters *c, uint64_t now)
{
	STAT_ADD(c->nr_done, 1);
	if (c->nr_started == c->nr_done)
		STAT_ADD(c->busy, now - c->busy_since);
}

static inline void stat_op_begin(int idx, uint64_t now)
{
	struct stat_slot *s = stat_my_slot;

	if (unlikely(!s) && !(s = stat_slot_new()))
		return;
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	stat_busy_enter(&s->op[idx], now);
	stat_busy_enter(&s->all, now);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static inline void stat_op_end(int idx, uint64_t begin, uint64_t now, uint64_t bytes, bool error)
{
	struct stat_slot *s = stat_my_slot;
	struct stat_counters *c;
	uint64_t await = now - begin;

	if (unlikely(!s))
		return;
	if (unlikely(now < begin))
		await = 0;
	c = &s->op[idx];
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	stat_busy_leave(c, now);
	stat_busy_leave(&s->all, now);
	STAT_ADD(c->nr_errors, error);
	STAT_ADD(c->bytes, bytes);
	STAT_ADD(c->await, await);
	STAT_ADD(c->hist[stat_bucket(await)], 1);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

/* layer 2: main thread */
extern struct list_head stat_inflight;

static inline void stat_req_begin(struct stat_req *sr, uint8_t opcode, uint64_t now)
{
	sr->idx = stat_idx_of[opcode];
	sr->begin = now;
	sr->active = true;
	list_add_tail(&sr->node, &stat_inflight);
	stat_op_begin(sr->idx, now);
}

static inline void stat_req_end(struct stat_req *sr, uint64_t now, uint64_t bytes, bool error)
{
	if (!sr->active)
		return;
	sr->active = false;
	list_del(&sr->node);
	stat_op_end(sr->idx, sr->begin, now, bytes, error);
}

/*
 * A client object request of vid ended (main thread): a direct-mapped
 * table, so the busiest VDIs keep their entries; a VDI that finds its
 * entry taken counts in the overflow entry (vid 0).
 */
struct stat_vdi_entry {
	uint32_t vid;
	uint64_t nr_reads, nr_writes, bytes, await;
};
#define STAT_VDI_SLOTS 32 /* a power of two, below SD_STAT_MAX_VDIS */
extern struct stat_vdi_entry stat_vdis[STAT_VDI_SLOTS + 1];

static inline void stat_vdi_count(uint32_t vid, bool is_write, uint64_t bytes, uint64_t await)
{
	struct stat_vdi_entry *e = &stat_vdis[vid & (STAT_VDI_SLOTS - 1)];

	if (unlikely(e->vid != vid)) {
		if (!e->vid)
			e->vid = vid;
		else
			e = &stat_vdis[STAT_VDI_SLOTS];
	}
	e->nr_writes += is_write;
	e->nr_reads += !is_write;
	e->bytes += bytes;
	e->await += await;
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
 * The whole STAT_READ payload into buf (len bytes) at clock now: the bytes
 * written, -ENOSPC when it does not fit, -EOPNOTSUPP with --disable-stats.
 */
int stat_snapshot(void *buf, uint32_t len, uint64_t now);
uint64_t stat_nr_hangs(void);

#endif
