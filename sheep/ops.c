/*
 * The table of operations: one entry per opcode, saying which thread runs
 * it and whether it is allowed before the cluster is formatted.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "internal_proto.h"
#include "logger.h"
#include "util.h"
#include "net.h"
#include "daemon.h"
#include "deleted.h"
#include "group.h"
#include "join.h"
#include "lock.h"
#include "obj_ops.h"
#include "ops.h"
#include "ops_exec.h"
#include "peer.h"
#include "request.h"
#include "stat.h"
#include "vdi.h"
#include "store/store.h"
#include "store/md.h"
#ifdef HAVE_TRACE
#include "trace/trace.h"
#endif

static int op_get_cluster_default(struct request *req)
{
	req->rp.cluster.nr_copies = group_copies();
	req->rp.cluster.copy_policy = group_copy_policy();
	req->rp.cluster.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	return SD_RES_SUCCESS;
}

static int op_make_fs(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret = group_format(rq->cluster.ctime, rq->cluster.copies, rq->cluster.copy_policy,
			       rq->cluster.block_size_shift, req->ord.nr_storing);

	switch (ret) {
	case 0:
		return SD_RES_SUCCESS;
	case -EEXIST:
		return SD_RES_ALREADY_FORMATTED;
	case -EINVAL:
		return SD_RES_INVALID_PARMS;
	case -ERANGE:
		return SD_RES_TOO_FEW_NODES;
	case -ENOSPC:
		return SD_RES_NO_SPACE;
	default:
		return SD_RES_EIO;
	}
}

/* ALTER_CLUSTER_COPY, on every node in the cluster's order: the same answer everywhere */
static int op_alter_cluster_copy(struct request *req)
{
	switch (group_set_copies(req->rq.cluster.copies, req->ord.nr_storing)) {
	case 0:
		return SD_RES_SUCCESS;
	case -EINVAL:
		return SD_RES_INVALID_PARMS;
	case -ERANGE:
		return SD_RES_TOO_FEW_NODES;
	case -ENOENT:
		return SD_RES_WAIT_FOR_FORMAT;
	default:
		return SD_RES_EIO;
	}
}

static int op_stat_cluster(struct request *req)
{
	struct cluster_state cs;
	int max = req->rq.data_length / sizeof(struct sd_epoch_log), n = 0;

	group_get_state(&cs);
	if (max > 0)
		n = group_read_epoch_logs(req->data, max);
	req->rp.cinfo.status = cs.formatted ? SD_STATUS_OK : SD_STATUS_WAIT_FOR_FORMAT;
	if (group_is_waiting() || join_waits())
		req->rp.cinfo.status = SD_STATUS_WAIT_FOR_JOIN;
	req->rp.cinfo.flags = group_started_clean() ? SD_CINFO_CLEAN_STOP : 0;
	if (daemon_stopping())
		req->rp.cinfo.status = SD_STATUS_SHUTDOWN;
	req->rp.cinfo.epoch = cs.epoch;
	req->rp.cinfo.nr_epochs = n;
	req->rp.cinfo.ctime = cs.ctime;
	req->rp.cinfo.copies = cs.copies;
	req->rp.cinfo.copy_policy = cs.copy_policy;
	req->rp.cinfo.block_size_shift = cs.block_size_shift;
	req->rp.data_length = n * sizeof(struct sd_epoch_log);
	return SD_RES_SUCCESS;
}

static int op_force_start(struct request *req)
{
	return group_force_start() ? SD_RES_NOT_WAITING : SD_RES_SUCCESS;
}

static int op_log_level(struct request *req)
{
	uint32_t want, now;

	if (req->rq.flags & SD_FLAG_CMD_WRITE) {
		if (req->rq.data_length != sizeof(want))
			return SD_RES_INVALID_PARMS;
		memcpy(&want, req->data, sizeof(want));
		if (want > SDOG_DEBUG)
			return SD_RES_INVALID_PARMS;
		sd_notice("log level set to %u", want);
		/* the log macros of every thread read it unlocked: one word */
		__atomic_store_n(&sd_log_level, (int)want, __ATOMIC_RELAXED);
	}
	/* the only writer is this op, on the main thread: a plain read */
	now = (uint32_t)sd_log_level;
	if (req->rq.data_length < sizeof(now))
		return SD_RES_SUCCESS;
	memcpy(req->data, &now, sizeof(now));
	req->rp.data_length = sizeof(now);
	return SD_RES_SUCCESS;
}

