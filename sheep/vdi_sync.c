/*
 * A node that joined a running cluster learns its namespace from a member:
 * the in-use bitmap, the header of every vid in it, and which VDIs are
 * locked. The headers are read through the gateway (from whichever node
 * holds the inode) without the table's lock and published in the table
 * (vdi_table.c) under it, as the namespace ops do.
 *
 * Runs on the cluster worker, from recovery's join, so that no ordered op
 * is applied meanwhile: what is learned here is the state at one place of
 * the order, and the ops delivered after it queue behind.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "internal_proto.h"
#include "proto_util.h"
#include "gateway.h"
#include "group.h"
#include "peer_io.h"
#include "vdi_sync.h"
#include "vdi_table.h"

/* locked VDIs a joining node can learn: one per running VM */
#define VDI_MAX_LOCKS 65536

/* take member nid's lock state (joining, after the namespace): SD_RES_* */
static int sync_locks_from(const struct sd_node_id *nid)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
			     .opcode = SD_OP_GET_VDI_LOCKS,
			     .data_length = VDI_MAX_LOCKS * sizeof(struct sd_vdi_lock) };
	struct sd_vdi_lock *locks = malloc(rq.data_length);
	struct sd_rsp rsp;
	int ret = SD_RES_NO_MEM, nr_locked = 0;

	if (locks)
		ret = peer_request(nid, &rq, NULL, locks, &rsp) ? SD_RES_EIO : (int)rsp.result;
	if (ret == SD_RES_SUCCESS) {
		vdi_table_wrlock();
		for (uint32_t i = 0; i < rsp.data_length / sizeof(*locks); i++) {
			struct vdi_state *s = vdi_table_lookup(locks[i].vid);

			if (s && !s->deleted) {
				s->locked = true;
				s->owner = locks[i].owner;
				nr_locked++;
			} else {
				sd_warn("vid %06" PRIx32 " locked in the cluster, unknown here",
					locks[i].vid);
			}
		}
		vdi_table_unlock();
		sd_info("learned %d locked vdi(s) from the cluster", nr_locked);
	}
	free(locks);
	return ret;
}

/* the header of vid, read from the replicas, into the table: SD_RES_* */
static int learn_vdi(uint32_t vid, struct sd_inode_header *h)
{
	struct vdi_attr cluster = { .nr_copies = group_copies() };
	int ret = gateway_read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, &cluster);
	struct vdi_state *s;

	vdi_table_wrlock();
	if (ret == SD_RES_SUCCESS) {
		s = vdi_table_get(vid, NULL);
		if (s)
			vdi_table_refill(s, h);
		else
			ret = SD_RES_NO_MEM;
	}
	/* an unreadable inode keeps its vid reserved all the same */
	vdi_table_set_bit(vid);
	vdi_table_unlock();
	return ret;
}

/*
 * Learn the namespace from member nid: its in-use bitmap (READ_VDIS), then
 * the header of every vid in it, then the lock state (GET_VDI_LOCKS): a VDI
 * locked through another node stays locked here. SD_RES_* of the bitmap's
 * request; a header or the locks that cannot be learned are logged.
 */
int vdi_sync_from(const struct sd_node_id *nid)
{
	struct sd_req rq = { .proto_ver = SD_PROTO_VER,
			     .opcode = SD_OP_READ_VDIS,
			     .data_length = SD_VDI_BITMAP_SIZE };
	struct sd_inode_header *h = malloc(sizeof(*h));
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	struct sd_rsp rsp;
	int ret, locks_ret, nr_new = 0;

	if (!h || !bitmap) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	ret = peer_request(nid, &rq, NULL, bitmap, &rsp);
	if (ret) {
		ret = SD_RES_EIO;
		goto out_free;
	}
	ret = rsp.result;
	if (ret != SD_RES_SUCCESS)
		goto out_free;
	memset(bitmap + rsp.data_length, 0, SD_VDI_BITMAP_SIZE - rsp.data_length);
	for (uint32_t vid = 0; vid < SD_NR_VDIS; vid++) {
		int r;

		if (!bitmap[vid / 8]) {
			vid |= 7;
			continue;
		}
		if (!sd_vid_test(bitmap, vid))
			continue;
		r = learn_vdi(vid, h);
		if (r == SD_RES_SUCCESS)
			nr_new++;
		else
			sd_err("inode of vid %06" PRIx32 " unreadable while joining: %s", vid,
			       sd_strerror(r));
	}
	sd_info("learned %d vdi(s) from the cluster", nr_new);
	/* logged here: the caller's message is about the namespace */
	locks_ret = sync_locks_from(nid);
	if (locks_ret != SD_RES_SUCCESS)
		sd_err("cannot learn the locked vdis from the cluster: %s", sd_strerror(locks_ret));
out_free:
	free(bitmap);
	free(h);
	return ret;
}
