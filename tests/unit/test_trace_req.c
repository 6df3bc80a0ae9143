/*
 * Unit tests of requests in the tracer: the markers a thread records
 * around the work of a request and how the renderings show them (graph,
 * events, chrome), the ids and the request mode's choice (--sample,
 * --vdi), the sample form of the sites (a call made for a request not
 * chosen costs a thread-local test and is not recorded; registers and
 * return values stay whole either way), --slower-than giving a fast
 * request's records back, and the limits of a start (the rings' total,
 * --thread of no thread). No timing is asserted but --slower-than's.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/trace.h"
#include "trace/trace_priv.h"
#include "trace/trace_req.h"
#include "trace_test.h"

static const char *const tfn_all[] = { "tfn_*", NULL };

/* lines of @text that start with @prefix and end with @suffix */
static int lines(const char *text, const char *prefix, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix);
	int n = 0;

	while (text && *text) {
		const char *eol = strchr(text, '\n');
		size_t len = eol ? (size_t)(eol - text) : strlen(text);

		n += len >= pl + sl && !strncmp(text, prefix, pl) &&
		     !strncmp(text + len - sl, suffix, sl);
		text += len + (eol ? 1 : 0);
	}
	return n;
}

/* a request of id @id at its gateway (@gw) or on a replica */
static void begin(uint64_t id, uint16_t flags, bool gw)
{
	struct trace_req r = {
		.id = id,
		.oid = 0x0000123400000005ULL,
		.queued = trace_rdtsc(),
		.flags = (uint16_t)(flags | (gw ? TRACE_REQ_GATEWAY : 0)),
		.opcode = SD_OP_WRITE_OBJ,
	};

	trace_req_begin(&r);
}

/* the site of @fn holds "call trace_sample_tramp" */
static bool site_is_sample(void *fn)
{
	const struct trace_site *s = tt_site_of(fn);
	const uint8_t *p = (const uint8_t *)s->addr;
	int32_t rel;

	memcpy(&rel, p + 1, sizeof(rel));
	return p[0] == 0xe8 && (uintptr_t)p + 5 + rel == (uintptr_t)trace_sample_tramp;
}

START_TEST(test_markers)
{
	char *ev, *graph, *chrome;
	uint16_t flags;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_top(1), 5); /* no request */
	begin(0xabc0000000000001ULL, 0, true);
	ck_assert_uint_eq(trace_req_current(&flags), 0xabc0000000000001ULL);
	ck_assert_int_eq(tfn_top(2), 7);
	trace_req_end(SD_RES_SUCCESS);
	ck_assert_uint_eq(trace_req_current(&flags), 0);
	begin(0xabc0000000000002ULL, SD_REQ_TRACE_SAMPLED, false);
	ck_assert_uint_eq(trace_req_current(&flags), 0xabc0000000000002ULL);
	ck_assert_uint_eq(flags, SD_REQ_TRACE_SAMPLED);
	ck_assert_int_eq(tfn_leaf(1), 2);
	trace_req_end(SD_RES_EIO);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	ev = tt_read(SD_TRACE_FMT_EVENTS);
	ck_assert_ptr_nonnull(ev);
	ck_assert(!strncmp(ev, "# sheep trace events 1 pid ", 27));
	ck_assert_int_eq(tt_count(ev, " abc0000000000001 100 3 123400000005 "), 1);
	ck_assert_int_eq(tt_count(ev, " abc0000000000002 1 3 123400000005 "), 1);
	ck_assert_int_eq(lines(ev, "D ", " abc0000000000001 0"), 1); /* D: success */
	ck_assert_int_eq(lines(ev, "D ", " abc0000000000002 3"), 1); /* D: eio */
	/* the calls of each request carry its id, the others none */
	ck_assert_int_eq(tt_count(ev, " abc0000000000001 tfn_"), 4);
	ck_assert_int_eq(tt_count(ev, " abc0000000000002 tfn_leaf"), 1);
	ck_assert_int_eq(tt_count(ev, " 0 tfn_"), 4);
	ck_assert_int_eq(lines(ev, "Q ", ""), 2);
	ck_assert_int_eq(lines(ev, "D ", ""), 2);

	graph = tt_read(SD_TRACE_FMT_GRAPH);
	ck_assert_int_eq(tt_count(graph, "request abc0000000000001 write_obj at its gateway oid "
					 "0000123400000005, queued "),
			 1);
	ck_assert_int_eq(tt_count(graph, "request abc0000000000001 done after "), 1);
	ck_assert_int_eq(tt_count(graph, "request abc0000000000002 done after "), 1);
	ck_assert_int_eq(tt_count(graph, ": i/o error"), 1);
	chrome = tt_read(SD_TRACE_FMT_CHROME);
	ck_assert_int_eq(tt_count(chrome, "\"cat\":\"request\""), 2);
	ck_assert_int_eq(tt_count(chrome, "\"args\":{\"request\":\"abc0000000000001\"}"), 5);
	free(ev);
	free(graph);
	free(chrome);
}
END_TEST

