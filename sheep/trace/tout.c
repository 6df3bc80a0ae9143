/*
 * What the output formats share (render.c, render_req.c): a growable text,
 * durations and losses as text, the names of sites and of results. At the
 * bottom of the renderer: it calls none of its other files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "render.h"

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

void trace_fmt_loss(char *buf, size_t len, uint64_t lost, uint64_t total)
{
	unsigned long long tenths = total ? (unsigned long long)(lost * 1000 / total) : 0;

	if (!lost)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%llu.%llu%%: a larger --buffer-size keeps them", tenths / 10,
			 tenths % 10);
}

const char *render_site_name(uint32_t off, char *buf, size_t len)
{
	uintptr_t addr = trace_site_base + off;

	return trace_site_name(trace_site_find(addr), addr, buf, len);
}

void render_open_none(struct walk *w, const struct frame *f, bool leaf)
{
}

const char *trace_result_name(int result)
{
	switch (result) {
	case SD_RES_SUCCESS:
		return "success";
	case SD_RES_NO_OBJ:
		return "no object";
	case SD_RES_EIO:
		return "i/o error";
	case SD_RES_INVALID_PARMS:
		return "invalid parameters";
	case SD_RES_NO_VDI:
		return "no vdi";
	case SD_RES_READONLY:
		return "read-only";
	case SD_RES_OLD_NODE_VER:
	case SD_RES_NEW_NODE_VER:
		return "epoch mismatch";
	case SD_RES_NETWORK:
		return "network error";
	case TRACE_REQ_PASSED:
		return "passed to a worker";
	default:
		return "error";
	}
}
