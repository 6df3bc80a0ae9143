/*
 * The internal protocol: admin, peer and trace operations between collie and
 * sheep and between sheep. Same 48-byte header shape as the public protocol
 * (struct sd_req / sd_rsp), opcodes 0x80 and up, and its own version byte:
 * a request with an internal opcode must carry SD_SHEEP_PROTO_VER.
 */
#ifndef INTERNAL_PROTO_H
#define INTERNAL_PROTO_H

#include <stdint.h>
#include "sheepdog_proto.h"

#define SD_SHEEP_PROTO_VER 0x80

/* admin operations (collie -> sheep) */
#define SD_OP_MAKE_FS 0x80	/* req.cluster: copies, block_size_shift, ctime */
#define SD_OP_STAT_CLUSTER 0x81 /* rsp.cinfo, payload: struct sd_epoch_log[nr_epochs] */
#define SD_OP_GET_NODE_LIST 0x82 /* rsp.node.nr_nodes/local_idx, payload: struct sd_node[] */
#define SD_OP_STAT_SHEEP 0x83	/* rsp.node.store_size/store_free, payload: struct sd_node_info */
#define SD_OP_SHUTDOWN 0x84	/* stop every daemon of the cluster */
#define SD_OP_STAT_RECOVERY 0x85 /* payload: struct sd_recovery_info */
#define SD_OP_GET_VDI_LOCKS 0x86 /* payload: uint32_t vid[] of the locked VDIs */
/* serve without the nodes a node restarted alone still waits for (SD_STATUS_WAIT_FOR_JOIN) */
#define SD_OP_FORCE_START 0x87
/*
 * Ordered among the daemons, never from a client: the header of inode
 * req.vdi.base_vdi_id changed (a client wrote it); every node rereads it
 * into its VDI table, in the cluster's order.
 */
#define SD_OP_NOTIFY_VDI_HEADER 0x8F
/*
 * The deleted VDIs that a node records (a joining node learns them). The
 * payload is a sequence of records, each uint32_t vid, uint32_t nr_kept,
 * then nr_kept uint32_t indexes of data objects that other VDIs still read.
 * SD_RES_BUFFER_SMALL when they do not fit in data_length.
 */
#define SD_OP_GET_DELETED 0x8E

/*
 * peer operations (sheep -> sheep): the gateway's requests to the replica
 * nodes. req.epoch is the sender's epoch; a peer on another epoch answers
 * SD_RES_OLD_NODE_VER (the sender is behind) or SD_RES_NEW_NODE_VER (the
 * sender is ahead) and the sender retries on its newest ring. Header as for
 * the public object ops (req.obj); data as READ_OBJ / WRITE_OBJ.
 * CREATE_AND_WRITE_PEER creates the object from its payload (zeros
 * elsewhere); a peer that has the object already applies it as a write of
 * the client's range only. Without SD_FLAG_CMD_COW the payload is the
 * client's write. With it, the payload is the whole new object (the COW
 * source with the client's write applied: the gateway reads the source)
 * and req.create.wr_offset/wr_length name the client's write inside it.
 * GET_OBJ_LIST answers the oids (uint64_t) stored on the peer.
 */
#define SD_OP_READ_PEER 0xA0
#define SD_OP_WRITE_PEER 0xA1
#define SD_OP_CREATE_AND_WRITE_PEER 0xA2
#define SD_OP_REMOVE_PEER 0xA3
#define SD_OP_FLUSH_PEER 0xA4
#define SD_OP_GET_OBJ_LIST 0xA5
/*
 * FETCH_PEER: recovery reads a whole object from a node that stores it. No
 * epoch check (recovery copies what is stored, whatever the epoch) and its
 * own queue on the peer: it never waits on another node, so recovery that
 * runs inside a peer write can never deadlock two nodes.
 */
#define SD_OP_FETCH_PEER 0xA6
/*
 * With GET_OBJ_LIST and FETCH_PEER: the stale copies (objects that a node
 * set aside when it rejoined) instead of the live ones.
 */
#define SD_FLAG_CMD_STALE 0x8000

/*
 * Request statistics (collie node stat). STAT_READ answers a snapshot of
 * the always-on counters: struct sd_stat_header, then the TOTAL row (a
 * struct sd_stat_op), nr_ops struct sd_stat_op, nr_queues struct
 * sd_stat_queue and nr_vdis struct sd_stat_vdi. Counters run from the
 * daemon's start; a reader takes two snapshots for rates over an interval.
 * STAT_HOLD and STAT_RELEASE exist only in a daemon built with
 * --enable-test-hooks: HOLD keeps one io worker busy for req.obj.offset
 * milliseconds at most (req.obj.oid is named in its hang report), RELEASE
 * lets every held worker go.
 */
#define SD_OP_STAT_READ 0x90
#define SD_OP_STAT_HOLD 0x91
#define SD_OP_STAT_RELEASE 0x92

