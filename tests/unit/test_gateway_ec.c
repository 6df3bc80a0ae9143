/*
 * Unit tests of sheep/gateway_ec.c through the gateway's API, on the fake
 * cluster of test_gateway.c (gateway_fake.h): where a read of an
 * erasure-coded object looks for its strips (home first, then in rounds
 * after a join or a failure), and a small write updated in place.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "ec.h"
#include "gateway.h"
#include "group.h"
#include "vdi_table.h"
#include "gateway_fake.h"

/* ---- erasure-coded objects: where a read looks for a strip (gateway_ec.c) ---- */

static const struct vdi_attr ec21 = { .shift = SHIFT, .nr_copies = 3, .copy_policy = 0x11 };
static const struct vdi_attr ec22 = { .shift = SHIFT, .nr_copies = 4, .copy_policy = 0x12 };

/* a data object of vid 0x42 whose first place in the ring order of all four nodes is node's */
static uint64_t ec_oid_first_on(int node)
{
	for (uint32_t idx = 0; idx < 1000; idx++) {
		uint64_t oid = vid_to_data_oid(0x42, idx);
		int ord[SD_MAX_NODES];

		ring_map(&ring.ring, oid, NR_NODES, ord);
		if (ring.ring.nodes[ord[0]].nid.port - 7000 == node)
			return oid;
	}
	ck_abort_msg("no such object");
	return 0;
}

static int nr_requests_all(void)
{
	int n = 0;

	for (int i = 0; i < NR_NODES; i++)
		n += nodes[i].nr_requests;
	return n;
}

static uint8_t *ec_pattern(void)
{
	uint8_t *p = malloc(OBJ_SIZE);

	ck_assert_ptr_nonnull(p);
	for (uint32_t i = 0; i < OBJ_SIZE; i++)
		p[i] = (uint8_t)(i * 13 + 1);
	return p;
}

/*
 * 2:2 on four nodes, then the node that held strip 0 leaves before
 * recovery ran: strip 0 is gone and strips 1-3 are one place back in the
 * ring order. The read rebuilds the object in three rounds (the homes;
 * strip 1 one place back and the parity at home; the parity one place
 * back); asked one node after another, it took seven.
 */
START_TEST(test_ec_degraded_read_in_rounds)
{
	uint64_t oid = ec_oid_first_on(3);
	uint8_t *pattern = ec_pattern(), *out = malloc(OBJ_SIZE);

	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec22),
			 SD_RES_SUCCESS);
	ck_assert(holds(3, ec_strip_oid(oid, 0)));
	ring_of(3);
	nr_fanouts = 0;
	ck_assert_int_eq(gateway_read(oid, out, OBJ_SIZE, 0, &ec22), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern, OBJ_SIZE));
	ck_assert_int_le(nr_fanouts, 3);
	/* no node was asked for one strip twice */
	for (int i = 0; i < 3; i++)
		ck_assert_int_le(nodes[i].nr_requests, 4 + 1 /* the create */);
	free(pattern);
	free(out);
}
END_TEST

/*
 * 2:1 written on three nodes, then a fourth joins, first in the object's
 * ring order: every strip is one place on. Three rounds; asked one node
 * after another, it took five.
 */
START_TEST(test_ec_read_after_join)
{
	uint64_t oid;
	uint8_t *pattern = ec_pattern(), *out = malloc(OBJ_SIZE);

	oid = ec_oid_first_on(3);
	ring_of(3);
	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec21),
			 SD_RES_SUCCESS);
	ring_of(NR_NODES);
	nr_fanouts = 0;
	ck_assert_int_eq(gateway_read(oid, out, OBJ_SIZE, 0, &ec21), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern, OBJ_SIZE));
	ck_assert_int_le(nr_fanouts, 3);
	ck_assert_int_eq(nodes[3].nr_requests, 2); /* strips 0 and 1 were not there */
	free(pattern);
	free(out);
}
END_TEST

/* a healthy read of one strip's bytes asks that strip's home only: no parity on the side */
START_TEST(test_ec_healthy_read_asks_home_only)
{
	uint64_t oid = ec_oid_first_on(1);
	uint8_t *pattern = ec_pattern(), out[4096];
	int before;

	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec22),
			 SD_RES_SUCCESS);
	before = nr_requests_all();
	nr_fanouts = 0;
	__atomic_store_n(&nr_attr_lookups, 0, __ATOMIC_RELAXED);
	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), OBJ_SIZE / 2 + 100, &ec22),
			 SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern + OBJ_SIZE / 2 + 100, sizeof(out)));
	ck_assert_int_eq(nr_fanouts, 1);
	ck_assert_int_eq(nr_requests_all() - before, 1);
	/* the scheme and the object size came with the request's attributes: no table lookup */
	ck_assert_int_eq(__atomic_load_n(&nr_attr_lookups, __ATOMIC_RELAXED), 0);
	free(pattern);
}
END_TEST

/* an object with no strip anywhere: SD_RES_NO_OBJ, each node asked for each strip once at most */
START_TEST(test_ec_missing_object)
{
	uint64_t oid = ec_oid_first_on(2);
	char out[64];

	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), 0, &ec22), SD_RES_NO_OBJ);
	for (int i = 0; i < NR_NODES; i++) {
		ck_assert_int_ge(nodes[i].nr_requests, 1);
		ck_assert_int_le(nodes[i].nr_requests, 4);
	}
}
END_TEST

