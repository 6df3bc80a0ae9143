/*
 * Running an op: the op table's queues and its answer hook. ops_execute
 * runs a request's op where its type says (the main thread, a work queue,
 * or the cluster's order through ordered.c) and answers it through the
 * hook the front end gave (request_reply.c's request_done), or through the op's
 * own finish when the op holds its reply (ops.h: reply_held).
 *
 * Main thread, but for do_work (on the op's worker).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "internal_proto.h"
#include "logger.h"
#include "util.h"
#include "join.h"
#include "ops.h"
#include "ops_exec.h"
#include "ordered.h"
#include "request.h"
#include "work.h"
#include "trace/trace_req.h"

const char *ops_queue_name(enum op_type type)
{
	switch (type) {
	case OP_IO:
		return "io";
	case OP_CLUSTER:
	case OP_ORDERED:
		return "cluster";
	case OP_PEER:
		return "peer";
	case OP_FETCH:
		return "fetch";
	case OP_TRACE:
		return "trace";
	default:
		return NULL;
	}
}

static struct work_queue *queues[OP_TRACE + 1];
static struct ops_answer answer;

int ops_exec_init(int nr_io_threads, const struct ops_answer *a)
{
	static const struct {
		enum op_type type;
		int nr_threads; /* 0: the io threads */
	} made[] = {
		{ OP_IO, 0 }, { OP_CLUSTER, 1 }, { OP_PEER, 0 }, { OP_FETCH, 2 }, { OP_TRACE, 1 }
	};

	answer = *a;
	for (size_t i = 0; i < ARRAY_SIZE(made); i++) {
		int n = made[i].nr_threads ? made[i].nr_threads : nr_io_threads;

		queues[made[i].type] = wq_create(ops_queue_name(made[i].type), n);
		if (!queues[made[i].type])
			return -ENOMEM;
	}
	/* ordered ops are applied on the cluster queue, in step with its state reads */
	queues[OP_ORDERED] = queues[OP_CLUSTER];
	return 0;
}

struct work_queue *ops_queue(enum op_type type)
{
	return type <= OP_TRACE ? queues[type] : NULL;
}

bool ops_reply_held(const struct request *req)
{
	return req->op && req->op->reply_held && req->op->reply_held(req);
}

/*
 * The tracer's view of a request's work (trace/trace_req.h): the thread
 * that runs it, on any node, says which request it serves meanwhile (its
 * id: request.c's, or a peer's from the header)
 */
static void trace_begin(const struct request *req)
{
	bool peer = sd_is_peer_op(req->rq.opcode);
	struct trace_req tr = {
		.id = req->trace_id,
		.oid = peer || req->op->type == OP_IO ? req->rq.obj.oid : 0,
		.queued = req->start,
		.flags = (uint16_t)(req->trace_flags | (peer ? 0 : TRACE_REQ_GATEWAY)),
		.opcode = req->rq.opcode,
	};

	trace_req_begin(&tr);
}

static int process_traced(struct request *req)
{
	int ret;

	trace_begin(req);
	ret = req->op->process(req);
	trace_req_end(ret);
	return ret;
}

/* the main thread serves it from memory, or hands it to a worker (not served here) */
static bool try_inline_traced(struct request *req)
{
	bool ok;

	trace_begin(req);
	ok = req->op->try_inline(req);
	trace_req_end(ok ? req->rp.result : TRACE_REQ_PASSED);
	return ok;
}

static void do_work(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	req->rp.result = process_traced(req);
	if (answer.early && !ops_reply_held(req))
		answer.early(req);
}

static void work_done(struct work *w)
{
	struct request *req = container_of(w, struct request, work);

	if (ops_reply_held(req))
		return req->op->finish(req);
	answer.done(req);
}

void ops_execute(struct request *req)
{
	const struct sd_op_template *op = req->op;

	if (op->type == OP_ORDERED)
		return ordered_submit(req);
	/* a joining node's cluster worker is busy with the join, which may wait long */
	if (op->type == OP_MAIN || (op->opcode == SD_OP_STAT_CLUSTER && join_in_progress())) {
		req->rp.result = process_traced(req);
		return answer.done(req);
	}
	if (op->try_inline && try_inline_traced(req))
		return answer.done(req);
	req->work.fn = do_work;
	req->work.done = work_done;
	if (op->urgent)
		wq_queue_urgent(queues[op->type], &req->work, req->start);
	else
		wq_queue_at(queues[op->type], &req->work, req->start);
}

static bool has_oid(uint8_t opcode)
{
	return opcode == SD_OP_READ_OBJ || opcode == SD_OP_WRITE_OBJ ||
	       opcode == SD_OP_CREATE_AND_WRITE_OBJ || opcode == SD_OP_REMOVE_OBJ ||
	       (opcode >= SD_OP_READ_PEER && opcode <= SD_OP_FLUSH_PEER) ||
	       opcode == SD_OP_FETCH_PEER || opcode == SD_OP_FETCH_PEER_NOW ||
	       opcode == SD_OP_STAT_HOLD;
}

void ops_report_hang(const struct request *req, const char *client, uint64_t age_ns)
{
	char oid[32] = "", worker[48] = "no worker (main thread or still queued)";
	int tid = __atomic_load_n(&req->work.tid, __ATOMIC_RELAXED);

	if (has_oid(req->rq.opcode))
		snprintf(oid, sizeof(oid), " oid %016" PRIx64, req->rq.obj.oid);
	if (tid)
		snprintf(worker, sizeof(worker), "worker tid %d", tid);
	sd_warn("hang: %s (0x%02x)%s in flight for %" PRIu64 " ms, id %" PRIu32 ", client %s, %s",
		req->op ? req->op->name : "request", req->rq.opcode, oid, age_ns / 1000000,
		req->rq.id, client, worker);
}
