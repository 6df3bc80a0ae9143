/*
 * NBD export of VDIs: `sheep --nbd [ADDR:]PORT`.
 *
 * Connections live on the main thread's event loop, like the sheepdog
 * protocol's: the fixed newstyle handshake and the option haggling are read
 * and answered without blocking; whatever needs the namespace or an inode
 * (resolving an export name, its size, the list of exports) runs on the
 * nbd worker queue, one option at a time per connection. In transmission,
 * each request is read whole (header, then a WRITE's payload, at most
 * NBD_MAX_PAYLOAD) and queued on the nbd workers (nbd_io.c), so that many
 * are in flight per connection; replies go out in the order they complete,
 * each whole before the next (a per-connection queue).
 *
 * A writable export is the working VDI: GO or EXPORT_NAME takes its lock
 * with LOCK_VDI, as QEMU's sheepdog driver did, through the cluster's
 * ordered ops; a second writer is refused at the handshake. The lock is
 * released (RELEASE_VDI) when the connection ends for any reason and its
 * last request has finished. NAME@TAG or NAME@ID exports a snapshot,
 * read-only and unlocked: only such exports advertise multi-conn.
 *
 * A client that breaks the protocol (bad magic, an oversized request, an
 * unknown command) gets a log line and loses its connection; nothing else
 * is affected.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "event.h"
#include "nbd.h"
#include "net.h"
#include "sheep_priv.h"

/* option data the server reads at most (names are up to 4096 bytes) */
#define NBD_MAX_OPT_LEN 65536
/* requests and payload bytes in flight per connection before it stops reading */
#define NBD_MAX_INFLIGHT 64
#define NBD_MAX_INFLIGHT_BYTES (128U << 20)

enum nbd_state {
	NBD_ST_FLAGS, /* waiting for the client's flags */
	NBD_ST_OPT,   /* reading an option */
	NBD_ST_WAIT,  /* an option is being processed off the main thread */
	NBD_ST_TRANS, /* transmission */
};

struct nbd_conn {
	int fd;
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

	/* rx: a fixed header, then rx_len bytes into rx_buf */
	uint8_t hdr[28];
	uint32_t hdr_len, hdr_done;
	uint8_t *rx_buf;
	uint32_t rx_len, rx_done;
	struct nbd_io *rx_io;
	uint32_t opt; /* the option being read or processed */

	struct list_head tx_queue;
	int nr_inflight;
	uint64_t inflight_bytes;

	struct nbd_export *exp;
};

/* an option processed on a worker */
struct nbd_optwork {
	struct work work;
	struct nbd_conn *conn;
	uint32_t opt;
	int ret; /* SD_RES_* */
	bool want_block_size;
	char *export;
	struct nbd_export *exp;
	char **names;
	int nr_names;
};

/* LOCK_VDI and RELEASE_VDI made by this file, through the ordered ops */
struct nbd_vdi_req {
	struct request req;
	struct nbd_conn *conn;
	struct nbd_optwork *ow; /* LOCK: the GO that waits for it */
	char names[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN];
};

struct nbd_msg {
	struct nbd_tx tx;
	struct iovec iov;
	uint32_t len, cap;
	uint8_t data[];
};

static struct work_queue *nbd_wq;
static bool nbd_listening;

static void conn_handler(int fd, uint32_t events, void *data);
static void start_rx_header(struct nbd_conn *c, enum nbd_state st);

/* ------------------------------------------------------------------ */
/* life of a connection */

static void release_lock(struct nbd_conn *c);

static void conn_put(struct nbd_conn *c)
{
	if (--c->refcnt)
		return;
	if (c->locked)
		release_lock(c);
	nbd_export_free(c->exp);
	free(c);
}

static void update_events(struct nbd_conn *c)
{
	uint32_t ev = 0;

	if (c->dead)
		return;
	if (!c->close_after_tx && c->state != NBD_ST_WAIT && c->nr_inflight < NBD_MAX_INFLIGHT &&
	    c->inflight_bytes < NBD_MAX_INFLIGHT_BYTES)
		ev |= EPOLLIN;
	if (!list_empty(&c->tx_queue))
		ev |= EPOLLOUT;
	if (ev != c->events) {
		c->events = ev;
		ev_modify(c->fd, ev);
	}
}

static void close_conn(struct nbd_conn *c)
{
	struct nbd_tx *tx, *next;

	if (c->dead)
		return;
	c->dead = true;
	ev_del(c->fd);
	close(c->fd);
	list_for_each_entry_safe(tx, next, &c->tx_queue, node) {
		list_del(&tx->node);
		tx->release(tx);
	}
	if (c->rx_io) {
		c->rx_io->tx.release(&c->rx_io->tx);
		c->rx_io = NULL;
	}
	free(c->rx_buf);
	c->rx_buf = NULL;
	sd_debug("nbd %s: connection closed", c->peer);
	conn_put(c);
}

/* end the connection of a client that broke the protocol */
static void __attribute__((format(printf, 2, 3)))
drop_conn(struct nbd_conn *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_warn("nbd %s: %s; closing the connection", c->peer, msg);
	close_conn(c);
}

