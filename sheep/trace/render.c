/*
 * Output formats, rendered from the records as they are read.
 *
 * A rendering walks the buffers of one tracer's session a thread at a
 * time: it copies that thread's records (tbuf_snap_one, pages of their
 * own, given back before the next thread), walks them and produces text
 * only as far as its reader asks (trace_render_read): what it holds at
 * once is one thread's records and a chunk of text, whatever the trace's
 * size, and all of it goes back to the system when the rendering ends.
 *
 * One walker pairs entries and exits per thread and calls a format's
 * callbacks: open (an entry), close (an exit matched to its entry, with the
 * duration), lost (an entry whose exit was never recorded: a longjmp, or
 * a thread still inside it) and req (a request marker: the thread began or
 * ended serving a request, trace_req.h). An exit without a recorded entry
 * (it was overwritten, or came before the session) is skipped.
 *
 *   graph   ftrace function_graph style, per thread: durations in us with
 *           ns precision, nesting by indentation and braces; a request's
 *           begin and end as "#" lines in the function column
 *   folded  "a;b;c N" per distinct stack, N the total self time in ns
 *           (what flamegraph.pl expects: parents get their children's sum),
 *           after one "#" line that says so
 *   chrome  Chrome trace JSON, complete ("X") events, ts/dur in us
 *           (render_req.c)
 *   csv     tid,depth,function,entry_ns,duration_ns, one line per call
 *   events  the lines collie merges nodes with (render_req.c)
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal_proto.h"
#include "render.h"

/* ---- the walker ---- */

static void walk_pop_lost(struct walk *w, unsigned keep)
{
	while (w->nr > keep) {
		w->nr--;
		if (w->ops->lost)
			w->ops->lost(w, &w->stack[w->nr]);
	}
}

static bool is_leaf(const struct trace_rec *r, const struct trace_rec *next)
{
	return next && TREC_TYPE(next->word) == TREC_EXIT &&
	       TREC_DEPTH(next->word) == TREC_DEPTH(r->word) &&
	       TREC_SITE(next->word) == TREC_SITE(r->word);
}

static void walk_entry(struct walk *w, const struct trace_rec *r, bool leaf)
{
	unsigned depth = TREC_DEPTH(r->word);
	struct frame *f;

	/* frames at this depth or deeper never saw their exit */
	while (w->nr && w->stack[w->nr - 1].depth >= depth)
		walk_pop_lost(w, w->nr - 1);
	if (w->nr == ARRAY_SIZE(w->stack))
		return;
	f = &w->stack[w->nr++];
	f->site_off = TREC_SITE(r->word);
	f->depth = depth;
	f->entry_ns = trace_tsc_to_ns(r->ts);
	f->child_ns = 0;
	f->req = w->req;
	w->ops->open(w, f, leaf);
}

static void walk_exit(struct walk *w, const struct trace_rec *r, bool leaf)
{
	unsigned depth = TREC_DEPTH(r->word);
	uint32_t site = TREC_SITE(r->word);
	uint64_t ns = trace_tsc_to_ns(r->ts), dur;
	unsigned k = w->nr;

	while (k > 0 && !(w->stack[k - 1].depth == depth && w->stack[k - 1].site_off == site))
		k--;
	if (k == 0)
		return; /* no recorded entry */
	walk_pop_lost(w, k);
	dur = ns > w->stack[k - 1].entry_ns ? ns - w->stack[k - 1].entry_ns : 0;
	w->ops->close(w, &w->stack[k - 1], dur, leaf);
	w->nr = k - 1;
	if (w->nr)
		w->stack[w->nr - 1].child_ns += dur;
}

/*
 * A request marker at record @i (trace_priv.h: TREC_REQ): how many slots
 * it takes, 1 when its arguments are missing (a torn or overwritten one,
 * skipped)
 */