START_TEST(test_ids)
{
	uint64_t a, b;
	uint16_t flags;

	/* tracing off: ids all the same, none chosen */
	a = trace_req_new(true, 5, &flags);
	ck_assert_uint_eq(flags, 0);
	b = trace_req_new(false, 0, &flags);
	ck_assert_uint_ne(a, 0);
	ck_assert_uint_ne(a, b);
	ck_assert_uint_eq(a >> 40, b >> 40); /* this daemon's tag */
	ck_assert_uint_ne(a >> 40, 0);
	ck_assert_uint_eq((b & 0xffffffffffULL) - (a & 0xffffffffffULL), 1);
}
END_TEST

/* one request of the request mode: chosen by trace_req_new, then served */
static uint64_t serve(bool has_vid, uint32_t vid, int x)
{
	uint16_t flags;
	uint64_t id = trace_req_new(has_vid, vid, &flags);

	begin(id, flags, true);
	ck_assert_int_eq(tfn_top(x), 2 * x + 3);
	/* what crosses the sample form stays whole, chosen or not */
	ck_assert_int_eq(tfn_many(1, 2, 3, 4, 5, 6, 7, 8), 204);
	ck_assert(tfn_fp(1.5, 2.5, 3.0f, 2) == 8.75);
	ck_assert_int_eq(tfn_pair(3, 4).b, 20);
	ck_assert_int_eq(tfn_big(7).v[5], 12);
	trace_req_end(SD_RES_SUCCESS);
	return flags & SD_REQ_TRACE_SAMPLED ? id : 0;
}

START_TEST(test_sample)
{
	const char *pats[] = { "tfn_*", "sample=3", NULL };
	uint64_t chosen[9];
	char *ev, needle[64];
	int nr = 0;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	/* alone at their sites: the sample form */
	ck_assert(site_is_sample(tfn_top));
	ck_assert(site_is_sample(tfn_leaf));
	ck_assert_int_eq(tfn_top(1), 5); /* outside any request: not recorded */
	for (int i = 0; i < 9; i++) {
		chosen[i] = serve(false, 0, i);
		nr += chosen[i] != 0;
	}
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert(!site_is_sample(tfn_top));
	/* one in 3, counted from the session's first request */
	ck_assert_int_eq(nr, 3);
	ck_assert_uint_ne(chosen[0], 0);
	ck_assert_uint_ne(chosen[3], 0);
	ck_assert_uint_ne(chosen[6], 0);
	ev = tt_read(SD_TRACE_FMT_EVENTS);
	ck_assert_int_eq(lines(ev, "Q ", ""), 3);
	ck_assert_int_eq(lines(ev, "C ", ""), 3 * 8);
	ck_assert_int_eq(tt_count(ev, " 0 tfn_"), 0);
	for (int i = 0; i < 9; i += 3) {
		snprintf(needle, sizeof(needle), " %llx tfn_", (unsigned long long)chosen[i]);
		ck_assert_int_eq(tt_count(ev, needle), 8);
	}
	free(ev);
	/* depth counts from the request's first call: nothing of the caller recorded */
	ev = tt_read(SD_TRACE_FMT_GRAPH);
	ck_assert_int_eq(tt_count(ev, "| tfn_top() {"), 3);
	ck_assert_int_eq(tt_count(ev, "| tfn_many();"), 3);
	free(ev);
}
END_TEST

