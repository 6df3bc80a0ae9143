/*
 * Unit tests of the graph tracer: nesting and exact call counts, register
 * and return value preservation, the shadow stack (depth limit, longjmp,
 * stopping inside a traced function), ring buffer wrap and lost counts,
 * threads patched and unpatched repeatedly while they run, traced signal
 * handlers interrupting the hooks, and the output formats. No timing is
 * asserted.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "trace/trace.h"
#include "trace/trace_priv.h"
#include "trace_test.h"

static const char *const tfn_all[] = { "tfn_*", NULL };

START_TEST(test_nesting)
{
	char *graph, *csv;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_top(1), 5);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_ptr_nonnull(csv);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 1);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_mid"), 1);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 2);
	ck_assert_int_eq(tt_count(csv, ",0,tfn_top,"), 1);
	ck_assert_int_eq(tt_count(csv, ",1,tfn_mid,"), 1);
	ck_assert_int_eq(tt_count(csv, ",2,tfn_leaf,"), 2);

	graph = tt_read(SD_TRACE_FMT_GRAPH);
	ck_assert_ptr_nonnull(graph);
	ck_assert_int_eq(tt_count(graph, "| tfn_top() {"), 1);
	ck_assert_int_eq(tt_count(graph, "|   tfn_mid() {"), 1);
	ck_assert_int_eq(tt_count(graph, "|     tfn_leaf();"), 2);
	ck_assert_int_eq(tt_count(graph, "|   } /* tfn_mid */"), 1);
	ck_assert_int_eq(tt_count(graph, "| } /* tfn_top */"), 1);
	ck_assert_int_eq(tt_count(graph, " us | "), 4);
	ck_assert_int_eq(tt_count(graph, "Time(us)"), 1);
	ck_assert_int_eq(tt_count(graph, "Function Graph"), 1);
	free(csv);
	free(graph);
}
END_TEST

START_TEST(test_fib_counts)
{
	const char *pats[] = { "tfn_fib", NULL };
	struct sd_trace_status st;
	char *csv;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	tfn_fib_calls = 0;
	ck_assert_int_eq(tfn_fib(15), 610);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_fib_calls, 1973);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_events, 2 * 1973);
	ck_assert_uint_eq(st.nr_lost, 0);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_fib"), 1973);
	ck_assert_int_eq(tt_count(csv, ",14,tfn_fib,"), 2); /* fib(1) and fib(0) */
	ck_assert_int_eq(tt_count(csv, ",15,tfn_fib,"), 0);
	free(csv);
}
END_TEST

