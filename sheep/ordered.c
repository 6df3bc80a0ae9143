/*
 * Ordered cluster operations: format, VDI creation and deletion, snapshot,
 * lock and release, and the namespace lookups (GET_VDI_INFO, READ_VDIS).
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
 *
 * Notifications take the same path: a client's write to an inode header
 * is done by the gateway like any write, then NOTIFY_VDI_HEADER is
 * broadcast and the client answered once its copy is applied here, so
 * every node's VDI table takes the change in the same place of the order.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "group.h"
#include "ops.h"
#include "ordered.h"
#include "request.h"
#include "daemon.h"
#include "stat.h"
#include "work.h"

#define ORDERED_MAGIC UINT32_C(0x4f524452) /* "ORDR" */
/* the largest payload of an ordered op: a name and a tag */
#define ORDERED_MAX_DATA (SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN)

struct ordered_msg {
	uint32_t magic;
	uint32_t data_length;
	uint64_t token;
	struct sd_node_id origin;
	struct sd_lock_owner owner; /* the client it came from (origin's) */
	struct sd_req rq;
	uint8_t data[];
};

/* requests of this node waiting for their own delivery (main thread only) */
static LIST_HEAD(pending);
static uint64_t next_token;
/* how an applied request goes back to its client, the op table and the queue: main's */
static void (*done_fn)(struct request *req);
static const struct sd_op_template *(*op_of)(uint8_t opcode);
static struct work_queue *apply_wq;
/* what a member's leave releases (vdi_lock.c's locks of its clients) */
static void (*node_left_fn)(const struct sd_lock_owner *owner);

void ordered_init(struct work_queue *q, const struct sd_op_template *(*lookup)(uint8_t opcode),
		  void (*done)(struct request *req))
{
	apply_wq = q;
	op_of = lookup;
	done_fn = done;
}

void ordered_set_node_left(void (*fn)(const struct sd_lock_owner *owner))
{
	node_left_fn = fn;
}

static void answer(struct request *req, int result)
{
	req->rp.result = result;
	done_fn(req);
}

/* broadcast rq (and dlen bytes of data) for req, which waits for its delivery */
static void submit(struct request *req, const struct sd_req *rq, const void *data, uint32_t dlen)
{
	struct ordered_msg *msg;
	int ret;

	msg = calloc(1, sizeof(*msg) + dlen);
	if (!msg)
		return answer(req, SD_RES_NO_MEM);
	msg->magic = ORDERED_MAGIC;
	msg->data_length = dlen;
	msg->token = req->ord.token = ++next_token;
	msg->origin = *group_self();
	req->ord.owner.node = msg->origin;
	msg->owner = req->ord.owner;
	msg->rq = *rq;
	if (dlen)
		memcpy(msg->data, data, dlen);
	list_add_tail(&req->node, &pending);
	ret = group_notify(msg, sizeof(*msg) + dlen);
	free(msg);
	if (ret) {
		sd_err("cannot broadcast %s: %s", op_of(rq->opcode)->name, strerror(-ret));
		list_del(&req->node);
		answer(req, SD_RES_SYSTEM_ERROR);
	}
}

void ordered_submit(struct request *req)
{
	uint32_t dlen = (req->rq.flags & SD_FLAG_CMD_WRITE) ? req->rq.data_length : 0;

	if (dlen > ORDERED_MAX_DATA)
		return answer(req, SD_RES_INVALID_PARMS);
	/* the daemons send it themselves (ordered_notify_header), never a client */
	if (req->rq.opcode == SD_OP_NOTIFY_VDI_HEADER)
		return answer(req, SD_RES_INVALID_PARMS);
	/* the originator's clock decides, so that every node stores the same */
	if (req->rq.opcode == SD_OP_MAKE_FS && req->rq.cluster.ctime == 0)
		req->rq.cluster.ctime = (uint64_t)time(NULL);
	submit(req, &req->rq, req->data, dlen);
}

/*
 * Why an ordered broadcast and not a peer notification: the header change
 * then takes its place in the one order of namespace changes, so that a
 * NEW_VDI or DEL_VDI that a client sends after this write's reply, through
 * any node, is applied after it everywhere (the reply waits for the
 * delivery here, and the total order is the same on every node); a peer
 * notification would race with them, and a node that joins meanwhile
 * would miss it. The message carries no header: each node rereads it when
 * the notification is applied, so concurrent header writes converge to
 * what the replicas hold.
 */
void ordered_notify_header(struct request *req, uint32_t vid)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = SD_OP_NOTIFY_VDI_HEADER };

	rq.vdi.base_vdi_id = vid;
	submit(req, &rq, NULL, 0);
}

