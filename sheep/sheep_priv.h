/* The daemon's internals shared between its files. */
#ifndef SHEEP_PRIV_H
#define SHEEP_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal_proto.h"
#include "list.h"
#include "ring.h"
#include "stat.h"
#include "logger.h"
#include "util.h"
#include "work.h"

struct client_info;

/* one request from the time its header arrives until its reply is sent */
struct request {
	/* first: new_request clears what follows, not this (it outlives reuse) */
	struct stat_track stat_track;
	struct sd_req rq;
	struct sd_rsp rp;
	void *data;	    /* payload in (writes) and out (reads) */
	uint32_t data_cap;  /* bytes allocated at data (>= rq.data_length); replies
			       never carry more than rq.data_length */
	uint32_t mem_held;  /* of data_cap, counted against --max-inflight-bytes */
	const struct sd_op_template *op;
	struct client_info *ci;
	struct work work;
	struct list_node node; /* in the client's reply queue, or ordered.c's pending list */
	union {
		uint64_t start;	      /* stat_clock() when whole and dispatched: its await starts */
		struct stat_req stat; /* in flight for the statistics (stat.c): begin is start */
	};
	/* ordered ops (ordered.c) */
	bool remote;	 /* delivered from another node's broadcast: apply, write no object */
	int nr_members;	 /* cluster size when the op was delivered */
	uint64_t token;	 /* names the request in its broadcast */
	struct request *waiter; /* a client request answered once this one is applied */
	/* set for a request the daemon made itself (NBD's locks): called instead of a reply */
	void (*done)(struct request *req);
	bool replied; /* its worker sent the reply (request.c, reply_early) */
};
_Static_assert(offsetof(struct request, start) == offsetof(struct request, stat.begin),
	       "a request's start is its statistics' begin");

enum op_type {
	OP_MAIN,    /* runs on the main thread: cheap, never blocks */
	OP_IO,      /* object I/O on the io queue */
	OP_CLUSTER, /* state reads, serialised on the cluster queue */
	OP_ORDERED, /* state changes: broadcast through the cluster driver, applied
		       in the driver's total order on every node's cluster queue */
	OP_PEER,    /* sheep-to-sheep object I/O on the peer queue */
	OP_FETCH,   /* recovery's object reads, on their own queue: never wait on a peer */
	OP_TRACE,   /* the tracer's control ops, serialised on the trace queue: a
		       snapshot's rendering may take long, never on the main thread */
};

/*
 * One entry per opcode. process_work runs on a worker of the op's queue
 * (or on the main thread for OP_MAIN) and returns SD_RES_*; it fills
 * req->rp and req->rp.data_length. force: allowed before format.
 */
struct sd_op_template {
	const char *name;
	uint8_t opcode;
	enum op_type type;
	bool force;
	int (*process)(struct request *req);
	/*
	 * Optional, OP_IO: answer on the main thread, at once and without
	 * blocking, when it can; true when it did (req->rp set), false to
	 * queue the request for process as always
	 */
	bool (*try_inline)(struct request *req);
};

/* access.c: who may run which op (see there) */
enum access_class {
	ACCESS_PUBLIC, /* the VDI protocol: every client */
	ACCESS_ADMIN,  /* loopback, members and --admin-allow networks */
	ACCESS_MEMBER, /* cluster members (and loopback when a member is on it) */
};
/* 0, or -EINVAL for a bad ADDR[/BITS] */
int access_allow_add(const char *cidr);
enum access_class access_class_of(const struct sd_op_template *op);
/* SD_RES_SUCCESS or SD_RES_ACCESS_DENIED for a client at addr */
int access_check(const struct sd_op_template *op, const uint8_t addr[16]);
void access_log_refusal(const struct sd_op_template *op, const uint8_t addr[16]);
uint64_t access_nr_refused(void);
/* the listeners checked per connection (NBD, /metrics) */
enum access_service {
	ACCESS_NBD,	/* loopback and --nbd-allow networks */
	ACCESS_METRICS, /* the admin rule: loopback, members, --admin-allow */
};
/* --nbd-allow CIDR: 0, or -EINVAL; how many were given */
int access_nbd_allow_add(const char *cidr);
int access_nbd_nr_allow(void);
/* may the client of the accepted connection fd use svc? A refusal is logged */
bool access_conn_ok(enum access_service svc, int fd);
uint64_t access_nr_conns_refused(void);

