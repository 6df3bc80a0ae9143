/*
 * Unit tests of sheep/replica.c, this node's copy of an object, on a plain
 * store in a temporary directory: a create makes the object from its
 * payload; a create of an object that exists applies only its client's
 * range; a copy-on-write payload's client range is checked against the
 * payload; creates of one object from many threads at once all land (the
 * per-object lock), whichever comes first.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sheep_priv.h"
#include "store/store.h"

#define OBJ_SIZE 65536
static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_replica.XXXXXX");
	ck_assert_ptr_ne(mkdtemp(dir), NULL);
	ck_assert_int_eq(store_init("plain", dir), 0);
}

static void teardown(void)
{
	char cmd[128];

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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
