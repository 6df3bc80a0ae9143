/*
 * Connections and the life of a request, on the main thread.
 *
 * A connection reads whole requests (the 48-byte header, then data_length
 * bytes when SD_FLAG_CMD_WRITE is set) without blocking, hands each to its
 * op's queue, and sends replies in the order they complete: clients match
 * them by id. A request whose header is bad still has its payload consumed
 * so that the stream stays in step, then gets an error result; a payload
 * too large to consume closes the connection after the error reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

#include "event.h"
#include "net.h"
#include "proto_util.h"
#include "sheep_priv.h"

/* requests in flight on one connection before it stops reading more */
#define MAX_INFLIGHT 256
/* requests read from one connection per wake-up, for fairness */
#define RX_BATCH 16
/*
 * Reply payload one connection may hold (the buffers of its reads in
 * flight and of its replies not sent yet) before it stops reading more
 * requests: a client that pipelines reads and never reads the replies pins
 * this much (and one request more), not its whole pipeline.
 */
#define MAX_REPLY_BYTES (UINT64_C(16) << 20)

struct client_info {
	int fd;
	int refcnt; /* the connection itself + every request not yet freed */
	int nr_inflight;
	bool dead;
	bool close_after_tx;
	bool rx_paused;
	bool mem_wait; /* rx_req waits for payload memory (a payload waiter) */
	struct payload_waiter mem_waiter;
	uint64_t reply_bytes; /* payload held for replies (MAX_REPLY_BYTES) */
	uint32_t events;
	uint8_t addr[16]; /* the client's address, IPv6 or v4-mapped */

	struct sd_req hdr;
	uint32_t hdr_done;
	struct request *rx_req;
	uint32_t rx_done;

	struct list_head tx_queue;
	uint32_t tx_done;
	/*
	 * A worker may send a reply without payload itself (reply_early):
	 * tx_lock orders its sendmsg with flush_tx's and with the close of fd.
	 * What a worker's short send left of its reply is in tx_rest, sent by
	 * flush_tx before the queue. Under tx_lock: fd's close and dead (the
	 * main thread writes them), tx_rest, tx_rest_len and tx_queue's
	 * emptiness (for the worker's read; only the main thread changes it).
	 */
	pthread_mutex_t tx_lock;
	uint8_t tx_rest[sizeof(struct sd_rsp)];
	uint32_t tx_rest_len;
	bool tx_want_out; /* flush_tx left something to send: poll for EPOLLOUT */

	struct list_node link; /* in the list of every connection */
	uint64_t rx_start;     /* tick when the request being read began */
	uint64_t last_active;  /* tick of the last byte read or reply sent */
	/* the statistics' entry of the VDI served last */
	struct stat_vdi_cache stat_vdi;
};

/*
 * Connection accounting (main thread only): every connection is on one
 * list, counted, and looked at once per tick (1 s) for the timeouts. At
 * max_clients connections the listening sockets are not polled until one
 * closes: the next clients wait in the backlog, nothing spins.
 */
static LIST_HEAD(all_clients);
static int nr_clients, max_clients;
static uint64_t tick; /* seconds since the first connection timer */
static int tick_timer_fd = -1;
static bool at_client_limit;
/* listen.c's: a connection closed below the limit request_accept reported */
static void (*room_fn)(void);

static void client_handler(int fd, uint32_t events, void *data);
static void request_report_hang(struct stat_req *sr, uint64_t age_ns);

/*
 * Peer and recovery requests are not counted against the payload bound: a
 * gateway waits on its peers while holding its client's payload, and a
 * peer that waited for memory held by such gateways would deadlock them;
 * their number is bounded by the worker queues.
 */
static bool mem_counted(const struct sd_req *rq)
{
	const struct sd_op_template *op = get_sd_op(rq->opcode);

	return !op || (op->type != OP_PEER && op->type != OP_FETCH);
}

static void update_events(struct client_info *ci);
static __attribute__((noinline)) void client_put(struct client_info *ci);

static void client_rx(struct client_info *ci);

/*
 * The request whose header ci has read may have its payload now: go on
 * with it (a read has nothing more to arrive: no poll event would come for
 * it). false, with nothing changed, when it still does not fit.
 */