START_TEST(test_registers)
{
	struct tfn_pair p;
	struct tfn_big b;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	ck_assert(tfn_fp(1.5, 2.0, 0.25f, 3) == 6.25);
	ck_assert(tfn_ld(1.0L, 4.0L) == 0.25L);
	p = tfn_pair(2, 3);
	ck_assert_int_eq(p.a, 6);
	ck_assert_int_eq(p.b, 15);
	b = tfn_big(10);
	ck_assert_int_eq(b.v[0], 10);
	ck_assert_int_eq(b.v[5], 15);
	ck_assert_int_eq(tfn_many(1, 2, 3, 4, 5, 6, 7, 8), 204);
	ck_assert_int_eq(tfn_varargs(3, 1.0, 2.0, 4.0), 7);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

/* one call site of tfn_real_return, so one real return address */
static __attribute__((noinline)) void *real_return_of_call(void **raw)
{
	void *r = tfn_real_return(raw);

	__asm__ volatile("" ::: "memory");
	return r;
}

START_TEST(test_real_return)
{
	const char *pats[] = { "tfn_real_return", NULL };
	void *raw_off, *raw_on, *real_off, *real_on;

	real_off = real_return_of_call(&raw_off);
	ck_assert_ptr_eq(real_off, raw_off); /* not traced: the slot holds it */
	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	real_on = real_return_of_call(&raw_on);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	/* traced: the slot holds the stub's return, the shadow stack the real one */
	ck_assert_ptr_eq(raw_on, (void *)((uintptr_t)tfn_real_return - TRACE_STUB_SIZE +
					  TRACE_STUB_BODY_RET));
	ck_assert_ptr_eq(real_on, real_off);
}
END_TEST

START_TEST(test_shadow_stack)
{
	const char *pats[] = { "tfn_*", NULL };
	struct sd_trace_status st;
	char *csv;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	ck_assert_uint_eq(tfn_depth_inside(), 1);
	/* swapped for its stub's (entry.S), which goes to trace_return_tramp */
	ck_assert_ptr_eq(tfn_return_address(), (void *)((uintptr_t)tfn_return_address -
							TRACE_STUB_SIZE + TRACE_STUB_BODY_RET));
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	/* deeper than the shadow stack: the rest is not traced, counted as lost */
	tfn_deep_max = 0;
	ck_assert_int_eq(tfn_deep(200), 200);
	ck_assert_uint_eq(tfn_deep_max, TRACE_MAX_DEPTH);
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_lost, 201 - TRACE_MAX_DEPTH);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_deep"), TRACE_MAX_DEPTH);
	free(csv);

	/* a depth limit from START */
	ck_assert_int_eq(tt_start("", pats, 4, 0), SD_RES_SUCCESS);
	tfn_deep_max = 0;
	ck_assert_int_eq(tfn_deep(10), 10);
	ck_assert_uint_eq(tfn_deep_max, 4);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.depth, 4);
}
END_TEST

START_TEST(test_longjmp)
{
	char *csv;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(tfn_jmp_outer(3), 5);
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	ck_assert_int_eq(tfn_top(1), 5);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_jmp_outer"), 10);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 1);
	free(csv);
}
END_TEST

static void stop_inside(void *arg)
{
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	if (arg)
		ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
}

START_TEST(test_stop_inside)
{
	char *graph, *csv;

	/* stopped while inside: tfn_call still returns through the trampoline */
	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	tfn_call(stop_inside, NULL);
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_call"), 1);
	free(csv);

	/* a new session starts inside: its exit has no entry there, skipped */
	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	tfn_call(stop_inside, (void *)1);
	ck_assert_int_eq(tfn_top(1), 5);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	graph = tt_read(SD_TRACE_FMT_GRAPH);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_call"), 0);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 1);
	ck_assert_int_eq(tt_count(graph, "tfn_call"), 0);
	free(csv);
	free(graph);
}
END_TEST

START_TEST(test_ring_wrap)
{
	const char *pats[] = { "tfn_leaf", NULL };
	struct sd_trace_status st;
	char *csv;

	ck_assert_int_eq(tt_start("", pats, 0, 4096), SD_RES_SUCCESS);
	for (int i = 0; i < 1000; i++)
		tfn_leaf(i);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.buffer_size, 4096);
	ck_assert_uint_eq(st.nr_events, 2000);
	ck_assert_uint_eq(st.nr_lost, 2000 - 4096 / 16);
	ck_assert_uint_eq(st.nr_threads, 1);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 4096 / 16 / 2);
	free(csv);
	/* a new session forgets the old records */
	ck_assert_int_eq(tt_start("", pats, 0, 8192), SD_RES_SUCCESS);
	tfn_leaf(1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_events, 2);
	ck_assert_uint_eq(st.nr_lost, 0);
}
END_TEST

#define NR_WORKERS 4

static volatile int workers_go;
static long worker_errors;

