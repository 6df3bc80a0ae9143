/*
 * Unit tests of the cluster driver's stall check (sheep/cluster/cluster.c):
 * cdrv_tick() keeps the stat_clock() value past which its tick is late,
 * cdrv_stall_ms() converted by the ratio of the two clocks between ticks, and
 * cdrv_catch_up(now) lets the driver catch up once when now is past it. A
 * fake driver counts its catch_up() calls. Each test runs in its own
 * process (Check's fork mode), so each starts with no tick.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cluster/cluster.h"
#include "stat.h"
#include "util.h"

static int nr_catch_up;

static int fake_init(const char *option, const struct cdrv_events *events)
{
	(void)option;
	(void)events;
	return 0;
}

static int fake_join(const struct sd_node *myself)
{
	(void)myself;
	return 0;
}

static int fake_leave(void)
{
	return 0;
}

static int fake_notify(const void *msg, size_t len)
{
	(void)msg;
	(void)len;
	return 0;
}

static void fake_catch_up(void)
{
	nr_catch_up++;
}

static const struct cluster_driver fake = {
	.name = "fake",
	.init = fake_init,
	.join = fake_join,
	.leave = fake_leave,
	.notify = fake_notify,
	.catch_up = fake_catch_up,
};

static const struct cluster_driver plain = {
	.name = "plain",
	.init = fake_init,
	.join = fake_join,
	.leave = fake_leave,
	.notify = fake_notify,
};

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

START_TEST(test_late)
{
	uint64_t c0, n0, c1, n1, per_s, stall;

	cdrv_register(&fake);
	ck_assert_ptr_eq(cdrv_find("fake"), &fake);
	/* no tick yet: never late */
	cdrv_catch_up(UINT64_MAX - 1);
	ck_assert_int_eq(nr_catch_up, 0);
	/* one tick: the clocks' ratio is not known yet */
	c0 = stat_clock();
	n0 = sd_now_ns();
	cdrv_tick();
	cdrv_catch_up(UINT64_MAX - 1);
	ck_assert_int_eq(nr_catch_up, 0);
	sleep_ms(50);
	cdrv_tick();
	c1 = stat_clock();
	n1 = sd_now_ns();
	ck_assert_uint_lt(cdrv_late_at, UINT64_MAX);
	/* late at the last tick plus CDRV_STALL_MS, within 10% */
	per_s = (uint64_t)((unsigned __int128)(c1 - c0) * 1000000000 / (n1 - n0));
	stall = cdrv_late_at - c1;
	ck_assert_uint_gt(stall, per_s / 1000 * CDRV_STALL_MS / 10 * 9);
	ck_assert_uint_lt(stall, per_s / 1000 * CDRV_STALL_MS / 10 * 11);
	/* in time: nothing */
	cdrv_catch_up(stat_clock());
	cdrv_catch_up(cdrv_late_at);
	ck_assert_int_eq(nr_catch_up, 0);
	/* late: once, and the next check is CDRV_STALL_MS from now */
	cdrv_catch_up(cdrv_late_at + 1);
	ck_assert_int_eq(nr_catch_up, 1);
	cdrv_catch_up(stat_clock());
	ck_assert_int_eq(nr_catch_up, 1);
	ck_assert_uint_gt(cdrv_late_at, stat_clock() + stall / 2);
	/* a tick moves it on */
	cdrv_tick();
	cdrv_catch_up(stat_clock());
	ck_assert_int_eq(nr_catch_up, 1);
}
END_TEST

/* late after ms: within 10% of it, converted to stat_clock() ticks */
static void check_stall(unsigned int ms)
{
	uint64_t c0, n0, c1, n1, per_s, stall;

	c0 = stat_clock();
	n0 = sd_now_ns();
	cdrv_tick();
	sleep_ms(50);
	cdrv_tick();
	c1 = stat_clock();
	n1 = sd_now_ns();
	per_s = (uint64_t)((unsigned __int128)(c1 - c0) * 1000000000 / (n1 - n0));
	stall = cdrv_late_at - c1;
	ck_assert_uint_gt(stall, per_s / 1000 * ms / 10 * 9);
	ck_assert_uint_lt(stall, per_s / 1000 * ms / 10 * 11);
}

START_TEST(test_stall_below_heartbeat)
{
	/* 1 s (the least --heartbeat-timeout): late after 250 ms, not 1 s */
	cdrv_register(&fake);
	ck_assert_ptr_eq(cdrv_find("fake"), &fake);
	cdrv_set_heartbeat_timeout_ms(CDRV_MIN_HEARTBEAT_MS);
	ck_assert_uint_eq(cdrv_stall_ms(), CDRV_MIN_HEARTBEAT_MS / 4);
	check_stall(CDRV_MIN_HEARTBEAT_MS / 4);
	/* the default (5 s): CDRV_STALL_MS */
	cdrv_set_heartbeat_timeout_ms(CDRV_DEFAULT_HEARTBEAT_MS);
	ck_assert_uint_eq(cdrv_stall_ms(), CDRV_STALL_MS);
	check_stall(CDRV_STALL_MS);
}
END_TEST

START_TEST(test_no_catch_up)
{
	cdrv_register(&plain);
	ck_assert_ptr_eq(cdrv_find("plain"), &plain);
	cdrv_tick();
	sleep_ms(10);
	cdrv_tick();
	/* a driver without catch_up() is never late */
	ck_assert_uint_eq(cdrv_late_at, UINT64_MAX);
}
END_TEST

static Suite *cdrv_tick_suite(void)
{
	Suite *s = suite_create("cdrv_tick");
	TCase *tc = tcase_create("stall");

	tcase_add_test(tc, test_late);
	tcase_add_test(tc, test_stall_below_heartbeat);
	tcase_add_test(tc, test_no_catch_up);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cdrv_tick_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