/* ops.c */
const struct sd_op_template *get_sd_op(uint8_t opcode);
/* give every opcode its statistics slot (after stat_init) */
void ops_register_stats(void);

/* listen.c: listen on bind_addr:port for clients and peers; 0 or -errno */
int create_listen_port(const char *bind_addr, int port);

/* request.c */
/*
 * request.c's timers and limits (before any request_accept); room is
 * called when a connection closes below the limit that request_accept
 * reported. 0 or -errno.
 */
int request_init(void (*room)(void));
/*
 * A connection accepted on fd (non-blocking) from ss: 0; 1 when it was set
 * up and the connection limit is now reached (accept no more until room);
 * -ENOMEM when it could not be set up (fd stays the caller's).
 */
struct sockaddr_storage;
int request_accept(int fd, const struct sockaddr_storage *ss);
void request_done(struct request *req); /* from work done: reply and free */
void queue_request(struct request *req);
/* the join is done: queue the client requests that waited for it */
void request_join_done(void);
/*
 * payload.c: the payload memory of every front-end (this protocol's
 * connections and NBD's) counts against one bound, --max-inflight-bytes;
 * main thread only. payload_get gives a buffer of at least len bytes (*cap
 * of them, all counted; from a cache of free buffers, page-aligned): 0,
 * -ENOMEM, or -EAGAIN when it does not fit (one holder is always let
 * through, however large). Then the caller parks a waiter with
 * payload_wait and stops reading its connection; the waiter's resume
 * callback is called from the event loop once payload was freed
 * (payload_put). resume is called off the list: it returns false, with
 * nothing changed, when the memory still does not fit (the waiter stays
 * first in line). payload_buf_get/put: the same buffers, not counted.
 */
struct payload_waiter {
	struct list_node node;
	bool (*resume)(struct payload_waiter *w);
};
int payload_init(void);
void payload_set_max(uint64_t bytes);
int payload_get(uint32_t len, void **buf, uint32_t *cap);
void payload_put(void *buf, uint32_t cap);
void payload_wait(struct payload_waiter *w);
/* resume the waiters now (the event loop does it after a payload_put) */
void payload_resume(void);
void *payload_buf_get(uint32_t len, uint32_t *cap);
void payload_buf_put(void *p, uint32_t cap);
/*
 * A request's payload (rq.data_length bytes): counted against the bound
 * if counted, and then a read's buffer (its reply's) also in *reply_bytes,
 * its connection's. payload_req_alloc: 0, -ENOMEM, or
 * -EAGAIN (it waits for memory, see payload_wait). payload_req_free gives
 * it back; payload_req_none leaves the request an empty buffer (handlers
 * may memcpy 0 bytes).
 */
int payload_req_alloc(struct request *req, bool counted, uint64_t *reply_bytes);
void payload_req_free(struct request *req, uint64_t *reply_bytes);
void payload_req_none(struct request *req);
/* client connections open now */
int request_nr_clients(void);

/* metrics.c: Prometheus' text format over HTTP, on the main event loop */
/* check "[ADDR:]PORT"; with addr, split it (ADDR defaults to 127.0.0.1): 0 or -EINVAL */
int metrics_parse(const char *arg, char *addr, size_t addr_len, int *port);
/* listen on arg ([ADDR:]PORT): 0 or -errno */
int metrics_start(const char *arg);

