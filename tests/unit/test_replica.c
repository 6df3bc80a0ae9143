/*
 * Unit tests of sheep/replica.c, this node's copy of an object, on a plain
 * store in a temporary directory: a create makes the object from its
 * payload; a create of an object that exists applies only its client's
 * range; a copy-on-write payload's client range is checked against the
 * payload; creates of one object from many threads at once all land (the
 * per-object lock), whichever comes first.
 *
 * The fetch of a missing object, through the real peer_io.c, from a fake
 * peer on loopback (a thread that answers FETCH_PEER from its own copy): a
 * write to an object missing here fetches it once and lands on top of it;
 * with no copy anywhere, or of a deleted VDI, it fails and creates
 * nothing; a write and a create racing on a missing object both land.
 * The layers above replica (the ring, the VDI table, the deleted records)
 * are stubbed below.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "logger.h"
#include "internal_proto.h"
#include "net.h"
#include "deleted.h"
#include "group.h"
#include "replica.h"
#include "stat.h"
#include "vdi_table.h"
#include "store/store.h"

/* ---- the layers above, stubbed: a ring of this node and one peer ---- */

#define FETCH_SHIFT 20 /* objects of the VDIs below: 1 MiB */
#define FETCH_SIZE (1U << FETCH_SHIFT)
#define DELETED_VID 0x00dead

static struct epoch_ring test_er = { .refcnt = 1, .epoch = 1 };

bool group_io_endpoint(const struct sd_node_id *nid, struct sd_node_id *to)
{
	(void)nid;
	(void)to;
	return false; /* no io addresses here */
}

struct epoch_ring *group_ring_get(void)
{
	return &test_er;
}

void group_ring_put(struct epoch_ring *er)
{
	(void)er;
}

void group_get_state(struct cluster_state *out)
{
	memset(out, 0, sizeof(*out));
	out->block_size_shift = FETCH_SHIFT;
}

uint8_t group_copies(void)
{
	return 2;
}

int vdi_copies(uint32_t vid)
{
	(void)vid;
	return 2;
}

uint8_t vdi_copy_policy(uint32_t vid)
{
	(void)vid;
	return 0; /* replicated */
}

int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot)
{
	(void)vid;
	*shift = FETCH_SHIFT;
	*is_snapshot = false;
	return SD_RES_SUCCESS;
}

bool deleted_has(uint64_t oid)
{
	return oid_to_vid(oid) == DELETED_VID;
}

/* ---- the fake peer: FETCH_PEER answered from peer_obj, when peer_has ---- */

static char peer_obj[FETCH_SIZE];
static bool peer_has;
static int nr_fetches; /* atomic */
/* by kind: FETCH_PEER (recovery's) and FETCH_PEER_NOW (a write's); atomic */
static int nr_plain, nr_now;
/* answer FETCH_PEER_NOW as a sheep that does not know it: INVALID_PARMS */
static bool peer_old;
static int listen_fd = -1;
static pthread_t peer_thread;

static void *peer_conn(void *arg)
{
	int fd = (int)(long)arg;
	struct sd_req rq;

	while (!sd_read_full(fd, &rq, sizeof(rq))) {
		struct sd_rsp rsp = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = rq.opcode };
		bool old = rq.opcode == SD_OP_FETCH_PEER_NOW &&
			   __atomic_load_n(&peer_old, __ATOMIC_ACQUIRE);
		bool ok = (rq.opcode == SD_OP_FETCH_PEER || rq.opcode == SD_OP_FETCH_PEER_NOW) &&
			  !old && __atomic_load_n(&peer_has, __ATOMIC_ACQUIRE) &&
			  rq.data_length == FETCH_SIZE;

		__atomic_fetch_add(&nr_fetches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(rq.opcode == SD_OP_FETCH_PEER_NOW ? &nr_now : &nr_plain, 1,
				   __ATOMIC_RELAXED);
		rsp.result = ok ? SD_RES_SUCCESS : old ? SD_RES_INVALID_PARMS : SD_RES_NO_OBJ;
		rsp.data_length = ok ? FETCH_SIZE : 0;
		if (sd_write_full(fd, &rsp, sizeof(rsp)) ||
		    (ok && sd_write_full(fd, peer_obj, FETCH_SIZE)))
			break;
	}
	close(fd);
	return NULL;
}