static void *worker(void *arg)
{
	while (__atomic_load_n(&workers_go, __ATOMIC_ACQUIRE)) {
		if (tfn_fib(12) != 144 || tfn_top(3) != 9)
			__atomic_add_fetch(&worker_errors, 1, __ATOMIC_RELAXED);
		if (tfn_jmp_outer(2) != 4)
			__atomic_add_fetch(&worker_errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t t[NR_WORKERS];
	struct sd_trace_status st;
	int max_threads = 0;

	workers_go = 1;
	for (int i = 0; i < NR_WORKERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker, NULL), 0);
	for (int round = 0; round < 30; round++) {
		ck_assert_int_eq(tt_start("", round % 2 ? tfn_all : NULL, 0, 65536),
				 SD_RES_SUCCESS);
		usleep(2000);
		ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
		ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
		if ((int)st.nr_threads > max_threads)
			max_threads = (int)st.nr_threads;
		if (round % 10 == 0) {
			char *g = tt_read(SD_TRACE_FMT_GRAPH);

			ck_assert_ptr_nonnull(g);
			free(g);
		}
	}
	__atomic_store_n(&workers_go, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NR_WORKERS; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(worker_errors, 0);
	ck_assert_int_ge(max_threads, 2);
	ck_assert_int_eq(trace_has_wx_mapping(), false);
}
END_TEST

static void *short_lived(void *arg)
{
	*(long *)arg = syscall(SYS_gettid);
	tfn_top(1);
	return NULL;
}

START_TEST(test_thread_exit)
{
	long tid = 0;
	char needle[32], *csv;
	pthread_t t;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(pthread_create(&t, NULL, short_lived, &tid), 0);
	pthread_join(t, NULL);
	usleep(10000);
	csv = tt_read(SD_TRACE_FMT_CSV);
	snprintf(needle, sizeof(needle), "%ld,0,tfn_top,", tid);
	ck_assert_int_eq(tt_count(csv, needle), 1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	free(csv);
}
END_TEST

static volatile int idle_go, idle_phase;

/* traces one call, idles while its buffer goes stale and is freed, traces again */
static void *idle_tracer(void *arg)
{
	tfn_leaf(1);
	__atomic_store_n(&idle_phase, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&idle_go, __ATOMIC_ACQUIRE))
		usleep(1000);
	tfn_leaf(2);
	__atomic_store_n(&idle_phase, 2, __ATOMIC_RELEASE);
	return NULL;
}

static void *one_leaf(void *arg)
{
	tfn_leaf(3);
	return NULL;
}

static void wait_phase(int phase)
{
	while (__atomic_load_n(&idle_phase, __ATOMIC_ACQUIRE) != phase)
		usleep(1000);
}

/* the ring pages counted in the total, and the buffers on the list */
static void mem(uint64_t *bytes, uint32_t *nr)
{
	tbuf_memory(bytes, nr);
}

/*
 * Buffers of a tracer's older sessions are reused when they fit the new
 * one as they are and freed when they do not (other sizes, grown rings),
 * even one that a live idle thread still pointed to; a thread past the
 * total is not traced and the status says so.
 */
START_TEST(test_buffer_reclaim)
{
	static const char *const leaf[] = { "tfn_leaf", NULL };
	const uint64_t ring64 = sizeof(struct tbuf) + (64 << 10);
	const uint64_t ring256 = sizeof(struct tbuf) + (256 << 10);
	const uint64_t ring1m = sizeof(struct tbuf) + TRACE_DEFAULT_BUFFER;
	struct sd_trace_status st;
	uint64_t bytes0, bytes;
	uint32_t nr0, nr;
	pthread_t t, t2[2];
	char *csv;

	mem(&bytes0, &nr0);
	ck_assert_int_eq(tt_start("", leaf, 0, 64 << 10), SD_RES_SUCCESS);
	tfn_leaf(0);
	ck_assert_int_eq(pthread_create(&t, NULL, idle_tracer, NULL), 0);
	wait_phase(1);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0 + 2);
	ck_assert_uint_eq(bytes, bytes0 + 2 * ring64);

	/* the same size again: reused, nothing freed or allocated */
	ck_assert_int_eq(tt_start("", leaf, 0, 64 << 10), SD_RES_SUCCESS);
	tfn_leaf(0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0 + 2);
	ck_assert_uint_eq(bytes, bytes0 + 2 * ring64);

	/* another size: both freed at the start, the idle thread's too */
	ck_assert_int_eq(tt_start("", leaf, 0, 256 << 10), SD_RES_SUCCESS);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0);
	ck_assert_uint_eq(bytes, bytes0);
	tfn_leaf(0);
	__atomic_store_n(&idle_go, 1, __ATOMIC_RELEASE);
	wait_phase(2);
	pthread_join(t, NULL);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0 + 2);
	ck_assert_uint_eq(bytes, bytes0 + 2 * ring256);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 2);
	free(csv);

	/* a default ring that grew: freed at the next start */
	ck_assert_int_eq(tt_start("", leaf, 0, 0), SD_RES_SUCCESS);
	for (int i = 0; i < 40000; i++)
		tfn_leaf(i);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0 + 1);
	ck_assert_uint_eq(bytes, bytes0 + ring1m + TRACE_DEFAULT_BUFFER);
	ck_assert_int_eq(tt_start("", leaf, 0, 0), SD_RES_SUCCESS);
	tfn_leaf(0);
	mem(&bytes, &nr);
	ck_assert_uint_eq(nr, nr0 + 1);
	ck_assert_uint_eq(bytes, bytes0 + ring1m);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	/* room for two 64 KiB rings: of three threads, one goes untraced, said so */
	trace_max_total = bytes0 + 2 * ring64;
	ck_assert_int_eq(tt_start("", leaf, 0, 64 << 10), SD_RES_SUCCESS);
	tfn_leaf(0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_create(&t2[i], NULL, one_leaf, NULL), 0);
		pthread_join(t2[i], NULL);
	}
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_threads, 2);
	ck_assert_uint_eq(st.nr_untraced, 1);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 2);
	free(csv);
	/* the count is the session's: a new start clears it */
	trace_max_total = TRACE_MAX_TOTAL;
	ck_assert_int_eq(tt_start("", leaf, 0, 64 << 10), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_untraced, 0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_formats)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char *folded, *chrome, *graph, chunk[100];
	uint64_t gen;
	size_t len = 0;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	tfn_top(1);
	tfn_top(2);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	folded = tt_read(SD_TRACE_FMT_FOLDED);
	ck_assert_int_eq(tt_count(folded, "tfn_top;tfn_mid;tfn_leaf "), 1);
	ck_assert_int_eq(tt_count(folded, "tfn_top;tfn_mid "), 1);
	ck_assert_int_eq(tt_count(folded, "tfn_top "), 1);
	chrome = tt_read(SD_TRACE_FMT_CHROME);
	ck_assert(!strncmp(chrome, "{\"traceEvents\":[", 16));
	ck_assert_int_eq(tt_count(chrome, "\"ph\":\"X\""), 8);
	ck_assert_int_eq(tt_count(chrome, "\"name\":\"tfn_leaf\""), 4);
	ck_assert_int_eq(tt_count(chrome, "thread_name"), 1);
	ck_assert_ptr_nonnull(strstr(chrome, "\"displayTimeUnit\":\"ns\"}"));

	/*
	 * Chunks of one rendering put together are the rendering: its size
	 * is unknown (UINT64_MAX) until the chunk that ends it, which says it;
	 * then the rendering is gone (a read on asks for a new one).
	 */
	graph = tt_read(SD_TRACE_FMT_GRAPH);
	req.trace.format = SD_TRACE_FMT_GRAPH;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, chunk, sizeof(chunk), &rsp),
			 SD_RES_SUCCESS);
	ck_assert_uint_eq(rsp.trace.total_length, UINT64_MAX);
	gen = rsp.trace.generation;
	for (;;) {
		ck_assert(!memcmp(graph + len, chunk, rsp.data_length));
		len += rsp.data_length;
		if (rsp.trace.total_length != UINT64_MAX)
			break;
		ck_assert_uint_eq(rsp.data_length, sizeof(chunk));
		req.trace.offset = len;
		req.trace.buffer_size = gen; /* the rendering read on */
		ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, chunk, sizeof(chunk), &rsp),
				 SD_RES_SUCCESS);
		ck_assert_uint_eq(rsp.trace.generation, gen);
	}
	ck_assert_uint_eq(rsp.trace.total_length, strlen(graph));
	ck_assert_uint_eq(len, strlen(graph));
	req.trace.offset = len;
	ck_assert_int_eq(tt_op(SD_OP_TRACE_READ, &req, chunk, sizeof(chunk), &rsp),
			 SD_RES_INVALID_PARMS);
	free(folded);
	free(chrome);
	free(graph);
}
END_TEST

