/*
 * Unit tests of sheep/ordered.c: what an op handler gets when a cluster
 * message is applied. Every handler may read or fill req->data up to
 * rq.data_length bytes, as for a client's request: a copy that another
 * node broadcast holds only the payload the message carried, so its
 * buffer is never NULL and its data_length says how much is there (a
 * message with no payload used to give the handler NULL, with the
 * data_length of the sender's reply buffer).
 *
 * The cluster driver, the ops table and the cluster worker are stand-ins
 * here: a broadcast is kept and delivered by the test, the worker runs the
 * handler at once, and every opcode is one test op that records what its
 * handler saw.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "internal_proto.h"
#include "group.h"
#include "ops.h"
#include "ordered.h"
#include "request.h"
#include "daemon.h"
#include "work.h"

/* ---- stand-ins for what ordered.c calls ---- */

static struct sd_node_id self = { .port = 7000 };
static uint8_t sent[4096];
static size_t sent_len;

const struct sd_node_id *group_self(void)
{
	return &self;
}

int group_notify(const void *msg, size_t len)
{
	ck_assert_uint_le(len, sizeof(sent));
	memcpy(sent, msg, len);
	sent_len = len;
	return 0;
}

void group_cluster_stopping(void)
{
}

/* UNLOCK_VDI takes the members at its place of the order: none here */
void group_get_state(struct cluster_state *out)
{
	memset(out, 0, sizeof(*out));
}

/* every member stores */
int group_nr_gateways(void)
{
	return 0;
}

static bool formatted;

bool group_is_formatted(void)
{
	return formatted;
}

void daemon_stop(int status)
{
	ck_abort_msg("shutdown requested");
}

void wq_queue(struct work_queue *q, struct work *w)
{
	w->fn(w);
	w->done(w);
}

struct work_queue *wq_create(const char *name, int nr_threads)
{
	return NULL;
}

/* what the handler saw */
static struct {
	int calls;
	bool remote;
	bool data_null;
	uint32_t data_length;
	uint8_t bytes[16];
} seen;

static int record(struct request *req)
{
	seen.calls++;
	seen.remote = req->ord.remote;
	seen.data_null = req->data == NULL;
	seen.data_length = req->rq.data_length;
	/* a handler may use every byte that data_length promises */
	if (req->data && req->rq.data_length)
		memcpy(seen.bytes, req->data, min_t(uint32_t, req->rq.data_length, 16));
	if (req->data)
		memset(req->data, 0, req->rq.data_length);
	return SD_RES_SUCCESS;
}

static const struct sd_op_template test_op = { "TEST", SD_OP_READ_VDIS, OP_ORDERED, false,
					       record };
/* as the format: allowed before it */
static const struct sd_op_template test_force_op = { "TEST_FORCE", SD_OP_MAKE_FS, OP_ORDERED, true,
						     record };

static const struct sd_op_template *test_lookup(uint8_t opcode)
{
	if (opcode == SD_OP_MAKE_FS)
		return &test_force_op;
	return opcode == SD_OP_READ_VDIS || opcode == SD_OP_NEW_VDI ? &test_op : NULL;
}

static int nr_done;

static void done(struct request *req)
{
	nr_done++;
}

/* ---- the messages, made by a local submit, delivered as another node's ---- */

/* the message a client request (rq, payload) becomes, as sent by another node */
static void make_remote_msg(const struct sd_req *rq, void *payload)
{
	/* stays on ordered.c's pending list: static, so that it is no leak */
	static struct request sender_req;
	struct request *req = &sender_req;

	memset(req, 0, sizeof(*req));
	req->rq = *rq;
	req->data = payload;
	sent_len = 0;
	ordered_submit(req);
	ck_assert_uint_gt(sent_len, 0);
	/* from another node: not this node's pending request */
	self.port++;
}

static void setup(void)
{
	memset(&seen, 0, sizeof(seen));
	nr_done = 0;
	formatted = true;
	ordered_init(NULL, test_lookup, done);
}

START_TEST(test_remote_no_payload)
{
	/* a lookup: no payload travels, the sender's reply buffer is 4 KiB */
	struct sd_req rq = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_READ_VDIS,
			     .data_length = 4096 };
	static uint8_t reply[4096];

	make_remote_msg(&rq, reply);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert(seen.remote);
	ck_assert(!seen.data_null);
	ck_assert_uint_eq(seen.data_length, 0);
}
END_TEST

START_TEST(test_remote_empty_write)
{
	/* a write flag with 0 bytes: an empty payload, not NULL */
	struct sd_req rq = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_NEW_VDI,
			     .flags = SD_FLAG_CMD_WRITE };
	static uint8_t none[1];

	make_remote_msg(&rq, none);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert(!seen.data_null);
	ck_assert_uint_eq(seen.data_length, 0);
}
END_TEST

START_TEST(test_remote_payload)
{
	struct sd_req rq = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_NEW_VDI,
			     .flags = SD_FLAG_CMD_WRITE, .data_length = 5 };
	static uint8_t name[5] = "abcd";

	make_remote_msg(&rq, name);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert(!seen.data_null);
	ck_assert_uint_eq(seen.data_length, 5);
	ck_assert_str_eq((char *)seen.bytes, "abcd");
}
END_TEST

START_TEST(test_local_keeps_its_buffer)
{
	/* this node's own request: applied to the request itself, reply buffer and all */
	struct sd_req rq = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_READ_VDIS,
			     .data_length = 4096 };
	static uint8_t reply[4096];
	struct request req = { .rq = rq, .data = reply };

	sent_len = 0;
	ordered_submit(&req);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert(!seen.remote);
	ck_assert_uint_eq(seen.data_length, 4096);
	ck_assert_int_eq(nr_done, 1);
}
END_TEST

/*
 * Before the format, where it is applied (every node at the same place of
 * the order, however late it applies the format): not run, the cluster is
 * not formatted; an op allowed before the format runs
 */
START_TEST(test_unformatted_where_applied)
{
	struct sd_req rq = { .proto_ver = SD_PROTO_VER,
			     .opcode = SD_OP_READ_VDIS,
			     .data_length = 4096 };
	struct sd_req fs = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_MAKE_FS };
	static uint8_t reply[4096];
	struct request req = { .rq = rq, .data = reply }, mk = { .rq = fs };

	formatted = false;
	ordered_submit(&req);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 0);
	ck_assert_int_eq(nr_done, 1);
	ck_assert_int_eq(req.rp.result, SD_RES_WAIT_FOR_FORMAT);
	/* a remote copy: the same answer, the handler not run */
	make_remote_msg(&rq, reply);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 0);
	ordered_submit(&mk);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 1);
	ck_assert_int_eq(mk.rp.result, SD_RES_SUCCESS);
	/* formatted: run */
	formatted = true;
	req.rp.result = 0xff;
	ordered_submit(&req);
	ordered_deliver(sent, sent_len, 2);
	ck_assert_int_eq(seen.calls, 2);
	ck_assert_int_eq(req.rp.result, SD_RES_SUCCESS);
}
END_TEST

static Suite *ordered_suite(void)
{
	Suite *s = suite_create("ordered");
	TCase *tc = tcase_create("ordered");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_remote_no_payload);
	tcase_add_test(tc, test_remote_empty_write);
	tcase_add_test(tc, test_remote_payload);
	tcase_add_test(tc, test_local_keeps_its_buffer);
	tcase_add_test(tc, test_unformatted_where_applied);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ordered_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
