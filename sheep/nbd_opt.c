/*
 * NBD option haggling, and the VDI's lock: what a connection does between
 * the client's flags and the transmission phase (nbd.c reads each option
 * whole and calls nbd_handle_option on the main thread).
 *
 * Options that need the namespace or an inode run on the nbd workers, one
 * at a time per connection (the connection reads nothing meanwhile): INFO,
 * GO and EXPORT_NAME resolve the export name and read the inode header;
 * LIST reads the name of every VDI. GO and EXPORT_NAME of a writable
 * export then take the VDI's lock with LOCK_VDI through the cluster's
 * ordered ops (a second writer is refused here), and load the VDI's map
 * once it is theirs. The lock is released by nbd_release_lock when the
 * connection's last reference goes.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "nbd.h"
#include "group.h"
#include "ops.h"
#include "ordered.h"
#include "request.h"
#include "work.h"

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

/* ------------------------------------------------------------------ */
/* the VDI's lock */

static void vdi_req_init(struct nbd_vdi_req *vr, const struct nbd_conn *c, uint8_t opcode,
			 const char *name)
{
	memset(vr, 0, sizeof(*vr));
	snprintf(vr->names, SD_MAX_VDI_LEN, "%s", name);
	vr->req.rq.proto_ver = SD_PROTO_VER;
	vr->req.rq.opcode = opcode;
	vr->req.rq.flags = SD_FLAG_CMD_WRITE;
	vr->req.rq.vdi.type = SD_LOCK_TYPE_NORMAL;
	vr->req.data = vr->names;
	vr->req.op = get_sd_op(opcode);
	/* the lock is this connection's */
	memcpy(vr->req.ord.owner.addr, c->addr, sizeof(c->addr));
	vr->req.ord.owner.conn = c->id;
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
void nbd_release_lock(struct nbd_conn *c)
{
	struct nbd_vdi_req *vr = malloc(sizeof(*vr));

	c->locked = false;
	if (!vr) {
		sd_err("nbd: out of memory: vdi %s stays locked", c->exp->name);
		return;
	}
	vdi_req_init(vr, c, SD_OP_RELEASE_VDI, c->exp->name);
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
	if (e->readonly && !e->shared_ro)
		flags |= NBD_FLAG_READ_ONLY | NBD_FLAG_CAN_MULTI_CONN;
	else if (e->readonly)
		flags |= NBD_FLAG_READ_ONLY; /* another client writes it */
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
	nbd_send_rep(c, NBD_REP_INFO, buf, 12);
	if (block_size) {
		uint32_t bs[3] = { htobe32(1), htobe32(4096), htobe32(NBD_MAX_PAYLOAD) };

		t = htobe16(NBD_INFO_BLOCK_SIZE);
		memcpy(buf, &t, 2);
		memcpy(buf + 2, bs, sizeof(bs));
		nbd_send_rep(c, NBD_REP_INFO, buf, 14);
	}
}

static void start_transmission(struct nbd_conn *c, struct nbd_export *e)
{
	c->exp = e;
	sd_info("nbd %s: exporting vdi %s%s%s (vid %06" PRIx32 ", %" PRIu64 " bytes)%s", c->peer,
		e->name, e->snapid || e->tag[0] ? "@" : "", e->tag[0] ? e->tag : "", e->vid,
		e->size, e->readonly ? ", read-only" : "");
	nbd_start_rx_header(c, NBD_ST_TRANS);
}

/* EXPORT_NAME's answer: no error is possible, only a closed connection */
static void send_export_name_reply(struct nbd_conn *c, struct nbd_export *e)
{
	struct nbd_msg *m = nbd_msg_new(8 + 2 + 124);

	if (!m) {
		c->exp = e; /* freed, and its lock released, with the connection */
		nbd_close_conn(c);
		return;
	}
	nbd_msg_be64(m, e->size);
	nbd_msg_be16(m, transmission_flags(e));
	if (!c->no_zeroes) {
		memset(m->data + m->len, 0, 124);
		m->len += 124;
	}
	nbd_msg_send(c, m);
	start_transmission(c, e);
}

static void opt_fail(struct nbd_conn *c, const struct nbd_optwork *ow, int ret)
{
	const char *name = ow->export ? ow->export : "";

	if (ow->opt == NBD_OPT_EXPORT_NAME) {
		sd_warn("nbd %s: export '%s': %s; closing the connection", c->peer, name,
			sd_strerror(ret));
		nbd_close_conn(c);
		return;
	}
	switch (ret) {
	case SD_RES_NO_VDI:
	case SD_RES_NO_TAG:
		nbd_send_rep_err(c, NBD_REP_ERR_UNKNOWN, "no vdi or snapshot called '%s'", name);
		break;
	case SD_RES_VDI_LOCKED:
		nbd_send_rep_err(
		    c, NBD_REP_ERR_POLICY,
		    "vdi '%s' is locked: another writer (an NBD client or a VM) has it open", name);
		break;
	case SD_RES_WAIT_FOR_FORMAT:
		nbd_send_rep_err(c, NBD_REP_ERR_SHUTDOWN, "the cluster is not formatted");
		break;
	case SD_RES_WAIT_FOR_JOIN:
		nbd_send_rep_err(c, NBD_REP_ERR_SHUTDOWN,
				 "waiting for the other nodes of the cluster to join");
		break;
	default:
		nbd_send_rep_err(c, NBD_REP_ERR_UNKNOWN, "export '%s': %s", name, sd_strerror(ret));
		break;
	}
	nbd_start_rx_header(c, NBD_ST_OPT);
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
		nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
		start_transmission(c, e);
	}
}

