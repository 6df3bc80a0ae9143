/*
 * Always-on request statistics (see stat.h for the model).
 *
 * The hot path is stat_op_begin/stat_op_end: a thread-local pointer, a
 * sequence count bumped around a handful of plain stores into the calling
 * thread's own cache-line aligned slot. Nothing is shared between writers,
 * so there is no lock and no atomic read-modify-write; the relaxed atomic
 * loads and stores below compile to ordinary moves and only keep the
 * compiler from tearing or caching what a reader on another thread copies.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/timerfd.h>

#include "event.h"
#include "logger.h"
#include "stat.h"
#include "util.h"
#include "work.h"

#define STAT_MAX_SLOTS 128
#define STAT_NR_WORDS (sizeof(struct stat_counters) / sizeof(uint64_t))

/* one op's counters in one thread's slot: only uint64_t, copied word by word */
struct stat_counters {
	uint64_t nr_started;
	uint64_t nr_done;
	uint64_t nr_errors;
	uint64_t bytes;
	uint64_t await_ns;
	uint64_t busy_ns;    /* closed busy intervals */
	uint64_t busy_since; /* start of the open one, while started > done */
	uint64_t hist[SD_STAT_NR_BUCKETS];
};

struct stat_slot {
	unsigned int seq; /* odd while the owner writes */
	struct stat_counters op[SD_STAT_MAX_OPS];
	struct stat_counters all; /* any op: busy time of the TOTAL row */
} __attribute__((aligned(64)));

struct stat_vdi_entry {
	uint32_t vid;
	uint64_t nr_reads, nr_writes, bytes, await_ns;
};

static struct {
	struct stat_slot *slots[STAT_MAX_SLOTS];
	int nr_slots;		   /* published with release: readers see whole slots */
	pthread_mutex_t slot_lock; /* taken once per thread, at its first count */
	uint8_t idx_of[256];
	char names[SD_STAT_MAX_OPS][24];
	uint8_t opcodes[SD_STAT_MAX_OPS];
	int nr_ops;
	uint64_t start_ns;
	/* main thread only */
	struct list_head inflight;
	uint64_t threshold_ns;
	uint64_t nr_hangs;
	stat_hang_fn report;
	struct stat_vdi_entry vdis[SD_STAT_MAX_VDIS]; /* the last one: every VDI past the rest */
	int nr_vdis;
} st = {
	.slot_lock = PTHREAD_MUTEX_INITIALIZER,
	.inflight = LIST_HEAD_INIT(st.inflight),
};

static __thread struct stat_slot *my_slot;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* owner-only update: a load and a store, no read-modify-write */
#define ADD(x, v) STORE(x, (x) + (v))

static __attribute__((noinline)) struct stat_slot *new_slot(void)
{
	struct stat_slot *s = NULL;

	pthread_mutex_lock(&st.slot_lock);
	if (st.nr_slots < STAT_MAX_SLOTS && !posix_memalign((void **)&s, 64, sizeof(*s))) {
		memset(s, 0, sizeof(*s));
		st.slots[st.nr_slots] = s;
		__atomic_store_n(&st.nr_slots, st.nr_slots + 1, __ATOMIC_RELEASE);
	} else {
		s = NULL;
	}
	pthread_mutex_unlock(&st.slot_lock);
	return s;
}

static inline struct stat_slot *get_slot(void)
{
	if (unlikely(!my_slot))
		my_slot = new_slot();
	return my_slot;
}

