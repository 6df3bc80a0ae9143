/*
 * The control path: trace_init, the four trace operations and shutdown.
 * Everything here runs under the trace lock, on the daemon's main thread.
 *
 * START chooses the sites (fnmatch on their names, or "0x..." for a site
 * without a symbol), starts a new session (buffers are reset lazily by
 * their threads) and patches the chosen sites with the world stopped.
 * STOP puts NOPs back; the records stay readable until the next START.
 * READ at offset 0 renders a snapshot (generation + 1), later offsets serve
 * chunks of it.
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "trace.h"
#include "trace_priv.h"

#define TRACE_MAX_PATTERNS 64

enum init_state { INIT_NONE, INIT_DONE, INIT_FAILED };

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static enum init_state init_state;
static int trace_state = SD_TRACE_STATE_OFF;
static uint32_t nr_patched;
static uint64_t buffer_size = TRACE_DEFAULT_BUFFER;

static struct {
	struct trace_out out;
	uint64_t generation;
	int fmt;
	bool valid;
} snap;

int trace_init(void)
{
	int ret;

	pthread_mutex_lock(&trace_lock);
	if (init_state == INIT_DONE) {
		ret = 0;
		goto out_unlock;
	}
	ret = trace_patch_init();
	if (ret == 0)
		ret = trace_sites_init();
	if (ret < 0) {
		init_state = INIT_FAILED;
		trace_state = SD_TRACE_STATE_BROKEN;
		sd_err("tracer unavailable: %s", strerror(-ret));
		goto out_unlock;
	}
	trace_clock_calibrate();
	init_state = INIT_DONE;
out_unlock:
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

static int errno_to_res(int err)
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
	default:
		return SD_RES_SYSTEM_ERROR;
	}
}

static void mark_broken(void)
{
	trace_state = SD_TRACE_STATE_BROKEN;
	__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
	nr_patched = 0;
}

/* Split the payload into tracer name and patterns. SD_RES_*. */
static int parse_start(const char *data, size_t len, const char **tracer, const char **pats,
		       size_t *nr_pats)
{
	size_t off = 0;

	*tracer = "";
	*nr_pats = 0;
	if (!len)
		return SD_RES_SUCCESS;
	if (data[len - 1] != '\0')
		return SD_RES_INVALID_PARMS;
	*tracer = data;
	off = strlen(data) + 1;
	while (off < len) {
		if (*nr_pats == TRACE_MAX_PATTERNS)
			return SD_RES_INVALID_PARMS;
		if (data[off]) /* an empty pattern selects nothing: ignore it */
			pats[(*nr_pats)++] = data + off;
		off += strlen(data + off) + 1;
	}
	return SD_RES_SUCCESS;
}

static bool site_matches(size_t i, const char **pats, size_t nr_pats)
{
	char buf[32];
	const char *name = trace_site_name(&trace_sites[i], 0, buf, sizeof(buf));

	if (!nr_pats)
		return true;
	for (size_t p = 0; p < nr_pats; p++)
		if (!fnmatch(pats[p], name, 0))
			return true;
	return false;
}

static uint64_t pow2_records(uint64_t bytes)
{
	uint64_t n = 1;

	while (n * sizeof(struct trace_rec) < bytes)
		n <<= 1;
	return n;
}

static int trace_start(const struct sd_req *req, const char *data)
{
	const char *pats[TRACE_MAX_PATTERNS], *name;
	const struct tracer_ops *tracer;
	uint64_t bsize = req->trace.buffer_size ? req->trace.buffer_size : TRACE_DEFAULT_BUFFER;
	uint32_t depth = req->trace.depth ? req->trace.depth : TRACE_MAX_DEPTH;
	size_t nr_pats, nr_want = 0;
	uint8_t *want;
	int ret;

	if (trace_state == SD_TRACE_STATE_BROKEN)
		return SD_RES_TRACE_BROKEN;
	if (trace_state == SD_TRACE_STATE_ON)
		return SD_RES_TRACE_BUSY;
	ret = parse_start(data, req->data_length, &name, pats, &nr_pats);
	if (ret != SD_RES_SUCCESS)
		return ret;
	tracer = trace_find_tracer(name);
	if (!tracer || depth > TRACE_MAX_DEPTH || bsize > TRACE_MAX_BUFFER)
		return SD_RES_INVALID_PARMS;
	if (bsize < TRACE_MIN_BUFFER)
		bsize = TRACE_MIN_BUFFER;

	want = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	if (!want)
		return SD_RES_NO_MEM;
	for (size_t i = 0; i < trace_nr_sites; i++)
		if (site_matches(i, pats, nr_pats)) {
			want[i] = 1;
			nr_want++;
		}
	if (!nr_want) {
		ret = SD_RES_NO_MATCH;
		goto out_free;
	}
	ret = tracer->start();
	if (ret < 0) {
		ret = errno_to_res(ret);
		goto out_free;
	}
	tbuf_reap();
	buffer_size = pow2_records(bsize) * sizeof(struct trace_rec);
	trace_hot.nr_records = pow2_records(bsize);
	trace_hot.depth_limit = depth;
	trace_hot.tracer = tracer;
	__atomic_add_fetch(&trace_hot.session, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&trace_hot.active, 1, __ATOMIC_RELEASE);
	ret = trace_patch(want);
	if (ret < 0) {
		__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
		tracer->stop();
		if (ret == -EIO)
			mark_broken();
		sd_err("cannot start tracing: %s", strerror(-ret));
		ret = errno_to_res(ret);
		goto out_free;
	}
	trace_state = SD_TRACE_STATE_ON;
	nr_patched = (uint32_t)nr_want;
	snap.valid = false;
	sd_info("tracing %zu of %zu functions with %s", nr_want, trace_nr_sites, tracer->name);
	ret = SD_RES_SUCCESS;
out_free:
	free(want);
	return ret;
}

