/*
 * Unit tests of collie/backup_format.c: streams written by the encoder are
 * read back by the decoder record by record, and every alteration a reader
 * must refuse (a flipped bit anywhere, a cut anywhere, a record dropped,
 * repeated or moved, an unknown version or flag, ranges out of order or
 * out of bounds) is refused with -EINVAL. The checksums are XXH3-64 as
 * the library's plain entry points compute it, whatever entry points collie
 * was built with: a stream one collie writes, any other reads. A reader
 * that skips the payloads, their sums checked apart (restore's first
 * pass), refuses every flip and cut the same.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h> /* the plain entry points: collie's go through the x86 dispatch */

#include "backup_format.h"
#include "backup_mem.h"

#define SHIFT 20
#define OBJ (1U << SHIFT)

static int mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->len + len > m->cap) {
		m->cap = (m->len + len) * 2;
		m->data = realloc(m->data, m->cap);
		ck_assert_ptr_nonnull(m->data);
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

static void header(struct bk_header *h, uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	h->version = BK_VERSION;
	h->flags = flags;
	h->block_size_shift = SHIFT;
	h->copies = 3;
	h->vdi_size = 4 * (uint64_t)OBJ;
	h->from_size = (flags & BK_F_INCREMENTAL) ? 2 * (uint64_t)OBJ : 0;
	h->to_vid = 0xabcdef;
	h->to_snap_id = 2;
	strcpy(h->name, "vm1");
	strcpy(h->to_tag, "tuesday");
}

static uint8_t *pattern(uint32_t len, uint8_t seed)
{
	uint8_t *p = malloc(len);

	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 9));
	return p;
}

/* a stream: DATA 0+4096, ZERO (incremental) 1:0+OBJ, DATA 3:512+OBJ-512, END */
static struct mem make_stream(uint32_t flags)
{
	struct mem m = { 0 };
	struct bk_writer w;
	struct bk_header h;
	uint8_t *a = pattern(4096, 1), *b = pattern(OBJ - 512, 2);
	uint64_t base = (flags & BK_F_INCREMENTAL) ? 0x1234 : 0;

	header(&h, flags);
	ck_assert_int_eq(bk_writer_open(&w, &h, mem_write, &m), 0);
	ck_assert_int_eq(bk_writer_data(&w, 0, 0, 4096, a, base), 0);
	if (flags & BK_F_INCREMENTAL)
		ck_assert_int_eq(bk_writer_zero(&w, 1, 0, OBJ, base), 0);
	ck_assert_int_eq(bk_writer_data(&w, 3, 512, OBJ - 512, b, base), 0);
	ck_assert_int_eq(bk_writer_end(&w), 0);
	ck_assert_uint_eq(w.bytes, m.len);
	bk_writer_close(&w);
	free(a);
	free(b);
	return m;
}

/*
 * read_all skips a raw stream's payloads and checks their sums after the
 * walk, in an odd-sized chunk (restore's first pass does it in batches)
 */
static bool skipping;

/* read m to its end: 0, or the first error */
static int read_all(struct mem *m, int *nr)
{
	struct bk_reader r;
	struct bk_record rec, unchecked[8];
	uint8_t *buf = malloc(OBJ), chunk[1000];
	char err[160];
	int ret, nr_unchecked = 0;

	m->pos = 0;
	*nr = 0;
	ret = bk_reader_open(&r, mem_read, m);
	if (!ret && skipping)
		ck_assert_int_eq(bk_reader_skip_payloads(&r, mem_skip),
				 (r.hdr.flags & BK_F_ZSTD) ? -EINVAL : 0);
	while (!ret) {
		ret = bk_reader_next(&r, &rec, buf, OBJ);
		if (ret != 1)
			break;
		ck_assert(rec.unchecked == (skipping && !(r.hdr.flags & BK_F_ZSTD) &&
					    rec.stored_len));
		if (rec.unchecked) {
			ck_assert_int_lt(nr_unchecked, 8);
			unchecked[nr_unchecked++] = rec;
		}
		(*nr)++;
		ret = 0;
	}
	for (int i = 0; i < nr_unchecked; i++) {
		int vret = bk_record_verify(&unchecked[i], mem_pread, m, chunk, sizeof(chunk), err,
					    sizeof(err));

		if (vret) {
			ret = vret;
			break;
		}
	}
	bk_reader_close(&r);
	free(buf);
	return ret;
}

