/*
 * Unit tests of sheep/stat.c: buckets, names, counts, busy time with its
 * open interval, per-thread slots merged under their sequence counts,
 * hang detection, the VDI table and the snapshot layout. Each test runs in
 * its own process (Check's fork mode), so each starts with fresh counters.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal_proto.h"
#include "event.h"
#include "lock.h"
#include "metrics.h"
#include "work.h"
#include "stat.h"
#include "util.h"

#define MS 1000000ULL
#define US 1000ULL

static struct stat_req *reported[8];
static uint64_t reported_age[8];
static int nr_reported;

static void report(struct stat_req *sr, uint64_t age_ns)
{
	if (nr_reported < 8) {
		reported[nr_reported] = sr;
		reported_age[nr_reported] = age_ns;
	}
	nr_reported++;
}

static void setup(uint64_t threshold)
{
	nr_reported = 0;
	ck_assert_int_eq(stat_init(threshold), 0);
	/* the tests' clock ticks are nanoseconds */
	stat_clock_set_scale(UINT64_C(1) << 32);
	ck_assert_int_eq(stat_register_op(0x02, "READ_OBJ", "io"), 1);
	ck_assert_int_eq(stat_register_op(0x03, "WRITE_OBJ", "io"), 2);
	ck_assert_int_eq(stat_register_op(0xA1, "WRITE_PEER", "peer"), 3);
}

/* op idx merged at now */
static struct sd_stat_op read_op(int idx, uint64_t now, struct sd_stat_op *total)
{
	struct sd_stat_op ops[SD_STAT_MAX_OPS], t;
	int n = stat_read_ops(ops, SD_STAT_MAX_OPS, &t, now);

	ck_assert_int_gt(n, idx);
	if (total)
		*total = t;
	return ops[idx];
}

START_TEST(test_bucket)
{
	ck_assert_int_eq(stat_bucket(0), 0);
	ck_assert_int_eq(stat_bucket(1999), 0); /* 1 us */
	ck_assert_int_eq(stat_bucket(2000), 1);
	ck_assert_int_eq(stat_bucket(3999), 1);
	ck_assert_int_eq(stat_bucket(4000), 2);
	ck_assert_int_eq(stat_bucket(255 * US), 7);
	ck_assert_int_eq(stat_bucket(256 * US), 8);
	ck_assert_int_eq(stat_bucket(511 * US + 999), 8);
	ck_assert_int_eq(stat_bucket(512 * US), 9);
	ck_assert_int_eq(stat_bucket(UINT64_MAX), SD_STAT_NR_BUCKETS - 1);
}
END_TEST

/* the calibrated clock agrees with CLOCK_MONOTONIC over 100 ms */
START_TEST(test_clock)
{
	struct timespec req = { 0, 100 * 1000 * 1000 };
	uint64_t t0, n0, t1, n1, ns;

	ck_assert_int_eq(stat_init(0), 0);
	n0 = sd_now_ns();
	t0 = stat_clock();
	nanosleep(&req, NULL);
	n1 = sd_now_ns();
	t1 = stat_clock();
	ns = stat_clock_ns(t1 - t0);
	ck_assert_uint_gt(ns, (n1 - n0) * 9 / 10);
	ck_assert_uint_lt(ns, (n1 - n0) * 11 / 10);
	/* ns -> ticks -> ns within a tick */
	ns = stat_clock_ns(stat_clock_ticks(30ULL * 1000 * MS));
	ck_assert_uint_gt(ns, 30ULL * 1000 * MS - 10);
	ck_assert_uint_le(ns, 30ULL * 1000 * MS);
}
END_TEST

START_TEST(test_names)
{
	struct sd_stat_op ops[SD_STAT_MAX_OPS];

	setup(0);
	ck_assert_int_eq(stat_op_idx(0x02), 1);
	ck_assert_int_eq(stat_op_idx(0x03), 2);
	ck_assert_int_eq(stat_op_idx(0x77), STAT_IDX_INVALID);
	/* registering twice gives the same slot */
	ck_assert_int_eq(stat_register_op(0x03, "WRITE_OBJ", "io"), 2);
	ck_assert_int_eq(stat_read_ops(ops, SD_STAT_MAX_OPS, NULL, 0), 4);
	ck_assert_str_eq(ops[0].name, "invalid");
	ck_assert_str_eq(ops[1].name, "read");
	ck_assert_str_eq(ops[2].name, "write");
	ck_assert_str_eq(ops[3].name, "write_peer");
	ck_assert_int_eq(ops[3].opcode, 0xA1);
}
END_TEST

