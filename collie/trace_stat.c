/*
 * collie debug trace stat and hist: the profile tracer's table, as a sorted
 * table, as CSV, and one function's latency distribution in the layout of
 * bcc's funclatency. The daemon sends SD_TRACE_FMT_PROFILE lines (see
 * internal_proto.h); everything here is formatting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

#define HIST_WIDTH 40 /* stars of the fullest bucket */

struct prof_row {
	char *name;
	uint64_t calls, total, self, min, max; /* ns */
	uint64_t hist[SD_TRACE_PROF_BUCKETS];
};

struct prof {
	struct prof_row *rows;
	size_t nr;
	char *text;
};

static void prof_free(struct prof *p)
{
	free(p->rows);
	free(p->text);
}

static int parse_row(char *line, struct prof_row *r)
{
	char *save = NULL, *tok = strtok_r(line, " ", &save);
	uint64_t *f[] = { &r->calls, &r->total, &r->self, &r->min, &r->max };

	if (!tok)
		return -EINVAL;
	r->name = tok;
	for (size_t i = 0; i < ARRAY_SIZE(f) + SD_TRACE_PROF_BUCKETS; i++) {
		char *end;

		tok = strtok_r(NULL, " ", &save);
		if (!tok)
			return -EINVAL;
		*(i < ARRAY_SIZE(f) ? f[i] : &r->hist[i - ARRAY_SIZE(f)]) = strtoull(tok, &end, 10);
		if (*end)
			return -EINVAL;
	}
	return 0;
}

