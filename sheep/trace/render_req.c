/*
 * The formats that know requests: chrome (Perfetto's JSON, a node alone)
 * and events (the lines that collie merges the nodes of a cluster with,
 * internal_proto.h), and the names of opcodes and results they print.
 */
#include <stdio.h>
#include <unistd.h>

#include "internal_proto.h"
#include "render.h"

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
	tout_printf(w->out,
		    "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
		    "\"args\":{\"name\":",
		    w->first ? "" : ",\n", (int)getpid(), w->th->tid);
	json_str(w->out, w->th->comm);
	tout_printf(w->out, "}}");
	w->first = false;
}

/* a complete event of @dur ns from @ns, in us with ns precision */
static void chrome_span(struct walk *w, const char *name, const char *cat, uint64_t ns,
			uint64_t dur, uint64_t req)
{
	tout_printf(w->out, ",\n{\"name\":");
	json_str(w->out, name);
	tout_printf(
	    w->out,
	    ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"pid\":%d,"
	    "\"tid\":%u",
	    cat, (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000),
	    (unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000), (int)getpid(),
	    w->th->tid);
	if (req)
		tout_printf(w->out, ",\"args\":{\"request\":\"%016llx\"}", (unsigned long long)req);
	tout_printf(w->out, "}");
}

static void chrome_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32];

	chrome_span(w, render_site_name(f->site_off, buf, sizeof(buf)), "function", f->entry_ns,
		    dur, f->req);
}

/* a request's part on this thread, as a slice around its functions */
static void chrome_req(struct walk *w, const struct req_mark *m)
{
	char name[80];

	if (m->begin || w->cur.id != m->id)
		return;
	snprintf(name, sizeof(name), "request %s %016llx", sd_op_name(w->cur.opcode),
		 (unsigned long long)m->id);
	chrome_span(w, name, "request", w->cur.ns, m->dur_ns, m->id);
}

static void chrome_end(struct walk *w)
{
	tout_printf(w->out, "\n],\"displayTimeUnit\":\"ns\"}\n");
}

const struct walk_ops chrome_ops = {
	.begin = chrome_begin,
	.open = render_open_none,
	.close = chrome_close,
	.req = chrome_req,
	.end = chrome_end,
};

/* ---- events ---- */

static void events_begin(struct walk *w)
{
	tout_printf(w->out, "T %u %s\n", w->th->tid, w->th->comm);
}

static void events_close(struct walk *w, const struct frame *f, uint64_t dur, bool leaf)
{
	char buf[32];

	tout_printf(w->out, "C %u %u %llu %llu %llx %s\n", w->th->tid, f->depth,
		    (unsigned long long)f->entry_ns, (unsigned long long)dur,
		    (unsigned long long)f->req, render_site_name(f->site_off, buf, sizeof(buf)));
}

static void events_lost(struct walk *w, const struct frame *f)
{
	char buf[32];

	tout_printf(w->out, "O %u %u %llu %llx %s\n", w->th->tid, f->depth,
		    (unsigned long long)f->entry_ns, (unsigned long long)f->req,
		    render_site_name(f->site_off, buf, sizeof(buf)));
}

static void events_req(struct walk *w, const struct req_mark *m)
{
	if (m->begin)
		tout_printf(w->out, "Q %u %llu %llx %x %x %llx %llu\n", w->th->tid,
			    (unsigned long long)m->ns, (unsigned long long)m->id, m->flags,
			    m->opcode, (unsigned long long)m->oid, (unsigned long long)m->wait_ns);
	else
		tout_printf(w->out, "D %u %llu %llx %x\n", w->th->tid, (unsigned long long)m->ns,
			    (unsigned long long)m->id, (unsigned)m->result);
}

const struct walk_ops events_ops = {
	.begin = events_begin,
	.open = render_open_none,
	.close = events_close,
	.lost = events_lost,
	.req = events_req,
};
