/*
 * Per-thread ring buffers and the trace clock.
 *
 * A buffer belongs to one thread. Its head counts the records reserved
 * since the session began; record i lives in slot i & mask and carries
 * (i >> shift) & TREC_LAP_MASK, its lap. When the ring wraps, the oldest
 * records are overwritten: they are the lost ones (head - nr of slots).
 *
 * Ordering, writer (tbuf_push, recursion guard held): reserve i with a plain
 * increment of head, store the timestamp, then the word with release
 * semantics.
 * Reader (tbuf_snapshot, any thread): load head (h1), copy the slots, load
 * head again (h2). A record i is kept when i >= h2 - nr_slots (not
 * overwritten during the copy) and its word carries lap i (it was written
 * in this pass, and the timestamp with it). A slot reserved but not yet
 * written shows the previous lap and is dropped.
 *
 * Buffers are allocated by their thread on its first traced call of a
 * session (signals blocked) and pushed onto a global list with one CAS. A
 * buffer whose thread exited is reused by a later thread with the same
 * size. Sessions are numbered; a buffer left from an older session is
 * reset by its owner before use and ignored by readers.
 *
 * Freeing: at each start of a tracer (tbuf_reclaim), once its session is
 * bumped and the world is stopped, every thread that is not inside a hook
 * has dropped its references to that tracer's older buffers (hook.c), so
 * a buffer that nobody owns is unreachable from the hot path: it is
 * unlinked and unmapped, unless it fits the new session exactly (kept for
 * reuse). Grown rings and profile tables of other sizes go back to the
 * system; the records of a stopped tracer stay readable until its next
 * start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"
#include "trace_priv.h"

static struct tbuf *tbuf_list;
static uint64_t tbuf_total; /* bytes of ring pages populated, under trace_max_total */
uint64_t trace_max_total = TRACE_MAX_TOTAL;

/* take len bytes of the total budget: false when they do not fit */
static bool budget_take(uint64_t len)
{
	if (__atomic_add_fetch(&tbuf_total, len, __ATOMIC_RELAXED) <= trace_max_total)
		return true;
	__atomic_sub_fetch(&tbuf_total, len, __ATOMIC_RELAXED);
	return false;
}

/* ---- clock ---- */

static uint64_t clk_tsc0, clk_ns0;
uint64_t trace_clk_mult = 1ULL << 32; /* ns per tick, 32.32 fixed point */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void trace_clock_calibrate(void)
{
	struct timespec req = { 0, 20 * 1000 * 1000 };
	uint64_t t0, n0, t1, n1;

	n0 = mono_ns();
	t0 = trace_rdtsc();
	nanosleep(&req, NULL);
	n1 = mono_ns();
	t1 = trace_rdtsc();
	if (t1 > t0 && n1 > n0)
		trace_clk_mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
	clk_tsc0 = t0;
	clk_ns0 = n0;
	trace_prof_lz_init();
}

bool trace_prof_lz_is_bsr;

void trace_prof_lz_init(void)
{
	/* lzcnt of 1 is 63, bsr's answer 0 */
	trace_prof_lz_is_bsr = trace_prof_lzcnt(1) != 63;
}

uint64_t trace_clock_ns(void)
{
	return trace_tsc_to_ns(trace_rdtsc());
}

uint64_t trace_tsc_to_ns(uint64_t tsc)
{
	if (tsc >= clk_tsc0)
		return clk_ns0 +
		       (uint64_t)(((unsigned __int128)(tsc - clk_tsc0) * trace_clk_mult) >> 32);
	return clk_ns0 - (uint64_t)(((unsigned __int128)(clk_tsc0 - tsc) * trace_clk_mult) >> 32);
}

/* ---- buffers ---- */

static unsigned log2_u64(uint64_t v)
{
	unsigned n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

/* fault the pages of [p, p + len) in, so that the hot path never does */
static void populate(void *p, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)p)[off] = 0;
}

/*
 * A buffer of @nr_records, in a mapping that can hold @max_records: the
 * address space is reserved at once, the pages only as the ring grows
 * (populated first: no page fault on the hot path; zeroed: every lap 0).
 */
static struct tbuf *tbuf_alloc(uint64_t nr_records, uint64_t max_records)
{
	size_t len = sizeof(struct tbuf) + max_records * sizeof(struct trace_rec);
	struct tbuf *b;

