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
#define SD_OP_GET_VDI_LOCKS 0x86 /* payload: struct sd_vdi_lock[] of the locked VDIs */
/* serve without the nodes a node restarted alone still waits for (SD_STATUS_WAIT_FOR_JOIN) */
#define SD_OP_FORCE_START 0x87
/*
 * UNLOCK_VDI (ordered): an operator releases the lock of VDI
 * req.vdi.base_vdi_id, whoever holds it. Refused (SD_RES_VDI_LOCKED) while
 * the holder's gateway is a member, unless req.vdi.type is
 * SD_UNLOCK_FORCE: then that gateway also disconnects the holder.
 */
#define SD_OP_UNLOCK_VDI 0x88
#define SD_UNLOCK_FORCE 1
/*
 * The log level of the node asked: with SD_FLAG_CMD_WRITE, a uint32_t level
 * (0 emerg .. 7 debug) to set first; the answer is the level now (uint32_t).
 */
#define SD_OP_LOG_LEVEL 0x8A
/* the node asked stops cleanly and leaves the cluster (the others recover) */
#define SD_OP_KILL_NODE 0x8B
/*
 * SET_VNODES (collie node vnodes set, cluster reweight): new weights on the
 * placement ring. The payload is a struct sd_vnodes_entry per storing
 * member whose vnodes change (1 to SD_MAX_VNODES each). The node asked
 * checks them and broadcasts them in the cluster's order; every node then
 * counts one epoch with the new weights, and recovery moves what must
 * move. A node keeps its own new weight in its directory for its next
 * start. Answered once broadcast: the epoch follows on every node.
 */
#define SD_OP_SET_VNODES 0x8C
#define SD_MAX_VNODES 4096
/*
 * ALTER_COPY (collie vdi alter-copy): the replicated VDI req.vdi.base_vdi_id
 * gets req.vdi.copies copies. The node asked checks it (a VDI that is not
 * erasure-coded; 1 to as many copies as nodes store objects), writes the
 * inode header's nr_copies and answers once every node reread that header
 * (NOTIFY_VDI_HEADER): from then on every gateway places the VDI's objects
 * with the new count, and every node runs its recovery of the epoch again,
 * which moves them. Its clients' I/O goes on (SD_RES_COPIES_CHANGED fences
 * the writes). SD_RES_TOO_FEW_NODES, SD_RES_NO_VDI, SD_RES_INVALID_PARMS.
 */
#define SD_OP_ALTER_COPY 0x89
/*
 * ALTER_CLUSTER_COPY (ordered; collie cluster alter-copy): the default
 * copies of the VDIs created without a count becomes req.cluster.copies on
 * every node (DIR/config). Refused on a cluster whose default is erasure
 * coding (SD_RES_INVALID_PARMS) and with more copies than storing nodes
 * (SD_RES_TOO_FEW_NODES). The VDIs keep theirs: collie alters each.
 */
#define SD_OP_ALTER_CLUSTER_COPY 0x8D
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
 * FETCH_PEER_NOW: the same read, for a write that waits on it (a replica
 * that lacks the object it is asked to write: an epoch change moved it
 * there and recovery has not copied it yet). The holder queues it ahead of
 * recovery's FETCH_PEERs. A sheep that does not know it answers
 * SD_RES_INVALID_PARMS, as to any unknown opcode: the fetch is then asked
 * again as FETCH_PEER.
 */
#define SD_OP_FETCH_PEER_NOW 0xA7
/*
 * With GET_OBJ_LIST and FETCH_PEER: the stale copies (objects that a node
 * set aside when it rejoined) instead of the live ones.
 */
#define SD_FLAG_CMD_STALE 0x8000

/*
 * The request id of a peer request: the client request it serves, so that
 * the tracer of every node it touches records it with the events of the
 * thread that serves it (collie debug trace cat --all, slow). Internal
 * header only: a gateway gives each client request (sheepdog protocol or
 * NBD) a new id; the peer requests it causes carry the id's low 32 bits in
 * req.id and its high 32 bits, with flags, in the 6 bytes that the
 * object-shaped header of every peer op keeps reserved (req.obj.reserved:
 * flags in the first two, little-endian like the rest, the high half in
 * the last four). 0: no client request (recovery's, a node's own I/O).
 * SD_REQ_TRACE_SAMPLED: the gateway's tracer, in its request mode (start
 * --sample, --vdi, --slower-than), chose to record this request: a replica
 * in that mode records it too, and no other.
 */
#define SD_REQ_TRACE_SAMPLED 0x0001

