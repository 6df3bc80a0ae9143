/*
 * Payload memory of the front-ends (this protocol's connections in
 * request.c and NBD's), main thread only, so no lock:
 *
 * - a cache of free buffers per power-of-two size, page-aligned (a durable
 *   write can then go to the disk directly, see store/plain.c). It keeps
 *   malloc off the request path, whose cost otherwise depends on the
 *   heap's history, and bounds what it holds;
 * - one bound on the payload in flight, --max-inflight-bytes: a request
 *   whose payload would go past it waits, its header read, with its
 *   connection out of the poll set (backpressure: TCP stops the client),
 *   until enough payload is freed. Nothing is failed or dropped. One holder
 *   is always let through, however large, so that a bound below one
 *   payload cannot stall;
 * - the waiters, resumed first come first from the event loop (an eventfd)
 *   once payload was freed, never from inside a free, whose callers walk
 *   their lists.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "event.h"
#include "logger.h"
#include "sheep_priv.h"

#define BUF_MIN_SHIFT 12
#define BUF_MAX_SHIFT 23 /* 8 MiB: the largest payload rounds up to it */
#define BUF_CACHE_BYTES (UINT64_C(64) << 20)

struct free_buf {
	struct free_buf *next;
};

static struct free_buf *buf_cache[BUF_MAX_SHIFT + 1];
static uint64_t buf_cache_bytes;

static uint64_t inflight_bytes, max_inflight_bytes = UINT64_C(64) << 20;
static LIST_HEAD(waiters);
static int event_fd = -1;
static bool event_armed;

static unsigned buf_shift(uint32_t len)
{
	unsigned shift = BUF_MIN_SHIFT;

	while (shift < BUF_MAX_SHIFT && (UINT32_C(1) << shift) < len)
		shift++;
	return shift;
}

void *payload_buf_get(uint32_t len, uint32_t *cap)
{
	unsigned shift = buf_shift(len);
	struct free_buf *b = buf_cache[shift];

	if ((UINT32_C(1) << shift) < len) /* beyond the largest class: plain malloc */
		return (*cap = len), malloc(len);
	*cap = UINT32_C(1) << shift;
	if (b) {
		buf_cache[shift] = b->next;
		buf_cache_bytes -= *cap;
		return b;
	}
	return aligned_alloc(UINT32_C(1) << BUF_MIN_SHIFT, *cap);
}

void payload_buf_put(void *p, uint32_t cap)
{
	unsigned shift = buf_shift(cap);
	struct free_buf *b = p;

	if (!p)
		return;
	if ((UINT32_C(1) << shift) != cap || buf_cache_bytes + cap > BUF_CACHE_BYTES) {
		free(p);
		return;
	}
	b->next = buf_cache[shift];
	buf_cache[shift] = b;
	buf_cache_bytes += cap;
}

void payload_set_max(uint64_t bytes)
{
	max_inflight_bytes = bytes;
}

int payload_get(uint32_t len, void **buf, uint32_t *cap)
{
	uint32_t class_len = UINT32_C(1) << buf_shift(len);
	uint64_t need = class_len < len ? len : class_len;

	if (inflight_bytes && inflight_bytes + need > max_inflight_bytes)
		return -EAGAIN;
	*buf = payload_buf_get(len, cap);
	if (!*buf) {
		*cap = 0;
		return -ENOMEM;
	}
	inflight_bytes += *cap;
	return 0;
}

void payload_put(void *buf, uint32_t cap)
{
	uint64_t one = 1;

	payload_buf_put(buf, cap);
	if (!cap)
		return;
	inflight_bytes -= cap;
	if (event_armed || list_empty(&waiters))
		return;
	if (write(event_fd, &one, sizeof(one)) == sizeof(one))
		event_armed = true;
}

void payload_wait(struct payload_waiter *w)
{
	list_add_tail(&w->node, &waiters);
}

void payload_resume(void)
{
	event_armed = false;
	while (!list_empty(&waiters)) {
		struct payload_waiter *w = list_first_entry(&waiters, struct payload_waiter, node);

		list_del(&w->node);
		if (!w->resume(w)) {
			list_add(&w->node, &waiters);
			return;
		}
	}
}

static void payload_event(int fd, uint32_t events, void *data)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		sd_debug("payload event: %m");
	payload_resume();
}

int payload_init(void)
{
	event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (event_fd < 0)
		return -errno;
	return ev_add(event_fd, EPOLLIN, payload_event, NULL);
}

/* ---- a request's payload (request.c's connections) ---- */

/* a valid buffer for a request without payload: handlers may memcpy 0 bytes */
static uint64_t empty_payload;

/* a buffer for the reply's payload, not the client's data */
static bool is_reply_buf(const struct request *req)
{
	return !(req->rq.flags & SD_FLAG_CMD_WRITE);
}

void payload_req_none(struct request *req)
{
	req->data = &empty_payload;
	req->data_cap = 0;
}

int payload_req_alloc(struct request *req, bool counted, uint64_t *reply_bytes)
{
	uint32_t len = req->rq.data_length;
	int ret;

	if (!len) {
		payload_req_none(req);
		return 0;
	}
	if (!counted) {
		req->data = payload_buf_get(len, &req->data_cap);
		return req->data ? 0 : -ENOMEM;
	}
	ret = payload_get(len, &req->data, &req->data_cap);
	if (ret)
		return ret;
	req->mem_held = req->data_cap;
	if (is_reply_buf(req))
		*reply_bytes += req->mem_held;
	return 0;
}

void payload_req_free(struct request *req, uint64_t *reply_bytes)
{
	if (req->mem_held) {
		if (is_reply_buf(req))
			*reply_bytes -= req->mem_held;
		payload_put(req->data, req->data_cap);
		req->mem_held = 0;
	} else if (req->data_cap) {
		payload_buf_put(req->data, req->data_cap);
	}
	payload_req_none(req);
}
