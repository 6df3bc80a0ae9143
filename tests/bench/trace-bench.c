/*
 * A call-heavy program for tests/bench/trace-overhead: recursive fib and a
 * parser-like mix (tokenizer + recursive-descent evaluator over a
 * generated expression). Built with trace sites and the tracer
 * (TRACE_BENCH_SITES), plain, plain with -fno-ipa-ra (for instruction
 * counts: sites turn IPA-RA off), with -pg -mfentry for uftrace, and with
 * -finstrument-functions and a minimal clock hook (TRACE_BENCH_CLOCK).
 *
 * usage: trace-bench fib|parse N
 *        [off|graph|filter|function|profile|thresh|unsampled|sampled]
 *   prints: workload=W calls=C ns=T result=R cpu_ns=U (T: wall clock, U: the
 *   thread's CPU time, both of the timed region)
 * "filter" traces every function except the hot one of the workload;
 * "thresh" is graph with a threshold that no call reaches. "unsampled" is
 * graph's request mode (--sample) on every function while the thread
 * serves no request it chose: each call costs the sample form's test of a
 * thread-local flag; "sampled" the same mode inside a chosen request: each
 * call is recorded through the sample form.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TRACE_BENCH_SITES
#include "trace/trace.h"
#include "trace/trace_req.h"
#endif

#define NOINLINE __attribute__((noinline, noclone))

#ifdef TRACE_BENCH_CLOCK
/*
 * The floor of any tracer that timestamps both ends of every call with the
 * TSC: the compiler calls these at each entry and exit (no trampoline, no
 * return hijack, no shadow stack, no guard), and each stores one 16-byte
 * record with the TSC into a ring, as the graph tracer does. Not inlined,
 * and the ring is not static: the stores must stay.
 */
#define CLOCK_NR_RECS (1U << 16)
#define CLOCK_HOOK __attribute__((noinline, no_instrument_function))

struct {
	unsigned long long ts;
	unsigned long long word;
} bench_clock_recs[CLOCK_NR_RECS];
unsigned long long bench_clock_head;

static inline __attribute__((always_inline, no_instrument_function)) void
clock_push(void *fn, unsigned long long type)
{
	unsigned long long i = bench_clock_head++;
	unsigned lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	bench_clock_recs[i % CLOCK_NR_RECS].ts = (unsigned long long)hi << 32 | lo;
	bench_clock_recs[i % CLOCK_NR_RECS].word = (unsigned long)fn | type << 48;
}

void CLOCK_HOOK __cyg_profile_func_enter(void *fn, void *site)
{
	clock_push(fn, 1);
}

void CLOCK_HOOK __cyg_profile_func_exit(void *fn, void *site)
{
	clock_push(fn, 2);
}
#endif

static long nr_calls;

NOINLINE long bench_fib(int n)
{
	long a, b;

	if (n < 2)
		return n;
	a = bench_fib(n - 1);
	b = bench_fib(n - 2);
	__asm__ volatile("" : "+r"(a), "+r"(b));
	return a + b;
}

/* ---- the parser mix ---- */

struct lexer {
	const char *p;
	int tok; /* '0' for a number, an operator, or 0 at the end */
	long val;
};

static long parse_expr(struct lexer *lx);

NOINLINE int lex_is_digit(int c)
{
	nr_calls++;
	return c >= '0' && c <= '9';
}

NOINLINE int lex_is_space(int c)
{
	nr_calls++;
	return c == ' ';
}

NOINLINE void lex_next(struct lexer *lx)
{
	nr_calls++;
	while (lex_is_space(*lx->p))
		lx->p++;
	if (lex_is_digit(*lx->p)) {
		lx->val = 0;
		while (lex_is_digit(*lx->p))
			lx->val = lx->val * 10 + (*lx->p++ - '0');
		lx->tok = '0';
		return;
	}
	lx->tok = *lx->p ? *lx->p++ : 0;
}

NOINLINE long parse_factor(struct lexer *lx)
{
	long v;

	nr_calls++;
	if (lx->tok == '(') {
		lex_next(lx);
		v = parse_expr(lx);
		lex_next(lx); /* ')' */
		return v;
	}
	v = lx->val;
	lex_next(lx);
	return v;
}

NOINLINE long parse_term(struct lexer *lx)
{
	long v;

	nr_calls++;
	v = parse_factor(lx);
	while (lx->tok == '*') {
		lex_next(lx);
		v = (v * parse_factor(lx)) % 1000003;
	}
	return v;
}

NOINLINE long parse_expr(struct lexer *lx)
{
	long v;

	nr_calls++;
	v = parse_term(lx);
	while (lx->tok == '+' || lx->tok == '-') {
		int op = lx->tok;

		lex_next(lx);
		v = op == '+' ? v + parse_term(lx) : v - parse_term(lx);
	}
	return v;
}