static bool client_mem_resume(struct payload_waiter *w)
{
	struct client_info *ci = container_of(w, struct client_info, mem_waiter);
	struct request *req = ci->rx_req;

	if (!ci->dead && req) {
		int ret = payload_req_alloc(req, mem_counted(&req->rq), &req->ci->reply_bytes);

		if (ret == -EAGAIN)
			return false;
		if (ret) {
			ci->close_after_tx = true;
			req->rq.flags &= ~SD_FLAG_CMD_WRITE;
			req->rp.result = SD_RES_NO_MEM;
		}
	}
	ci->mem_wait = false;
	update_events(ci);
	if (!ci->dead)
		client_rx(ci);
	client_put(ci);
	return true;
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

static struct request *req_get(void)
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
static __attribute__((noinline)) void client_put(struct client_info *ci)
{
	if (--ci->refcnt == 0) {
		pthread_mutex_destroy(&ci->tx_lock);
		free(ci);
	}
}

static void free_request(struct request *req)
{
	struct client_info *ci = req->ci;

	ci->nr_inflight--;
	payload_req_free(req, &req->ci->reply_bytes);
	req_put(req);
	client_put(ci);
}

static void update_events(struct client_info *ci)
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

static void close_client(struct client_info *ci)
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
	nr_clients--;
	if (at_client_limit && nr_clients < max_clients) {
		at_client_limit = false;
		if (room_fn)
			room_fn();
	}
	list_for_each_entry_safe(req, tmp, &ci->tx_queue, node) {
		list_del(&req->node);
		free_request(req);
	}
	if (ci->rx_req) {
		free_request(ci->rx_req);
		ci->rx_req = NULL;
	}
	client_put(ci);
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
		ci->last_active = tick;
	}
	return 0;
}

/* send queued replies until the socket is full; 0, or -1 if closed */
static int flush_tx(struct client_info *ci)
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
		ci->last_active = tick;
		if (ci->tx_done < total)
			break;
		ci->tx_done = 0;
		list_del(&req->node);
		free_request(req);
	}
	ci->tx_want_out = ci->tx_rest_len || !list_empty(&ci->tx_queue);
	pthread_mutex_unlock(&ci->tx_lock);
	if (rest < 0) {
		close_client(ci);
		return -1;
	}
	/* what is still in flight is answered first (a half-closed client waits for it) */
	if (!ci->tx_want_out && ci->close_after_tx && !ci->nr_inflight) {
		close_client(ci);
		return -1;
	}
	if (ci->rx_paused && ci->nr_inflight < MAX_INFLIGHT / 2)
		ci->rx_paused = false;
	update_events(ci);
	return 0;
}

static bool is_client_obj_op(uint8_t opcode)
{
	return opcode == SD_OP_READ_OBJ || opcode == SD_OP_WRITE_OBJ ||
	       opcode == SD_OP_CREATE_AND_WRITE_OBJ;
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
		free_request(req);
		return;
	}
	if (!req->replied)
		reply_prepare(req);
	/* counted after the test of replied: the counting's stores would have gcc test it again */
	if (req->replied) { /* a worker sent it (reply_early): only the accounting is left */
		request_count_sent(req, ci);
		ci->last_active = tick;
		free_request(req);
		flush_tx(ci);
		return;
	}
	request_count_sent(req, ci);
	/* a reply without payload does not hold its buffer while it waits to be sent */
	if (!req->rp.data_length)
		payload_req_free(req, &req->ci->reply_bytes);
	pthread_mutex_lock(&ci->tx_lock);
	list_add_tail(&req->node, &ci->tx_queue);
	pthread_mutex_unlock(&ci->tx_lock);
	flush_tx(ci);
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
 * ci->tx_rest for flush_tx; nothing sent leaves the reply to the main
 * thread as before.
 */
#ifdef SD_TEST_HOOKS
/*
 * Test builds only: with SD_TEST_SHORT_REPLIES in the environment, a
 * worker sends the first bytes of its reply only and leaves the rest to
 * flush_tx, as a full socket would (functional test 237).
 */
static size_t short_reply_len;
#define EARLY_REPLY_LEN (short_reply_len ? short_reply_len : sizeof(struct sd_rsp))
#else
#define EARLY_REPLY_LEN sizeof(struct sd_rsp)
#endif

