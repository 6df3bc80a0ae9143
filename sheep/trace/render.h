/*
 * The walker that the output formats share (render.c) and the formats
 * that know requests (render_req.c). Internal to the renderer.
 */
#ifndef TRACE_RENDER_H
#define TRACE_RENDER_H

#include "trace_priv.h"

struct frame {
	uint32_t site_off;
	unsigned depth;
	uint64_t entry_ns;
	uint64_t child_ns;
	uint64_t req; /* the request the thread served at its entry, 0: none */
};

/* a request marker, decoded (trace_req.h) */
struct req_mark {
	bool begin;
	uint64_t ns;
	uint64_t id;
	/* begin */
	uint32_t flags; /* SD_REQ_TRACE_* | TRACE_REQ_GATEWAY */
	uint8_t opcode;
	uint64_t oid;
	uint64_t wait_ns;
	/* end */
	int result;
	uint64_t dur_ns; /* since its begin, if the begin was seen */
};

struct walk;

/*
 * A format: begin (a thread's records start), open, close, lost (see
 * render.c), req (a request marker), end (every thread is done: the
 * trailer), step (instead of the walker: a format of the function
 * tracer's records, returns the slots it took). NULL: nothing to do.
 */
struct walk_ops {
	void (*begin)(struct walk *w);
	void (*open)(struct walk *w, const struct frame *f, bool leaf);
	void (*close)(struct walk *w, const struct frame *f, uint64_t dur, bool leaf);
	void (*lost)(struct walk *w, const struct frame *f);
	void (*req)(struct walk *w, const struct req_mark *m);
	void (*end)(struct walk *w);
	size_t (*step)(struct walk *w, size_t i);
};

struct walk {
	const struct walk_ops *ops;
	int fmt;
	const struct tbuf_snap *th;
	struct trace_out *out;
	struct frame stack[TRACE_MAX_DEPTH + 1];
	unsigned nr; /* frames open */
	bool prev_leaf;
	bool first;	       /* chrome: no comma before the first event */
	uint64_t req;	       /* the request the thread serves, 0: none */
	uint64_t req_begin_ns; /* and when it began */
	struct req_mark cur;   /* its begin marker */
	char label[40];
	void *priv;
};

extern const struct walk_ops chrome_ops, events_ops;

void render_open_none(struct walk *w, const struct frame *f, bool leaf);
/* the name of the site at offset @off, or "0x..." in @buf */
const char *render_site_name(uint32_t off, char *buf, size_t len);

/* "success", "eio", ... or "0x42" */
const char *trace_result_name(int result);

#endif