/* a deterministic expression of about @len bytes */
static char *make_expr(size_t len)
{
	char *s = malloc(len + 64);
	size_t n = 0;
	unsigned seed = 1;
	int open = 0;

	if (!s)
		exit(1);
	while (n < len) {
		seed = seed * 1103515245 + 12345;
		if ((seed >> 16) % 5 == 0 && open < 8) {
			s[n++] = '(';
			open++;
		}
		n += (size_t)sprintf(s + n, "%u", (seed >> 8) % 1000);
		seed = seed * 1103515245 + 12345;
		if (open && (seed >> 16) % 4 == 0) {
			s[n++] = ')';
			open--;
		}
		s[n++] = " +-*"[1 + (seed >> 20) % 3];
		s[n++] = ' ';
	}
	s[n++] = '1';
	while (open--)
		s[n++] = ')';
	s[n] = '\0';
	return s;
}

NOINLINE long bench_parse(const char *expr, int rounds)
{
	long sum = 0;

	for (int i = 0; i < rounds; i++) {
		struct lexer lx = { expr, 0, 0 };

		lex_next(&lx);
		sum += parse_expr(&lx);
	}
	return sum;
}

static long clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static long now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* the thread's CPU time: what a loaded machine's preemptions do not inflate */
static long cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* the part that is timed, and that callgrind measures (--toggle-collect) */
NOINLINE long bench_run(int is_fib, int n, const char *expr)
{
	nr_calls = 0;
	if (is_fib)
		return bench_fib(n);
	return bench_parse(expr, n);
}

/* calls of bench_fib(n): 2 * fib(n + 1) - 1 */
static long fib_calls(int n)
{
	long a = 0, b = 1;

	for (int i = 0; i < n + 1; i++) {
		long t = a + b;

		a = b;
		b = t;
	}
	return 2 * a - 1;
}

#ifdef TRACE_BENCH_SITES
/*
 * off, graph, filter (graph on every function but the workload's hot
 * one(s)), function, profile, or thresh (graph with a threshold no call of
 * the workload reaches: the cost of timing every call and keeping none).
 */
static int start_tracing(const char *mode, int is_fib)
{
	static const char fib_filter[] = "\0lex_*\0parse_*\0bench_parse\0bench_run";
	static const char parse_filter[] = "\0bench_*\0parse_*";
	static const char thresh[] = "\0threshold=1000000000";
	static const char unsampled[] = "\0sample=1000000000";
	static const char sampled[] = "\0sample=1";
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char payload[64] = "";
	uint32_t len = 1;
	int ret;

	if (!strcmp(mode, "off"))
		return 0;
	if (!strcmp(mode, "filter")) {
		len = is_fib ? sizeof(fib_filter) : sizeof(parse_filter);
		memcpy(payload, is_fib ? fib_filter : parse_filter, len);
	} else if (!strcmp(mode, "thresh")) {
		len = sizeof(thresh);
		memcpy(payload, thresh, len);
	} else if (!strcmp(mode, "unsampled") || !strcmp(mode, "sampled")) {
		len = mode[0] == 'u' ? sizeof(unsampled) : sizeof(sampled);
		memcpy(payload, mode[0] == 'u' ? unsampled : sampled, len);
	} else if (!strcmp(mode, "function") || !strcmp(mode, "profile")) {
		len = (uint32_t)strlen(mode) + 1;
		memcpy(payload, mode, len);
	} else if (strcmp(mode, "graph")) {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	req.opcode = SD_OP_TRACE_START;
	req.flags = SD_FLAG_CMD_WRITE;
	req.data_length = len;
	req.trace.buffer_size = getenv("TB_BUF") ? atol(getenv("TB_BUF")) : 4 << 20;
	ret = trace_handle_op(&req, &rsp, payload);
	if (ret)
		fprintf(stderr, "trace start: %#x\n", ret);
	return ret;
}

/*
 * "sampled": the thread serves a request the request mode chose (one in 1)
 * while it runs; "unsampled": none, as a worker between requests
 */
static void enter_mode(const char *mode)
{
	struct trace_req r = { .opcode = SD_OP_WRITE_OBJ };

	if (strcmp(mode, "sampled"))
		return;
	r.id = trace_req_new(false, 0, &r.flags);
	trace_req_begin(&r);
}

static void leave_mode(const char *mode)
{
	if (!strcmp(mode, "sampled"))
		trace_req_end(SD_RES_SUCCESS);
}

static void stop_tracing(void)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;

	req.opcode = SD_OP_TRACE_STOP;
	trace_handle_op(&req, &rsp, NULL);
}