	uint64_t used = sizeof(struct tbuf) + nr_records * sizeof(struct trace_rec);

	len = round_up(len, 4096);
	if (!budget_take(used))
		return NULL;
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		 0);
	if (b == MAP_FAILED) {
		__atomic_sub_fetch(&tbuf_total, used, __ATOMIC_RELAXED);
		return NULL;
	}
	populate(b, used);
	b->map_len = len;
	b->map_nr = max_records;
	b->mask = nr_records - 1;
	b->shift = log2_u64(nr_records);
	b->recs = (struct trace_rec *)(b + 1);
	return b;
}

static uint64_t grow_point(const struct tbuf *b)
{
	uint64_t nr = b->mask + 1;

	return nr < b->map_nr && nr > 2 * TRACE_GROW_MARGIN ? nr - TRACE_GROW_MARGIN : UINT64_MAX;
}

/*
 * Growing before the ring wraps keeps every record where it is: records
 * 0..nr-1 sit in slots 0..nr-1 and carry lap 0 with either size. A reader
 * that mixes the old size with a head past it drops the records it cannot
 * place (their lap does not match), nothing worse.
 */
int tbuf_grow(struct tbuf *b)
{
	uint64_t nr = b->mask + 1;

	if (nr >= b->map_nr || b->head > nr || !budget_take(nr * sizeof(struct trace_rec))) {
		b->grow_at = UINT64_MAX;
		return -ENOSPC;
	}
	populate(b->recs + nr, nr * sizeof(struct trace_rec));
	__atomic_store_n(&b->shift, b->shift + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&b->mask, 2 * nr - 1, __ATOMIC_RELEASE);
	b->grow_at = grow_point(b);
	return 0;
}

static void tbuf_reset(struct tbuf *b, uint32_t tid, uint32_t session, bool is_fresh)
{
	b->owner = tid;
	b->on_main = tid == (uint32_t)getpid();
	b->nr_overflow = 0;
	b->inside = 0;
	b->top = NULL;
	/* a profile table: its last entry is the scratch one (trace_prof_len) */
	b->prof_len = trace_prof_len(b) ? trace_prof_len(b) - 1 : 0;
	b->pend_ent =
	    b->tracer == TRACER_PROFILE ? (struct trace_prof_ent *)b->recs + b->prof_len : NULL;
	b->pend_dur = 0;
	b->frame_key = (uint64_t)TRACE_FRAME_PROFILE << 32 | session;
	memset(b->followed, 0, sizeof(b->followed));
	__atomic_store_n(&b->session, 0, __ATOMIC_RELEASE); /* readers skip it now */
	__atomic_store_n(&b->head, 0, __ATOMIC_RELEASE);
	/* clear the words: lap 0 records must not be mistaken for old ones */
	if (!is_fresh)
		memset(b->recs, 0, (b->mask + 1) * sizeof(struct trace_rec));
	if (b->tracer == TRACER_PROFILE)
		for (size_t i = 0; i < trace_prof_len(b); i++)
			((struct trace_prof_ent *)b->recs)[i].min = UINT64_MAX;
	b->grow_at = grow_point(b);
	prctl(PR_GET_NAME, b->comm, 0, 0, 0);
	__atomic_store_n(&b->session, session, __ATOMIC_RELEASE);
}

/*
 * A free buffer of the right sizes and tracer, claimed with a CAS on its
 * owner. One that grew keeps its size (its pages are there anyway).
 */
static bool tbuf_fits(const struct tbuf *b, uint64_t nr_records, uint64_t max_records, unsigned id)
{
	return b->tracer == id && b->map_nr == max_records && b->mask + 1 >= nr_records &&
	       (max_records > nr_records || b->mask + 1 == nr_records);
}

