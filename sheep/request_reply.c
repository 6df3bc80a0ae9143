/*
 * The end of a request and the close of a connection (request.c reads
 * them; request_priv.h is what the two share): requests' memory, kept for
 * the next ones; the replies, sent in the order their requests complete,
 * by the main thread or, without payload, by the worker itself; the
 * request's statistics, counted once at its end; the close of a
 * connection, which frees what it still holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "event.h"
#include "listen.h"
#include "net.h"
#include "proto_util.h"
#include "client_lock.h"
#include "ops.h"
#include "ops_exec.h"
#include "payload.h"
#include "request.h"
#include "request_priv.h"
#include "stat.h"

static void request_report_hang(struct stat_req *sr, uint64_t age_ns);

/* req's payload, given back to its connection's share and reply bytes */
static void req_free(struct request *req)
{
	payload_req_free(req, &req->ci->share, &req->ci->reply_bytes);
}

/*
 * Free requests kept for the next ones (main thread only, no lock): a
 * request costs a malloc otherwise, and gcc turns malloc + memset into a
 * calloc, which skips glibc's thread cache (some 380 instructions of the
 * 4,300 a local 4 KiB read takes on the main thread and its worker). Not
 * under ASan, which must see every use after free.
 */
#ifdef __SANITIZE_ADDRESS__ /* gcc */
#define REQ_UNDER_ASAN
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer)
#define REQ_UNDER_ASAN
#endif
#endif
#ifndef REQ_UNDER_ASAN
#define REQ_CACHE_MAX 64
static struct request *req_cache[REQ_CACHE_MAX];
static int nr_req_cache;
#endif

struct request *request_get(void)
{
#ifdef REQ_CACHE_MAX
	if (nr_req_cache)
		return req_cache[--nr_req_cache];
#endif
	struct request *req = malloc(sizeof(struct request));

	if (req)
		stat_req_track(&req->stat_track, &req->stat, request_report_hang);
	return req;
}

static void req_put(struct request *req)
{
#ifdef REQ_CACHE_MAX
	if (nr_req_cache < REQ_CACHE_MAX) {
		req_cache[nr_req_cache++] = req;
		return;
	}
#endif
	stat_req_untrack(&req->stat_track);
	free(req);
}

/* not inlined: gcc cannot see that callers hold a reference */
__attribute__((noinline)) void request_client_put(struct client_info *ci)
{
	if (--ci->refcnt == 0) {
		pthread_mutex_destroy(&ci->tx_lock);
		free(ci);
	}
}

void request_free(struct request *req)
{
	struct client_info *ci = req->ci;

	ci->nr_inflight--;
	req_free(req);
	req_put(req);
	request_client_put(ci);
}

void request_update_events(struct client_info *ci)
{
	uint32_t ev = 0;

	if (ci->dead)
		return;
	if (!ci->rx_paused && !ci->mem_wait && !ci->close_after_tx &&
	    ci->reply_bytes < MAX_REPLY_BYTES)
		ev |= EPOLLIN;
	if (ci->tx_want_out)
		ev |= EPOLLOUT;
	if (ev != ci->events) {
		ci->events = ev;
		ev_modify(ci->fd, ev);
	}
}

void request_client_close(struct client_info *ci)
{
	struct request *req, *tmp;

	if (ci->dead)
		return;
	ev_del(ci->fd);
	pthread_mutex_lock(&ci->tx_lock); /* no worker sends on fd past here */
	ci->dead = true;
	close(ci->fd);
	ci->tx_rest_len = 0;
	pthread_mutex_unlock(&ci->tx_lock);
	list_del(&ci->link);
	client_lock_closed(ci->id);
	listen_conn_del(&ci->lc);
	list_for_each_entry_safe(req, tmp, &ci->tx_queue, node) {
		list_del(&req->node);
		request_free(req);
	}
	if (ci->rx_req) {
		request_free(ci->rx_req);
		ci->rx_req = NULL;
	}
	request_client_put(ci);
}

/* what a worker's short send left (tx_lock held): 0, 1 when not all sent yet, -1 on error */
static int flush_rest(struct client_info *ci)
{
	while (ci->tx_rest_len) {
		ssize_t sent = send(ci->fd, ci->tx_rest, ci->tx_rest_len, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0)
			return errno == EAGAIN ? 1 : -1;
		ci->tx_rest_len -= sent;
		memmove(ci->tx_rest, ci->tx_rest + sent, ci->tx_rest_len);
		ci->last_active = listen_tick();
	}
	return 0;
}