START_TEST(test_table_full)
{
	int i, ret = 0;

	setup(0);
	for (i = 0x10; i < 0x10 + SD_STAT_MAX_OPS && ret >= 0; i++)
		ret = stat_register_op((uint8_t)i, "X", NULL);
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(stat_op_idx((uint8_t)(i - 1)), STAT_IDX_INVALID);
}
END_TEST

START_TEST(test_counts)
{
	struct sd_stat_op op, total;
	uint64_t t = 1000 * MS, hist_sum = 0;

	setup(0);
	/* 10 writes of 4 KiB at 300 us, one failing; 3 reads at 5 us */
	for (int i = 0; i < 10; i++) {
		stat_op_begin(2, t);
		stat_op_end(2, t, t + 300 * US, 4096, i == 9);
		t += MS;
	}
	for (int i = 0; i < 3; i++) {
		stat_op_begin(1, t);
		stat_op_end(1, t, t + 5 * US, 512, false);
		t += MS;
	}
	op = read_op(2, t, &total);
	ck_assert_uint_eq(op.nr_done, 10);
	ck_assert_uint_eq(op.nr_errors, 1);
	ck_assert_uint_eq(op.nr_inflight, 0);
	ck_assert_uint_eq(op.bytes, 40960);
	ck_assert_uint_eq(op.await_ns, 3000 * US);
	ck_assert_uint_eq(op.busy_ns, 3000 * US);
	ck_assert_uint_eq(op.hist[8], 10); /* 256-511 us */
	for (int k = 0; k < SD_STAT_NR_BUCKETS; k++)
		hist_sum += op.hist[k];
	ck_assert_uint_eq(hist_sum, 10);
	op = read_op(1, t, NULL);
	ck_assert_uint_eq(op.nr_done, 3);
	ck_assert_uint_eq(op.hist[2], 3); /* 4-7 us */
	ck_assert_str_eq(total.name, "TOTAL");
	ck_assert_uint_eq(total.nr_done, 13);
	ck_assert_uint_eq(total.nr_errors, 1);
	ck_assert_uint_eq(total.bytes, 40960 + 1536);
	ck_assert_uint_eq(total.busy_ns, 3015 * US);
	ck_assert_uint_eq(total.hist[8] + total.hist[2], 13);
}
END_TEST

/* a request that never ends: in flight, busy up to the reader's clock */
START_TEST(test_busy_open_interval)
{
	struct sd_stat_op op;

	setup(0);
	stat_op_begin(2, 100 * MS);
	op = read_op(2, 1100 * MS, NULL);
	ck_assert_uint_eq(op.nr_inflight, 1);
	ck_assert_uint_eq(op.nr_done, 0);
	ck_assert_uint_eq(op.busy_ns, 1000 * MS);
	/* a later read counts the whole open interval again: 100% util */
	op = read_op(2, 2100 * MS, NULL);
	ck_assert_uint_eq(op.busy_ns, 2000 * MS);
	stat_op_end(2, 100 * MS, 2500 * MS, 0, false);
	op = read_op(2, 9000 * MS, NULL);
	ck_assert_uint_eq(op.nr_inflight, 0);
	ck_assert_uint_eq(op.busy_ns, 2400 * MS);
}
END_TEST

/* overlapping requests count their union, not their sum */
START_TEST(test_busy_overlap)
{
	struct sd_stat_op op, total;

	setup(0);
	stat_op_begin(2, 0);
	stat_op_begin(2, 100);
	stat_op_begin(1, 150);
	stat_op_end(2, 0, 200, 0, false);
	stat_op_end(1, 150, 250, 0, false);
	stat_op_end(2, 100, 300, 0, false);
	stat_op_begin(2, 1000);
	stat_op_end(2, 1000, 1100, 0, false);
	op = read_op(2, 5000, &total);
	ck_assert_uint_eq(op.busy_ns, 400);
	ck_assert_uint_eq(op.await_ns, 200 + 200 + 100);
	ck_assert_uint_eq(total.busy_ns, 400);
	op = read_op(1, 5000, NULL);
	ck_assert_uint_eq(op.busy_ns, 100);
}
END_TEST

#define NR_WRITERS 4
#define PER_WRITER 200000

static void *writer(void *arg)
{
	uint64_t t = (uintptr_t)arg * 1000;

	for (int i = 0; i < PER_WRITER; i++) {
		stat_op_begin(3, t);
		stat_op_end(3, t, t + (i % 7) * 1000 * US, 1, i % 100 == 0);
		t += 10;
	}
	return NULL;
}