static inline bool sd_is_peer_op(uint8_t opcode)
{
	return opcode >= 0xA0 && opcode <= 0xA7;
}

static inline void sd_req_set_trace(struct sd_req *rq, uint64_t id, uint16_t flags)
{
	uint32_t hi = (uint32_t)(id >> 32);

	rq->id = (uint32_t)id;
	__builtin_memcpy(rq->obj.reserved, &flags, sizeof(flags));
	__builtin_memcpy(rq->obj.reserved + 2, &hi, sizeof(hi));
}

static inline uint64_t sd_req_trace_id(const struct sd_req *rq, uint16_t *flags)
{
	uint32_t hi;

	__builtin_memcpy(flags, rq->obj.reserved, sizeof(*flags));
	__builtin_memcpy(&hi, rq->obj.reserved + 2, sizeof(hi));
	return (uint64_t)hi << 32 | rq->id;
}

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
/*
 * TRACE_CLOCK: rsp.trace.generation is the tracer's clock (ns, on
 * CLOCK_MONOTONIC's scale: the time base of every trace timestamp) when
 * the daemon answered, read on the main thread without the trace lock.
 * collie measures each node's offset against its own clock with it before
 * it merges their traces (cat --all): the answer's midpoint, of the
 * fastest of several round trips, error +/- half that round trip.
 */
#define SD_OP_TRACE_CLOCK 0xB6
/*
 * The disks of one node (several disks per node: sheep --disk); 0xC0-0xC5
 * are the NBD rows of STAT_READ (SD_STAT_NBD_*), no operation.
 * MD_INFO: payload, struct sd_md_disk[] (rsp.data_length / its size), one
 * per disk the daemon knows, in the order they were added.
 * MD_PLUG, MD_UNPLUG: payload (write), a disk's path, NUL-terminated, at
 * most SD_MD_PATH_LEN bytes with the NUL. The answer comes at once; the
 * objects that must move go in the background (MD_INFO shows the state).
 */
#define SD_OP_MD_INFO 0xD0
#define SD_OP_MD_PLUG 0xD1
#define SD_OP_MD_UNPLUG 0xD2
#define SD_MD_PATH_LEN 256
/* sd_md_disk.state */
#define SD_MD_ACTIVE 0	   /* in the ring: objects placed on it */
#define SD_MD_UNPLUGGING 1 /* out of the ring: its objects move to the others */
#define SD_MD_UNPLUGGED 2  /* out, every object moved, the directory closed */
#define SD_MD_FAILED 3	   /* an I/O error or its directory gone: out, its objects refetched */
struct sd_md_disk {
	char path[SD_MD_PATH_LEN];
	uint64_t size, used, nr_objects; /* bytes, bytes of live objects, live objects */
	uint32_t state;
	uint32_t vnodes; /* its points on the node's disk ring: its weight */
};

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
#define SD_RES_LOCK_NOT_OWNER 0x8D /* RELEASE_VDI: another client holds the lock */
#define SD_RES_NO_TRACER 0x90	 /* no tracer of that name in this daemon */
#define SD_RES_TRACE_OFF 0x91	 /* that tracer is not running */
#define SD_RES_TRACE_FOLLOWERS 0x92 /* every follower slot of the trace is taken */
#define SD_RES_TRACE_FOLLOW_GONE 0x93 /* this follower's slot went to another */
/*
 * START refused: the rings it would take (--buffer-size times the threads
 * it may trace, with what the tracers that run hold) are over the total
 * for every ring (SD_TRACE_MAX_TOTAL); rsp.trace.total_length says how
 * many bytes it would take, rsp.trace.generation the threads counted
 */
#define SD_RES_TRACE_TOO_BIG 0x94
/* START refused: no thread of the daemon is of the --thread kind asked */
#define SD_RES_TRACE_NO_THREAD 0x95
/*
 * A peer write or fetch whose req.obj.copies is not the count this node's
 * VDI table has for the object's VDI (ALTER_COPY: the nodes take a new count
 * one after the other). Never to a client: the gateway retries once its own
 * table has the new count, the fetcher asks another node or later.
 */
#define SD_RES_COPIES_CHANGED 0x96
/*
 * A peer could not be reached (connect, send or receive failed). Never on
 * the wire: the gateway retries on a new ring, then answers SD_RES_EIO.
 */
