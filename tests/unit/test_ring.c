/* Unit tests of lib/ring.c: distinct nodes and zones, stability, determinism. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define NR_OIDS 20000

static void make_node(struct sd_node *n, int port, uint32_t zone)
{
	memset(n, 0, sizeof(*n));
	n->nid.addr[10] = 0xff;
	n->nid.addr[11] = 0xff;
	n->nid.addr[12] = 127;
	n->nid.addr[15] = 1;
	n->nid.port = (uint16_t)port;
	n->zone = zone;
	n->nr_vnodes = SD_DEFAULT_VNODES;
}

static uint64_t test_oid(int i)
{
	return ((uint64_t)(0x7c2b25 + i / 1000) << 32) | (uint64_t)(i % 1000);
}

START_TEST(test_distinct_nodes)
{
	struct sd_node nodes[5];
	struct sd_ring ring;
	int idx[8];

	for (int i = 0; i < 5; i++)
		make_node(&nodes[i], 7000 + i, 0); /* one zone: nodes still distinct */
	ck_assert_int_eq(ring_build(&ring, nodes, 5), 0);
	ck_assert_int_eq(ring.nr_zones, 1);
	for (int i = 0; i < NR_OIDS; i++) {
		int n = ring_map(&ring, test_oid(i), 3, idx);
		ck_assert_int_eq(n, 3);
		ck_assert(idx[0] != idx[1] && idx[0] != idx[2] && idx[1] != idx[2]);
	}
	/* more copies than nodes: every node once */
	ck_assert_int_eq(ring_map(&ring, 1, 8, idx), 5);
	ring_free(&ring);
}
END_TEST

START_TEST(test_distinct_zones)
{
	struct sd_node nodes[6];
	struct sd_ring ring;
	int idx[4];

	for (int i = 0; i < 6; i++)
		make_node(&nodes[i], 7000 + i, (uint32_t)(i / 2)); /* zones 0 0 1 1 2 2 */
	ck_assert_int_eq(ring_build(&ring, nodes, 6), 0);
	ck_assert_int_eq(ring.nr_zones, 3);
	for (int i = 0; i < NR_OIDS; i++) {
		ck_assert_int_eq(ring_map(&ring, test_oid(i), 3, idx), 3);
		uint32_t z0 = nodes[idx[0]].zone, z1 = nodes[idx[1]].zone, z2 = nodes[idx[2]].zone;
		ck_assert(z0 != z1 && z0 != z2 && z1 != z2);
	}
	/* 4 copies, 3 zones: three zones used, then a fourth distinct node */
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(ring_map(&ring, test_oid(i), 4, idx), 4);
		uint32_t seen = 0;
		for (int k = 0; k < 4; k++) {
			seen |= 1u << nodes[idx[k]].zone;
			for (int j = 0; j < k; j++)
				ck_assert_int_ne(idx[j], idx[k]);
		}
		ck_assert_uint_eq(seen, 7);
	}
	ring_free(&ring);
}
END_TEST

START_TEST(test_balance)
{
	struct sd_node nodes[4];
	struct sd_ring ring;
	int count[4] = { 0 }, idx[1];

	for (int i = 0; i < 4; i++)
		make_node(&nodes[i], 7000 + i, (uint32_t)i);
	nodes[3].nr_vnodes = 2 * SD_DEFAULT_VNODES; /* twice the capacity */
	ck_assert_int_eq(ring_build(&ring, nodes, 4), 0);
	for (int i = 0; i < NR_OIDS; i++) {
		ck_assert_int_eq(ring_map(&ring, test_oid(i), 1, idx), 1);
		count[idx[0]]++;
	}
	/* expected shares 1/5, 1/5, 1/5, 2/5; allow +-30% */
	for (int i = 0; i < 3; i++)
		ck_assert_msg(count[i] > NR_OIDS / 5 * 7 / 10 && count[i] < NR_OIDS / 5 * 13 / 10,
			      "node %d holds %d", i, count[i]);
	ck_assert_msg(count[3] > NR_OIDS * 2 / 5 * 7 / 10, "heavy node holds %d", count[3]);
	ring_free(&ring);
}
END_TEST