/* send queued replies until the socket is full; 0, or -1 if closed */
int request_flush_tx(struct client_info *ci)
{
	int rest;

	pthread_mutex_lock(&ci->tx_lock);
	rest = flush_rest(ci);
	while (!rest && !list_empty(&ci->tx_queue)) {
		struct request *req = list_first_entry(&ci->tx_queue, struct request, node);
		uint32_t total = sizeof(req->rp) + req->rp.data_length;
		struct iovec iov[2];
		int n = 0;
		ssize_t sent;

		if (ci->tx_done < sizeof(req->rp)) {
			iov[n].iov_base = (char *)&req->rp + ci->tx_done;
			iov[n++].iov_len = sizeof(req->rp) - ci->tx_done;
			iov[n].iov_base = req->data;
			iov[n++].iov_len = req->rp.data_length;
		} else {
			iov[n].iov_base = (char *)req->data + (ci->tx_done - sizeof(req->rp));
			iov[n++].iov_len = total - ci->tx_done;
		}
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
		sent = sendmsg(ci->fd, &msg, MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			rest = -1;
			break;
		}
		ci->tx_done += sent;
		ci->last_active = listen_tick();
		if (ci->tx_done < total)
			break;
		ci->tx_done = 0;
		list_del(&req->node);
		request_free(req);
	}
	ci->tx_want_out = ci->tx_rest_len || !list_empty(&ci->tx_queue);
	pthread_mutex_unlock(&ci->tx_lock);
	if (rest < 0) {
		request_client_close(ci);
		return -1;
	}
	/* what is still in flight is answered first (a half-closed client waits for it) */
	if (!ci->tx_want_out && ci->close_after_tx && !ci->nr_inflight) {
		request_client_close(ci);
		return -1;
	}
	if (ci->rx_paused && ci->nr_inflight < MAX_INFLIGHT / 2)
		ci->rx_paused = false;
	request_update_events(ci);
	return 0;
}

#ifdef STAT_ENABLED
/* a request's bytes in and out fit the 32 bits request_count adds them in */
_Static_assert((uint64_t)SD_MAX_DATA_LEN * 2 <= UINT32_MAX, "bytes of a request");
/* the client object ops are the opcodes below 4 (0 is no op: it never ends well) */
_Static_assert(SD_OP_CREATE_AND_WRITE_OBJ == 1 && SD_OP_READ_OBJ == 2 && SD_OP_WRITE_OBJ == 3,
	       "client object opcodes");

/*
 * The request's statistics, one clock read at its end. out: the reply's
 * payload as sent (0 for an error); the payload in is a write's.
 */
static inline __attribute__((always_inline)) void
request_count(struct request *req, struct client_info *ci, int result, uint32_t out)
{
	uint64_t now = stat_clock_end(), await;
	struct stat_counters *c;
	unsigned int opcode = req->rq.opcode;
	uint32_t bytes = out;

	/*
	 * A test of the flag in memory (the VDI table counts by opcode, not by
	 * this flag) and a 32-bit add: a write's payload is at most
	 * SD_MAX_DATA_LEN (new_request clears the flag above it), out at most
	 * as much.
	 */
	if (likely(req->rq.flags & SD_FLAG_CMD_WRITE)) /* the layout: see stat_busy_enter */
		bytes += req->rq.data_length;
	c = stat_req_end_sums(&req->stat, now, bytes, result != SD_RES_SUCCESS, &await);
	/* the completion last (see stat_count_sums), in the VDI table's count if there is one */
	if (likely(result == SD_RES_SUCCESS && opcode <= SD_OP_WRITE_OBJ)) /* most are object I/O */
		stat_vdi_count(&ci->stat_vdi, &req->rq.obj.oid, opcode, bytes, await, c);
	else if (c)
		stat_count_hist(c, await);
}

/* one not answered on a connection (the daemon's own, or its client is gone) */
static __attribute__((noinline)) void request_count_unsent(struct request *req)
{
	uint32_t out = req->rp.data_length;

	/* what request_done would have sent */
	if (req->rp.result != SD_RES_SUCCESS || out > req->rq.data_length)
		out = 0;
	request_count(req, req->ci, req->rp.result, out);
}
#endif

/* a request answered on its connection (request_done): what it sent */
static inline __attribute__((always_inline)) void request_count_sent(struct request *req,
								     struct client_info *ci)
{
#ifdef STAT_ENABLED
	/* all but a statistics reader's */
	if (likely(stat_req_active(&req->stat)))
		request_count(req, ci, req->rp.result, req->rp.data_length);
#else
	(void)req;
	(void)ci;
#endif
}