/*
 * Not before the format, which every node applies at the same place of the
 * order: the answer is the same everywhere, however late this node applied
 * the format (request.c leaves ordered ops to this check)
 */
static void apply_work(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	if (!req->op->force && !group_is_formatted())
		req->rp.result = SD_RES_WAIT_FOR_FORMAT;
	else
		req->rp.result = req->op->process(req);
}

static void apply_done(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	free(req->ord.members);
	req->ord.members = NULL;
	if (req->ord.after)
		req->ord.after(req);

	if (!req->ord.remote) {
		done_fn(req);
		return;
	}
	/* the client request that waited for this one keeps its own result */
	if (req->ord.waiter)
		done_fn(req->ord.waiter);
	if (req->rp.result != SD_RES_SUCCESS && req->rp.result != SD_RES_VDI_NOT_LOCKED)
		sd_debug("remote %s: %s", req->op->name, sd_strerror(req->rp.result));
	free(req->data);
	free(req);
}

static struct request *take_pending(uint64_t token)
{
	struct request *req;

	list_for_each_entry(req, &pending, node) {
		if (req->ord.token == token) {
			list_del(&req->node);
			return req;
		}
	}
	return NULL;
}

/*
 * A copy of another node's request, to apply here. A handler may use
 * req->data up to rq.data_length bytes, as for a client's request; the
 * copy holds only the payload the message carried (none for a lookup,
 * whose data_length sized the sender's reply buffer), so its data_length
 * says that, and its buffer is never NULL, even for 0 bytes.
 */
static struct request *remote_request(const struct ordered_msg *msg)
{
	struct request *req = calloc(1, sizeof(*req));

	if (!req)
		return NULL;
	req->rq = msg->rq;
	req->rq.data_length = msg->data_length;
	req->ord.remote = true;
	req->ord.owner = msg->owner;
	req->data = malloc(msg->data_length ? msg->data_length : 1);
	if (!req->data) {
		free(req);
		return NULL;
	}
	memcpy(req->data, msg->data, msg->data_length);
	req->data_cap = msg->data_length;
	return req;
}

/*
 * A member left: the locks its clients held go, at the leave's place of the
 * order (every node releases them before the ops delivered after it). Not
 * a message of the driver's: ordered_node_left hands it to the delivery
 * path as one, so that it keeps its place (the test hook's lag included).
 */
#define NODE_LEFT_MAGIC UINT32_C(0x4e4c4654) /* "NLFT" */
struct node_left_msg {
	uint32_t magic;
	uint32_t pad;
	struct sd_node_id nid;
};
struct node_left_work {
	struct work work;
	struct sd_lock_owner owner;
};

static void node_left_apply(struct work *w)
{
	struct node_left_work *nl = container_of(w, struct node_left_work, work);

	if (node_left_fn)
		node_left_fn(&nl->owner);
}

static void node_left_done(struct work *w)
{
	free(container_of(w, struct node_left_work, work));
}

static void apply_node_left(const struct node_left_msg *m)
{
	struct node_left_work *nl = calloc(1, sizeof(*nl));

	if (!nl) {
		sd_emerg("out of memory applying a node's leave; leaving the cluster");
		daemon_stop(1);
		return;
	}
	nl->owner.node = m->nid;
	nl->work.fn = node_left_apply;
	nl->work.done = node_left_done;
	wq_queue(apply_wq, &nl->work);
}

/*
 * gcc 12's analyser loses req once wq_queue (another file) links it into
 * the apply queue, and reports the members snapshot_members hung on it as
 * leaked; apply_done frees them. Silenced in these two functions only
 * (script/analyze).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
/*
 * UNLOCK_VDI: the members at the op's place in the order, kept in
 * req->ord.members (apply_done frees them); none when out of memory (the
 * op refuses)
 */
static void snapshot_members(struct request *req)
{
	struct cluster_state *cs = malloc(sizeof(*cs));
	struct sd_node *m;

	if (!cs)
		return;
	group_get_state(cs);
	m = malloc(sizeof(*m) * (size_t)(cs->nr_nodes > 0 ? cs->nr_nodes : 1));
	if (m) {
		memcpy(m, cs->nodes, (size_t)cs->nr_nodes * sizeof(*m));
		req->ord.nr_members = cs->nr_nodes;
	}
	req->ord.members = m;
	free(cs);
}