/* several threads count at once; every read is consistent, the end exact */
START_TEST(test_threads)
{
	pthread_t th[NR_WRITERS];
	struct sd_stat_op op;
	uint64_t last = 0;
	int reads = 0;

	setup(0);
	for (uintptr_t i = 0; i < NR_WRITERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer, (void *)i), 0);
	while (last < (uint64_t)NR_WRITERS * PER_WRITER && reads < 1000000) {
		uint64_t sum = 0;

		op = read_op(3, 0, NULL);
		for (int k = 0; k < SD_STAT_NR_BUCKETS; k++)
			sum += op.hist[k];
		/* each slot is copied whole: its histogram and count agree */
		ck_assert_uint_eq(sum, op.nr_done);
		ck_assert_uint_eq(op.bytes, op.nr_done);
		ck_assert_uint_ge(op.nr_done, last);
		ck_assert_uint_le(op.nr_inflight, NR_WRITERS);
		last = op.nr_done;
		reads++;
	}
	for (int i = 0; i < NR_WRITERS; i++)
		pthread_join(th[i], NULL);
	op = read_op(3, 0, NULL);
	ck_assert_uint_eq(op.nr_done, (uint64_t)NR_WRITERS * PER_WRITER);
	ck_assert_uint_eq(op.nr_errors, (uint64_t)NR_WRITERS * (PER_WRITER / 100));
	ck_assert_uint_eq(op.nr_inflight, 0);
}
END_TEST

START_TEST(test_hangs)
{
	struct stat_req a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	struct stat_track ta, tb, tc, td;
	uint64_t thr = 30000 * MS, t0 = 5000 * MS;
	struct sd_stat_op op;

	setup(thr);
	/* the check sees the tracked structs: in flight or not (d never begins) */
	stat_req_track(&ta, &a, report);
	stat_req_track(&td, &d, report);
	stat_req_track(&tb, &b, report);
	stat_req_track(&tc, &c, report);
	stat_req_begin(&a, 0x03, t0);
	stat_req_begin(&b, 0x02, t0 + 10 * MS);
	stat_req_begin(&c, 0x77, t0 + 20 * MS); /* unknown opcode: the invalid slot */
	ck_assert_ptr_eq(c.c, &stat_main_slot.op[STAT_IDX_INVALID]);
	ck_assert_int_eq(stat_check_hangs(t0 + thr - 1), 0);
	ck_assert_int_eq(nr_reported, 0);
	/* b ends in time */
	stat_req_end(&b, t0 + 11 * MS, 100, false);
	ck_assert_int_eq(stat_check_hangs(t0 + thr), 1);
	ck_assert_int_eq(nr_reported, 1);
	ck_assert_ptr_eq(reported[0], &a);
	ck_assert_uint_eq(reported_age[0], thr);
	/* reported once, still counted as hung */
	ck_assert_int_eq(stat_check_hangs(t0 + thr + 20 * MS), 2);
	ck_assert_int_eq(nr_reported, 2);
	ck_assert_ptr_eq(reported[1], &c);
	ck_assert_int_eq(stat_check_hangs(t0 + 2 * thr), 2);
	ck_assert_int_eq(nr_reported, 2);
	ck_assert_uint_eq(stat_nr_hangs(), 2);
	op = read_op(2, t0 + thr, NULL);
	ck_assert_uint_eq(op.nr_inflight, 1);
	ck_assert_uint_eq(op.busy_ns, thr);
	stat_req_end(&a, t0 + 2 * thr, 0, true);
	stat_req_end(&a, t0 + 3 * thr, 0, true); /* a second end is ignored */
	stat_req_end(&c, t0 + 2 * thr, 0, true);
	ck_assert_int_eq(stat_check_hangs(t0 + 5 * thr), 0);
	op = read_op(2, t0 + 5 * thr, NULL);
	ck_assert_uint_eq(op.nr_done, 1);
	ck_assert_uint_eq(op.nr_errors, 1);
	ck_assert_uint_eq(op.busy_ns, 2 * thr);
	ck_assert_uint_eq(stat_nr_hangs(), 2);
	/* an untracked struct is not looked at (request_reply.c frees it next) */
	stat_req_begin(&b, 0x02, t0 + 5 * thr);
	stat_req_untrack(&tb);
	ck_assert_int_eq(stat_check_hangs(t0 + 7 * thr), 0);
	stat_req_begin(&d, 0x02, t0 + 5 * thr);
	ck_assert_int_eq(stat_check_hangs(t0 + 7 * thr), 1);
	ck_assert_ptr_eq(reported[2], &d);
	stat_req_untrack(&ta);
	stat_req_untrack(&tc);
	stat_req_untrack(&td);
}
END_TEST

