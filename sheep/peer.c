/*
 * Peer ops: this node's side of the requests that another node's gateway
 * (or recovery) sends it, applied to this node's replica. The sending side
 * is peer_io.c.
 *
 * A peer op runs on the peer queue, never on the io queue: gateway workers
 * wait on their peers, and if peer ops shared their queue, two gateways
 * each filling the other's queue would wait on each other forever. Every
 * peer op carries the sender's epoch; one from another epoch is refused so
 * that the sender retries on the ring that this node sees. A write, a
 * create and a fetch carry the count of copies the sender places the
 * object's VDI with; one that is not this node's is refused in the same
 * way (ALTER_COPY: the nodes take a VDI's new count one after the other).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "ec.h"
#include "list.h"
#include "util.h"
#include "proto_util.h"
#include "group.h"
#include "peer.h"
#include "recovery.h"
#include "replica.h"
#include "request.h"
#include "vdi_table.h"
#include "store/store.h"

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
	if (!ec_peer_oid_valid(rq->obj.oid) ||
	    !sd_obj_range_valid(rq->obj.oid, rq->obj.offset, rq->data_length))
		return SD_RES_INVALID_PARMS;
	return SD_RES_SUCCESS;
}

/*
 * The sender's count of copies against this node's (0 on either side:
 * unknown, an erasure-coded strip's request, an older sender): a write
 * placed with the old count while this node has the new one, or the other
 * way round, could miss a node that already fetched the object, or land
 * on one that no longer should hold it. The sender asks again.
 */
static int check_copies(const struct sd_req *rq)
{
	int copies;

	if (!rq->obj.copies)
		return SD_RES_SUCCESS;
	copies = vdi_copies(oid_to_vid(rq->obj.oid));
	return copies > 0 && copies != rq->obj.copies ? SD_RES_COPIES_CHANGED : SD_RES_SUCCESS;
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

	if (!ret)
		ret = check_copies(rq);
	if (ret)
		return ret;
	if (!(rq->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	return replica_write(rq->obj.oid, req->data, rq->data_length, rq->obj.offset, is_sync(rq));
}

int peer_op_create_and_write(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_peer(rq, true);

	if (!ret)
		ret = check_copies(rq);
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

	return ret ? ret : replica_remove(req->rq.obj.oid);
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

/* STAT_RECOVERY (main thread): this node's recovery, as a joining member and collie ask */
int peer_op_stat_recovery(struct request *req)
{
	struct sd_recovery_info out;
	uint32_t len = min_t(uint32_t, req->rq.data_length, sizeof(out));

	recovery_get_info(&out);
	memcpy(req->data, &out, len);
	req->rp.data_length = len;
	return SD_RES_SUCCESS;
}

/* FETCH_PEER: an object whole for another node's recovery, live or stale */
int peer_op_fetch(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret;

	if (!ec_peer_oid_valid(rq->obj.oid) ||
	    !sd_obj_range_valid(rq->obj.oid, rq->obj.offset, rq->data_length) ||
	    (rq->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	/* a fetcher on the new count, from a node that may still take old-count writes */
	ret = check_copies(rq);
	if (ret)
		return ret;
	if (rq->flags & SD_FLAG_CMD_STALE)
		ret = sd_store->read_stale(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	else
		ret = sd_store->read(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}