static size_t walk_mark(struct walk *w, const struct trace_rec *recs, size_t i, size_t nr)
{
	const struct trace_rec *r = &recs[i];
	uint32_t site = TREC_SITE(r->word);
	size_t nargs = TREC_REQ_KIND(site) == TREC_REQ_BEGIN ? 3 : 1;
	struct req_mark m = { 0 };
	uint64_t args[3];

	for (size_t k = 0; k < nargs; k++) {
		const struct trace_rec *a = &recs[i + 1 + k];

		if (i + 1 + k >= nr || TREC_TYPE(a->word) != TREC_FUNC ||
		    TREC_DEPTH(a->word) != TREC_REQ_ARG || TREC_SITE(a->word) != k)
			return 1;
		args[k] = a->ts;
	}
	m.ns = trace_tsc_to_ns(r->ts);
	m.id = args[0];
	if (TREC_REQ_KIND(site) == TREC_REQ_BEGIN) {
		m.begin = true;
		m.opcode = (uint8_t)site;
		m.flags = (site >> 8) & 0xffff;
		m.oid = args[1];
		m.wait_ns = args[2] && args[2] < r->ts
				? trace_tsc_to_ns(r->ts) - trace_tsc_to_ns(args[2])
				: 0;
		w->req = m.id;
		w->req_begin_ns = m.ns;
		w->cur = m;
	} else {
		m.result = (int)(site & 0xff);
		m.dur_ns = w->req == m.id && m.ns > w->req_begin_ns ? m.ns - w->req_begin_ns : 0;
		w->req = 0;
	}
	if (w->ops->req)
		w->ops->req(w, &m);
	return 1 + nargs;
}

/* one step of the current thread's walk at record @i: the records it took */
static size_t walk_step(struct walk *w, size_t i)
{
	const struct tbuf_snap *th = w->th;
	const struct trace_rec *r = &th->recs[i];
	const struct trace_rec *next = i + 1 < th->nr_recs ? r + 1 : NULL;

	switch (TREC_TYPE(r->word)) {
	case TREC_ENTRY:
		w->prev_leaf = is_leaf(r, next);
		walk_entry(w, r, w->prev_leaf);
		return 1;
	case TREC_EXIT:
		walk_exit(w, r, w->prev_leaf);
		w->prev_leaf = false;
		return 1;
	default:
		if (TREC_DEPTH(r->word) == TREC_REQ)
			return walk_mark(w, th->recs, i, th->nr_recs);
		return 1; /* a marker's stray argument, or another tracer's record */
	}
}

/* ---- graph ---- */

static void thread_label(const struct tbuf_snap *th, char *buf, size_t len)
{
	snprintf(buf, len, "%.15s-%u", th->comm, th->tid);
}

static void graph_line(struct walk *w, const char *dur, unsigned depth, const char *text,
		       const char *name, const char *tail)
{
	char label[40];

	thread_label(w->th, label, sizeof(label));
	tout_printf(w->out, " %22s | %13s | %*s%s%s%s\n", label, dur, (int)(2 * depth), "", text,
		    name, tail);
}

static void graph_begin(struct walk *w)
{
	tout_printf(w->out, "#\n# thread %s (tid %u): %zu records, %llu lost\n#\n", w->th->comm,
		    w->th->tid, w->th->nr_recs, (unsigned long long)w->th->nr_lost);
	tout_printf(w->out, "#%22s | %13s | %s\n", "Thread", "Time(us)", "Function Graph");
}

static void graph_open(struct walk *w, const struct frame *f, bool leaf)
{
	char buf[32];

	if (!leaf)
		graph_line(w, "", f->depth, "", render_site_name(f->site_off, buf, sizeof(buf)),
			   "() {");
}

static void graph_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32], us[32];
	const char *name = render_site_name(f->site_off, buf, sizeof(buf));

	trace_fmt_us(us, sizeof(us), dur);
	if (leaf) {
		graph_line(w, us, f->depth, "", name, "();");
		return;
	}
	graph_line(w, us, f->depth, "} /* ", name, " */");
}

static void graph_lost(struct walk *w, const struct frame *f)
{
	char buf[32];

	graph_line(w, "", f->depth, "} /* ", render_site_name(f->site_off, buf, sizeof(buf)),
		   ": exit not recorded */");
}

/*
 * A request's begin and end, as "#" lines between the thread's calls (at
 * the left margin: a script that reads the function column skips them):
 * "# THREAD request ID OP[ at its gateway] oid OID, queued T" and
 * "# THREAD request ID done after T: RESULT"
 */
static void graph_req(struct walk *w, const struct req_mark *m)
{
	char label[40], t[32];

	thread_label(w->th, label, sizeof(label));
	if (m->begin) {
		trace_fmt_us(t, sizeof(t), m->wait_ns);
		tout_printf(w->out, "# %s request %016llx %s%s oid %016llx, queued %s\n", label,
			    (unsigned long long)m->id, sd_op_name(m->opcode),
			    m->flags & TRACE_REQ_GATEWAY ? " at its gateway" : "",
			    (unsigned long long)m->oid, t);
		return;
	}
	trace_fmt_us(t, sizeof(t), m->dur_ns);
	tout_printf(w->out, "# %s request %016llx done after %s: %s\n", label,
		    (unsigned long long)m->id, t, trace_result_name(m->result));
}

