/*
 * Client object I/O. In this version every object lives on this node, so
 * the gateway checks the request against what the VDI allows and hands it
 * to the store; with peers it will forward to the replica nodes.
 */
#include <inttypes.h>

#include "sheep_priv.h"
#include "store/store.h"

/* the size of oid's object, and whether a client may write it */
static int check_object(const struct sd_req *rq, bool write)
{
	uint64_t oid = rq->obj.oid, size;
	uint8_t shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	bool snapshot = false;
	int ret = vdi_lookup_attr(oid_to_vid(oid), &shift, &snapshot);

	if (ret && write)
		return ret;
	size = is_vdi_obj(oid) ? SD_INODE_SIZE : (UINT64_C(1) << shift);
	if (rq->obj.offset + rq->data_length > size)
		return SD_RES_INVALID_PARMS;
	/* a snapshot's data is frozen: QEMU re-resolves on READONLY */
	if (write && snapshot && !is_vdi_obj(oid))
		return SD_RES_READONLY;
	return SD_RES_SUCCESS;
}

static bool is_sync(const struct sd_req *rq)
{
	return !(rq->flags & SD_FLAG_CMD_CACHE);
}

int gateway_read_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_object(rq, false);

	if (ret)
		return ret;
	ret = sd_store->read(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}

static void after_write(const struct sd_req *rq)
{
	if (is_vdi_obj(rq->obj.oid) && rq->obj.offset < SD_INODE_HEADER_SIZE)
		vdi_header_updated(oid_to_vid(rq->obj.oid));
}

int gateway_write_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = check_object(rq, true);

	if (ret)
		return ret;
	ret = sd_store->write(rq->obj.oid, req->data, rq->data_length, rq->obj.offset,
			      is_sync(rq));
	if (ret == SD_RES_SUCCESS)
		after_write(rq);
	return ret;
}

int gateway_create_and_write_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	uint64_t cow = (rq->flags & SD_FLAG_CMD_COW) ? rq->obj.cow_oid : 0;
	int ret;

	/* inodes are made by NEW_VDI only */
	if (is_vdi_obj(rq->obj.oid))
		return SD_RES_INVALID_PARMS;
	ret = check_object(rq, true);
	if (ret)
		return ret;
	ret = sd_store->create_and_write(rq->obj.oid, cow, req->data, rq->data_length,
					 rq->obj.offset, is_sync(rq));
	if (ret == SD_RES_SUCCESS)
		after_write(rq);
	return ret;
}

int gateway_flush_vdi(struct request *req)
{
	return sd_store->flush();
}
