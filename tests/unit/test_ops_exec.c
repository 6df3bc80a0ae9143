/*
 * Unit tests of sheep/ops_exec.c: where the op table runs a request's op
 * and how the request goes back to its client. An op of the main thread
 * runs at once; an ordered op goes to the cluster's order; every other op
 * to its own queue, where process runs on the worker, the front end's
 * early hook right after it and done on the main thread; an op that holds
 * its reply gets finish instead of done, and no early reply; an op that
 * answers inline skips its queue; STAT_CLUSTER runs on the main thread
 * while the node joins (its cluster worker runs the join).
 *
 * The work queues run a work at once on the caller's thread (fn, then
 * done), recording which queue took it; ordered.c and join.c are stubs.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "join.h"
#include "ops.h"
#include "ops_exec.h"
#include "ordered.h"
#include "request.h"
#include "work.h"

/* ---- stand-ins for what ops_exec.c calls ---- */

struct work_queue {
	const char *name;
	int nr_threads;
};

static struct work_queue made[8];
static int nr_made;
static const char *last_queue; /* the queue that ran the last work */

struct work_queue *wq_create(const char *name, int nr_threads)
{
	ck_assert_int_lt(nr_made, 8);
	made[nr_made] = (struct work_queue){ name, nr_threads };
	return &made[nr_made++];
}

static bool last_urgent; /* the last work went through wq_queue_urgent */

void wq_queue_at(struct work_queue *q, struct work *w, uint64_t now)
{
	(void)now;
	last_queue = q->name;
	last_urgent = false;
	w->fn(w);
	w->done(w);
}

void wq_queue_urgent(struct work_queue *q, struct work *w, uint64_t now)
{
	wq_queue_at(q, w, now);
	last_urgent = true;
}

static bool joining;

bool join_in_progress(void)
{
	return joining;
}

static int nr_submitted;

void ordered_submit(struct request *req)
{
	(void)req;
	nr_submitted++;
}

/* ---- a test op and the front end's hooks, recording what happened ---- */

static struct {
	int process, inline_tried, early, done, finish, held_asked;
	char order[16]; /* p(rocess) e(arly) d(one) f(inish) */
	int n;
} ev;

static void note(char c)
{
	if (ev.n < (int)sizeof(ev.order) - 1)
		ev.order[ev.n++] = c;
}

static int test_process(struct request *req)
{
	ev.process++;
	note('p');
	req->rp.data_length = 0;
	return SD_RES_SUCCESS;
}

static bool inline_answer;

static bool test_try_inline(struct request *req)
{
	ev.inline_tried++;
	if (inline_answer)
		req->rp.result = SD_RES_SUCCESS;
	return inline_answer;
}

static bool hold;

static bool test_reply_held(const struct request *req)
{
	(void)req;
	ev.held_asked++;
	return hold;
}

static void test_finish(struct request *req)
{
	(void)req;
	ev.finish++;
	note('f');
}

static void front_done(struct request *req)
{
	(void)req;
	ev.done++;
	note('d');
}

static void front_early(struct request *req)
{
	(void)req;
	ev.early++;
	note('e');
}

static struct request *new_req(struct sd_op_template *op, enum op_type type, uint8_t opcode)
{
	static struct request req;

	*op = (struct sd_op_template){ "TEST", opcode, type, false, test_process };
	memset(&req, 0, sizeof(req));
	req.op = op;
	req.rq.opcode = opcode;
	req.rp.result = SD_RES_INVALID_PARMS; /* process must set it */
	return &req;
}

static void setup(void)
{
	memset(&ev, 0, sizeof(ev));
	nr_made = 0;
	nr_submitted = 0;
	last_queue = NULL;
	joining = false;
	inline_answer = false;
	hold = false;
	ck_assert_int_eq(ops_exec_init(4, &(struct ops_answer){ front_done, front_early }), 0);
}

START_TEST(test_queues_made)
{
	/* io and peer take the io threads, the rest one or two of their own */
	ck_assert_int_eq(nr_made, 5);
	ck_assert_str_eq(ops_queue_name(OP_IO), "io");
	ck_assert_int_eq(ops_queue(OP_IO)->nr_threads, 4);
	ck_assert_int_eq(ops_queue(OP_PEER)->nr_threads, 4);
	ck_assert_int_eq(ops_queue(OP_CLUSTER)->nr_threads, 1);
	ck_assert_int_eq(ops_queue(OP_FETCH)->nr_threads, 2);
	ck_assert_int_eq(ops_queue(OP_TRACE)->nr_threads, 1);
	/* ordered ops apply on the cluster queue; main-thread ops have none */
	ck_assert_ptr_eq(ops_queue(OP_ORDERED), ops_queue(OP_CLUSTER));
	ck_assert_ptr_null(ops_queue(OP_MAIN));
	ck_assert_ptr_null(ops_queue_name(OP_MAIN));
}
END_TEST

START_TEST(test_main_runs_at_once)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_MAIN, SD_OP_GET_NODE_LIST);

	ops_execute(req);
	ck_assert_int_eq(req->rp.result, SD_RES_SUCCESS);
	ck_assert_str_eq(ev.order, "pd");
	ck_assert_ptr_null(last_queue);
}
END_TEST