#define SD_RES_NETWORK 0xA0
#define SD_RES_ACCESS_DENIED 0xA1 /* the client's address may not run this op */
#define SD_RES_MD_EXIST 0xC0   /* MD_PLUG: that disk is plugged already */
#define SD_RES_MD_NO_DISK 0xC1 /* MD_UNPLUG: no disk of that path in use */
#define SD_RES_MD_LAST 0xC2    /* MD_UNPLUG: the node's last disk stays */
#define SD_RES_MD_BAD_DISK 0xC3 /* MD_PLUG: not a usable directory (or too many disks) */

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

/*
 * Who holds a VDI lock: the gateway node the client locked through, the
 * client's address there (IPv6, or v4-mapped), and for an NBD client its
 * connection (a number unique on that node); conn is 0 for a client of
 * this protocol (QEMU locks on a short control connection and does its
 * I/O on another, which the gateway binds the lock to).
 */
struct sd_lock_owner {
	struct sd_node_id node;
	uint8_t addr[16];
	uint64_t conn;
};

/* GET_VDI_LOCKS' answer: a record per locked VDI */
struct sd_vdi_lock {
	uint32_t vid;
	uint32_t pad;
	struct sd_lock_owner owner;
};

struct sd_node {
	struct sd_node_id nid;
	uint32_t zone;
	uint16_t nr_vnodes;
	uint16_t flags; /* SD_NODE_* (zero in epoch logs written before flags) */
	/*
	 * sheep --io-addr: where peers send this node's replica traffic (an
	 * IPv4 address and port); io_port 0: to nid. Zero from older sheep
	 * (the 8 bytes were an unused size).
	 */
	uint8_t io_addr[4];
	uint16_t io_port;
	uint16_t reserved;
};

/* sheep --gateway: a member that serves clients and stores nothing (on no ring) */
#define SD_NODE_GATEWAY 0x0001