/* read and parse the daemon's table; EXIT_* */
static int prof_read(struct prof *p)
{
	struct trace_buf b = { NULL, 0, 0 };
	size_t cap = 0;
	char *line, *save = NULL;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = trace_read_rendering(SD_TRACE_FMT_PROFILE, SD_TRACER_PROFILE, &b);
	if (ret) {
		free(b.data);
		return ret;
	}
	p->text = realloc(b.data, b.len + 1);
	if (!p->text) {
		free(b.data);
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	p->text[b.len] = '\0';
	for (line = strtok_r(p->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (p->nr == cap) {
			struct prof_row *r =
			    realloc(p->rows, (cap = cap ? cap * 2 : 64) * sizeof(*r));

			if (!r) {
				collie_err("out of memory");
				return EXIT_SYSFAIL;
			}
			p->rows = r;
		}
		if (parse_row(line, &p->rows[p->nr])) {
			collie_err("failed to read the profile: a malformed line from the daemon");
			return EXIT_FAIL;
		}
		p->nr++;
	}
	return EXIT_OK;
}

static uint64_t avg_ns(const struct prof_row *r)
{
	return r->calls ? r->total / r->calls : 0;
}

static int sort_key;

static uint64_t key_of(const struct prof_row *r)
{
	switch (sort_key) {
	case 0:
		return r->calls;
	case 2:
		return r->self;
	case 3:
		return avg_ns(r);
	case 4:
		return r->max;
	default:
		return r->total;
	}
}

/* largest first; ties by name */
static int cmp_rows(const void *a, const void *b)
{
	const struct prof_row *x = a, *y = b;
	uint64_t kx = key_of(x), ky = key_of(y);

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int parse_sort(void)
{
	static const char *const keys[] = { "calls", "total", "self", "avg", "max" };

	sort_key = 1;
	if (!opts.sort)
		return EXIT_OK;
	for (int i = 0; i < (int)ARRAY_SIZE(keys); i++)
		if (!strcmp(opts.sort, keys[i])) {
			sort_key = i;
			return EXIT_OK;
		}
	return collie_usage_err("unknown sort key '%s' (calls, total, self, avg or max)",
				opts.sort);
}

/* "1234.567" us from ns */
static void fmt_us(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%llu.%03llu", (unsigned long long)(ns / 1000),
		 (unsigned long long)(ns % 1000));
}

int trace_stat(int argc, char **argv)
{
	struct prof p;
	size_t n;
	int ret;

	ret = parse_sort();
	if (ret)
		return ret;
	ret = prof_read(&p);
	if (ret)
		goto out_free;
	if (p.nr)
		qsort(p.rows, p.nr, sizeof(*p.rows), cmp_rows);
	n = opts.has_top && opts.top < p.nr ? opts.top : p.nr;
	if (opts.csv)
		printf("function,calls,total_us,self_us,min_us,max_us,avg_us\n");
	else
		printf("%-32s %10s %14s %14s %12s %12s %12s\n", "FUNCTION", "CALLS", "TOTAL(us)",
		       "SELF(us)", "AVG(us)", "MIN(us)", "MAX(us)");
	for (size_t i = 0; i < n; i++) {
		const struct prof_row *r = &p.rows[i];
		char total[32], self[32], avg[32], min[32], max[32];

		fmt_us(total, sizeof(total), r->total);
		fmt_us(self, sizeof(self), r->self);
		fmt_us(avg, sizeof(avg), avg_ns(r));
		fmt_us(min, sizeof(min), r->min);
		fmt_us(max, sizeof(max), r->max);
		if (opts.csv)
			printf("%s,%llu,%s,%s,%s,%s,%s\n", r->name, (unsigned long long)r->calls,
			       total, self, min, max, avg);
		else
			printf("%-32s %10llu %14s %14s %12s %12s %12s\n", r->name,
			       (unsigned long long)r->calls, total, self, avg, min, max);
	}
	if (!p.nr && !opts.csv)
		printf("(no calls profiled: start the profile tracer, e.g. "
		       "'collie debug trace start --tracer profile')\n");
	ret = fflush(stdout) ? EXIT_SYSFAIL : EXIT_OK;
out_free:
	prof_free(&p);
	return ret;
}

/* bounds of bucket @k in ns: [lo, hi] */
static void bucket_bounds(unsigned k, uint64_t *lo, uint64_t *hi)
{
	*lo = k ? 1ULL << k : 0;
	*hi = (1ULL << (k + 1)) - 1;
}

/*
 * The value below which a share @q (per mille) of the calls fall, estimated
 * from the buckets: linear inside the bucket where the count is reached.
 */
static uint64_t percentile(const struct prof_row *r, unsigned q)
{
	uint64_t want = (r->calls * q + 999) / 1000, seen = 0;

	if (!want)
		want = 1;
	for (unsigned k = 0; k < SD_TRACE_PROF_BUCKETS; k++) {
		uint64_t lo, hi;

		if (seen + r->hist[k] < want) {
			seen += r->hist[k];
			continue;
		}
		bucket_bounds(k, &lo, &hi);
		if (hi > r->max)
			hi = r->max;
		if (lo < r->min)
			lo = r->min;
		if (hi < lo)
			hi = lo;
		return lo +
		       (uint64_t)((double)(hi - lo) * (double)(want - seen) / (double)r->hist[k]);
	}
	return r->max;
}

static void print_hist(const struct prof_row *r)
{
	uint64_t top = 0;
	int first = -1, last = -1;

	for (int k = 0; k < SD_TRACE_PROF_BUCKETS; k++)
		if (r->hist[k]) {
			if (first < 0)
				first = k;
			last = k;
			if (r->hist[k] > top)
				top = r->hist[k];
		}
	printf("%24s : %-9s %-*s\n", "nsecs", "count", HIST_WIDTH + 2, "distribution");
	for (int k = first; k >= 0 && k <= last; k++) {
		uint64_t lo, hi;
		char stars[HIST_WIDTH + 1];
		size_t n = top ? (size_t)(r->hist[k] * HIST_WIDTH / top) : 0;

		bucket_bounds((unsigned)k, &lo, &hi);
		memset(stars, '*', n);
		stars[n] = '\0';
		if (k == SD_TRACE_PROF_BUCKETS - 1)
			printf("%10llu -> %-11s : %-9llu |%-*s|\n", (unsigned long long)lo, "more",
			       (unsigned long long)r->hist[k], HIST_WIDTH, stars);
		else
			printf("%10llu -> %-11llu : %-9llu |%-*s|\n", (unsigned long long)lo,
			       (unsigned long long)hi, (unsigned long long)r->hist[k], HIST_WIDTH,
			       stars);
	}
}

int trace_hist(int argc, char **argv)
{
	const struct prof_row *r = NULL;
	struct prof p;
	int ret;

	ret = prof_read(&p);
	if (ret)
		goto out_free;
	for (size_t i = 0; i < p.nr && !r; i++)
		if (!strcmp(p.rows[i].name, argv[0]))
			r = &p.rows[i];
	if (!r) {
		collie_err("no calls of '%s' in the profile (not profiled, or not called yet)",
			   argv[0]);
		ret = EXIT_FAIL;
		goto out_free;
	}
	printf("Function = %s\n", r->name);
	print_hist(r);
	printf("\ncount: %llu, average: %llu nsecs, p50: %llu, p90: %llu, p99: %llu nsecs "
	       "(estimated from the buckets)\n",
	       (unsigned long long)r->calls, (unsigned long long)avg_ns(r),
	       (unsigned long long)percentile(r, 500), (unsigned long long)percentile(r, 900),
	       (unsigned long long)percentile(r, 990));
	ret = fflush(stdout) ? EXIT_SYSFAIL : EXIT_OK;
out_free:
	prof_free(&p);
	return ret;
}
