/*
 * Unit tests of several disks per node: the disk ring (sheep/store/md_ring.c:
 * placement, weights, what a plug or an unplug moves) and the plain store
 * on several disks (sheep/store/md.c: objects on their ring disk, moved by
 * a plug and an unplug and readable meanwhile, a failed disk taken out).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "internal_proto.h"
#include "logger.h"
#include "ring.h"
#include "store/md.h"
#include "store/store.h"

#define NR_OIDS 20000

static uint64_t test_oid(int i)
{
	return ((uint64_t)(0x7c2b25 + i / 1000) << 32) | (uint64_t)(i % 1000);
}

/* the disk of every test oid on the ring of names[nr], as an index into names */
static void place_all(const char *const *names, const uint16_t *vnodes, int nr, int *out)
{
	struct sd_ring ring;

	ck_assert_int_eq(md_ring_build(&ring, names, vnodes, nr), 0);
	for (int i = 0; i < NR_OIDS; i++) {
		out[i] = md_ring_place(&ring, test_oid(i));
		ck_assert(out[i] >= 0 && out[i] < nr);
	}
	ring_free(&ring);
}

START_TEST(test_place_by_path_not_order)
{
	const char *abc[] = { "/mnt/a", "/mnt/b", "/mnt/c" }, *cab[] = { "/mnt/c", "/mnt/a", "/mnt/b" };
	uint16_t v[] = { 64, 64, 64 };
	static int p1[NR_OIDS], p2[NR_OIDS];

	place_all(abc, v, 3, p1);
	place_all(cab, v, 3, p2);
	for (int i = 0; i < NR_OIDS; i++)
		ck_assert_str_eq(abc[p1[i]], cab[p2[i]]);
}
END_TEST

START_TEST(test_weights)
{
	const char *names[] = { "/d/1", "/d/2", "/d/3" };
	uint16_t v[] = { 64, 128, 256 };
	static int p[NR_OIDS];
	int n[3] = { 0 };

	place_all(names, v, 3, p);
	for (int i = 0; i < NR_OIDS; i++)
		n[p[i]]++;
	/* shares 1/7, 2/7, 4/7, within a fifth of each */
	for (int d = 0; d < 3; d++) {
		double want = NR_OIDS * (double)v[d] / 448.0;

		ck_assert_msg(n[d] > want * 0.8 && n[d] < want * 1.2, "disk %d: %d objects, want ~%.0f",
			      d, n[d], want);
	}
	ck_assert_int_eq(md_ring_weight(0), 32);
	ck_assert_int_eq(md_ring_weight(UINT64_C(1) << 30), 32);
	ck_assert_int_eq(md_ring_weight(UINT64_C(100) << 30), 400);
	ck_assert_int_eq(md_ring_weight(UINT64_C(1) << 50), 65535);
}
END_TEST

START_TEST(test_plug_moves_only_onto_the_new_disk)
{
	const char *three[] = { "/d/a", "/d/b", "/d/c" }, *four[] = { "/d/a", "/d/b", "/d/c", "/d/new" };
	uint16_t v[] = { 64, 64, 64, 64 };
	static int before[NR_OIDS], after[NR_OIDS];
	int moved = 0;

	place_all(three, v, 3, before);
	place_all(four, v, 4, after);
	for (int i = 0; i < NR_OIDS; i++) {
		if (before[i] == after[i])
			continue;
		ck_assert_int_eq(after[i], 3); /* a move goes to the new disk only */
		moved++;
	}
	/* about a quarter moves: its share, not a reshuffle */
	ck_assert_msg(moved > NR_OIDS / 4 * 0.8 && moved < NR_OIDS / 4 * 1.2, "%d moved", moved);
}
END_TEST

START_TEST(test_unplug_moves_only_its_objects)
{
	const char *three[] = { "/d/a", "/d/b", "/d/c" }, *two[] = { "/d/a", "/d/c" };
	uint16_t v[] = { 64, 64, 64 };
	static int before[NR_OIDS], after[NR_OIDS];

	place_all(three, v, 3, before);
	place_all(two, v, 2, after);
	for (int i = 0; i < NR_OIDS; i++)
		if (before[i] != 1) /* not on b: stays where it was */
			ck_assert_str_eq(three[before[i]], two[after[i]]);
}
END_TEST