START_TEST(test_hangs_off)
{
	struct stat_req a = { 0 };

	setup(0);
	stat_req_begin(&a, 0x03, 0);
	ck_assert_int_eq(stat_check_hangs(UINT64_MAX / 2), 0);
	ck_assert_int_eq(nr_reported, 0);
}
END_TEST

/* a count of the object oid by a write (WRITE_OBJ) or a read */
static void vdi_count_op(struct stat_vdi_cache *vc, uint64_t oid, unsigned int opcode, uint64_t b,
			 uint64_t a)
{
	stat_vdi_count(vc, &oid, opcode, b, a, NULL);
}

static void vdi_count(struct stat_vdi_cache *vc, uint64_t oid, bool w, uint64_t b, uint64_t a)
{
	vdi_count_op(vc, oid, w ? SD_OP_WRITE_OBJ : SD_OP_READ_OBJ, b, a);
}

START_TEST(test_vdis)
{
	struct sd_stat_vdi v[SD_STAT_MAX_VDIS];
	int n, i10 = -1, other = -1;

	struct stat_vdi_cache c1, c2, c3;

	setup(0);
	stat_vdi_cache_init(&c1);
	stat_vdi_cache_init(&c2);
	stat_vdi_cache_init(&c3);
	vdi_count(&c1, vid_to_data_oid(0x10, 0), true, 4096, 100);
	vdi_count(&c1, vid_to_data_oid(0x10, 0), false, 512, 50);
	/* its inode object: the key has VDI_BIT, the entry is the VDI's */
	vdi_count(&c1, vid_to_vdi_oid(0x10), false, 512, 50);
	vdi_count(&c1, vid_to_data_oid(0x10, 0), false, 0, 0);
	/* a connection that changes VDI: its cache follows */
	vdi_count(&c3, vid_to_data_oid(0x10, 0), false, 256, 25);
	/* a create-and-write is a write */
	vdi_count_op(&c3, vid_to_data_oid(0x11, 0), SD_OP_CREATE_AND_WRITE_OBJ, 1, 1);
	vdi_count(&c3, vid_to_data_oid(0x10, 0), false, 256, 25);
	vdi_count(&c3, vid_to_data_oid(0x11, 0), false, 1, 1);
	/* 37 more: 0x110 and 0x120-0x124 find their entries taken */
	for (uint32_t vid = 0x100; vid < 0x100 + 37; vid++)
		vdi_count_op(&c2, vid_to_data_oid(vid, 0),
			     vid & 1 ? SD_OP_CREATE_AND_WRITE_OBJ : SD_OP_WRITE_OBJ, 1, 1);
	/* vid 0 is no VDI's: the overflow entry, cached or not */
	vdi_count(&c2, vid_to_data_oid(0, 0), true, 1, 1);
	stat_vdi_cache_init(&c2);
	vdi_count(&c2, vid_to_data_oid(0, 0), true, 1, 1);
	n = stat_read_vdis(v, SD_STAT_MAX_VDIS);
	ck_assert_int_eq(n, STAT_VDI_SLOTS + 1);
	for (int i = 0; i < n; i++) {
		if (v[i].vid == 0x10)
			i10 = i;
		if (v[i].vid == 0)
			other = i;
		if (v[i].vid == 0x11) {
			ck_assert_uint_eq(v[i].nr_writes, 1);
			ck_assert_uint_eq(v[i].nr_reads, 1);
		}
	}
	ck_assert_int_ge(i10, 0);
	ck_assert_uint_eq(v[i10].nr_writes, 1);
	ck_assert_uint_eq(v[i10].nr_reads, 5);
	ck_assert_uint_eq(v[i10].bytes, 5632);
	ck_assert_uint_eq(v[i10].await_ns, 250);
	ck_assert_int_ge(other, 0);
	ck_assert_uint_eq(v[other].nr_writes, 9); /* 0x110, 0x111, 0x120-0x124, vid 0 twice */
	ck_assert_uint_eq(v[other].nr_reads, 0);
	/* a short buffer gets the first entries */
	ck_assert_int_eq(stat_read_vdis(v, 3), 3);
}
END_TEST

