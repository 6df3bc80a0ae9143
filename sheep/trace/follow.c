/*
 * Streaming (collie debug trace cat --follow, ftrace's trace_pipe): each
 * SD_OP_TRACE_FOLLOW of a follower returns the records written since its
 * previous one, one line each, and moves the follower's cursor in each
 * buffer (tbuf->followed[slot]) past what it sent. Up to
 * TRACE_MAX_FOLLOWERS followers run at once, each in a slot of its own
 * and named by a handle (a generation and the slot): every follower gets
 * every record once. A follower that stays silent TRACE_FOLLOW_IDLE_SEC
 * (its collie was killed) gives its slot to the next new one; its handle
 * is refused from then on. Records the ring overwrote before they were sent
 * are counted in an "L" line; a slot reserved but not yet written ends the
 * batch of its thread (it is sent next time). When the answer is full, the
 * cursor stays at the first record that did not fit. All of it runs on the
 * control path, under the trace lock.
 *
 * Lines (collie pairs entries and exits and renders them):
 *   E tid depth ts_ns name        graph: an entry
 *   X tid depth ts_ns name        graph: an exit
 *   F tid ts_ns name caller       function: a call
 *   L tid count                   records lost before the next ones
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "trace_priv.h"

struct follow {
	char *buf;
	size_t len, used;
	unsigned slot;
	bool full;
};

/* the followers, by slot */
static struct follower {
	uint64_t handle; /* 0: the slot is free */
	unsigned tracer;
	uint64_t last; /* seconds (CLOCK_MONOTONIC) of its last call */
} followers[TRACE_MAX_FOLLOWERS];
static uint64_t follow_gen;

static uint64_t now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

/* one line into the answer; false (and nothing written) when it does not fit */
static bool put_line(struct follow *f, const char *fmt, ...) __printf(2, 3);
static bool put_line(struct follow *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(f->buf + f->used, f->len - f->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= f->len - f->used) {
		f->full = true;
		return false;
	}
	f->used += (size_t)n;
	return true;
}

static const char *name_of(uint32_t off, char *buf, size_t len)
{
	uintptr_t addr = trace_site_base + off;

	return trace_site_name(trace_site_find(addr), addr, buf, len);
}

/* one record; false if it did not fit */
static bool put_rec(struct follow *f, uint32_t tid, const struct trace_rec *r,
		    const struct trace_rec *caller)
{
	char buf[32], cbuf[32];
	const char *name = name_of(TREC_SITE(r->word), buf, sizeof(buf)), *cname;
	unsigned long long ns = (unsigned long long)trace_tsc_to_ns(r->ts);

	switch (TREC_TYPE(r->word)) {
	case TREC_ENTRY:
		return put_line(f, "E %u %u %llu %s\n", tid, TREC_DEPTH(r->word), ns, name);
	case TREC_EXIT:
		return put_line(f, "X %u %u %llu %s\n", tid, TREC_DEPTH(r->word), ns, name);
	default:
		cname = caller ? trace_symbol_name((uintptr_t)caller->ts) : NULL;
		if (!cname) {
			snprintf(cbuf, sizeof(cbuf), caller ? "%#lx" : "?",
				 caller ? (unsigned long)caller->ts : 0UL);
			cname = cbuf;
		}
		return put_line(f, "F %u %llu %s %s\n", tid, ns, name, cname);
	}
}

static bool rec_valid(const struct tbuf *b, const struct trace_rec *r, uint64_t i)
{
	uint64_t w = __atomic_load_n(&r->word, __ATOMIC_ACQUIRE);

	return TREC_TYPE(w) && TREC_LAP(w) == ((i >> b->shift) & TREC_LAP_MASK);
}

