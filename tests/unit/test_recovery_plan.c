/*
 * Unit tests of sheep/recovery_plan.c: what the nodes' object lists tell
 * this node to do after an epoch change, on a real ring (lib/ring.c) of
 * five nodes, this node the first. The lists of several nodes merge into
 * one entry per object, live and stale bits kept apart; an object is
 * fetched when the ring gives it to this node and it holds no live copy
 * (from a stale copy too, when nobody else has it live); one it holds live
 * is not; one the ring gives elsewhere is not; an object of a deleted VDI
 * is never fetched, and this node's live copy of it goes; once recovered,
 * this node keeps what the ring gives it and the objects of a VDI it does
 * not know (their copies are unknown). The VDIs' copies decide the
 * placement: a VDI with more copies puts more objects here.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "ec.h"
#include "deleted.h"
#include "recovery_plan.h"
#include "vdi_table.h"

#define NR_NODES 5
#define DELETED_VID 0xdead
#define UNKNOWN_VID 0xbeef

static struct epoch_ring er = { .refcnt = 1, .epoch = 3 };

uint8_t group_copies(void)
{
	return 2;
}

int vdi_copies(uint32_t vid)
{
	return vid == UNKNOWN_VID ? 0 : vid == 0x33 ? 3 : 2;
}

bool deleted_has(uint64_t oid)
{
	return oid_to_vid(oid) == DELETED_VID;
}

static uint64_t removed[8];
static int nr_removed;

static void on_remove(uint64_t oid)
{
	removed[nr_removed++] = oid;
}

static void setup(void)
{
	struct sd_node n[NR_NODES];

	memset(n, 0, sizeof(n));
	for (int i = 0; i < NR_NODES; i++) {
		n[i].nid.addr[15] = 1;
		n[i].nid.port = (uint16_t)(7000 + i);
		n[i].nr_vnodes = 64;
		n[i].zone = (uint32_t)i;
	}
	ring_free(&er.ring);
	ck_assert_int_eq(ring_build(&er.ring, n, NR_NODES), 0);
	er.local_idx = ring_find_node(&er.ring, &n[0].nid);
	nr_removed = 0;
}

/* a data object of vid that the ring gives to this node (mine) or not */
static uint64_t obj(uint32_t vid, bool mine, uint32_t skip)
{
	for (uint32_t idx = skip; idx < 10000; idx++) {
		uint64_t oid = vid_to_data_oid(vid, idx);

		if (recovery_is_mine(&er, oid) == mine)
			return oid;
	}
	ck_abort_msg("no such object");
	return 0;
}

static void list(struct obj_set *set, int node, bool stale, const uint64_t *oids, int n)
{
	set->node = node;
	set->stale = stale;
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(recovery_add_oid(oids[i], set), 0);
}

static bool planned(const struct obj_set *set, uint64_t oid)
{
	for (size_t i = 0; i < set->nr; i++)
		if (set->e[i].oid == oid)
			return true;
	return false;
}

/*
 * Strips of an erasure-coded object (vid 0x33: 3 copies, taken as 2:1):
 * strip i is this node's when the ring names it i-th for the object; a
 * strip listed brings its siblings, held by nobody, into the plan.
 */
START_TEST(test_strips)
{
	struct obj_set set = { 0 };
	int idx[3], mine = -1;
	uint64_t oid = 0;

	/* an object of which this node holds one strip in the ring's order */
	for (uint32_t i = 0; mine < 0 && i < 1000; i++) {
		oid = vid_to_data_oid(0x33, i);
		ck_assert_int_eq(ring_map(&er.ring, oid, 3, idx), 3);
		for (int k = 0; k < 3; k++)
			if (idx[k] == er.local_idx)
				mine = k;
	}
	ck_assert_int_ge(mine, 0);
	for (int k = 0; k < 3; k++)
		ck_assert(recovery_is_mine(&er, ec_strip_oid(oid, k)) == (k == mine));
	/* another node lists strip (mine + 1) % 3 only: this node must make its own */
	list(&set, idx[(mine + 1) % 3], false, (uint64_t[]){ ec_strip_oid(oid, (mine + 1) % 3) },
	     1);
	recovery_merge(&set);
	ck_assert_int_eq(recovery_add_strips(&set), 0);
	ck_assert_uint_eq(set.nr, 3);
	ck_assert_uint_eq(recovery_plan(&er, &set, on_remove), 1);
	ck_assert(planned(&set, ec_strip_oid(oid, mine)));
	/* once recovered: this node keeps its strip, not another's */
	ck_assert(recovery_keeps(&er, ec_strip_oid(oid, mine)));
	ck_assert(!recovery_keeps(&er, ec_strip_oid(oid, (mine + 1) % 3)));
	free(set.e);
}
END_TEST

