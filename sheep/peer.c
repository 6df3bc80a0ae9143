/*
 * Peer requests: the store side of the gateway's replica I/O, and the cache
 * of connections between sheep.
 *
 * A peer op runs on the peer queue, never on the io queue: gateway workers
 * block on their peers, and if peer ops shared their queue, two gateways
 * each filling the other's queue would wait on each other forever. Every
 * peer op carries the sender's epoch; one from another epoch is refused so
 * that the sender retries on the ring that this node sees.
 *
 * The connection cache keeps, per peer, a few idle blocking sockets under
 * one mutex. A socket is handed to one thread at a time; a thread that saw
 * an error on it closes it instead of giving it back.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "proto_util.h"
#include "sheep_priv.h"
#include "store/store.h"

#define POOL_SLOTS 16 /* peers remembered */
#define POOL_IDLE 8   /* idle sockets kept per peer */
#define PEER_TIMEOUT_MS 30000

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
 * stopping daemon can cut them (peer_abort_all): a worker blocked on a
 * peer that does not answer (stopped, or stopping itself) then returns at
 * once instead of after PEER_TIMEOUT_MS per attempt. Under pool_lock.
 */
#define MAX_BUSY 1024
static int busy[MAX_BUSY], nr_busy;
static bool aborting;

static void busy_add(int fd)
{
	if (nr_busy < MAX_BUSY)
		busy[nr_busy++] = fd;
}

static void busy_del(int fd)
{
	for (int i = 0; i < nr_busy; i++)
		if (busy[i] == fd) {
			busy[i] = busy[--nr_busy];
			return;
		}
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
			nr++;
		}
	pthread_mutex_unlock(&pool_lock);
	peer_conn_drop(nid);
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

int peer_conn_get(const struct sd_node_id *nid)
{
	struct conn_pool *p;
	char host[INET6_ADDRSTRLEN];
	int fd = -1;

	pthread_mutex_lock(&pool_lock);
	if (aborting) {
		pthread_mutex_unlock(&pool_lock);
		return -ESHUTDOWN;
	}
	p = find_pool(nid, false);
	if (p && p->nr_idle) {
		fd = p->idle[--p->nr_idle];
		busy_add(fd);
	}
	pthread_mutex_unlock(&pool_lock);
	if (fd >= 0)
		return fd;
	nid_to_host(nid, host, sizeof(host));
	fd = sd_connect(host, nid->port, 3000);
	if (fd < 0)
		return fd;
	sd_set_nodelay(fd);
	sd_set_timeout(fd, PEER_TIMEOUT_MS);
	pthread_mutex_lock(&pool_lock);
	busy_add(fd);
	/* cut already: this one must not block either */
	if (aborting)
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&pool_lock);
	return fd;
}

void peer_conn_put(const struct sd_node_id *nid, int fd, bool ok)
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

int peer_send(int fd, const struct sd_req *hdr, const void *data)
{
	int ret = sd_write_full(fd, hdr, sizeof(*hdr));

	if (!ret && (hdr->flags & SD_FLAG_CMD_WRITE) && hdr->data_length)
		ret = sd_write_full(fd, data, hdr->data_length);
	return ret;
}

int peer_recv(int fd, struct sd_rsp *rsp, void *data, uint32_t rlen)
{
	int ret = sd_read_full(fd, rsp, sizeof(*rsp));

	if (ret)
		return ret;
	/* a peer never sends more than asked: anything else is a broken stream */
	if (rsp->data_length > rlen)
		return -EPROTO;
	if (rsp->data_length)
		ret = sd_read_full(fd, data, rsp->data_length);
	return ret;
}

void peer_conn_drop(const struct sd_node_id *nid)
{
	struct conn_pool *p;

	pthread_mutex_lock(&pool_lock);
	p = find_pool(nid, false);
	while (p && p->nr_idle)
		close(p->idle[--p->nr_idle]);
	pthread_mutex_unlock(&pool_lock);
}

/*
 * A failure on a cached socket may only mean that the peer restarted since
 * (its idle sockets are all dead then): drop them and try once more on a
 * new connection.
 */