/* trace operations (collie debug trace ...); payload formats in trace.h of sheep */
#define SD_OP_TRACE_START 0xB0
#define SD_OP_TRACE_STOP 0xB1
#define SD_OP_TRACE_STATUS 0xB2
#define SD_OP_TRACE_READ 0xB3
#define SD_OP_TRACE_FOLLOW 0xB4 /* the records written since the last FOLLOW */
/*
 * TEST_STALL_MAIN exists only in a daemon built with --enable-test-hooks:
 * the main thread sleeps req.obj.offset milliseconds (1000 at most) inside
 * the event-loop handler that runs it, so that a test can watch the loop
 * checker catch a handler that held the main thread.
 */
#define SD_OP_TEST_STALL_MAIN 0xB5

/* internal result codes */
#define SD_RES_NO_SUPPORT 0x80	 /* the operation is not built into this daemon */
#define SD_RES_NOT_FORMATTED 0x81 /* alias kept apart from WAIT_FOR_FORMAT for admin ops */
#define SD_RES_ALREADY_FORMATTED 0x82
#define SD_RES_TRACE_BUSY 0x83	/* tracer already running / not running */
#define SD_RES_TRACE_TIMEOUT 0x84 /* a thread did not park in time: nothing changed */
#define SD_RES_TRACE_BROKEN 0x85 /* the tracer hit an anomaly and disabled itself */
#define SD_RES_NO_MATCH 0x86	/* a filter matched no function */
#define SD_RES_INVALID_VERSION 0x87
#define SD_RES_TOO_FEW_NODES 0x88 /* more copies asked than there are nodes (zones) */
#define SD_RES_OLD_NODE_VER 0x89 /* peer op from an older epoch than the peer's */
#define SD_RES_NEW_NODE_VER 0x8A /* peer op from a newer epoch than the peer's */
#define SD_RES_BUFFER_SMALL 0x8B /* the answer does not fit in data_length */
#define SD_RES_NOT_WAITING 0x8C	 /* FORCE_START: this node waits for no node */
#define SD_RES_NO_TRACER 0x90	 /* no tracer of that name in this daemon */
#define SD_RES_TRACE_OFF 0x91	 /* that tracer is not running */
#define SD_RES_TRACE_FOLLOWERS 0x92 /* every follower slot of the trace is taken */
#define SD_RES_TRACE_FOLLOW_GONE 0x93 /* this follower's slot went to another */
/*
 * A peer could not be reached (connect, send or receive failed). Never on
 * the wire: the gateway retries on a new ring, then answers SD_RES_EIO.
 */
#define SD_RES_NETWORK 0xA0
#define SD_RES_ACCESS_DENIED 0xA1 /* the client's address may not run this op */

/* cluster status (rsp.cinfo.status) */
#define SD_STATUS_OK 0
#define SD_STATUS_WAIT_FOR_FORMAT 1
#define SD_STATUS_SHUTDOWN 2
#define SD_STATUS_HALT 3
/* restarted alone: waits for the nodes of its newest epoch before serving */
#define SD_STATUS_WAIT_FOR_JOIN 4
/*
 * rsp.cinfo.flags: the node stopped at its newest epoch with a cluster
 * shutdown and has served nothing since it started again
 */
#define SD_CINFO_CLEAN_STOP 0x01

#define SD_MAX_NODES 64

/* a node's identity on the wire: IPv6 or v4-mapped address and port */
struct sd_node_id {
	uint8_t addr[16];
	uint16_t port;
	uint8_t pad[6];
};

struct sd_node {
	struct sd_node_id nid;
	uint32_t zone;
	uint16_t nr_vnodes;
	uint16_t pad;
	uint64_t space;
};

/* one entry of the epoch history */
struct sd_epoch_log {
	uint64_t ctime; /* when the epoch began, seconds since the epoch */
	uint32_t epoch;
	uint32_t nr_nodes;
	struct sd_node nodes[SD_MAX_NODES];
};

/* payload of SD_OP_STAT_SHEEP */
struct sd_node_info {
	uint64_t store_size; /* the size of the filesystem holding the store */
	uint64_t store_free;
	uint64_t store_used; /* bytes in object files */
	uint64_t nr_objects;
	uint32_t epoch;
	uint32_t nbd_port;    /* sheep --nbd: its NBD port, 0 when it serves no NBD */
	uint8_t nbd_addr[16]; /* and address (v4-mapped); all zeros: every address */
};

/* payload of SD_OP_STAT_RECOVERY: this node's recovery */
#define SD_RECOVERY_DONE 0    /* every node recovered the epoch; what the ring no longer
				 gives this node is removed (or kept: nr_failed) */
