/*
 * Unit tests of lib/ec.c: the strip layout, encoding, and the rebuild of
 * the lost strips from every subset of D strips (2:1, 4:2; a sample of the
 * subsets for 8:3 and 16:4), with bad schemes refused.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ec.h"

#define OBJ_LEN (UINT32_C(1) << 20)

static uint8_t *object(uint32_t len, unsigned int seed)
{
	uint8_t *b = malloc(len);

	ck_assert_ptr_nonnull(b);
	srand(seed);
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)rand();
	return b;
}

/* the object cut into strips (data then parity), each its own buffer */
static void cut(const struct ec_codec *c, const uint8_t *obj, uint32_t len, uint8_t **s)
{
	uint32_t sl = ec_strip_len(len, c->d);

	for (int i = 0; i < c->d + c->p; i++) {
		s[i] = malloc(sl);
		ck_assert_ptr_nonnull(s[i]);
		if (i < c->d)
			memcpy(s[i], obj + (size_t)i * sl, sl);
	}
	ec_encode(c, sl, s, s + c->d);
}

static void free_strips(uint8_t **s, int n)
{
	for (int i = 0; i < n; i++)
		free(s[i]);
}

/* s[0 .. n - 1]: copies of orig's strips whose bit is set in keep (have[i]), 0xa5 bytes for the others */
static void lose_strips(uint8_t **s, bool *have, uint8_t **orig, int n, uint32_t sl, unsigned keep)
{
	for (int i = 0; i < n; i++) {
		have[i] = keep & (1U << i);
		s[i] = malloc(sl);
		ck_assert_ptr_nonnull(s[i]);
		if (have[i])
			memcpy(s[i], orig[i], sl);
		else
			memset(s[i], 0xa5, sl);
	}
}

/* lose the strips whose bit is clear in keep, rebuild, compare with the originals */
static void check_subset(const struct ec_codec *c, uint8_t **orig, uint32_t sl, unsigned keep)
{
	int n = c->d + c->p;
	uint8_t *s[SD_EC_MAX_STRIPS];
	bool have[SD_EC_MAX_STRIPS];

	lose_strips(s, have, orig, n, sl, keep);
	ck_assert_int_eq(ec_reconstruct(c, sl, s, have, ~0U), 0);
	for (int i = 0; i < n; i++)
		ck_assert_msg(!memcmp(s[i], orig[i], sl), "%d:%d keep %#x: strip %d differs",
			      c->d, c->p, keep, i);
	free_strips(s, n);
}

/* every subset of exactly d strips (or, with sample > 0, every sample-th one) */
static void check_scheme(int d, int p, unsigned int sample)
{
	struct ec_codec c;
	uint32_t sl = ec_strip_len(OBJ_LEN, d);
	uint8_t *obj = object(OBJ_LEN, (unsigned)(d * 100 + p));
	uint8_t *s[SD_EC_MAX_STRIPS];
	int n = d + p, nr_checked = 0;

	ck_assert_int_eq(ec_codec_init(&c, d, p), 0);
	cut(&c, obj, OBJ_LEN, s);
	/* the data strips are the object's bytes in order */
	for (int i = 0; i < d; i++)
		ck_assert(!memcmp(s[i], obj + (size_t)i * sl, sl));
	for (uint64_t keep = 0, k = 0; keep < (UINT64_C(1) << n); keep++) {
		if (__builtin_popcountll(keep) != d)
			continue;
		if (sample && k++ % sample)
			continue;
		check_subset(&c, s, sl, (unsigned)keep);
		nr_checked++;
	}
	ck_assert_int_gt(nr_checked, 0);
	free_strips(s, n);
	free(obj);
	ec_codec_free(&c);
}

START_TEST(test_round_trip)
{
	struct ec_codec c;
	uint8_t *obj = object(OBJ_LEN, 7), *s[6], *back = malloc(OBJ_LEN);
	uint32_t sl = ec_strip_len(OBJ_LEN, 4);

	ck_assert_int_eq(ec_codec_init(&c, 4, 2), 0);
	cut(&c, obj, OBJ_LEN, s);
	for (int i = 0; i < 4; i++)
		memcpy(back + (size_t)i * sl, s[i], sl);
	ck_assert(!memcmp(back, obj, OBJ_LEN));
	/* parity is not a copy of the data: a one-byte change moves every parity strip */
	s[1][100] ^= 1;
	{
		uint8_t *par[2] = { malloc(sl), malloc(sl) };

		ec_encode(&c, sl, s, par);
		ck_assert(par[0][100] != s[4][100] && par[1][100] != s[5][100]);
		ck_assert(!memcmp(par[0], s[4], 100));
		free(par[0]);
		free(par[1]);
	}
	free_strips(s, 6);
	free(back);
	free(obj);
	ec_codec_free(&c);
}
END_TEST

START_TEST(test_every_subset_2_1) { check_scheme(2, 1, 0); }
END_TEST

START_TEST(test_every_subset_4_2) { check_scheme(4, 2, 0); }
END_TEST

START_TEST(test_every_subset_2_3) { check_scheme(2, 3, 0); }
END_TEST

START_TEST(test_sample_8_3) { check_scheme(8, 3, 7); }
END_TEST

START_TEST(test_sample_16_4) { check_scheme(16, 4, 401); }
END_TEST