START_TEST(test_vdi)
{
	const char *pats[] = { "tfn_*", "vdi=77", NULL };
	char *ev;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_uint_ne(serve(true, 77, 1), 0);
	ck_assert_uint_eq(serve(true, 78, 1), 0);
	ck_assert_uint_eq(serve(false, 77, 1), 0); /* names no VDI */
	ck_assert_uint_ne(serve(true, 77, 2), 0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ev = tt_read(SD_TRACE_FMT_EVENTS);
	ck_assert_int_eq(lines(ev, "Q ", ""), 2);
	ck_assert_int_eq(lines(ev, "C ", ""), 2 * 8);
	free(ev);
}
END_TEST

/* a replica in the request mode records what its gateway chose, nothing else */
START_TEST(test_replica)
{
	const char *pats[] = { "tfn_*", "sample=1000", NULL };
	char *ev;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	begin(0x1111, SD_REQ_TRACE_SAMPLED, false);
	tfn_leaf(1);
	trace_req_end(SD_RES_SUCCESS);
	begin(0x2222, 0, false);
	tfn_leaf(1);
	trace_req_end(SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ev = tt_read(SD_TRACE_FMT_EVENTS);
	ck_assert_int_eq(tt_count(ev, " 1111 tfn_leaf"), 1);
	ck_assert_int_eq(tt_count(ev, "2222"), 0);
	free(ev);
}
END_TEST

START_TEST(test_slower)
{
	const char *pats[] = { "tfn_*", "slower=20000000", NULL }; /* 20 ms */
	struct sd_trace_status st;
	uint16_t flags;
	uint64_t fast, slow;
	char *ev, needle[64];

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	fast = trace_req_new(false, 0, &flags);
	ck_assert_uint_eq(flags, SD_REQ_TRACE_SAMPLED);
	begin(fast, flags, true);
	tfn_top(1);
	trace_req_end(SD_RES_SUCCESS);
	slow = trace_req_new(false, 0, &flags);
	begin(slow, flags, true);
	tfn_top(1);
	usleep(30 * 1000);
	tfn_leaf(1);
	trace_req_end(SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ev = tt_read(SD_TRACE_FMT_EVENTS);
	/* the fast one's records were given back: its slots hold the slow one's */
	snprintf(needle, sizeof(needle), "%llx", (unsigned long long)fast);
	ck_assert_int_eq(tt_count(ev, needle), 0);
	snprintf(needle, sizeof(needle), " %llx tfn_", (unsigned long long)slow);
	ck_assert_int_eq(tt_count(ev, needle), 5);
	ck_assert_int_eq(lines(ev, "Q ", ""), 1);
	ck_assert_int_eq(lines(ev, "D ", ""), 1);
	/* 4 + 2 marker slots and the slow one's 10 records */
	ck_assert_uint_eq(st.nr_events, 16);
	free(ev);
}
END_TEST

/* the markers need no other tracer, and go only to graph's ring */
START_TEST(test_no_graph)
{
	const char *pats[] = { "tfn_*", NULL };
	char *csv;

	begin(0x3333, 0, true); /* tracing off: nothing */
	tfn_leaf(1);
	trace_req_end(SD_RES_SUCCESS);
	ck_assert_int_eq(tt_start("function", pats, 0, 0), SD_RES_SUCCESS);
	begin(0x4444, 0, true);
	tfn_leaf(1);
	trace_req_end(SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_FUNCTION);
	ck_assert_int_eq(tt_count(csv, ",tfn_leaf,"), 1);
	ck_assert_int_eq(lines(csv, "", ""), 2);
	free(csv);
}
END_TEST

START_TEST(test_limits)
{
	const char *gpu[] = { "tfn_*", "thread=gpu", NULL },
		   *main_[] = { "tfn_*", "thread=main", NULL };
	const char *prof[] = { "profile", NULL };
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char buf[64] = "\0tfn_*";

	ck_assert_int_eq(tt_start("", gpu, 0, 0), SD_RES_TRACE_NO_THREAD);
	ck_assert_int_eq(tt_start("", main_, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	/* the request mode is graph's */
	ck_assert_int_eq(tt_start("profile", (const char *const[]){ "sample=2", NULL }, 0, 0),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_start("", (const char *const[]){ "sample=0", NULL }, 0, 0),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_start("", (const char *const[]){ "vdi=x", NULL }, 0, 0),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(tt_start("", (const char *const[]){ "slower=", NULL }, 0, 0),
			 SD_RES_INVALID_PARMS);
	/* the total: refused with the figures */
	trace_max_total = 256 << 10;
	req.flags = SD_FLAG_CMD_WRITE;
	req.trace.buffer_size = 1 << 20;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_START, &req, buf, 7, &rsp), SD_RES_TRACE_TOO_BIG);
	ck_assert_uint_ge(rsp.trace.generation, 1);
	ck_assert_uint_ge(rsp.trace.total_length, rsp.trace.generation << 20);
	/* a stopped tracer's rings go for a start that needs their room */
	trace_max_total = TRACE_MAX_TOTAL;
	ck_assert_int_eq(tt_start(prof[0], NULL, 0, 0), SD_RES_SUCCESS);
	tfn_top(1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_uint_gt(tbuf_held(TRACER_PROFILE), 0);
	trace_max_total =
	    TRACE_DEFAULT_BUFFER + sizeof(struct tbuf) + tbuf_held(TRACER_PROFILE) / 2;
	req.trace.buffer_size = 0;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_START, &req, buf, 7, &rsp), SD_RES_SUCCESS);
	ck_assert_uint_eq(tbuf_held(TRACER_PROFILE), 0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	trace_max_total = TRACE_MAX_TOTAL;
}
END_TEST

/* two renderings read at once, in small chunks; a third ends the oldest */
START_TEST(test_renderings)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char a[64], b[64], c[64], *whole;
	uint64_t ga, gb;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	for (int i = 0; i < 50; i++)
		tfn_top(i);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	whole = tt_read(SD_TRACE_FMT_CSV);
	req.trace.format = SD_TRACE_FMT_CSV;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, a, sizeof(a), &rsp), SD_RES_SUCCESS);
	ga = rsp.trace.generation;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, b, sizeof(b), &rsp), SD_RES_SUCCESS);
	gb = rsp.trace.generation;
	ck_assert_uint_ne(ga, gb);
	ck_assert(!memcmp(a, whole, sizeof(a)) && !memcmp(b, whole, sizeof(b)));
	req.trace.offset = sizeof(a);
	req.trace.buffer_size = ga;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, a, sizeof(a), &rsp), SD_RES_SUCCESS);
	ck_assert(!memcmp(a, whole + sizeof(a), sizeof(a)));
	/* a reader skips forward, never back */
	req.trace.offset = 4 * sizeof(a);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, a, sizeof(a), &rsp), SD_RES_SUCCESS);
	ck_assert(!memcmp(a, whole + 4 * sizeof(a), sizeof(a)));
	req.trace.offset = sizeof(a);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, a, sizeof(a), &rsp), SD_RES_INVALID_PARMS);
	/* a third rendering: the oldest (ga) ends, gb goes on */
	req.trace.offset = 0;
	req.trace.buffer_size = 0;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, c, sizeof(c), &rsp), SD_RES_SUCCESS);
	req.trace.offset = 5 * sizeof(a);
	req.trace.buffer_size = ga;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, a, sizeof(a), &rsp), SD_RES_INVALID_PARMS);
	req.trace.offset = sizeof(b);
	req.trace.buffer_size = gb;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, b, sizeof(b), &rsp), SD_RES_SUCCESS);
	ck_assert(!memcmp(b, whole + sizeof(b), sizeof(b)));
	/* a start ends them all */
	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	req.trace.offset = 2 * sizeof(b);
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, b, sizeof(b), &rsp), SD_RES_INVALID_PARMS);
	free(whole);
}
END_TEST

static Suite *req_suite(void)
{
	Suite *s = suite_create("trace requests");
	TCase *tc = tcase_create("requests");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_markers);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_sample);
	tcase_add_test(tc, test_vdi);
	tcase_add_test(tc, test_replica);
	tcase_add_test(tc, test_slower);
	tcase_add_test(tc, test_no_graph);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_renderings);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tt_run_suite(req_suite());
}
