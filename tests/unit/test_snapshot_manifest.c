/*
 * Unit tests of collie/snapshot_manifest.c: a manifest formatted and
 * parsed back is the same; names with any byte survive the escaping; a
 * flipped byte, a cut, an unknown or missing field, chunks out of order,
 * another version are refused with the line that is wrong.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "snapshot_manifest.h"

static void sample(struct cs_manifest *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->tag, "monday.1");
	m->created = 1700000000;
	m->chunk_size = 65536;
	m->copies = 3;
	m->block_size_shift = 22;
	m->nr_vdis = 2;
	m->vdis = calloc(2, sizeof(*m->vdis));
	strcpy(m->vdis[0].name, "vm one=%\n\xff");
	strcpy(m->vdis[0].tag, "s 1");
	m->vdis[0].vid = 0xa1b2c3;
	m->vdis[0].snap_id = 1;
	m->vdis[0].snapshot = true;
	m->vdis[0].size = 12 << 20;
	m->vdis[0].copies = 3;
	m->vdis[0].block_size_shift = 22;
	m->vdis[0].nr_chunks = 2;
	m->vdis[0].chunks = calloc(2, sizeof(struct cs_chunk));
	m->vdis[0].chunks[1].offset = 4 << 20;
	cs_hash("a", 1, m->vdis[0].chunks[0].hash);
	cs_hash("b", 1, m->vdis[0].chunks[1].hash);
	strcpy(m->vdis[1].name, "clone");
	m->vdis[1].vid = 5;
	m->vdis[1].parent = 0xa1b2c3;
	m->vdis[1].snap_id = 1;
	m->vdis[1].size = 1 << 20;
	m->vdis[1].copies = 2;
	m->vdis[1].copy_policy = 0x42;
	m->vdis[1].erasure = true;
	m->vdis[1].block_size_shift = 20;
	m->vdis[1].chunks = calloc(1, sizeof(struct cs_chunk));
}

static int parse(const char *text, size_t len, char *err)
{
	struct cs_manifest m;
	int ret = cs_manifest_parse(text, len, &m, err, 160);

	cs_manifest_free(&m);
	return ret;
}

START_TEST(test_round_trip)
{
	struct cs_manifest m, back;
	char err[160];
	size_t len;
	char *text;

	sample(&m);
	text = cs_manifest_format(&m, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(cs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	ck_assert_str_eq(back.tag, "monday.1");
	ck_assert_uint_eq(back.nr_vdis, 2);
	ck_assert_str_eq(back.vdis[0].name, m.vdis[0].name);
	ck_assert_str_eq(back.vdis[0].tag, "s 1");
	ck_assert(back.vdis[0].snapshot);
	ck_assert_uint_eq(back.vdis[0].nr_chunks, 2);
	ck_assert_mem_eq(back.vdis[0].chunks[1].hash, m.vdis[0].chunks[1].hash, CS_HASH_LEN);
	ck_assert_uint_eq(back.vdis[1].parent, 0xa1b2c3);
	ck_assert(back.vdis[1].erasure);
	ck_assert_uint_eq(back.vdis[1].copy_policy, 0x42);
	ck_assert_ptr_nonnull(strstr(text, "redundancy=erasure"));
	cs_manifest_free(&back);
	/* every flipped byte and every cut is refused */
	for (size_t i = 0; i < len; i++) {
		text[i] ^= 0x20;
		ck_assert_msg(parse(text, len, err) == -EINVAL, "flip at %zu accepted", i);
		text[i] ^= 0x20;
		ck_assert_msg(parse(text, i, err) == -EINVAL, "cut at %zu accepted", i);
	}
	free(text);
	cs_manifest_free(&m);
}
END_TEST

/* text + its checksum line, parsed: the error, with err filled */
static int parse_signed(const char *body, char *err)
{
	char *text = malloc(strlen(body) + 64);
	int ret;

	ck_assert_ptr_nonnull(text);
	sprintf(text, "%schecksum %016llx\n", body,
		(unsigned long long)XXH3_64bits(body, strlen(body)));
	ret = parse(text, strlen(text), err);
	free(text);
	return ret;
}

#define HEAD                                                                                       \
	"sheepdog-cluster-snapshot 1\ntag t\ncreated 1\nchunk-size 65536\n"                        \
	"cluster copies=1 block-size-shift=22 ctime=1\n"
