/*
 * NBD export of VDIs: the protocol's constants (all big-endian on the wire)
 * and what nbd.c (connections, handshake, replies: main thread) shares with
 * nbd_io.c (requests mapped onto the VDI's objects: worker threads).
 */
#ifndef NBD_H
#define NBD_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "list.h"
#include "listen.h"
#include "payload.h"
#include "sheepdog_proto.h"
#include "stat.h"
#include "work.h"

#define NBD_DEFAULT_PORT 10809

/* what main hands nbd_init */
struct nbd_config {
	const char *addr; /* NULL or "": every address */
	int port;
	int nr_threads;	    /* of the nbd work queue */
	int max_conns;	    /* --nbd-max-connections (> 0) */
	int client_timeout; /* --client-timeout, --idle-timeout: as the sheepdog port's */
	int idle_timeout;
};
/* nbd.c: NBD export of the VDIs (listen.h: the cap and the timeouts): 0 or -errno */
int nbd_init(const struct nbd_config *cfg);
/* an operator took vid's lock from owner: if it is an NBD client of this node, disconnect it */
struct sd_lock_owner;
void nbd_lock_broken(uint32_t vid, const struct sd_lock_owner *owner);

/* handshake */
#define NBD_MAGIC UINT64_C(0x4e42444d41474943)	   /* "NBDMAGIC" */
#define NBD_IHAVEOPT UINT64_C(0x49484156454f5054)  /* "IHAVEOPT" */
#define NBD_REP_MAGIC UINT64_C(0x0003e889045565a9) /* option replies */
#define NBD_FLAG_FIXED_NEWSTYLE (1U << 0)
#define NBD_FLAG_NO_ZEROES (1U << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1U << 0)
#define NBD_FLAG_C_NO_ZEROES (1U << 1)

/* options */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10

/* option replies */
#define NBD_REP_ACK 1
#define NBD_REP_SERVER 2
#define NBD_REP_INFO 3
#define NBD_REP_META_CONTEXT 4
#define NBD_REP_ERR(n) ((1U << 31) | (n))
#define NBD_REP_ERR_UNSUP NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM NBD_REP_ERR(4)
#define NBD_REP_ERR_UNKNOWN NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN NBD_REP_ERR(7)
#define NBD_REP_ERR_TOO_BIG NBD_REP_ERR(9)

/* NBD_REP_INFO types */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS (1U << 0)
#define NBD_FLAG_READ_ONLY (1U << 1)
#define NBD_FLAG_SEND_FLUSH (1U << 2)
#define NBD_FLAG_SEND_FUA (1U << 3)
#define NBD_FLAG_SEND_TRIM (1U << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1U << 6)
#define NBD_FLAG_SEND_DF (1U << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1U << 8)

/* transmission */
#define NBD_REQUEST_MAGIC UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC UINT32_C(0x67446698)
#define NBD_STRUCTURED_REPLY_MAGIC UINT32_C(0x668e33ef)

#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7

#define NBD_CMD_FLAG_FUA (1U << 0)
#define NBD_CMD_FLAG_NO_HOLE (1U << 1)
#define NBD_CMD_FLAG_DF (1U << 2)
#define NBD_CMD_FLAG_REQ_ONE (1U << 3)

#define NBD_REPLY_FLAG_DONE (1U << 0)
#define NBD_REPLY_TYPE_NONE 0
#define NBD_REPLY_TYPE_OFFSET_DATA 1
#define NBD_REPLY_TYPE_OFFSET_HOLE 2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR ((1U << 15) | 1)

/* base:allocation extent flags */
#define NBD_STATE_HOLE (1U << 0)
#define NBD_STATE_ZERO (1U << 1)

/* errors */
#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95
#define NBD_ESHUTDOWN 108

/* the largest READ or WRITE payload this server takes (the spec's advice) */
#define NBD_MAX_PAYLOAD (32U << 20)
/* the one meta context served, and its id */
#define NBD_META_BASE_ALLOCATION "base:allocation"
#define NBD_META_ID_ALLOCATION 1