/* this node only: it leaves as on SIGTERM, so the others start an epoch without it */
static int op_kill_node(struct request *req)
{
	sd_notice("asked to leave the cluster (collie node kill): shutting down");
	daemon_stop(0);
	return SD_RES_SUCCESS;
}

/* SET_VNODES: checked here, then broadcast; every node counts the epoch (group_members.c) */
static int op_set_vnodes(struct request *req)
{
	uint32_t len = req->rq.data_length;
	int ret;

	if (!(req->rq.flags & SD_FLAG_CMD_WRITE) || !len ||
	    len % sizeof(struct sd_vnodes_entry) ||
	    len > SD_MAX_NODES * sizeof(struct sd_vnodes_entry))
		return SD_RES_INVALID_PARMS;
	ret = group_set_vnodes(req->data, (int)(len / sizeof(struct sd_vnodes_entry)));
	switch (ret) {
	case 0:
		return SD_RES_SUCCESS;
	case -EAGAIN:
		return SD_RES_WAIT_FOR_FORMAT;
	case -EBUSY:
		return SD_RES_WAIT_FOR_JOIN;
	case -ENOMEM:
		return SD_RES_NO_MEM;
	case -EINVAL:
	case -ENOENT:
	case -EPERM:
		sd_warn("SET_VNODES refused: %s", strerror(-ret));
		return SD_RES_INVALID_PARMS;
	default:
		sd_err("SET_VNODES: cannot broadcast: %s", strerror(-ret));
		return SD_RES_SYSTEM_ERROR;
	}
}

static int op_get_node_list(struct request *req)
{
	struct cluster_state cs;
	uint32_t n;

	group_get_state(&cs);
	n = min_t(uint32_t, cs.nr_nodes, req->rq.data_length / sizeof(struct sd_node));
	memcpy(req->data, cs.nodes, n * sizeof(struct sd_node));
	req->rp.node.nr_nodes = cs.nr_nodes;
	req->rp.node.local_idx = cs.local_idx;
	req->rp.data_length = n * sizeof(struct sd_node);
	return SD_RES_SUCCESS;
}

/* STAT_SHEEP's report of the NBD export (ops_init) */
static const char *nbd_addr;
static int nbd_port;

void ops_init(const struct ops_config *cfg)
{
	nbd_addr = cfg->nbd_addr;
	nbd_port = cfg->nbd_port;
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
	info.epoch = group_epoch();
	info.nbd_port = (uint32_t)nbd_port;
	if (nbd_port && nbd_addr && sd_str_to_addr(nbd_addr, info.nbd_addr))
		memset(info.nbd_addr, 0, sizeof(info.nbd_addr)); /* a host name: unknown here */
	req->rp.node.store_size = st.size;
	req->rp.node.store_free = st.free;
	req->rp.data_length = min_t(uint32_t, req->rq.data_length, sizeof(info));
	memcpy(req->data, &info, req->rp.data_length);
	return SD_RES_SUCCESS;
}

/* MD_INFO: every disk this node knows, in the order they came */
static int op_md_info(struct request *req)
{
	struct sd_md_disk *d = calloc(MD_MAX_DISKS, sizeof(*d));
	uint32_t len;
	int n;

	if (!d)
		return SD_RES_NO_MEM;
	n = md_info(d, MD_MAX_DISKS);
	len = (uint32_t)n * sizeof(*d);
	if (len > req->rq.data_length) {
		free(d);
		return SD_RES_BUFFER_SMALL;
	}
	memcpy(req->data, d, len);
	req->rp.data_length = len;
	free(d);
	return SD_RES_SUCCESS;
}