START_TEST(test_stability)
{
	struct sd_node nodes[9];
	struct sd_ring before, after;
	int a[3], b[3], moved = 0, moved_primary = 0;

	for (int i = 0; i < 9; i++)
		make_node(&nodes[i], 7000 + i, (uint32_t)i);
	ck_assert_int_eq(ring_build(&before, nodes, 8), 0);
	ck_assert_int_eq(ring_build(&after, nodes, 9), 0);
	for (int i = 0; i < NR_OIDS; i++) {
		ring_map(&before, test_oid(i), 3, a);
		ring_map(&after, test_oid(i), 3, b);
		if (a[0] != b[0])
			moved_primary++;
		/* a replica moves only onto the new node */
		for (int k = 0; k < 3; k++) {
			int found = 0;
			for (int j = 0; j < 3; j++)
				found |= a[j] == b[k];
			if (!found) {
				ck_assert_int_eq(b[k], 8);
				moved++;
			}
		}
	}
	/* about 1/9 of the primaries and 3/9 of the objects gain the new node */
	ck_assert_msg(moved_primary < NR_OIDS / 9 * 3 / 2, "%d primaries moved", moved_primary);
	ck_assert_msg(moved_primary > NR_OIDS / 9 / 2, "%d primaries moved", moved_primary);
	ck_assert_msg(moved < NR_OIDS * 3 / 9 * 3 / 2, "%d replicas moved", moved);
	ring_free(&before);
	ring_free(&after);
}
END_TEST

START_TEST(test_determinism)
{
	struct sd_node nodes[4], rev[4];
	struct sd_ring r1, r2;
	int a[3], b[3];

	for (int i = 0; i < 4; i++)
		make_node(&nodes[i], 7000 + i, (uint32_t)i);
	for (int i = 0; i < 4; i++)
		rev[i] = nodes[3 - i];
	ck_assert_int_eq(ring_build(&r1, nodes, 4), 0);
	ck_assert_int_eq(ring_build(&r2, rev, 4), 0);
	for (int i = 0; i < NR_OIDS; i++) {
		ring_map(&r1, test_oid(i), 3, a);
		ring_map(&r2, test_oid(i), 3, b);
		/* the same nodes in the same order, whatever the list order */
		for (int k = 0; k < 3; k++)
			ck_assert_int_eq(nodes[a[k]].nid.port, rev[b[k]].nid.port);
	}
	ck_assert_uint_eq(ring_oid_hash(42), ring_oid_hash(42));
	ck_assert_int_eq(ring_find_node(&r1, &nodes[2].nid), 2);
	ck_assert_int_eq(ring_find_node(&r2, &nodes[2].nid), 1);
	ring_free(&r1);
	ring_free(&r2);
}
END_TEST

/*
 * A gateway (SD_NODE_GATEWAY) is on no ring: the others' placement is the
 * one they have without it, and its zone counts for nothing.
 */
START_TEST(test_gateway)
{
	struct sd_node nodes[4], storing[3];
	struct sd_ring with, without;
	int a[3], b[3];

	for (int i = 0; i < 4; i++)
		make_node(&nodes[i], 7000 + i, (uint32_t)i);
	nodes[1].flags = SD_NODE_GATEWAY;
	nodes[1].nr_vnodes = 0;
	storing[0] = nodes[0];
	storing[1] = nodes[2];
	storing[2] = nodes[3];
	ck_assert_int_eq(ring_build(&with, nodes, 4), 0);
	ck_assert_int_eq(ring_build(&without, storing, 3), 0);
	ck_assert_int_eq(with.nr_nodes, 3);
	ck_assert_int_eq(with.nr_zones, 3);
	ck_assert_int_eq(with.nr_vnodes, 3 * SD_DEFAULT_VNODES);
	ck_assert_int_eq(ring_find_node(&with, &nodes[1].nid), -1);
	ck_assert_int_eq(ring_find_node(&with, &nodes[2].nid), 1);
	for (int i = 0; i < NR_OIDS; i++) {
		int n = ring_map(&with, test_oid(i), 3, a);

		ck_assert_int_eq(n, 3);
		ck_assert_int_eq(ring_map(&without, test_oid(i), 3, b), 3);
		ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0);
	}
	/* more copies than storing nodes: as many as they are */
	ck_assert_int_eq(ring_map(&with, test_oid(0), 4, a), 3);
	ring_free(&with);
	ring_free(&without);

	/* only gateways: an empty ring */
	nodes[0].flags = SD_NODE_GATEWAY;
	ck_assert_int_eq(ring_build(&with, nodes, 2), 0);
	ck_assert_int_eq(with.nr_nodes, 0);
	ck_assert_int_eq(ring_map(&with, test_oid(0), 1, a), 0);
	ring_free(&with);
}
END_TEST

START_TEST(test_empty)
{
	struct sd_ring ring;
	int idx[3];

	ck_assert_int_eq(ring_build(&ring, NULL, 0), 0);
	ck_assert_int_eq(ring_map(&ring, 1, 3, idx), 0);
	ring_free(&ring);
	ck_assert_int_eq(ring_build(&ring, NULL, SD_MAX_NODES + 1), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nr_failed;

	tcase_add_test(tc, test_distinct_nodes);
	tcase_add_test(tc, test_distinct_zones);
	tcase_add_test(tc, test_balance);
	tcase_add_test(tc, test_stability);
	tcase_add_test(tc, test_determinism);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_gateway);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