START_TEST(test_snapshot)
{
	char buf[64 * 1024];
	struct sd_stat_header *h = (void *)buf;
	struct sd_stat_op *ops = (void *)(h + 1);
	struct stat_req a = { 0 };
	int len;

	setup(0);
	struct stat_vdi_cache vc;

	stat_req_begin(&a, 0x02, stat_clock());
	stat_vdi_cache_init(&vc);
	vdi_count(&vc, vid_to_data_oid(0x42, 0), false, 1, 1);
	len = stat_snapshot(buf, sizeof(buf), stat_clock());
	ck_assert_int_eq(
	    len, (int)(sizeof(*h) + 5 * sizeof(struct sd_stat_op) + sizeof(struct sd_stat_vdi)));
	ck_assert_uint_eq(h->version, SD_STAT_VERSION);
	ck_assert_uint_eq(h->nr_ops, 4);
	ck_assert_uint_eq(h->nr_queues, 0);
	ck_assert_uint_eq(h->nr_vdis, 1);
	ck_assert_str_eq(ops[0].name, "TOTAL");
	ck_assert_uint_eq(ops[0].nr_inflight, 1);
	ck_assert_uint_eq(ops[2].nr_inflight, 1);
	ck_assert_int_eq(stat_snapshot(buf, 100, stat_clock()), -ENOSPC);
}
END_TEST

static int fake_rows = 2;

static int fake_caches(struct sd_stat_cache *out, int max)
{
	for (int i = 0; i < max && i < fake_rows; i++) {
		snprintf(out[i].name, sizeof(out[i].name), "c%d", i);
		out[i].capacity = 10;
		out[i].nr_hits = 100 + (uint64_t)i;
	}
	return fake_rows;
}

/* the cache rows follow the VDIs'; a source that answers too many or an error is held to 0..max */
START_TEST(test_snapshot_caches)
{
	static char buf[64 * 1024];
	struct sd_stat_header *h = (void *)buf;
	struct sd_stat_cache *c;
	int len, base;

	setup(0);
	stat_set_caches(NULL);
	base = stat_snapshot(buf, sizeof(buf), stat_clock());
	ck_assert_int_gt(base, 0);
	ck_assert_uint_eq(h->nr_caches, 0);
	stat_set_caches(fake_caches);
	len = stat_snapshot(buf, sizeof(buf), stat_clock());
	ck_assert_uint_eq(h->nr_caches, 2);
	ck_assert_int_eq(len, base + 2 * (int)sizeof(struct sd_stat_cache));
	c = (void *)(buf + base);
	ck_assert_str_eq(c[0].name, "c0");
	ck_assert_str_eq(c[1].name, "c1");
	ck_assert_uint_eq(c[1].nr_hits, 101);
	ck_assert_uint_eq(c[1].capacity, 10);
	fake_rows = 99;
	len = stat_snapshot(buf, sizeof(buf), stat_clock());
	ck_assert_uint_eq(h->nr_caches, SD_STAT_MAX_CACHES);
	ck_assert_int_eq(len, base + SD_STAT_MAX_CACHES * (int)sizeof(struct sd_stat_cache));
	fake_rows = -5;
	ck_assert_int_eq(stat_snapshot(buf, sizeof(buf), stat_clock()), base);
	ck_assert_uint_eq(h->nr_caches, 0);
	fake_rows = 2;
	stat_set_caches(NULL);
}
END_TEST

struct parse_case {
	const char *arg;
	int ret;
	const char *addr;
	int port;
};

static const struct parse_case parse_cases[] = {
	{ "9100", 0, "127.0.0.1", 9100 },
	{ "0.0.0.0:9100", 0, "0.0.0.0", 9100 },
	{ "127.0.0.2:1", 0, "127.0.0.2", 1 },
	{ "[::1]:65535", 0, "::1", 65535 },
	{ "localhost:80", 0, "localhost", 80 },
	{ "0", -EINVAL, NULL, 0 },
	{ "65536", -EINVAL, NULL, 0 },
	{ "x", -EINVAL, NULL, 0 },
	{ "", -EINVAL, NULL, 0 },
	{ ":9100", -EINVAL, NULL, 0 },
	{ "127.0.0.1:", -EINVAL, NULL, 0 },
	{ "host:-1", -EINVAL, NULL, 0 },
};

/* sheep --metrics [ADDR:]PORT */
START_TEST(test_metrics_parse)
{
	const struct parse_case *c = &parse_cases[_i];
	char addr[64] = "";
	int port = 0;

	ck_assert_int_eq(metrics_parse(c->arg, addr, sizeof(addr), &port), c->ret);
	ck_assert_int_eq(metrics_parse(c->arg, NULL, 0, NULL), c->ret);
	if (c->ret)
		return;
	ck_assert_str_eq(addr, c->addr);
	ck_assert_int_eq(port, c->port);
}
END_TEST

