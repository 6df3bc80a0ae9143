/*
 * Requests to other sheep, the sending side: a cache of connections per
 * peer, and one primitive, peer_fanout, that sends the same request (one
 * header, one payload) to N nodes at once and gathers their N answers from
 * one thread, with non-blocking sockets and poll. peer_request is its case
 * of one node. The peer ops that answer these requests are in peer.c.
 *
 * One error policy for every caller:
 * - a node whose connection fails (refused, reset, cut by peer_abort_all, an
 *   answer longer than asked) gets SD_RES_NETWORK; its socket is closed and
 *   so are the idle ones cached for it (they are likely dead too);
 * - a socket taken from the cache that fails before any byte of its answer
 *   arrived may only be stale (the peer restarted since): that node's
 *   request goes once more on a new connection;
 * - a node that makes no progress (sends nothing, takes nothing) for
 *   PEER_TIMEOUT_MS gets SD_RES_NETWORK.
 * A payload larger than the socket buffers goes out in pieces as each
 * socket takes them (partial sends, EAGAIN), so the sends to every node
 * progress together. The caller's own part (the gateway's local write)
 * runs on the same thread, with no thread of its own, while the nodes
 * work: once every node has its whole request, or, when its steps are
 * short (a write in slices), a step whenever no socket can take or give
 * anything, so that it overlaps the sends too. The time a step takes does
 * not count against the nodes' PEER_TIMEOUT_MS (nobody watched their
 * sockets meanwhile).
 *
 * The connection cache keeps, per peer, a few idle non-blocking sockets
 * under one mutex. A peer with an io address (sheep --io-addr) is
 * connected there, not at its node id. A socket is handed to one thread at a time; a thread
 * that saw an error on it closes it instead of giving it back.
 *
 * Also here: the replica iterator, the order in which to try the nodes
 * for an object (the ring's replicas, then every other node).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "net.h"
#include "group.h"
#include "lock.h"
#include "peer_io.h"
#include "stat.h"
#include "trace/trace_req.h"

#define POOL_SLOTS 16 /* peers remembered */
#define POOL_IDLE 8   /* idle sockets kept per peer */
#define PEER_TIMEOUT_MS 30000
#define PEER_CONNECT_MS 3000

struct conn_pool {
	struct sd_node_id nid;
	bool used;
	int nr_idle;
	int idle[POOL_IDLE];
};

static struct conn_pool pools[POOL_SLOTS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The sockets taken from the pool and not yet given back, so that a
 * stopping daemon can cut them (peer_abort_all): a worker waiting on a
 * peer that does not answer (stopped, or stopping itself) then returns at
 * once instead of after PEER_TIMEOUT_MS. Under pool_lock.
 */
#define MAX_BUSY 1024
static int busy[MAX_BUSY], nr_busy;
/* busy[i] was cut by peer_abort_node: its node left, do not retry it */
static bool busy_cut[MAX_BUSY];
static bool aborting;

static void busy_add(int fd)
{
	if (nr_busy < MAX_BUSY) {
		busy_cut[nr_busy] = false;
		busy[nr_busy++] = fd;
	}
}

static void busy_del(int fd)
{
	for (int i = 0; i < nr_busy; i++)
		if (busy[i] == fd) {
			nr_busy--;
			busy[i] = busy[nr_busy];
			busy_cut[i] = busy_cut[nr_busy];
			return;
		}
}

/* fd (busy) was cut because its node left */
static bool busy_was_cut(int fd)
{
	bool cut = false;

	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < nr_busy; i++)
		if (busy[i] == fd)
			cut = busy_cut[i];
	pthread_mutex_unlock(&pool_lock);
	return cut;
}

void peer_abort_all(void)
{
	pthread_mutex_lock(&pool_lock);
	aborting = true;
	for (int i = 0; i < nr_busy; i++)
		shutdown(busy[i], SHUT_RDWR);
	pthread_mutex_unlock(&pool_lock);
}

/* true when fd is connected to nid (v4 peers are compared as v4-mapped) */
static bool fd_is_to(int fd, const struct sd_node_id *nid)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint8_t addr[16];
	int port;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

		memcpy(addr, v4mapped, 12);
		memcpy(addr + 12, &in->sin_addr, 4);
		port = ntohs(in->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

		memcpy(addr, &in6->sin6_addr, 16);
		port = ntohs(in6->sin6_port);
	} else {
		return false;
	}
	return port == nid->port && !memcmp(addr, nid->addr, 16);
}

