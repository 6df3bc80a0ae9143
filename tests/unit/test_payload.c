/*
 * Unit tests of sheep/payload.c: the front-ends' payload buffers (sized
 * classes, page-aligned, cached), the in-flight bound with its one holder
 * always let through, the pools (client and reserve) and the connections'
 * fair shares of them, and the waiters: offered in order, one held back
 * by its share not holding back the next.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "internal_proto.h"
#include "ops.h"
#include "payload.h"

START_TEST(test_buffers)
{
	uint32_t cap, cap2;
	void *p = payload_buf_get(4096, &cap), *q;

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(cap, 4096);
	ck_assert_uint_eq((uintptr_t)p % 4096, 0);
	payload_buf_put(p, cap);
	q = payload_buf_get(100, &cap2); /* the smallest class: the cached one */
	ck_assert_ptr_eq(q, p);
	ck_assert_uint_eq(cap2, 4096);
	payload_buf_put(q, cap2);
	p = payload_buf_get(5000, &cap);
	ck_assert_uint_eq(cap, 8192);
	ck_assert_uint_eq((uintptr_t)p % 4096, 0);
	payload_buf_put(p, cap);
	/* past the largest class (8 MiB): exact size, not cached */
	p = payload_buf_get((8u << 20) + 1, &cap);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(cap, (8u << 20) + 1);
	payload_buf_put(p, cap);
}
END_TEST

/* 64 KiB: a reserve of 8, a client pool of 56 */
#define T_BOUND (64u << 10)

START_TEST(test_bound)
{
	struct payload_share x = { { 0 } }, y = { { 0 } };
	void *a, *b, *c;
	uint32_t ca, cb, cc;

	payload_set_max(T_BOUND);
	ck_assert_uint_eq(payload_pool_size(PAYLOAD_RESERVE), 8192);
	ck_assert_uint_eq(payload_pool_size(PAYLOAD_CLIENT), 57344);
	ck_assert_int_eq(payload_get(&x, PAYLOAD_CLIENT, 8000, &a, &ca), 0);
	ck_assert_uint_eq(ca, 8192);
	ck_assert_uint_eq(x.held[PAYLOAD_CLIENT], 8192);
	/* 48 KiB would fit, but leave less free (0) than y would then hold */
	c = NULL;
	ck_assert_int_eq(payload_get(&y, PAYLOAD_CLIENT, 48u << 10, &c, &cc), -EAGAIN);
	ck_assert_ptr_null(c);
	ck_assert_uint_eq(y.held[PAYLOAD_CLIENT], 0);
	/* 16 KiB leaves 32 free: taken */
	ck_assert_int_eq(payload_get(&y, PAYLOAD_CLIENT, 16u << 10, &b, &cb), 0);
	ck_assert_uint_eq(payload_pool_held(PAYLOAD_CLIENT), 24u << 10);
	payload_put(&x, PAYLOAD_CLIENT, a, ca);
	payload_put(&y, PAYLOAD_CLIENT, b, cb);
	ck_assert_uint_eq(payload_pool_held(PAYLOAD_CLIENT), 0);
	ck_assert_uint_eq(x.held[PAYLOAD_CLIENT] + y.held[PAYLOAD_CLIENT], 0);
	/* nothing held: one holder goes through however large */
	ck_assert_int_eq(payload_get(&x, PAYLOAD_CLIENT, 1 << 20, &a, &ca), 0);
	ck_assert_int_eq(payload_get(&y, PAYLOAD_CLIENT, 1, &b, &cb), -EAGAIN);
	/* the reserve is not the client pool's */
	ck_assert_int_eq(payload_get(&y, PAYLOAD_RESERVE, 4096, &b, &cb), 0);
	payload_put(&y, PAYLOAD_RESERVE, b, cb);
	payload_put(&x, PAYLOAD_CLIENT, a, ca);
	ck_assert_int_eq(payload_get(&y, PAYLOAD_CLIENT, 1, &b, &cb), 0);
	payload_put(&y, PAYLOAD_CLIENT, b, cb);
}
END_TEST

#define T_GREEDY 12
#define T_MAX_HELD 64

/*
 * Greedy connections take 8 KiB at a time and never give anything back:
 * each one stops at its share (it never holds more than it leaves free),
 * the pool is never all taken, and a connection asking 4 KiB is admitted
 * however many greedy ones came first.
 */
START_TEST(test_shares)
{
	static void *held[T_GREEDY][T_MAX_HELD];
	static uint32_t caps[T_GREEDY][T_MAX_HELD];
	struct payload_share g[T_GREEDY], v = { { 0 } };
	int nr[T_GREEDY] = { 0 };
	uint64_t size;
	void *p;
	uint32_t cap;

	payload_set_max(T_BOUND * 4); /* a client pool of 224 KiB */
	size = payload_pool_size(PAYLOAD_CLIENT);
	memset(g, 0, sizeof(g));
	for (int i = 0; i < T_GREEDY; i++) {
		while (nr[i] < T_MAX_HELD && payload_get(&g[i], PAYLOAD_CLIENT, 8192,
							 &held[i][nr[i]], &caps[i][nr[i]]) == 0) {
			uint64_t total = payload_pool_held(PAYLOAD_CLIENT);

			/* what it holds, it leaves free at least (the first: the empty pool's) */
			ck_assert(g[i].held[PAYLOAD_CLIENT] <= size - total || nr[i] == 0);
			nr[i]++;
		}
		ck_assert_int_lt(nr[i], T_MAX_HELD);
	}
	ck_assert_int_eq(nr[0], 14); /* half the pool: 112 KiB */
	ck_assert_uint_lt(payload_pool_held(PAYLOAD_CLIENT), size);
	/* the later ones got less, some nothing, and none can take more */
	ck_assert_int_eq(nr[T_GREEDY - 1], 0);
	for (int i = 0; i < T_GREEDY; i++)
		ck_assert_int_eq(payload_get(&g[i], PAYLOAD_CLIENT, 8192, &p, &cap), -EAGAIN);
	/* the victim: less than any greedy one holds, asked for */
	ck_assert_int_eq(payload_get(&v, PAYLOAD_CLIENT, 4096, &p, &cap), 0);
	payload_put(&v, PAYLOAD_CLIENT, p, cap);
	for (int i = 0; i < T_GREEDY; i++)
		for (int k = 0; k < nr[i]; k++)
			payload_put(&g[i], PAYLOAD_CLIENT, held[i][k], caps[i][k]);
	ck_assert_uint_eq(payload_pool_held(PAYLOAD_CLIENT), 0);
}
END_TEST