static void reply_early(struct request *req)
{
	struct client_info *ci = req->ci;
	uint32_t vid;
	ssize_t sent;

	if (req->done || !ci || (req->op->type != OP_IO && req->op->type != OP_PEER))
		return;
	if (req->rp.result == SD_RES_SUCCESS &&
	    (req->rp.data_length || vdi_is_header_write(&req->rq, &vid)))
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

static void do_work(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	req->rp.result = req->op->process(req);
	reply_early(req);
}

static void work_done(struct work *w)
{
	struct request *req = container_of(w, struct request, work);
	uint32_t vid;

	/* every node's VDI table learns a header a client wrote before the client does */
	if (req->rp.result == SD_RES_SUCCESS && vdi_is_header_write(&req->rq, &vid))
		return ordered_notify_header(req, vid);
	request_done(req);
}

static void finish_with(struct request *req, int result)
{
	req->rp.result = result;
	request_done(req);
}

/* the request is whole: run it or answer its error */
/* client requests that came while this node was joining (main thread only) */
static LIST_HEAD(join_waiters);

/*
 * Member ops refused by access.c wait a little before the refusal: the
 * members do not apply a join at the same moment, and a node that has just
 * joined may ask a member (or be asked by one) before that member, or the
 * node itself, has it in its list. They are checked again every
 * ACCESS_RETRY_MS, and refused after ACCESS_WAIT_MS. (Admin ops are
 * refused at once: the one a joining node sends, STAT_CLUSTER, is retried
 * by the joining node itself.)
 */
#define ACCESS_RETRY_MS 100
#define ACCESS_WAIT_MS 2000
static LIST_HEAD(access_waiters);
static int access_timer_fd = -1;

static void access_park(struct request *req)
{
	struct itimerspec its = { .it_value = { 0, ACCESS_RETRY_MS * 1000000L } };

	if (list_empty(&access_waiters))
		timerfd_settime(access_timer_fd, 0, &its, NULL);
	list_add_tail(&req->node, &access_waiters);
}

/* the access check of dispatch(): true when req may go on */
static bool access_ok(struct request *req)
{
	int ret = access_check(req->op, req->ci->addr);

	if (ret == SD_RES_SUCCESS)
		return true;
	if (!req->ci->dead && access_timer_fd >= 0 && access_class_of(req->op) == ACCESS_MEMBER &&
	    stat_clock_ns(stat_clock() - req->start) < ACCESS_WAIT_MS * UINT64_C(1000000)) {
		access_park(req);
		return false;
	}
	access_log_refusal(req->op, req->ci->addr);
	finish_with(req, ret);
	return false;
}

static void dispatch(struct request *req)
{
	int ret = req->rp.result;

	if (ret != SD_RES_SUCCESS)
		return finish_with(req, ret);
	req->op = get_sd_op(req->rq.opcode);
	if (!req->op) {
		sd_log_ratelimited(60, SDOG_WARNING, "unknown opcode 0x%02x", req->rq.opcode);
		return finish_with(req, SD_RES_INVALID_PARMS);
	}
	if (sys.shutting_down)
		return finish_with(req, SD_RES_SHUTDOWN);
	if (!access_ok(req))
		return;
	/* after a stall (SIGSTOP): learn of an eviction before serving (heartbeat); a
	   parked request's start is old, its waking loop checks with a fresh clock */
	group_catch_up(req->start);
	/* a client's request waits until this node knows the cluster it joined */
	if (!req->op->force && req->op->type != OP_PEER && req->op->type != OP_FETCH &&
	    recovery_is_joining()) {
		/* for as long as the nodes of the cluster's last epoch take to come back */
		if (recovery_join_waits())
			return finish_with(req, SD_RES_WAIT_FOR_JOIN);
		list_add_tail(&req->node, &join_waiters);
		return;
	}
	/*
	 * A peer op may reach a node that has not applied the format yet (the
	 * order is total, the moment each node applies it is not): its epoch
	 * check answers, and the sender retries until this node catches up.
	 * An ordered op is checked where it is applied (ordered.c), after the
	 * format that came before it in the order: a client that formatted
	 * through one node may create a VDI through another at once.
	 */
	if (!req->op->force && req->op->type != OP_PEER && req->op->type != OP_FETCH &&
	    req->op->type != OP_ORDERED && !group_is_formatted())
		return finish_with(req, SD_RES_WAIT_FOR_FORMAT);
	/* restarted alone, its copies may be old: nothing until its last epoch's nodes are back */
	if (!req->op->force && group_is_waiting())
		return finish_with(req, SD_RES_WAIT_FOR_JOIN);
	/* a joining node's cluster worker is busy with the join, which may wait long */
	if (req->op->type == OP_MAIN ||
	    (req->op->opcode == SD_OP_STAT_CLUSTER && recovery_is_joining()))
		return finish_with(req, req->op->process(req));
	switch (req->op->type) {
	case OP_MAIN:
		return finish_with(req, req->op->process(req));
	case OP_IO:
		if (req->op->try_inline && req->op->try_inline(req))
			return request_done(req);
		req->work.fn = do_work;
		req->work.done = work_done;
		wq_queue_at(io_wq, &req->work, req->start);
		break;
	case OP_CLUSTER:
		req->work.fn = do_work;
		req->work.done = work_done;
		wq_queue_at(cluster_wq, &req->work, req->start);
		break;
	case OP_ORDERED:
		ordered_submit(req);
		break;
	case OP_PEER:
		req->work.fn = do_work;
		req->work.done = work_done;
		wq_queue_at(peer_wq, &req->work, req->start);
		break;
	case OP_FETCH:
		req->work.fn = do_work;
		req->work.done = work_done;
		wq_queue_at(fetch_wq, &req->work, req->start);
		break;
	case OP_TRACE:
		req->work.fn = do_work;
		req->work.done = work_done;
		wq_queue_at(trace_wq, &req->work, req->start);
		break;
	}
}

void request_join_done(void)
{
	struct request *req, *next;
	LIST_HEAD(waiters);

	list_splice_tail_init(&join_waiters, &waiters);
	list_for_each_entry_safe(req, next, &waiters, node) {
		list_del(&req->node);
		group_catch_up(stat_clock());
		dispatch(req);
	}
}

static void access_retry(int fd, uint32_t events, void *data)
{
	struct request *req, *next;
	uint64_t expirations;
	LIST_HEAD(waiters);

	(void)!read(fd, &expirations, sizeof(expirations));
	list_splice_tail_init(&access_waiters, &waiters);
	list_for_each_entry_safe(req, next, &waiters, node) {
		list_del(&req->node);
		group_catch_up(stat_clock());
		dispatch(req);
	}
}

/* a header arrived: make its request, with a result preset on a bad header */
static struct request *new_request(struct client_info *ci)
{
	struct request *req = req_get();
	int ret;

	if (!req)
		return NULL;
	/* all but the statistics' tracking, which stays linked */
	memset(&req->rq, 0, sizeof(*req) - offsetof(struct request, rq));
	req->rq = ci->hdr;
	req->ci = ci;
	payload_req_none(req);
	INIT_LIST_NODE(&req->node);
	ci->refcnt++;
	ci->nr_inflight++;
	req->rp.result = sd_check_req_header(&req->rq);
	if (req->rq.data_length > SD_MAX_DATA_LEN) {
		/* cannot consume the payload: answer, then close */
		sd_log_ratelimited(60, SDOG_WARNING,
				   "data_length %" PRIu32 " over the limit, closing the connection",
				   req->rq.data_length);
		ci->close_after_tx = true;
		req->rq.flags &= ~SD_FLAG_CMD_WRITE;
		return req;
	}
	ret = payload_req_alloc(req, mem_counted(&req->rq), &req->ci->reply_bytes);
	if (ret == -EAGAIN) {
		/* rx_one parks the connection until memory is freed */
		ci->mem_wait = true;
	} else if (ret) {
		ci->close_after_tx = true;
		req->rq.flags &= ~SD_FLAG_CMD_WRITE;
		req->rp.result = SD_RES_NO_MEM;
	}
	return req;
}

/* read what is there; 1 when a whole request is ready, 0 when not, -1 closed */
static int rx_one(struct client_info *ci)
{
	ssize_t n;

	if (!ci->rx_req) {
		n = read(ci->fd, (char *)&ci->hdr + ci->hdr_done, sizeof(ci->hdr) - ci->hdr_done);
		if (n <= 0)
			goto out_err;
		if (!ci->hdr_done)
			ci->rx_start = tick;
		ci->last_active = tick;
		ci->hdr_done += n;
		if (ci->hdr_done < sizeof(ci->hdr))
			return 0;
		ci->hdr_done = 0;
		ci->rx_done = 0;
		ci->rx_req = new_request(ci);
		if (!ci->rx_req) {
			close_client(ci);
			return -1;
		}
		if (ci->mem_wait) {
			ci->refcnt++; /* held by the payload waiters */
			payload_wait(&ci->mem_waiter);
			update_events(ci);
			return 0;
		}
	}
	if (ci->mem_wait)
		return 0;
	struct request *req = ci->rx_req;
	uint32_t want = (req->rq.flags & SD_FLAG_CMD_WRITE) ? req->rq.data_length : 0;

	while (ci->rx_done < want) {
		n = read(ci->fd, (char *)req->data + ci->rx_done, want - ci->rx_done);
		if (n <= 0)
			goto out_err;
		ci->last_active = tick;
		ci->rx_done += n;
	}
	return 1;
out_err:
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n == 0 && !ci->hdr_done && !ci->rx_req && ci->nr_inflight) {
		/*
		 * EOF between requests with some in flight: the client shut
		 * its sending side (shutdown(SHUT_WR)) and still reads. Answer
		 * them; the last reply sent closes the connection (flush_tx).
		 */
		ci->close_after_tx = true;
		update_events(ci);
		return -1;
	}
	/* EOF or error: a short body is dropped with its connection */
	close_client(ci);
	return -1;
}