START_TEST(test_merge)
{
	struct obj_set set = { 0 };
	uint64_t a = vid_to_data_oid(0x11, 1), b = vid_to_data_oid(0x11, 2);

	list(&set, 1, false, (uint64_t[]){ b, a }, 2);
	list(&set, 2, false, (uint64_t[]){ a }, 1);
	list(&set, 3, true, (uint64_t[]){ a }, 1);
	recovery_merge(&set);
	ck_assert_uint_eq(set.nr, 2);
	ck_assert_uint_eq(set.e[0].oid, a); /* sorted */
	ck_assert_uint_eq(set.e[0].live, (1 << 1) | (1 << 2));
	ck_assert_uint_eq(set.e[0].stale, 1 << 3);
	ck_assert_uint_eq(set.e[1].live, 1 << 1);
	free(set.e);
}
END_TEST

START_TEST(test_plan)
{
	struct obj_set set = { 0 };
	int here = er.local_idx;
	uint64_t to_fetch = obj(0x11, true, 0), held = obj(0x11, true, 100),
		 elsewhere = obj(0x11, false, 0), stale_only = obj(0x11, true, 200),
		 gone_here = obj(DELETED_VID, true, 0), gone_there = obj(DELETED_VID, false, 0);

	list(&set, (here + 1) % NR_NODES, false,
	     (uint64_t[]){ to_fetch, held, elsewhere, gone_there }, 4);
	list(&set, here, false, (uint64_t[]){ held, gone_here }, 2);
	list(&set, (here + 2) % NR_NODES, true, (uint64_t[]){ stale_only }, 1);
	recovery_merge(&set);
	ck_assert_uint_eq(recovery_plan(&er, &set, on_remove), 2);
	ck_assert(planned(&set, to_fetch));
	ck_assert(planned(&set, stale_only));
	ck_assert(!planned(&set, held));
	ck_assert(!planned(&set, elsewhere));
	ck_assert(!planned(&set, gone_here) && !planned(&set, gone_there));
	ck_assert_int_eq(nr_removed, 1);
	ck_assert_uint_eq(removed[0], gone_here);
	free(set.e);
}
END_TEST

START_TEST(test_keeps)
{
	ck_assert(recovery_keeps(&er, obj(0x11, true, 0)));
	ck_assert(!recovery_keeps(&er, obj(0x11, false, 0)));
	/* a VDI unknown here: its objects stay until it is known */
	ck_assert(recovery_keeps(&er, vid_to_data_oid(UNKNOWN_VID, 7)));
}
END_TEST

START_TEST(test_copies_decide)
{
	int two = 0, three = 0;

	/* of 1,000 objects, a VDI of 3 copies puts about 3/5 here, one of 2 about 2/5 */
	for (uint32_t idx = 0; idx < 1000; idx++) {
		two += recovery_is_mine(&er, vid_to_data_oid(0x22, idx));
		three += recovery_is_mine(&er, vid_to_data_oid(0x33, idx));
	}
	ck_assert_int_gt(three, two);
	ck_assert_int_gt(two, 250);
	ck_assert_int_lt(two, 550);
	ck_assert_int_gt(three, 450);
	ck_assert_int_lt(three, 750);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recovery_plan");
	TCase *tc = tcase_create("plan");
	SRunner *sr;
	int nr_failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_strips);
	tcase_add_test(tc, test_plan);
	tcase_add_test(tc, test_keeps);
	tcase_add_test(tc, test_copies_decide);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