/*
 * The VDI that a connection serves, from GO (or EXPORT_NAME) to its end.
 * map is the inode's data_vdi_id for the objects of the VDI, kept current
 * by this connection's writes: a writable export holds the VDI's lock, so
 * nobody else changes it. An object whose entry is being changed (created,
 * copied on write, released) is marked busy under lock; other requests on
 * it wait on cond, so that two writes never both create it and an inode
 * entry is never written back stale.
 */
struct nbd_export {
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	uint32_t snapid;
	uint32_t vid;
	uint64_t size;
	uint8_t shift;
	uint8_t copies;
	bool readonly; /* a snapshot, or shared_ro */
	/*
	 * A working VDI that another client holds the lock of: served read-only
	 * (qemu-img info, qemu-io -r), its map as it was when it was opened
	 */
	bool shared_ro;
	uint32_t nr_objs;
	uint32_t *map;
	uint8_t *busy; /* bit per object */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

#define NBD_MAX_CHUNKS 48 /* a 32 MiB read over 1 MiB objects, merged runs */

/* something the main thread sends: iov[idx..nr_iov), then release(tx) */
struct nbd_tx {
	struct list_node node;
	struct iovec *iov;
	int nr_iov;
	int idx;
	void (*release)(struct nbd_tx *tx);
};

/* one transmission request, from its header to its reply */
struct nbd_io {
	struct work work;
	struct nbd_tx tx;
	struct nbd_conn *conn;
	struct nbd_export *exp;
	bool structured; /* the connection negotiated structured replies */
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
	void *buf; /* write payload, read data, block status extents */
	uint32_t buf_len;
	uint32_t acct; /* bytes of buf counted against the payload bound (0: malloc'd) */
	/* collie node stat's count of it, from the whole request to its reply's queueing */
	struct stat_req stat;
	/* the tracer's request id (trace/trace_req.h) and its flags */
	uint64_t trace_id;
	uint16_t trace_flags;
	struct stat_track stat_track; /* on the hang check's list from new_io to the free */
	/* the reply: error (NBD errno) or, for reads, the runs of data and holes */
	uint32_t error;
	int nr_runs;
	struct nbd_run {
		uint32_t off; /* from the start of the request */
		uint32_t len;
		bool hole;
	} runs[NBD_MAX_CHUNKS];
	/* headers of the reply's chunks; their data comes from buf */
	uint8_t hdr[NBD_MAX_CHUNKS * 32 + 32];
	struct iovec iov[2 * NBD_MAX_CHUNKS + 2];
};

/* ------------------------------------------------------------------ */
/* nbd.c and nbd_opt.c: connections, on the main thread */

enum nbd_state {
	NBD_ST_FLAGS, /* waiting for the client's flags */
	NBD_ST_OPT,   /* reading an option */
	NBD_ST_WAIT,  /* an option is being processed off the main thread */
	NBD_ST_TRANS, /* transmission */
};

struct nbd_conn {
	int fd;
	struct listen_conn lc; /* the listener's: its slot and its timeouts */
	/* listen_tick()s: the client's turn began (the handshake's current
	   message awaited), the request being read began, the last byte moved */
	uint64_t turn_start, rx_start, last_active;
	int refcnt; /* the connection + every work or ordered op that refers to it */
	bool dead;
	bool close_after_tx; /* once replies are sent and nothing is in flight */
	uint32_t events;
	enum nbd_state state;
	char peer[64];

	bool no_zeroes;
	bool structured;
	bool meta_alloc; /* base:allocation selected */
	bool locked;	 /* holds the lock of exp's VDI */
	uint8_t addr[16]; /* the client's address (v4-mapped for IPv4) */
	uint64_t id;	  /* unique among this daemon's NBD connections: a lock's owner */
	struct list_node link; /* in the list of every open connection */

