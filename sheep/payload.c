/*
 * Payload memory of the front-ends (see payload.h), main thread only, so
 * no lock:
 *
 * - a cache of free buffers per power-of-two size, page-aligned (a durable
 *   write can then go to the disk directly, see store/plain.c). It keeps
 *   malloc off the request path, whose cost otherwise depends on the
 *   heap's history, and bounds what it holds;
 * - the pools of --max-inflight-bytes and the connections' shares of them:
 *   the admission rule is payload_admits';
 * - the waiters, offered the freed payload from the event loop (an
 *   eventfd), never from inside a free, whose callers walk their lists.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "internal_proto.h"
#include "list.h"
#include "event.h"
#include "logger.h"
#include "payload.h"
#include "access.h"
#include "ops.h"
#include "request.h"

#define BUF_MIN_SHIFT 12
#define BUF_MAX_SHIFT 23 /* 8 MiB: the largest payload rounds up to it */
#define BUF_CACHE_BYTES (UINT64_C(64) << 20)

struct free_buf {
	struct free_buf *next;
};

static struct free_buf *buf_cache[BUF_MAX_SHIFT + 1];
static uint64_t buf_cache_bytes;

static struct {
	uint64_t size, held;
} pools[PAYLOAD_NR_POOLS] = {
	[PAYLOAD_CLIENT] = { .size = UINT64_C(56) << 20 },
	[PAYLOAD_RESERVE] = { .size = UINT64_C(8) << 20 },
};
static LIST_HEAD(waiters);
static int event_fd = -1;
static bool event_armed;
static bool resuming; /* payload_resume walks the waiters: a put re-arms */

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
	pools[PAYLOAD_RESERVE].size = bytes / PAYLOAD_RESERVE_DIV;
	pools[PAYLOAD_CLIENT].size = bytes - pools[PAYLOAD_RESERVE].size;
}

uint64_t payload_pool_size(enum payload_pool pool)
{
	return pools[pool].size;
}

uint64_t payload_pool_held(enum payload_pool pool)
{
	return pools[pool].held;
}

/*
 * May a connection holding held in pool take need bytes more? When the
 * pool holds nothing (so that a bound below one payload cannot stall), or
 * when need fits and leaves free at least what the connection then holds.
 */
static bool payload_admits(enum payload_pool pool, uint64_t held, uint64_t need)
{
	uint64_t size = pools[pool].size, total = pools[pool].held;

	if (!total)
		return true;
	if (total > size || need > size - total)
		return false;
	return held + need <= size - total - need;
}

int payload_get(struct payload_share *s, enum payload_pool pool, uint32_t len, void **buf,
		uint32_t *cap)
{
	uint32_t class_len = UINT32_C(1) << buf_shift(len);
	uint64_t need = class_len < len ? len : class_len;

	if (!payload_admits(pool, s->held[pool], need))
		return -EAGAIN;
	*buf = payload_buf_get(len, cap);
	if (!*buf) {
		*cap = 0;
		return -ENOMEM;
	}
	pools[pool].held += *cap;
	s->held[pool] += *cap;
	return 0;
}

void payload_put(struct payload_share *s, enum payload_pool pool, void *buf, uint32_t cap)
{
	uint64_t one = 1;

	payload_buf_put(buf, cap);
	if (!cap)
		return;
	pools[pool].held -= cap;
	s->held[pool] -= cap;
	if (event_armed || (list_empty(&waiters) && !resuming))
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
	LIST_HEAD(offered);
	LIST_HEAD(kept);

	event_armed = false;
	resuming = true;
	/* a waiter resumed may wait again (its next request): at the end of the line */
	list_splice_tail_init(&waiters, &offered);
	while (!list_empty(&offered)) {
		struct payload_waiter *w = list_first_entry(&offered, struct payload_waiter, node);

		list_del(&w->node);
		if (!w->resume(w))
			list_add_tail(&w->node, &kept);
	}
	/* the ones still waiting keep their place, before the new ones */
	list_splice_tail_init(&waiters, &kept);
	list_splice_tail_init(&kept, &waiters);
	resuming = false;
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

void payload_req_none(struct request *req)
{
	req->data = &empty_payload;
	req->data_cap = 0;
}

/*
 * Peer and recovery requests are not counted: a gateway waits on its
 * peers while holding its client's payload, and a peer that waited for
 * memory held by such gateways would deadlock them; their number is
 * bounded by the worker queues. The admin ops and the other ops between
 * members draw on the reserve, so that client payload never makes them
 * wait: only when the client's address may run them (access.c), or a
 * client could take the reserve with ops that will be refused. The rest,
 * the VDI protocol (and an unknown opcode, whose payload is read before it
 * is refused), on the client pool.
 */
int payload_req_pool(const struct sd_req *rq, const uint8_t addr[16])
{
	const struct sd_op_template *op = get_sd_op(rq->opcode);

	if (!op)
		return PAYLOAD_CLIENT;
	if (op->type == OP_PEER || op->type == OP_FETCH)
		return PAYLOAD_NONE;
	if (access_class_of(op) == ACCESS_PUBLIC || access_check(op, addr) != SD_RES_SUCCESS)
		return PAYLOAD_CLIENT;
	return PAYLOAD_RESERVE;
}

/* a buffer for the reply's payload, not the client's data */
static bool is_reply_buf(const struct request *req)
{
	return !(req->rq.flags & SD_FLAG_CMD_WRITE);
}

int payload_req_alloc(struct request *req, struct payload_share *s, uint64_t *reply_bytes)
{
	uint32_t len = req->rq.data_length;
	int ret;

	if (!len) {
		payload_req_none(req);
		return 0;
	}
	if (req->mem_pool == PAYLOAD_NONE) {
		req->data = payload_buf_get(len, &req->data_cap);
		return req->data ? 0 : -ENOMEM;
	}
	ret = payload_get(s, req->mem_pool, len, &req->data, &req->data_cap);
	if (ret)
		return ret;
	req->mem_held = req->data_cap;
	if (is_reply_buf(req))
		*reply_bytes += req->mem_held;
	return 0;
}

void payload_req_free(struct request *req, struct payload_share *s, uint64_t *reply_bytes)
{
	if (req->mem_held) {
		if (is_reply_buf(req))
			*reply_bytes -= req->mem_held;
		payload_put(s, req->mem_pool, req->data, req->data_cap);
		req->mem_held = 0;
	} else if (req->data_cap) {
		payload_buf_put(req->data, req->data_cap);
	}
	payload_req_none(req);
}