static void conn_drop(const struct sd_node_id *nid);

/*
 * A member left (died, or was evicted because it stopped answering): the
 * workers blocked on it return now with an error and retry on the new
 * ring, instead of after PEER_TIMEOUT_MS. Its idle sockets are dropped.
 */
void peer_abort_node(const struct sd_node_id *nid)
{
	int nr = 0;

	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < nr_busy; i++)
		if (fd_is_to(busy[i], nid)) {
			shutdown(busy[i], SHUT_RDWR);
			busy_cut[i] = true;
			nr++;
		}
	pthread_mutex_unlock(&pool_lock);
	conn_drop(nid);
	if (nr)
		sd_info("%d request(s) in flight to a node that left: cut, retried", nr);
}

/* caller holds pool_lock; creates the slot (evicting an idle one) if needed */
static struct conn_pool *find_pool(const struct sd_node_id *nid, bool create)
{
	struct conn_pool *free_slot = NULL;

	for (int i = 0; i < POOL_SLOTS; i++) {
		if (pools[i].used && !memcmp(&pools[i].nid, nid, sizeof(*nid)))
			return &pools[i];
		if (!pools[i].used && !free_slot)
			free_slot = &pools[i];
	}
	if (!create)
		return NULL;
	if (!free_slot) {
		free_slot = &pools[0];
		for (int i = 0; i < free_slot->nr_idle; i++)
			close(free_slot->idle[i]);
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->nid = *nid;
	free_slot->used = true;
	return free_slot;
}

static void nid_to_host(const struct sd_node_id *nid, char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(nid->addr, v4mapped, 12))
		inet_ntop(AF_INET, nid->addr + 12, buf, len);
	else
		inet_ntop(AF_INET6, nid->addr, buf, len);
}

/* a connected non-blocking socket to nid (*reused: from the cache), or -errno */
static int conn_get(const struct sd_node_id *nid, bool fresh, bool *reused)
{
	struct conn_pool *p;
	struct sd_node_id to;
	char host[INET6_ADDRSTRLEN];
	int fd = -1;

	*reused = false;
	pthread_mutex_lock(&pool_lock);
	if (aborting) {
		pthread_mutex_unlock(&pool_lock);
		return -ESHUTDOWN;
	}
	p = fresh ? NULL : find_pool(nid, false);
	if (p && p->nr_idle) {
		fd = p->idle[--p->nr_idle];
		busy_add(fd);
		*reused = true;
	}
	pthread_mutex_unlock(&pool_lock);
	if (fd >= 0)
		return fd;
	/* its --io-addr, if it has one (the pool stays keyed by nid) */
	if (!group_io_endpoint(nid, &to))
		to = *nid;
	nid_to_host(&to, host, sizeof(host));
	fd = sd_connect(host, to.port, PEER_CONNECT_MS);
	if (fd < 0)
		return fd;
	sd_set_nonblocking(fd);
	pthread_mutex_lock(&pool_lock);
	busy_add(fd);
	/* cut already: this one must not wait either */
	if (aborting)
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&pool_lock);
	return fd;
}

