/*
 * Always-on request statistics (see stat.h for the model): the readers,
 * slots, calibration and the hang check. The hot path is inline in stat.h:
 * adds into the main thread's static slot (or the calling thread's own
 * cache-line aligned one, inside its sequence count). Nothing is shared
 * between writers, so there is no lock and no atomic read-modify-write;
 * the relaxed atomic loads here compile to ordinary moves and keep the
 * compiler from tearing what the owner writes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/timerfd.h>

#include "event.h"
#include "logger.h"
#include "stat.h"
#include "util.h"
#include "work.h"

#define STAT_MAX_SLOTS 128
#define STAT_NR_WORDS (sizeof(struct stat_counters) / sizeof(uint64_t))
#define STAT_BUSY_WORDS (sizeof(struct stat_busy) / sizeof(uint64_t))

static struct {
	struct stat_slot *slots[STAT_MAX_SLOTS];
	int nr_slots;		   /* published with release: readers see whole slots */
	pthread_mutex_t slot_lock; /* taken once per thread, at its first count */
	char names[SD_STAT_MAX_OPS][24];
	uint8_t opcodes[SD_STAT_MAX_OPS];
	const char *queues[SD_STAT_MAX_OPS]; /* the work queue of each op, or NULL */
	int nr_ops;
	uint64_t start;	    /* clock at stat_init */
	uint64_t tick_mult; /* ns per tick << 32 */
	/* main thread only */
	uint64_t threshold; /* ticks, 0: off */
	uint64_t threshold_ns;
	uint64_t nr_hangs;
} st = {
	.slot_lock = PTHREAD_MUTEX_INITIALIZER,
	.tick_mult = UINT64_C(1) << 32,
};

__thread struct stat_slot *stat_my_slot;
struct stat_slot stat_main_slot;
uint64_t stat_us_mult = UINT64_MAX / 1000 + 1; /* ticks are ns */
uint8_t stat_idx_of[256];
struct stat_counters *stat_main_ops[256] = { [0 ... 255] = &stat_main_slot.op[STAT_IDX_INVALID] };
static LIST_HEAD(tracked); /* every stat_track (main thread) */
struct stat_vdi_entry stat_vdis[STAT_VDI_SLOTS + 1];

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct stat_slot *stat_slot_new(void)
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
	stat_my_slot = s;
	return s;
}

void stat_clock_set_scale(uint64_t ns_per_tick_32)
{
	st.tick_mult = ns_per_tick_32 ? ns_per_tick_32 : 1;
	/* rounded up: a bucket edge never reads as the bucket below; at most 1 us a tick */
	if (st.tick_mult < UINT64_C(1000) << 32)
		stat_us_mult = (uint64_t)(((unsigned __int128)st.tick_mult << 32) / 1000) + 1;
	else
		stat_us_mult = UINT64_MAX;
	st.threshold = st.threshold_ns ? max_t(uint64_t, stat_clock_ticks(st.threshold_ns), 1) : 0;
}

uint64_t stat_clock_ns(uint64_t ticks)
{
	return (uint64_t)(((unsigned __int128)ticks * st.tick_mult) >> 32);
}

uint64_t stat_clock_ticks(uint64_t ns)
{
	unsigned __int128 t = ((unsigned __int128)ns << 32) / st.tick_mult;

	return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

/* the TSC against CLOCK_MONOTONIC over 20 ms, as the tracer does */
static void calibrate(void)
{
#if defined(__x86_64__)
	struct timespec req = { 0, 20 * 1000 * 1000 };
	uint64_t t0, n0, t1, n1;

	n0 = sd_now_ns();
	t0 = stat_clock();
	nanosleep(&req, NULL);
	n1 = sd_now_ns();
	t1 = stat_clock();
	if (t1 > t0 && n1 > n0)
		stat_clock_set_scale((uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0)));
#else
	stat_clock_set_scale(UINT64_C(1) << 32);
#endif
}

/* a consistent copy of n words at src in slot s, under its sequence count */
static void copy_words(struct stat_slot *s, const void *src, void *dst, size_t n)
{
	const uint64_t *from = src;
	uint64_t *to = dst;
	unsigned int seq;

	do {
		while ((seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE)) & 1)
			;
		for (size_t i = 0; i < n; i++)
			to[i] = LOAD(from[i]);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (LOAD(s->seq) != seq);
}

/* in flight and busy ticks up to now of one kind of request in one slot */
static uint64_t busy_at(const struct stat_busy *b, uint64_t now, uint64_t *inflight)
{
	uint64_t busy = b->busy;

	*inflight = -b->idle;
	if (*inflight) {
		/* closes the open interval; a reader's clock behind the start reads 0 */
		busy += now;
		if ((int64_t)busy < 0)
			busy = 0;
	}
	return busy;
}

