/*
 * NBD export of VDIs: `sheep --nbd [ADDR:]PORT`.
 *
 * Connections live on the main thread's event loop, like the sheepdog
 * protocol's: the fixed newstyle handshake and the option haggling are read
 * and answered without blocking; whatever needs the namespace or an inode
 * (resolving an export name, its size, the list of exports) runs on the
 * nbd worker queue, one option at a time per connection (nbd_opt.c, which
 * also takes and releases the VDI's lock). In transmission,
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

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "event.h"
#include "daemon.h"
#include "listen.h"
#include "nbd.h"
#include "net.h"
#include "access.h"
#include "payload.h"
#include "stat.h"
#include "work.h"
#include "trace/trace_req.h"

/* option data the server reads at most (names are up to 4096 bytes) */
#define NBD_MAX_OPT_LEN 65536
/*
 * Requests and payload bytes in flight per connection before it stops
 * reading; besides, their payload (writes' and reads') is never more than
 * its share of the client pool (payload.h).
 */
#define NBD_MAX_INFLIGHT 64
#define NBD_MAX_INFLIGHT_BYTES (128U << 20)
/*
 * Read payload one connection may hold (reads in flight, replies not sent)
 * before it stops reading requests: a client that pipelines reads and does
 * not read the replies pins this much (and one request more), whatever the
 * bound.
 */
#define NBD_MAX_REPLY_BYTES (16U << 20)

/* main thread: every connection not closed yet */
static LIST_HEAD(open_conns);
struct work_queue *nbd_wq;

static void conn_handler(int fd, uint32_t events, void *data);

/* ------------------------------------------------------------------ */
/* life of a connection */

void nbd_conn_put(struct nbd_conn *c)
{
	if (--c->refcnt)
		return;
	if (c->locked)
		nbd_release_lock(c);
	nbd_export_free(c->exp);
	free(c);
}

/* may c read more now? */
static bool rx_wanted(const struct nbd_conn *c)
{
	if (c->close_after_tx || c->mem_wait || c->state == NBD_ST_WAIT)
		return false;
	/* the handshake is lockstep: the next option once the last one's replies are sent */
	if (c->state != NBD_ST_TRANS)
		return list_empty(&c->tx_queue);
	return c->nr_inflight < NBD_MAX_INFLIGHT && c->inflight_bytes < NBD_MAX_INFLIGHT_BYTES &&
	       c->reply_bytes < NBD_MAX_REPLY_BYTES;
}

void nbd_update_events(struct nbd_conn *c)
{
	uint32_t ev = 0;

	if (c->dead)
		return;
	if (rx_wanted(c))
		ev |= EPOLLIN;
	if (!list_empty(&c->tx_queue))
		ev |= EPOLLOUT;
	if (ev != c->events) {
		c->events = ev;
		ev_modify(c->fd, ev);
	}
}

/* the request being read (a write cut short) goes, with its payload (not freed twice) */
static void drop_rx_io(struct nbd_conn *c)
{
	if (!c->rx_io)
		return;
	if (c->rx_buf == c->rx_io->buf)
		c->rx_buf = NULL;
	c->rx_io->tx.release(&c->rx_io->tx);
	c->rx_io = NULL;
}

void nbd_close_conn(struct nbd_conn *c)
{
	struct nbd_tx *tx, *next;

	if (c->dead)
		return;
	c->dead = true;
	list_del(&c->link);
	ev_del(c->fd);
	close(c->fd);
	listen_conn_del(&c->lc);
	list_for_each_entry_safe(tx, next, &c->tx_queue, node) {
		list_del(&tx->node);
		tx->release(tx);
	}
	drop_rx_io(c);
	free(c->rx_buf);
	c->rx_buf = NULL;
	sd_debug("nbd %s: connection closed", c->peer);
	nbd_conn_put(c);
}

void nbd_lock_broken(uint32_t vid, const struct sd_lock_owner *owner)
{
	struct nbd_conn *c, *next;

	list_for_each_entry_safe(c, next, &open_conns, link)
		if (c->id == owner->conn && !memcmp(c->addr, owner->addr, 16)) {
			/* its lock is gone already: nothing to release at the close */
			c->locked = false;
			nbd_drop_conn(c, "an operator took the lock of vid %06" PRIx32 " away", vid);
		}
}

/* end the connection of a client that broke the protocol */
void nbd_drop_conn(struct nbd_conn *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_warn("nbd %s: %s; closing the connection", c->peer, msg);
	nbd_close_conn(c);
}

