/*
 * READ: the renderings being read, a chunk at a time (render.c makes
 * them). Runs under the trace lock, on the trace queue's worker.
 */
#include <errno.h>
#include <string.h>

#include "internal_proto.h"
#include "trace_priv.h"

int trace_errno_to_res(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return SD_RES_TRACE_TIMEOUT;
	case -ENOMEM:
		return SD_RES_NO_MEM;
	case -EINVAL:
		return SD_RES_INVALID_PARMS;
	case -EIO:
		return SD_RES_TRACE_BROKEN;
	case -EBUSY:
		return SD_RES_TRACE_FOLLOWERS;
	case -ESTALE:
		return SD_RES_TRACE_FOLLOW_GONE;
	default:
		return SD_RES_SYSTEM_ERROR;
	}
}

/*
 * The renderings being read (READ), each named by its generation: made as
 * they are read, so their memory is bounded whatever the trace's size.
 * A new one takes a free slot or ends the oldest; a START ends them all
 * (the buffers they walk may go).
 */
#define TRACE_MAX_RENDERINGS 2
static struct rendering {
	struct trace_render *r; /* NULL: a free slot */
	uint64_t generation;
	uint64_t offset; /* bytes served */
	int fmt;
	unsigned id;
} renders[TRACE_MAX_RENDERINGS];
static uint64_t render_gen;

static void rendering_end(struct rendering *g)
{
	trace_render_free(g->r);
	memset(g, 0, sizeof(*g));
}

void trace_renderings_end(void)
{
	for (unsigned i = 0; i < TRACE_MAX_RENDERINGS; i++)
		if (renders[i].r)
			rendering_end(&renders[i]);
}

/* a new rendering of tracer @id in @fmt, in a free slot or the oldest one's */
static int rendering_start(unsigned id, int fmt, bool any_tracer, struct rendering **out)
{
	struct rendering *g = &renders[0];
	struct trace_render *r;
	int ret;

	for (unsigned i = 0; i < TRACE_MAX_RENDERINGS; i++) {
		if (!renders[i].r) {
			g = &renders[i];
			break;
		}
		if (renders[i].generation < g->generation)
			g = &renders[i];
	}
	if (g->r)
		rendering_end(g);
	r = trace_render_new();
	if (!r)
		return -ENOMEM;
	ret = trace_tracer_by_id(id)->read(fmt, r);
	if (ret == -EINVAL && any_tracer && id != TRACER_GRAPH) {
		/* the last tracer has no such format: graph's records then */
		trace_render_free(r);
		r = trace_render_new();
		if (!r)
			return -ENOMEM;
		id = TRACER_GRAPH;
		ret = trace_tracer_by_id(id)->read(fmt, r);
	}
	if (ret < 0) {
		trace_render_free(r);
		return ret;
	}
	*g = (struct rendering){ r, ++render_gen, 0, fmt, id };
	*out = g;
	return 0;
}

/* the rendering that a READ past offset 0 goes on with (generation 0: the newest) */
static struct rendering *rendering_find(uint64_t generation, int fmt, unsigned id)
{
	struct rendering *g = NULL;

	for (unsigned i = 0; i < TRACE_MAX_RENDERINGS; i++) {
		struct rendering *c = &renders[i];

		if (!c->r || c->fmt != fmt || (generation && c->generation != generation))
			continue;
		if (!generation && c->id != id)
			continue;
		if (!g || c->generation > g->generation)
			g = c;
	}
	return g;
}

int trace_read_op(const struct sd_req *req, struct sd_rsp *rsp, void *data, unsigned id)
{
	int fmt = (int)req->trace.format;
	uint64_t off = req->trace.offset;
	struct rendering *g;
	char skip[4096];
	ssize_t n;

	if (off == 0) {
		int ret = rendering_start(id, fmt, !req->trace.tracer_flags, &g);

		if (ret < 0)
			return trace_errno_to_res(ret);
	} else {
		g = rendering_find(req->trace.buffer_size, fmt, id);
		/* read it from offset 0 first, and forward only */
		if (!g || off < g->offset)
			return SD_RES_INVALID_PARMS;
	}
	while (g->offset < off) {
		n = trace_render_read(g->r, skip, min_t(uint64_t, sizeof(skip), off - g->offset));
		if (n <= 0)
			break;
		g->offset += (uint64_t)n;
	}
	n = g->offset < off ? 0 : trace_render_read(g->r, data, req->data_length);
	if (n < 0) {
		rendering_end(g);
		return trace_errno_to_res((int)n);
	}
	g->offset += (uint64_t)n;
	rsp->trace.generation = g->generation;
	rsp->trace.total_length = trace_render_done(g->r) ? g->offset : UINT64_MAX;
	rsp->data_length = (uint32_t)n;
	if (trace_render_done(g->r))
		rendering_end(g);
	return SD_RES_SUCCESS;
}
