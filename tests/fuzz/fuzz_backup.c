/*
 * The backup stream decoder (collie/backup_format.c), as vdi restore runs
 * it: the header, then every record to the end record.
 *
 * Input: byte 0 is the mode, the rest the stream. Mode bit 0 set: before
 * decoding, the harness signs the stream again (the header's checksum and
 * the chain of record checksums, following each record's stored_len), so
 * that mutations reach the checks behind the checksums.
 *
 * Invariants: every record the decoder returns lies inside the VDI and its
 * object, in increasing order; a DATA record's payload fits the buffer;
 * the decoder ends (0) only once, and only after an END record. Each
 * stream is read twice, its payloads read and checked in order, then
 * skipped and their sums checked apart (restore's first pass): both end
 * the same way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "../../collie/backup_format.h"
#include "../unit/backup_mem.h"
#include "fuzz.h"
#include "sheepdog_proto.h"

#define MAX_OBJ (1U << SD_MAX_BLOCK_SIZE_SHIFT)

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the checksums made right again, as an encoder would have written them */
static void resign(uint8_t *s, size_t len)
{
	uint64_t prev;
	size_t pos = BK_HEADER_LEN;

	if (len < BK_HEADER_LEN)
		return;
	prev = XXH3_64bits(s, BK_HEADER_LEN - 8);
	put_le64(s + BK_HEADER_LEN - 8, prev);
	while (len - pos >= BK_RECORD_LEN) {
		uint32_t stored = get_le32(s + pos + 20);
		size_t payload =
		    stored < len - pos - BK_RECORD_LEN ? stored : len - pos - BK_RECORD_LEN;
		XXH3_state_t st;

		XXH3_64bits_reset_withSeed(&st, prev);
		XXH3_64bits_update(&st, s + pos, BK_RECORD_LEN - 8);
		XXH3_64bits_update(&st, s + pos + BK_RECORD_LEN, payload);
		prev = XXH3_64bits_digest(&st);
		put_le64(s + pos + BK_RECORD_LEN - 8, prev);
		pos += BK_RECORD_LEN + payload;
	}
}

/*
 * Read the stream to its end: the result, *nr records. skip: payloads
 * skipped where the stream allows, their sums checked after the walk (as
 * restore's first pass does, in batches).
 */
static int read_stream(uint8_t *copy, size_t len, uint8_t *buf, bool skip, int *nr)
{
	struct mem in = { .data = copy, .len = len };
	struct bk_reader r;
	struct bk_record rec;
	struct bk_record *unchecked = NULL;
	int nr_unchecked = 0, ret;
	uint64_t next = 0;
	uint8_t chunk[4099];
	char err[160];

	*nr = 0;
	ret = bk_reader_open(&r, mem_read, &in);
	if (!ret && skip && bk_reader_skip_payloads(&r, mem_skip))
		FUZZ_ASSERT(r.hdr.flags & BK_F_ZSTD);
	while (!ret) {
		ret = bk_reader_next(&r, &rec, buf, MAX_OBJ);
		if (ret != 1)
			break;
		uint64_t start = ((uint64_t)rec.idx << r.hdr.block_size_shift) + rec.offset;

		FUZZ_ASSERT(rec.type == BK_DATA || rec.type == BK_ZERO);
		FUZZ_ASSERT(rec.length && rec.offset + (uint64_t)rec.length <= r.obj_size);
		FUZZ_ASSERT(start >= next && start + rec.length <= r.hdr.vdi_size);
		FUZZ_ASSERT(!rec.unchecked || skip);
		next = start + rec.length;
		if (rec.unchecked) {
			struct bk_record *u = realloc(unchecked, (nr_unchecked + 1) * sizeof(*u));

			FUZZ_ASSERT(u);
			unchecked = u;
			unchecked[nr_unchecked++] = rec;
		}
		(*nr)++;
		ret = 0;
	}
	if (ret == 0) {
		FUZZ_ASSERT(r.ended && in.pos == in.len);
		FUZZ_ASSERT(bk_reader_next(&r, &rec, buf, MAX_OBJ) == 0);
	}
	/* a damaged payload before the walk's end is the failure said */
	for (int i = 0; i < nr_unchecked; i++) {
		int vret = bk_record_verify(&unchecked[i], mem_pread, &in, chunk, sizeof(chunk), err,
					    sizeof(err));

		if (vret) {
			ret = vret;
			*nr = (int)unchecked[i].seq;
			break;
		}
	}
	free(unchecked);
	bk_reader_close(&r);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *buf;
	uint8_t *copy;
	int nr, nr_skipping, ret;

	if (!size)
		return 0;
	if (!buf)
		buf = malloc(MAX_OBJ);
	copy = malloc(size);
	if (!buf || !copy) {
		free(copy);
		return 0;
	}
	memcpy(copy, data + 1, size - 1);
	if (data[0] & 1)
		resign(copy, size - 1);
	/* payloads read and checked in order, or skipped and checked apart: the same end */
	ret = read_stream(copy, size - 1, buf, false, &nr);
	FUZZ_ASSERT(read_stream(copy, size - 1, buf, true, &nr_skipping) == ret);
	FUZZ_ASSERT(ret != 0 || nr == nr_skipping);
	free(copy);
	return 0;
}