/* ------------------------------------------------------------------ */
/* sending */

static void flush_tx(struct nbd_conn *c)
{
	while (!c->dead && !list_empty(&c->tx_queue)) {
		struct nbd_tx *tx = list_first_entry(&c->tx_queue, struct nbd_tx, node);
		struct msghdr msg = { .msg_iov = tx->iov + tx->idx,
				      .msg_iovlen = tx->nr_iov - tx->idx };
		ssize_t sent = sendmsg(c->fd, &msg, MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			sd_debug("nbd %s: send failed: %m", c->peer);
			close_conn(c);
			return;
		}
		while (tx->idx < tx->nr_iov && (size_t)sent >= tx->iov[tx->idx].iov_len)
			sent -= tx->iov[tx->idx++].iov_len;
		if (tx->idx < tx->nr_iov) {
			tx->iov[tx->idx].iov_base = (char *)tx->iov[tx->idx].iov_base + sent;
			tx->iov[tx->idx].iov_len -= sent;
			continue;
		}
		list_del(&tx->node);
		tx->release(tx);
	}
	if (c->dead)
		return;
	if (c->close_after_tx && list_empty(&c->tx_queue) && c->nr_inflight == 0) {
		close_conn(c);
		return;
	}
	update_events(c);
}

static void queue_tx(struct nbd_conn *c, struct nbd_tx *tx)
{
	if (c->dead) {
		tx->release(tx);
		return;
	}
	list_add_tail(&tx->node, &c->tx_queue);
	flush_tx(c);
}

static void msg_release(struct nbd_tx *tx)
{
	free(container_of(tx, struct nbd_msg, tx));
}

static struct nbd_msg *msg_new(uint32_t cap)
{
	struct nbd_msg *m = malloc(sizeof(*m) + cap);

	if (!m)
		return NULL;
	m->len = 0;
	m->cap = cap;
	m->tx.iov = &m->iov;
	m->tx.nr_iov = 1;
	m->tx.idx = 0;
	m->tx.release = msg_release;
	INIT_LIST_NODE(&m->tx.node);
	return m;
}

static void msg_put(struct nbd_msg *m, const void *p, uint32_t len)
{
	memcpy(m->data + m->len, p, len);
	m->len += len;
}

static void msg_be16(struct nbd_msg *m, uint16_t v)
{
	v = htobe16(v);
	msg_put(m, &v, sizeof(v));
}

static void msg_be32(struct nbd_msg *m, uint32_t v)
{
	v = htobe32(v);
	msg_put(m, &v, sizeof(v));
}

static void msg_be64(struct nbd_msg *m, uint64_t v)
{
	v = htobe64(v);
	msg_put(m, &v, sizeof(v));
}

static void msg_send(struct nbd_conn *c, struct nbd_msg *m)
{
	m->iov.iov_base = m->data;
	m->iov.iov_len = m->len;
	queue_tx(c, &m->tx);
}

/* one option reply: its header and len bytes of data */
static void send_rep(struct nbd_conn *c, uint32_t type, const void *data, uint32_t len)
{
	struct nbd_msg *m = msg_new(20 + len);

	if (!m) {
		close_conn(c);
		return;
	}
	msg_be64(m, NBD_REP_MAGIC);
	msg_be32(m, c->opt);
	msg_be32(m, type);
	msg_be32(m, len);
	if (len)
		msg_put(m, data, len);
	msg_send(c, m);
}

/* an error reply with a message for the human behind the client */
static void __attribute__((format(printf, 3, 4)))
send_rep_err(struct nbd_conn *c, uint32_t type, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	send_rep(c, type, msg, (uint32_t)n);
}

/* ------------------------------------------------------------------ */
/* the VDI's lock */

static void vdi_req_init(struct nbd_vdi_req *vr, uint8_t opcode, const char *name)
{
	memset(vr, 0, sizeof(*vr));
	snprintf(vr->names, SD_MAX_VDI_LEN, "%s", name);
	vr->req.rq.proto_ver = SD_PROTO_VER;
	vr->req.rq.opcode = opcode;
	vr->req.rq.flags = SD_FLAG_CMD_WRITE;
	vr->req.rq.vdi.type = SD_LOCK_TYPE_NORMAL;
	vr->req.data = vr->names;
	vr->req.op = get_sd_op(opcode);
	INIT_LIST_NODE(&vr->req.node);
}

static void release_done(struct request *req)
{
	struct nbd_vdi_req *vr = container_of(req, struct nbd_vdi_req, req);

	if (req->rp.result != SD_RES_SUCCESS)
		sd_err("nbd: cannot release the lock of vdi %s: %s", vr->names,
		       sd_strerror(req->rp.result));
	else
		sd_debug("nbd: released the lock of vdi %s", vr->names);
	free(vr);
}