START_TEST(test_read_while_tracing)
{
	char *csv;

	ck_assert_int_eq(tt_start("", tfn_all, 0, 0), SD_RES_SUCCESS);
	tfn_top(1);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 1);
	free(csv);
	tfn_top(1);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_top"), 2);
	free(csv);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
}
END_TEST

static volatile long sig_calls, sig_errors;
static volatile int sig_go, sig_round;
static long sig_sent;

/*
 * test_signals runs SIG_ROUNDS rounds of tfn_fib(15) (1973 calls each) and
 * sends SIG_PER_ROUND signals at most for each round started, SIG_MAX in
 * all, so the records it can produce are bounded whatever the machine's
 * speed: two per call, and a handler adds 4 calls (tfn_top, tfn_mid, 2
 * tfn_leaf) at most. The buffer is sized from that bound with half as much
 * again to spare, so no record may be lost.
 */
#define SIG_ROUNDS 300
#define SIG_PER_ROUND 64
#define SIG_MAX (SIG_ROUNDS * SIG_PER_ROUND)
#define SIG_FIB_CALLS 1973
#define SIG_RECORDS (2 * ((uint64_t)SIG_ROUNDS * SIG_FIB_CALLS + 4 * (uint64_t)SIG_MAX))

static void sig_traced(int signo)
{
	sig_calls++;
	if (tfn_top(1) != 5)
		sig_errors++;
}

