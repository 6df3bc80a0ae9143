/*
 * Helpers of the tracer's unit tests: drive the trace operations, read
 * their output, look at the sites, run a suite.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"
#include "trace/trace_priv.h"
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
	size_t chunk = 4096, len = 0, cap = 0;
	char *text = NULL;

	for (;;) {
		/* doubled, not grown by a chunk: a large trace read in small chunks */
		if (len + chunk + 1 > cap) {
			char *t = realloc(text, cap = 2 * (len + chunk + 1));

			if (!t)
				goto out_free;
			text = t;
		}
		req.trace.format = (uint32_t)fmt;
		req.trace.tracer_flags = tracer;
		req.trace.offset = len;
		if (tt_op(SD_OP_TRACE_READ, &req, text + len, (uint32_t)chunk, &rsp) !=
		    SD_RES_SUCCESS)
			goto out_free;
		req.trace.buffer_size = rsp.trace.generation; /* the rendering read on */
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

int tt_csv_sum(const char *csv, const char *fn, uint64_t *ns)
{
	char needle[80];
	size_t nlen;
	int n = 0;

	snprintf(needle, sizeof(needle), ",%s,", fn);
	nlen = strlen(needle);
	if (ns)
		*ns = 0;
	while (csv && *csv) {
		const char *eol = strchr(csv, '\n');
		size_t len = eol ? (size_t)(eol - csv) : strlen(csv);
		const char *p = memmem(csv, len, needle, nlen);
		unsigned long long entry, dur;

		if (p) {
			n++;
			if (ns && sscanf(p + nlen, "%llu,%llu", &entry, &dur) == 2)
				*ns += dur;
		}
		csv += len + (eol ? 1 : 0);
	}
	return n;
}

int tt_csv_calls(const char *csv, const char *fn)
{
	return tt_csv_sum(csv, fn, NULL);
}

const struct trace_site *tt_site_of(void *fn)
{
	return trace_site_find((uintptr_t)fn);
}

bool tt_site_is_nop(const struct trace_site *s)
{
	return !memcmp((const void *)s->addr, trace_nop5, 5);
}

bool tt_site_is_call(const struct trace_site *s)
{
	const uint8_t *p = (const uint8_t *)s->addr;
	const uint8_t *stub = p - TRACE_STUB_SIZE;
	int32_t rel, stub_rel;

	memcpy(&rel, p + 1, sizeof(rel));
	memcpy(&stub_rel, stub + 1, sizeof(stub_rel));
	return p[0] == 0xe9 && p + 5 + rel == stub && stub[0] == 0xe8 &&
	       (uintptr_t)stub + 5 + stub_rel == (uintptr_t)trace_entry_tramp;
}

size_t tt_nr_sites_calling(void)
{
	size_t n = 0;

	for (size_t i = 0; i < trace_nr_sites; i++)
		n += tt_site_is_call(&trace_sites[i]);
	return n;
}

int tt_run_suite(struct Suite *s)
{
	SRunner *sr;
	int nr_failed;

	if (trace_init() < 0)
		return 1;
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? 1 : 0;
}