static void load_work(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);

	ow->ret = nbd_export_load(ow->exp, true);
	if (ow->exp->shared_ro)
		ow->exp->readonly = true;
}

static void load_done(struct work *w)
{
	struct nbd_optwork *ow = container_of(w, struct nbd_optwork, work);
	struct nbd_conn *c = ow->conn;

	if (!c->dead) {
		if (ow->ret == SD_RES_SUCCESS && ow->exp->readonly && !ow->exp->shared_ro)
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
		nbd_release_lock(c);
		nbd_export_free(c->exp);
		c->exp = NULL;
	}
	optwork_free(ow);
	nbd_conn_put(c);
}

static void lock_done(struct request *req)
{
	struct nbd_vdi_req *vr = container_of(req, struct nbd_vdi_req, req);
	struct nbd_optwork *ow = vr->ow;
	struct nbd_conn *c = vr->conn;
	int ret = req->rp.result;
	uint32_t vid = req->rp.vdi.vdi_id;

	free(vr);
	/*
	 * Locked by another client (a VM, another NBD writer): served
	 * read-only, without the lock (qemu-img info, qemu-io -r open it; a
	 * writer is told the export is read-only)
	 */
	if (ret == SD_RES_VDI_LOCKED) {
		sd_info("nbd %s: vdi %s is locked by another client: read-only", c->peer,
			ow->exp->name);
		ow->exp->shared_ro = true;
		ret = SD_RES_SUCCESS;
	} else if (ret == SD_RES_SUCCESS) {
		c->locked = true;
		/* the working VDI may have changed since the name was resolved */
		ow->exp->vid = vid;
	}
	if (ret == SD_RES_SUCCESS) {
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
	nbd_conn_put(c);
}

static void take_lock(struct nbd_conn *c, struct nbd_optwork *ow)
{
	struct nbd_vdi_req *vr = malloc(sizeof(*vr));

	if (!vr) {
		opt_fail(c, ow, SD_RES_NO_MEM);
		optwork_free(ow);
		nbd_conn_put(c);
		return;
	}
	vdi_req_init(vr, c, SD_OP_LOCK_VDI, ow->exp->name);
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
	/* restarted alone, its copies may be old (group_is_waiting) */
	if (group_is_waiting()) {
		ow->ret = SD_RES_WAIT_FOR_JOIN;
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
		nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
		nbd_start_rx_header(c, NBD_ST_OPT);
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
	nbd_conn_put(c);
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
			nbd_send_rep_err(c, NBD_REP_ERR_UNKNOWN, "cannot list the vdis: %s",
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
				nbd_send_rep(c, NBD_REP_SERVER, buf, 4 + len);
				free(buf);
			}
			nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
		}
		nbd_start_rx_header(c, NBD_ST_OPT);
	}
	optwork_free(ow);
	nbd_conn_put(c);
}