static void apply_delivered(const void *buf, size_t len, int nr_members)
{
	const struct ordered_msg *msg = buf;
	const struct sd_op_template *op;
	struct request *req = NULL, *waiter = NULL;

	if (len == sizeof(struct node_left_msg) && msg->magic == NODE_LEFT_MAGIC)
		return apply_node_left(buf);

	/* the payload is the request's own: its handler reads rq.data_length bytes */
	if (len < sizeof(*msg) || msg->magic != ORDERED_MAGIC ||
	    len != sizeof(*msg) + msg->data_length || msg->data_length > ORDERED_MAX_DATA ||
	    msg->data_length != ((msg->rq.flags & SD_FLAG_CMD_WRITE) ? msg->rq.data_length : 0)) {
		sd_err("malformed cluster message of %zu bytes dropped", len);
		return;
	}
	op = op_of(msg->rq.opcode);
	if (!op || op->type != OP_ORDERED) {
		sd_err("cluster message with opcode 0x%02x dropped", msg->rq.opcode);
		return;
	}
	/* every node stops: the others' exits, which may come first, are no epoch */
	if (msg->rq.opcode == SD_OP_SHUTDOWN)
		group_cluster_stopping();
	if (!memcmp(&msg->origin, group_self(), sizeof(msg->origin)))
		req = take_pending(msg->token);
	/* a notification on behalf of a client request: apply a copy, then answer it */
	if (req && req->rq.opcode != msg->rq.opcode) {
		waiter = req;
		req = remote_request(msg);
		if (req)
			req->ord.waiter = waiter;
	} else if (!req) {
		req = remote_request(msg);
	}
	if (!req) {
		/* this node's state now lags behind the others': nothing safe to do */
		sd_emerg("out of memory applying %s; leaving the cluster", op->name);
		if (waiter)
			answer(waiter, SD_RES_NO_MEM);
		daemon_stop(1);
		return;
	}
	req->op = op;
	req->ord.nr_members = nr_members;
	req->ord.nr_storing = max_t(int, nr_members - group_nr_gateways(), 0);
	/* an operator's unlock is refused while the holder's gateway is a member: of this place */
	if (op->opcode == SD_OP_UNLOCK_VDI)
		snapshot_members(req);
	req->work.fn = apply_work;
	req->work.done = apply_done;
	wq_queue(apply_wq, &req->work);
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic pop
#endif

#ifdef SD_TEST_HOOKS
/*
 * Test builds only (--enable-test-hooks): SHEEP_TEST_DELIVERY_LAG_MS=N
 * makes this node take every delivered message N ms after the driver
 * handed it over, in order, as a node far from the others on the network
 * would. A test can then ask this node about a change that the others
 * have applied and it has not yet.
 */
struct lagged_msg {
	struct work work;
	uint64_t due_ns;
	size_t len;
	int nr_members;
	uint8_t msg[] __attribute__((aligned(8))); /* read as a struct ordered_msg */
};

static struct work_queue *lag_wq;

static void lag_wait(struct work *w)
{
	struct lagged_msg *l = container_of(w, struct lagged_msg, work);
	uint64_t now = sd_now_ns();

	if (l->due_ns > now) {
		struct timespec ts = { (time_t)((l->due_ns - now) / 1000000000),
				       (long)((l->due_ns - now) % 1000000000) };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
}

static void lag_done(struct work *w)
{
	struct lagged_msg *l = container_of(w, struct lagged_msg, work);

	apply_delivered(l->msg, l->len, l->nr_members);
	free(l);
}

/* true when the message was set aside to be applied later */
static bool lag_delivery(const void *buf, size_t len, int nr_members)
{
	static long lag_ms = -1;
	struct lagged_msg *l;

	if (lag_ms < 0) {
		const char *v = getenv("SHEEP_TEST_DELIVERY_LAG_MS");

		lag_ms = v ? atol(v) : 0;
		/* one worker: the messages keep their order */
		if (lag_ms > 0 && !(lag_wq = wq_create("lag", 1)))
			lag_ms = 0;
		if (lag_ms > 0)
			sd_warn("test hook: every delivery taken %ld ms late", lag_ms);
	}
	if (lag_ms <= 0)
		return false;
	l = malloc(sizeof(*l) + len);
	if (!l)
		return false;
	l->due_ns = sd_now_ns() + (uint64_t)lag_ms * 1000000;
	l->len = len;
	l->nr_members = nr_members;
	memcpy(l->msg, buf, len);
	l->work.fn = lag_wait;
	l->work.done = lag_done;
	wq_queue(lag_wq, &l->work);
	return true;
}
#endif

void ordered_node_left(const struct sd_node_id *nid)
{
	struct node_left_msg m = { .magic = NODE_LEFT_MAGIC, .nid = *nid };

	ordered_deliver(&m, sizeof(m), 0);
}

void ordered_deliver(const void *buf, size_t len, int nr_members)
{
#ifdef SD_TEST_HOOKS
	if (lag_delivery(buf, len, nr_members))
		return;
#endif
	apply_delivered(buf, len, nr_members);
}