/* the reply's header, from the request and its result (any thread) */
static void reply_prepare(struct request *req)
{
	int result = req->rp.result;

	req->rp.proto_ver = sd_is_internal_op(req->rq.opcode) ? SD_SHEEP_PROTO_VER : SD_PROTO_VER;
	req->rp.opcode = req->rq.opcode;
	req->rp.id = req->rq.id;
	req->rp.epoch = req->rq.epoch;
	req->rp.flags = 0;
	/* never more than the client asked for: the stream would lose step */
	if (result != SD_RES_SUCCESS || req->rp.data_length > req->rq.data_length)
		req->rp.data_length = 0;
	if (result != SD_RES_SUCCESS && result != SD_RES_VDI_NOT_LOCKED)
		sd_debug("%s id %" PRIu32 " failed: %s", req->op ? req->op->name : "request",
			 req->rq.id, sd_strerror(result));
}

void request_done(struct request *req)
{
	struct client_info *ci = req->ci;

	if (req->done) {
#ifdef STAT_ENABLED
		if (stat_req_active(&req->stat))
			request_count_unsent(req);
#endif
		req->done(req);
		return;
	}
	if (ci->dead) {
#ifdef STAT_ENABLED
		if (stat_req_active(&req->stat))
			request_count_unsent(req);
#endif
		request_free(req);
		return;
	}
	if (!req->replied)
		reply_prepare(req);
	/* counted after the test of replied: the counting's stores would have gcc test it again */
	if (req->replied) { /* a worker sent it (reply_early): only the accounting is left */
		request_count_sent(req, ci);
		ci->last_active = listen_tick();
		request_free(req);
		request_flush_tx(ci);
		return;
	}
	request_count_sent(req, ci);
	/* a reply without payload does not hold its buffer while it waits to be sent */
	if (!req->rp.data_length)
		req_free(req);
	pthread_mutex_lock(&ci->tx_lock);
	list_add_tail(&req->node, &ci->tx_queue);
	pthread_mutex_unlock(&ci->tx_lock);
	request_flush_tx(ci);
}

/*
 * On the worker, a reply without payload (a write's, an error's) of an
 * object op goes out at once when nothing is queued before it on its
 * connection: the client (a gateway waiting on this replica, or the
 * front-end) need not wait for the main thread to wake up (the tracer, 3
 * nodes, 4 KiB QD1 writes: 6-12 us from a work's end to the main thread's
 * done_handler on each node, then 10-14 us of sendmsg there). The main
 * thread still gets the request back for its accounting (request_done).
 * Not a header write of a VDI (its reply waits for every node's table),
 * not a request with its own completion. A short send keeps the rest in
 * ci->tx_rest for request_flush_tx; nothing sent leaves the reply to the main
 * thread as before.
 */
#ifdef SD_TEST_HOOKS
/*
 * Test builds only: with SD_TEST_SHORT_REPLIES in the environment, a
 * worker sends the first bytes of its reply only and leaves the rest to
 * request_flush_tx, as a full socket would (functional test 237).
 */
size_t request_short_reply_len;
#define EARLY_REPLY_LEN (request_short_reply_len ? request_short_reply_len : sizeof(struct sd_rsp))
#else
#define EARLY_REPLY_LEN sizeof(struct sd_rsp)
#endif

void request_reply_early(struct request *req)
{
	struct client_info *ci = req->ci;
	ssize_t sent;

	if (req->done || !ci || (req->op->type != OP_IO && req->op->type != OP_PEER))
		return;
	if (req->rp.result == SD_RES_SUCCESS && req->rp.data_length)
		return;
	reply_prepare(req);
	pthread_mutex_lock(&ci->tx_lock);
	/* tx_queue changes on the main thread only, under tx_lock: its emptiness is stable here */
	if (ci->dead || ci->tx_rest_len || !list_empty(&ci->tx_queue)) {
		pthread_mutex_unlock(&ci->tx_lock);
		return;
	}
	do
		sent = send(ci->fd, &req->rp, EARLY_REPLY_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (sent < 0 && errno == EINTR);
	if (sent > 0) {
		req->replied = true;
		ci->tx_rest_len = sizeof(req->rp) - sent;
		memcpy(ci->tx_rest, (const uint8_t *)&req->rp + sent, ci->tx_rest_len);
	}
	pthread_mutex_unlock(&ci->tx_lock);
}

/* stat.c's hang report for a request: its client's, then the op runner's part */
static void request_report_hang(struct stat_req *sr, uint64_t age_ns)
{
	struct request *req = container_of(sr, struct request, stat);
	char client[INET6_ADDRSTRLEN + 8] = "gone";

	if (!req->ci->dead)
		sd_peer_name(req->ci->fd, client, sizeof(client));
	ops_report_hang(req, client, age_ns);
}