/* state of the whole daemon (sheep.c) */
struct sheep_config {
	const char *dir;
	const char *obj_dir;
	int port;
	const char *bind_addr;
	const char *nbd_addr; /* --nbd: NULL = every address */
	int nbd_port;	      /* 0: no NBD export */
	uint32_t zone;
	bool shutting_down;
	int exit_status; /* non-zero: the daemon stops because it failed */
	int max_connections;  /* --max-connections: client connections at once (0: derived) */
	int client_timeout;   /* --client-timeout: s a request may take to arrive (0: none) */
	int idle_timeout;     /* --idle-timeout: s a connection may sit idle (0: forever) */
};
extern struct sheep_config sys;
extern struct work_queue *io_wq, *cluster_wq, *peer_wq, *fetch_wq, *trace_wq;
void sheep_request_shutdown(void);

/* group.c: cluster state, epochs, membership */
struct cluster_state {
	bool formatted;
	uint64_t ctime;
	uint8_t copies;
	uint8_t block_size_shift;
	uint32_t epoch;
	int nr_nodes;
	struct sd_node nodes[SD_MAX_NODES];
	int local_idx;
	bool joining; /* learning the state of the cluster it joined */
};
int group_init(void);
struct cluster_driver;
/* join the cluster through drv as me: 0 or -errno */
int group_join(const struct cluster_driver *drv, const struct sd_node *me);
/*
 * News that travels up from the membership, on the main thread: this node
 * joined a running cluster (it must learn its state), or the epoch changed
 * (objects move). Registered by main before the join; NULL: ignored.
 */
struct group_news {
	void (*joined)(void);
	void (*epoch_changed)(void);
	/* a member left (died, or evicted): before the epoch change */
	void (*node_left)(const struct sd_node_id *nid);
	/*
	 * This node, evicted, came back alone: it serves again with no join
	 * to learn from (joined is not called), after the epoch change; what
	 * waited for the join goes on.
	 */
	void (*serving)(void);
	/*
	 * This node, restarted alone, waits for the nodes of its newest epoch
	 * (group_is_waiting) and they are all members now: check that none
	 * holds a newer history, then group_end_wait(gen).
	 */
	void (*wait_covered)(uint32_t gen);
};
void group_set_news(const struct group_news *n);
/*
 * A message the cluster driver delivered (in the cluster's total order, on
 * the main thread), with the number of members at its delivery: what the
 * layer above registered with group_set_deliver takes it.
 */
typedef void (*group_deliver_fn)(const void *msg, size_t len, int nr_members);
void group_set_deliver(group_deliver_fn fn);
/*
 * Make the cluster formatted with copies (0: default); nr_members: the
 * cluster's size when the format was delivered. 0, or -EEXIST (formatted
 * already), -EINVAL (copies or shift out of bounds), -ERANGE (more copies
 * than nodes), -errno of writing the epoch log or the config.
 */
int group_format(uint64_t ctime, uint8_t copies, uint8_t shift, int nr_members);
void group_get_state(struct cluster_state *out);
bool group_is_formatted(void);
/* true from this node's join into a running cluster until group_adopt() */
bool group_is_joining(void);
/*
 * True while this node, started alone on a formatted directory, waits for
 * the nodes of the newest epoch it stored (group.c, sd_join_handler): it
 * serves no client and counts no epoch meanwhile.
 */
bool group_is_waiting(void);
/*
 * True when this node's last stop was a cluster shutdown at its newest
 * epoch (DIR/clean-stop, removed as it starts): its copies hold every
 * write that was acknowledged, and none was cut since. group_stopped(), as
 * the daemon exits, writes the mark after a cluster shutdown.
 */