/* the queue rows add up the ops that run on each queue */
START_TEST(test_snapshot_queues)
{
	static char buf[64 * 1024];
	struct sd_stat_header *h = (void *)buf;
	struct sd_stat_op *ops = (void *)(h + 1);
	struct sd_stat_queue *q;
	uint64_t sum = 0;

	ck_assert_int_eq(ev_init(16), 0);
	ck_assert_int_eq(wq_init(), 0);
	ck_assert_ptr_nonnull(wq_create("io", 1));
	ck_assert_ptr_nonnull(wq_create("peer", 2));
	setup(0);
	for (int i = 0; i < 5; i++) {
		stat_op_begin(1, 100);
		stat_op_end(1, 100, 300, 10, false);
	}
	stat_op_begin(2, 1000);
	stat_op_end(2, 1000, 1500, 20, true);
	stat_op_begin(2, 2000);
	stat_op_begin(3, 2000);
	stat_op_end(3, 2000, 2100, 30, false);
	ck_assert_int_gt(stat_snapshot(buf, sizeof(buf), 5000), 0);
	ck_assert_uint_eq(h->nr_queues, 2);
	q = (void *)(ops + 1 + h->nr_ops);
	/* newest first */
	ck_assert_str_eq(q[0].name, "peer");
	ck_assert_uint_eq(q[0].nr_threads, 2);
	ck_assert_uint_eq(q[0].nr_reqs, 1);
	ck_assert_uint_eq(q[0].bytes, 30);
	ck_assert_str_eq(q[1].name, "io");
	ck_assert_uint_eq(q[1].nr_threads, 1);
	ck_assert_uint_eq(q[1].nr_inflight, 1);
	ck_assert_uint_eq(q[1].nr_reqs, 6);
	ck_assert_uint_eq(q[1].nr_errors, 1);
	ck_assert_uint_eq(q[1].bytes, 70);
	ck_assert_uint_eq(q[1].await_ns, 5 * 200 + 500);
	/* write: 500 closed + 3000 open */
	ck_assert_uint_eq(q[1].busy_ns, 3500);
	for (int b = 0; b < SD_STAT_NR_BUCKETS; b++)
		sum += q[1].hist[b];
	ck_assert_uint_eq(sum, 6);
	wq_shutdown_all();
}
END_TEST

/*
 * Requests of the main thread (stat_req_*, sheep's) count in its static
 * slot and merge with the other threads' slots: overlapping writes, a read
 * inside them, a failed read later, and a write counted by a thread slot.
 */
START_TEST(test_req_counts)
{
	struct stat_req r[4] = { 0 };
	struct sd_stat_op op, total;

	setup(0);
	stat_req_begin(&r[0], 0x03, 1000);
	stat_req_begin(&r[1], 0x03, 1100);
	stat_req_begin(&r[2], 0x02, 1200);
	op = read_op(2, 1250, &total);
	ck_assert_uint_eq(op.nr_inflight, 2);
	ck_assert_uint_eq(op.busy_ns, 250);
	ck_assert_uint_eq(total.nr_inflight, 3);
	ck_assert_uint_eq(stat_req_end(&r[0], 1300, 4096, false), 300);
	ck_assert_uint_eq(stat_req_end(&r[2], 1400, 512, false), 200);
	ck_assert_uint_eq(stat_req_end(&r[1], 1600, 4096, false), 500);
	ck_assert_uint_eq(stat_req_end(&r[1], 1700, 4096, false), 0); /* ignored */
	stat_req_begin(&r[3], 0x02, 5000);
	stat_req_end(&r[3], 5000 + 3 * MS, 0, true);
	/* this thread's own slot, merged with the main one */
	stat_op_begin(2, 10 * MS);
	stat_op_end(2, 10 * MS, 10 * MS + 100, 10, false);

	op = read_op(2, 20 * MS, &total);
	ck_assert_uint_eq(op.nr_done, 3);
	ck_assert_uint_eq(op.nr_inflight, 0);
	ck_assert_uint_eq(op.nr_errors, 0);
	ck_assert_uint_eq(op.bytes, 8202);
	ck_assert_uint_eq(op.await_ns, 300 + 500 + 100);
	ck_assert_uint_eq(op.busy_ns, 600); /* the union 1000..1600; the other slot's 100 is less */
	ck_assert_uint_eq(op.hist[0], 3);
	op = read_op(1, 20 * MS, NULL);
	ck_assert_uint_eq(op.nr_done, 2);
	ck_assert_uint_eq(op.nr_errors, 1);
	ck_assert_uint_eq(op.bytes, 512);
	ck_assert_uint_eq(op.await_ns, 200 + 3 * MS);
	ck_assert_uint_eq(op.busy_ns, 200 + 3 * MS);
	ck_assert_uint_eq(op.hist[0], 1);
	ck_assert_uint_eq(op.hist[11], 1); /* 3000 us: 2048-4095 */
	ck_assert_uint_eq(total.nr_done, 5);
	ck_assert_uint_eq(total.nr_errors, 1);
	ck_assert_uint_eq(total.nr_inflight, 0);
	ck_assert_uint_eq(total.busy_ns, 600 + 3 * MS);
}
END_TEST