#define SD_RECOVERY_RUNNING 1 /* fetching objects */
#define SD_RECOVERY_JOINING 2 /* learning the cluster's state from a member */
#define SD_RECOVERY_WAITING 3 /* fetched; waiting for the other nodes to be */
struct sd_recovery_info {
	uint32_t epoch; /* the epoch being (or last) recovered */
	uint32_t state;
	uint64_t nr_total;  /* objects to fetch for that epoch */
	uint64_t nr_done;   /* fetched */
	uint64_t nr_failed; /* failed at the last try: retried while the epoch lasts */
	uint64_t nr_stale;  /* objects held from before a rejoin, not served */
	uint64_t nr_removed; /* objects removed once no longer this node's */
};

/*
 * Trace operations.
 *
 * Several tracers may run at once, each on its own set of functions. A
 * tracer is named by its name on the wire (START, STOP, the status) and by
 * its id (SD_TRACER_*) in READ.
 *
 * TRACE_START: req.trace.depth (0: default), req.trace.buffer_size (bytes per
 *   thread, 0: default); flag WRITE and a payload of NUL-terminated strings:
 *   the tracer name ("" for graph) followed by zero or more glob patterns of
 *   function names (no pattern: every function) and options, which contain
 *   a '=' (no function name does):
 *     notrace=PAT          leave the functions matching PAT out (repeatable)
 *     graph-function=PAT   graph: record only inside calls of PAT (repeatable)
 *     threshold=NS         graph: keep only calls of at least NS ns; loop:
 *                          handlers that hold the main thread that long
 *     main=PAT, worker=PAT thread checker: functions that must run on the
 *                          main thread, and on a worker (repeatable)
 *     thread=KIND          trace only the threads of one kind: main, or the
 *                          first word of a thread's name (io, peer, ...)
 *   A payload without the WRITE flag is refused (SD_RES_INVALID_PARMS).
 *   SD_RES_TRACE_BUSY if that tracer runs already, SD_RES_NO_TRACER if there
 *   is none of that name, SD_RES_NO_MATCH if a pattern set chose nothing.
 * TRACE_STOP: no payload: stop every tracer; or (flag WRITE) a tracer name:
 *   stop that one (SD_RES_TRACE_OFF if it does not run).
 * TRACE_STATUS: response payload struct sd_trace_status (the tracer started
 *   last, every site patched), then one struct sd_trace_tracer for each
 *   tracer of the daemon, as many as data_length holds.
 * TRACE_READ: req.trace.format (SD_TRACE_FMT_*), req.trace.offset,
 *   req.trace.tracer_flags (SD_TRACER_*; 0: the tracer started last, or
 *   profile for SD_TRACE_FMT_PROFILE), data_length = the chunk wanted. The
 *   daemon renders a snapshot of the buffers when offset is 0 and serves it
 *   in chunks; rsp.trace.total_length is the snapshot's size and
 *   rsp.trace.generation names it (a reader restarts if it changes under
 *   it). SD_TRACE_FMT_PROFILE is the profile tracer's table, one line per
 *   function called: "name calls total_ns self_ns min_ns max_ns" then 40
 *   counts of calls taking [2^k, 2^(k+1)) ns, k = 0..39 (the last bucket
 *   holds every longer call too).
 * TRACE_FOLLOW: req.trace.tracer_flags as for READ (graph or function),
 *   req.trace.offset 0 to become a new follower, from the oldest record still
 *   held, or the follower's handle (rsp.trace.generation of its previous
 *   answer) to go on where it left; data_length = the most text wanted.
 *   Several followers (up to 4) run at once, each with its own cursor; one
 *   that stays silent for 30 s gives its slot to a new one
 *   (SD_RES_TRACE_FOLLOWERS when every slot is busy, SD_RES_TRACE_FOLLOW_GONE
 *   for a handle whose slot was given away). The answer holds whole lines,
 *   one per record, each sent once to each follower:
 *     "E tid depth ts_ns name" and "X tid depth ts_ns name" (graph entry and
 *     exit), "F tid ts_ns name caller" (function), "L tid count" (records
 *     overwritten before they could be sent).
 */
#define SD_TRACE_FMT_GRAPH 0
#define SD_TRACE_FMT_FOLDED 1
#define SD_TRACE_FMT_CHROME 2
#define SD_TRACE_FMT_CSV 3
#define SD_TRACE_FMT_PROFILE 4

#define SD_TRACER_GRAPH 1
#define SD_TRACER_FUNCTION 2
#define SD_TRACER_PROFILE 3
#define SD_TRACER_LOOP 4
#define SD_TRACER_THREAD 5
#define SD_TRACE_PROF_BUCKETS 40

#define SD_TRACE_STATE_OFF 0
#define SD_TRACE_STATE_ON 1
#define SD_TRACE_STATE_BROKEN 2