/* the path of MD_PLUG and MD_UNPLUG: NUL-terminated within the payload, or NULL */
static const char *md_path_arg(const struct request *req)
{
	uint32_t len = req->rq.data_length;

	if (!(req->rq.flags & SD_FLAG_CMD_WRITE) || len < 2 || len > SD_MD_PATH_LEN ||
	    memchr(req->data, '\0', len) == NULL || !((const char *)req->data)[0])
		return NULL;
	return req->data;
}

static int op_md_plug(struct request *req)
{
	const char *path = md_path_arg(req);
	int ret;

	if (!path)
		return SD_RES_INVALID_PARMS;
	ret = md_plug(path);
	req->rp.data_length = 0;
	if (ret == -EEXIST)
		return SD_RES_MD_EXIST;
	if (ret) {
		sd_err("cannot plug the disk %s: %s", path, strerror(-ret));
		return SD_RES_MD_BAD_DISK;
	}
	return SD_RES_SUCCESS;
}

static int op_md_unplug(struct request *req)
{
	const char *path = md_path_arg(req);
	int ret;

	if (!path)
		return SD_RES_INVALID_PARMS;
	ret = md_unplug(path);
	req->rp.data_length = 0;
	if (ret == -ENOENT)
		return SD_RES_MD_NO_DISK;
	if (ret == -EBUSY)
		return SD_RES_MD_LAST;
	return ret ? SD_RES_EIO : SD_RES_SUCCESS;
}

static int op_shutdown(struct request *req)
{
	daemon_stop(0);
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

/* TRACE_CLOCK: the tracer's clock now, in rsp.trace.generation */
static int op_trace_clock(struct request *req)
{
#ifdef HAVE_TRACE
	req->rp.trace.generation = trace_clock_ns();
	return SD_RES_SUCCESS;
#else
	return SD_RES_NO_SUPPORT;
#endif
}

/*
 * STAT_READ: the statistics' snapshot, on the main thread (their owner):
 * bounded (SD_STAT_MAX_* rows, a copy of counters), no I/O, no rendering.
 */
static int op_stat_read(struct request *req)
{
	int n = stat_snapshot(req->data, req->rq.data_length, stat_clock());

	if (n == -EOPNOTSUPP)
		return SD_RES_NO_SUPPORT;
	if (n < 0)
		return SD_RES_BUFFER_SMALL;
	req->rp.data_length = (uint32_t)n;
	return SD_RES_SUCCESS;
}

#ifdef SD_TEST_HOOKS
/*
 * Test builds only (--enable-test-hooks): STAT_HOLD keeps an io worker
 * until STAT_RELEASE or req.obj.offset ms, whichever comes first, so that
 * a test can watch a stuck request in node stat and in the hang report.
 */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static uint64_t hold_generation;

static int op_stat_hold(struct request *req)
{
	uint64_t ms = req->rq.obj.offset, gen;
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&hold_lock);
	gen = hold_generation;
	while (gen == hold_generation && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&hold_cond, &hold_lock, &until);
	pthread_mutex_unlock(&hold_lock);
	return SD_RES_SUCCESS;
}

/* TEST_STALL_MAIN: hold the main thread, as a slow event-loop handler would */
static int op_test_stall_main(struct request *req)
{
	uint64_t ms = min_t(uint64_t, req->rq.obj.offset, 1000);
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return SD_RES_SUCCESS;
}

static int op_stat_release(struct request *req)
{
	pthread_mutex_lock(&hold_lock);
	hold_generation++;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
	return SD_RES_SUCCESS;
}
#endif