static struct tbuf *tbuf_claim(uint32_t tid, uint64_t nr_records, uint64_t max_records, unsigned id)
{
	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next) {
		uint32_t zero = 0;

		if (!tbuf_fits(b, nr_records, max_records, id))
			continue;
		if (b->owner == tid)
			return b; /* left by an earlier thread with our tid */
		if (__atomic_compare_exchange_n(&b->owner, &zero, tid, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return b;
	}
	return NULL;
}

struct tbuf *tbuf_get(struct tbuf *old, uint32_t tid, unsigned id)
{
	uint32_t session = trace_hot.session[id];
	uint64_t nr = trace_hot.nr_records[id], max = trace_hot.max_records[id];
	struct tbuf *b;

	if (max < nr)
		max = nr;
	if (old && tbuf_fits(old, nr, max, id)) {
		tbuf_reset(old, tid, session, false);
		return old;
	}
	if (old) /* wrong size: give it to whoever wants that size */
		__atomic_store_n(&old->owner, 0, __ATOMIC_RELEASE);
	b = tbuf_claim(tid, nr, max, id);
	if (b) {
		tbuf_reset(b, tid, session, false);
		return b;
	}
	b = tbuf_alloc(nr, max);
	if (!b)
		return NULL;
	b->owner = tid;
	b->tracer = id;
	b->next = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&tbuf_list, &b->next, b, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	tbuf_reset(b, tid, session, true);
	return b;
}

void tbuf_reap(void)
{
	pid_t pid = getpid();

	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next) {
		uint32_t tid = __atomic_load_n(&b->owner, __ATOMIC_ACQUIRE);

		if (tid && syscall(SYS_tgkill, pid, tid, 0) < 0 && errno == ESRCH)
			__atomic_compare_exchange_n(&b->owner, &tid, 0, false, __ATOMIC_ACQ_REL,
						    __ATOMIC_RELAXED);
	}
}

bool tbuf_reusable(const struct tbuf *b, uint64_t nr_records, uint64_t max_records)
{
	if (max_records < nr_records)
		max_records = nr_records;
	/* as it is: not grown, the size the new session starts with */
	return b->mask + 1 == nr_records && b->map_nr == max_records;
}

/* the pages of a buffer counted in the total */
static uint64_t tbuf_populated(const struct tbuf *b)
{
	return sizeof(struct tbuf) + (b->mask + 1) * sizeof(struct trace_rec);
}

uint64_t tbuf_reclaim(unsigned id, bool keep_reusable)
{
	uint64_t nr = trace_hot.nr_records[id], max = trace_hot.max_records[id], freed = 0;
	uint32_t session = trace_hot.session[id];
	struct tbuf **pp = &tbuf_list, *b;

	while ((b = *pp)) {
		if (b->tracer != id || b->session == session ||
		    __atomic_load_n(&b->owner, __ATOMIC_ACQUIRE) ||
		    (keep_reusable && tbuf_reusable(b, nr, max))) {
			pp = &b->next;
			continue;
		}
		*pp = b->next;
		freed += tbuf_populated(b);
		__atomic_sub_fetch(&tbuf_total, tbuf_populated(b), __ATOMIC_RELAXED);
		munmap(b, b->map_len);
	}
	return freed;
}

void tbuf_memory(uint64_t *bytes, uint32_t *nr_bufs)
{
	*bytes = __atomic_load_n(&tbuf_total, __ATOMIC_RELAXED);
	*nr_bufs = 0;
	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next)
		(*nr_bufs)++;
}

uint64_t tbuf_held(unsigned id)
{
	uint64_t n = 0;

	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next)
		if (b->tracer == id)
			n += tbuf_populated(b);
	return n;
}

static bool tbuf_current(const struct tbuf *b, unsigned id)
{
	return b->tracer == id &&
	       __atomic_load_n(&b->session, __ATOMIC_ACQUIRE) == trace_hot.session[id] &&
	       trace_hot.session[id];
}

/*
 * Records of a ring tracer; for the profile tracer, whose buffer is a table
 * and loses nothing, the calls it counted. A record of the function
 * tracer, of the thread checker and of the loop checker takes two slots.
 */
void tbuf_counts(unsigned id, uint32_t *nr_threads, uint64_t *nr_events, uint64_t *nr_lost)
{
	*nr_threads = 0;
	*nr_events = *nr_lost = 0;
	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next) {
		uint64_t head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
		uint64_t lost = head > b->mask + 1 ? head - b->mask - 1 : 0;

		if (!tbuf_current(b, id))
			continue;
		(*nr_threads)++;
		if (id == TRACER_PROFILE) {
			/* a table: the calls counted are its records */
			const struct trace_prof_ent *t = (const struct trace_prof_ent *)b->recs;

			head = 0;
			lost = 0;
			for (size_t i = 0; i < b->prof_len; i++)
				head += trace_prof_calls(b, &t[i]);
		}
		if (id == TRACER_FUNCTION || id == TRACER_THREAD || id == TRACER_LOOP) {
			head /= 2;
			lost = (lost + 1) / 2;
		}
		*nr_events += head;
		*nr_lost += lost + b->nr_overflow;
	}
}