struct waiter {
	struct payload_waiter w;
	int calls, fits_after, order;
	bool wait_again;
};

static int order;

static bool resume(struct payload_waiter *pw)
{
	struct waiter *w = (struct waiter *)pw;

	w->calls++;
	if (w->calls <= w->fits_after)
		return false;
	w->order = ++order;
	if (w->wait_again) { /* its next request waits too: behind the others */
		w->wait_again = false;
		w->fits_after = w->calls;
		payload_wait(pw);
	}
	return true;
}

START_TEST(test_waiters)
{
	struct waiter w1 = { .w.resume = resume, .fits_after = 1 };
	struct waiter w2 = { .w.resume = resume, .wait_again = true };
	struct waiter w3 = { .w.resume = resume, .fits_after = 1 };

	payload_wait(&w1.w);
	payload_wait(&w2.w);
	payload_wait(&w3.w);
	/* the first still does not fit: the second is offered anyway, and waits again */
	payload_resume();
	ck_assert_int_eq(w1.calls, 1);
	ck_assert_int_eq(w2.calls, 1);
	ck_assert_int_eq(w3.calls, 1);
	ck_assert_int_eq(w2.order, 1);
	/* in order: the ones that kept waiting, then the one that waited again */
	payload_resume();
	ck_assert_int_eq(w1.order, 2);
	ck_assert_int_eq(w3.order, 3);
	ck_assert_int_eq(w2.order, 4);
	/* no one waits any more */
	payload_resume();
	ck_assert_int_eq(w1.calls + w2.calls + w3.calls, 6);
}
END_TEST

/*
 * The ops and access rules payload_req_pool reads, stubbed: READ_OBJ is
 * the VDI protocol's, GET_NODE_LIST an admin op, READ_PEER a peer op;
 * only 127.0.0.1 may run the admin ops.
 */
static const struct sd_op_template t_ops[] = {
	{ .name = "READ_OBJ", .opcode = SD_OP_READ_OBJ, .type = OP_IO },
	{ .name = "GET_NODE_LIST", .opcode = SD_OP_GET_NODE_LIST, .type = OP_MAIN },
	{ .name = "READ_PEER", .opcode = SD_OP_READ_PEER, .type = OP_PEER },
};

const struct sd_op_template *get_sd_op(uint8_t opcode)
{
	for (size_t i = 0; i < sizeof(t_ops) / sizeof(t_ops[0]); i++)
		if (t_ops[i].opcode == opcode)
			return &t_ops[i];
	return NULL;
}

enum access_class access_class_of(const struct sd_op_template *op)
{
	return op->type == OP_PEER  ? ACCESS_MEMBER
	       : op->opcode >= 0x80 ? ACCESS_ADMIN
				    : ACCESS_PUBLIC;
}

static const uint8_t lo[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
static const uint8_t far[16] = { [10] = 0xff, [11] = 0xff, 192, 0, 2, 1 };

int access_check(const struct sd_op_template *op, const uint8_t addr[16])
{
	if (access_class_of(op) == ACCESS_PUBLIC || !memcmp(addr, lo, 16))
		return SD_RES_SUCCESS;
	return SD_RES_ACCESS_DENIED;
}

/* the VDI protocol on the client pool; admin ops on the reserve, if allowed; peers' uncounted */
START_TEST(test_req_pool)
{
	struct sd_req rq = { .opcode = SD_OP_READ_OBJ };

	ck_assert_int_eq(payload_req_pool(&rq, lo), PAYLOAD_CLIENT);
	rq.opcode = SD_OP_GET_NODE_LIST;
	ck_assert_int_eq(payload_req_pool(&rq, lo), PAYLOAD_RESERVE);
	/* one that will be refused does not get to take the reserve */
	ck_assert_int_eq(payload_req_pool(&rq, far), PAYLOAD_CLIENT);
	rq.opcode = SD_OP_READ_PEER;
	ck_assert_int_eq(payload_req_pool(&rq, lo), PAYLOAD_NONE);
	rq.opcode = 0x7e; /* unknown: read, then refused */
	ck_assert_int_eq(payload_req_pool(&rq, lo), PAYLOAD_CLIENT);
}
END_TEST

static Suite *payload_suite(void)
{
	Suite *s = suite_create("payload");
	TCase *tc = tcase_create("payload");

	tcase_add_test(tc, test_buffers);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_shares);
	tcase_add_test(tc, test_req_pool);
	tcase_add_test(tc, test_waiters);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(payload_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