static void client_rx(struct client_info *ci)
{
	for (int i = 0; i < RX_BATCH && !ci->dead; i++) {
		int ret;

		/* its replies hold enough: read more once the client reads them */
		if (ci->reply_bytes >= MAX_REPLY_BYTES && !ci->hdr_done && !ci->rx_req) {
			update_events(ci);
			return;
		}
		ret = rx_one(ci);

		if (ret <= 0)
			return;
		struct request *req = ci->rx_req;
		ci->rx_req = NULL;
		/* hold the connection: dispatch may answer and close it */
		ci->refcnt++;
		/* in flight from here: one clock read at its start */
		req->start = stat_clock();
#ifdef STAT_ENABLED
		/* a statistics reader does not count itself */
		if (req->rq.opcode != SD_OP_STAT_READ)
			stat_req_begin(&req->stat, req->rq.opcode, req->start);
#endif
		dispatch(req);
		bool stop = ci->dead || ci->close_after_tx;
		if (!ci->dead && ci->nr_inflight >= MAX_INFLIGHT) {
			ci->rx_paused = true;
			update_events(ci);
			stop = true;
		}
		client_put(ci);
		if (stop)
			return;
	}
}

static void client_handler(int fd, uint32_t events, void *data)
{
	struct client_info *ci = data;

	ci->refcnt++;
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		close_client(ci);
		goto out;
	}
	if (events & EPOLLIN)
		client_rx(ci);
	if (!ci->dead && (events & EPOLLOUT))
		flush_tx(ci);