static inline void write_begin(struct stat_slot *s)
{
	STORE(s->seq, s->seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void write_end(struct stat_slot *s)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static inline void busy_enter(struct stat_counters *c, uint64_t now)
{
	if (c->nr_started == c->nr_done)
		STORE(c->busy_since, now);
	STORE(c->nr_started, c->nr_started + 1);
}

static inline void busy_leave(struct stat_counters *c, uint64_t now)
{
	STORE(c->nr_done, c->nr_done + 1);
	if (c->nr_started == c->nr_done && now > c->busy_since)
		ADD(c->busy_ns, now - c->busy_since);
}

void stat_op_begin(int idx, uint64_t now_ns)
{
	struct stat_slot *s = get_slot();

	if (unlikely(!s))
		return;
	write_begin(s);
	busy_enter(&s->op[idx], now_ns);
	busy_enter(&s->all, now_ns);
	write_end(s);
}

void stat_op_end(int idx, uint64_t begin_ns, uint64_t now_ns, uint64_t bytes, bool error)
{
	struct stat_slot *s = get_slot();
	struct stat_counters *c;
	uint64_t await = now_ns > begin_ns ? now_ns - begin_ns : 0;

	if (unlikely(!s))
		return;
	c = &s->op[idx];
	write_begin(s);
	busy_leave(c, now_ns);
	busy_leave(&s->all, now_ns);
	if (error)
		ADD(c->nr_errors, 1);
	ADD(c->bytes, bytes);
	ADD(c->await_ns, await);
	ADD(c->hist[stat_bucket(await)], 1);
	write_end(s);
}

/* a consistent copy of one slot's counters of op idx (-1: the all-ops ones) */
static void copy_counters(struct stat_slot *s, int idx, struct stat_counters *out)
{
	const struct stat_counters *c = idx < 0 ? &s->all : &s->op[idx];
	uint64_t *dst = (uint64_t *)out;
	const uint64_t *src = (const uint64_t *)c;
	unsigned int seq;

	do {
		while ((seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE)) & 1)
			;
		for (size_t i = 0; i < STAT_NR_WORDS; i++)
			dst[i] = LOAD(src[i]);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (LOAD(s->seq) != seq);
}

/* merge op idx (-1: all) over every slot into out */
static void merge(int idx, struct sd_stat_op *out, uint64_t now)
{
	int nr = __atomic_load_n(&st.nr_slots, __ATOMIC_ACQUIRE);

	for (int i = 0; i < nr; i++) {
		struct stat_counters c;
		uint64_t busy, inflight;

		copy_counters(st.slots[i], idx, &c);
		inflight = c.nr_started - c.nr_done;
		busy = c.busy_ns;
		if (inflight && now > c.busy_since)
			busy += now - c.busy_since;
		out->nr_inflight += inflight;
		out->nr_done += c.nr_done;
		out->nr_errors += c.nr_errors;
		out->bytes += c.bytes;
		out->await_ns += c.await_ns;
		out->busy_ns = max_t(uint64_t, out->busy_ns, busy);
		for (int b = 0; b < SD_STAT_NR_BUCKETS; b++)
			out->hist[b] += c.hist[b];
	}
}

int stat_read_ops(struct sd_stat_op *out, int max, struct sd_stat_op *total, uint64_t now_ns)
{
	int n = min_t(int, max, st.nr_ops);

	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		memcpy(out[i].name, st.names[i], sizeof(out[i].name));
		out[i].opcode = st.opcodes[i];
		merge(i, &out[i], now_ns);
	}
	if (total) {
		memset(total, 0, sizeof(*total));
		snprintf(total->name, sizeof(total->name), "TOTAL");
		merge(-1, total, now_ns);
		/* the any-op counters carry no per-op sums: add those up */
		total->nr_errors = total->bytes = total->await_ns = 0;
		memset(total->hist, 0, sizeof(total->hist));
		for (int i = 0; i < n; i++) {
			total->nr_errors += out[i].nr_errors;
			total->bytes += out[i].bytes;
			total->await_ns += out[i].await_ns;
			for (int b = 0; b < SD_STAT_NR_BUCKETS; b++)
				total->hist[b] += out[i].hist[b];
		}
	}
	return n;
}

int stat_register_op(uint8_t opcode, const char *name)
{
	int i = st.nr_ops;
	size_t len;

	if (st.idx_of[opcode])
		return st.idx_of[opcode];
	if (i >= SD_STAT_MAX_OPS)
		return -ENOSPC;
	/* a short lower-case name: "WRITE_OBJ" -> "write", "READ_PEER" -> "read_peer" */
	snprintf(st.names[i], sizeof(st.names[i]), "%s", name);
	for (char *p = st.names[i]; *p; p++)
		*p = (*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p;
	len = strlen(st.names[i]);
	if (len > 4 && !strcmp(st.names[i] + len - 4, "_obj"))
		st.names[i][len - 4] = '\0';
	st.opcodes[i] = opcode;
	st.idx_of[opcode] = (uint8_t)i;
	st.nr_ops++;
	return i;
}

int stat_op_idx(uint8_t opcode)
{
	return st.idx_of[opcode];
}

int stat_init(uint64_t threshold_ns, stat_hang_fn report)
{
	st.start_ns = sd_now_ns();
	st.threshold_ns = threshold_ns;
	st.report = report;
	st.nr_ops = 0;
	memset(st.idx_of, 0, sizeof(st.idx_of));
	if (stat_register_op(0, "invalid") != STAT_IDX_INVALID)
		return -EINVAL;
	st.idx_of[0] = STAT_IDX_INVALID;
	return get_slot() ? 0 : -ENOMEM;
}

void stat_req_begin(struct stat_req *sr, uint8_t opcode, uint64_t now_ns)
{
	sr->idx = st.idx_of[opcode];
	sr->begin_ns = now_ns;
	sr->active = true;
	sr->hung = false;
	list_add_tail(&sr->node, &st.inflight);
	stat_op_begin(sr->idx, now_ns);
}

void stat_req_end(struct stat_req *sr, uint64_t now_ns, uint64_t bytes, bool error)
{
	if (!sr->active)
		return;
	sr->active = false;
	list_del(&sr->node);
	stat_op_end(sr->idx, sr->begin_ns, now_ns, bytes, error);
}

void stat_vdi_count(uint32_t vid, bool is_write, uint64_t bytes, uint64_t await_ns)
{
	struct stat_vdi_entry *e = NULL;

	for (int i = 0; i < st.nr_vdis; i++)
		if (st.vdis[i].vid == vid) {
			e = &st.vdis[i];
			break;
		}
	if (!e) {
		/* the last entry (vid 0) gathers every VDI that finds the table full */
		if (st.nr_vdis < SD_STAT_MAX_VDIS - 1) {
			e = &st.vdis[st.nr_vdis++];
			e->vid = vid;
		} else {
			e = &st.vdis[SD_STAT_MAX_VDIS - 1];
			e->vid = 0;
			st.nr_vdis = SD_STAT_MAX_VDIS;
		}
	}
	if (is_write)
		e->nr_writes++;
	else
		e->nr_reads++;
	e->bytes += bytes;
	e->await_ns += await_ns;
}

int stat_read_vdis(struct sd_stat_vdi *out, int max)
{
	int n = min_t(int, max, st.nr_vdis);

	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].vid = st.vdis[i].vid;
		out[i].nr_reads = st.vdis[i].nr_reads;
		out[i].nr_writes = st.vdis[i].nr_writes;
		out[i].bytes = st.vdis[i].bytes;
		out[i].await_ns = st.vdis[i].await_ns;
	}
	return n;
}