/* the connection's last reference went: let another writer have the VDI */
static void release_lock(struct nbd_conn *c)
{
	struct nbd_vdi_req *vr = malloc(sizeof(*vr));

	c->locked = false;
	if (!vr) {
		sd_err("nbd: out of memory: vdi %s stays locked", c->exp->name);
		return;
	}
	vdi_req_init(vr, SD_OP_RELEASE_VDI, c->exp->name);
	/* the name with one NUL, like QEMU */
	vr->req.rq.data_length = strlen(vr->names) + 1;
	vr->req.rq.vdi.base_vdi_id = c->exp->vid;
	vr->req.done = release_done;
	ordered_submit(&vr->req);
}

/* ------------------------------------------------------------------ */
/* options */

static uint16_t transmission_flags(const struct nbd_export *e)
{
	uint16_t flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA;

	/* a snapshot never changes: every connection sees the same data */
	if (e->readonly)
		flags |= NBD_FLAG_READ_ONLY | NBD_FLAG_CAN_MULTI_CONN;
	else
		flags |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES;
	return flags;
}

static void send_info(struct nbd_conn *c, const struct nbd_export *e, bool block_size)
{
	uint8_t buf[14];
	uint16_t t = htobe16(NBD_INFO_EXPORT), fl = htobe16(transmission_flags(e));
	uint64_t size = htobe64(e->size);

	memcpy(buf, &t, 2);
	memcpy(buf + 2, &size, 8);
	memcpy(buf + 10, &fl, 2);
	send_rep(c, NBD_REP_INFO, buf, 12);
	if (block_size) {
		uint32_t bs[3] = { htobe32(1), htobe32(4096), htobe32(NBD_MAX_PAYLOAD) };

		t = htobe16(NBD_INFO_BLOCK_SIZE);
		memcpy(buf, &t, 2);
		memcpy(buf + 2, bs, sizeof(bs));
		send_rep(c, NBD_REP_INFO, buf, 14);
	}
}

static void start_transmission(struct nbd_conn *c, struct nbd_export *e)
{
	c->exp = e;
	sd_info("nbd %s: exporting vdi %s%s%s (vid %06" PRIx32 ", %" PRIu64 " bytes)%s", c->peer,
		e->name, e->snapid || e->tag[0] ? "@" : "", e->tag[0] ? e->tag : "", e->vid,
		e->size, e->readonly ? ", read-only" : "");
	start_rx_header(c, NBD_ST_TRANS);
}

/* EXPORT_NAME's answer: no error is possible, only a closed connection */
static void send_export_name_reply(struct nbd_conn *c, struct nbd_export *e)
{
	struct nbd_msg *m = msg_new(8 + 2 + 124);

	if (!m) {
		nbd_export_free(e);
		close_conn(c);
		return;
	}
	msg_be64(m, e->size);
	msg_be16(m, transmission_flags(e));
	if (!c->no_zeroes) {
		memset(m->data + m->len, 0, 124);
		m->len += 124;
	}
	msg_send(c, m);
	start_transmission(c, e);
}

static void opt_fail(struct nbd_conn *c, const struct nbd_optwork *ow, int ret)
{
	const char *name = ow->export ? ow->export : "";

	if (ow->opt == NBD_OPT_EXPORT_NAME) {
		sd_warn("nbd %s: export '%s': %s; closing the connection", c->peer, name,
			sd_strerror(ret));
		close_conn(c);
		return;
	}
	switch (ret) {
	case SD_RES_NO_VDI:
	case SD_RES_NO_TAG:
		send_rep_err(c, NBD_REP_ERR_UNKNOWN, "no vdi or snapshot called '%s'", name);
		break;
	case SD_RES_VDI_LOCKED:
		send_rep_err(
		    c, NBD_REP_ERR_POLICY,
		    "vdi '%s' is locked: another writer (an NBD client or a VM) has it open", name);
		break;
	case SD_RES_WAIT_FOR_FORMAT:
		send_rep_err(c, NBD_REP_ERR_SHUTDOWN, "the cluster is not formatted");
		break;
	default:
		send_rep_err(c, NBD_REP_ERR_UNKNOWN, "export '%s': %s", name, sd_strerror(ret));
		break;
	}
	start_rx_header(c, NBD_ST_OPT);
}

static void optwork_free(struct nbd_optwork *ow)
{
	for (int i = 0; i < ow->nr_names; i++)
		free(ow->names[i]);
	free(ow->names);
	free(ow->export);
	nbd_export_free(ow->exp);
	free(ow);
}

/* an export is known (and locked if writable, map loaded): answer GO or EXPORT_NAME */
static void finish_go(struct nbd_conn *c, struct nbd_optwork *ow)
{
	struct nbd_export *e = ow->exp;

	ow->exp = NULL;
	if (ow->opt == NBD_OPT_EXPORT_NAME) {
		send_export_name_reply(c, e);
	} else {
		send_info(c, e, ow->want_block_size);
		send_rep(c, NBD_REP_ACK, NULL, 0);
		start_transmission(c, e);
	}
}

static void load_work(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);

	ow->ret = nbd_export_load(ow->exp, true);
}

