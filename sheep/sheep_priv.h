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
#include "logger.h"
#include "util.h"
#include "work.h"

struct client_info;

/* one request from the time its header arrives until its reply is sent */
struct request {
	struct sd_req rq;
	struct sd_rsp rp;
	void *data;	    /* payload in (writes) and out (reads) */
	uint32_t data_cap;  /* bytes allocated at data (>= rq.data_length); replies
			       never carry more than rq.data_length */
	const struct sd_op_template *op;
	struct client_info *ci;
	struct work work;
	struct list_node node; /* in the client's reply queue, or ordered.c's pending list */
	uint64_t start_ns;
	/* ordered ops (ordered.c) */
	bool remote;	 /* delivered from another node's broadcast: apply, write no object */
	int nr_members;	 /* cluster size when the op was delivered */
	uint64_t token;	 /* names the request in its broadcast */
	/* set for a request the daemon made itself (NBD's locks): called instead of a reply */
	void (*done)(struct request *req);
};

enum op_type {
	OP_MAIN,    /* runs on the main thread: cheap, never blocks */
	OP_IO,      /* object I/O on the io queue */
	OP_CLUSTER, /* state reads, serialised on the cluster queue */
	OP_ORDERED, /* state changes: broadcast through the cluster driver, applied
		       in the driver's total order on every node's cluster queue */
	OP_PEER,    /* sheep-to-sheep object I/O on the peer queue */
	OP_FETCH,   /* recovery's object reads, on their own queue: never wait on a peer */
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
};

/* ops.c */
const struct sd_op_template *get_sd_op(uint8_t opcode);

/* request.c */
int create_listen_port(const char *bind_addr, int port);
void request_done(struct request *req); /* from work done: reply and free */
void queue_request(struct request *req);
/* the join is done: queue the client requests that waited for it */
void request_join_done(void);

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
};
extern struct sheep_config sys;
extern struct work_queue *io_wq, *cluster_wq, *peer_wq, *fetch_wq;
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
/* 0 or -errno: make the cluster formatted with copies (0: default) */
/* nr_members: the cluster's size when the format was delivered */
int group_format(uint64_t ctime, uint8_t copies, uint8_t shift, int nr_members);
void group_get_state(struct cluster_state *out);
bool group_is_formatted(void);
/* true from this node's join into a running cluster until group_adopt() */
bool group_is_joining(void);
/* see group.c: 0, -EAGAIN (retry) or -errno */
int group_adopt(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n);
uint8_t group_copies(void);
int group_nr_nodes(void);
/* fill logs (up to max entries, newest first): returns how many */
int group_read_epoch_logs(struct sd_epoch_log *logs, int max);
uint32_t group_epoch(void);
/* this node's id */
const struct sd_node_id *group_self(void);
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
/* main thread, from sd_notify_handler: apply a delivered op */
void ordered_deliver(const void *msg, size_t len, int nr_members);

/* peer.c: sheep-to-sheep requests and the connection cache */
int peer_op_read(struct request *req);
int peer_op_write(struct request *req);
int peer_op_create_and_write(struct request *req);
int peer_op_remove(struct request *req);
int peer_op_flush(struct request *req);
int peer_op_get_obj_list(struct request *req);
/* a connected blocking socket to nid from the cache, or -errno */
int peer_conn_get(const struct sd_node_id *nid);
/* give fd back (ok) or close it (!ok: the stream may be out of step) */
void peer_conn_put(const struct sd_node_id *nid, int fd, bool ok);
/* close every idle socket to nid (it restarted, or died) */
void peer_conn_drop(const struct sd_node_id *nid);
/* send a request (and its payload when WRITE): 0 or -errno */
int peer_send(int fd, const struct sd_req *hdr, const void *data);
/* read a response and up to rlen payload bytes into data: 0 or -errno */
int peer_recv(int fd, struct sd_rsp *rsp, void *data, uint32_t rlen);
/*
 * One request to nid on a cached connection, synchronously: wdata is sent
 * when rq has SD_FLAG_CMD_WRITE, otherwise up to rq->data_length bytes of
 * answer land in rdata. 0 (see rsp->result) or -errno.
 */
int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp);

/* recovery.c: joining a running cluster, and objects to their places */
int recovery_init(void);
/* main thread: this node joined a running cluster; learn its state */
void recovery_join(void);
/* main thread: a new epoch began; bring its objects to this node */
void recovery_kick(void);
/* true while this node learns the state of the cluster it joined */
bool recovery_is_joining(void);
/*
 * Make sure oid is stored here before a write changes it: fetch it from a
 * node that has it when this node should hold it but does not yet. Holds
 * the object's recovery lock across the fetch and the write. SD_RES_*.
 */
int recovery_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync);
int recovery_op_stat(struct request *req);
int recovery_op_fetch(struct request *req);

/* vdi.c: the VDI namespace */
int vdi_init(void);
int vdi_op_new(struct request *req);
int vdi_op_del(struct request *req);
int vdi_op_lock(struct request *req);
int vdi_op_release(struct request *req);
int vdi_op_get_info(struct request *req);
int vdi_op_read_vdis(struct request *req);
int vdi_op_get_locks(struct request *req);
/* what an object op needs to know about a vid; SD_RES_NO_VDI if unknown */
int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot);
/* the VDI's copies, 0 if unknown */
int vdi_copies(uint32_t vid);
/* the header of an inode changed on disk: refresh the cached state */
void vdi_header_updated(uint32_t vid);
/* recovery stored the inode of vid here: know the VDI (it may be new here) */
struct sd_inode_header;
void vdi_inode_recovered(uint32_t vid, const struct sd_inode_header *h);
/* learn the namespace from a member (a node that joined): SD_RES_* */
int vdi_sync_from(const struct sd_node_id *nid);
/* remove every VDI's state (after format) */
void vdi_reset(void);

/* nbd.c: NBD export of the VDIs on addr:port, with nr_threads workers: 0 or -errno */
int nbd_init(const char *addr, int port, int nr_threads);

/* gateway.c: client object I/O */
int gateway_read_obj(struct request *req);
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
