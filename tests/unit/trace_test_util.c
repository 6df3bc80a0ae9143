/* Helpers of the tracer's unit tests: drive the four trace operations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"
#include "trace_test.h"

int tt_op(uint8_t opcode, struct sd_req *req, void *data, uint32_t len, struct sd_rsp *rsp)
{
	req->proto_ver = SD_SHEEP_PROTO_VER;
	req->opcode = opcode;
	req->data_length = len;
	memset(rsp, 0, sizeof(*rsp));
	return trace_handle_op(req, rsp, data);
}

int tt_start(const char *tracer, const char *const *pats, uint32_t depth, uint64_t bsize)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char buf[1024];
	size_t len = 0;

	len += (size_t)snprintf(buf, sizeof(buf), "%s", tracer) + 1;
	for (; pats && *pats; pats++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s", *pats) + 1;
	req.flags = SD_FLAG_CMD_WRITE;
	req.trace.depth = depth;
	req.trace.buffer_size = bsize;
	return tt_op(SD_OP_TRACE_START, &req, buf, (uint32_t)len, &rsp);
}

int tt_stop(void)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;

	return tt_op(SD_OP_TRACE_STOP, &req, NULL, 0, &rsp);
}

int tt_status(struct sd_trace_status *st)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;

	return tt_op(SD_OP_TRACE_STATUS, &req, st, sizeof(*st), &rsp);
}

char *tt_read(int fmt)
{
	return tt_read_tracer(fmt, 0);
}

int tt_stop_tracer(const char *name)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	char buf[64];

	snprintf(buf, sizeof(buf), "%s", name);
	req.flags = SD_FLAG_CMD_WRITE;
	return tt_op(SD_OP_TRACE_STOP, &req, buf, (uint32_t)strlen(buf) + 1, &rsp);
}

char *tt_read_tracer(int fmt, uint32_t tracer)
{
	struct sd_req req = { 0 };
	struct sd_rsp rsp;
	size_t chunk = 4096, len = 0;
	char *text = NULL;

	for (;;) {
		char *t = realloc(text, len + chunk + 1);

		if (!t)
			goto out_free;
		text = t;
		req.trace.format = (uint32_t)fmt;
		req.trace.tracer_flags = tracer;
		req.trace.offset = len;
		if (tt_op(SD_OP_TRACE_READ, &req, text + len, (uint32_t)chunk, &rsp) !=
		    SD_RES_SUCCESS)
			goto out_free;
		len += rsp.data_length;
		if (len >= rsp.trace.total_length || !rsp.data_length)
			break;
	}
	text[len] = '\0';
	return text;
out_free:
	free(text);
	return NULL;
}

int tt_count(const char *text, const char *needle)
{
	int n = 0;

	while (text && *text) {
		const char *eol = strchr(text, '\n');
		size_t len = eol ? (size_t)(eol - text) : strlen(text);

		if (memmem(text, len, needle, strlen(needle)))
			n++;
		text += len + (eol ? 1 : 0);
	}
	return n;
}