out:
	client_put(ci);
}

static bool has_oid(uint8_t opcode)
{
	return is_client_obj_op(opcode) || opcode == SD_OP_REMOVE_OBJ ||
	       (opcode >= SD_OP_READ_PEER && opcode <= SD_OP_FLUSH_PEER) ||
	       opcode == SD_OP_FETCH_PEER || opcode == SD_OP_STAT_HOLD;
}

/* stat.c's hang report for a request: opcode, oid, client, worker */
static void request_report_hang(struct stat_req *sr, uint64_t age_ns)
{
	struct request *req = container_of(sr, struct request, stat);
	char client[INET6_ADDRSTRLEN + 8] = "gone", oid[32] = "";
	char worker[48] = "no worker (main thread or still queued)";
	int tid = __atomic_load_n(&req->work.tid, __ATOMIC_RELAXED);

	if (!req->ci->dead)
		sd_peer_name(req->ci->fd, client, sizeof(client));
	if (has_oid(req->rq.opcode))
		snprintf(oid, sizeof(oid), " oid %016" PRIx64, req->rq.obj.oid);
	if (tid)
		snprintf(worker, sizeof(worker), "worker tid %d", tid);
	sd_warn("hang: %s (0x%02x)%s in flight for %" PRIu64 " ms, id %" PRIu32 ", client %s, %s",
		req->op ? req->op->name : "request", req->rq.opcode, oid, age_ns / 1000000,
		req->rq.id, client, worker);
}