/* the disks spread one node's share evenly: the node ring's choice does not decide the disk */
START_TEST(test_spread_within_a_node)
{
	const char *names[] = { "/d/a", "/d/b", "/d/c" };
	uint16_t v[] = { 64, 64, 64 };
	struct sd_node nodes[6];
	struct sd_ring nring, dring;
	int n[3] = { 0 }, total = 0, idx;

	memset(nodes, 0, sizeof(nodes));
	for (int i = 0; i < 6; i++) {
		nodes[i].nid.addr[15] = 1;
		nodes[i].nid.port = (uint16_t)(7000 + i);
	}
	ck_assert_int_eq(ring_build(&nring, nodes, 6), 0);
	ck_assert_int_eq(md_ring_build(&dring, names, v, 3), 0);
	for (int i = 0; i < NR_OIDS * 3; i++) {
		uint64_t oid = test_oid(i);

		if (ring_map(&nring, oid, 1, &idx) != 1 || idx != 0)
			continue;
		n[md_ring_place(&dring, oid)]++;
		total++;
	}
	for (int d = 0; d < 3; d++)
		ck_assert_msg(n[d] > total / 3 * 0.75, "disk %d: %d of %d", d, n[d], total);
	ring_free(&nring);
	ring_free(&dring);
}
END_TEST

/* ---- the plain store on several disks ---- */

static char top[] = "/tmp/test_md.XXXXXX";

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	ck_assert_int_eq(system(cmd), 0);
}

static void disk_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", top, name);
}

static void add_disk(const char *name, bool plug)
{
	char p[256];

	disk_path(p, sizeof(p), name);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	strcat(p, ",64");
	if (plug)
		ck_assert_int_eq(md_plug(p), 0);
	else
		ck_assert_int_eq(md_config_disk(p), 0);
}

/* whether the disk name holds oid's file */
static bool on_disk(const char *name, uint64_t oid)
{
	char p[320], d[256];

	disk_path(d, sizeof(d), name);
	snprintf(p, sizeof(p), "%s/obj/%016" PRIx64, d, oid);
	return access(p, F_OK) == 0;
}

static void wait_settled(void)
{
	for (int i = 0; i < 200 && !md_settled(); i++)
		usleep(20000);
	ck_assert(md_settled());
}

#define NR_OBJS 64
#define OBJ_LEN 4096

static void fill(uint64_t oid, char *buf)
{
	for (int i = 0; i < OBJ_LEN; i++)
		buf[i] = (char)(oid * 31 + (uint64_t)i);
}

static void write_objects(void)
{
	char buf[OBJ_LEN];

	for (int i = 0; i < NR_OBJS; i++) {
		fill(test_oid(i), buf);
		ck_assert_int_eq(sd_store->create_and_write(test_oid(i), 0, buf, OBJ_LEN, 0, true),
				 SD_RES_SUCCESS);
	}
}

static void check_objects(void)
{
	char want[OBJ_LEN], got[OBJ_LEN];

	for (int i = 0; i < NR_OBJS; i++) {
		fill(test_oid(i), want);
		ck_assert_int_eq(sd_store->read(test_oid(i), got, OBJ_LEN, 0), SD_RES_SUCCESS);
		ck_assert(!memcmp(want, got, OBJ_LEN));
	}
}

/* each object is on exactly one of the disks, as many as the md info says */
static int count_on(const char *const *names, int nr, int *per)
{
	struct sd_md_disk info[8];
	int n = md_info(info, 8), total = 0;

	for (int i = 0; i < NR_OBJS; i++) {
		int k = 0;

		for (int d = 0; d < nr; d++)
			if (on_disk(names[d], test_oid(i))) {
				k++;
				if (per)
					per[d]++;
			}
		ck_assert_int_eq(k, 1);
	}
	for (int d = 0; d < n; d++)
		total += (int)info[d].nr_objects;
	return total;
}

START_TEST(test_store_plug_unplug)
{
	const char *names[] = { "a", "b", "c" };
	int before[3] = { 0 }, after[3] = { 0 };
	char p[256];

	add_disk("a", false);
	add_disk("b", false);
	ck_assert(md_configured());
	ck_assert_int_eq(store_init("plain", top), 0);
	write_objects();
	ck_assert_int_eq(count_on(names, 2, before), NR_OBJS);
	ck_assert(before[0] > 0 && before[1] > 0);
	add_disk("c", true);
	check_objects(); /* readable whether moved yet or not */
	wait_settled();
	ck_assert_int_eq(count_on(names, 3, after), NR_OBJS);
	ck_assert(after[2] > 0);
	ck_assert(after[0] <= before[0] && after[1] <= before[1]);
	check_objects();
	disk_path(p, sizeof(p), "c");
	ck_assert_int_eq(md_plug(p), -EEXIST);
	ck_assert_int_eq(md_unplug(p), 0);
	check_objects();
	wait_settled();
	memset(after, 0, sizeof(after));
	ck_assert_int_eq(count_on(names, 3, after), NR_OBJS);
	ck_assert_int_eq(after[2], 0);
	ck_assert_int_eq(after[0], before[0]); /* back where they were */
	ck_assert_int_eq(md_unplug(p), -ENOENT);
	/* c comes back holding an old copy of an object: set aside, never read */
	{
		char f[320], junk[OBJ_LEN];
		int fd;

		snprintf(f, sizeof(f), "%s/obj/%016" PRIx64, p, test_oid(0));
		fd = open(f, O_WRONLY | O_CREAT, 0644);
		ck_assert(fd >= 0);
		memset(junk, 0x5a, sizeof(junk));
		ck_assert_int_eq(write(fd, junk, sizeof(junk)), (int)sizeof(junk));
		close(fd);
		ck_assert_int_eq(md_plug(p), 0);
		ck_assert(access(f, F_OK) != 0);
		snprintf(f, sizeof(f), "%s/obj/.stale/%016" PRIx64, p, test_oid(0));
		ck_assert(access(f, F_OK) == 0);
		check_objects();
		wait_settled();
		check_objects();
		ck_assert_int_eq(md_unplug(p), 0);
		wait_settled();
	}
	disk_path(p, sizeof(p), "b");
	ck_assert_int_eq(md_unplug(p), 0);
	wait_settled();
	disk_path(p, sizeof(p), "a");
	ck_assert_int_eq(md_unplug(p), -EBUSY); /* the last one stays */
	check_objects();
}
END_TEST