/*
 * Only the strips wanted are rebuilt: a read of data strip 0 leaves a
 * missing parity strip, or another missing data strip, alone; wanting a
 * missing parity strip rebuilds the missing data too, since it is encoded
 * from all of it.
 */
START_TEST(test_rebuild_wanted_only)
{
	static const struct {
		unsigned int have, want, rebuilt;
	} cases[] = {
		{ 0x1e, 1U << 0, 1U << 0 },		/* strips 0 and 5 lost */
		{ 0x3c, 1U << 0, 1U << 0 },		/* strips 0 and 1 lost */
		{ 0x1e, 1U << 5, (1U << 0) | (1U << 5) }, /* strips 0 and 5 lost */
	};
	struct ec_codec c;
	uint8_t *orig[6], *s[6];
	uint8_t *obj = object(OBJ_LEN, 5);
	uint32_t sl = OBJ_LEN / 4;

	ck_assert_int_eq(ec_codec_init(&c, 4, 2), 0);
	cut(&c, obj, OBJ_LEN, orig);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		bool have[6];

		lose_strips(s, have, orig, 6, sl, cases[k].have);
		ck_assert_int_eq(ec_reconstruct(&c, sl, s, have, cases[k].want), 0);
		for (int i = 0; i < 6; i++) {
			if (have[i] || (cases[k].rebuilt & (1U << i))) {
				ck_assert_msg(!memcmp(s[i], orig[i], sl), "case %zu: strip %d differs",
					      k, i);
				continue;
			}
			for (uint32_t b = 0; b < sl; b++)
				ck_assert_msg(s[i][b] == 0xa5, "case %zu: strip %d was written", k,
					      i);
		}
		free_strips(s, 6);
	}
	free_strips(orig, 6);
	free(obj);
	ec_codec_free(&c);
}
END_TEST

START_TEST(test_too_few)
{
	struct ec_codec c;
	uint8_t *s[6];
	bool have[6] = { true, false, true, false, true, false };
	uint8_t *obj = object(OBJ_LEN, 3);

	ck_assert_int_eq(ec_codec_init(&c, 4, 2), 0);
	cut(&c, obj, OBJ_LEN, s);
	ck_assert_int_eq(ec_reconstruct(&c, OBJ_LEN / 4, s, have, ~0U), -EINVAL);
	free_strips(s, 6);
	free(obj);
	ec_codec_free(&c);
}
END_TEST

START_TEST(test_bad_params)
{
	struct ec_codec c;
	int d, p;
	const int bad[][2] = { { 0, 1 }, { 1, 1 }, { 3, 1 }, { 6, 2 }, { 32, 1 }, { 4, 0 },
			       { 4, 16 }, { 2, -1 }, { -2, 1 } };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(ec_codec_init(&c, bad[i][0], bad[i][1]), -EINVAL);
		ck_assert(!ec_params_valid(bad[i][0], bad[i][1]));
	}
	ck_assert_int_eq(ec_strip_len(1000, 16), 0);
	ck_assert_int_eq(ec_strip_len(4096, 16), 256);
	/* the inode's encoding, sheepdog 1.0's: (D / 2) << 4 | P */
	ck_assert_int_eq(ec_dp_to_policy(4, 2), 0x22);
	ck_assert_int_eq(ec_dp_to_policy(16, 15), 0x8f);
	ck_assert(ec_policy_to_dp(0x22, &d, &p) && d == 4 && p == 2);
	ck_assert(ec_policy_to_dp(0x11, &d, &p) && d == 2 && p == 1);
	ck_assert(!ec_policy_to_dp(0, &d, &p));
	ck_assert(!ec_policy_to_dp(0x30, &d, &p)); /* 6:0 */
	ck_assert(!ec_policy_to_dp(0x31, &d, &p)); /* 6:1 */
	ck_assert(!ec_policy_to_dp(0x121, &d, &p));
}
END_TEST

START_TEST(test_strip_oid)
{
	uint64_t oid = vid_to_data_oid(0x7c2b25, 1234);

	for (int i = 0; i < SD_EC_MAX_STRIPS; i++) {
		uint64_t s = ec_strip_oid(oid, i);

		ck_assert_int_eq(ec_oid_strip(s), i);
		ck_assert_uint_eq(ec_base_oid(s), oid);
		ck_assert_uint_eq(oid_to_vid(s), 0x7c2b25);
		ck_assert_uint_eq(oid_to_idx(s), 1234);
		ck_assert(is_data_obj(s));
		ck_assert(!oid_is_valid(s)); /* a client never names a strip */
		ck_assert(ec_peer_oid_valid(s));
	}
	ck_assert_int_eq(ec_oid_strip(oid), -1);
	ck_assert(ec_peer_oid_valid(oid));
	/* no strip of an inode, and no index past the largest scheme */
	ck_assert(!ec_peer_oid_valid(ec_strip_oid(vid_to_vdi_oid(5), 0)));
	ck_assert(!ec_peer_oid_valid(ec_strip_oid(oid, SD_EC_MAX_STRIPS)));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ec");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nr_failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_every_subset_2_1);
	tcase_add_test(tc, test_every_subset_4_2);
	tcase_add_test(tc, test_every_subset_2_3);
	tcase_add_test(tc, test_sample_8_3);
	tcase_add_test(tc, test_sample_16_4);
	tcase_add_test(tc, test_too_few);
	tcase_add_test(tc, test_rebuild_wanted_only);
	tcase_add_test(tc, test_bad_params);
	tcase_add_test(tc, test_strip_oid);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