/* an end in two steps, as request_reply.c counts: the sums, then the completion */
START_TEST(test_req_end_steps)
{
	struct stat_req r = { 0 };
	struct stat_counters *c;
	struct sd_stat_op op;
	struct stat_vdi_cache vc;
	struct sd_stat_vdi v[SD_STAT_MAX_VDIS];
	uint64_t await, oid = vid_to_data_oid(0x42, 0);

	setup(0);
	stat_req_begin(&r, 0x02, 1000);
	c = stat_req_end_sums(&r, 1500, 512, false, &await);
	ck_assert_ptr_eq(c, &stat_main_slot.op[1]);
	ck_assert_uint_eq(await, 500);
	op = read_op(1, 2000, NULL);
	ck_assert_uint_eq(op.nr_inflight, 0);
	ck_assert_uint_eq(op.nr_done, 0);
	ck_assert_uint_eq(op.await_ns, 500);
	ck_assert_uint_eq(op.bytes, 512);
	ck_assert_uint_eq(op.busy_ns, 500);
	stat_count_hist(c, await);
	op = read_op(1, 2000, NULL);
	ck_assert_uint_eq(op.nr_done, 1);
	ck_assert_uint_eq(op.hist[0], 1);
	/* not active any more */
	ck_assert_ptr_null(stat_req_end_sums(&r, 1700, 512, true, &await));
	ck_assert_uint_eq(await, 0);
	op = read_op(1, 2000, NULL);
	ck_assert_uint_eq(op.nr_errors, 0);
	ck_assert_uint_eq(op.bytes, 512);
	/* the VDI table's count adds the completion, on a miss of its cache and on a hit */
	stat_vdi_cache_init(&vc);
	for (int i = 0; i < 2; i++) {
		stat_req_begin(&r, 0x02, 3000);
		c = stat_req_end_sums(&r, 3000 + 4 * MS, 512, false, &await);
		stat_vdi_count(&vc, &oid, SD_OP_READ_OBJ, 512, await, c);
		op = read_op(1, 10 * MS, NULL);
		ck_assert_uint_eq(op.nr_done, 2 + i);
		ck_assert_uint_eq(op.hist[11], 1 + i); /* 4000 us: 2048-4095 */
	}
	ck_assert_int_eq(stat_read_vdis(v, SD_STAT_MAX_VDIS), 1);
	ck_assert_uint_eq(v[0].nr_reads, 2);
}
END_TEST

/* latencies past the last bucket count in it; a clock going back counts 0 */
START_TEST(test_hist_fold)
{
	struct stat_req a = { 0 }, b = { 0 }, c = { 0 };
	struct sd_stat_op op;

	setup(0);
	stat_req_begin(&a, 0x02, 0);
	/* 2^62 ns: about 2^52 us, far past the last bucket's 2^31 */
	stat_req_end(&a, UINT64_C(1) << 62, 0, false);
	stat_req_begin(&b, 0x02, 1000 * MS);
	ck_assert_uint_eq(stat_req_end(&b, 999 * MS, 0, false), 0);
	/* a reader whose clock is behind the start of the open interval reads 0, not a wrap */
	stat_req_begin(&c, 0x03, 2000 * MS);
	op = read_op(2, 1500 * MS, NULL);
	ck_assert_uint_eq(op.nr_inflight, 1);
	ck_assert_uint_eq(op.busy_ns, 0);
	op = read_op(1, UINT64_C(1) << 62, NULL);
	ck_assert_uint_eq(op.nr_done, 2);
	ck_assert_uint_eq(op.hist[SD_STAT_NR_BUCKETS - 1], 1);
	ck_assert_uint_eq(op.hist[0], 1);
	ck_assert_uint_eq(op.await_ns, UINT64_C(1) << 62);
}
END_TEST

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool hold_released;
static int nr_held;

static void hold_fn(struct work *w)
{
	pthread_mutex_lock(&hold_lock);
	nr_held++;
	pthread_cond_broadcast(&hold_cond);
	while (!hold_released)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
}

static struct wq_info queue_info(void)
{
	struct wq_info info[4];

	ck_assert_int_eq(wq_info_all(info, 4), 1);
	return info[0];
}