/* ------------------------------------------------------------------ */
/* sending */

void nbd_flush_tx(struct nbd_conn *c)
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
			nbd_close_conn(c);
			return;
		}
		c->last_active = listen_tick();
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
		nbd_close_conn(c);
		return;
	}
	nbd_update_events(c);
}

static void queue_tx(struct nbd_conn *c, struct nbd_tx *tx)
{
	if (c->dead) {
		tx->release(tx);
		return;
	}
	list_add_tail(&tx->node, &c->tx_queue);
	nbd_flush_tx(c);
}

static void msg_release(struct nbd_tx *tx)
{
	free(container_of(tx, struct nbd_msg, tx));
}

struct nbd_msg *nbd_msg_new(uint32_t cap)
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

void nbd_msg_put(struct nbd_msg *m, const void *p, uint32_t len)
{
	memcpy(m->data + m->len, p, len);
	m->len += len;
}

void nbd_msg_be16(struct nbd_msg *m, uint16_t v)
{
	v = htobe16(v);
	nbd_msg_put(m, &v, sizeof(v));
}

void nbd_msg_be32(struct nbd_msg *m, uint32_t v)
{
	v = htobe32(v);
	nbd_msg_put(m, &v, sizeof(v));
}

void nbd_msg_be64(struct nbd_msg *m, uint64_t v)
{
	v = htobe64(v);
	nbd_msg_put(m, &v, sizeof(v));
}

void nbd_msg_send(struct nbd_conn *c, struct nbd_msg *m)
{
	m->iov.iov_base = m->data;
	m->iov.iov_len = m->len;
	queue_tx(c, &m->tx);
}

/* one option reply: its header and len bytes of data */
void nbd_send_rep(struct nbd_conn *c, uint32_t type, const void *data, uint32_t len)
{
	struct nbd_msg *m = nbd_msg_new(20 + len);

	if (!m) {
		nbd_close_conn(c);
		return;
	}
	nbd_msg_be64(m, NBD_REP_MAGIC);
	nbd_msg_be32(m, c->opt);
	nbd_msg_be32(m, type);
	nbd_msg_be32(m, len);
	if (len)
		nbd_msg_put(m, data, len);
	nbd_msg_send(c, m);
}

/* an error reply with a message for the human behind the client */
void nbd_send_rep_err(struct nbd_conn *c, uint32_t type, const char *fmt, ...)
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
	nbd_send_rep(c, type, msg, (uint32_t)n);
}

/* ------------------------------------------------------------------ */
/* transmission */

/* give io's payload back to the connection's share and the pool */
static void io_free_buf(struct nbd_io *io)
{
	struct nbd_conn *c = io->conn;

	if (!io->acct) { /* not counted: block status extents */
		free(io->buf);
		io->buf = NULL;
		return;
	}
	c->inflight_bytes -= io->acct;
	if (io->type == NBD_CMD_READ)
		c->reply_bytes -= io->acct;
	payload_put(&c->share, PAYLOAD_CLIENT, io->buf, io->acct);
	io->buf = NULL;
	io->acct = 0;
}

static void io_release(struct nbd_tx *tx)
{
	struct nbd_io *io = container_of(tx, struct nbd_io, tx);
	struct nbd_conn *c = io->conn;

	stat_req_untrack(&io->stat_track);
	c->nr_inflight--;
	io_free_buf(io);
	free(io);
	if (!c->dead)
		nbd_update_events(c);
	nbd_conn_put(c);
}

/* the statistics row of an NBD command (internal_proto.h), also the tracer's opcode of it */
static uint8_t stat_op_of(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ:
		return SD_STAT_NBD_READ;
	case NBD_CMD_WRITE:
		return SD_STAT_NBD_WRITE;
	case NBD_CMD_FLUSH:
		return SD_STAT_NBD_FLUSH;
	case NBD_CMD_TRIM:
		return SD_STAT_NBD_TRIM;
	case NBD_CMD_WRITE_ZEROES:
		return SD_STAT_NBD_WRITE_ZEROES;
	default:
		return SD_STAT_NBD_BLOCK_STATUS;
	}
}