/* SET_VNODES' payload: a node and its new vnodes */
struct sd_vnodes_entry {
	struct sd_node_id nid;
	uint32_t nr_vnodes;
	uint32_t pad;
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
 *                          first word of a thread's name (io, peer, ...);
 *                          SD_RES_TRACE_NO_THREAD when no thread is of it
 *     sample=N             graph: the request mode (below), one client
 *                          request in N (1: every one)
 *     vdi=VID              graph: the request mode, the requests of that VDI
 *     slower=NS            graph: the request mode, and a thread keeps what
 *                          it recorded of a request only if its part took
 *                          at least NS (the rest is given back at its end)
 *   In the request mode the graph tracer records only the functions that
 *   threads run for the requests it chose (at the gateway, which says so in
 *   the peer requests' SD_REQ_TRACE_SAMPLED): a call made for another
 *   request, or for none, costs a test of a thread-local flag.
 *   req.trace.depth is at most SD_TRACE_MAX_DEPTH, req.trace.buffer_size at
 *   most SD_TRACE_MAX_BUFFER (SD_RES_INVALID_PARMS), and the rings of the
 *   threads it may trace within SD_TRACE_MAX_TOTAL with the rings that the
 *   running tracers hold (SD_RES_TRACE_TOO_BIG).
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
 *   daemon starts a rendering when offset is 0, named by
 *   rsp.trace.generation, and renders it as it is read, chunk after chunk
 *   (its memory stays bounded whatever the trace's size); a later READ
 *   names it in req.trace.buffer_size (0: the newest) and reads on at its
 *   offset. rsp.trace.total_length is UINT64_MAX while more follows, the
 *   rendering's size in the answer that ends it. Two renderings may be read
 *   at once; a third, or a START, ends the oldest (SD_RES_INVALID_PARMS for
 *   its reader). SD_TRACE_FMT_PROFILE is the profile tracer's table, one line per
 *   function called: "name calls total_ns self_ns min_ns max_ns" then 40
 *   counts of calls taking [2^k, 2^(k+1)) ns, k = 0..39 (the last bucket
 *   holds every longer call too). SD_TRACE_FMT_EVENTS is the graph
 *   tracer's records for a program (collie merges nodes with it): a first
 *   line "# sheep trace events 1 pid PID", then per thread
 *     "T tid comm"                              its records follow
 *     "Q tid ts_ns id flags opcode oid wait_ns"  it begins serving a request
 *                                    (flags: SD_REQ_TRACE_* | 0x100 at the
 *                                    gateway; wait_ns since it was queued)
 *     "D tid ts_ns id result"                   it is done with it
 *     "C tid depth entry_ns dur_ns id name"     a call (id: its request, 0:
 *                                    none), in the order of the returns
 *     "O tid depth entry_ns id name"            a call whose return was not
 *                                    recorded
 *   ids and oids in hex, times in ns of the tracer's clock.
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
#define SD_TRACE_FMT_EVENTS 5

/* the tracer's limits: what START refuses past them */
#define SD_TRACE_MAX_DEPTH 128
#define SD_TRACE_MAX_BUFFER (256ULL << 20) /* bytes per thread */
#define SD_TRACE_MAX_TOTAL (512ULL << 20)  /* every ring of every tracer */

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
	uint64_t mem_bytes;   /* held by every ring of every tracer, stopped ones' too */
	uint64_t mem_max;     /* what they may take in all (SD_TRACE_MAX_TOTAL) */
};

/* payload of SD_OP_STAT_READ */
#define SD_STAT_VERSION 1
#define SD_STAT_NR_BUCKETS 32 /* bucket 0: 0-1 us, bucket k: 2^k .. 2^(k+1)-1 us */
#define SD_STAT_MAX_OPS 64
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
#define SD_STAT_MAX_CACHES 4

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
	uint32_t nr_caches;	    /* rows after the VDIs' (0 from a daemon without them) */
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

/*
 * A cache the daemon keeps (after the VDI rows): "fd", the store's open
 * object files. hits: lookups that found the entry; misses: lookups that
 * did not, and opened; evictions: entries pushed out to make room;
 * invalidations: entries dropped because the object's file was removed,
 * renamed or replaced, or the store's directory changed.
 */
struct sd_stat_cache {
	char name[16];
	uint32_t capacity;  /* entries it may hold */
	uint32_t nr_cached; /* entries held now */
	uint32_t nr_in_use; /* of them, in use by a request now */
	uint32_t pad;
	uint64_t nr_hits;
	uint64_t nr_misses;
	uint64_t nr_evictions;
	uint64_t nr_invalidations;
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

/*
 * The name of an opcode of a request the tracer follows (collie debug trace
 * cat, slow): the client's object and VDI ops, the peer ops and the NBD
 * commands' rows; "op" for another
 */
static inline const char *sd_op_name(uint8_t opcode)
{
	switch (opcode) {
	case SD_OP_CREATE_AND_WRITE_OBJ:
		return "create_and_write_obj";
	case SD_OP_READ_OBJ:
		return "read_obj";
	case SD_OP_WRITE_OBJ:
		return "write_obj";
	case SD_OP_REMOVE_OBJ:
		return "remove_obj";
	case SD_OP_NEW_VDI:
		return "new_vdi";
	case SD_OP_LOCK_VDI:
		return "lock_vdi";
	case SD_OP_RELEASE_VDI:
		return "release_vdi";
	case SD_OP_GET_VDI_INFO:
		return "get_vdi_info";
	case SD_OP_READ_VDIS:
		return "read_vdis";
	case SD_OP_FLUSH_VDI:
		return "flush_vdi";
	case SD_OP_DEL_VDI:
		return "del_vdi";
	case SD_OP_READ_PEER:
		return "read_peer";
	case SD_OP_WRITE_PEER:
		return "write_peer";
	case SD_OP_CREATE_AND_WRITE_PEER:
		return "create_and_write_peer";
	case SD_OP_REMOVE_PEER:
		return "remove_peer";
	case SD_OP_FLUSH_PEER:
		return "flush_peer";
	case SD_STAT_NBD_READ:
		return "nbd_read";
	case SD_STAT_NBD_WRITE:
		return "nbd_write";
	case SD_STAT_NBD_FLUSH:
		return "nbd_flush";
	case SD_STAT_NBD_TRIM:
		return "nbd_trim";
	case SD_STAT_NBD_WRITE_ZEROES:
		return "nbd_write_zeroes";
	case SD_STAT_NBD_BLOCK_STATUS:
		return "nbd_block_status";
	default:
		return "op";
	}
}

_Static_assert(sizeof(struct sd_trace_tracer) == 80, "trace tracer layout");
_Static_assert(sizeof(struct sd_node_id) == 24, "node id layout");
_Static_assert(sizeof(struct sd_node) == 40, "node layout");
_Static_assert(offsetof(struct sd_node, io_addr) == 32, "node layout: io_addr where space was");
_Static_assert(sizeof(struct sd_stat_header) == 56, "stat header layout");
_Static_assert(sizeof(struct sd_stat_op) == 336, "stat op layout");
_Static_assert(sizeof(struct sd_stat_queue) == 352, "stat queue layout");
_Static_assert(sizeof(struct sd_stat_vdi) == 40, "stat vdi layout");
_Static_assert(sizeof(struct sd_stat_cache) == 64, "stat cache layout");

#endif