/*
 * A new connection on fd (non-blocking) from the client at ss: its state,
 * polled, listed and counted. NULL when it cannot be set up (fd is left to
 * the caller). The fuzz harness sets its connections up here too.
 */
static struct client_info *client_init(int fd, const struct sockaddr_storage *ss)
{
	struct client_info *ci = calloc(1, sizeof(*ci));

	if (!ci)
		return NULL;
	ci->fd = fd;
	ci->refcnt = 1;
	if (ss->ss_family == AF_INET6) {
		memcpy(ci->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		ci->addr[10] = ci->addr[11] = 0xff;
		memcpy(ci->addr + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
	ci->events = EPOLLIN;
	ci->last_active = tick;
	ci->mem_waiter.resume = client_mem_resume;
	stat_vdi_cache_init(&ci->stat_vdi);
	INIT_LIST_HEAD(&ci->tx_queue);
	pthread_mutex_init(&ci->tx_lock, NULL);
	if (ev_add(fd, EPOLLIN, client_handler, ci)) {
		free(ci);
		return NULL;
	}
	list_add_tail(&ci->link, &all_clients);
	nr_clients++;
	return ci;
}

int request_accept(int fd, const struct sockaddr_storage *ss)
{
	if (!client_init(fd, ss))
		return -ENOMEM;
	if (nr_clients < max_clients)
		return 0;
	sd_log_ratelimited(60, SDOG_WARNING,
			   "%d connections: not accepting more until one closes "
			   "(--max-connections)",
			   nr_clients);
	at_client_limit = true;
	return 1;
}

/* once a second: close the connections that timed out */
static void client_tick(int fd, uint32_t events, void *data)
{
	struct client_info *ci, *next;
	uint64_t expirations = 0;

	(void)!read(fd, &expirations, sizeof(expirations));
	tick += expirations ? expirations : 1;
	list_for_each_entry_safe(ci, next, &all_clients, link) {
		bool partial = ci->hdr_done || ci->rx_req;
		const char *why = NULL;

		if (partial && sys.client_timeout && tick - ci->rx_start > (uint64_t)sys.client_timeout)
			why = "a request that did not arrive in time (--client-timeout)";
		else if (!partial && sys.idle_timeout && !ci->nr_inflight &&
			 tick - ci->last_active > (uint64_t)sys.idle_timeout)
			why = "an idle connection (--idle-timeout)";
		if (!why)
			continue;
		sd_log_ratelimited(60, SDOG_INFO, "closing %s", why);
		close_client(ci);
	}
}

/* the connection limit when not given: what the descriptor limit leaves */
static int default_max_clients(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536)
		return 65536 - 256;
	/* room for the store, the peers' connections and the log */
	return rl.rlim_cur > 512 ? (int)rl.rlim_cur - 256 : (int)rl.rlim_cur / 2;
}

int request_nr_clients(void)
{
	return nr_clients;
}

int request_init(void (*room)(void))
{
	struct itimerspec one_s = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	int ret;

	room_fn = room;
	/* made now: once descriptors run out, they could not be made */
	access_timer_fd = ev_timer(access_retry, NULL);
	if (access_timer_fd < 0)
		return access_timer_fd;
	tick_timer_fd = ev_timer(client_tick, NULL);
	if (tick_timer_fd < 0)
		return tick_timer_fd;
	ret = payload_init();
	if (ret)
		return ret;
	max_clients = sys.max_connections ? sys.max_connections : default_max_clients();
#ifdef SD_TEST_HOOKS
	if (getenv("SD_TEST_SHORT_REPLIES"))
		short_reply_len = 20;
#endif
	timerfd_settime(tick_timer_fd, 0, &one_s, NULL);
	return 0;
}