START_TEST(test_each_type_its_queue)
{
	static const struct {
		enum op_type type;
		const char *queue;
	} cases[] = { { OP_IO, "io" },
		      { OP_CLUSTER, "cluster" },
		      { OP_PEER, "peer" },
		      { OP_FETCH, "fetch" },
		      { OP_TRACE, "trace" } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sd_op_template op;
		struct request *req = new_req(&op, cases[i].type, SD_OP_READ_OBJ);

		memset(&ev, 0, sizeof(ev));
		ops_execute(req);
		ck_assert_str_eq(last_queue, cases[i].queue);
		/* process on the worker, the early reply right after, done last */
		ck_assert_str_eq(ev.order, "ped");
		ck_assert_int_eq(req->rp.result, SD_RES_SUCCESS);
	}
	ck_assert_int_eq(nr_submitted, 0);
}
END_TEST

/* an urgent op (a write's fetch) goes ahead on its queue, the others at its end */
START_TEST(test_urgent_ahead)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_FETCH, SD_OP_FETCH_PEER_NOW);

	op.urgent = true;
	ops_execute(req);
	ck_assert_str_eq(last_queue, "fetch");
	ck_assert(last_urgent);
	ck_assert_str_eq(ev.order, "ped");
	req = new_req(&op, OP_FETCH, SD_OP_FETCH_PEER);
	ops_execute(req);
	ck_assert(!last_urgent);
}
END_TEST

START_TEST(test_ordered_goes_to_the_order)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_ORDERED, SD_OP_NEW_VDI);

	ops_execute(req);
	ck_assert_int_eq(nr_submitted, 1);
	ck_assert_int_eq(ev.process, 0);
	ck_assert_int_eq(ev.done, 0); /* ordered.c answers once applied */
	ck_assert_ptr_null(last_queue);
}
END_TEST

START_TEST(test_inline_skips_the_queue)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_IO, SD_OP_READ_OBJ);

	op.try_inline = test_try_inline;
	inline_answer = true;
	ops_execute(req);
	ck_assert_int_eq(ev.inline_tried, 1);
	ck_assert_int_eq(ev.process, 0);
	ck_assert_str_eq(ev.order, "d");
	ck_assert_ptr_null(last_queue);

	/* it cannot answer: the worker does, as always */
	memset(&ev, 0, sizeof(ev));
	inline_answer = false;
	ops_execute(req);
	ck_assert_int_eq(ev.inline_tried, 1);
	ck_assert_str_eq(ev.order, "ped");
	ck_assert_str_eq(last_queue, "io");
}
END_TEST

START_TEST(test_held_reply_finishes)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_IO, SD_OP_WRITE_OBJ);

	op.reply_held = test_reply_held;
	op.finish = test_finish;
	hold = true;
	ops_execute(req);
	/* no early reply, no done: the op's finish answers later */
	ck_assert_str_eq(ev.order, "pf");
	ck_assert(ops_reply_held(req));

	/* the same op whose reply is not held this time answers as usual */
	memset(&ev, 0, sizeof(ev));
	hold = false;
	ops_execute(req);
	ck_assert_str_eq(ev.order, "ped");
	ck_assert(!ops_reply_held(req));
}
END_TEST

START_TEST(test_stat_cluster_while_joining)
{
	struct sd_op_template op;
	struct request *req = new_req(&op, OP_CLUSTER, SD_OP_STAT_CLUSTER);

	joining = true;
	ops_execute(req);
	ck_assert_ptr_null(last_queue);
	ck_assert_str_eq(ev.order, "pd");

	/* another cluster op still queues behind the join */
	memset(&ev, 0, sizeof(ev));
	req = new_req(&op, OP_CLUSTER, SD_OP_GET_VDI_LOCKS);
	ops_execute(req);
	ck_assert_str_eq(last_queue, "cluster");

	/* and STAT_CLUSTER itself once the join is done */
	joining = false;
	req = new_req(&op, OP_CLUSTER, SD_OP_STAT_CLUSTER);
	last_queue = NULL;
	ops_execute(req);
	ck_assert_str_eq(last_queue, "cluster");
}
END_TEST

START_TEST(test_no_early_hook)
{
	struct sd_op_template op;
	struct request *req;

	nr_made = 0;
	ck_assert_int_eq(ops_exec_init(1, &(struct ops_answer){ .done = front_done }), 0);
	req = new_req(&op, OP_PEER, SD_OP_WRITE_PEER);
	ops_execute(req);
	ck_assert_str_eq(ev.order, "pd");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ops_exec");
	TCase *tc = tcase_create("execute");
	SRunner *sr;
	int nr_failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_queues_made);
	tcase_add_test(tc, test_main_runs_at_once);
	tcase_add_test(tc, test_each_type_its_queue);
	tcase_add_test(tc, test_urgent_ahead);
	tcase_add_test(tc, test_ordered_goes_to_the_order);
	tcase_add_test(tc, test_inline_skips_the_queue);
	tcase_add_test(tc, test_held_reply_finishes);
	tcase_add_test(tc, test_stat_cluster_while_joining);
	tcase_add_test(tc, test_no_early_hook);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
