/*
 * Unit tests of the tracer core: the site table, symbols, patching and
 * unpatching (text never left writable), filters, the kill switch, the
 * stop-the-world timeout and bad requests. Each test runs in its own child
 * (Check's fork mode) of a process where trace_init() already ran.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/trace.h"
#include "trace/trace_priv.h"
#include "trace_test.h"

int main(void);

START_TEST(test_site_table)
{
	ck_assert_uint_gt(trace_nr_sites, 10);
	for (size_t i = 1; i < trace_nr_sites; i++)
		ck_assert_uint_lt(trace_sites[i - 1].addr, trace_sites[i].addr);
	for (size_t i = 0; i < trace_nr_sites; i++)
		ck_assert(tt_site_is_nop(&trace_sites[i]));
	ck_assert_ptr_nonnull(tt_site_of(tfn_leaf));
	ck_assert_ptr_nonnull(tt_site_of(tfn_fib));
	ck_assert_ptr_null(trace_site_find((uintptr_t)tfn_leaf + 1));
	/* the tracer itself carries no site */
	ck_assert_ptr_null(tt_site_of(trace_handle_op));
	ck_assert_ptr_null(tt_site_of(trace_entry_hook));
	ck_assert_uint_eq(trace_site_base, trace_sites[0].addr);
	/* read-only once built */
	ck_assert_int_eq(trace_has_wx_mapping(), false);
}
END_TEST

START_TEST(test_symbols)
{
	char buf[32];

	ck_assert_str_eq(trace_site_name(tt_site_of(tfn_leaf), 0, buf, sizeof(buf)), "tfn_leaf");
	ck_assert_str_eq(trace_site_name(tt_site_of(tfn_mid), 0, buf, sizeof(buf)), "tfn_mid");
	ck_assert_str_eq(trace_site_name(tt_site_of(tfn_fib), 0, buf, sizeof(buf)), "tfn_fib");
	ck_assert_str_eq(trace_site_name(tt_site_of(main), 0, buf, sizeof(buf)), "main");
	ck_assert_str_eq(trace_site_name(NULL, 0x1234, buf, sizeof(buf)), "0x1234");
}
END_TEST

START_TEST(test_patch_unpatch)
{
	const char *pats[] = { "tfn_leaf", NULL };
	struct sd_trace_status st;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert(tt_site_is_call(tt_site_of(tfn_leaf)));
	ck_assert(tt_site_is_nop(tt_site_of(tfn_mid)));
	ck_assert_uint_eq(tt_nr_sites_calling(), 1);
	ck_assert_int_eq(trace_has_wx_mapping(), false);
	ck_assert_int_eq(tfn_top(1), 5);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_ON);
	ck_assert_uint_eq(st.nr_sites_patched, 1);
	ck_assert_uint_eq(st.nr_sites_total, trace_nr_sites);
	ck_assert_str_eq(st.tracer, "graph");
	ck_assert_uint_eq(st.nr_events, 4);

	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_uint_eq(tt_nr_sites_calling(), 0);
	for (size_t i = 0; i < trace_nr_sites; i++)
		ck_assert(tt_site_is_nop(&trace_sites[i]));
	ck_assert_int_eq(trace_has_wx_mapping(), false);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_OFF);
	ck_assert_uint_eq(st.nr_sites_patched, 0);
	/* nothing new is recorded once stopped */
	tfn_top(1);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_events, 4);
}
END_TEST

START_TEST(test_patch_all)
{
	ck_assert_int_eq(tt_start("graph", NULL, 0, 0), SD_RES_SUCCESS);
	ck_assert_uint_eq(tt_nr_sites_calling(), trace_nr_sites);
	ck_assert_int_eq(trace_has_wx_mapping(), false);
	ck_assert_int_eq(tfn_top(2), 7);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_uint_eq(tt_nr_sites_calling(), 0);
}
END_TEST

