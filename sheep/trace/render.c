/*
 * Output formats, rendered from a snapshot of the records.
 *
 * One walker pairs entries and exits per thread and calls a format's
 * callbacks: open (an entry), close (an exit matched to its entry, with the
 * duration) and lost (an entry whose exit was never recorded: a longjmp, or
 * a thread still inside it). An exit without a recorded entry (it was
 * overwritten, or came before the session) is skipped.
 *
 *   graph   ftrace function_graph style, per thread: durations in us with
 *           ns precision, nesting by indentation and braces
 *   folded  "a;b;c N" per distinct stack, N the total self time in ns
 *           (what flamegraph.pl expects: parents get their children's sum),
 *           after one "#" line that says so
 *   chrome  Chrome trace JSON, complete ("X") events, ts/dur in us
 *   csv     tid,depth,function,entry_ns,duration_ns, one line per call
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal_proto.h"
#include "trace_priv.h"

/* ---- growable output ---- */

void tout_printf(struct trace_out *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (out->failed)
		return;
	for (;;) {
		size_t room = out->cap - out->len;

		va_start(ap, fmt);
		n = vsnprintf(out->buf ? out->buf + out->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			out->failed = true;
			return;
		}
		if ((size_t)n < room) {
			out->len += (size_t)n;
			return;
		}
		size_t cap = out->cap ? out->cap * 2 : 65536;
		char *b;

		while (cap - out->len <= (size_t)n)
			cap *= 2;
		b = realloc(out->buf, cap);
		if (!b) {
			out->failed = true;
			return;
		}
		out->buf = b;
		out->cap = cap;
	}
}

void tout_free(struct trace_out *out)
{
	free(out->buf);
	memset(out, 0, sizeof(*out));
}

void trace_fmt_us(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%llu.%03llu us", (unsigned long long)(ns / 1000),
		 (unsigned long long)(ns % 1000));
}

/* ---- the walker ---- */

struct frame {
	uint32_t site_off;
	unsigned depth;
	uint64_t entry_ns;
	uint64_t child_ns;
};

struct walk;

struct walk_ops {
	void (*begin)(struct walk *w);
	void (*open)(struct walk *w, const struct frame *f, bool leaf);
	void (*close)(struct walk *w, const struct frame *f, uint64_t dur, bool leaf);
	void (*lost)(struct walk *w, const struct frame *f);
};

struct walk {
	const struct walk_ops *ops;
	const struct tbuf_snap *th;
	struct trace_out *out;
	struct frame stack[TRACE_MAX_DEPTH + 1];
	unsigned nr; /* frames open */
	bool first;  /* chrome: no comma before the first event */
	void *priv;
};

static const char *site_name(uint32_t off, char *buf, size_t len)
{
	uintptr_t addr = trace_site_base + off;

	return trace_site_name(trace_site_find(addr), addr, buf, len);
}

static void walk_pop_lost(struct walk *w, unsigned keep)
{
	while (w->nr > keep) {
		w->nr--;
		if (w->ops->lost)
			w->ops->lost(w, &w->stack[w->nr]);
	}
}

static void walk_entry(struct walk *w, const struct trace_rec *r, const struct trace_rec *next)
{
	unsigned depth = TREC_DEPTH(r->word);
	bool leaf = next && TREC_TYPE(next->word) == TREC_EXIT &&
		    TREC_DEPTH(next->word) == depth && TREC_SITE(next->word) == TREC_SITE(r->word);
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

static void walk_thread(struct walk *w, const struct tbuf_snap *th)
{
	bool prev_leaf = false;

	w->th = th;
	w->nr = 0;
	if (w->ops->begin)
		w->ops->begin(w);
	for (size_t i = 0; i < th->nr_recs; i++) {
		const struct trace_rec *r = &th->recs[i];
		const struct trace_rec *next = i + 1 < th->nr_recs ? r + 1 : NULL;

		if (TREC_TYPE(r->word) == TREC_FUNC)
			continue;

		if (TREC_TYPE(r->word) == TREC_ENTRY) {
			walk_entry(w, r, next);
			prev_leaf = next && TREC_TYPE(next->word) == TREC_EXIT &&
				    TREC_DEPTH(next->word) == TREC_DEPTH(r->word) &&
				    TREC_SITE(next->word) == TREC_SITE(r->word);
		} else {
			walk_exit(w, r, prev_leaf);
			prev_leaf = false;
		}
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
		graph_line(w, "", f->depth, "", site_name(f->site_off, buf, sizeof(buf)), "() {");
}

static void graph_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32], us[32];
	const char *name = site_name(f->site_off, buf, sizeof(buf));

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

	graph_line(w, "", f->depth, "} /* ", site_name(f->site_off, buf, sizeof(buf)),
		   ": exit not recorded */");
}

static const struct walk_ops graph_ops = {
	.begin = graph_begin,
	.open = graph_open,
	.close = graph_close,
	.lost = graph_lost,
};

/* ---- csv ---- */