#define VDI(extra, chunks)                                                                         \
	"vdi name=v tag= vid=5 parent=0 snap-id=1 snapshot=0 size=8388608 copies=1 "               \
	"copy-policy=0 redundancy=replicated block-size-shift=22 create-time=1 snap-ctime=0 "      \
	"vm-clock-nsec=0 vm-state-size=0" extra " delta=0 lines=" chunks "\n"
#define C0 "c 0 00000000000000000000000000000001\n"
#define C1 "c 65536 00000000000000000000000000000002\n"

START_TEST(test_rules)
{
	char err[160];

	ck_assert_int_eq(parse_signed(HEAD VDI("", "2") C0 C1 "end vdis=1\n", err), 0);
	ck_assert_int_eq(parse_signed(HEAD VDI("", "2") C1 C0 "end vdis=1\n", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "out of place"));
	ck_assert_int_eq(parse_signed(HEAD VDI(" color=red", "1") C0 "end vdis=1\n", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown field"));
	ck_assert_int_eq(parse_signed(HEAD VDI("", "1") C0 "end vdis=2\n", err), -EINVAL);
	ck_assert_int_eq(parse_signed(HEAD VDI("", "3") C0 C1 "end vdis=1\n", err), -EINVAL);
	ck_assert_int_eq(parse_signed(HEAD VDI("", "1") C0 "end vdis=1\nmore\n", err), -EINVAL);
	ck_assert_int_eq(parse_signed(HEAD VDI(" copies=2", "1") C0 "end vdis=1\n", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "repeated"));
	ck_assert_int_eq(parse_signed("sheepdog-cluster-snapshot 2\n", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "version 2"));
	/* a chunk past the vdi's end, or off a chunk boundary */
	ck_assert_int_eq(
	    parse_signed(HEAD VDI("", "1") "c 8388608 00000000000000000000000000000001\n"
					   "end vdis=1\n",
			 err),
	    -EINVAL);
	ck_assert_int_eq(parse_signed(HEAD VDI("", "1") "c 512 00000000000000000000000000000001\n"
							"end vdis=1\n",
				      err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "line 7"));
	/* z lines only in a delta, and only of a chunk the parent has */
	ck_assert_int_eq(parse_signed(HEAD VDI("", "1") "z 0\nend vdis=1\n", err), -EINVAL);
}
END_TEST

/* a child listed after its parent is written as a delta and read back whole */
START_TEST(test_delta)
{
	struct cs_manifest m, back;
	char err[160];
	size_t len;
	char *text;

	sample(&m);
	/* the clone: the parent's first chunk changed, its second gone (clone is 1 MiB: cut) */
	m.vdis[1].size = 12 << 20;
	m.vdis[1].block_size_shift = 22;
	m.vdis[1].nr_chunks = 1;
	m.vdis[1].chunks = realloc(m.vdis[1].chunks, 2 * sizeof(struct cs_chunk));
	cs_hash("c", 1, m.vdis[1].chunks[0].hash);
	text = cs_manifest_format(&m, &len);
	ck_assert_ptr_nonnull(strstr(text, "delta=1 lines=2\nc 0 "));
	ck_assert_ptr_nonnull(strstr(text, "\nz 4194304\n"));
	ck_assert_int_eq(cs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	ck_assert_uint_eq(back.vdis[1].nr_chunks, 1);
	ck_assert_mem_eq(back.vdis[1].chunks[0].hash, m.vdis[1].chunks[0].hash, CS_HASH_LEN);
	cs_manifest_free(&back);
	free(text);
	/* unchanged: no line at all */
	memcpy(m.vdis[1].chunks, m.vdis[0].chunks, 2 * sizeof(struct cs_chunk));
	m.vdis[1].nr_chunks = 2;
	text = cs_manifest_format(&m, &len);
	ck_assert_ptr_nonnull(strstr(text, "delta=1 lines=0\nend"));
	ck_assert_int_eq(cs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	ck_assert_uint_eq(back.vdis[1].nr_chunks, 2);
	cs_manifest_free(&back);
	free(text);
	cs_manifest_free(&m);
}
END_TEST

START_TEST(test_tags)
{
	ck_assert(cs_tag_valid("monday-2024_01.full"));
	ck_assert(!cs_tag_valid(""));
	ck_assert(!cs_tag_valid(".hidden"));
	ck_assert(!cs_tag_valid("a/b"));
	ck_assert(!cs_tag_valid("a b"));
	ck_assert(
	    !cs_tag_valid("0123456789012345678901234567890123456789012345678901234567890123x"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot_manifest");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_rules);
	tcase_add_test(tc, test_tags);
	tcase_add_test(tc, test_delta);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
