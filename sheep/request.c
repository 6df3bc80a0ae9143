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
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "event.h"
#include "listen.h"
#include "net.h"
#include "proto_util.h"
#include "access.h"
#include "group.h"
#include "lock.h"
#include "ops.h"
#include "ops_exec.h"
#include "client_lock.h"
#include "payload.h"
#include "join.h"
#include "request.h"
#include "daemon.h"
#include "stat.h"
#include "vdi.h"
#include "work.h"
#include "trace/trace_req.h"

/* requests in flight on one connection before it stops reading more */
#define MAX_INFLIGHT 256
/* requests read from one connection per wake-up, for fairness */
#define RX_BATCH 16
/*
 * Reply payload one connection may hold (the buffers of its reads in
 * flight and of its replies not sent yet) before it stops reading more
 * requests, whatever the bound: a client that pipelines reads and never
 * reads the replies pins this much (and one request more), not its whole
 * pipeline. Below it, its share of the pool (payload.h) may stop it first.
 */
#define MAX_REPLY_BYTES (UINT64_C(16) << 20)

struct client_info {
	int fd;
	uint64_t id; /* unique among this daemon's connections: what a lock is bound to */
	bool internal; /* it spoke the internal protocol: a sheep's or collie's, never QEMU's */
	uint32_t io_vid; /* the VDI of its last object request (client_lock_io) */
	int refcnt; /* the connection itself + every request not yet freed */
	int nr_inflight;
	bool dead;
	bool close_after_tx;
	bool rx_paused;
	bool mem_wait; /* rx_req waits for payload memory (a payload waiter) */
	struct payload_waiter mem_waiter;
	/*
	 * The payload its requests hold, in flight or replies not sent yet
	 * (payload.h: a connection whose replies are not read reaches its
	 * share and stops being read, alone)
	 */
	struct payload_share share;
	uint64_t reply_bytes; /* of it, read buffers (MAX_REPLY_BYTES) */
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

	struct listen_conn lc; /* the listener's: its slot and its timeouts */
	struct list_node link; /* in all_clients: the lock bindings' connections */
	uint64_t rx_start;     /* listen_tick() when the request being read began */
	uint64_t last_active;  /* listen_tick() of the last byte read or reply sent */
	/* the statistics' entry of the VDI served last */
	struct stat_vdi_cache stat_vdi;
};

/* every open client connection of the sheepdog port (main thread): a lock binds to them */
static LIST_HEAD(all_clients);

/* the connections' limits (main's, request_configure) */
static struct request_config cfg = { .client_timeout = 30 };

static void client_handler(int fd, uint32_t events, void *data);
static void request_report_hang(struct stat_req *sr, uint64_t age_ns);

static void update_events(struct client_info *ci);
static __attribute__((noinline)) void client_put(struct client_info *ci);

/* req's payload, counted in its connection's share and reply bytes */
static int req_alloc(struct request *req)
{
	return payload_req_alloc(req, &req->ci->share, &req->ci->reply_bytes);
}

static void req_free(struct request *req)
{
	payload_req_free(req, &req->ci->share, &req->ci->reply_bytes);
}

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
		int ret = req_alloc(req);

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
	req_free(req);
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
	client_lock_closed(ci->id);
	listen_conn_del(&ci->lc);
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
		ci->last_active = listen_tick();
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
		ci->last_active = listen_tick();
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
		ci->last_active = listen_tick();
		free_request(req);
		flush_tx(ci);
		return;
	}
	request_count_sent(req, ci);
	/* a reply without payload does not hold its buffer while it waits to be sent */
	if (!req->rp.data_length)
		req_free(req);
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

/*
 * The tracer's request id (trace/trace_req.h): a peer request carries its
 * client request's, a client request gets a new one (the tracer's own ops
 * none); the thread that runs it says so around its work (ops.c).
 */
static void trace_id_make(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	bool obj = rq->opcode == SD_OP_READ_OBJ || rq->opcode == SD_OP_WRITE_OBJ ||
		   rq->opcode == SD_OP_CREATE_AND_WRITE_OBJ;

	/* the tracer's own ops (0xB0-0xBF) are no request it follows */
	if (req->op->type == OP_TRACE || (rq->opcode & 0xf0) == 0xB0)
		return;
	if (sd_is_peer_op(rq->opcode))
		req->trace_id = sd_req_trace_id(rq, &req->trace_flags);
	else
		req->trace_id = trace_req_new(obj, oid_to_vid(rq->obj.oid), &req->trace_flags);
}