static const struct sd_op_template ops[] = {
	/* public, object I/O */
	{ "CREATE_AND_WRITE_OBJ", SD_OP_CREATE_AND_WRITE_OBJ, OP_IO, false, obj_op_create_and_write,
	  NULL, obj_op_header_written, obj_op_notify_header },
	{ "READ_OBJ", SD_OP_READ_OBJ, OP_IO, false, obj_op_read, obj_op_read_inline },
	{ "WRITE_OBJ", SD_OP_WRITE_OBJ, OP_IO, false, obj_op_write, NULL, obj_op_header_written,
	  obj_op_notify_header },
	{ "FLUSH_VDI", SD_OP_FLUSH_VDI, OP_IO, false, obj_op_flush },
	/* public, the VDI namespace */
	{ "NEW_VDI", SD_OP_NEW_VDI, OP_ORDERED, false, vdi_op_new },
	{ "LOCK_VDI", SD_OP_LOCK_VDI, OP_ORDERED, false, vdi_op_lock },
	{ "RELEASE_VDI", SD_OP_RELEASE_VDI, OP_ORDERED, false, vdi_op_release },
	/* an operator's: a lock whoever holds it (collie vdi unlock) */
	{ "UNLOCK_VDI", SD_OP_UNLOCK_VDI, OP_ORDERED, false, vdi_op_unlock },
	/*
	 * the lookups too: a node answers once every change ordered before
	 * the question is applied there, so every node answers alike (a VDI
	 * another node just created is found here too)
	 */
	{ "GET_VDI_INFO", SD_OP_GET_VDI_INFO, OP_ORDERED, false, vdi_op_get_info },
	{ "READ_VDIS", SD_OP_READ_VDIS, OP_ORDERED, false, vdi_op_read_vdis },
	{ "DEL_VDI", SD_OP_DEL_VDI, OP_ORDERED, false, vdi_op_del },
	{ "GET_CLUSTER_DEFAULT", SD_OP_GET_CLUSTER_DEFAULT, OP_MAIN, false,
	  op_get_cluster_default },
	/* internal, admin */
	{ "MAKE_FS", SD_OP_MAKE_FS, OP_ORDERED, true, op_make_fs },
	{ "ALTER_CLUSTER_COPY", SD_OP_ALTER_CLUSTER_COPY, OP_ORDERED, false, op_alter_cluster_copy },
	{ "STAT_CLUSTER", SD_OP_STAT_CLUSTER, OP_CLUSTER, true, op_stat_cluster },
	{ "GET_NODE_LIST", SD_OP_GET_NODE_LIST, OP_MAIN, true, op_get_node_list },
	{ "STAT_SHEEP", SD_OP_STAT_SHEEP, OP_IO, true, op_stat_sheep },
	/* ordered: every node stops, and none counts the others' exits as epochs */
	{ "SHUTDOWN", SD_OP_SHUTDOWN, OP_ORDERED, true, op_shutdown },
	{ "STAT_RECOVERY", SD_OP_STAT_RECOVERY, OP_MAIN, true, peer_op_stat_recovery },
	/* the operator's way out of a wait for nodes that are gone for good */
	{ "FORCE_START", SD_OP_FORCE_START, OP_MAIN, true, op_force_start },
	/* the operator's controls of one node */
	{ "LOG_LEVEL", SD_OP_LOG_LEVEL, OP_MAIN, true, op_log_level },
	{ "KILL_NODE", SD_OP_KILL_NODE, OP_MAIN, true, op_kill_node },
	/* the placement ring's weights (collie node vnodes set, cluster reweight) */
	{ "SET_VNODES", SD_OP_SET_VNODES, OP_MAIN, false, op_set_vnodes },
	/* the disks of this node: info walks them, plug and unplug open and stat */
	{ "MD_INFO", SD_OP_MD_INFO, OP_IO, true, op_md_info },
	{ "MD_PLUG", SD_OP_MD_PLUG, OP_IO, true, op_md_plug },
	{ "MD_UNPLUG", SD_OP_MD_UNPLUG, OP_IO, true, op_md_unplug },
	/* a joining node learns the locks (cluster worker: in step with LOCK_VDI) */
	{ "GET_VDI_LOCKS", SD_OP_GET_VDI_LOCKS, OP_CLUSTER, true, vdi_op_get_locks },
	/* a joining node learns the deleted vdis (cluster worker: in step with DEL_VDI) */
	{ "GET_DELETED", SD_OP_GET_DELETED, OP_CLUSTER, true, deleted_op_get },
	/* a VDI's copies changed: the header here, then every node rereads it */
	{ "ALTER_COPY", SD_OP_ALTER_COPY, OP_IO, false, vdi_op_alter_copy, NULL,
	  vdi_op_alter_copy_held, vdi_op_alter_copy_notify },
	/* an inode header a client wrote: every node rereads it (see ordered.c) */
	{ "NOTIFY_VDI_HEADER", SD_OP_NOTIFY_VDI_HEADER, OP_ORDERED, false, vdi_op_header_changed },
	/* internal, peer object I/O (gateway to replica) */
	{ "READ_PEER", SD_OP_READ_PEER, OP_PEER, false, peer_op_read },
	{ "WRITE_PEER", SD_OP_WRITE_PEER, OP_PEER, false, peer_op_write },
	{ "CREATE_AND_WRITE_PEER", SD_OP_CREATE_AND_WRITE_PEER, OP_PEER, false,
	  peer_op_create_and_write },
	{ "REMOVE_PEER", SD_OP_REMOVE_PEER, OP_PEER, false, peer_op_remove },
	{ "FLUSH_PEER", SD_OP_FLUSH_PEER, OP_PEER, false, peer_op_flush },
	{ "GET_OBJ_LIST", SD_OP_GET_OBJ_LIST, OP_PEER, false, peer_op_get_obj_list },
	{ "FETCH_PEER", SD_OP_FETCH_PEER, OP_FETCH, false, peer_op_fetch },
	/* the same for a write that waits on it: ahead of recovery's */
	{ "FETCH_PEER_NOW", SD_OP_FETCH_PEER_NOW, OP_FETCH, false, peer_op_fetch, NULL, NULL, NULL,
	  true },
	/*
	 * internal, the tracer: one worker of its own, in order. READ renders
	 * a whole snapshot (up to the buffer size per thread) and START/STOP
	 * stop every other thread, the main one included: none of it may stall
	 * the main thread, and all of it takes the trace lock, so all of it
	 * runs there (the main thread never waits for the lock).
	 */
	{ "TRACE_START", SD_OP_TRACE_START, OP_TRACE, true, op_trace },
	{ "TRACE_STOP", SD_OP_TRACE_STOP, OP_TRACE, true, op_trace },
	{ "TRACE_STATUS", SD_OP_TRACE_STATUS, OP_TRACE, true, op_trace },
	{ "TRACE_READ", SD_OP_TRACE_READ, OP_TRACE, true, op_trace },
	{ "TRACE_FOLLOW", SD_OP_TRACE_FOLLOW, OP_TRACE, true, op_trace },
	/* the tracer's clock: on the main thread, no lock, for collie's offsets */
	{ "TRACE_CLOCK", SD_OP_TRACE_CLOCK, OP_MAIN, true, op_trace_clock },
	/* internal, statistics */
	{ "STAT_READ", SD_OP_STAT_READ, OP_MAIN, true, op_stat_read },
#ifdef SD_TEST_HOOKS
	{ "STAT_HOLD", SD_OP_STAT_HOLD, OP_IO, true, op_stat_hold },
	{ "TEST_STALL_MAIN", SD_OP_TEST_STALL_MAIN, OP_MAIN, true, op_test_stall_main },
	{ "STAT_RELEASE", SD_OP_STAT_RELEASE, OP_MAIN, true, op_stat_release },
#endif
};

void ops_register_stats(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (stat_register_op(ops[i].opcode, ops[i].name, ops_queue_name(ops[i].type)) < 0)
			sd_warn("no statistics slot for %s", ops[i].name);
}

/*
 * By opcode, its entry in ops[] (NULL: unknown): every request looks its
 * opcode up, twice, and a peer op sat ~25 entries down a linear search.
 * Filled at load, before main() and any thread; ops[] lists each opcode once.
 */
static const struct sd_op_template *op_of[256];

__attribute__((constructor)) static void ops_index(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
		assert(!op_of[ops[i].opcode]);
		op_of[ops[i].opcode] = &ops[i];
	}
}

const struct sd_op_template *get_sd_op(uint8_t opcode)
{
	return op_of[opcode];
}