static void load_done(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	struct nbd_conn *c = ow->conn;

	if (!c->dead) {
		if (ow->ret == SD_RES_SUCCESS && ow->exp->readonly)
			ow->ret = SD_RES_READONLY; /* snapshotted meanwhile */
		if (ow->ret == SD_RES_SUCCESS)
			finish_go(c, ow);
		else
			opt_fail(c, ow, ow->ret);
	}
	/* a lock taken for a connection that will not use it */
	if (c->locked && !c->exp) {
		c->exp = ow->exp;
		ow->exp = NULL;
		release_lock(c);
		nbd_export_free(c->exp);
		c->exp = NULL;
	}
	optwork_free(ow);
	conn_put(c);
}

static void lock_done(struct request *req)
{
	struct nbd_vdi_req *vr = container_of(req, struct nbd_vdi_req, req);
	struct nbd_optwork *ow = vr->ow;
	struct nbd_conn *c = vr->conn;
	int ret = req->rp.result;
	uint32_t vid = req->rp.vdi.vdi_id;

	free(vr);
	if (ret == SD_RES_SUCCESS) {
		c->locked = true;
		/* the working VDI may have changed since the name was resolved */
		ow->exp->vid = vid;
		ow->work.fn = load_work;
		ow->work.done = load_done;
		wq_queue(nbd_wq, &ow->work);
		return;
	}
	if (!c->dead) {
		sd_info("nbd %s: vdi %s: %s", c->peer, ow->exp->name, sd_strerror(ret));
		opt_fail(c, ow, ret);
	}
	optwork_free(ow);
	conn_put(c);
}

static void take_lock(struct nbd_conn *c, struct nbd_optwork *ow)
{
	struct nbd_vdi_req *vr = malloc(sizeof(*vr));

	if (!vr) {
		opt_fail(c, ow, SD_RES_NO_MEM);
		optwork_free(ow);
		conn_put(c);
		return;
	}
	vdi_req_init(vr, SD_OP_LOCK_VDI, ow->exp->name);
	vr->req.rq.data_length = sizeof(vr->names);
	vr->req.done = lock_done;
	vr->conn = c;
	vr->ow = ow;
	ordered_submit(&vr->req);
}

static void resolve_work(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	struct nbd_export *e = ow->exp;

	if (!group_is_formatted()) {
		ow->ret = SD_RES_WAIT_FOR_FORMAT;
		return;
	}
	bool snapshot;

	ow->ret = nbd_export_resolve(e, ow->export);
	snapshot = e->snapid || e->tag[0];
	/* a snapshot's map never changes: load it now, no lock needed */
	if (ow->ret == SD_RES_SUCCESS)
		ow->ret = nbd_export_load(e, snapshot);
	/* NAME@ID with the working VDI's id: only snapshots are exported by id */
	if (ow->ret == SD_RES_SUCCESS && snapshot && !e->readonly)
		ow->ret = SD_RES_NO_VDI;
}

static void resolve_done(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	struct nbd_conn *c = ow->conn;
	struct nbd_export *e = ow->exp;

	if (c->dead)
		goto out_free;
	if (ow->ret != SD_RES_SUCCESS) {
		opt_fail(c, ow, ow->ret);
		goto out_free;
	}
	if (ow->opt == NBD_OPT_INFO) {
		send_info(c, e, ow->want_block_size);
		send_rep(c, NBD_REP_ACK, NULL, 0);
		start_rx_header(c, NBD_ST_OPT);
		goto out_free;
	}
	if (e->readonly) {
		finish_go(c, ow);
		goto out_free;
	}
	take_lock(c, ow); /* keeps ow and the reference */
	return;
out_free:
	optwork_free(ow);
	conn_put(c);
}

static void list_work(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	int n = group_is_formatted() ? nbd_list_exports(&ow->names) : 0;

	ow->ret = n < 0 ? SD_RES_NO_MEM : SD_RES_SUCCESS;
	ow->nr_names = n < 0 ? 0 : n;
}

static void list_done(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	struct nbd_conn *c = ow->conn;

	if (!c->dead) {
		if (ow->ret != SD_RES_SUCCESS) {
			send_rep_err(c, NBD_REP_ERR_UNKNOWN, "cannot list the vdis: %s",
				     sd_strerror(ow->ret));
		} else {
			for (int i = 0; i < ow->nr_names; i++) {
				uint32_t len = strlen(ow->names[i]);
				uint8_t *buf = malloc(4 + len);
				uint32_t be = htobe32(len);

				if (!buf)
					break;
				memcpy(buf, &be, 4);
				memcpy(buf + 4, ow->names[i], len);
				send_rep(c, NBD_REP_SERVER, buf, 4 + len);
				free(buf);
			}
			send_rep(c, NBD_REP_ACK, NULL, 0);
		}
		start_rx_header(c, NBD_ST_OPT);
	}
	optwork_free(ow);
	conn_put(c);
}