static void finish_with(struct request *req, int result)
{
	req->rp.result = result;
	request_done(req);
}

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

/* what a connection's request says of the locks bound to it (client_lock.c) */
static inline void note_lock_io(struct client_info *ci, const struct request *req)
{
	uint32_t vid;

	if (req->rq.opcode >= 0x80) {
		ci->internal = true;
	} else if (req->op->type == OP_IO && req->rq.opcode <= SD_OP_WRITE_OBJ) {
		vid = oid_to_vid(req->rq.obj.oid);
		if (unlikely(vid != ci->io_vid)) {
			ci->io_vid = vid;
			client_lock_io(ci->id, ci->addr, vid);
		}
	}
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
	note_lock_io(req->ci, req);
	/* QEMU releases on another connection than it locked on: the lock's token, if it holds one */
	if (unlikely(req->rq.opcode == SD_OP_RELEASE_VDI)) {
		uint64_t token = client_lock_token(req->rq.vdi.base_vdi_id, req->ci->addr);

		if (token)
			req->ord.owner.conn = token;
	}
	if (daemon_stopping())
		return finish_with(req, SD_RES_SHUTDOWN);
	if (!access_ok(req))
		return;
	/* after a stall (SIGSTOP): learn of an eviction before serving (heartbeat); a
	   parked request's start is old, its waking loop checks with a fresh clock */
	group_catch_up(req->start);
	/* a client's request waits until this node knows the cluster it joined */
	if (!req->op->force && req->op->type != OP_PEER && req->op->type != OP_FETCH &&
	    join_in_progress()) {
		/* for as long as the nodes of the cluster's last epoch take to come back */
		if (join_waits())
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
	trace_id_make(req);
	ops_execute(req);
}

/* the open connections of clients at addr (no sheep's, no collie's), into conns: how many */
int request_conns_at(const uint8_t addr[16], uint64_t *conns, int max)
{
	struct client_info *ci;
	int n = 0;

	list_for_each_entry(ci, &all_clients, link)
		if (n < max && !ci->dead && !ci->internal && !memcmp(ci->addr, addr, 16))
			conns[n++] = ci->id;
	return n;
}

const uint8_t *request_client_addr(const struct request *req)
{
	return req->ci ? req->ci->addr : NULL;
}

int request_close_conns(const uint64_t *ids, int n)
{
	struct client_info *ci, *next;
	int closed = 0;

	list_for_each_entry_safe(ci, next, &all_clients, link)
		for (int i = 0; i < n; i++)
			if (ci->id == ids[i]) {
				close_client(ci);
				closed++;
				break;
			}
	return closed;
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
	/* a lock it takes is its own: this gateway, its address, its connection (client_lock.c) */
	memcpy(req->ord.owner.addr, ci->addr, sizeof(ci->addr));
	req->ord.owner.conn = ci->id;
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
	req->mem_pool = payload_req_pool(&req->rq, ci->addr);
	ret = req_alloc(req);
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
			ci->rx_start = listen_tick();
		ci->last_active = listen_tick();
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
		ci->last_active = listen_tick();
		ci->rx_done += n;
	}
	return 1;
out_err:
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	/* a request cut short by EOF is dropped: it has no reply */
	if (n == 0 && ci->rx_req) {
		free_request(ci->rx_req);
		ci->rx_req = NULL;
	}
	if (n == 0 && ci->nr_inflight) {
		/*
		 * EOF with requests in flight or replies queued: the client
		 * shut its sending side (shutdown(SHUT_WR)) and still reads.
		 * Answer every whole request it sent, even when a last one was
		 * cut short (no reply is ever cut in its middle by our close);
		 * the last reply sent closes the connection (flush_tx).
		 */
		ci->hdr_done = 0;
		ci->close_after_tx = true;
		update_events(ci);
		return -1;
	}
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

/* stat.c's hang report for a request: its client's, then the op runner's part */
static void request_report_hang(struct stat_req *sr, uint64_t age_ns)
{
	struct request *req = container_of(sr, struct request, stat);
	char client[INET6_ADDRSTRLEN + 8] = "gone";

	if (!req->ci->dead)
		sd_peer_name(req->ci->fd, client, sizeof(client));
	ops_report_hang(req, client, age_ns);
}

/*
 * A new connection on fd (non-blocking) from the client at ss: its state,
 * polled, and counted by l (NULL: not counted). NULL when it cannot be
 * set up (fd is left to the caller). The fuzz harness sets its
 * connections up here too.
 */
static struct client_info *client_init(struct listener *l, int fd,
				       const struct sockaddr_storage *ss)
{
	struct client_info *ci = calloc(1, sizeof(*ci));

	if (!ci)
		return NULL;
	ci->fd = fd;
	ci->id = daemon_conn_id();
	ci->refcnt = 1;
	if (ss->ss_family == AF_INET6) {
		memcpy(ci->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		ci->addr[10] = ci->addr[11] = 0xff;
		memcpy(ci->addr + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
	ci->events = EPOLLIN;
	ci->last_active = listen_tick();
	ci->mem_waiter.resume = client_mem_resume;
	stat_vdi_cache_init(&ci->stat_vdi);
	INIT_LIST_HEAD(&ci->tx_queue);
	pthread_mutex_init(&ci->tx_lock, NULL);
	if (ev_add(fd, EPOLLIN, client_handler, ci)) {
		pthread_mutex_destroy(&ci->tx_lock);
		free(ci);
		return NULL;
	}
	listen_conn_add(l, &ci->lc);
	list_add_tail(&ci->link, &all_clients);
	return ci;
}

static int client_accept(struct listener *l, int fd, const struct sockaddr_storage *ss)
{
	return client_init(l, fd, ss) ? 0 : -ENOMEM;
}

/*
 * For the listener's timeouts: a request partly read is the client's turn
 * (--client-timeout), unless it waits for payload memory (then the daemon
 * stopped reading it); requests in flight are the daemon's.
 */
static enum listen_state client_state(struct listen_conn *lc, uint64_t *since)
{
	struct client_info *ci = container_of(lc, struct client_info, lc);

	if (ci->mem_wait)
		return LISTEN_BUSY;
	if (ci->hdr_done || ci->rx_req) {
		*since = ci->rx_start;
		return LISTEN_TURN;
	}
	if (ci->nr_inflight)
		return LISTEN_BUSY;
	*since = ci->last_active;
	return LISTEN_IDLE;
}

static void client_timeout(struct listen_conn *lc, const char *why)
{
	close_client(container_of(lc, struct client_info, lc));
}

static const struct listen_ops client_listen_ops = {
	.name = "sheepdog",
	.accept = client_accept,
	.state = client_state,
	.timeout = client_timeout,
};

void request_configure(const struct request_config *c)
{
	cfg = *c;
}

/* the sheepdog protocol's listeners' limits (request_configure's) */
static struct listen_limits client_limits(void)
{
	return (struct listen_limits){
		.max_conns = cfg.max_connections,
		.cap_option = "--max-connections",
		.turn_timeout = cfg.client_timeout,
		.idle_timeout = cfg.idle_timeout,
		.turn_what = "a request that did not arrive in time (--client-timeout)",
	};
}

int request_listen(const char *bind_addr, int port)
{
	struct listen_limits lim = client_limits();
	int ret;

	/* made now: once descriptors run out, they could not be made */
	access_timer_fd = ev_timer(access_retry, NULL);
	if (access_timer_fd < 0)
		return access_timer_fd;
	ret = payload_init();
	if (ret)
		return ret;
#ifdef SD_TEST_HOOKS
	if (getenv("SD_TEST_SHORT_REPLIES"))
		short_reply_len = 20;
#endif
	return listener_open(&client_listen_ops, &lim, bind_addr, port) ? 0 : -errno;
}

int request_listen_io(const char *addr, int port)
{
	struct listen_limits lim = client_limits();

	return listener_open(&client_listen_ops, &lim, addr, port) ? 0 : -errno;
}