/* give fd back (ok) or close it (!ok: the stream may be out of step) */
static void conn_put(const struct sd_node_id *nid, int fd, bool ok)
{
	struct conn_pool *p;

	if (fd < 0)
		return;
	pthread_mutex_lock(&pool_lock);
	busy_del(fd);
	if (ok && !aborting) {
		p = find_pool(nid, true);
		if (p->nr_idle < POOL_IDLE) {
			p->idle[p->nr_idle++] = fd;
			fd = -1;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	if (fd >= 0)
		close(fd);
}

/* close every idle socket to nid (it restarted, or died) */
static void conn_drop(const struct sd_node_id *nid)
{
	struct conn_pool *p;

	pthread_mutex_lock(&pool_lock);
	p = find_pool(nid, false);
	while (p && p->nr_idle)
		close(p->idle[--p->nr_idle]);
	pthread_mutex_unlock(&pool_lock);
}

/* ---- the fan-out ---- */

enum { CALL_SEND, CALL_RECV_HDR, CALL_RECV_DATA, CALL_DONE };

struct peer_fanout {
	const struct sd_req *rq;
	const void *wdata;
	struct peer_call *calls;
	int nr;
	const struct peer_work *work;
	bool working; /* the work has steps left */
};

static uint32_t payload_len(const struct sd_req *rq)
{
	return (rq->flags & SD_FLAG_CMD_WRITE) ? rq->data_length : 0;
}

/* send what the socket takes now: 0 (done, or EAGAIN) or -errno */
static int call_send(const struct peer_fanout *f, struct peer_call *c)
{
	const struct sd_req *rq = c->rq ? c->rq : f->rq;
	const void *wdata = c->rq ? c->wdata : f->wdata;
	const size_t hdr = sizeof(*rq), total = hdr + payload_len(rq);

	while (c->done < total) {
		struct iovec iov[2];
		struct msghdr msg = { .msg_iov = iov };
		ssize_t r;

		if (c->done < hdr) {
			iov[0] = (struct iovec){ (char *)rq + c->done, hdr - c->done };
			iov[1] = (struct iovec){ (void *)wdata, total - hdr };
			msg.msg_iovlen = total > hdr ? 2 : 1;
		} else {
			iov[0] = (struct iovec){ (char *)wdata + (c->done - hdr), total - c->done };
			msg.msg_iovlen = 1;
		}
		r = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		c->done += (size_t)r;
		c->last_ns = sd_now_ns();
	}
	c->state = CALL_RECV_HDR;
	c->done = 0;
	return 0;
}

/* take what the socket holds of the answer: 0 (done, or EAGAIN) or -errno */
static int call_recv(struct peer_call *c)
{
	for (;;) {
		bool hdr = c->state == CALL_RECV_HDR;
		size_t want = hdr ? sizeof(c->rsp) : c->rsp.data_length;
		char *p = hdr ? (char *)&c->rsp : c->rdata;
		ssize_t r = recv(c->fd, p + c->done, want - c->done, 0);

		if (r == 0)
			return -ECONNRESET;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		c->done += (size_t)r;
		c->last_ns = sd_now_ns();
		if (c->done < want)
			continue;
		if (hdr) {
			/* a peer never sends more than asked: anything else is a broken stream */
			if (c->rsp.data_length > c->rlen)
				return -EPROTO;
			c->done = 0;
			if (c->rsp.data_length) {
				c->state = CALL_RECV_DATA;
				continue;
			}
		}
		conn_put(c->nid, c->fd, true);
		c->fd = -1;
		c->result = (int)c->rsp.result;
		c->state = CALL_DONE;
		return 0;
	}
}

static void call_open(const struct peer_fanout *f, struct peer_call *c, bool fresh);

/* c's connection failed with err: retry a stale cached socket once, or give up */
static void call_fail(const struct peer_fanout *f, struct peer_call *c, int err)
{
	bool no_answer = c->state == CALL_SEND || (c->state == CALL_RECV_HDR && !c->done);
	/* cut because the node left: a new connection would wait on it again */
	bool left = busy_was_cut(c->fd);

	conn_put(c->nid, c->fd, false);
	c->fd = -1;
	conn_drop(c->nid);
	if (c->reused && !c->retried && no_answer && !left && err != -ETIMEDOUT) {
		c->retried = true;
		call_open(f, c, true);
		return;
	}
	c->err = err;
	c->result = SD_RES_NETWORK;
	c->state = CALL_DONE;
}

/* a connection for c, and the first bytes of the request on it */
static void call_open(const struct peer_fanout *f, struct peer_call *c, bool fresh)
{
	int ret;

	c->fd = conn_get(c->nid, fresh, &c->reused);
	if (c->fd < 0) {
		c->err = c->fd;
		c->result = SD_RES_NETWORK;
		c->state = CALL_DONE;
		return;
	}
	c->state = CALL_SEND;
	c->done = 0;
	c->last_ns = sd_now_ns();
	ret = call_send(f, c);
	if (ret)
		call_fail(f, c, ret);
}

/* the caller's work: one step, its time not counted against the calls */
static void fanout_step(struct peer_fanout *f)
{
	uint64_t t0 = sd_now_ns(), spent;

	f->working = f->work->step(f->work->arg);
	spent = sd_now_ns() - t0;
	for (int i = 0; i < f->nr; i++)
		if (f->calls[i].state != CALL_DONE)
			f->calls[i].last_ns += spent;
}

/*
 * Move the calls of f on as their sockets allow, and the caller's work a
 * step whenever they would all block, until the calls and the work are
 * done.
 */
static void fanout_run(struct peer_fanout *f)
{
	struct pollfd pfd[SD_MAX_NODES];
	int map[SD_MAX_NODES];

	for (;;) {
		uint64_t now = sd_now_ns();
		int n = 0, sending = 0, timeout = PEER_TIMEOUT_MS, r;
		bool look;

		for (int i = 0; i < f->nr && n < SD_MAX_NODES; i++) {
			struct peer_call *c = &f->calls[i];
			int64_t left;

			if (c->state == CALL_DONE)
				continue;
			left = ((int64_t)(c->last_ns - now) / 1000000) + PEER_TIMEOUT_MS;
			if (left <= 0) {
				call_fail(f, c, -ETIMEDOUT);
				continue;
			}
			if (left < timeout)
				timeout = (int)left;
			sending += c->state == CALL_SEND;
			pfd[n] =
			    (struct pollfd){ c->fd, c->state == CALL_SEND ? POLLOUT : POLLIN, 0 };
			map[n++] = i;
		}
		if (!n && !f->working)
			return;
		/* answers can wait for the work */
		if (f->working && !sending) {
			fanout_step(f);
			continue;
		}
		/*
		 * sends too, when the steps are short: only a look, and a step
		 * when no socket is ready. A long step waits for the sends to
		 * end: a node starts on its write only once it has all of it.
		 */
		look = f->working && f->work->sliced;
		r = poll(pfd, (nfds_t)n, look ? 0 : timeout);
		if (r < 0 && errno != EINTR) {
			int err = -errno;

			for (int j = 0; j < n; j++)
				call_fail(f, &f->calls[map[j]], err);
			continue;
		}
		if (r == 0 && look) {
			fanout_step(f);
			continue;
		}
		for (int j = 0; r > 0 && j < n; j++) {
			struct peer_call *c = &f->calls[map[j]];
			int ret;

			if (!pfd[j].revents)
				continue;
			ret = c->state == CALL_SEND ? call_send(f, c) : call_recv(c);
			if (ret)
				call_fail(f, c, ret);
		}
	}
}

void peer_fanout_work(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr,
		      const struct peer_work *work)
{
	struct peer_fanout f = {
		.rq = rq, .wdata = wdata, .calls = calls, .nr = nr, .work = work, .working = !!work
	};
	struct sd_req stamped, own[SD_MAX_NODES];
	const struct sd_req *own_rq[SD_MAX_NODES];
	uint16_t flags;
	/* a peer request carries the id of the client request this thread serves */
	uint64_t id = sd_is_peer_op(rq->opcode) ? trace_req_current(&flags) : 0;

	if (id) {
		stamped = *rq;
		sd_req_set_trace(&stamped, id, flags);
		f.rq = &stamped;
	}
	/* a call's own request is stamped too, on a copy that lives as long as the fan-out */
	for (int i = 0; i < nr && i < SD_MAX_NODES; i++) {
		own_rq[i] = calls[i].rq;
		if (id && calls[i].rq && sd_is_peer_op(calls[i].rq->opcode)) {
			own[i] = *calls[i].rq;
			sd_req_set_trace(&own[i], id, flags);
			calls[i].rq = &own[i];
		}
	}

	/* every node gets what its socket takes at once, before any work */
	for (int i = 0; i < nr; i++) {
		struct peer_call *c = &calls[i];

		c->fd = -1;
		c->err = 0;
		c->retried = false;
		if (!c->rdata)
			c->rlen = 0;
		memset(&c->rsp, 0, sizeof(c->rsp));
		call_open(&f, c, false);
	}
	fanout_run(&f);
	for (int i = 0; i < nr && i < SD_MAX_NODES; i++)
		calls[i].rq = own_rq[i];
}

void peer_fanout(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr)
{
	peer_fanout_work(rq, wdata, calls, nr, NULL);
}

int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp)
{
	struct peer_call c = { .nid = nid, .rdata = rdata };

	c.rlen = (rq->flags & SD_FLAG_CMD_WRITE) ? 0 : rq->data_length;
	peer_fanout(rq, wdata, &c, 1);
	if (c.err)
		return c.err;
	*rsp = c.rsp;
	return 0;
}

/* ---- the replica iterator ---- */