static void csv_open(struct walk *w, const struct frame *f, bool leaf)
{
}

static void csv_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32];

	tout_printf(w->out, "%u,%u,%s,%llu,%llu\n", w->th->tid, f->depth,
		    site_name(f->site_off, buf, sizeof(buf)), (unsigned long long)f->entry_ns,
		    (unsigned long long)dur);
}

static const struct walk_ops csv_ops = {
	.open = csv_open,
	.close = csv_close,
};

/* ---- chrome ---- */

static void json_str(struct trace_out *out, const char *s)
{
	tout_printf(out, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			tout_printf(out, "\\%c", c);
		else if (c < 0x20)
			tout_printf(out, "\\u%04x", c);
		else
			tout_printf(out, "%c", c);
	}
	tout_printf(out, "\"");
}

static void chrome_begin(struct walk *w)
{
	tout_printf(w->out, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
			    "\"args\":{\"name\":",
		    w->first ? "" : ",\n", (int)getpid(), w->th->tid);
	json_str(w->out, w->th->comm);
	tout_printf(w->out, "}}");
	w->first = false;
}

static void chrome_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32];

	tout_printf(w->out, ",\n{\"name\":");
	json_str(w->out, site_name(f->site_off, buf, sizeof(buf)));
	tout_printf(w->out, ",\"ph\":\"X\",\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"pid\":%d,"
			    "\"tid\":%u}",
		    (unsigned long long)(f->entry_ns / 1000), (unsigned long long)(f->entry_ns % 1000),
		    (unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000),
		    (int)getpid(), w->th->tid);
}

static const struct walk_ops chrome_ops = {
	.begin = chrome_begin,
	.open = csv_open,
	.close = chrome_close,
};

/* ---- folded ---- */

struct folded_ent {
	char *stack;
	uint64_t ns;
};

struct folded {
	struct folded_ent *ents;
	size_t nr, cap;
	bool failed;
};

static void folded_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	struct folded *fo = w->priv;
	struct trace_out key = { 0 };
	unsigned top = (unsigned)(f - w->stack);
	char buf[32];

	for (unsigned i = 0; i <= top; i++)
		tout_printf(&key, "%s%s", i ? ";" : "",
			    site_name(w->stack[i].site_off, buf, sizeof(buf)));
	if (key.failed || fo->failed)
		goto out_free;
	if (fo->nr == fo->cap) {
		size_t cap = fo->cap ? fo->cap * 2 : 256;
		struct folded_ent *e = realloc(fo->ents, cap * sizeof(*e));

		if (!e) {
			fo->failed = true;
			goto out_free;
		}
		fo->ents = e;
		fo->cap = cap;
	}
	fo->ents[fo->nr].stack = key.buf;
	fo->ents[fo->nr].ns = dur > f->child_ns ? dur - f->child_ns : 0;
	fo->nr++;
	return;
out_free:
	tout_free(&key);
}

static int cmp_folded(const void *a, const void *b)
{
	return strcmp(((const struct folded_ent *)a)->stack, ((const struct folded_ent *)b)->stack);
}

static const struct walk_ops folded_ops = {
	.open = csv_open,
	.close = folded_close,
};

static int folded_print(struct folded *fo, struct trace_out *out)
{
	if (fo->nr) /* qsort takes no NULL base, even for 0 entries */
		qsort(fo->ents, fo->nr, sizeof(*fo->ents), cmp_folded);
	for (size_t i = 0; i < fo->nr;) {
		uint64_t sum = 0;
		size_t j = i;

		for (; j < fo->nr && !strcmp(fo->ents[j].stack, fo->ents[i].stack); j++)
			sum += fo->ents[j].ns;
		tout_printf(out, "%s %llu\n", fo->ents[i].stack, (unsigned long long)sum);
		i = j;
	}
	for (size_t i = 0; i < fo->nr; i++)
		free(fo->ents[i].stack);
	free(fo->ents);
	return fo->failed ? -ENOMEM : 0;
}

/* ---- entry point ---- */

void trace_fmt_loss(char *buf, size_t len, uint64_t lost, uint64_t total)
{
	unsigned long long tenths = total ? (unsigned long long)(lost * 1000 / total) : 0;

	if (!lost)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%llu.%llu%%: a larger --buffer-size keeps them", tenths / 10,
			 tenths % 10);
}

static void render_header(int fmt, const char *tracer, const struct tbuf_snap *snaps,
			  size_t nr, struct trace_out *out)
{
	uint64_t recs = 0, lost = 0;
	char loss[64];

	for (size_t i = 0; i < nr; i++) {
		recs += snaps[i].nr_recs;
		lost += snaps[i].nr_lost;
	}
	if (fmt == SD_TRACE_FMT_GRAPH) {
		tout_printf(out, "# tracer: %s\n# threads: %zu records: %llu lost: %llu\n", tracer,
			    nr, (unsigned long long)recs, (unsigned long long)lost);
		if (lost) {
			trace_fmt_loss(loss, sizeof(loss), lost, lost + recs);
			tout_printf(out, "# lost %s\n", loss);
		}
	} else if (fmt == SD_TRACE_FMT_CSV) {
		tout_printf(out, "tid,depth,function,entry_ns,duration_ns\n");
	} else if (fmt == SD_TRACE_FMT_CHROME) {
		tout_printf(out, "{\"traceEvents\":[\n");
	} else if (fmt == SD_TRACE_FMT_FOLDED) {
		tout_printf(out, "# folded stacks: frames, then ns of self time\n");
	}
}