static void io_done(struct work *w)
{
	struct nbd_io *io = container_of(w, struct nbd_io, work);

#ifdef STAT_ENABLED
	/* the data moved: a read's or a write's, none for the others or an error */
	if (stat_req_active(&io->stat))
		stat_req_end(&io->stat, stat_clock_end(),
			     !io->error && (io->type == NBD_CMD_READ || io->type == NBD_CMD_WRITE)
				 ? io->length
				 : 0,
			     io->error != 0);
#endif

	/* a write's reply carries no data: its payload is not held while it waits */
	if (io->type == NBD_CMD_WRITE)
		io_free_buf(io);
	nbd_build_reply(io);
	queue_tx(io->conn, &io->tx);
}

/* answer io at once with error (0: success, nothing to do) */
static void reply_now(struct nbd_io *io, uint32_t error)
{
	io->error = error;
	io_done(&io->work);
}

/* an NBD command in flight past sheep --hang-threshold (stat.c, once per command) */
static void report_hang(struct stat_req *sr, uint64_t age_ns)
{
	struct nbd_io *io = container_of(sr, struct nbd_io, stat);
	static const char *const names[] = { "read", "write", "disc",	      "flush",
					     "trim", "cache", "write_zeroes", "block_status" };

	sd_warn("hang: nbd %s of %" PRIu32 " bytes at %" PRIu64
		" of export %s in flight for %" PRIu64 " ms, client %s",
		io->type < ARRAY_SIZE(names) ? names[io->type] : "command", io->length, io->offset,
		io->exp ? io->exp->name : "?", age_ns / 1000000, io->conn->peer);
}

static struct nbd_io *new_io(struct nbd_conn *c)
{
	struct nbd_io *io = malloc(sizeof(*io));

	if (!io)
		return NULL;
	memset(io, 0, offsetof(struct nbd_io, hdr));
	stat_req_track(&io->stat_track, &io->stat, report_hang);
	io->conn = c;
	io->exp = c->exp;
	io->structured = c->structured;
	io->tx.release = io_release;
	INIT_LIST_NODE(&io->tx.node);
	c->refcnt++;
	c->nr_inflight++;
	return io;
}

/*
 * The payload buffer of the request c->rx_io (a WRITE's data, a READ's
 * reply), counted against --max-inflight-bytes: 0 when c may go on reading
 * it; -EAGAIN when c waits for memory (its reading stopped until
 * conn_mem_resume); -ENOMEM when the request was answered (a read) or the
 * connection closed (a write, whose payload cannot be skipped).
 */
static int take_payload(struct nbd_conn *c)
{
	struct nbd_io *io = c->rx_io;
	int ret = payload_get(&c->share, PAYLOAD_CLIENT, io->length, &io->buf, &io->acct);

	if (ret == -EAGAIN)
		return ret;
	if (ret) {
		c->rx_io = NULL;
		if (io->type == NBD_CMD_READ) {
			reply_now(io, NBD_ENOMEM);
		} else {
			io->tx.release(&io->tx);
			nbd_close_conn(c);
		}
		return -ENOMEM;
	}
	io->buf_len = io->length;
	c->inflight_bytes += io->acct;
	if (io->type == NBD_CMD_READ) {
		c->reply_bytes += io->acct;
	} else {
		c->rx_buf = io->buf;
		c->rx_len = io->length;
	}
	return 0;
}

static void conn_rx(struct nbd_conn *c);

/* memory was freed: go on with the request c waits to read or run */
static bool conn_mem_resume(struct payload_waiter *w)
{
	struct nbd_conn *c = container_of(w, struct nbd_conn, mem_waiter);

	if (!c->dead && c->rx_io && take_payload(c) == -EAGAIN)
		return false;
	c->mem_wait = false;
	if (!c->dead) {
		nbd_update_events(c);
		conn_rx(c);
	}
	nbd_conn_put(c);
	return true;
}