/*
 * not traced: sends SIGPROF to the thread @arg as fast as it is handled,
 * but no more than SIG_PER_ROUND per round of fib started (sig_round
 * rounds are done), so that the signals land all through the run and stop
 * at SIG_MAX. Waiting a little for each one to land keeps a pending
 * SIGPROF from swallowing the next.
 */
static void *sig_sender(void *arg)
{
	pid_t pid = getpid(), tid = *(pid_t *)arg;

	while (__atomic_load_n(&sig_go, __ATOMIC_ACQUIRE) && sig_sent < SIG_MAX) {
		long budget = (__atomic_load_n(&sig_round, __ATOMIC_ACQUIRE) + 1L) * SIG_PER_ROUND;
		long seen = sig_calls;

		if (sig_sent >= budget) {
			sched_yield();
			continue;
		}
		syscall(SYS_tgkill, pid, tid, SIGPROF);
		sig_sent++;
		for (int i = 0; i < 100000 && sig_calls == seen; i++)
			__builtin_ia32_pause();
	}
	return NULL;
}

/*
 * A traced signal handler on the traced thread, landing anywhere: in the
 * traced functions, the trampolines, the middle of a push. No record may
 * be torn or lost and the shadow stack must come back to 0. A handler
 * that interrupted a hook is not traced at all (the recursion guard).
 */