/* ---- the function tracer's records ---- */

static void render_function(int fmt, const char *tracer, const struct tbuf_snap *snaps, size_t nr,
			    struct trace_out *out)
{
	uint64_t recs = 0, lost = 0;
	char loss[64];

	for (size_t i = 0; i < nr; i++) {
		recs += snaps[i].nr_recs / 2;
		lost += (snaps[i].nr_lost + 1) / 2;
	}
	if (fmt == SD_TRACE_FMT_CSV) {
		tout_printf(out, "tid,ts_ns,function,caller\n");
	} else {
		tout_printf(out, "# tracer: %s\n# threads: %zu records: %llu lost: %llu\n", tracer,
			    nr, (unsigned long long)recs, (unsigned long long)lost);
		if (lost) {
			trace_fmt_loss(loss, sizeof(loss), lost, lost + recs);
			tout_printf(out, "# lost %s\n", loss);
		}
		tout_printf(out, "#%22s | %16s | %s\n", "Thread", "Time(s)", "Function <- Caller");
	}
	for (size_t t = 0; t < nr; t++) {
		const struct tbuf_snap *th = &snaps[t];
		char label[40], buf[32], cbuf[32];

		snprintf(label, sizeof(label), "%.15s-%u", th->comm, th->tid);
		for (size_t i = 0; i < th->nr_recs; i++) {
			const struct trace_rec *r = &th->recs[i], *c = r + 1;
			const char *name, *caller = NULL;
			uint64_t ns;

			if (TREC_TYPE(r->word) != TREC_FUNC || TREC_DEPTH(r->word) == TREC_CALLER)
				continue;
			name = site_name(TREC_SITE(r->word), buf, sizeof(buf));
			if (i + 1 < th->nr_recs && TREC_TYPE(c->word) == TREC_FUNC &&
			    TREC_DEPTH(c->word) == TREC_CALLER &&
			    TREC_SITE(c->word) == TREC_SITE(r->word)) {
				caller = trace_symbol_name((uintptr_t)c->ts);
				if (!caller) {
					snprintf(cbuf, sizeof(cbuf), "%#lx", (unsigned long)c->ts);
					caller = cbuf;
				}
			}
			ns = trace_tsc_to_ns(r->ts);
			if (fmt == SD_TRACE_FMT_CSV)
				tout_printf(out, "%u,%llu,%s,%s\n", th->tid, (unsigned long long)ns,
					    name, caller ? caller : "");
			else
				tout_printf(out, " %22s | %9llu.%06llu | %s <- %s\n", label,
					    (unsigned long long)(ns / 1000000000ULL),
					    (unsigned long long)(ns / 1000 % 1000000), name,
					    caller ? caller : "?");
		}
	}
}

int trace_render(unsigned id, int fmt, const char *tracer, struct trace_out *out)
{
	static const struct walk_ops *const ops[] = {
		[SD_TRACE_FMT_GRAPH] = &graph_ops,
		[SD_TRACE_FMT_FOLDED] = &folded_ops,
		[SD_TRACE_FMT_CHROME] = &chrome_ops,
		[SD_TRACE_FMT_CSV] = &csv_ops,
	};
	struct folded fo = { 0 };
	struct tbuf_snap *snaps = NULL;
	size_t nr = 0;
	struct walk *w;
	int ret;

	if (fmt < 0 || (size_t)fmt >= ARRAY_SIZE(ops))
		return -EINVAL;
	ret = tbuf_snapshot(id, &snaps, &nr);
	if (ret < 0)
		return ret;
	if (id == TRACER_FUNCTION || id == TRACER_THREAD) {
		render_function(fmt, tracer, snaps, nr, out);
		tbuf_snapshot_free(snaps, nr);
		return out->failed ? -ENOMEM : 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		tbuf_snapshot_free(snaps, nr);
		return -ENOMEM;
	}
	w->ops = ops[fmt];
	w->out = out;
	w->first = true;
	w->priv = &fo;
	render_header(fmt, tracer, snaps, nr, out);
	for (size_t i = 0; i < nr; i++)
		walk_thread(w, &snaps[i]);
	if (fmt == SD_TRACE_FMT_FOLDED)
		ret = folded_print(&fo, out);
	else if (fmt == SD_TRACE_FMT_CHROME)
		tout_printf(out, "\n],\"displayTimeUnit\":\"ns\"}\n");
	free(w);
	tbuf_snapshot_free(snaps, nr);
	if (!ret && out->failed)
		ret = -ENOMEM;
	return ret;
}