/* a request header is in c->hdr: check it, then read its payload or run it */
static void handle_request(struct nbd_conn *c)
{
	const uint8_t *h = c->hdr;
	uint32_t magic = nbd_get_be32(h);
	struct nbd_io *io;
	uint64_t off;

	if (magic != NBD_REQUEST_MAGIC) {
		nbd_drop_conn(c, "bad request magic 0x%08" PRIx32, magic);
		return;
	}
	io = new_io(c);
	if (!io) {
		nbd_close_conn(c);
		return;
	}
	io->flags = nbd_get_be16(h + 4);
	io->type = nbd_get_be16(h + 6);
	memcpy(&io->cookie, h + 8, 8);
	io->cookie = be64toh(io->cookie);
	memcpy(&off, h + 16, 8);
	io->offset = be64toh(off);
	io->length = nbd_get_be32(h + 24);

	switch (io->type) {
	case NBD_CMD_DISC:
		sd_debug("nbd %s: disconnect", c->peer);
		io->tx.release(&io->tx);
		c->close_after_tx = true;
		nbd_flush_tx(c);
		return;
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		if (io->length > NBD_MAX_PAYLOAD && io->type == NBD_CMD_WRITE) {
			/* its payload would have to be read to stay in step: no */
			sd_warn("nbd %s: write of %" PRIu32 " bytes, over the %u byte limit; "
				"closing the connection",
				c->peer, io->length, NBD_MAX_PAYLOAD);
			io->tx.release(&io->tx);
			nbd_close_conn(c);
			return;
		}
		if (io->length > NBD_MAX_PAYLOAD) {
			/* nothing follows a read's header: an error, and the connection goes on */
			sd_log_ratelimited(60, SDOG_WARNING,
					   "nbd %s: read of %" PRIu32 " bytes, over the %u byte "
					   "limit: answered EINVAL",
					   c->peer, io->length, NBD_MAX_PAYLOAD);
			return reply_now(io, NBD_EINVAL);
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
	c->rx_io = io;
	c->rx_buf = NULL;
	c->rx_len = 0;
	c->rx_done = 0;
	if ((io->type == NBD_CMD_WRITE || io->type == NBD_CMD_READ) && take_payload(c) == -EAGAIN) {
		c->mem_wait = true;
		c->refcnt++; /* held by the waiter */
		payload_wait(&c->mem_waiter);
		nbd_update_events(c);
	}
}

/* the tracer's view of a command (trace/trace_req.h): this node is its gateway */
static void trace_begin(const struct nbd_io *io, uint64_t queued)
{
	struct trace_req tr = {
		.id = io->trace_id,
		.oid = vid_to_data_oid(io->exp->vid, (uint32_t)(io->offset >> io->exp->shift)),
		.queued = queued,
		.flags = io->trace_flags | TRACE_REQ_GATEWAY,
		.opcode = stat_op_of(io->type),
	};

	trace_req_begin(&tr);
}

static bool read_inline_traced(struct nbd_io *io)
{
	bool ok;

	trace_begin(io, 0);
	ok = nbd_read_inline(io);
	trace_req_end(ok ? SD_RES_SUCCESS : TRACE_REQ_PASSED);
	return ok;
}

static void io_work_traced(struct work *w)
{
	struct nbd_io *io = container_of(w, struct nbd_io, work);

	trace_begin(io, w->queued);
	nbd_io_work(w);
	trace_req_end(io->error ? SD_RES_EIO : SD_RES_SUCCESS);
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
#ifdef STAT_ENABLED
	/* in flight from here */
	stat_req_begin(&io->stat, stat_op_of(io->type), stat_clock());
#endif
	if (writes && e->readonly)
		return reply_now(io, NBD_EPERM);
	if (io->type != NBD_CMD_FLUSH && (end < io->offset || end > e->size))
		return reply_now(io, io->type == NBD_CMD_WRITE || io->type == NBD_CMD_WRITE_ZEROES
					 ? NBD_ENOSPC
					 : NBD_EINVAL);
	if (io->type == NBD_CMD_FLUSH && e->readonly)
		return reply_now(io, 0);
	/* a block status chunk holds one extent at least: none for no range */
	if (io->length == 0 && io->type != NBD_CMD_FLUSH)
		return reply_now(io, io->type == NBD_CMD_BLOCK_STATUS ? NBD_EINVAL : 0);
	io->trace_id = trace_req_new(true, e->vid, &io->trace_flags);
	if (io->type == NBD_CMD_READ && read_inline_traced(io))
		return reply_now(io, 0);
	io->work.fn = io_work_traced;
	io->work.done = io_done;
	wq_queue(nbd_wq, &io->work);
}

/* ------------------------------------------------------------------ */
/* receiving */

void nbd_start_rx_header(struct nbd_conn *c, enum nbd_state st)
{
	c->state = st;
	c->turn_start = listen_tick();
	c->hdr_done = 0;
	c->hdr_len = st == NBD_ST_FLAGS ? 4 : st == NBD_ST_OPT ? 16 : 28;
	free(c->rx_buf);
	c->rx_buf = NULL;
	c->rx_len = c->rx_done = 0;
	if (!c->dead)
		nbd_update_events(c);
}

/* the header of the current state is in */
static void handle_header(struct nbd_conn *c)
{
	const uint8_t *h = c->hdr;
	uint64_t magic;

	switch (c->state) {
	case NBD_ST_FLAGS: {
		uint32_t flags = nbd_get_be32(h);

		if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
			nbd_drop_conn(c, "unknown client flags 0x%" PRIx32, flags);
			return;
		}
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		nbd_start_rx_header(c, NBD_ST_OPT);
		return;
	}
	case NBD_ST_OPT:
		memcpy(&magic, h, 8);
		if (be64toh(magic) != NBD_IHAVEOPT) {
			nbd_drop_conn(c, "bad option magic 0x%016" PRIx64, be64toh(magic));
			return;
		}
		c->opt = nbd_get_be32(h + 8);
		c->rx_len = nbd_get_be32(h + 12);
		if (c->rx_len > NBD_MAX_OPT_LEN) {
			nbd_drop_conn(c, "option %" PRIu32 " with %" PRIu32 " bytes of data",
				      c->opt, c->rx_len);
			return;
		}
		c->rx_buf = malloc(c->rx_len + 1);
		if (!c->rx_buf) {
			nbd_close_conn(c);
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
		if (n == 0 && c->state == NBD_ST_TRANS) {
			bool cut = *done || c->rx_io;

			if (cut)
				sd_warn("nbd %s: connection closed in the middle of a request",
					c->peer);
			drop_rx_io(c);
			c->hdr_done = 0;
			/*
			 * EOF in transmission: the client shut its sending side
			 * and may still read. A request it cut short has no
			 * reply; every whole one is answered, and the last reply
			 * sent closes the connection (never one cut in its
			 * middle by our close).
			 */
			c->close_after_tx = true;
			nbd_flush_tx(c);
			return -1;
		}
		if (n <= 0) {
			if (n == 0)
				sd_warn("nbd %s: connection closed in the middle of a handshake",
					c->peer);
			nbd_close_conn(c);
			return -1;
		}
		c->last_active = listen_tick();
		if (!*done && p == c->hdr)
			c->rx_start = c->last_active;
		*done += n;
	}
	return 1;
}

static void conn_rx(struct nbd_conn *c)
{
	/* a bounded batch per wake-up, for fairness between connections */
	for (int i = 0; i < 16 && !c->dead; i++) {
		int ret;

		/* a request (or option) begun is read on; the next one when c may */
		if (!c->hdr_done && !rx_wanted(c))
			break;
		if (c->close_after_tx || c->state == NBD_ST_WAIT || c->mem_wait)
			break;
		if (c->hdr_done < c->hdr_len) {
			ret = rx_bytes(c, c->hdr, c->hdr_len, &c->hdr_done);
			if (ret <= 0)
				return;
			handle_header(c);
			if (c->dead || c->close_after_tx || c->mem_wait)
				return;
		}
		if (c->state == NBD_ST_OPT) {
			if (c->hdr_done < c->hdr_len)
				continue; /* a new header is expected (flags were read) */
			ret = rx_bytes(c, c->rx_buf, c->rx_len, &c->rx_done);
			if (ret <= 0)
				return;
			nbd_handle_option(c);
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
		nbd_update_events(c);
}

static void conn_handler(int fd, uint32_t events, void *data)
{
	struct nbd_conn *c = data;

	c->refcnt++;
	if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN))
		nbd_close_conn(c);
	if (!c->dead && (events & EPOLLIN))
		conn_rx(c);
	if (!c->dead && (events & EPOLLOUT))
		nbd_flush_tx(c);
	nbd_conn_put(c);
}

/* ------------------------------------------------------------------ */
/* accepting */

static void greet(struct nbd_conn *c)
{
	struct nbd_msg *m = nbd_msg_new(18);

	if (!m) {
		nbd_close_conn(c);
		return;
	}
	nbd_msg_be64(m, NBD_MAGIC);
	nbd_msg_be64(m, NBD_IHAVEOPT);
	nbd_msg_be16(m, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	nbd_msg_send(c, m);
}

/*
 * A new connection on fd (non-blocking, accepted): its state, polled,
 * counted by l (NULL: not counted) and greeted (the handshake begins).
 * NULL when it cannot be set up (fd is left to the caller). The fuzz
 * harness sets its connections up here too.
 */

static struct nbd_conn *conn_init(struct listener *l, int fd)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->refcnt = 1;
	c->events = EPOLLIN;
	c->mem_waiter.resume = conn_mem_resume;
	c->last_active = listen_tick();
	INIT_LIST_HEAD(&c->tx_queue);
	sd_peer_name(fd, c->peer, sizeof(c->peer));
	sd_peer_addr(fd, c->addr, NULL);
	c->id = daemon_conn_id();
	if (ev_add(fd, EPOLLIN, conn_handler, c)) {
		free(c);
		return NULL;
	}
	listen_conn_add(l, &c->lc);
	list_add_tail(&c->link, &open_conns);
	sd_debug("nbd %s: new connection", c->peer);
	nbd_start_rx_header(c, NBD_ST_FLAGS);
	greet(c);
	return c;
}

static bool conn_admit(int fd)
{
	return access_conn_ok(ACCESS_NBD, fd); /* loopback and --nbd-allow */
}

static int conn_accept(struct listener *l, int fd, const struct sockaddr_storage *ss)
{
	return conn_init(l, fd) ? 0 : -ENOMEM;
}

/*
 * For the listener's timeouts (--client-timeout, --idle-timeout): in the
 * handshake, the client's turn runs from the greeting or the last
 * option's answer to its next option, whole; in transmission, from a
 * request's first byte to its last. An option being processed, requests
 * in flight, replies to send or a request waiting for payload memory are
 * the daemon's turn.
 */
static enum listen_state conn_state(struct listen_conn *lc, uint64_t *since)
{
	struct nbd_conn *c = container_of(lc, struct nbd_conn, lc);

	if (c->state == NBD_ST_WAIT || c->mem_wait)
		return LISTEN_BUSY;
	if (c->state != NBD_ST_TRANS) {
		*since = c->turn_start;
		return LISTEN_TURN;
	}
	if (c->hdr_done || c->rx_io) {
		*since = c->rx_start;
		return LISTEN_TURN;
	}
	if (c->nr_inflight || !list_empty(&c->tx_queue))
		return LISTEN_BUSY;
	*since = c->last_active;
	return LISTEN_IDLE;
}

static void conn_timeout(struct listen_conn *lc, const char *why)
{
	struct nbd_conn *c = container_of(lc, struct nbd_conn, lc);

	sd_debug("nbd %s: closing %s", c->peer, why);
	nbd_close_conn(c);
}

/* at the cap, or out of descriptors: a connection still in its handshake makes room */
static bool conn_evictable(struct listen_conn *lc)
{
	struct nbd_conn *c = container_of(lc, struct nbd_conn, lc);

	return c->state == NBD_ST_FLAGS || c->state == NBD_ST_OPT;
}

static const struct listen_ops nbd_listen_ops = {
	.name = "nbd",
	.admit = conn_admit,
	.accept = conn_accept,
	.state = conn_state,
	.timeout = conn_timeout,
	.evictable = conn_evictable,
};

int nbd_init(const struct nbd_config *cfg)
{
	struct listen_limits lim = {
		.max_conns = cfg->max_conns,
		.cap_option = "--nbd-max-connections",
		.turn_timeout = cfg->client_timeout,
		.idle_timeout = cfg->idle_timeout,
		.turn_what = "an NBD handshake or request that did not arrive in time "
			     "(--client-timeout)",
	};
	static const struct {
		uint8_t op;
		const char *name;
	} rows[] = { { SD_STAT_NBD_READ, "NBD_READ" },
		     { SD_STAT_NBD_WRITE, "NBD_WRITE" },
		     { SD_STAT_NBD_FLUSH, "NBD_FLUSH" },
		     { SD_STAT_NBD_TRIM, "NBD_TRIM" },
		     { SD_STAT_NBD_WRITE_ZEROES, "NBD_WRITE_ZEROES" },
		     { SD_STAT_NBD_BLOCK_STATUS, "NBD_BLOCK_STATUS" } };

	nbd_wq = wq_create("nbd", cfg->nr_threads);
	if (!nbd_wq)
		return -ENOMEM;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		if (stat_register_op(rows[i].op, rows[i].name, "nbd") < 0)
			sd_warn("no statistics slot for %s", rows[i].name);
	if (!listener_open(&nbd_listen_ops, &lim, cfg->addr, cfg->port))
		return -errno;
	sd_info("nbd: serving vdis on %s port %d, at most %d connections",
		cfg->addr && *cfg->addr ? cfg->addr : "every address", cfg->port, cfg->max_conns);
	return 0;
}