/* the object's bytes as strips 0..d-1 hold them at the nodes the ring names */
static void ec_check_strips_home(uint64_t oid, int d, int p, const uint8_t *want)
{
	int idx[SD_MAX_NODES];
	uint32_t sl = OBJ_SIZE / (uint32_t)d;

	ck_assert_int_eq(ring_map(&ring.ring, oid, d + p, idx), d + p);
	for (int i = 0; i < d + p; i++) {
		struct fake_obj *o = find(ring.ring.nodes[idx[i]].nid.port - 7000, ec_strip_oid(oid, i));

		ck_assert_msg(o, "strip %d not at its home", i);
		if (i < d)
			ck_assert(!memcmp(o->data, want + (size_t)i * sl, sl));
	}
}

/*
 * A 4 KiB write to an object of 2:2 whose strips are home: the window of
 * the four strips read (4 x 4 KiB), the window of one data strip and of
 * the two parity strips written (3 x 4 KiB), not the whole stripe. The
 * parity is right: with both data strips gone, the object is rebuilt
 * from it with the write in.
 */
START_TEST(test_ec_small_write_in_place)
{
	uint64_t oid = ec_oid_first_on(2);
	uint8_t *pattern = ec_pattern(), *out = malloc(OBJ_SIZE), chunk[4096];
	uint32_t at = OBJ_SIZE / 2 + 1000; /* in strip 1 */
	int idx[SD_MAX_NODES];

	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec22),
			 SD_RES_SUCCESS);
	memset(chunk, 0xa5, sizeof(chunk));
	bytes_read = bytes_written = 0;
	ck_assert_int_eq(gateway_write(oid, chunk, sizeof(chunk), at, GW_SYNC, &ec22),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(bytes_read, 4 * sizeof(chunk));
	ck_assert_int_eq(bytes_written, 3 * sizeof(chunk));
	memcpy(pattern + at, chunk, sizeof(chunk));
	ec_check_strips_home(oid, 2, 2, pattern);
	/* the data strips lost: the parity alone gives the object back */
	ring_map(&ring.ring, oid, 4, idx);
	for (int i = 0; i < 2; i++)
		drop(ring.ring.nodes[idx[i]].nid.port - 7000, ec_strip_oid(oid, i));
	ck_assert_int_eq(gateway_read(oid, out, OBJ_SIZE, 0, &ec22), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern, OBJ_SIZE));
	free(pattern);
	free(out);
}
END_TEST

/*
 * A small write to an object whose strips a join moved (recovery not
 * done): not in place (the strips are not home) but the whole stripe,
 * found where it is and written to the new homes.
 */
START_TEST(test_ec_small_write_after_join)
{
	uint64_t oid = ec_oid_first_on(3);
	uint8_t *pattern = ec_pattern(), *out = malloc(OBJ_SIZE), chunk[512];

	ring_of(3);
	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec21),
			 SD_RES_SUCCESS);
	ring_of(NR_NODES);
	memset(chunk, 0x3c, sizeof(chunk));
	ck_assert_int_eq(gateway_write(oid, chunk, sizeof(chunk), 7, GW_SYNC, &ec21),
			 SD_RES_SUCCESS);
	memcpy(pattern + 7, chunk, sizeof(chunk));
	ec_check_strips_home(oid, 2, 1, pattern);
	ck_assert_int_eq(gateway_read(oid, out, OBJ_SIZE, 0, &ec21), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern, OBJ_SIZE));
	/* and a write to an object that does not exist creates nothing */
	ck_assert_int_eq(gateway_write(oid + 1, chunk, sizeof(chunk), 0, GW_SYNC, &ec21),
			 SD_RES_NO_OBJ);
	for (int i = 0; i < 3; i++)
		for (int node = 0; node < NR_NODES; node++)
			ck_assert(!holds(node, ec_strip_oid(oid + 1, i)));
	free(pattern);
	free(out);
}
END_TEST

/*
 * A small write while one strip's node fails its reads (a dying disk):
 * not in place, but through the whole stripe, the strip rebuilt from the
 * others and written again whole, as before the write in place existed.
 */
START_TEST(test_ec_small_write_strip_unreadable)
{
	uint64_t oid = ec_oid_first_on(2);
	uint8_t *pattern = ec_pattern(), *out = malloc(OBJ_SIZE), chunk[4096];

	ck_assert_int_eq(gateway_create(oid, 0, pattern, OBJ_SIZE, 0, GW_SYNC, &ec21),
			 SD_RES_SUCCESS);
	nodes[2].fail_read = SD_RES_EIO; /* node 2 holds strip 0 */
	memset(chunk, 0x77, sizeof(chunk));
	ck_assert_int_eq(gateway_write(oid, chunk, sizeof(chunk), 100, GW_SYNC, &ec21),
			 SD_RES_SUCCESS);
	nodes[2].fail_read = 0;
	memcpy(pattern + 100, chunk, sizeof(chunk));
	ec_check_strips_home(oid, 2, 1, pattern);
	ck_assert_int_eq(gateway_read(oid, out, OBJ_SIZE, 0, &ec21), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, pattern, OBJ_SIZE));
	free(pattern);
	free(out);
}
END_TEST

void gateway_ec_tests(TCase *tc)
{
	tcase_add_test(tc, test_ec_degraded_read_in_rounds);
	tcase_add_test(tc, test_ec_read_after_join);
	tcase_add_test(tc, test_ec_healthy_read_asks_home_only);
	tcase_add_test(tc, test_ec_missing_object);
	tcase_add_test(tc, test_ec_small_write_in_place);
	tcase_add_test(tc, test_ec_small_write_after_join);
	tcase_add_test(tc, test_ec_small_write_strip_unreadable);
}
