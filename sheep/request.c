/*
 * Connections and the life of a request, on the main thread.
 *
 * A connection reads whole requests (the 48-byte header, then data_length
 * bytes when SD_FLAG_CMD_WRITE is set) without blocking, hands each to its
 * op's queue, and sends replies in the order they complete: clients match
 * them by id. A request whose header is bad still has its payload consumed
 * so that the stream stays in step, then gets an error result; a payload
 * too large to consume closes the connection after the error reply.
 *
 * This file reads: a connection's requests, their way to their op's queue
 * (dispatch), the connections' setup and listeners. A request's end (its
 * reply, its counting, its freeing) and a connection's close are
 * request_reply.c's; the two share the connection (request_priv.h).
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
#include "request_priv.h"
#include "daemon.h"
#include "stat.h"
#include "vdi.h"
#include "work.h"
#include "trace/trace_req.h"

/* requests read from one connection per wake-up, for fairness */
#define RX_BATCH 16

/* every open client connection of the sheepdog port (main thread): a lock binds to them */
static LIST_HEAD(all_clients);

/* the connections' limits (main's, request_configure) */
static struct request_config cfg = { .client_timeout = 30 };

static void client_handler(int fd, uint32_t events, void *data);

/* req's payload, counted in its connection's share and reply bytes */
static int req_alloc(struct request *req)
{
	return payload_req_alloc(req, &req->ci->share, &req->ci->reply_bytes);
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
	request_update_events(ci);
	if (!ci->dead)
		client_rx(ci);
	request_client_put(ci);
	return true;
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
				request_client_close(ci);
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
	struct request *req = request_get();
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
			request_client_close(ci);
			return -1;
		}
		if (ci->mem_wait) {
			ci->refcnt++; /* held by the payload waiters */
			payload_wait(&ci->mem_waiter);
			request_update_events(ci);
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
		request_free(ci->rx_req);
		ci->rx_req = NULL;
	}
	if (n == 0 && ci->nr_inflight) {
		/*
		 * EOF with requests in flight or replies queued: the client
		 * shut its sending side (shutdown(SHUT_WR)) and still reads.
		 * Answer every whole request it sent, even when a last one was
		 * cut short (no reply is ever cut in its middle by our close);
		 * the last reply sent closes the connection (request_flush_tx).
		 */
		ci->hdr_done = 0;
		ci->close_after_tx = true;
		request_update_events(ci);
		return -1;
	}
	request_client_close(ci);
	return -1;
}

static void client_rx(struct client_info *ci)
{
	for (int i = 0; i < RX_BATCH && !ci->dead; i++) {
		int ret;

		/* its replies hold enough: read more once the client reads them */
		if (ci->reply_bytes >= MAX_REPLY_BYTES && !ci->hdr_done && !ci->rx_req) {
			request_update_events(ci);
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
			request_update_events(ci);
			stop = true;
		}
		request_client_put(ci);
		if (stop)
			return;
	}
}

static void client_handler(int fd, uint32_t events, void *data)
{
	struct client_info *ci = data;

	ci->refcnt++;
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		request_client_close(ci);
		goto out;
	}
	if (events & EPOLLIN)
		client_rx(ci);
	if (!ci->dead && (events & EPOLLOUT))
		request_flush_tx(ci);
out:
	request_client_put(ci);
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
	request_client_close(container_of(lc, struct client_info, lc));
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
		request_short_reply_len = 20;
#endif
	return listener_open(&client_listen_ops, &lim, bind_addr, port) ? 0 : -errno;
}

int request_listen_io(const char *addr, int port)
{
	struct listen_limits lim = client_limits();

	return listener_open(&client_listen_ops, &lim, addr, port) ? 0 : -errno;
}
