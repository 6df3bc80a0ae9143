/*
 * Unit tests of the profile and function tracers and of several tracers at
 * once: the profile against the graph on the same deterministic calls
 * (equal counts, total = the sum of the graph's durations, self <= total,
 * the selves of a call tree adding up to its root's total), histogram
 * buckets that add up to the calls, tracers on separate sites and on the
 * same ones, one stopped while another runs, the function tracer's callers
 * and the call it patches, and the loop and thread checkers. No timing is
 * asserted but the loop checker's 30 ms handler against its 10 ms
 * threshold.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "event.h"
#include "logger.h"
#include "trace/trace.h"
#include "trace/trace_priv.h"
#include "trace_test.h"

struct prof_line {
	char name[64];
	uint64_t calls, total, self, min, max;
	uint64_t hist[SD_TRACE_PROF_BUCKETS];
};

/* the profile's line of @fn; false if it has none */
static bool prof_get(const char *fn, struct prof_line *p)
{
	char *text = tt_read(SD_TRACE_FMT_PROFILE), *line, *save = NULL;
	bool found = false;

	ck_assert_ptr_nonnull(text);
	for (line = strtok_r(text, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		int off = 0, n;

		memset(p, 0, sizeof(*p));
		n = sscanf(line,
			   "%63s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 "%n",
			   p->name, &p->calls, &p->total, &p->self, &p->min, &p->max, &off);
		ck_assert_int_eq(n, 6);
		for (int k = 0; k < SD_TRACE_PROF_BUCKETS; k++) {
			int used = 0;

			ck_assert_int_eq(sscanf(line + off, " %" SCNu64 "%n", &p->hist[k], &used),
					 1);
			off += used;
		}
		found = !strcmp(p->name, fn);
	}
	free(text);
	return found;
}

static uint64_t hist_sum(const struct prof_line *p)
{
	uint64_t s = 0;

	for (int k = 0; k < SD_TRACE_PROF_BUCKETS; k++)
		s += p->hist[k];
	return s;
}

/* calls and summed durations of @fn in the graph's CSV */
static void graph_sum(const char *fn, uint64_t *calls, uint64_t *ns)
{
	char *csv = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_GRAPH);

	ck_assert_ptr_nonnull(csv);
	*calls = (uint64_t)tt_csv_sum(csv, fn, ns);
	free(csv);
}

START_TEST(test_profile_alone)
{
	const char *pats[] = { "tfn_fib", "tfn_top", "tfn_mid", "tfn_leaf", NULL };
	struct prof_line fib, top, mid, leaf;
	struct sd_trace_status st;

	ck_assert_int_eq(tt_start("profile", pats, 0, 0), SD_RES_SUCCESS);
	tfn_fib_calls = 0;
	ck_assert_int_eq(tfn_fib(15), 610);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(tfn_top(i), 2 * i + 3);
	/* a live view while the tracer runs */
	ck_assert(prof_get("tfn_fib", &fib));
	ck_assert_uint_eq(fib.calls, 1973);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	ck_assert(prof_get("tfn_fib", &fib));
	ck_assert_uint_eq(fib.calls, 1973);
	ck_assert_uint_eq(hist_sum(&fib), fib.calls);
	ck_assert_uint_le(fib.self, fib.total);
	ck_assert_uint_le(fib.min, fib.max);
	ck_assert_uint_le(fib.max, fib.total);
	ck_assert(prof_get("tfn_top", &top));
	ck_assert(prof_get("tfn_mid", &mid));
	ck_assert(prof_get("tfn_leaf", &leaf));
	ck_assert_uint_eq(top.calls, 10);
	ck_assert_uint_eq(mid.calls, 10);
	ck_assert_uint_eq(leaf.calls, 20);
	ck_assert_uint_eq(hist_sum(&leaf), 20);
	/* self is total minus the profiled children: the selves add up to the root */
	ck_assert_uint_le(top.self, top.total);
	ck_assert_uint_le(mid.self, mid.total);
	ck_assert_uint_eq(leaf.self, leaf.total);
	ck_assert_uint_le(top.self + mid.self + leaf.self, top.total + 3);
	ck_assert_uint_ge(top.self + mid.self + leaf.self + 3, top.total);
	ck_assert_uint_ge(top.total, mid.total);
	ck_assert_uint_ge(mid.total, leaf.total);
	/* no ring: nothing lost; the calls are its records */
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_str_eq(st.tracer, "profile");
	ck_assert_uint_eq(st.nr_lost, 0);
	ck_assert_uint_eq(st.nr_events, 1973 + 40);
}
END_TEST