struct sd_trace_status {
	char tracer[32];
	uint32_t state;
	uint32_t nr_sites_patched;
	uint32_t nr_sites_total;
	uint32_t nr_threads;
	uint64_t nr_events;
	uint64_t nr_lost;
	uint64_t buffer_size;
	uint32_t depth;
	uint32_t nr_untraced; /* threads not traced: the total of every ring was taken */
};

/* payload of SD_OP_STAT_READ */
#define SD_STAT_VERSION 1
#define SD_STAT_NR_BUCKETS 32 /* bucket 0: 0-1 us, bucket k: 2^k .. 2^(k+1)-1 us */
#define SD_STAT_MAX_OPS 48
/*
 * The rows of the NBD front-end's commands in STAT_READ (sd_stat_op.opcode):
 * no operation of the protocol, numbers that none uses
 */
#define SD_STAT_NBD_READ 0xC0
#define SD_STAT_NBD_WRITE 0xC1
#define SD_STAT_NBD_FLUSH 0xC2
#define SD_STAT_NBD_TRIM 0xC3
#define SD_STAT_NBD_WRITE_ZEROES 0xC4
#define SD_STAT_NBD_BLOCK_STATUS 0xC5
#define SD_STAT_MAX_QUEUES 8
#define SD_STAT_MAX_VDIS 64

struct sd_stat_header {
	uint32_t version; /* SD_STAT_VERSION */
	uint32_t nr_ops;
	uint32_t nr_queues;
	uint32_t nr_vdis;
	uint64_t now_ns;	    /* the daemon's monotonic clock at the snapshot */
	uint64_t uptime_ns;	    /* since the counters started */
	uint64_t hang_threshold_ns; /* 0: hang detection off */
	uint64_t nr_hangs;	    /* requests that crossed the threshold, since start */
	uint32_t nr_hung;	    /* requests in flight past the threshold now */
	uint32_t pad;
};

/* one opcode (or the TOTAL row: busy_ns is then the time with any request in flight) */
struct sd_stat_op {
	char name[24]; /* "write", "read_peer", ... */
	uint8_t opcode;
	uint8_t pad[7];
	uint64_t nr_inflight;
	uint64_t nr_done; /* completions, errors included */
	uint64_t nr_errors;
	uint64_t bytes;	   /* payload moved, both directions */
	uint64_t await_ns; /* sum over completions: dispatch to reply (queue + service) */
	uint64_t busy_ns;  /* time with at least one in flight, up to now_ns */
	uint64_t hist[SD_STAT_NR_BUCKETS]; /* completions by await, log2 of microseconds */
};

/*
 * A work queue: its workers, and the requests of the ops that run on it
 * (the sums of their sd_stat_op rows; busy_ns is the largest of theirs,
 * so a lower bound of the time with any of them in flight).
 */
struct sd_stat_queue {
	char name[16];
	uint32_t nr_threads;
	uint32_t nr_queued;
	uint32_t nr_running;
	uint32_t pad;
	uint64_t nr_done;	  /* works finished, the daemon's own included */
	uint64_t longest_wait_ns; /* the oldest queued work's wait so far */
	uint64_t nr_inflight;	  /* requests */
	uint64_t nr_reqs;	  /* requests completed */
	uint64_t nr_errors;
	uint64_t bytes;
	uint64_t await_ns;
	uint64_t busy_ns;
	uint64_t hist[SD_STAT_NR_BUCKETS];
};

/* a VDI's client object I/O through this gateway (vid 0: the VDIs past the table) */
struct sd_stat_vdi {
	uint32_t vid;
	uint32_t pad;
	uint64_t nr_reads;
	uint64_t nr_writes;
	uint64_t bytes;
	uint64_t await_ns;
};

/* one tracer in the TRACE_STATUS payload */
struct sd_trace_tracer {
	char name[32];
	uint32_t state; /* SD_TRACE_STATE_* */
	uint32_t nr_sites_patched;
	uint64_t nr_records; /* records kept (profile: calls counted) */
	uint64_t nr_lost;    /* records overwritten or calls not traced */
	uint64_t since;	     /* when it was started last, seconds since the epoch; 0: never */
	uint64_t buffer_size;
	uint32_t nr_threads;
	uint32_t nr_untraced; /* threads not traced: the total of every ring was taken */
};

_Static_assert(sizeof(struct sd_trace_tracer) == 80, "trace tracer layout");
_Static_assert(sizeof(struct sd_node_id) == 24, "node id layout");
_Static_assert(sizeof(struct sd_node) == 40, "node layout");
_Static_assert(sizeof(struct sd_stat_header) == 56, "stat header layout");
_Static_assert(sizeof(struct sd_stat_op) == 336, "stat op layout");
_Static_assert(sizeof(struct sd_stat_queue) == 352, "stat queue layout");
_Static_assert(sizeof(struct sd_stat_vdi) == 40, "stat vdi layout");

#endif