static void queue_optwork(struct nbd_conn *c, struct nbd_optwork *ow, work_fn fn, work_fn done)
{
	ow->conn = c;
	ow->opt = c->opt;
	ow->work.fn = fn;
	ow->work.done = done;
	c->refcnt++;
	c->state = NBD_ST_WAIT;
	update_events(c);
	wq_queue(nbd_wq, &ow->work);
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

/* EXPORT_NAME, INFO, GO: the name, then (INFO, GO) the information requests */
static void opt_export(struct nbd_conn *c)
{
	struct nbd_optwork *ow = calloc(1, sizeof(*ow));
	struct nbd_export *e = calloc(1, sizeof(*e));
	const uint8_t *p = c->rx_buf;
	uint32_t len = c->rx_len, nlen = len;

	if (!ow || !e) {
		free(ow);
		free(e);
		close_conn(c);
		return;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	ow->exp = e;
	if (c->opt != NBD_OPT_EXPORT_NAME) {
		uint16_t nr;

		nlen = len >= 4 ? get_be32(p) : UINT32_MAX;
		if (len < 6 || nlen > len - 6 ||
		    (nr = get_be16(p + 4 + nlen), len != 6 + nlen + 2u * nr)) {
			optwork_free(ow);
			send_rep_err(c, NBD_REP_ERR_INVALID, "malformed option data");
			start_rx_header(c, NBD_ST_OPT);
			return;
		}
		for (uint16_t i = 0; i < nr; i++)
			if (get_be16(p + 6 + nlen + 2 * i) == NBD_INFO_BLOCK_SIZE)
				ow->want_block_size = true;
		p += 4;
	}
	ow->export = strndup((const char *)p, nlen);
	if (!ow->export || strlen(ow->export) != nlen) {
		optwork_free(ow);
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			drop_conn(c, "export name with a NUL byte (or out of memory)");
			return;
		}
		send_rep_err(c, NBD_REP_ERR_INVALID, "export name with a NUL byte");
		start_rx_header(c, NBD_ST_OPT);
		return;
	}
	queue_optwork(c, ow, resolve_work, resolve_done);
}

/* LIST_META_CONTEXT and SET_META_CONTEXT: base:allocation is all there is */
static void opt_meta(struct nbd_conn *c)
{
	const uint8_t *p = c->rx_buf;
	uint32_t len = c->rx_len, pos, nr, nlen;
	bool set = c->opt == NBD_OPT_SET_META_CONTEXT, found = false;

	if (set && !c->structured) {
		send_rep_err(c, NBD_REP_ERR_INVALID, "structured replies must be negotiated first");
		goto out;
	}
	if (len < 8 || (nlen = get_be32(p)) > len - 8)
		goto bad;
	pos = 4 + nlen;
	nr = get_be32(p + pos);
	pos += 4;
	for (uint32_t i = 0; i <= nr; i++) {
		uint32_t qlen;
		const char *q;
		bool match;

		if (i == nr) {
			if (pos != len)
				goto bad;
			break;
		}
		if (len - pos < 4 || (qlen = get_be32(p + pos)) > len - pos - 4)
			goto bad;
		q = (const char *)p + pos + 4;
		pos += 4 + qlen;
		match = (qlen == strlen(NBD_META_BASE_ALLOCATION) &&
			 !memcmp(q, NBD_META_BASE_ALLOCATION, qlen)) ||
			(!set && qlen == 5 && !memcmp(q, "base:", 5));
		if (match)
			found = true;
	}
	if (!set && nr == 0)
		found = true;
	if (set)
		c->meta_alloc = found;
	if (found) {
		uint32_t id = htobe32(NBD_META_ID_ALLOCATION);
		uint8_t buf[4 + sizeof(NBD_META_BASE_ALLOCATION)];

		memcpy(buf, &id, 4);
		memcpy(buf + 4, NBD_META_BASE_ALLOCATION, strlen(NBD_META_BASE_ALLOCATION));
		send_rep(c, NBD_REP_META_CONTEXT, buf, 4 + strlen(NBD_META_BASE_ALLOCATION));
	}
	send_rep(c, NBD_REP_ACK, NULL, 0);
	goto out;
bad:
	send_rep_err(c, NBD_REP_ERR_INVALID, "malformed meta context option");
out:
	start_rx_header(c, NBD_ST_OPT);
}

/* a whole option is in c->rx_buf */
static void handle_option(struct nbd_conn *c)
{
	struct nbd_optwork *ow;

	switch (c->opt) {
	case NBD_OPT_EXPORT_NAME:
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_export(c);
		return;
	case NBD_OPT_ABORT:
		send_rep(c, NBD_REP_ACK, NULL, 0);
		c->close_after_tx = true;
		flush_tx(c);
		return;
	case NBD_OPT_LIST:
		if (c->rx_len) {
			send_rep_err(c, NBD_REP_ERR_INVALID, "LIST takes no data");
			break;
		}
		ow = calloc(1, sizeof(*ow));
		if (!ow) {
			send_rep_err(c, NBD_REP_ERR_UNKNOWN, "out of memory");
			break;
		}
		queue_optwork(c, ow, list_work, list_done);
		return;
	case NBD_OPT_STRUCTURED_REPLY:
		if (c->rx_len) {
			send_rep_err(c, NBD_REP_ERR_INVALID, "STRUCTURED_REPLY takes no data");
			break;
		}
		c->structured = true;
		send_rep(c, NBD_REP_ACK, NULL, 0);
		break;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		opt_meta(c);
		return;
	case NBD_OPT_STARTTLS:
		send_rep_err(c, NBD_REP_ERR_UNSUP, "TLS is not supported by this server");
		break;
	default:
		send_rep_err(c, NBD_REP_ERR_UNSUP, "option %" PRIu32 " is not supported", c->opt);
		break;
	}
	start_rx_header(c, NBD_ST_OPT);
}

/* ------------------------------------------------------------------ */
/* transmission */

static void io_release(struct nbd_tx *tx)
{
	struct nbd_io *io = container_of(tx, struct nbd_io, tx);
	struct nbd_conn *c = io->conn;

	c->nr_inflight--;
	c->inflight_bytes -= io->acct;
	free(io->buf);
	free(io);
	if (!c->dead)
		update_events(c);
	conn_put(c);
}

static uint8_t *put_chunk(uint8_t *h, uint16_t flags, uint16_t type, uint64_t cookie, uint32_t len)
{
	uint32_t v32 = htobe32(NBD_STRUCTURED_REPLY_MAGIC);
	uint16_t v16;
	uint64_t v64 = htobe64(cookie);

	memcpy(h, &v32, 4);
	v16 = htobe16(flags);
	memcpy(h + 4, &v16, 2);
	v16 = htobe16(type);
	memcpy(h + 6, &v16, 2);
	memcpy(h + 8, &v64, 8);
	v32 = htobe32(len);
	memcpy(h + 16, &v32, 4);
	return h + 20;
}

static void add_iov(struct nbd_io *io, void *base, size_t len)
{
	io->iov[io->tx.nr_iov].iov_base = base;
	io->iov[io->tx.nr_iov++].iov_len = len;
}

/* the chunks of a structured reply to READ */
static void build_read_chunks(struct nbd_io *io)
{
	uint8_t *h = io->hdr;

	if (io->nr_runs == 0) {
		uint8_t *end =
		    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, io->cookie, 0);
		add_iov(io, h, end - h);
		return;
	}
	for (int i = 0; i < io->nr_runs; i++) {
		const struct nbd_run *r = &io->runs[i];
		uint16_t flags = i == io->nr_runs - 1 ? NBD_REPLY_FLAG_DONE : 0;
		uint64_t off = htobe64(io->offset + r->off);
		uint8_t *start = h;

		if (r->hole) {
			uint32_t hl = htobe32(r->len);

			h = put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_HOLE, io->cookie, 12);
			memcpy(h, &off, 8);
			memcpy(h + 8, &hl, 4);
			h += 12;
			add_iov(io, start, h - start);
		} else {
			h = put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_DATA, io->cookie, 8 + r->len);
			memcpy(h, &off, 8);
			h += 8;
			add_iov(io, start, h - start);
			add_iov(io, (char *)io->buf + r->off, r->len);
		}
	}
}