/* profile and graph on the same calls: the dispatch path, one clock for both */
START_TEST(test_profile_vs_graph)
{
	const char *pats[] = { "tfn_fib", "tfn_top", "tfn_mid", "tfn_leaf", NULL };
	struct prof_line fib, mid;
	uint64_t calls, ns;

	ck_assert_int_eq(tt_start("profile", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_start("graph", pats, 0, 1 << 20), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_fib(12), 144);
	for (int i = 0; i < 5; i++)
		tfn_top(i);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	ck_assert(prof_get("tfn_fib", &fib));
	graph_sum("tfn_fib", &calls, &ns);
	ck_assert_uint_eq(calls, 465);
	ck_assert_uint_eq(fib.calls, calls);
	ck_assert_uint_eq(hist_sum(&fib), calls);
	/* the same ticks: equal but for rounding to ns, at most 1 ns per call */
	ck_assert_uint_le(fib.total, ns + calls);
	ck_assert_uint_ge(fib.total + calls, ns);
	ck_assert(prof_get("tfn_mid", &mid));
	graph_sum("tfn_mid", &calls, &ns);
	ck_assert_uint_eq(mid.calls, 5);
	ck_assert_uint_eq(calls, 5);
	ck_assert_uint_le(mid.total, ns + calls);
	ck_assert_uint_ge(mid.total + calls, ns);
	ck_assert_uint_le(mid.self, mid.total);
}
END_TEST

/* graph on the leaves, profile on the rest: each sees its own sites only */
START_TEST(test_separate_sites)
{
	const char *leaf[] = { "tfn_leaf", NULL };
	const char *upper[] = { "tfn_top", "tfn_mid", NULL };
	struct prof_line p;
	char *csv;

	ck_assert_int_eq(tt_start("graph", leaf, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_start("profile", upper, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_start("profile", upper, 0, 0), SD_RES_TRACE_BUSY);
	for (int i = 0; i < 3; i++)
		tfn_top(i);
	/* stop one: the other goes on */
	ck_assert_int_eq(tt_stop_tracer("profile"), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop_tracer("profile"), SD_RES_TRACE_OFF);
	ck_assert_int_eq(tt_stop_tracer("nosuch"), SD_RES_NO_TRACER);
	tfn_top(7);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_stop(), SD_RES_TRACE_BUSY);

	csv = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_GRAPH);
	ck_assert_ptr_nonnull(csv);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 8);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_mid"), 0);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 0);
	free(csv);
	ck_assert(prof_get("tfn_top", &p));
	ck_assert_uint_eq(p.calls, 3);
	ck_assert(prof_get("tfn_mid", &p));
	ck_assert_uint_eq(p.calls, 3);
	ck_assert(!prof_get("tfn_leaf", &p));
}
END_TEST