static int trace_stop(void)
{
	uint8_t *want;
	int ret;

	if (trace_state != SD_TRACE_STATE_ON)
		return trace_state == SD_TRACE_STATE_BROKEN ? SD_RES_TRACE_BROKEN
							    : SD_RES_TRACE_BUSY;
	want = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	if (!want)
		return SD_RES_NO_MEM;
	ret = trace_patch(want);
	free(want);
	if (ret == -ETIMEDOUT)
		return SD_RES_TRACE_TIMEOUT; /* still tracing: the caller may retry */
	__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
	trace_hot.tracer->stop();
	if (ret < 0) {
		mark_broken();
		return SD_RES_TRACE_BROKEN;
	}
	trace_state = SD_TRACE_STATE_OFF;
	nr_patched = 0;
	sd_info("tracing stopped");
	return SD_RES_SUCCESS;
}

static int trace_status(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	struct sd_trace_status st;
	const struct tracer_ops *t = trace_hot.tracer ? trace_hot.tracer : trace_find_tracer("");

	if (req->data_length < sizeof(st))
		return SD_RES_INVALID_PARMS;
	memset(&st, 0, sizeof(st));
	if (t)
		strncpy(st.tracer, t->name, sizeof(st.tracer) - 1);
	st.state = (uint32_t)trace_state;
	st.nr_sites_patched = nr_patched;
	st.nr_sites_total = (uint32_t)trace_nr_sites;
	tbuf_counts(&st.nr_threads, &st.nr_events, &st.nr_lost);
	st.buffer_size = buffer_size;
	st.depth = trace_hot.depth_limit;
	memcpy(data, &st, sizeof(st));
	rsp->data_length = sizeof(st);
	return SD_RES_SUCCESS;
}

static int trace_read(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	int fmt = (int)req->trace.format;
	uint64_t off = req->trace.offset;
	size_t n;

	if (req->trace.format > SD_TRACE_FMT_CSV)
		return SD_RES_INVALID_PARMS;
	if (off == 0) {
		const struct tracer_ops *t = trace_hot.tracer ? trace_hot.tracer
							      : trace_find_tracer("");
		int ret;

		tout_free(&snap.out);
		snap.valid = false;
		snap.generation++;
		ret = t ? t->read(fmt, &snap.out) : trace_render(fmt, "graph", &snap.out);
		if (ret < 0) {
			tout_free(&snap.out);
			return errno_to_res(ret);
		}
		snap.fmt = fmt;
		snap.valid = true;
	} else if (!snap.valid || snap.fmt != fmt) {
		return SD_RES_INVALID_PARMS; /* read from offset 0 first */
	}
	rsp->trace.total_length = snap.out.len;
	rsp->trace.generation = snap.generation;
	if (off >= snap.out.len) {
		rsp->data_length = 0;
		return SD_RES_SUCCESS;
	}
	n = min_t(size_t, req->data_length, snap.out.len - off);
	if (n)
		memcpy(data, snap.out.buf + off, n);
	rsp->data_length = (uint32_t)n;
	return SD_RES_SUCCESS;
}

int trace_handle_op(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	int ret;

	rsp->data_length = 0;
	if (req->data_length && !data)
		return SD_RES_INVALID_PARMS;
	pthread_mutex_lock(&trace_lock);
	if (init_state != INIT_DONE && req->opcode != SD_OP_TRACE_STATUS &&
	    req->opcode != SD_OP_TRACE_READ) {
		ret = init_state == INIT_FAILED ? SD_RES_TRACE_BROKEN : SD_RES_NO_SUPPORT;
		goto out_unlock;
	}
	switch (req->opcode) {
	case SD_OP_TRACE_START:
		ret = trace_start(req, data);
		break;
	case SD_OP_TRACE_STOP:
		ret = trace_stop();
		break;
	case SD_OP_TRACE_STATUS:
		ret = trace_status(req, rsp, data);
		break;
	case SD_OP_TRACE_READ:
		ret = trace_read(req, rsp, data);
		break;
	default:
		ret = SD_RES_INVALID_PARMS;
		break;
	}
out_unlock:
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

void trace_shutdown(void)
{
	pthread_mutex_lock(&trace_lock);
	if (init_state == INIT_DONE && trace_state == SD_TRACE_STATE_ON) {
		int ret = trace_patch_all_off();

		if (ret < 0)
			sd_err("cannot stop tracing at shutdown: %s", strerror(-ret));
		__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
		trace_state = SD_TRACE_STATE_OFF;
		nr_patched = 0;
	}
	tout_free(&snap.out);
	snap.valid = false;
	pthread_mutex_unlock(&trace_lock);
}