static void *peer_main(void *arg)
{
	int fd;

	(void)arg;
	while ((fd = accept(listen_fd, NULL, NULL)) >= 0) {
		pthread_t t;

		if (pthread_create(&t, NULL, peer_conn, (void *)(long)fd))
			close(fd);
		else
			pthread_detach(t);
	}
	return NULL;
}

static void node_at(struct sd_node *n, uint8_t last, uint16_t port)
{
	memset(n, 0, sizeof(*n));
	n->nid.addr[10] = 0xff;
	n->nid.addr[11] = 0xff;
	n->nid.addr[12] = 127;
	n->nid.addr[15] = last;
	n->nid.port = port;
}

/* per test (in its process): the fake peer listening, the ring of this node (127.0.0.2) and it */
static void start_peer(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct sd_node nodes[2];
	int on = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(listen_fd, 0);
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	ck_assert_int_eq(bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(listen_fd, 16), 0);
	ck_assert_int_eq(getsockname(listen_fd, (struct sockaddr *)&sa, &len), 0);
	node_at(&nodes[0], 2, 7000); /* this node: never connected to */
	node_at(&nodes[1], 1, ntohs(sa.sin_port));
	ck_assert_int_eq(ring_build(&test_er.ring, nodes, 2), 0);
	test_er.local_idx = ring_find_node(&test_er.ring, &nodes[0].nid);
	ck_assert_int_ge(test_er.local_idx, 0);
	ck_assert_int_eq(pthread_create(&peer_thread, NULL, peer_main, NULL), 0);
}

#define OBJ_SIZE 65536
static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_replica.XXXXXX");
	ck_assert_ptr_ne(mkdtemp(dir), NULL);
	ck_assert_int_eq(store_init("plain", dir), 0);
	start_peer();
}

static void teardown(void)
{
	char cmd[128];

	shutdown(listen_fd, SHUT_RDWR);
	close(listen_fd);
	pthread_join(peer_thread, NULL);
	ring_free(&test_er.ring);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
}

START_TEST(test_create_makes_object)
{
	uint64_t oid = UINT64_C(0x0012340000000001);
	char buf[16] = "hello", back[32];

	ck_assert(!sd_store->exist(oid));
	ck_assert_int_eq(replica_create_and_write(oid, buf, 5, 100, 100, 5, true),
			 SD_RES_SUCCESS);
	ck_assert(sd_store->exist(oid));
	memset(back, 1, sizeof(back));
	ck_assert_int_eq(sd_store->read(oid, back, 8, 98), SD_RES_SUCCESS);
	ck_assert(back[0] == 0 && back[1] == 0 && !memcmp(back + 2, "hello", 5) && back[7] == 0);
}
END_TEST

START_TEST(test_second_create_writes_only_its_range)
{
	uint64_t oid = UINT64_C(0x0012340000000002);
	char a[64], b[64], back[64];

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	/* a COW-like payload: 64 bytes at 0, the client's range 16..24 */
	ck_assert_int_eq(replica_create_and_write(oid, a, 64, 0, 0, 64, true), SD_RES_SUCCESS);
	ck_assert_int_eq(replica_create_and_write(oid, b, 64, 0, 16, 8, true), SD_RES_SUCCESS);
	ck_assert_int_eq(sd_store->read(oid, back, 64, 0), SD_RES_SUCCESS);
	for (int i = 0; i < 64; i++)
		ck_assert_msg(back[i] == (i >= 16 && i < 24 ? 'b' : 'a'), "byte %d is %c", i,
			      back[i]);
}
END_TEST