void tbuf_for_each_mut(unsigned id, int (*fn)(struct tbuf *b, void *arg), void *arg)
{
	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next)
		if (tbuf_current(b, id) && fn(b, arg))
			return;
}

void tbuf_for_each(unsigned id, void (*fn)(const struct tbuf *b, void *arg), void *arg)
{
	for (struct tbuf *b = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE); b; b = b->next)
		if (tbuf_current(b, id))
			fn(b, arg);
}

/*
 * Copy buffer @b's valid records, oldest first, into pages of their own
 * (mmap: a large rendering gives its memory back to the system when done).
 */
static int snap_one(const struct tbuf *b, struct tbuf_snap *s)
{
	uint64_t nr_slots = b->mask + 1;
	uint64_t h1 = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE), h2, first, n = 0;
	uint64_t lo = h1 > nr_slots ? h1 - nr_slots : 0;
	size_t len = round_up((h1 - lo ? h1 - lo : 1) * sizeof(struct trace_rec), 4096);
	struct trace_rec *out =
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (out == MAP_FAILED)
		return -ENOMEM;
	for (uint64_t i = lo; i < h1; i++) {
		const struct trace_rec *r = &b->recs[i & b->mask];
		uint64_t w = __atomic_load_n(&r->word, __ATOMIC_ACQUIRE);

		out[i - lo].word = w;
		out[i - lo].ts = __atomic_load_n(&r->ts, __ATOMIC_RELAXED);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	h2 = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
	first = h2 > nr_slots ? h2 - nr_slots : 0;
	for (uint64_t i = lo; i < h1; i++) {
		const struct trace_rec *r = &out[i - lo];

		if (i < first || TREC_LAP(r->word) != ((i >> b->shift) & TREC_LAP_MASK) ||
		    !TREC_TYPE(r->word))
			continue;
		out[n++] = *r;
	}
	s->tid = b->owner;
	memcpy(s->comm, b->comm, sizeof(s->comm));
	s->comm[sizeof(s->comm) - 1] = '\0';
	s->recs = out;
	s->map_len = len;
	s->nr_recs = n;
	s->nr_lost = (h1 - n) + b->nr_overflow;
	return 0;
}

/* the current name of a live thread: it may have changed since allocation */
static void refresh_comm(struct tbuf_snap *s)
{
	char path[64], name[16];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%u/comm", s->tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, name, sizeof(name) - 1);
	close(fd);
	if (n <= 0)
		return;
	name[n] = '\0';
	name[strcspn(name, "\n")] = '\0';
	memcpy(s->comm, name, sizeof(s->comm));
}

int tbuf_list_current(unsigned id, struct tbuf ***bufs, size_t *nr)
{
	struct tbuf *head = __atomic_load_n(&tbuf_list, __ATOMIC_ACQUIRE), **v;
	size_t n = 0, cap = 0;

	/* the list only grows at its head: from one load of it, a fixed list */
	for (struct tbuf *b = head; b; b = b->next)
		cap++;
	v = calloc(cap ? cap : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (struct tbuf *b = head; b && n < cap; b = b->next)
		if (tbuf_current(b, id))
			v[n++] = b;
	*nr = n;
	*bufs = v;
	return 0;
}

int tbuf_snap_one(const struct tbuf *b, unsigned id, struct tbuf_snap *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (!tbuf_current(b, id))
		return -ESTALE;
	ret = snap_one(b, s);
	if (ret < 0)
		return ret;
	if (!tbuf_current(b, id)) { /* reset under us: dropped */
		tbuf_snap_release(s);
		return -ESTALE;
	}
	refresh_comm(s);
	return 0;
}

void tbuf_snap_release(struct tbuf_snap *s)
{
	if (s->recs)
		munmap(s->recs, s->map_len);
	s->recs = NULL;
	s->nr_recs = 0;
}
