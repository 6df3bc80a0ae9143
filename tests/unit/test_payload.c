/*
 * Unit tests of sheep/payload.c: the front-ends' payload buffers (sized
 * classes, page-aligned, cached), the in-flight bound with its one holder
 * always let through, and the waiters resumed first come first.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "sheep_priv.h"

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

START_TEST(test_bound)
{
	void *a, *b, *c;
	uint32_t ca, cb, cc;

	payload_set_max(16384);
	ck_assert_int_eq(payload_get(8000, &a, &ca), 0);
	ck_assert_uint_eq(ca, 8192);
	ck_assert_int_eq(payload_get(8192, &b, &cb), 0);
	/* 16 KiB held: nothing more fits, nothing is allocated */
	c = NULL;
	ck_assert_int_eq(payload_get(1, &c, &cc), -EAGAIN);
	ck_assert_ptr_null(c);
	payload_put(a, ca);
	ck_assert_int_eq(payload_get(4096, &c, &cc), 0);
	payload_put(b, cb);
	payload_put(c, cc);
	/* nothing held: one holder goes through however large */
	payload_set_max(4096);
	ck_assert_int_eq(payload_get(1 << 20, &a, &ca), 0);
	ck_assert_int_eq(payload_get(1, &b, &cb), -EAGAIN);
	payload_put(a, ca);
	ck_assert_int_eq(payload_get(1, &b, &cb), 0);
	payload_put(b, cb);
}
END_TEST

struct waiter {
	struct payload_waiter w;
	int calls, fits_after, order;
};

static int order;

static bool resume(struct payload_waiter *pw)
{
	struct waiter *w = (struct waiter *)pw;

	w->calls++;
	if (w->calls <= w->fits_after)
		return false;
	w->order = ++order;
	return true;
}

START_TEST(test_waiters)
{
	struct waiter w1 = { .w.resume = resume, .fits_after = 1 };
	struct waiter w2 = { .w.resume = resume };

	payload_wait(&w1.w);
	payload_wait(&w2.w);
	/* the first still does not fit: it stays first, the second waits */
	payload_resume();
	ck_assert_int_eq(w1.calls, 1);
	ck_assert_int_eq(w2.calls, 0);
	payload_resume();
	ck_assert_int_eq(w1.order, 1);
	ck_assert_int_eq(w2.order, 2);
	/* no one waits any more */
	payload_resume();
	ck_assert_int_eq(w1.calls + w2.calls, 3);
}
END_TEST

static Suite *payload_suite(void)
{
	Suite *s = suite_create("payload");
	TCase *tc = tcase_create("payload");

	tcase_add_test(tc, test_buffers);
	tcase_add_test(tc, test_bound);
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