	/* rx: a fixed header, then rx_len bytes into rx_buf */
	uint8_t hdr[28];
	uint32_t hdr_len, hdr_done;
	uint8_t *rx_buf;
	uint32_t rx_len, rx_done;
	struct nbd_io *rx_io;
	uint32_t opt; /* the option being read or processed */

	struct list_head tx_queue;
	int nr_inflight;
	uint64_t inflight_bytes; /* payload of its requests (writes' and reads') */
	uint64_t reply_bytes;	 /* of which, reads' (in flight or not sent yet) */
	/* the same, as its share of the client pool (payload.h) */
	struct payload_share share;
	/* rx_io waits for payload memory (its share of --max-inflight-bytes), rx stopped */
	bool mem_wait;
	struct payload_waiter mem_waiter;

	struct nbd_export *exp;
};

struct nbd_msg {
	struct nbd_tx tx;
	struct iovec iov;
	uint32_t len, cap;
	uint8_t data[];
};

extern struct work_queue *nbd_wq;

/* drop a reference; the last one frees c (and releases its lock) */
void nbd_conn_put(struct nbd_conn *c);
/* what epoll should wait for, from c's state */
void nbd_update_events(struct nbd_conn *c);
void nbd_close_conn(struct nbd_conn *c);
/* end the connection of a client that broke the protocol, with a log line */
void __attribute__((format(printf, 2, 3))) nbd_drop_conn(struct nbd_conn *c, const char *fmt, ...);
/* send what is queued until the socket is full; closes a finished connection */
void nbd_flush_tx(struct nbd_conn *c);
/* expect the header of state st next (4 bytes of flags, an option, a request) */
void nbd_start_rx_header(struct nbd_conn *c, enum nbd_state st);
/* a handshake message: NULL when out of memory */
struct nbd_msg *nbd_msg_new(uint32_t cap);
void nbd_msg_put(struct nbd_msg *m, const void *p, uint32_t len);
void nbd_msg_be16(struct nbd_msg *m, uint16_t v);
void nbd_msg_be32(struct nbd_msg *m, uint32_t v);
void nbd_msg_be64(struct nbd_msg *m, uint64_t v);
void nbd_msg_send(struct nbd_conn *c, struct nbd_msg *m);
/* one reply to the current option, with len bytes of data */
void nbd_send_rep(struct nbd_conn *c, uint32_t type, const void *data, uint32_t len);
/* an error reply to the current option, with a message for the human */
void __attribute__((format(printf, 3, 4)))
nbd_send_rep_err(struct nbd_conn *c, uint32_t type, const char *fmt, ...);

/* nbd_opt.c: the whole option c->opt is in c->rx_buf (c->rx_len bytes) */
void nbd_handle_option(struct nbd_conn *c);
/* let another writer have c's VDI (RELEASE_VDI) */
void nbd_release_lock(struct nbd_conn *c);

static inline uint32_t nbd_get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static inline uint16_t nbd_get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

/* nbd_io.c: the reply of io, simple or structured, into io->tx (main thread) */
void nbd_build_reply(struct nbd_io *io);
/* nbd_io.c, on worker threads */
void nbd_io_work(struct work *w);
/*
 * main thread: a read of one object piece that needs no wait, done at once
 * (a hole, or the gateway's inline read of this node's copy from the page
 * cache): true when io is done (its runs set), false to queue it as always
 */
bool nbd_read_inline(struct nbd_io *io);
/*
 * Resolve an export name (NAME, NAME@TAG, NAME@ID) into e (name, tag,
 * snapid, vid): SD_RES_*.
 */
int nbd_export_resolve(struct nbd_export *e, const char *export);
/* read the inode header (size, copies, snapshot) and, with_map, its map: SD_RES_* */
int nbd_export_load(struct nbd_export *e, bool with_map);
/* the names of every VDI and snapshot, as export names: count or -errno */
int nbd_list_exports(char ***names);
void nbd_export_free(struct nbd_export *e);
/* the SD_RES_* of a VDI's object I/O as an NBD error */
uint32_t nbd_errno(int res);

#endif