int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp)
{
	uint32_t rlen = (rq->flags & SD_FLAG_CMD_WRITE) ? 0 : rq->data_length;
	int ret = 0;

	for (int attempt = 0; attempt < 2; attempt++) {
		int fd = peer_conn_get(nid);

		if (fd < 0)
			return fd;
		ret = peer_send(fd, rq, wdata);
		if (!ret)
			ret = peer_recv(fd, rsp, rdata, rlen);
		peer_conn_put(nid, fd, ret == 0);
		if (!ret)
			break;
		peer_conn_drop(nid);
	}
	return ret;
}

/* the epoch and the object range of a peer request */
static int check_peer(const struct sd_req *rq, bool has_obj)
{
	uint32_t epoch = group_epoch();

	/* evicted, joining again: its epoch is stale, and its objects soon are */
	if (group_is_joining())
		return SD_RES_NEW_NODE_VER;
	if (rq->epoch < epoch)
		return SD_RES_OLD_NODE_VER;
	if (rq->epoch > epoch)
		return SD_RES_NEW_NODE_VER;
	if (!has_obj)
		return SD_RES_SUCCESS;
	if (!oid_is_valid(rq->obj.oid) ||
	    !sd_obj_range_valid(rq->obj.oid, rq->obj.offset, rq->data_length))
		return SD_RES_INVALID_PARMS;
	return SD_RES_SUCCESS;
}

static bool is_sync(const struct sd_req *rq)
{
	return !(rq->flags & SD_FLAG_CMD_CACHE);
}

int peer_op_read(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_peer(rq, true);

	if (ret)
		return ret;
	ret = sd_store->read(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}

int peer_op_write(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_peer(rq, true);

	if (ret)
		return ret;
	if (!(rq->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	return recovery_write(rq->obj.oid, req->data, rq->data_length, rq->obj.offset,
			      is_sync(rq));
}

int peer_op_create_and_write(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_peer(rq, true);

	if (ret)
		return ret;
	if (!(rq->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	/* the client's write is the payload, or lies inside it (a whole COW object) */
	if (rq->flags & SD_FLAG_CMD_COW)
		return replica_create_and_write(rq->obj.oid, req->data, rq->data_length,
						rq->obj.offset, rq->create.wr_offset,
						rq->create.wr_length, is_sync(rq));
	return replica_create_and_write(rq->obj.oid, req->data, rq->data_length, rq->obj.offset,
					rq->obj.offset, rq->data_length, is_sync(rq));
}

int peer_op_remove(struct request *req)
{
	int ret = check_peer(&req->rq, true);

	return ret ? ret : sd_store->remove(req->rq.obj.oid);
}

int peer_op_flush(struct request *req)
{
	int ret = check_peer(&req->rq, false);

	return ret ? ret : replica_flush(req->rq.obj.oid);
}

struct obj_list {
	uint64_t *oids;
	uint32_t nr, max;
};

static int list_one(uint64_t oid, void *arg)
{
	struct obj_list *l = arg;

	if (l->nr >= l->max)
		return -ENOSPC;
	l->oids[l->nr++] = oid;
	return 0;
}

/*
 * The oids stored here (with SD_FLAG_CMD_STALE: the stale copies);
 * SD_RES_NO_SPACE when they do not fit in data_length
 */
int peer_op_get_obj_list(struct request *req)
{
	struct obj_list l = { req->data, 0, req->rq.data_length / sizeof(uint64_t) };
	int ret = check_peer(&req->rq, false);

	if (ret)
		return ret;
	if (req->rq.flags & SD_FLAG_CMD_STALE)
		ret = sd_store->for_each_stale(list_one, &l);
	else
		ret = sd_store->for_each(list_one, &l);
	if (ret == -ENOSPC)
		return SD_RES_NO_SPACE;
	if (ret < 0)
		return SD_RES_EIO;
	req->rp.data_length = l.nr * sizeof(uint64_t);
	return SD_RES_SUCCESS;
}