static int nr_lost;
static void lost(void)
{
	__atomic_add_fetch(&nr_lost, 1, __ATOMIC_RELAXED);
}

START_TEST(test_store_failed_disk)
{
	const char *names[] = { "a", "b", "c" };
	int per[3] = { 0 }, nr_missing = 0;
	struct sd_md_disk info[4];
	char p[256], cmd[300], buf[OBJ_LEN];

	add_disk("a", false);
	add_disk("b", false);
	add_disk("c", false);
	md_set_lost(lost);
	ck_assert_int_eq(store_init("plain", top), 0);
	wait_settled();
	write_objects();
	count_on(names, 3, per);
	ck_assert(per[1] > 0);
	/* b's object directory goes: every access to it fails */
	disk_path(p, sizeof(p), "b");
	snprintf(cmd, sizeof(cmd), "rm -rf %s/obj", p);
	ck_assert_int_eq(system(cmd), 0);
	for (int i = 0; i < NR_OBJS; i++) {
		int r = sd_store->read(test_oid(i), buf, OBJ_LEN, 0);

		ck_assert(r == SD_RES_SUCCESS || r == SD_RES_NO_OBJ);
		nr_missing += r == SD_RES_NO_OBJ;
	}
	ck_assert_int_eq(nr_missing, per[1]); /* b's objects are missing, the others read */
	ck_assert_int_eq(md_info(info, 4), 3);
	ck_assert_int_eq(info[1].state, SD_MD_FAILED);
	ck_assert_int_eq(__atomic_load_n(&nr_lost, __ATOMIC_RELAXED), 1);
	/* what was lost can be stored again, on the other disks */
	write_objects();
	check_objects();
	ck_assert_int_eq(md_unplug(p), 0);
	ck_assert_int_eq(md_info(info, 4), 3);
	ck_assert_int_eq(info[1].state, SD_MD_UNPLUGGED);
}
END_TEST

START_TEST(test_no_disk_option_keeps_dir_obj)
{
	char buf[OBJ_LEN];

	ck_assert(!md_configured());
	ck_assert_int_eq(store_init("plain", top), 0);
	fill(1, buf);
	ck_assert_int_eq(sd_store->create_and_write(1, 0, buf, OBJ_LEN, 0, true), SD_RES_SUCCESS);
	ck_assert(on_disk(".", 1)); /* DIR/obj, as always */
	ck_assert(md_settled());
	ck_assert_int_eq(md_config_disk(",5"), -EINVAL);
	ck_assert_int_eq(md_config_disk("/x,0"), -EINVAL);
	ck_assert_int_eq(md_config_disk("/x,65536"), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("md");
	TCase *ring = tcase_create("ring"), *store = tcase_create("store");
	SRunner *sr;
	int nr_failed;

	sd_log_init(NULL, SDOG_EMERG, "test_md");
	tcase_set_timeout(ring, 60);
	tcase_add_test(ring, test_place_by_path_not_order);
	tcase_add_test(ring, test_weights);
	tcase_add_test(ring, test_plug_moves_only_onto_the_new_disk);
	tcase_add_test(ring, test_unplug_moves_only_its_objects);
	tcase_add_test(ring, test_spread_within_a_node);
	tcase_add_checked_fixture(store, setup, teardown);
	tcase_set_timeout(store, 60);
	tcase_add_test(store, test_store_plug_unplug);
	tcase_add_test(store, test_store_failed_disk);
	tcase_add_test(store, test_no_disk_option_keeps_dir_obj);
	suite_add_tcase(s, ring);
	suite_add_tcase(s, store);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