START_TEST(test_signals)
{
	struct sigaction sa = { .sa_handler = sig_traced, .sa_flags = SA_RESTART }, old;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	const int rounds = SIG_ROUNDS;
	struct sd_trace_status st;
	long fib_errors = 0;
	pthread_t sender;
	int top;
	char *csv;

	ck_assert_int_eq(tt_start("", tfn_all, 0, SIG_RECORDS * sizeof(struct trace_rec) * 3 / 2),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(sigaction(SIGPROF, &sa, &old), 0);
	sig_go = 1;
	sig_round = 0;
	sig_sent = 0;
	ck_assert_int_eq(pthread_create(&sender, NULL, sig_sender, &tid), 0);
	/* on a loaded machine the sender may not run for a while: the rounds
	 * start once its first signal landed (it may send SIG_PER_ROUND
	 * before round 0, so the bounds hold) */
	for (int i = 0; i < 10000 && !sig_calls; i++)
		usleep(1000);
	ck_assert_int_gt(sig_calls, 0);
	tfn_fib_calls = 0;
	for (int i = 0; i < rounds; i++) {
		if (tfn_fib(15) != 610)
			fib_errors++;
		__atomic_store_n(&sig_round, i + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&sig_go, 0, __ATOMIC_RELEASE);
	pthread_join(sender, NULL);
	ck_assert_int_eq(sigaction(SIGPROF, &old, NULL), 0);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);

	ck_assert_int_eq(fib_errors, 0);
	ck_assert_int_eq(sig_errors, 0);
	ck_assert_int_gt(sig_calls, 0);
	ck_assert_int_le(sig_sent, SIG_MAX);
	ck_assert_int_le(sig_calls, sig_sent);
	ck_assert_uint_eq(trace_shadow_depth(), 0);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_lost, 0);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_ptr_nonnull(csv);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_fib"), rounds * SIG_FIB_CALLS);
	top = tt_csv_calls(csv, "tfn_top");
	ck_assert_int_le(top, sig_calls);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_mid"), top);
	ck_assert_int_eq(tt_csv_calls(csv, "tfn_leaf"), 2 * top);
	ck_assert_uint_eq(st.nr_events, 2 * (rounds * SIG_FIB_CALLS + 4 * (uint64_t)top));
	free(csv);
}
END_TEST

/*
 * A ring of the default size grows before it wraps (the slow path faults
 * the pages in): fib(22)'s 57313 calls need 114626 records, more than the
 * 65536 of 1 MiB, and none is lost. One of a size asked for does not grow.
 */
START_TEST(test_ring_grows)
{
	const char *pats[] = { "tfn_fib", NULL };
	struct sd_trace_status st;
	char *csv;

	ck_assert_int_eq(tt_start("", pats, 0, 0), SD_RES_SUCCESS);
	tfn_fib_calls = 0;
	ck_assert_int_eq(tfn_fib(22), 17711);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_fib_calls, 57313);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_events, 2 * 57313);
	ck_assert_uint_eq(st.nr_lost, 0);
	csv = tt_read(SD_TRACE_FMT_CSV);
	ck_assert_ptr_nonnull(csv);
	ck_assert_int_eq(tt_count(csv, ",tfn_fib,"), 57313);
	free(csv);

	ck_assert_int_eq(tt_start("", pats, 0, TRACE_DEFAULT_BUFFER), SD_RES_SUCCESS);
	ck_assert_int_eq(tfn_fib(22), 17711);
	ck_assert_int_eq(tt_stop(), SD_RES_SUCCESS);
	ck_assert_int_eq(tt_status(&st), SD_RES_SUCCESS);
	ck_assert_uint_eq(st.nr_lost, 2 * 57313 - TRACE_DEFAULT_BUFFER / 16);
}
END_TEST

static Suite *graph_suite(void)
{
	Suite *s = suite_create("trace graph");
	TCase *tc = tcase_create("graph");

	/*
	 * test_signals takes about a minute under ASan on a busy 2-core
	 * machine (signal delivery through the sanitizer's wrappers; 0.7 s
	 * without), before and after the multi-tracer core alike: 120 s
	 * timed out once under load.
	 */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_nesting);
	tcase_add_test(tc, test_fib_counts);
	tcase_add_test(tc, test_registers);
	tcase_add_test(tc, test_shadow_stack);
	tcase_add_test(tc, test_real_return);
	tcase_add_test(tc, test_longjmp);
	tcase_add_test(tc, test_stop_inside);
	tcase_add_test(tc, test_ring_wrap);
	tcase_add_test(tc, test_ring_grows);
	tcase_add_test(tc, test_formats);
	tcase_add_test(tc, test_read_while_tracing);
	tcase_add_test(tc, test_signals);
	suite_add_tcase(s, tc);
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_thread_exit);
	tcase_add_test(tc, test_buffer_reclaim);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tt_run_suite(graph_suite());
}