/* the held work runs (the queue's one worker is busy with it) */
static void wait_held(void)
{
	pthread_mutex_lock(&hold_lock);
	while (!nr_held)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
}

/* let the held work end, then wait (generously) until nr works are done */
static void release_held(uint64_t nr)
{
	pthread_mutex_lock(&hold_lock);
	hold_released = true;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
	/* the worker hands each work over as soon as it runs */
	for (int i = 0; i < 10000 && queue_info().nr_done < nr; i++)
		usleep(1000);
}

/* a queue's queued, running and done, kept as differences of three counts */
START_TEST(test_queue_counts)
{
	struct work w[3] = { { .fn = hold_fn }, { .fn = hold_fn }, { .fn = hold_fn } };
	struct work_queue *q;
	struct wq_info info;

	ck_assert_int_eq(ev_init(16), 0);
	ck_assert_int_eq(wq_init(), 0);
	ck_assert_ptr_nonnull(q = wq_create("held", 1));
	info = queue_info();
	ck_assert_int_eq(info.nr_queued, 0);
	ck_assert_int_eq(info.nr_running, 0);
	for (int i = 0; i < 3; i++)
		wq_queue_at(q, &w[i], 1000 + i);
	wait_held();
	info = queue_info();
	ck_assert_int_eq(info.nr_threads, 1);
	ck_assert_int_eq(info.nr_queued, 2);
	ck_assert_int_eq(info.nr_running, 1);
	ck_assert_uint_eq(info.nr_done, 0);
	ck_assert_uint_eq(info.oldest_queued, 1001);
	release_held(3);
	info = queue_info();
	ck_assert_uint_eq(info.nr_done, 3);
	ck_assert_int_eq(info.nr_queued, 0);
	ck_assert_int_eq(info.nr_running, 0);
	ck_assert_uint_eq(info.oldest_queued, 0);
	wq_shutdown_all();
}
END_TEST

static int ran[4], nr_ran;

static void record_fn(struct work *w)
{
	ran[nr_ran++] = (int)w->queued; /* one worker: no race */
}

/*
 * Urgent works go ahead of the others, first come first served among
 * themselves, and the oldest waiting is still the oldest queued.
 */
START_TEST(test_queue_urgent)
{
	struct work hold = { .fn = hold_fn };
	struct work w[4] = { { .fn = record_fn }, { .fn = record_fn }, { .fn = record_fn },
			     { .fn = record_fn } };
	struct work_queue *q;
	struct wq_info info;

	ck_assert_int_eq(ev_init(16), 0);
	ck_assert_int_eq(wq_init(), 0);
	ck_assert_ptr_nonnull(q = wq_create("urgent", 1));
	wq_queue_at(q, &hold, 1);
	wait_held();
	wq_queue_at(q, &w[0], 10);
	wq_queue_urgent(q, &w[1], 11);
	wq_queue_at(q, &w[2], 12);
	wq_queue_urgent(q, &w[3], 13);
	info = queue_info();
	ck_assert_int_eq(info.nr_queued, 4);
	ck_assert_uint_eq(info.oldest_queued, 10);
	release_held(5);
	ck_assert_uint_eq(queue_info().nr_done, 5);
	ck_assert_int_eq(nr_ran, 4);
	ck_assert_int_eq(ran[0], 11);
	ck_assert_int_eq(ran[1], 13);
	ck_assert_int_eq(ran[2], 10);
	ck_assert_int_eq(ran[3], 12);
	wq_shutdown_all();
}
END_TEST

static Suite *stat_suite(void)
{
	Suite *s = suite_create("stat");
	TCase *tc = tcase_create("counters");

	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_clock);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_table_full);
	tcase_add_test(tc, test_counts);
	tcase_add_test(tc, test_busy_open_interval);
	tcase_add_test(tc, test_busy_overlap);
	tcase_add_test(tc, test_req_counts);
	tcase_add_test(tc, test_req_end_steps);
	tcase_add_test(tc, test_hist_fold);
	tcase_add_test(tc, test_queue_counts);
	tcase_add_test(tc, test_queue_urgent);
	tcase_add_test(tc, test_vdis);
	tcase_add_test(tc, test_snapshot);
	tcase_add_test(tc, test_snapshot_queues);
	tcase_add_test(tc, test_snapshot_caches);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("metrics");
	tcase_add_loop_test(tc, test_metrics_parse, 0, ARRAY_SIZE(parse_cases));
	suite_add_tcase(s, tc);

	tc = tcase_create("hangs");
	tcase_add_test(tc, test_hangs);
	tcase_add_test(tc, test_hangs_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stat_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