static void check_round_trip(uint32_t flags)
{
	struct mem m = make_stream(flags);
	struct bk_reader r;
	struct bk_record rec;
	uint8_t *buf = malloc(OBJ), *a = pattern(4096, 1), *b = pattern(OBJ - 512, 2);

	ck_assert_int_eq(bk_reader_open(&r, mem_read, &m), 0);
	ck_assert_str_eq(r.hdr.name, "vm1");
	ck_assert_str_eq(r.hdr.to_tag, "tuesday");
	ck_assert_uint_eq(r.hdr.to_vid, 0xabcdef);
	ck_assert_uint_eq(r.hdr.copies, 3);
	ck_assert_uint_eq(r.hdr.flags, flags);
	ck_assert_int_eq(bk_reader_next(&r, &rec, buf, OBJ), 1);
	ck_assert_uint_eq(rec.type, BK_DATA);
	ck_assert_uint_eq(rec.length, 4096);
	ck_assert_mem_eq(buf, a, 4096);
	if (flags & BK_F_INCREMENTAL) {
		ck_assert_int_eq(bk_reader_next(&r, &rec, buf, OBJ), 1);
		ck_assert_uint_eq(rec.type, BK_ZERO);
		ck_assert_uint_eq(rec.idx, 1);
		ck_assert_uint_eq(rec.value, 0x1234);
	}
	ck_assert_int_eq(bk_reader_next(&r, &rec, buf, OBJ), 1);
	ck_assert_uint_eq(rec.idx, 3);
	ck_assert_uint_eq(rec.offset, 512);
	ck_assert_mem_eq(buf, b, OBJ - 512);
	if (flags & BK_F_ZSTD)
		ck_assert_uint_lt(rec.stored_len, OBJ / 4); /* the pattern compresses */
	ck_assert_int_eq(bk_reader_next(&r, &rec, buf, OBJ), 0);
	ck_assert_int_eq(bk_reader_next(&r, &rec, buf, OBJ), 0);
	bk_reader_close(&r);
	free(buf);
	free(a);
	free(b);
	free(m.data);
}

START_TEST(test_round_trip)
{
	check_round_trip(0);
	check_round_trip(BK_F_INCREMENTAL);
	check_round_trip(BK_F_ZSTD);
	check_round_trip(BK_F_ZSTD | BK_F_INCREMENTAL);
}
END_TEST

/* any single flipped bit is refused: headers, record headers, payloads */
static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* the stream's sums and bk_hash, against XXH3-64 computed here */
START_TEST(test_sums_are_xxh3)
{
	static const size_t lens[] = { 0, 1, 16, 17, 128, 129, 240, 241, 1023, 1024, 4097, OBJ };
	struct mem m = make_stream(0);
	uint8_t *a = pattern(OBJ, 9), *rec;
	uint64_t sum, want;

	ck_assert_uint_eq(XXH3_64bits("", 0), UINT64_C(0x2d06800538d394c2));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		ck_assert_uint_eq(bk_hash(a, lens[i]), XXH3_64bits(a, lens[i]));

	/* the header: bytes 0-1015 with seed 0, in 1016-1023 */
	sum = le64(m.data + BK_HEADER_LEN - 8);
	ck_assert_uint_eq(sum, XXH3_64bits(m.data, BK_HEADER_LEN - 8));
	/* the first record (DATA 0+4096): its 40 bytes and payload, seeded with the header's */
	rec = m.data + BK_HEADER_LEN;
	ck_assert_uint_eq(le64(rec + 20) & 0xffffffff, 4096); /* stored_len */
	memcpy(a, rec, BK_RECORD_LEN - 8);
	memcpy(a + BK_RECORD_LEN - 8, rec + BK_RECORD_LEN, 4096);
	want = XXH3_64bits_withSeed(a, BK_RECORD_LEN - 8 + 4096, sum);
	ck_assert_uint_eq(le64(rec + BK_RECORD_LEN - 8), want);
	free(a);
	free(m.data);
}
END_TEST

START_TEST(test_every_flip_refused)
{
	uint32_t flags = (uint32_t)_i; /* 0 or BK_F_ZSTD | BK_F_INCREMENTAL */
	struct mem m = make_stream(flags);
	int nr;

	for (int pass = 0; pass < 2; pass++) {
		skipping = pass;
		ck_assert_int_eq(read_all(&m, &nr), 0);
		ck_assert_int_eq(nr, flags ? 3 : 2);
		for (size_t off = 0; off < m.len;
		     off += (off < 2048 || off > m.len - 2048) ? 1 : 4093) {
			m.data[off] ^= 0x10;
			ck_assert_msg(read_all(&m, &nr) == -EINVAL, "flip at %zu accepted%s", off,
				      skipping ? " (payloads skipped)" : "");
			m.data[off] ^= 0x10;
		}
	}
	skipping = false;
	free(m.data);
}
END_TEST

