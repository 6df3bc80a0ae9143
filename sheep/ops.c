/*
 * The table of operations: one entry per opcode, saying which thread runs
 * it and whether it is allowed before the cluster is formatted.
 */
#include <string.h>

#include "config.h"
#include "sheep_priv.h"
#include "store/store.h"
#ifdef HAVE_TRACE
#include "trace/trace.h"
#endif

static int op_get_cluster_default(struct request *req)
{
	req->rp.cluster.nr_copies = group_copies();
	req->rp.cluster.copy_policy = 0;
	req->rp.cluster.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	return SD_RES_SUCCESS;
}

static int op_make_fs(struct request *req)
{
	const struct sd_req *rq = &req->rq;

	return group_format(rq->cluster.ctime, rq->cluster.copies, rq->cluster.block_size_shift,
			    req->nr_members);
}

static int op_stat_cluster(struct request *req)
{
	struct cluster_state cs;
	int max = req->rq.data_length / sizeof(struct sd_epoch_log), n = 0;

	group_get_state(&cs);
	if (max > 0)
		n = group_read_epoch_logs(req->data, max);
	req->rp.cinfo.status = cs.formatted ? SD_STATUS_OK : SD_STATUS_WAIT_FOR_FORMAT;
	if (sys.shutting_down)
		req->rp.cinfo.status = SD_STATUS_SHUTDOWN;
	req->rp.cinfo.epoch = cs.epoch;
	req->rp.cinfo.nr_epochs = n;
	req->rp.cinfo.ctime = cs.ctime;
	req->rp.cinfo.copies = cs.copies;
	req->rp.cinfo.block_size_shift = cs.block_size_shift;
	req->rp.data_length = n * sizeof(struct sd_epoch_log);
	return SD_RES_SUCCESS;
}

static int op_get_node_list(struct request *req)
{
	struct cluster_state cs;
	uint32_t n;

	group_get_state(&cs);
	n = min_t(uint32_t, cs.nr_nodes, req->rq.data_length / sizeof(struct sd_node));
	if (n) /* req->data is NULL when the client asked for 0 bytes */
		memcpy(req->data, cs.nodes, n * sizeof(struct sd_node));
	req->rp.node.nr_nodes = cs.nr_nodes;
	req->rp.node.local_idx = cs.local_idx;
	req->rp.data_length = n * sizeof(struct sd_node);
	return SD_RES_SUCCESS;
}

static int op_stat_sheep(struct request *req)
{
	struct store_stat st = { 0 };
	struct sd_node_info info = { 0 };
	int ret = sd_store->stat(&st);

	if (ret)
		return ret;
	info.store_size = st.size;
	info.store_free = st.free;
	info.store_used = st.used;
	info.nr_objects = st.nr_objects;
	info.epoch = 0;
	req->rp.node.store_size = st.size;
	req->rp.node.store_free = st.free;
	req->rp.data_length = min_t(uint32_t, req->rq.data_length, sizeof(info));
	if (req->rp.data_length)
		memcpy(req->data, &info, req->rp.data_length);
	return SD_RES_SUCCESS;
}

static int op_shutdown(struct request *req)
{
	sheep_request_shutdown();
	return SD_RES_SUCCESS;
}

static int op_trace(struct request *req)
{
#ifdef HAVE_TRACE
	return trace_handle_op(&req->rq, &req->rp, req->data);
#else
	return SD_RES_NO_SUPPORT;
#endif
}

static const struct sd_op_template ops[] = {
	/* public, object I/O */
	{ "CREATE_AND_WRITE_OBJ", SD_OP_CREATE_AND_WRITE_OBJ, OP_IO, false,
	  gateway_create_and_write_obj },
	{ "READ_OBJ", SD_OP_READ_OBJ, OP_IO, false, gateway_read_obj },
	{ "WRITE_OBJ", SD_OP_WRITE_OBJ, OP_IO, false, gateway_write_obj },
	{ "FLUSH_VDI", SD_OP_FLUSH_VDI, OP_IO, false, gateway_flush_vdi },
	/* public, the VDI namespace */
	{ "NEW_VDI", SD_OP_NEW_VDI, OP_ORDERED, false, vdi_op_new },
	{ "LOCK_VDI", SD_OP_LOCK_VDI, OP_ORDERED, false, vdi_op_lock },
	{ "RELEASE_VDI", SD_OP_RELEASE_VDI, OP_ORDERED, false, vdi_op_release },
	{ "GET_VDI_INFO", SD_OP_GET_VDI_INFO, OP_CLUSTER, false, vdi_op_get_info },
	{ "READ_VDIS", SD_OP_READ_VDIS, OP_CLUSTER, false, vdi_op_read_vdis },
	{ "DEL_VDI", SD_OP_DEL_VDI, OP_ORDERED, false, vdi_op_del },
	{ "GET_CLUSTER_DEFAULT", SD_OP_GET_CLUSTER_DEFAULT, OP_MAIN, false,
	  op_get_cluster_default },
	/* internal, admin */
	{ "MAKE_FS", SD_OP_MAKE_FS, OP_ORDERED, true, op_make_fs },
	{ "STAT_CLUSTER", SD_OP_STAT_CLUSTER, OP_CLUSTER, true, op_stat_cluster },
	{ "GET_NODE_LIST", SD_OP_GET_NODE_LIST, OP_MAIN, true, op_get_node_list },
	{ "STAT_SHEEP", SD_OP_STAT_SHEEP, OP_IO, true, op_stat_sheep },
	/* ordered: every node stops, and none counts the others' exits as epochs */
	{ "SHUTDOWN", SD_OP_SHUTDOWN, OP_ORDERED, true, op_shutdown },
	{ "STAT_RECOVERY", SD_OP_STAT_RECOVERY, OP_MAIN, true, recovery_op_stat },
	/* a joining node learns the locks (cluster worker: in step with LOCK_VDI) */
	{ "GET_VDI_LOCKS", SD_OP_GET_VDI_LOCKS, OP_CLUSTER, true, vdi_op_get_locks },
	/* internal, peer object I/O (gateway to replica) */
	{ "READ_PEER", SD_OP_READ_PEER, OP_PEER, false, peer_op_read },
	{ "WRITE_PEER", SD_OP_WRITE_PEER, OP_PEER, false, peer_op_write },
	{ "CREATE_AND_WRITE_PEER", SD_OP_CREATE_AND_WRITE_PEER, OP_PEER, false,
	  peer_op_create_and_write },
	{ "REMOVE_PEER", SD_OP_REMOVE_PEER, OP_PEER, false, peer_op_remove },
	{ "FLUSH_PEER", SD_OP_FLUSH_PEER, OP_PEER, false, peer_op_flush },
	{ "GET_OBJ_LIST", SD_OP_GET_OBJ_LIST, OP_PEER, false, peer_op_get_obj_list },
	{ "FETCH_PEER", SD_OP_FETCH_PEER, OP_FETCH, false, recovery_op_fetch },
	/* internal, the tracer: main thread, it stops every other thread */
	{ "TRACE_START", SD_OP_TRACE_START, OP_MAIN, true, op_trace },
	{ "TRACE_STOP", SD_OP_TRACE_STOP, OP_MAIN, true, op_trace },
	{ "TRACE_STATUS", SD_OP_TRACE_STATUS, OP_MAIN, true, op_trace },
	{ "TRACE_READ", SD_OP_TRACE_READ, OP_MAIN, true, op_trace },
};

const struct sd_op_template *get_sd_op(uint8_t opcode)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (ops[i].opcode == opcode)
			return &ops[i];
	return NULL;
}
