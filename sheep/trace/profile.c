/*
 * The profile tracer: per function, calls, total time, self time (total
 * minus the time of profiled calls made inside it), min, max and a log2
 * histogram of durations, aggregated as the calls return. Each thread
 * counts into its own table, one entry per profiled site (its buffer, sized
 * by the number of sites: the memory does not grow with time); a read sums
 * the tables of every thread. The hot path adds to the thread's own table:
 * no lock, no allocation, no syscall. A read while the tracer runs sees
 * each counter whole (aligned 64-bit stores) but maybe one call counted in
 * some fields and not yet in others.
 *
 * Output: SD_TRACE_FMT_PROFILE, one line per function that was called:
 *   name calls total_ns self_ns min_ns max_ns h0 ... h39
 * (hK: calls of [2^K, 2^(K+1)) ns, the last bucket open-ended), which
 * collie sorts and prints; SD_TRACE_FMT_FOLDED, "name self_ns" lines.
 */
#pragma GCC target("general-regs-only")

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "trace_priv.h"

uint32_t *trace_prof_sites;
size_t trace_nr_prof_sites;

static inline uint64_t ticks_to_ns(uint64_t t)
{
	return (uint64_t)(((unsigned __int128)t * trace_clk_mult) >> 32);
}

/*
 * Beside other tracers: the profiled frames of a thread are chained through
 * f->parent from b->top (frames of other tracers lie between them). Alone,
 * the hooks inline trace_profile_exit and need no chain.
 */
static void profile_entry(struct tbuf *b, struct trace_frame *f, unsigned depth)
{
	struct trace_frame *top = b->top;

	/* a top at or above us was left by a longjmp: it is no parent of ours */
	f->parent = top && top < f ? top : NULL;
	b->top = f;
}

static void profile_exit(struct tbuf *b, struct trace_frame *f, unsigned depth, uint64_t now)
{
	b->top = f->parent;
	trace_profile_exit(b, f, f->parent, now);
}

static int profile_start(struct trace_config *c)
{
	/* and the scratch entry (trace_prof_len) */
	uint64_t need = (c->nr_sites + 1) * sizeof(struct trace_prof_ent);

	/* the table is the buffer: --buffer-size does not apply */
	c->buffer_size = need > TRACE_MIN_BUFFER ? need : TRACE_MIN_BUFFER;
	return 0;
}

static void profile_stop(void)
{
}

struct prof_sum {
	struct trace_prof_ent *ents; /* total, child, min and max */
	uint64_t *calls;
	uint64_t *hist; /* TRACE_PROF_BUCKETS per entry */
	size_t nr;
};

/* a thread's table into the sum, with the call the thread has pending */
static void add_table(const struct tbuf *b, void *arg)
{
	const struct trace_prof_ent *t = (const struct trace_prof_ent *)b->recs;
	struct prof_sum *sum = arg;
	size_t n = b->prof_len < sum->nr ? b->prof_len : sum->nr;
	const struct trace_prof_ent *pend = __atomic_load_n(&b->pend_ent, __ATOMIC_RELAXED);
	struct trace_prof_ent p;

	for (size_t i = 0; i < n; i++) {
		struct trace_prof_ent *s = &sum->ents[i];
		const struct trace_prof_ent *e = &t[i];
		uint64_t calls = trace_prof_calls(b, e);

		if (!calls)
			continue;
		if (pend == e) {
			/* the pending call counted in a copy */
			p = *e;
			trace_prof_add(&p, b->pend_dur);
			e = &p;
		}
		if (e->min < s->min)
			s->min = e->min;
		if (e->max > s->max)
			s->max = e->max;
		sum->calls[i] += calls;
		s->total += e->total;
		s->child += e->child;
		for (unsigned k = 0; k < TRACE_PROF_BUCKETS; k++)
			sum->hist[i * TRACE_PROF_BUCKETS + k] += trace_prof_hist(e, k);
	}
}

static int profile_read(int fmt, struct trace_render *r)
{
	struct trace_out *out;
	struct prof_sum sum;
	char buf[32];

	if (fmt != SD_TRACE_FMT_PROFILE && fmt != SD_TRACE_FMT_FOLDED)
		return -EINVAL;
	sum.nr = trace_nr_prof_sites;
	sum.ents = calloc(sum.nr ? sum.nr : 1, sizeof(*sum.ents));
	sum.calls = calloc(sum.nr ? sum.nr : 1, sizeof(*sum.calls));
	sum.hist = calloc((sum.nr ? sum.nr : 1) * TRACE_PROF_BUCKETS, sizeof(*sum.hist));
	if (!sum.ents || !sum.calls || !sum.hist) {
		free(sum.ents);
		free(sum.calls);
		free(sum.hist);
		return -ENOMEM;
	}
	out = trace_render_text(r);
	for (size_t i = 0; i < sum.nr; i++)
		sum.ents[i].min = UINT64_MAX;
	tbuf_for_each(TRACER_PROFILE, add_table, &sum);
	if (fmt == SD_TRACE_FMT_FOLDED)
		tout_printf(out, "# folded stacks: function, then ns of self time (profile)\n");
	for (size_t i = 0; i < sum.nr; i++) {
		const struct trace_prof_ent *s = &sum.ents[i];
		const struct trace_site *site = &trace_sites[trace_prof_sites[i]];
		const char *name = trace_site_name(site, 0, buf, sizeof(buf));

		if (!sum.calls[i])
			continue;
		if (fmt == SD_TRACE_FMT_FOLDED) {
			tout_printf(out, "%s %llu\n", name,
				    (unsigned long long)ticks_to_ns(trace_prof_self(s)));
			continue;
		}
		tout_printf(out, "%s %llu %llu %llu %llu %llu", name,
			    (unsigned long long)sum.calls[i],
			    (unsigned long long)ticks_to_ns(s->total),
			    (unsigned long long)ticks_to_ns(trace_prof_self(s)),
			    (unsigned long long)ticks_to_ns(trace_prof_min(s)),
			    (unsigned long long)ticks_to_ns(s->max));
		for (unsigned k = 0; k < TRACE_PROF_BUCKETS; k++)
			tout_printf(out, " %llu",
				    (unsigned long long)sum.hist[i * TRACE_PROF_BUCKETS + k]);
		tout_printf(out, "\n");
	}
	free(sum.ents);
	free(sum.calls);
	free(sum.hist);
	return out->failed ? -ENOMEM : 0;
}

const struct tracer_ops trace_profile_tracer = {
	.name = "profile",
	.id = TRACER_PROFILE,
	.entry = profile_entry,
	.exit = profile_exit,
	.start = profile_start,
	.stop = profile_stop,
	.read = profile_read,
};

tracer_register(profile, trace_profile_tracer);