/* every cut is refused: inside the header, a record, before the end record */
START_TEST(test_every_cut_refused)
{
	struct mem m = make_stream(BK_F_INCREMENTAL);
	size_t len = m.len;
	int nr;

	for (int pass = 0; pass < 2; pass++) {
		skipping = pass;
		for (size_t cut = 0; cut < len; cut += cut < 2048 ? 1 : 997) {
			m.len = cut;
			ck_assert_msg(read_all(&m, &nr) == -EINVAL, "cut at %zu accepted%s", cut,
				      skipping ? " (payloads skipped)" : "");
		}
	}
	skipping = false;
	free(m.data);
}
END_TEST

/* records dropped, repeated or swapped: the chain of checksums breaks */
START_TEST(test_chain)
{
	struct mem m = make_stream(BK_F_INCREMENTAL);
	size_t rec1 = BK_HEADER_LEN + BK_RECORD_LEN + 4096; /* the ZERO record */
	struct mem cut = { 0 };
	int nr;

	/* without the ZERO record */
	mem_write(&cut, m.data, rec1);
	mem_write(&cut, m.data + rec1 + BK_RECORD_LEN, m.len - rec1 - BK_RECORD_LEN);
	ck_assert_int_eq(read_all(&cut, &nr), -EINVAL);
	ck_assert_int_eq(nr, 1);
	/* with it twice */
	cut.len = 0;
	mem_write(&cut, m.data, rec1 + BK_RECORD_LEN);
	mem_write(&cut, m.data + rec1, m.len - rec1);
	ck_assert_int_eq(read_all(&cut, &nr), -EINVAL);
	ck_assert_int_eq(nr, 2);
	free(cut.data);
	free(m.data);
}
END_TEST

START_TEST(test_header_fields)
{
	uint8_t buf[BK_HEADER_LEN];
	struct bk_header h, out;
	char err[160];

	header(&h, BK_F_INCREMENTAL);
	h.version = BK_VERSION;
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), 0);
	ck_assert_uint_eq(out.from_size, h.from_size);
	/* the byte order is fixed: vdi_size at 24, little-endian */
	ck_assert_uint_eq(buf[24 + 2], 0x40);
	/* an unknown flag, an incremental stream without a base, no name */
	h.flags = 0x10;
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown flags"));
	header(&h, 0);
	h.from_size = OBJ;
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), -EINVAL);
	header(&h, 0);
	h.name[0] = '\0';
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), -EINVAL);
	header(&h, 0);
	h.block_size_shift = 30;
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "object size"));
	header(&h, 0);
	h.version = 2;
	bk_header_encode(&h, buf);
	ck_assert_int_eq(bk_header_decode(buf, &out, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "version 2"));
}
END_TEST

/* well-signed records that break the rules: order, bounds, types */
START_TEST(test_bad_ranges)
{
	static const struct {
		uint32_t idx, off, len;
	} bad[] = { { 4, 0, 512 }, { 0, 0, 0 }, { 0, OBJ - 512, 1024 }, { 2000000, 0, 512 } };
	uint8_t *data = pattern(OBJ, 3);
	struct bk_header h;
	struct bk_writer w;
	int nr;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct mem m = { 0 };

		header(&h, 0);
		bk_writer_open(&w, &h, mem_write, &m);
		bk_writer_data(&w, bad[i].idx, bad[i].off, bad[i].len, data, 0);
		bk_writer_end(&w);
		ck_assert_msg(read_all(&m, &nr) == -EINVAL, "range %zu accepted", i);
		free(m.data);
	}
	/* out of order, overlapping, a zero range in a full stream */
	for (int i = 0; i < 3; i++) {
		struct mem m = { 0 };

		header(&h, 0);
		bk_writer_open(&w, &h, mem_write, &m);
		bk_writer_data(&w, 1, 0, 4096, data, 0);
		if (i == 0)
			bk_writer_data(&w, 0, 0, 4096, data, 0);
		else if (i == 1)
			bk_writer_data(&w, 1, 2048, 4096, data, 0);
		else
			bk_writer_zero(&w, 2, 0, 4096, 0);
		bk_writer_end(&w);
		ck_assert_int_eq(read_all(&m, &nr), -EINVAL);
		ck_assert_int_eq(nr, 1);
		free(m.data);
	}
	free(data);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("backup_format");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_sums_are_xxh3);
	tcase_add_loop_test(tc, test_every_flip_refused, 0, 1);
	tcase_add_loop_test(tc, test_every_flip_refused, BK_F_ZSTD | BK_F_INCREMENTAL,
			    (BK_F_ZSTD | BK_F_INCREMENTAL) + 1);
	tcase_add_test(tc, test_every_cut_refused);
	tcase_add_test(tc, test_chain);
	tcase_add_test(tc, test_header_fields);
	tcase_add_test(tc, test_bad_ranges);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