bool group_started_clean(void);
void group_stopped(void);
/* main thread: serve without the nodes still awaited: 0, or -EALREADY (not waiting) */
int group_force_start(void);
/* main thread: the members of wait_covered's gen hold no newer history: serve, if still so */
void group_end_wait(uint32_t gen);
/* see group.c: 0, -EAGAIN (retry) or -errno */
int group_adopt(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n);
/*
 * A member's answer to STAT_CLUSTER against this node's history (group.c:
 * check_history). joining: may this node take it, before it touches its
 * objects (-ESTALE: its own is newer or forked)? Otherwise, this node
 * waits (group_is_waiting): is the member's no newer (-ESTALE: it is, or
 * forked)? 0, or -EINVAL for logs that cannot be ones.
 */
int group_check_history(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n,
			bool joining);
uint8_t group_copies(void);
int group_nr_nodes(void);
/* fill logs (up to max entries, newest first): returns how many */
int group_read_epoch_logs(struct sd_epoch_log *logs, int max);
uint32_t group_epoch(void);
/* addr is one of the current members'; *lo_member: a member is on loopback */
bool group_has_member_addr(const uint8_t addr[16], bool *lo_member);
/* this node's id */
const struct sd_node_id *group_self(void);
/* write DIR/name whole (a temporary file renamed into place): 0 or -errno */
int group_write_file(const char *name, const void *buf, size_t len);
/*
 * Main thread, before a client request is served: if the cluster driver's
 * tick has not run for a while (this process was stopped), deliver what it
 * has pending first, so that a node evicted meanwhile knows it (and is
 * joining again, group_is_joining) before it serves from a stale view.
 * now: a stat_clock() read just before (a fresh request's start).
 */
void group_catch_up(uint64_t now);
/* main thread: a cluster shutdown was delivered; no epoch is counted any more */
void group_cluster_stopping(void);
/* broadcast msg through the cluster driver: 0 or -errno */
int group_notify(const void *msg, size_t len);
/*
 * The placement ring of one epoch, shared by reference: it stays valid
 * until put, whatever membership does meanwhile.
 */
struct epoch_ring {
	int refcnt;
	uint32_t epoch;
	int local_idx; /* this node in ring.nodes, or -1 */
	struct sd_ring ring;
};
struct epoch_ring *group_ring_get(void);
void group_ring_put(struct epoch_ring *er);

/* ordered.c: cluster operations in the driver's total order */
/* main thread: broadcast req; it is answered once applied here */
void ordered_submit(struct request *req);
/*
 * main thread: the successful client request req wrote the header of vid's
 * inode; broadcast NOTIFY_VDI_HEADER and answer req once it is applied here
 */
void ordered_notify_header(struct request *req, uint32_t vid);
/* main thread, a group_deliver_fn (registered by main): apply a delivered op */
void ordered_deliver(const void *msg, size_t len, int nr_members);
/* how an applied request is answered (request.c's request_done): set by main */
void ordered_set_done(void (*fn)(struct request *req));

/* peer.c: the peer ops, this node's side of another gateway's requests */
int peer_op_read(struct request *req);
int peer_op_write(struct request *req);
int peer_op_create_and_write(struct request *req);
int peer_op_remove(struct request *req);
int peer_op_flush(struct request *req);
int peer_op_get_obj_list(struct request *req);

/*
 * peer_io.c: requests to other sheep over cached connections. One node's
 * part of a request sent to several at once: the caller fills nid (and,
 * for an answer with a payload, rdata and rlen: the most it may carry);
 * the fan-out fills rsp and result: rsp.result, or SD_RES_NETWORK when the
 * node could not be reached or its connection failed (err: the -errno).
 */
struct peer_call {
	const struct sd_node_id *nid;
	void *rdata;
	uint32_t rlen;
	struct sd_rsp rsp;
	int result;
	int err;
	/* private to peer_io.c */
	int fd, state;
	bool reused, retried;
	size_t done;
	uint64_t last_ns;
};
/*
 * The caller's own part of a fan-out, done on its thread while the nodes
 * work: step does a step of it and returns true while there is more.
 * sliced: the steps are short, run them while sends are still pending
 * (otherwise the first step waits until every node has its request).
 */