static const struct walk_ops graph_ops = {
	.begin = graph_begin,
	.open = graph_open,
	.close = graph_close,
	.lost = graph_lost,
	.req = graph_req,
};

/* ---- csv ---- */

static void csv_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32];

	tout_printf(w->out, "%u,%u,%s,%llu,%llu\n", w->th->tid, f->depth,
		    render_site_name(f->site_off, buf, sizeof(buf)),
		    (unsigned long long)f->entry_ns, (unsigned long long)dur);
}

static const struct walk_ops csv_ops = {
	.open = render_open_none,
	.close = csv_close,
};

/* ---- folded: self time per distinct stack, in a hash table ---- */

struct folded_ent {
	char *stack;
	uint64_t hash;
	uint64_t ns;
};

struct folded {
	struct folded_ent *ents; /* open addressing, cap a power of two */
	size_t nr, cap;
	bool failed;
};

static uint64_t fnv1a(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

static bool folded_grow(struct folded *fo)
{
	size_t cap = fo->cap ? fo->cap * 2 : 1024;
	struct folded_ent *e = calloc(cap, sizeof(*e));

	if (!e)
		return false;
	for (size_t i = 0; i < fo->cap; i++) {
		size_t j;

		if (!fo->ents[i].stack)
			continue;
		for (j = fo->ents[i].hash & (cap - 1); e[j].stack; j = (j + 1) & (cap - 1))
			;
		e[j] = fo->ents[i];
	}
	free(fo->ents);
	fo->ents = e;
	fo->cap = cap;
	return true;
}

/*
 * gcc 12's -fanalyzer loses the stack string once stored into ents[j] (a
 * heap table at a computed index) and reports it leaked: a false positive
 * (folded_end and trace_render_free free them; ASan's runs see no leak),
 * silenced for this function only (script/analyze), as symbol.c's.
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
static void folded_add(struct folded *fo, const char *key, size_t len, uint64_t ns)
{
	uint64_t h = fnv1a(key, len);
	char *stack;
	size_t j;

	if (fo->failed || ((fo->nr + 1) * 2 > fo->cap && !folded_grow(fo))) {
		fo->failed = true;
		return;
	}
	for (j = h & (fo->cap - 1); fo->ents[j].stack; j = (j + 1) & (fo->cap - 1))
		if (fo->ents[j].hash == h && !strcmp(fo->ents[j].stack, key)) {
			fo->ents[j].ns += ns;
			return;
		}
	stack = strndup(key, len);
	if (!stack) {
		fo->failed = true;
		return;
	}
	fo->ents[j] = (struct folded_ent){ stack, h, ns };
	fo->nr++;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic pop
#endif

static void folded_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	struct folded *fo = w->priv;
	unsigned top = (unsigned)(f - w->stack);
	char key[4096], buf[32];
	size_t len = 0;

	for (unsigned i = 0; i <= top && len < sizeof(key); i++)
		len += (size_t)snprintf(key + len, sizeof(key) - len, "%s%s", i ? ";" : "",
					render_site_name(w->stack[i].site_off, buf, sizeof(buf)));
	if (len >= sizeof(key))
		len = sizeof(key) - 1;
	folded_add(fo, key, len, dur > f->child_ns ? dur - f->child_ns : 0);
}

static int cmp_folded(const void *a, const void *b)
{
	return strcmp(((const struct folded_ent *)a)->stack, ((const struct folded_ent *)b)->stack);
}

/* the stacks, sorted, into @out; the table is freed */
static void folded_end(struct walk *w)
{
	struct folded *fo = w->priv;
	size_t n = 0;

	for (size_t i = 0; i < fo->cap; i++)
		if (fo->ents[i].stack)
			fo->ents[n++] = fo->ents[i];
	if (n)
		qsort(fo->ents, n, sizeof(*fo->ents), cmp_folded);
	for (size_t i = 0; i < n; i++) {
		tout_printf(w->out, "%s %llu\n", fo->ents[i].stack,
			    (unsigned long long)fo->ents[i].ns);
		free(fo->ents[i].stack);
	}
	if (fo->failed)
		w->out->failed = true;
	free(fo->ents);
	memset(fo, 0, sizeof(*fo));
}

static const struct walk_ops folded_ops = {
	.open = render_open_none,
	.close = folded_close,
	.end = folded_end,
};

/* ---- the function tracer's records (and the thread checker's) ---- */

static void function_begin(struct walk *w)
{
	thread_label(w->th, w->label, sizeof(w->label));
}

/* a call (two slots: the site, then the caller) */
static size_t function_step(struct walk *w, size_t i)
{
	const struct tbuf_snap *th = w->th;
	const struct trace_rec *r = &th->recs[i], *c = r + 1;
	const char *name, *caller = NULL;
	char buf[32], cbuf[32];
	uint64_t ns;

	if (TREC_TYPE(r->word) != TREC_FUNC || TREC_DEPTH(r->word) == TREC_CALLER)
		return 1;
	name = render_site_name(TREC_SITE(r->word), buf, sizeof(buf));
	if (i + 1 < th->nr_recs && TREC_TYPE(c->word) == TREC_FUNC &&
	    TREC_DEPTH(c->word) == TREC_CALLER && TREC_SITE(c->word) == TREC_SITE(r->word)) {
		caller = trace_symbol_name((uintptr_t)c->ts);
		if (!caller) {
			snprintf(cbuf, sizeof(cbuf), "%#lx", (unsigned long)c->ts);
			caller = cbuf;
		}
	}
	ns = trace_tsc_to_ns(r->ts);
	if (w->fmt == SD_TRACE_FMT_CSV)
		tout_printf(w->out, "%u,%llu,%s,%s\n", th->tid, (unsigned long long)ns, name,
			    caller ? caller : "");
	else
		tout_printf(w->out, " %22s | %9llu.%06llu | %s <- %s\n", w->label,
			    (unsigned long long)(ns / 1000000000ULL),
			    (unsigned long long)(ns / 1000 % 1000000), name, caller ? caller : "?");
	return caller ? 2 : 1;
}

static const struct walk_ops function_ops = {
	.begin = function_begin,
	.open = render_open_none,
	.close = NULL,
	.step = function_step,
};

/* ---- a rendering ---- */

enum { STAGE_HEADER, STAGE_THREADS, STAGE_TRAILER, STAGE_DONE };

struct trace_render {
	int stage;
	struct trace_out out; /* produced, from out_pos on not yet read */
	size_t out_pos;
	/* the walk */
	unsigned id;
	const char *tracer;
	struct tbuf **bufs;
	size_t nr_bufs, cur;
	struct tbuf_snap snap; /* bufs[cur]'s records, while have_snap */
	bool have_snap;
	size_t rec;
	struct folded fo;
	struct walk w;
};

struct trace_render *trace_render_new(void)
{
	return calloc(1, sizeof(struct trace_render));
}

struct trace_out *trace_render_text(struct trace_render *r)
{
	r->stage = STAGE_DONE;
	return &r->out;
}

int trace_render_records(struct trace_render *r, unsigned id, int fmt, const char *tracer)
{
	static const struct walk_ops *const ops[] = {
		[SD_TRACE_FMT_GRAPH] = &graph_ops,   [SD_TRACE_FMT_FOLDED] = &folded_ops,
		[SD_TRACE_FMT_CHROME] = &chrome_ops, [SD_TRACE_FMT_CSV] = &csv_ops,
		[SD_TRACE_FMT_EVENTS] = &events_ops,
	};
	int ret;

	if (fmt < 0 || (size_t)fmt >= ARRAY_SIZE(ops) || !ops[fmt])
		return -EINVAL;
	ret = tbuf_list_current(id, &r->bufs, &r->nr_bufs);
	if (ret < 0)
		return ret;
	r->id = id;
	r->tracer = tracer;
	r->w.ops = ops[fmt];
	if (id == TRACER_FUNCTION || id == TRACER_THREAD) {
		if (fmt != SD_TRACE_FMT_GRAPH && fmt != SD_TRACE_FMT_CSV)
			return -EINVAL;
		r->w.ops = &function_ops;
	}
	r->w.fmt = fmt;
	r->w.out = &r->out;
	r->w.first = true;
	r->w.priv = &r->fo;
	r->stage = STAGE_HEADER;
	return 0;
}

/* the first lines: what the tracer holds now (live counters) */
static void render_header(struct trace_render *r)
{
	struct trace_out *out = &r->out;
	uint32_t nr_threads;
	uint64_t recs, lost;
	char loss[64];

	tbuf_counts(r->id, &nr_threads, &recs, &lost);
	recs = recs > lost ? recs - lost : 0;
	switch (r->w.fmt) {
	case SD_TRACE_FMT_GRAPH:
		tout_printf(out, "# tracer: %s\n# threads: %zu records: %llu lost: %llu\n",
			    r->tracer, r->nr_bufs, (unsigned long long)recs,
			    (unsigned long long)lost);
		if (lost) {
			trace_fmt_loss(loss, sizeof(loss), lost, lost + recs);
			tout_printf(out, "# lost %s\n", loss);
		}
		if (r->w.ops == &function_ops)
			tout_printf(out, "#%22s | %16s | %s\n", "Thread", "Time(s)",
				    "Function <- Caller");
		break;
	case SD_TRACE_FMT_CSV:
		tout_printf(out, r->w.ops == &function_ops
				     ? "tid,ts_ns,function,caller\n"
				     : "tid,depth,function,entry_ns,duration_ns\n");
		break;
	case SD_TRACE_FMT_CHROME:
		tout_printf(out, "{\"traceEvents\":[\n");
		break;
	case SD_TRACE_FMT_FOLDED:
		tout_printf(out, "# folded stacks: frames, then ns of self time\n");
		break;
	case SD_TRACE_FMT_EVENTS:
		tout_printf(out, "# sheep trace events 1 pid %d\n", (int)getpid());
		break;
	}
}

/* records walked before the rendering looks at its output again */
#define RENDER_BATCH 256

/* the next piece of the rendering into r->out */
static int render_step(struct trace_render *r)
{
	struct walk *w = &r->w;
	int ret;

	switch (r->stage) {
	case STAGE_HEADER:
		render_header(r);
		r->stage = STAGE_THREADS;
		return 0;
	case STAGE_THREADS:
		if (r->cur == r->nr_bufs) {
			r->stage = STAGE_TRAILER;
			return 0;
		}
		if (!r->have_snap) {
			ret = tbuf_snap_one(r->bufs[r->cur], r->id, &r->snap);
			if (ret == -ESTALE) { /* its thread's buffer was reset: none */
				r->cur++;
				return 0;
			}
			if (ret < 0)
				return ret;
			r->have_snap = true;
			r->rec = 0;
			w->th = &r->snap;
			w->nr = 0;
			w->req = 0;
			w->prev_leaf = false;
			if (w->ops->begin)
				w->ops->begin(w);
			return 0;
		}
		for (unsigned n = 0; n < RENDER_BATCH && r->rec < r->snap.nr_recs; n++)
			r->rec += w->ops->step ? w->ops->step(w, r->rec) : walk_step(w, r->rec);
		if (r->rec < r->snap.nr_recs)
			return 0;
		/* this thread is done: its frames still open never returned */
		walk_pop_lost(w, 0);
		tbuf_snap_release(&r->snap);
		r->have_snap = false;
		r->cur++;
		return 0;
	case STAGE_TRAILER:
		if (w->ops->end)
			w->ops->end(w);
		r->stage = STAGE_DONE;
		/* what rendering took from the heap goes back now, not at the next one */
		malloc_trim(0);
		return 0;
	}
	return 0;
}

ssize_t trace_render_read(struct trace_render *r, char *buf, size_t len)
{
	size_t n;

	/* keep the text bounded: what was read goes before more is made */
	if (r->out_pos && r->out_pos == r->out.len) {
		r->out.len = 0;
		r->out_pos = 0;
	}
	while (r->out.len - r->out_pos < len && r->stage != STAGE_DONE && !r->out.failed) {
		int ret = render_step(r);

		if (ret < 0)
			return ret;
	}
	if (r->out.failed)
		return -ENOMEM;
	n = min_t(size_t, len, r->out.len - r->out_pos);
	if (!n)
		return 0;	/* done: the text may have been freed (buf NULL) */
	memcpy(buf, r->out.buf + r->out_pos, n);
	r->out_pos += n;
	if (r->out_pos == r->out.len && r->out.cap > 4 * len + 65536) {
		/* a long line run grew it: give the room back */
		tout_free(&r->out);
		r->out_pos = 0;
	} else if (r->out_pos > r->out.len / 2) {
		memmove(r->out.buf, r->out.buf + r->out_pos, r->out.len - r->out_pos);
		r->out.len -= r->out_pos;
		r->out_pos = 0;
	}
	return (ssize_t)n;
}

bool trace_render_done(const struct trace_render *r)
{
	return r->stage == STAGE_DONE && r->out_pos == r->out.len;
}

void trace_render_free(struct trace_render *r)
{
	if (!r)
		return;
	if (r->have_snap)
		tbuf_snap_release(&r->snap);
	for (size_t i = 0; i < r->fo.cap; i++)
		free(r->fo.ents[i].stack);
	free(r->fo.ents);
	free(r->bufs);
	tout_free(&r->out);
	free(r);
	malloc_trim(0);
}