/* add slot s's counters of op idx (-1: the any-op busy time and in flight only) to out */
static void merge_slot(struct stat_slot *s, int idx, struct sd_stat_op *out, uint64_t now)
{
	struct stat_counters c;
	uint64_t busy, inflight;

	if (idx < 0) {
		copy_words(s, &s->all, &c.b, STAT_BUSY_WORDS);
	} else {
		copy_words(s, &s->op[idx], &c, STAT_NR_WORDS);
		out->nr_errors += c.nr_errors;
		out->bytes += c.bytes;
		out->await_ns += stat_clock_ns(c.await);
		for (int b = 0; b < STAT_HIST_SLOTS; b++) {
			out->hist[min_t(int, b, SD_STAT_NR_BUCKETS - 1)] += c.hist[b];
			out->nr_done += c.hist[b];
		}
	}
	busy = busy_at(&c.b, now, &inflight);
	out->nr_inflight += inflight;
	out->busy_ns = max_t(uint64_t, out->busy_ns, stat_clock_ns(busy));
}

/* merge op idx (-1: any op) over the main thread's slot and every thread's */
static void merge(int idx, struct sd_stat_op *out, uint64_t now)
{
	int nr = __atomic_load_n(&st.nr_slots, __ATOMIC_ACQUIRE);

	merge_slot(&stat_main_slot, idx, out, now);
	for (int i = 0; i < nr; i++)
		merge_slot(st.slots[i], idx, out, now);
}

int stat_read_ops(struct sd_stat_op *out, int max, struct sd_stat_op *total, uint64_t now)
{
	int n = min_t(int, max, st.nr_ops);

	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		memcpy(out[i].name, st.names[i], sizeof(out[i].name));
		out[i].opcode = st.opcodes[i];
		merge(i, &out[i], now);
	}
	if (total) {
		memset(total, 0, sizeof(*total));
		snprintf(total->name, sizeof(total->name), "TOTAL");
		/* the busy time of any op; the sums are the ops' */
		merge(-1, total, now);
		for (int i = 0; i < n; i++) {
			total->nr_done += out[i].nr_done;
			total->nr_errors += out[i].nr_errors;
			total->bytes += out[i].bytes;
			total->await_ns += out[i].await_ns;
			for (int b = 0; b < SD_STAT_NR_BUCKETS; b++)
				total->hist[b] += out[i].hist[b];
		}
	}
	return n;
}

int stat_register_op(uint8_t opcode, const char *name, const char *queue)
{
	int i = st.nr_ops;
	size_t len;

	if (stat_idx_of[opcode])
		return stat_idx_of[opcode];
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
	st.queues[i] = queue;
	stat_idx_of[opcode] = (uint8_t)i;
	stat_main_ops[opcode] = &stat_main_slot.op[i];
	st.nr_ops++;
	return i;
}

int stat_init(uint64_t threshold_ns)
{
	st.threshold_ns = threshold_ns;
	calibrate();
	st.start = stat_clock();
	st.nr_ops = 0;
	memset(stat_idx_of, 0, sizeof(stat_idx_of));
	for (int i = 0; i < 256; i++)
		stat_main_ops[i] = &stat_main_slot.op[STAT_IDX_INVALID];
	if (stat_register_op(0, "invalid", NULL) != STAT_IDX_INVALID)
		return -EINVAL;
	stat_idx_of[0] = STAT_IDX_INVALID;
	return stat_my_slot || stat_slot_new() ? 0 : -ENOMEM;
}

#ifdef STAT_ENABLED
void stat_req_track(struct stat_track *t, struct stat_req *sr, stat_hang_fn report)
{
	t->sr = sr;
	t->report = report;
	list_add_tail(&t->node, &tracked);
}

void stat_req_untrack(struct stat_track *t)
{
	list_del(&t->node);
}
#endif

void stat_vdi_count_miss(struct stat_vdi_cache *vc, const uint64_t *oid, unsigned int opcode,
			 uint64_t bytes, uint64_t await, struct stat_counters *c)
{
	uint32_t key = (uint32_t)(*oid >> 32), vid = oid_to_vid(*oid);
	struct stat_vdi_entry *e = &stat_vdis[vid & (STAT_VDI_SLOTS - 1)];

	/* vid 0 marks a free entry: no VDI has it, its requests are the overflow's */
	if (!vid || (e->vid && e->vid != vid))
		e = &stat_vdis[STAT_VDI_SLOTS];
	else
		e->vid = vid;
	vc->key = key;
	vc->e = e;
	e->nr[opcode]++;
	e->bytes += bytes;
	e->await += await;
	if (c)
		stat_count_hist(c, await);
}

int stat_read_vdis(struct sd_stat_vdi *out, int max)
{
	int n = 0;

	for (int i = 0; i <= STAT_VDI_SLOTS && n < max; i++) {
		const struct stat_vdi_entry *e = &stat_vdis[i];

		uint64_t nr_reads = e->nr[SD_OP_READ_OBJ];
		uint64_t nr_writes = e->nr[SD_OP_WRITE_OBJ] + e->nr[SD_OP_CREATE_AND_WRITE_OBJ];

		if (!nr_reads && !nr_writes)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].vid = i == STAT_VDI_SLOTS ? 0 : (uint32_t)e->vid;
		out[n].nr_reads = nr_reads;
		out[n].nr_writes = nr_writes;
		out[n].bytes = e->bytes;
		out[n].await_ns = stat_clock_ns(e->await);
		n++;
	}
	return n;
}