int stat_check_hangs(uint64_t now_ns)
{
	struct stat_req *sr;
	int nr = 0;

	if (!st.threshold_ns)
		return 0;
	/* in start order: stop at the first one younger than the threshold */
	list_for_each_entry(sr, &st.inflight, node)
	{
		uint64_t age = now_ns > sr->begin_ns ? now_ns - sr->begin_ns : 0;

		if (age < st.threshold_ns)
			break;
		nr++;
		if (sr->hung)
			continue;
		sr->hung = true;
		st.nr_hangs++;
		if (st.report)
			st.report(sr, age);
	}
	return nr;
}

uint64_t stat_nr_hangs(void)
{
	return st.nr_hangs;
}

uint64_t stat_hang_threshold_ns(void)
{
	return st.threshold_ns;
}

static void hang_timer_handler(int fd, uint32_t events, void *data)
{
	uint64_t expirations;

	(void)!read(fd, &expirations, sizeof(expirations));
	stat_check_hangs(sd_now_ns());
}

int stat_start_hang_timer(void)
{
	/* a quarter of the threshold, between 100 ms and 1 s */
	uint64_t period = st.threshold_ns / 4;
	struct itimerspec its = { 0 };
	int fd, ret;

	if (!st.threshold_ns)
		return 0;
	period = max_t(uint64_t, period, 100000000ULL);
	period = min_t(uint64_t, period, 1000000000ULL);
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	its.it_interval.tv_sec = (time_t)(period / 1000000000ULL);
	its.it_interval.tv_nsec = (long)(period % 1000000000ULL);
	its.it_value = its.it_interval;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = ev_add(fd, EPOLLIN, hang_timer_handler, NULL);
	if (ret)
		close(fd);
	return ret;
}

int stat_snapshot(void *buf, uint32_t len, uint64_t now_ns)
{
	struct sd_stat_header *h = buf;
	struct sd_stat_op *ops;
	struct sd_stat_queue *queues;
	struct sd_stat_vdi *vdis;
	struct wq_info info[SD_STAT_MAX_QUEUES];
	size_t need = sizeof(*h) + (1 + (size_t)st.nr_ops) * sizeof(*ops);
	int nr_queues;

#ifndef STAT_ENABLED
	return -EOPNOTSUPP; /* --disable-stats: nothing is counted */
#endif
	nr_queues = wq_info_all(info, SD_STAT_MAX_QUEUES);
	need += nr_queues * sizeof(*queues) + st.nr_vdis * sizeof(*vdis);
	if (need > len)
		return -ENOSPC;
	memset(buf, 0, need);
	h->version = SD_STAT_VERSION;
	h->now_ns = now_ns;
	h->uptime_ns = now_ns - st.start_ns;
	h->hang_threshold_ns = st.threshold_ns;
	h->nr_hangs = st.nr_hangs;
	h->nr_hung = (uint32_t)stat_check_hangs(now_ns);
	ops = (struct sd_stat_op *)(h + 1);
	h->nr_ops = (uint32_t)stat_read_ops(ops + 1, st.nr_ops, ops, now_ns);
	h->nr_hangs = st.nr_hangs;
	queues = (struct sd_stat_queue *)(ops + 1 + h->nr_ops);
	for (int i = 0; i < nr_queues; i++) {
		snprintf(queues[i].name, sizeof(queues[i].name), "%s", info[i].name);
		queues[i].nr_threads = (uint32_t)info[i].nr_threads;
		queues[i].nr_queued = (uint32_t)info[i].nr_queued;
		queues[i].nr_running = (uint32_t)info[i].nr_running;
		queues[i].nr_done = info[i].nr_done;
		if (info[i].oldest_queued_ns && now_ns > info[i].oldest_queued_ns)
			queues[i].longest_wait_ns = now_ns - info[i].oldest_queued_ns;
	}
	h->nr_queues = (uint32_t)nr_queues;
	vdis = (struct sd_stat_vdi *)(queues + nr_queues);
	h->nr_vdis = (uint32_t)stat_read_vdis(vdis, st.nr_vdis);
	return (int)need;
}