static void queue_optwork(struct nbd_conn *c, struct nbd_optwork *ow, work_fn fn, work_fn done)
{
	ow->conn = c;
	ow->opt = c->opt;
	ow->work.fn = fn;
	ow->work.done = done;
	c->refcnt++;
	c->state = NBD_ST_WAIT;
	nbd_update_events(c);
	wq_queue(nbd_wq, &ow->work);
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
		nbd_close_conn(c);
		return;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	ow->exp = e;
	if (c->opt != NBD_OPT_EXPORT_NAME) {
		uint16_t nr;

		nlen = len >= 4 ? nbd_get_be32(p) : UINT32_MAX;
		if (len < 6 || nlen > len - 6 ||
		    (nr = nbd_get_be16(p + 4 + nlen), len != 6 + nlen + 2u * nr)) {
			optwork_free(ow);
			nbd_send_rep_err(c, NBD_REP_ERR_INVALID, "malformed option data");
			nbd_start_rx_header(c, NBD_ST_OPT);
			return;
		}
		for (uint16_t i = 0; i < nr; i++)
			if (nbd_get_be16(p + 6 + nlen + 2 * i) == NBD_INFO_BLOCK_SIZE)
				ow->want_block_size = true;
		p += 4;
	}
	ow->export = strndup((const char *)p, nlen);
	if (!ow->export || strlen(ow->export) != nlen) {
		optwork_free(ow);
		if (c->opt == NBD_OPT_EXPORT_NAME) {
			nbd_drop_conn(c, "export name with a NUL byte (or out of memory)");
			return;
		}
		nbd_send_rep_err(c, NBD_REP_ERR_INVALID, "export name with a NUL byte");
		nbd_start_rx_header(c, NBD_ST_OPT);
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
		nbd_send_rep_err(c, NBD_REP_ERR_INVALID,
				 "structured replies must be negotiated first");
		goto out;
	}
	if (len < 8 || (nlen = nbd_get_be32(p)) > len - 8)
		goto bad;
	pos = 4 + nlen;
	nr = nbd_get_be32(p + pos);
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
		if (len - pos < 4 || (qlen = nbd_get_be32(p + pos)) > len - pos - 4)
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
		nbd_send_rep(c, NBD_REP_META_CONTEXT, buf, 4 + strlen(NBD_META_BASE_ALLOCATION));
	}
	nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
	goto out;
bad:
	nbd_send_rep_err(c, NBD_REP_ERR_INVALID, "malformed meta context option");
out:
	nbd_start_rx_header(c, NBD_ST_OPT);
}

/* a whole option is in c->rx_buf */
void nbd_handle_option(struct nbd_conn *c)
{
	struct nbd_optwork *ow;

	switch (c->opt) {
	case NBD_OPT_EXPORT_NAME:
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_export(c);
		return;
	case NBD_OPT_ABORT:
		nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
		c->close_after_tx = true;
		nbd_flush_tx(c);
		return;
	case NBD_OPT_LIST:
		if (c->rx_len) {
			nbd_send_rep_err(c, NBD_REP_ERR_INVALID, "LIST takes no data");
			break;
		}
		ow = calloc(1, sizeof(*ow));
		if (!ow) {
			nbd_send_rep_err(c, NBD_REP_ERR_UNKNOWN, "out of memory");
			break;
		}
		queue_optwork(c, ow, list_work, list_done);
		return;
	case NBD_OPT_STRUCTURED_REPLY:
		if (c->rx_len) {
			nbd_send_rep_err(c, NBD_REP_ERR_INVALID, "STRUCTURED_REPLY takes no data");
			break;
		}
		c->structured = true;
		nbd_send_rep(c, NBD_REP_ACK, NULL, 0);
		break;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		opt_meta(c);
		return;
	case NBD_OPT_STARTTLS:
		nbd_send_rep_err(c, NBD_REP_ERR_UNSUP, "TLS is not supported by this server");
		break;
	default:
		nbd_send_rep_err(c, NBD_REP_ERR_UNSUP, "option %" PRIu32 " is not supported",
				 c->opt);
		break;
	}
	nbd_start_rx_header(c, NBD_ST_OPT);
}
