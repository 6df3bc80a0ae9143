/*
 * Ordered cluster operations: format, VDI creation and deletion, snapshot,
 * lock and release.
 *
 * The node that receives the client's request broadcasts it through the
 * cluster driver (a small message: the header and the payload, at most the
 * 512 bytes of a name and a tag) and keeps the request aside. The driver
 * delivers every message to every node, the sender included, in one total
 * order; each node queues the delivered ops on its single cluster worker,
 * so every node applies the same ops in the same order to the same state:
 * vid allocation, locks and the format come out identical everywhere. The
 * originator applies its own copy to the kept request and answers the
 * client; other nodes apply a copy marked remote, which changes only their
 * in-memory state: the originator alone writes objects (inodes go through
 * the gateway, so they are replicated like data). With one node the local
 * driver delivers to the sender itself, and nothing else changes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sheep_priv.h"

#define ORDERED_MAGIC UINT32_C(0x4f524452) /* "ORDR" */
/* the largest payload of an ordered op: a name and a tag */
#define ORDERED_MAX_DATA (SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN)

struct ordered_msg {
	uint32_t magic;
	uint32_t data_length;
	uint64_t token;
	struct sd_node_id origin;
	struct sd_req rq;
	uint8_t data[];
};

/* requests of this node waiting for their own delivery (main thread only) */
static LIST_HEAD(pending);
static uint64_t next_token;

static void answer(struct request *req, int result)
{
	req->rp.result = result;
	request_done(req);
}

void ordered_submit(struct request *req)
{
	uint32_t dlen = (req->rq.flags & SD_FLAG_CMD_WRITE) ? req->rq.data_length : 0;
	struct ordered_msg *msg;
	int ret;

	if (dlen > ORDERED_MAX_DATA)
		return answer(req, SD_RES_INVALID_PARMS);
	msg = calloc(1, sizeof(*msg) + dlen);
	if (!msg)
		return answer(req, SD_RES_NO_MEM);
	/* the originator's clock decides, so that every node stores the same */
	if (req->rq.opcode == SD_OP_MAKE_FS && req->rq.cluster.ctime == 0)
		req->rq.cluster.ctime = (uint64_t)time(NULL);
	msg->magic = ORDERED_MAGIC;
	msg->data_length = dlen;
	msg->token = req->token = ++next_token;
	msg->origin = *group_self();
	msg->rq = req->rq;
	if (dlen)
		memcpy(msg->data, req->data, dlen);
	list_add_tail(&req->node, &pending);
	ret = group_notify(msg, sizeof(*msg) + dlen);
	free(msg);
	if (ret) {
		sd_err("cannot broadcast %s: %s", req->op->name, strerror(-ret));
		list_del(&req->node);
		answer(req, SD_RES_SYSTEM_ERROR);
	}
}

static void apply_work(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	req->rp.result = req->op->process(req);
}

static void apply_done(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	if (!req->remote) {
		request_done(req);
		return;
	}
	if (req->rp.result != SD_RES_SUCCESS && req->rp.result != SD_RES_VDI_NOT_LOCKED)
		sd_debug("remote %s: %s", req->op->name, sd_strerror(req->rp.result));
	free(req->data);
	free(req);
}

static struct request *take_pending(uint64_t token)
{
	struct request *req;

	list_for_each_entry(req, &pending, node) {
		if (req->token == token) {
			list_del(&req->node);
			return req;
		}
	}
	return NULL;
}

/* a copy of another node's request, to apply here */
static struct request *remote_request(const struct ordered_msg *msg)
{
	struct request *req = calloc(1, sizeof(*req));

	if (!req)
		return NULL;
	req->rq = msg->rq;
	req->remote = true;
	if (msg->data_length) {
		req->data = malloc(msg->data_length);
		if (!req->data) {
			free(req);
			return NULL;
		}
		memcpy(req->data, msg->data, msg->data_length);
		req->data_cap = msg->data_length;
	}
	return req;
}

void ordered_deliver(const void *buf, size_t len, int nr_members)
{
	const struct ordered_msg *msg = buf;
	const struct sd_op_template *op;
	struct request *req = NULL;

	/* the payload is the request's own: its handler reads rq.data_length bytes */
	if (len < sizeof(*msg) || msg->magic != ORDERED_MAGIC ||
	    len != sizeof(*msg) + msg->data_length || msg->data_length > ORDERED_MAX_DATA ||
	    msg->data_length != ((msg->rq.flags & SD_FLAG_CMD_WRITE) ? msg->rq.data_length : 0)) {
		sd_err("malformed cluster message of %zu bytes dropped", len);
		return;
	}
	op = get_sd_op(msg->rq.opcode);
	if (!op || op->type != OP_ORDERED) {
		sd_err("cluster message with opcode 0x%02x dropped", msg->rq.opcode);
		return;
	}
	if (!memcmp(&msg->origin, group_self(), sizeof(msg->origin)))
		req = take_pending(msg->token);
	if (!req)
		req = remote_request(msg);
	if (!req) {
		/* this node's state now lags behind the others': nothing safe to do */
		sd_emerg("out of memory applying %s; leaving the cluster", op->name);
		sheep_request_shutdown();
		return;
	}
	req->op = op;
	req->nr_members = nr_members;
	req->work.fn = apply_work;
	req->work.done = apply_done;
	wq_queue(cluster_wq, &req->work);
}