struct peer_work {
	bool (*step)(void *arg);
	void *arg;
	bool sliced;
};
/*
 * Send rq (and wdata when rq has SD_FLAG_CMD_WRITE) to the nodes of
 * calls[nr] at once, and gather their answers, doing work (if not NULL)
 * meanwhile. Returns once every node answered (or failed) and the work is
 * done. Never fails as a whole: each call has its result.
 */
void peer_fanout_work(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr,
		      const struct peer_work *work);
void peer_fanout(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr);
/*
 * One request to nid: wdata is sent when rq has SD_FLAG_CMD_WRITE,
 * otherwise up to rq->data_length bytes of answer land in rdata. 0 (see
 * rsp->result) or -errno.
 */
int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp);
/*
 * The replica iterator: the nodes of er to try for oid, in order: the
 * ring's replicas for copies (local_first: this node first), then every
 * other node, since a replica of a new ring may not hold the object yet.
 * Never a node in skip (a bit per ring node). init returns how many
 * replicas the ring names (0: no node); next the next node (an index into
 * er->ring.nodes), or -1 when none is left.
 */
struct peer_iter {
	const struct epoch_ring *er;
	int idx[SD_MAX_NODES];
	int nr_replicas, pos;
	uint64_t skip;
};
int peer_iter_init(struct peer_iter *it, const struct epoch_ring *er, uint64_t oid, int copies,
		   bool local_first, uint64_t skip);
int peer_iter_next(struct peer_iter *it);
/* stopping: cut the sockets in use, refuse new ones (workers return at once) */
void peer_abort_all(void);
/* cut the sockets that workers hold to nid (it left): they return at once */
void peer_abort_node(const struct sd_node_id *nid);

/*
 * replica.c: this node's copy of an object. The lock of oid (shared by
 * several objects) orders its creates and its fetch.
 */
pthread_mutex_t *replica_oid_lock(uint64_t oid);
/* make durable on this node what a VDI (oid names it; 0: every VDI) wrote without sync */
int replica_flush(uint64_t oid);
/*
 * Create oid from the len bytes of buf at off (zeros elsewhere), or, when
 * it exists here already, write only the client's range [wr_off, wr_off +
 * wr_len), which lies inside the payload's. SD_RES_*.
 */
int replica_create_and_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off,
			     uint64_t wr_off, uint32_t wr_len, bool sync);
/*
 * Write to oid here; when this node should hold it but does not yet (the
 * epoch changed, recovery has not fetched it), fetch it first, under its
 * lock across the fetch and the write. SD_RES_*.
 */
int replica_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync);
/*
 * Fetch oid whole and store it here, the caller holding its lock, unless
 * it is here already: from the live copies of the nodes in live (a bit per
 * node of er), or only when no node has a live copy, a stale copy of the
 * nodes in stale, or this node's own. Never an object of a deleted VDI.
 * SD_RES_SUCCESS, SD_RES_NO_OBJ when nobody has it, or another SD_RES_*.
 */
int replica_fetch(const struct epoch_ring *er, uint64_t oid, uint64_t live, uint64_t stale,
		  bool sync);
/* the size of oid's object: the inode's, or its VDI's (the cluster's when unknown) */
uint32_t replica_object_size(uint64_t oid);
/* news for the layer above: an inode fetched (the VDI may be new here); NULL: none */
struct sd_inode_header;
void replica_set_inode_fetched(void (*fn)(uint32_t vid, const struct sd_inode_header *h));

