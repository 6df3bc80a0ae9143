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

/* the op slots: 0 counts unknown opcodes and bad headers */
#define STAT_IDX_INVALID 0

/* one request's part of the bookkeeping, embedded in struct request */
struct stat_req {
	struct list_node node; /* in the in-flight list while active */
	uint64_t begin_ns;
	uint8_t idx;
	bool active;
	bool hung; /* its hang was reported */
};

/* report a request in flight past the threshold (main thread, once per request) */
typedef void (*stat_hang_fn)(struct stat_req *sr, uint64_t age_ns);

/*
 * Start counting: name the op slots with stat_register_op() next. Main
 * thread, once, before any other thread counts. threshold_ns 0: no hang
 * detection. 0 or -errno.
 */
int stat_init(uint64_t threshold_ns, stat_hang_fn report);
/* an opcode gets its own slot and a short name; -ENOSPC when the table is full */
int stat_register_op(uint8_t opcode, const char *name);
/* the slot of an opcode (STAT_IDX_INVALID when not registered) */
int stat_op_idx(uint8_t opcode);

/* layer 1: any thread; begin and end of one request on the same thread */
void stat_op_begin(int idx, uint64_t now_ns);
void stat_op_end(int idx, uint64_t begin_ns, uint64_t now_ns, uint64_t bytes, bool error);

/* layer 2: main thread */
void stat_req_begin(struct stat_req *sr, uint8_t opcode, uint64_t now_ns);
void stat_req_end(struct stat_req *sr, uint64_t now_ns, uint64_t bytes, bool error);
/* a client object request of vid ended (main thread) */
void stat_vdi_count(uint32_t vid, bool is_write, uint64_t bytes, uint64_t await_ns);
/* report each request in flight past the threshold, once; returns how many are now */
int stat_check_hangs(uint64_t now_ns);
/* check for hangs on the event loop, often enough for the threshold: 0 or -errno */
int stat_start_hang_timer(void);

/*
 * The bucket of a latency: 0 for 0-1 us, k for 2^k .. 2^(k+1)-1 us, the
 * last one for everything above.
 */
static inline int stat_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	int b = us < 2 ? 0 : 63 - __builtin_clzll(us);

	return b < SD_STAT_NR_BUCKETS ? b : SD_STAT_NR_BUCKETS - 1;
}

/* merge every slot into out (the ops with a slot, in slot order); how many */
int stat_read_ops(struct sd_stat_op *out, int max, struct sd_stat_op *total, uint64_t now_ns);
/* the VDI table, unsorted; how many entries */
int stat_read_vdis(struct sd_stat_vdi *out, int max);
/*
 * The whole STAT_READ payload into buf (len bytes): the bytes written, or
 * -ENOSPC when it does not fit.
 */
int stat_snapshot(void *buf, uint32_t len, uint64_t now_ns);
uint64_t stat_nr_hangs(void);
uint64_t stat_hang_threshold_ns(void);

#endif