int stat_check_hangs(uint64_t now)
{
	struct stat_track *t;
	int nr = 0;

	if (!st.threshold)
		return 0;
	/* every request struct: the active ones older than the threshold */
	list_for_each_entry(t, &tracked, node)
	{
		struct stat_req *sr = t->sr;
		uint64_t age;

		if (!stat_req_active(sr))
			continue;
		age = now > sr->begin ? now - sr->begin : 0;
		if (age < st.threshold)
			continue;
		nr++;
		if (sr->hung)
			continue;
		sr->hung = true;
		st.nr_hangs++;
		t->report(sr, stat_clock_ns(age));
	}
	return nr;
}

uint64_t stat_nr_hangs(void)
{
	return st.nr_hangs;
}

static void hang_timer_handler(int fd, uint32_t events, void *data)
{
	uint64_t expirations;

	(void)!read(fd, &expirations, sizeof(expirations));
	stat_check_hangs(stat_clock());
}

int stat_start_hang_timer(void)
{
	/* a quarter of the threshold, between 100 ms and 1 s */
	uint64_t period = st.threshold_ns / 4;
	struct itimerspec its = { 0 };
	int fd, ret;

	if (!st.threshold)
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

/* add up the rows of the ops that run on queue q */
static void queue_requests(struct sd_stat_queue *q, const struct sd_stat_op *ops, int nr)
{
	for (int i = 0; i < nr; i++) {
		if (!st.queues[i] || strcmp(st.queues[i], q->name))
			continue;
		q->nr_inflight += ops[i].nr_inflight;
		q->nr_reqs += ops[i].nr_done;
		q->nr_errors += ops[i].nr_errors;
		q->bytes += ops[i].bytes;
		q->await_ns += ops[i].await_ns;
		q->busy_ns = max_t(uint64_t, q->busy_ns, ops[i].busy_ns);
		for (int b = 0; b < SD_STAT_NR_BUCKETS; b++)
			q->hist[b] += ops[i].hist[b];
	}
}

static int (*read_caches)(struct sd_stat_cache *out, int max);

void stat_set_caches(int (*fn)(struct sd_stat_cache *out, int max))
{
	read_caches = fn;
}

int stat_snapshot(void *buf, uint32_t len, uint64_t now)
{
	struct sd_stat_header *h = buf;
	struct sd_stat_op *ops;
	struct sd_stat_queue *queues;
	struct sd_stat_vdi *vdis;
	struct sd_stat_cache *caches;
	struct wq_info info[SD_STAT_MAX_QUEUES];
	size_t need = sizeof(*h) + (1 + (size_t)st.nr_ops) * sizeof(*ops);
	int nr_queues;

#ifndef STAT_ENABLED
	return -EOPNOTSUPP; /* --disable-stats: nothing is counted */
#endif
	nr_queues = wq_info_all(info, SD_STAT_MAX_QUEUES);
	need += nr_queues * sizeof(*queues) + SD_STAT_MAX_VDIS * sizeof(*vdis) +
		SD_STAT_MAX_CACHES * sizeof(*caches);
	if (need > len)
		return -ENOSPC;
	memset(buf, 0, need);
	h->version = SD_STAT_VERSION;
	h->now_ns = stat_clock_ns(now);
	h->uptime_ns = stat_clock_ns(now - st.start);
	h->hang_threshold_ns = st.threshold_ns;
	h->nr_hangs = st.nr_hangs;
	h->nr_hung = (uint32_t)stat_check_hangs(now);
	ops = (struct sd_stat_op *)(h + 1);
	h->nr_ops = (uint32_t)stat_read_ops(ops + 1, st.nr_ops, ops, now);
	h->nr_hangs = st.nr_hangs;
	queues = (struct sd_stat_queue *)(ops + 1 + h->nr_ops);
	for (int i = 0; i < nr_queues; i++) {
		snprintf(queues[i].name, sizeof(queues[i].name), "%s", info[i].name);
		queues[i].nr_threads = (uint32_t)info[i].nr_threads;
		queues[i].nr_queued = (uint32_t)info[i].nr_queued;
		queues[i].nr_running = (uint32_t)info[i].nr_running;
		queues[i].nr_done = info[i].nr_done;
		queue_requests(&queues[i], ops + 1, (int)h->nr_ops);
		if (info[i].oldest_queued && now > info[i].oldest_queued)
			queues[i].longest_wait_ns = stat_clock_ns(now - info[i].oldest_queued);
	}
	h->nr_queues = (uint32_t)nr_queues;
	vdis = (struct sd_stat_vdi *)(queues + nr_queues);
	h->nr_vdis = (uint32_t)stat_read_vdis(vdis, SD_STAT_MAX_VDIS);
	caches = (struct sd_stat_cache *)(vdis + h->nr_vdis);
	if (read_caches) {
		int n = read_caches(caches, SD_STAT_MAX_CACHES);

		h->nr_caches = (uint32_t)(n < 0 ? 0 : min_t(int, n, SD_STAT_MAX_CACHES));
	}
	return (int)((char *)(caches + h->nr_caches) - (char *)buf);
}