/* recovery.c: joining a running cluster, and objects to their places */
int recovery_init(void);
/* main thread: this node joined a running cluster; learn its state */
void recovery_join(void);
/* main thread, once the join's state is learnt: registered by main */
void recovery_set_join_done(void (*fn)(void));
/* main thread: a new epoch began; bring its objects to this node */
void recovery_kick(void);
/* main thread: group_news.wait_covered (the histories of the nodes that are back) */
void recovery_wait_check(uint32_t gen);
/* true while this node learns the state of the cluster it joined */
bool recovery_is_joining(void);
/* true while it does, from a member that waits for the nodes of its last epoch */
bool recovery_join_waits(void);
/* --recovery-max-bandwidth's default, MB/s (0: unlimited) */
#define RECOVERY_DEFAULT_BW 0
void recovery_set_max_bandwidth(uint64_t mb_per_s);
int recovery_op_stat(struct request *req);
int recovery_op_fetch(struct request *req);

/* vdi.c: the VDI namespace ops (ordered) and the start-up load of the table */
int vdi_init(void);
int vdi_op_new(struct request *req);
int vdi_op_del(struct request *req);
int vdi_op_lock(struct request *req);
int vdi_op_release(struct request *req);
int vdi_op_get_info(struct request *req);
int vdi_op_read_vdis(struct request *req);
int vdi_op_get_locks(struct request *req);
/* NOTIFY_VDI_HEADER: reread the header of req->rq.vdi.base_vdi_id into the table */
int vdi_op_header_changed(struct request *req);
/* does this successful client request change an inode header (NOTIFY_VDI_HEADER follows)? */
bool vdi_is_header_write(const struct sd_req *rq, uint32_t *vid);

/*
 * vdi_table.c: the VDI table, a cache under its lock that does no I/O; the
 * object path's reads, which take the lock themselves (the namespace ops'
 * interface is vdi_table.h)
 */
/* what an object op needs to know about a live VDI, read at once */
struct vdi_attr {
	uint8_t shift;	   /* log2 of its object size */
	uint8_t nr_copies; /* 0: unknown */
	bool snapshot;	   /* its data is frozen */
	uint64_t size;	   /* vdi_size */
};
/* SD_RES_SUCCESS, or SD_RES_NO_VDI when vid is unknown or deleted */
int vdi_get_attr(uint32_t vid, struct vdi_attr *attr);
/* what an object op needs to know about a vid; SD_RES_NO_VDI if unknown */
int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot);
/* the VDI's copies, 0 if unknown */
int vdi_copies(uint32_t vid);
/* recovery stored the inode of vid here: know the VDI (it may be new here) */
struct sd_inode_header;
void vdi_inode_recovered(uint32_t vid, const struct sd_inode_header *h);

/* vdi_sync.c: learn the namespace from a member (a node that joined): SD_RES_* */
int vdi_sync_from(const struct sd_node_id *nid);

/*
 * deleted.c: the objects of deleted VDIs, which nothing may bring back.
 * A record per deleted VDI, kept in DIR/deleted on every node and learned
 * by a node that joins.
 */
int deleted_init(void);
/* vid was deleted; the indexes set in shared (a bit per index) are still read: 0 or -errno */
int deleted_add(uint32_t vid, const uint8_t *shared);
/* is oid an object of a deleted VDI that no other VDI reads? */
bool deleted_has(uint64_t oid);
/* GET_DELETED: the records, as internal_proto.h says */
int deleted_op_get(struct request *req);
/* learn member nid's records (joining): SD_RES_* */
int deleted_sync_from(const struct sd_node_id *nid);
/* nbd.c: NBD export of the VDIs on addr:port, with nr_threads workers: 0 or -errno */
int nbd_init(const char *addr, int port, int nr_threads);

/* gateway.c: client object I/O */
int gateway_read_obj(struct request *req);
bool gateway_read_obj_inline(struct request *req);
int gateway_write_obj(struct request *req);
int gateway_create_and_write_obj(struct request *req);
int gateway_flush_vdi(struct request *req);
/*
 * Object I/O on the replicas for the daemon's own use (inodes): copies 0
 * means the VDI's or the cluster's. SD_RES_*.
 */
int gateway_obj_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, int copies);
int gateway_obj_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool create,
		      int copies);
int gateway_obj_remove(uint64_t oid, int copies);

#endif