static int follow_one(struct tbuf *b, void *arg)
{
	struct follow *f = arg;
	uint64_t nr_slots = b->mask + 1;
	uint64_t head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
	uint64_t first = head > nr_slots ? head - nr_slots : 0;
	uint64_t i = b->followed[f->slot];

	/* its owner gave records back (--slower-than): from where it writes again */
	if (i > head)
		i = head;
	if (i < first) {
		if (!put_line(f, "L %u %llu\n", b->owner, (unsigned long long)(first - i)))
			return 1;
		i = first;
	}
	while (i < head) {
		struct trace_rec r, c;
		const struct trace_rec *slot = &b->recs[i & b->mask];
		uint64_t n = 1, h2;
		bool has_caller = false;

		if (!rec_valid(b, slot, i))
			break; /* reserved, not yet written: next time */
		r.ts = __atomic_load_n(&slot->ts, __ATOMIC_RELAXED);
		r.word = __atomic_load_n(&slot->word, __ATOMIC_RELAXED);
		if (TREC_TYPE(r.word) == TREC_FUNC) {
			const struct trace_rec *cs = &b->recs[(i + 1) & b->mask];

			if (i + 1 >= head || !rec_valid(b, cs, i + 1))
				break;
			c.ts = __atomic_load_n(&cs->ts, __ATOMIC_RELAXED);
			c.word = __atomic_load_n(&cs->word, __ATOMIC_RELAXED);
			has_caller = TREC_DEPTH(c.word) == TREC_CALLER;
			n = has_caller ? 2 : 1;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		h2 = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
		if (i < (h2 > nr_slots ? h2 - nr_slots : 0))
			break; /* overwritten while we read it: lost, said next time */
		if (TREC_TYPE(r.word) == TREC_FUNC &&
		    (TREC_DEPTH(r.word) == TREC_CALLER || TREC_DEPTH(r.word) == TREC_REQ ||
		     TREC_DEPTH(r.word) == TREC_REQ_ARG)) {
			/* a caller slot whose call was lost; a request marker (not streamed) */
			i++;
			continue;
		}
		if (!put_rec(f, b->owner, &r, has_caller ? &c : NULL))
			break;
		i += n;
	}
	b->followed[f->slot] = i;
	return f->full;
}

/* a new follower starts at the oldest record each buffer still holds */
static int follow_from_oldest(struct tbuf *b, void *arg)
{
	const unsigned *slot = arg;
	uint64_t nr_slots = b->mask + 1;
	uint64_t head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);

	b->followed[*slot] = head > nr_slots ? head - nr_slots : 0;
	return 0;
}

/* a slot for a new follower of tracer @id: a free one, or one long silent */
static int follow_new(unsigned id, uint64_t now, uint64_t *handle)
{
	unsigned slot = TRACE_MAX_FOLLOWERS;

	for (unsigned s = 0; s < TRACE_MAX_FOLLOWERS; s++) {
		if (!followers[s].handle) {
			slot = s;
			break;
		}
		if (now - followers[s].last >= TRACE_FOLLOW_IDLE_SEC && slot == TRACE_MAX_FOLLOWERS)
			slot = s;
	}
	if (slot == TRACE_MAX_FOLLOWERS)
		return -EBUSY;
	followers[slot].handle = ++follow_gen << 8 | slot;
	followers[slot].tracer = id;
	followers[slot].last = now;
	tbuf_for_each_mut(id, follow_from_oldest, &slot);
	*handle = followers[slot].handle;
	return 0;
}

int trace_follow(unsigned id, uint64_t *handle, char *buf, size_t len, size_t *out_len)
{
	struct follow f = { buf, len, 0, 0, false };
	uint64_t now = now_sec();
	int ret;

	if (!len)
		return -EINVAL;
	if (!*handle) {
		ret = follow_new(id, now, handle);
		if (ret < 0)
			return ret;
	}
	f.slot = (unsigned)(*handle & 0xff);
	if (f.slot >= TRACE_MAX_FOLLOWERS || followers[f.slot].handle != *handle)
		return -ESTALE;
	if (followers[f.slot].tracer != id)
		return -EINVAL;
	followers[f.slot].last = now;
	tbuf_for_each_mut(id, follow_one, &f);
	*out_len = f.used;
	return 0;
}