START_TEST(test_range_outside_payload)
{
	uint64_t oid = UINT64_C(0x0012340000000003);
	char buf[64] = { 0 };

	ck_assert_int_eq(replica_create_and_write(oid, buf, 64, 128, 64, 8, true),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(replica_create_and_write(oid, buf, 64, 128, 180, 16, true),
			 SD_RES_INVALID_PARMS);
	ck_assert(!sd_store->exist(oid));
}
END_TEST

START_TEST(test_lock_per_object)
{
	uint64_t oid = UINT64_C(0x0012340000000004);

	ck_assert_ptr_eq(replica_oid_lock(oid), replica_oid_lock(oid));
	ck_assert_ptr_ne(replica_oid_lock(oid), NULL);
}
END_TEST

#define NR_RACERS 8
static const uint64_t race_oid = UINT64_C(0x0012340000000005);
static pthread_barrier_t barrier;

/* racer i creates the object with its 4 KiB range filled with 'A' + i */
static void *racer(void *arg)
{
	long i = (long)arg;
	char *buf = calloc(1, OBJ_SIZE);
	int ret;

	memset(buf + i * 4096, 'A' + (int)i, 4096);
	pthread_barrier_wait(&barrier);
	/* the whole object as payload (as a COW create sends it), the range as client's */
	ret = replica_create_and_write(race_oid, buf, OBJ_SIZE, 0, (uint64_t)i * 4096, 4096,
				       false);
	free(buf);
	return (void *)(long)ret;
}

START_TEST(test_racing_creates_all_land)
{
	pthread_t t[NR_RACERS];
	char *back = malloc(OBJ_SIZE);

	for (int round = 0; round < 20; round++) {
		sd_store->remove(race_oid);
		pthread_barrier_init(&barrier, NULL, NR_RACERS);
		for (long i = 0; i < NR_RACERS; i++)
			ck_assert_int_eq(pthread_create(&t[i], NULL, racer, (void *)i), 0);
		for (int i = 0; i < NR_RACERS; i++) {
			void *ret;

			pthread_join(t[i], &ret);
			ck_assert_int_eq((int)(long)ret, SD_RES_SUCCESS);
		}
		pthread_barrier_destroy(&barrier);
		memset(back, 0x55, OBJ_SIZE);
		ck_assert_int_eq(sd_store->read(race_oid, back, OBJ_SIZE, 0), SD_RES_SUCCESS);
		for (int i = 0; i < NR_RACERS; i++)
			for (int j = 0; j < 4096; j++)
				ck_assert_msg(back[i * 4096 + j] == 'A' + i,
					      "round %d: range %d lost (byte %d is 0x%02x)", round,
					      i, j, (unsigned char)back[i * 4096 + j]);
		for (int j = NR_RACERS * 4096; j < OBJ_SIZE; j++)
			ck_assert_msg(back[j] == 0, "round %d: byte %d is not zero", round, j);
	}
	free(back);
}
END_TEST

/* a data object of a VDI with FETCH_SIZE objects */
#define FETCH_OID(n) vid_to_data_oid(0x00abcd, (n))

/* the first byte where two objects (FETCH_SIZE) differ, or -1 */
static long first_diff(const char *a, const char *b)
{
	for (uint32_t i = 0; i < FETCH_SIZE; i++)
		if (a[i] != b[i])
			return i;
	return -1;
}

static void peer_holds(char c)
{
	memset(peer_obj, c, sizeof(peer_obj));
	__atomic_store_n(&peer_has, true, __ATOMIC_RELEASE);
	__atomic_store_n(&nr_fetches, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&nr_plain, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&nr_now, 0, __ATOMIC_RELEASE);
}

/*
 * A write's fetch is FETCH_PEER_NOW (the holder puts it ahead of
 * recovery's), recovery's is FETCH_PEER; a holder that does not know the
 * first is asked again with the second.
 */
START_TEST(test_fetch_kinds)
{
	char *back = malloc(FETCH_SIZE), *want = malloc(FETCH_SIZE);

	peer_holds('W');
	ck_assert_int_eq(replica_write(FETCH_OID(10), "hello", 5, 0, true), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_now, __ATOMIC_ACQUIRE), 1);
	ck_assert_int_eq(__atomic_load_n(&nr_plain, __ATOMIC_ACQUIRE), 0);

	peer_holds('R');
	ck_assert_int_eq(replica_fetch(&test_er, FETCH_OID(11), ~UINT64_C(0), 0, false),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_now, __ATOMIC_ACQUIRE), 0);
	ck_assert_int_eq(__atomic_load_n(&nr_plain, __ATOMIC_ACQUIRE), 1);

	/* an older holder: INVALID_PARMS to the new op, then the old one, and the write lands */
	peer_holds('O');
	__atomic_store_n(&peer_old, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(replica_write(FETCH_OID(12), "hello", 5, 100, true), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_now, __ATOMIC_ACQUIRE), 1);
	ck_assert_int_eq(__atomic_load_n(&nr_plain, __ATOMIC_ACQUIRE), 1);
	ck_assert_int_eq(sd_store->read(FETCH_OID(12), back, FETCH_SIZE, 0), SD_RES_SUCCESS);
	memset(want, 'O', FETCH_SIZE);
	memcpy(want + 100, "hello", 5);
	ck_assert_int_eq(first_diff(back, want), -1);
	__atomic_store_n(&peer_old, false, __ATOMIC_RELEASE);
	free(want);
	free(back);
}
END_TEST