static void build_reply(struct nbd_io *io)
{
	uint8_t *h = io->hdr;
	bool read = io->type == NBD_CMD_READ, bs = io->type == NBD_CMD_BLOCK_STATUS;

	io->tx.iov = io->iov;
	io->tx.nr_iov = 0;
	io->tx.idx = 0;
	if (io->structured && (read || bs || io->error)) {
		if (io->error) {
			uint32_t err = htobe32(io->error);
			uint16_t mlen = 0;
			uint8_t *end =
			    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, io->cookie, 6);

			memcpy(end, &err, 4);
			memcpy(end + 4, &mlen, 2);
			add_iov(io, h, end + 6 - h);
		} else if (read) {
			build_read_chunks(io);
		} else {
			uint8_t *end =
			    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
				      io->cookie, io->buf_len);
			add_iov(io, h, end - h);
			add_iov(io, io->buf, io->buf_len);
		}
		return;
	}
	uint32_t magic = htobe32(NBD_SIMPLE_REPLY_MAGIC), err = htobe32(io->error);
	uint64_t cookie = htobe64(io->cookie);

	memcpy(h, &magic, 4);
	memcpy(h + 4, &err, 4);
	memcpy(h + 8, &cookie, 8);
	add_iov(io, h, 16);
	if (read && !io->error && io->length)
		add_iov(io, io->buf, io->length);
}

static void io_done(struct work *w)
{
	struct nbd_io *io = container_of(w, struct nbd_io, work);

	build_reply(io);
	queue_tx(io->conn, &io->tx);
}

/* answer io at once with error (0: success, nothing to do) */
static void reply_now(struct nbd_io *io, uint32_t error)
{
	io->error = error;
	io_done(&io->work);
}

static struct nbd_io *new_io(struct nbd_conn *c)
{
	struct nbd_io *io = malloc(sizeof(*io));