START_TEST(test_filters)
{
	const char *pats[] = { "tfn_m*", "tfn_f?b", "no_such_*", NULL };
	const char *none[] = { "no_such_function*", NULL };
	struct sd_trace_status st;

	ck_assert_int_eq(tt_start("", none, 0, 0), SD_RES_NO_MATCH);
	ck_assert_uint_eq(tt_nr_sites_calling(), 0);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_OFF);

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert(tt_site_is_call(tt_site_of(tfn_mid)));
	ck_assert(tt_site_is_call(tt_site_of(tfn_many)));
	ck_assert(tt_site_is_call(tt_site_of(tfn_fib)));
	ck_assert(tt_site_is_nop(tt_site_of(tfn_leaf)));
	ck_assert(tt_site_is_nop(tt_site_of(tfn_top)));
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_sites_patched, tt_nr_sites_calling());
	ck_assert_uint_eq(st.nr_sites_patched, 3);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_kill_switch)
{
	static const uint8_t odd[5] = { 0x0f, 0x1f, 0x40, 0x00, 0x90 }; /* nop4; nop */
	struct sd_trace_status st;

	ck_assert_int_eq(trace_text_write(tt_site_of(tfn_unused)->addr, odd, 5), 0);
	ck_assert_int_eq(tt_start("", NULL, 0, 0), SD_RES_TRACE_BROKEN);
	/* every other site is a NOP again, the odd one untouched */
	ck_assert_uint_eq(tt_nr_sites_calling(), 0);
	ck_assert(!memcmp((void *)tt_site_of(tfn_unused)->addr, odd, 5));
	ck_assert_int_eq(trace_has_wx_mapping(), false);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_BROKEN);
	ck_assert_int_eq(tt_start("", NULL, 0, 0), SD_RES_TRACE_BROKEN);
	ck_assert_int_eq(tt_stop(), SD_RES_TRACE_BROKEN);
	ck_assert_int_eq(tfn_top(1), 5);
	ck_assert_int_eq(tfn_unused(2), 14);
}
END_TEST

static volatile int sleeper_go = 1;
static volatile int sleeper_ready;

static void *sleeper(void *arg)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sleeper_ready = 1;
	while (sleeper_go)
		usleep(1000);
	return NULL;
}

START_TEST(test_stw_timeout)
{
	const char *pats[] = { "tfn_*", NULL };
	struct sd_trace_status st;
	pthread_t t;

	trace_stw_timeout_ms = 200;
	ck_assert_int_eq(pthread_create(&t, NULL, sleeper, NULL), 0);
	while (!sleeper_ready)
		usleep(1000);
	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_TRACE_TIMEOUT);
	ck_assert_uint_eq(tt_nr_sites_calling(), 0);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_OFF);
	sleeper_go = 0;
	pthread_join(t, NULL);
	/* the thread is gone: the next start works */
	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_bad_requests)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	struct sd_trace_status st;
	char unterminated[4] = { 'g', 'r', 'a', 'p' };
	char buf[64];

	ck_assert_int_eq(tt_op(SD_OP_TRACE_START, &req, unterminated, 4, &rsp),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_START, &req, NULL, 8, &rsp), SD_RES_INVALID_PARMS);
	/* a well-formed payload, but no WRITE flag: the buffer is not the payload */
	memcpy(buf, "graph\0tfn_*", 12);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_START, &req, buf, 12, &rsp), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_STOP, &req, buf, 6, &rsp), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_start("nosuchtracer", NULL, 0, 0), SD_RES_NO_TRACER);
	ck_assert_int_eq(tt_start("", NULL, TRACE_MAX_DEPTH + 1, 0), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_start("", NULL, 0, TRACE_MAX_BUFFER + 1), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_stop(), SD_RES_TRACE_BUSY);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_STATUS, &req, &st, sizeof(st) - 1, &rsp),
			 SD_RES_INVALID_PARMS);
	req.trace.format = 9;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, buf, sizeof(buf), &rsp),
			 SD_RES_INVALID_PARMS);
	req.trace.format = SD_TRACE_FMT_GRAPH;
	req.trace.offset = 10;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, buf, sizeof(buf), &rsp),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_op(0x42, &req, NULL, 0, &rsp), SD_RES_INVALID_PARMS);

	ck_assert_int_eq(tt_start("", NULL, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_start("", NULL, 0, 0), SD_RES_TRACE_BUSY);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_read_empty)
{
	char *text = tt_read(SD_TRACE_FMT_GRAPH);
	char *csv = tt_read(SD_TRACE_FMT_CSV);
	struct sd_trace_status st;

	ck_assert_ptr_nonnull(text);
	ck_assert(!strncmp(text, "# tracer: graph\n", 16));
	ck_assert_int_eq(tt_count(text, "threads: 0 "), 1);
	ck_assert_int_eq(tt_count(text, "|"), 0);
	ck_assert_ptr_nonnull(csv);
	ck_assert_str_eq(csv, "tid,depth,function,entry_ns,duration_ns\n");
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.state, SD_TRACE_STATE_OFF);
	ck_assert_uint_eq(st.nr_threads, 0);
	free(text);
	free(csv);
}
END_TEST

static Suite *trace_suite(void)
{
	Suite *s = suite_create("trace core");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_site_table);
	tcase_add_test(tc, test_symbols);
	tcase_add_test(tc, test_patch_unpatch);
	tcase_add_test(tc, test_patch_all);
	tcase_add_test(tc, test_filters);
	tcase_add_test(tc, test_kill_switch);
	tcase_add_test(tc, test_stw_timeout);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_read_empty);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tt_run_suite(trace_suite());
}
