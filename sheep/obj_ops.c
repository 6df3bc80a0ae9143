/*
 * The sheepdog protocol's object ops (READ_OBJ, WRITE_OBJ,
 * CREATE_AND_WRITE_OBJ, FLUSH_VDI), as QEMU's driver and collie send them:
 * each checks the client's request where it enters (the object and range
 * against its VDI, an inode header write against what QEMU may change)
 * and hands it to the gateway (gateway.h), as NBD does with its own.
 * A client's write to an inode header is answered once every node's VDI
 * table took the change (the ops' reply_held and finish).
 *
 * Runs on io workers, but for obj_op_read_inline (main thread).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal_proto.h"
#include "logger.h"
#include "util.h"
#include "gateway.h"
#include "inode.h"
#include "obj_ops.h"
#include "ordered.h"
#include "request.h"
#include "vdi.h"
#include "vdi_table.h"

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Resolve once what a client's object request needs of its VDI (attr: the
 * object size, the copies, whether the data is frozen, which the gateway
 * enforces) and check the request against it. A VDI that another node just created may not be
 * applied here yet: a write waits for it a little. A read of an object of
 * a VDI unknown here may be of any object size. SD_RES_*.
 */
static int check_object(const struct sd_req *rq, bool write, struct vdi_attr *attr)
{
	uint64_t oid = rq->obj.oid, size;
	int ret = vdi_get_attr(oid_to_vid(oid), attr);

	for (int i = 0; ret == SD_RES_NO_VDI && write && i < 100; i++) {
		sleep_ms(10);
		ret = vdi_get_attr(oid_to_vid(oid), attr);
	}
	if (ret && write)
		return ret;
	if (ret) {
		*attr = (struct vdi_attr){ .shift = SD_MAX_BLOCK_SIZE_SHIFT };
	} else if (!is_vdi_obj(oid) && (attr->shift < SD_MIN_BLOCK_SIZE_SHIFT ||
					attr->shift > SD_MAX_BLOCK_SIZE_SHIFT)) {
		sd_err("vid %06" PRIx32 " has an unusable object size (shift %u)", oid_to_vid(oid),
		       attr->shift);
		return SD_RES_EIO;
	}
	size = is_vdi_obj(oid) ? SD_INODE_SIZE : (UINT64_C(1) << attr->shift);
	if (rq->obj.offset + rq->data_length > size)
		return SD_RES_INVALID_PARMS;
	/* no data object lies past the VDI's end (a size grows, never shrinks) */
	if (!ret && is_data_obj(oid) && ((uint64_t)oid_to_idx(oid) << attr->shift) >= attr->size)
		return SD_RES_INVALID_PARMS;
	return SD_RES_SUCCESS;
}

static unsigned int gw_flags(const struct sd_req *rq)
{
	return (rq->flags & SD_FLAG_CMD_CACHE) ? 0 : GW_SYNC;
}

int obj_op_read(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct vdi_attr attr;
	int ret = check_object(rq, false, &attr);

	if (ret)
		return ret;
	ret = gateway_read(rq->obj.oid, req->data, rq->data_length, rq->obj.offset, &attr);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}

bool obj_op_read_inline(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct vdi_attr attr;

	if (check_object(rq, false, &attr) != SD_RES_SUCCESS ||
	    !gateway_read_cached(rq->obj.oid, req->data, rq->data_length, rq->obj.offset, &attr))
		return false;
	req->rp.data_length = rq->data_length;
	req->rp.result = SD_RES_SUCCESS;
	return true;
}

/*
 * A client's write to an inode's header changes only what QEMU's driver
 * changes (inode.c), checked against the header the replicas hold.
 */
static int check_inode_write(const struct sd_req *rq, const void *data, const struct vdi_attr *attr)
{
	struct sd_inode_header *h;
	int ret;

	if (!is_vdi_obj(rq->obj.oid) || rq->obj.offset >= SD_INODE_HEADER_SIZE)
		return SD_RES_SUCCESS;
	h = malloc(sizeof(*h));
	if (!h)
		return SD_RES_NO_MEM;
	ret = gateway_read(rq->obj.oid, h, SD_INODE_HEADER_SIZE, 0, attr);
	if (ret == SD_RES_SUCCESS)
		ret = inode_check_write(h, rq->obj.offset, data, rq->data_length);
	free(h);
	if (ret == SD_RES_INVALID_PARMS)
		sd_warn("refused a write of %" PRIu32 " bytes at %" PRIu64
			" to the header of vid %06" PRIx32 ": only QEMU's fields may change",
			rq->data_length, rq->obj.offset, oid_to_vid(rq->obj.oid));
	return ret;
}

int obj_op_write(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct vdi_attr attr;
	int ret = check_object(rq, true, &attr);

	if (ret)
		return ret;
	ret = check_inode_write(rq, req->data, &attr);
	if (ret)
		return ret;
	return gateway_write(rq->obj.oid, req->data, rq->data_length, rq->obj.offset, gw_flags(rq),
			     &attr);
}

int obj_op_create_and_write(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	bool cow = rq->flags & SD_FLAG_CMD_COW;
	struct vdi_attr attr;
	int ret;

	/* inodes are made by NEW_VDI only */
	if (is_vdi_obj(rq->obj.oid))
		return SD_RES_INVALID_PARMS;
	/* a COW source is the same data object of another VDI */
	if (cow && (!is_data_obj(rq->obj.oid) || !is_data_obj(rq->obj.cow_oid) ||
		    oid_to_idx(rq->obj.cow_oid) != oid_to_idx(rq->obj.oid)))
		return SD_RES_INVALID_PARMS;
	ret = check_object(rq, true, &attr);
	if (ret)
		return ret;
	return gateway_create(rq->obj.oid, cow ? rq->obj.cow_oid : 0, req->data, rq->data_length,
			      rq->obj.offset, gw_flags(rq), &attr);
}

int obj_op_flush(struct request *req)
{
	return gateway_flush(req->rq.obj.oid);
}

bool obj_op_header_written(const struct request *req)
{
	uint32_t vid;

	return req->rp.result == SD_RES_SUCCESS && vdi_is_header_write(&req->rq, &vid);
}

void obj_op_notify_header(struct request *req)
{
	uint32_t vid;

	vdi_is_header_write(&req->rq, &vid);
	ordered_notify_header(req, vid);
}