START_TEST(test_function_tracer)
{
	const char *pats[] = { "tfn_leaf", "tfn_mid", NULL };
	const struct trace_site *leaf = tt_site_of((void *)tfn_leaf);
	const uint8_t *p = (const uint8_t *)leaf->addr;
	int32_t rel;
	struct sd_trace_status st;
	char *text;

	ck_assert_int_eq(tt_start("function", pats, 0, 0), SD_RES_SUCCESS);
	/* alone at the site: a call of trace_func_tramp, no stub */
	memcpy(&rel, p + 1, sizeof(rel));
	ck_assert_uint_eq(p[0], 0xe8);
	ck_assert(p + 5 + rel == (const uint8_t *)trace_func_tramp);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(tfn_mid(i), 2 * i + 3);
	/* graph on the same site: a jump to the stub; stopped: the call again */
	ck_assert_int_eq(tt_start("graph", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_uint_eq(p[0], 0xe9);
	ck_assert_int_eq(tfn_mid(1), 5);
	ck_assert_int_eq(tt_stop_tracer("graph"), SD_RES_SUCCESS);
	ck_assert_uint_eq(p[0], 0xe8);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert(!memcmp(p, trace_nop5, 5));

	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	text = tt_read_tracer(SD_TRACE_FMT_GRAPH, SD_TRACER_FUNCTION);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(tt_count(text, "| tfn_leaf <- tfn_mid"), 10);
	ck_assert_int_eq(tt_count(text, "| tfn_mid <- "), 5);
	ck_assert_int_eq(tt_count(text, "# tracer: function"), 1);
	free(text);
	text = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_FUNCTION);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(tt_count(text, "tid,ts_ns,function,caller"), 1);
	ck_assert_int_eq(tt_count(text, ",tfn_leaf,tfn_mid"), 10);
	free(text);
	/* the graph saw only the call made while it ran */
	text = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_GRAPH);
	ck_assert_int_eq(tt_count(text, ",tfn_mid,"), 1);
	ck_assert_int_eq(tt_count(text, ",tfn_leaf,"), 2);
	free(text);
}
END_TEST

START_TEST(test_notrace_and_root)
{
	const char *skip[] = { "tfn_*", "notrace=tfn_leaf", NULL };
	const char *root[] = { "tfn_*", "graph-function=tfn_mid", NULL };
	const char *bad[] = { "graph-function=tfn_mid", NULL };
	char *csv;

	ck_assert_int_eq(tt_start("graph", skip, 0, 0), SD_RES_SUCCESS);
	ck_assert(tt_site_is_nop(tt_site_of((void *)tfn_leaf)));
	ck_assert(!tt_site_is_nop(tt_site_of((void *)tfn_mid)));
	tfn_top(1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 0);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_mid"), 1);
	free(csv);

	ck_assert_int_eq(tt_start("graph", root, 0, 0), SD_RES_SUCCESS);
	tfn_top(1);
	tfn_leaf(1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 0);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_mid"), 1);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 2);
	free(csv);
	/* graph options on another tracer */
	ck_assert_int_eq(tt_start("profile", bad, 0, 0), SD_RES_INVALID_PARMS);
}
END_TEST

/*
 * The loop checker on the real event loop (lib/event.c): of two handlers
 * dispatched by ev_loop_once, the one that sleeps 30 ms is recorded and,
 * at the next handler's entry, logged once; whatever is recorded took at
 * least the threshold.
 */