START_TEST(test_write_missing_fetches_it)
{
	uint64_t oid = FETCH_OID(1);
	char *back = malloc(FETCH_SIZE), *want = malloc(FETCH_SIZE);

	peer_holds('P');
	ck_assert(!sd_store->exist(oid));
	ck_assert_int_eq(replica_write(oid, "hello", 5, 1000, true), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_fetches, __ATOMIC_ACQUIRE), 1);
	ck_assert_int_eq(sd_store->read(oid, back, FETCH_SIZE, 0), SD_RES_SUCCESS);
	memset(want, 'P', FETCH_SIZE);
	memcpy(want + 1000, "hello", 5);
	ck_assert_int_eq(first_diff(back, want), -1);
	/* here now: the next write fetches nothing */
	ck_assert_int_eq(replica_write(oid, "x", 1, 0, true), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_fetches, __ATOMIC_ACQUIRE), 1);
	free(want);
	free(back);
}
END_TEST

/* the plain store, the writes it made counted: a durable one is one with sync */
static const struct store_driver *plain;
static int nr_writes, nr_creates, nr_durable;

static int counted_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	int ret = plain->write(oid, buf, len, off, sync);

	if (ret == SD_RES_SUCCESS) { /* not the first try that finds no object */
		__atomic_fetch_add(&nr_writes, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&nr_durable, sync, __ATOMIC_RELAXED);
	}
	return ret;
}

static int counted_create(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len,
			  uint64_t off, bool sync)
{
	__atomic_fetch_add(&nr_creates, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&nr_durable, sync, __ATOMIC_RELAXED);
	return plain->create_and_write(oid, cow_oid, buf, len, off, sync);
}

/*
 * A data object fetched for a write is stored with the write applied, in
 * one durable create (not the copy's create and then the write's write,
 * two fsyncs on the path of the epoch change's first writes), and durable
 * even for a write without sync: it holds the copy's acknowledged bytes.
 */