	if (!io)
		return NULL;
	memset(io, 0, offsetof(struct nbd_io, hdr));
	io->conn = c;
	io->exp = c->exp;
	io->structured = c->structured;
	io->tx.release = io_release;
	INIT_LIST_NODE(&io->tx.node);
	c->refcnt++;
	c->nr_inflight++;
	return io;
}

/* a request header is in c->hdr: check it, then read its payload or run it */
static void handle_request(struct nbd_conn *c)
{
	const uint8_t *h = c->hdr;
	uint32_t magic = get_be32(h);
	struct nbd_io *io;
	uint64_t off;

	if (magic != NBD_REQUEST_MAGIC) {
		drop_conn(c, "bad request magic 0x%08" PRIx32, magic);
		return;
	}
	io = new_io(c);
	if (!io) {
		close_conn(c);
		return;
	}
	io->flags = get_be16(h + 4);
	io->type = get_be16(h + 6);
	memcpy(&io->cookie, h + 8, 8);
	io->cookie = be64toh(io->cookie);
	memcpy(&off, h + 16, 8);
	io->offset = be64toh(off);
	io->length = get_be32(h + 24);

	switch (io->type) {
	case NBD_CMD_DISC:
		sd_debug("nbd %s: disconnect", c->peer);
		io->tx.release(&io->tx);
		c->close_after_tx = true;
		flush_tx(c);
		return;
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		if (io->length > NBD_MAX_PAYLOAD) {
			sd_warn("nbd %s: %s of %" PRIu32 " bytes, over the %u byte limit; closing "
				"the connection",
				c->peer, io->type ? "write" : "read", io->length, NBD_MAX_PAYLOAD);
			if (io->type == NBD_CMD_WRITE) { /* its payload cannot be skipped */
				io->tx.release(&io->tx);
				close_conn(c);
				return;
			}
			c->close_after_tx = true;
			return reply_now(io, NBD_EOVERFLOW);
		}
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!c->meta_alloc)
			return reply_now(io, NBD_EINVAL);
		break;
	default:
		sd_warn("nbd %s: unknown command %" PRIu16 "; closing the connection", c->peer,
			io->type);
		c->close_after_tx = true;
		return reply_now(io, NBD_EINVAL);
	}
	if (io->type == NBD_CMD_WRITE) {
		io->buf = malloc(io->length ? io->length : 1);
		if (!io->buf) {
			io->tx.release(&io->tx);
			close_conn(c);
			return;
		}
		io->buf_len = io->acct = io->length;
		c->inflight_bytes += io->length;
		c->rx_io = io;
		c->rx_buf = io->buf;
		c->rx_len = io->length;
		c->rx_done = 0;
		return; /* run once the payload is in */
	}
	if (io->type == NBD_CMD_READ) {
		io->buf = malloc(io->length ? io->length : 1);
		if (!io->buf)
			return reply_now(io, NBD_ENOMEM);
		io->buf_len = io->acct = io->length;
		c->inflight_bytes += io->length;
	}
	c->rx_io = io;
	c->rx_buf = NULL;
	c->rx_len = 0;
	c->rx_done = 0;
}

/* a whole request (header and payload) is in: queue it, or answer its error */
static void run_request(struct nbd_conn *c)
{
	struct nbd_io *io = c->rx_io;
	const struct nbd_export *e = c->exp;
	bool writes = io->type == NBD_CMD_WRITE || io->type == NBD_CMD_TRIM ||
		      io->type == NBD_CMD_WRITE_ZEROES;
	uint64_t end = io->offset + io->length;

	c->rx_io = NULL;
	c->rx_buf = NULL;
	if (writes && e->readonly)
		return reply_now(io, NBD_EPERM);
	if (io->type != NBD_CMD_FLUSH && (end < io->offset || end > e->size))
		return reply_now(io, writes ? NBD_ENOSPC : NBD_EINVAL);
	if (io->type == NBD_CMD_FLUSH && e->readonly)
		return reply_now(io, 0);
	if (io->length == 0 && io->type != NBD_CMD_FLUSH)
		return reply_now(io, 0);
	io->work.fn = nbd_io_work;
	io->work.done = io_done;
	wq_queue(nbd_wq, &io->work);
}

/* ------------------------------------------------------------------ */
/* receiving */

static void start_rx_header(struct nbd_conn *c, enum nbd_state st)
{
	c->state = st;
	c->hdr_done = 0;
	c->hdr_len = st == NBD_ST_FLAGS ? 4 : st == NBD_ST_OPT ? 16 : 28;
	free(c->rx_buf);
	c->rx_buf = NULL;
	c->rx_len = c->rx_done = 0;
	if (!c->dead)
		update_events(c);
}