START_TEST(test_loop_checker)
{
	const char *pats[] = { "tfn_handler_*", "threshold=10000000", NULL };
	char logpath[] = "/tmp/test_trace_loop.XXXXXX", line[256], *csv;
	int slow[2], fast[2], fd, warnings = 0;
	struct sd_trace_status st;
	FILE *log;

	fd = mkstemp(logpath);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(sd_log_init(logpath, SDOG_INFO, "test"), 0);
	ck_assert_int_eq(ev_init(16), 0);
	ck_assert_int_eq(pipe(slow), 0);
	ck_assert_int_eq(pipe(fast), 0);
	ck_assert_int_eq(ev_add(slow[0], EPOLLIN, tfn_handler_slow, NULL), 0);
	ck_assert_int_eq(ev_add(fast[0], EPOLLIN, tfn_handler_fast, NULL), 0);

	ck_assert_int_eq(tt_start("loop", pats, 0, 0), SD_RES_SUCCESS);
	/* a handler called from elsewhere is no handler */
	tfn_handler_slow(-1, 0, NULL);
	ck_assert_int_eq(write(slow[1], "s", 1), 1);
	ck_assert_int_eq(write(fast[1], "f", 1), 1);
	/* both in one round, or the slow one first: two rounds at most */
	ck_assert_int_eq(ev_loop_once(100), 0);
	ck_assert_int_eq(ev_loop_once(0), 0);
	/* the next handler's entry logs what the last rounds found */
	ck_assert_int_eq(write(fast[1], "f", 1), 1);
	ck_assert_int_eq(ev_loop_once(100), 0);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_str_eq(st.tracer, "loop");
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_ptr_nonnull(csv);
	ck_assert_int_eq(tt_count(csv, ",tfn_handler_slow,"), 1);
	/*
	 * The quick handler is recorded only if the machine held it up past
	 * the threshold: every call recorded took at least that long.
	 */
	ck_assert_uint_eq(st.nr_events, (uint64_t)tt_count(csv, ",tfn_handler_"));
	for (char *save = NULL, *l = strtok_r(csv, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		unsigned long long dur;
		const char *c = strrchr(l, ',');

		if (!strstr(l, ",tfn_handler_"))
			continue;
		ck_assert(c && sscanf(c + 1, "%llu", &dur) == 1);
		ck_assert_uint_ge(dur, 10000000);
	}
	free(csv);

	sd_log_close();
	log = fopen(logpath, "r");
	ck_assert_ptr_nonnull(log);
	warnings = 0;
	while (fgets(line, sizeof(line), log))
		warnings += !!strstr(line, "loop: handler tfn_handler_slow held the main thread");
	fclose(log);
	unlink(logpath);
	ck_assert_int_eq(warnings, 1);
}
END_TEST

static void *call_leaf(void *arg)
{
	*(int *)arg = tfn_leaf(*(int *)arg);
	return NULL;
}

/*
 * The thread checker: tfn_leaf marked main-only runs on a new thread and
 * tfn_mid marked worker-only on the main one (the test's process: Check
 * forks it, its thread is the main one): two reports, with their callers;
 * the calls that keep to their marks make none.
 */
START_TEST(test_thread_checker)
{
	const char *pats[] = { "main=tfn_leaf", "worker=tfn_mid", NULL };
	pthread_t th;
	int v = 1;
	char *text;

	ck_assert_int_eq(tt_start("thread", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(pthread_create(&th, NULL, call_leaf, &v), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(v, 2);
	ck_assert_int_eq(tfn_mid(1), 5); /* on main: worker-only broken; its leaves are fine */
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	text = tt_read_tracer(SD_TRACE_FMT_CSV, SD_TRACER_THREAD);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(tt_count(text, ",tfn_leaf,call_leaf"), 1);
	ck_assert_int_eq(tt_count(text, ",tfn_mid,"), 1);
	ck_assert_int_eq(tt_count(text, ",tfn_leaf,tfn_mid"), 0);
	free(text);
	/* marks belong to the thread checker only */
	ck_assert_int_eq(tt_start("graph", pats, 0, 0), SD_RES_INVALID_PARMS);
}
END_TEST

/* a call the hot path counts wrong, for the message */
static uint64_t bucket_bad_d;

/*
 * Whether a call of @d ticks, counted alone in an entry, lands in its one
 * bucket with its total, min and max. No assertion here: Check reports
 * each passing one to its parent, too slow for a million of them.
 */
static bool bucket_ok(uint64_t d)
{
	struct trace_prof_ent t;
	unsigned want = trace_prof_bucket_ref(d);
	bool ok;

	memset(&t, 0, sizeof(t));
	t.min = UINT64_MAX;
	trace_prof_add(&t, d);
	ok = t.total == d && t.max == d && trace_prof_min(&t) == (d != UINT64_MAX ? d : 0);
	for (unsigned k = 0; k < TRACE_PROF_BUCKETS; k++)
		ok = ok && trace_prof_hist(&t, k) == (k == want);
	if (!ok)
		bucket_bad_d = d;
	return ok;
}

/*
 * The hot path's bucket (the leading zeros of the call's ns << 32, by one
 * multiply; past 2^32 ns by the definition) equals the definition (log2
 * of the ns, the multiply's 128 bits) at every octave's edges, around
 * every bucket boundary and at random, for TSCs from 0.3 to 10 ns per tick
 * and for any duration (a clock that went backwards included).
 */
START_TEST(test_bucket)
{
	const uint64_t mults[] = { 1288490189ULL /* 0.3 */,  1ULL << 32,
				   10737418240ULL /* 2.5 */, 42949672960ULL /* 10 */,
				   1717986919ULL /* 0.4 */,  trace_clk_mult };
	uint64_t saved = trace_clk_mult, x = 88172645463325252ULL;
	struct trace_prof_ent t;

	for (size_t m = 0; m < sizeof(mults) / sizeof(mults[0]); m++) {
		unsigned nbad = 0;

		trace_clk_mult = mults[m];
		nbad += !bucket_ok(0);
		nbad += !bucket_ok(UINT64_MAX);
		for (unsigned j = 0; j < 64; j++) {
			uint64_t p = 1ULL << j;
			const uint64_t ds[] = { p - 1, p, p + 1, 2 * p - 1 };

			for (int i = 0; i < 4; i++)
				nbad += !bucket_ok(ds[i]);
		}
		/* the first tick count of each bucket, and its neighbours */
		for (unsigned k = 1; k < TRACE_PROF_BUCKETS; k++) {
			unsigned __int128 f =
			    (((unsigned __int128)1 << (32 + k)) + trace_clk_mult - 1) /
			    trace_clk_mult;

			/* (coarse ticks may step over a bucket) */
			ck_assert_uint_ge(trace_prof_bucket_ref((uint64_t)f), k);
			ck_assert_uint_lt(trace_prof_bucket_ref((uint64_t)f - 1), k);
			nbad += !bucket_ok((uint64_t)f - 1);
			nbad += !bucket_ok((uint64_t)f);
			nbad += !bucket_ok((uint64_t)f + 1);
		}
		for (int i = 0; i < 100000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			nbad += !bucket_ok(x >> (x & 63)); /* every magnitude */
		}
		ck_assert_msg(!nbad, "%u calls counted wrong at mult %" PRIu64 ", e.g. %" PRIu64 " ticks",
			      nbad, trace_clk_mult, bucket_bad_d);
	}
	trace_clk_mult = saved;
	/* a CPU without lzcnt answers 63 - lz (bsr's encoding): the reader maps it */
	memset(&t, 0, sizeof(t));
	t.by_lz[63 - 20] = 1; /* lz 20: bucket 11 */
	trace_prof_lz_is_bsr = true;
	ck_assert_uint_eq(trace_prof_hist(&t, 11), 1);
	ck_assert_uint_eq(trace_prof_hist(&t, 0), 0);
	trace_prof_lz_is_bsr = false;
	ck_assert_uint_eq(trace_prof_hist(&t, 11), 0);
	ck_assert_uint_eq(trace_prof_hist(&t, 0), 1); /* lz 43 */
	trace_prof_lz_init();
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("trace profile");
	TCase *tc = tcase_create("profile");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_profile_alone);
	tcase_add_test(tc, test_profile_vs_graph);
	tcase_add_test(tc, test_separate_sites);
	tcase_add_test(tc, test_function_tracer);
	tcase_add_test(tc, test_notrace_and_root);
	tcase_add_test(tc, test_loop_checker);
	tcase_add_test(tc, test_thread_checker);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tt_run_suite(profile_suite());
}