START_TEST(test_write_missing_one_durable_create)
{
	static struct store_driver counting;
	uint64_t oid = FETCH_OID(3);
	char *back = malloc(FETCH_SIZE), *want = malloc(FETCH_SIZE);

	plain = sd_store;
	counting = *plain;
	counting.write = counted_write;
	counting.create_and_write = counted_create;
	sd_store = &counting;
	for (int sync = 1; sync >= 0; sync--) {
		uint64_t o = oid + (uint64_t)sync;

		peer_holds(sync ? 'S' : 'N');
		nr_writes = nr_creates = nr_durable = 0;
		ck_assert_int_eq(replica_write(o, "hello", 5, FETCH_SIZE - 5, sync), SD_RES_SUCCESS);
		ck_assert_int_eq(__atomic_load_n(&nr_fetches, __ATOMIC_ACQUIRE), 1);
		ck_assert_msg(nr_creates == 1 && nr_writes == 0, "creates %d writes %d durable %d", nr_creates, nr_writes, nr_durable);
		ck_assert_int_eq(nr_durable, 1);
		ck_assert_int_eq(nr_writes, 0);
		ck_assert_int_eq(plain->read(o, back, FETCH_SIZE, 0), SD_RES_SUCCESS);
		memset(want, sync ? 'S' : 'N', FETCH_SIZE);
		memcpy(want + FETCH_SIZE - 5, "hello", 5);
		ck_assert_int_eq(first_diff(back, want), -1);
	}
	/* past the object's end: refused, nothing fetched or stored */
	peer_holds('P');
	ck_assert_int_eq(replica_write(oid + 2, "hello", 5, FETCH_SIZE - 4, true),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(__atomic_load_n(&nr_fetches, __ATOMIC_ACQUIRE), 0);
	ck_assert(!plain->exist(oid + 2));
	sd_store = plain;
	free(want);
	free(back);
}
END_TEST

START_TEST(test_write_missing_nowhere)
{
	uint64_t oid = FETCH_OID(2), deleted = vid_to_data_oid(DELETED_VID, 2);

	peer_holds('P');
	__atomic_store_n(&peer_has, false, __ATOMIC_RELEASE);
	ck_assert_int_eq(replica_write(oid, "hello", 5, 0, true), SD_RES_NO_OBJ);
	ck_assert(!sd_store->exist(oid));
	/* a deleted VDI's object is never fetched back, whoever holds it */
	peer_holds('P');
	ck_assert_int_eq(replica_write(deleted, "hello", 5, 0, true), SD_RES_NO_OBJ);
	ck_assert(!sd_store->exist(deleted));
	ck_assert_int_eq(__atomic_load_n(&nr_fetches, __ATOMIC_ACQUIRE), 0);
}
END_TEST

struct race_arg {
	uint64_t oid;
	bool create;
};

/* the writer puts 'W' at 0..4095 by a write; the creator 'C' at 8192.. by a create */
static void *race_one(void *arg)
{
	struct race_arg *a = arg;
	char buf[4096];

	memset(buf, a->create ? 'C' : 'W', sizeof(buf));
	pthread_barrier_wait(&barrier);
	if (a->create)
		return (void *)(long)replica_create_and_write(a->oid, buf, sizeof(buf), 8192, 8192,
							      sizeof(buf), true);
	return (void *)(long)replica_write(a->oid, buf, sizeof(buf), 0, true);
}

START_TEST(test_write_races_create)
{
	char *back = malloc(FETCH_SIZE), *want = malloc(FETCH_SIZE);

	peer_holds('P');
	for (int round = 0; round < 20; round++) {
		struct race_arg a[2] = { { FETCH_OID(100 + round), false },
					 { FETCH_OID(100 + round), true } };
		pthread_t t[2];
		char rest;

		pthread_barrier_init(&barrier, NULL, 2);
		for (int i = 0; i < 2; i++)
			ck_assert_int_eq(pthread_create(&t[i], NULL, race_one, &a[i]), 0);
		for (int i = 0; i < 2; i++) {
			void *ret;

			pthread_join(t[i], &ret);
			ck_assert_int_eq((int)(long)ret, SD_RES_SUCCESS);
		}
		pthread_barrier_destroy(&barrier);
		ck_assert_int_eq(sd_store->read(a[0].oid, back, FETCH_SIZE, 0), SD_RES_SUCCESS);
		/* both land; the rest is the fetched copy (the write came first) or zeros */
		rest = back[4096];
		ck_assert_msg(rest == 'P' || rest == 0, "round %d: byte 4096 is 0x%02x", round,
			      (unsigned char)rest);
		memset(want, rest, FETCH_SIZE);
		memset(want, 'W', 4096);
		memset(want + 8192, 'C', 4096);
		ck_assert_msg(!memcmp(back, want, FETCH_SIZE), "round %d: byte %ld is 0x%02x",
			      round, first_diff(back, want),
			      (unsigned char)back[first_diff(back, want)]);
	}
	free(want);
	free(back);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("replica");
	TCase *tc = tcase_create("replica");
	SRunner *sr;
	int nr_failed;

	sd_log_init(NULL, SDOG_EMERG, "test_replica");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_create_makes_object);
	tcase_add_test(tc, test_second_create_writes_only_its_range);
	tcase_add_test(tc, test_range_outside_payload);
	tcase_add_test(tc, test_lock_per_object);
	tcase_add_test(tc, test_racing_creates_all_land);
	tcase_add_test(tc, test_write_missing_fetches_it);
	tcase_add_test(tc, test_fetch_kinds);
	tcase_add_test(tc, test_write_missing_one_durable_create);
	tcase_add_test(tc, test_write_missing_nowhere);
	tcase_add_test(tc, test_write_races_create);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