/*
 * TB_AB=R: the modes given after N (e.g. "graph profile"), each started,
 * run and stopped in turn (odd rounds in the reverse order), R rounds in
 * this one process; prints each mode's least CPU time of the timed region
 * and, for each mode after the first, its difference from the first per
 * call: the median over the rounds of the difference within a round (the
 * two ran back to back on the same machine state) and the quartiles of
 * those differences, its spread. Interleaved in one process, the modes see
 * the same machine: the way to compare two tracers while other work loads
 * it.
 */
#define AB_MAX_MODES 8

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int bench_ab(int rounds, int is_fib, int n, const char *expr, char **modes, int nr_modes)
{
	long best[AB_MAX_MODES], calls = 0, *t;
	double *d;

	if (nr_modes > AB_MAX_MODES)
		nr_modes = AB_MAX_MODES;
	if (rounds < 1)
		rounds = 1;
	t = calloc((size_t)rounds * AB_MAX_MODES, sizeof(*t));
	d = calloc((size_t)rounds, sizeof(*d));
	if (!t || !d)
		return 1;
	for (int m = 0; m < nr_modes; m++)
		best[m] = -1;
	for (int r = 0; r < rounds; r++) {
		/* odd rounds in the reverse order: no mode always runs first */
		for (int i = 0; i < nr_modes; i++) {
			int m = r & 1 ? nr_modes - 1 - i : i;
			long c0, c1;

			if (start_tracing(modes[m], is_fib))
				return 1;
			enter_mode(modes[m]);
			bench_run(is_fib, 0, expr);
			c0 = cpu_ns();
			bench_run(is_fib, n, expr);
			c1 = cpu_ns();
			leave_mode(modes[m]);
			calls = is_fib ? fib_calls(n) : nr_calls + 2;
			if (strcmp(modes[m], "off"))
				stop_tracing();
			t[r * AB_MAX_MODES + m] = c1 - c0;
			if (best[m] < 0 || c1 - c0 < best[m])
				best[m] = c1 - c0;
		}
	}
	for (int m = 0; m < nr_modes; m++) {
		printf("mode=%s calls=%ld cpu_ns=%ld ns_per_call=%.2f", modes[m], calls, best[m],
		       (double)best[m] / (double)calls);
		if (m) {
			for (int r = 0; r < rounds; r++)
				d[r] = (double)(t[r * AB_MAX_MODES + m] - t[r * AB_MAX_MODES]) /
				       (double)calls;
			qsort(d, (size_t)rounds, sizeof(*d), cmp_double);
			printf(" minus_%s_median=%.2f p25=%.2f p75=%.2f", modes[0], d[rounds / 2],
			       d[rounds / 4], d[(3 * rounds) / 4]);
		}
		printf("\n");
	}
	free(t);
	free(d);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	const char *mode = argc > 3 ? argv[3] : "off";
	int is_fib, n;
	char *expr = NULL;
	long t0, t1, c0, c1, calls, r;

	if (argc < 3) {
		fprintf(stderr,
			"usage: %s fib|parse N "
			"[off|graph|filter|function|profile|thresh|unsampled|sampled]\n",
			argv[0]);
		return 2;
	}
	is_fib = !strcmp(argv[1], "fib");
	n = atoi(argv[2]);
	if (!is_fib)
		expr = make_expr(4096);
#ifdef TRACE_BENCH_SITES
	if (getenv("TB_AB")) {
		if (trace_init() < 0)
			return 1;
		return bench_ab(atoi(getenv("TB_AB")), is_fib, n, expr, argv + 3, argc - 3);
	}
	if (trace_init() < 0 || start_tracing(mode, is_fib))
		return 1;
	enter_mode(mode);
#else
	if (strcmp(mode, "off")) {
		fprintf(stderr, "this build has no tracer\n");
		return 2;
	}
#endif
	/*
	 * A first traced call outside the timed region: it gets this thread's
	 * buffer (an mmap of TB_BUF bytes, populated, ~1.5 ms for 4 MiB),
	 * which is paid once per thread and session, not per call.
	 */
	bench_run(is_fib, 0, expr);
	c0 = cpu_ns();
	t0 = now_ns();
	r = bench_run(is_fib, n, expr);
	t1 = now_ns();
	c1 = cpu_ns();
#ifdef TRACE_BENCH_SITES
	leave_mode(mode);
#endif
	calls = is_fib ? fib_calls(n) : nr_calls + 2; /* + bench_run, bench_parse */
	printf("workload=%s calls=%ld ns=%ld result=%ld cpu_ns=%ld\n", argv[1], calls, t1 - t0, r,
	       c1 - c0);
	free(expr);
	return 0;
}
