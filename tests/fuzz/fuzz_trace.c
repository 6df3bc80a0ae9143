/*
 * The trace control payloads (sheep/trace/control.c): TRACE_START's
 * NUL-separated tracer name and function patterns, its depth and buffer
 * size checks, and TRACE_STATUS, through trace_handle_op as ops.c calls it.
 *
 * control.c is compiled into this file to mark the tracer initialised
 * without trace_init() (which would patch this process): no function has a
 * trace site here, so a START that passes every check ends in NO_MATCH and
 * never patches. parse_start() is also called directly, to check that
 * every string it returns (name, patterns, options) lies inside the payload.
 *
 * Input: a 48-byte request header (opcode: START unless it is STATUS or
 * STOP), then the payload; data_length is the payload's length, as
 * request.c guarantees for a request with SD_FLAG_CMD_WRITE.
 */
#include "../../sheep/trace/control.c"

#include "fuzz.h"

/* a string parse_start returned lies inside the payload, NUL-terminated there */
static void check_inside(const char *p, const char *payload, size_t len)
{
	FUZZ_ASSERT(p >= payload && p < payload + len);
	FUZZ_ASSERT(memchr(p, '\0', payload + len - p));
}

static void check_all(const char *const *v, size_t nr, const char *payload, size_t len)
{
	FUZZ_ASSERT(nr <= TRACE_MAX_PATTERNS);
	for (size_t i = 0; i < nr; i++)
		check_inside(v[i], payload, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_req rq;
	struct sd_rsp rsp;
	struct start_args a;
	size_t len;
	char *payload;
	int ret;

	if (size < sizeof(rq))
		return 0;
	memcpy(&rq, data, sizeof(rq));
	len = size - sizeof(rq);
	payload = malloc(len ? len : 1);
	if (!payload)
		return 0;
	memcpy(payload, data + sizeof(rq), len);
	rq.data_length = (uint32_t)len;

	if (parse_start(payload, len, &a) == SD_RES_SUCCESS && len) {
		check_inside(a.tracer, payload, len);
		check_all(a.pats, a.nr_pats, payload, len);
		check_all(a.skip, a.nr_skip, payload, len);
		check_all(a.roots, a.nr_roots, payload, len);
		check_all(a.main_only, a.nr_main_only, payload, len);
		check_all(a.worker_only, a.nr_worker_only, payload, len);
		if (a.thread)
			check_inside(a.thread, payload, len);
		trace_find_tracer(a.tracer);
	}

	if (rq.opcode != SD_OP_TRACE_STATUS && rq.opcode != SD_OP_TRACE_STOP)
		rq.opcode = SD_OP_TRACE_START;
	init_state = INIT_DONE;
	memset(&rsp, 0, sizeof(rsp));
	ret = trace_handle_op(&rq, &rsp, len ? payload : NULL);
	/* nothing is patched without sites: a START can only fail */
	FUZZ_ASSERT(rq.opcode != SD_OP_TRACE_START || ret != SD_RES_SUCCESS);
	FUZZ_ASSERT(trace_state == SD_TRACE_STATE_OFF);
	FUZZ_ASSERT(rsp.data_length <= rq.data_length);
	free(payload);
	return 0;
}