/* the header of the current state is in */
static void handle_header(struct nbd_conn *c)
{
	const uint8_t *h = c->hdr;
	uint64_t magic;

	switch (c->state) {
	case NBD_ST_FLAGS: {
		uint32_t flags = get_be32(h);

		if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
			drop_conn(c, "unknown client flags 0x%" PRIx32, flags);
			return;
		}
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		start_rx_header(c, NBD_ST_OPT);
		return;
	}
	case NBD_ST_OPT:
		memcpy(&magic, h, 8);
		if (be64toh(magic) != NBD_IHAVEOPT) {
			drop_conn(c, "bad option magic 0x%016" PRIx64, be64toh(magic));
			return;
		}
		c->opt = get_be32(h + 8);
		c->rx_len = get_be32(h + 12);
		if (c->rx_len > NBD_MAX_OPT_LEN) {
			drop_conn(c, "option %" PRIu32 " with %" PRIu32 " bytes of data", c->opt,
				  c->rx_len);
			return;
		}
		c->rx_buf = malloc(c->rx_len + 1);
		if (!c->rx_buf) {
			close_conn(c);
			return;
		}
		c->rx_done = 0;
		return;
	case NBD_ST_TRANS:
		handle_request(c);
		return;
	case NBD_ST_WAIT:
		return;
	}
}

/* read into p up to len bytes; 1 when complete, 0 when not yet, -1 when closed */
static int rx_bytes(struct nbd_conn *c, void *p, uint32_t len, uint32_t *done)
{
	while (*done < len) {
		ssize_t n = read(c->fd, (char *)p + *done, len - *done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			if (n == 0 && (c->state != NBD_ST_TRANS || *done || c->rx_io))
				sd_warn("nbd %s: connection closed in the middle of a %s", c->peer,
					c->state == NBD_ST_TRANS ? "request" : "handshake");
			close_conn(c);
			return -1;
		}
		*done += n;
	}
	return 1;
}

static void conn_rx(struct nbd_conn *c)
{
	/* a bounded batch per wake-up, for fairness between connections */
	for (int i = 0; i < 16 && !c->dead && !c->close_after_tx && c->state != NBD_ST_WAIT; i++) {
		int ret;

		if (c->state == NBD_ST_TRANS && (c->nr_inflight >= NBD_MAX_INFLIGHT ||
						 c->inflight_bytes >= NBD_MAX_INFLIGHT_BYTES))
			break;
		if (c->hdr_done < c->hdr_len) {
			ret = rx_bytes(c, c->hdr, c->hdr_len, &c->hdr_done);
			if (ret <= 0)
				return;
			handle_header(c);
			if (c->dead || c->close_after_tx)
				return;
		}
		if (c->state == NBD_ST_OPT) {
			if (c->hdr_done < c->hdr_len)
				continue; /* a new header is expected (flags were read) */
			ret = rx_bytes(c, c->rx_buf, c->rx_len, &c->rx_done);
			if (ret <= 0)
				return;
			handle_option(c);
		} else if (c->state == NBD_ST_TRANS) {
			if (c->rx_io) {
				ret = rx_bytes(c, c->rx_buf, c->rx_len, &c->rx_done);
				if (ret <= 0)
					return;
				run_request(c);
			}
			c->hdr_done = 0;
		}
	}
	if (!c->dead)
		update_events(c);
}

static void conn_handler(int fd, uint32_t events, void *data)
{
	struct nbd_conn *c = data;

	c->refcnt++;
	if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN))
		close_conn(c);
	if (!c->dead && (events & EPOLLIN))
		conn_rx(c);
	if (!c->dead && (events & EPOLLOUT))
		flush_tx(c);
	conn_put(c);
}

/* ------------------------------------------------------------------ */
/* accepting */

static void greet(struct nbd_conn *c)
{
	struct nbd_msg *m = msg_new(18);

	if (!m) {
		close_conn(c);
		return;
	}
	msg_be64(m, NBD_MAGIC);
	msg_be64(m, NBD_IHAVEOPT);
	msg_be16(m, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	msg_send(c, m);
}

static void peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
			port = ntohs(in6->sin6_port);
		}
	}
	snprintf(buf, len, "%s:%d", host, port);
}

static void listen_handler(int listen_fd, uint32_t events, void *data)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct nbd_conn *c;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				sd_err("nbd: accept failed: %m");
			return;
		}
		sd_set_nodelay(fd);
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->refcnt = 1;
		c->events = EPOLLIN;
		INIT_LIST_HEAD(&c->tx_queue);
		peer_name(fd, c->peer, sizeof(c->peer));
		if (ev_add(fd, EPOLLIN, conn_handler, c)) {
			close(fd);
			free(c);
			continue;
		}
		sd_debug("nbd %s: new connection", c->peer);
		start_rx_header(c, NBD_ST_FLAGS);
		greet(c);
	}
}

int nbd_init(const char *addr, int port, int nr_threads)
{
	int fds[8], nr, ret;

	nbd_wq = wq_create("nbd", nr_threads);
	if (!nbd_wq)
		return -ENOMEM;
	nr = sd_listen(addr, port, fds, ARRAY_SIZE(fds));
	if (nr < 0)
		return nr;
	for (int i = 0; i < nr; i++) {
		sd_set_nonblocking(fds[i]);
		ret = ev_add(fds[i], EPOLLIN, listen_handler, NULL);
		if (ret)
			return ret;
	}
	nbd_listening = true;
	sd_info("nbd: serving vdis on %s port %d", addr && *addr ? addr : "every address", port);
	return 0;
}
