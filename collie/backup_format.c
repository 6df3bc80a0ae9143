/*
 * The VDI backup stream: encoder and decoder (format in backup_format.h).
 *
 * Checksums are XXH3-64 (libxxhash), compression one zstd frame per DATA
 * record (libzstd, with the frame's own content checksum on). Nothing here
 * talks to a daemon: collie/backup.c reads and writes the VDI.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "backup_format.h"
#include "sheepdog_proto.h"
#include "xxh.h"

#define BK_SUM_OFF (BK_HEADER_LEN - 8)
#define BK_ZSTD_LEVEL 3

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

uint64_t bk_hash(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

/* a name field: at most BK_NAME_LEN - 1 bytes and a NUL (the rest is zeros already) */
static void put_name(uint8_t *p, const char *name)
{
	memcpy(p, name, strnlen(name, BK_NAME_LEN - 1));
}

void bk_header_encode(const struct bk_header *h, uint8_t out[BK_HEADER_LEN])
{
	memset(out, 0, BK_HEADER_LEN);
	memcpy(out, BK_MAGIC, 8);
	put_le32(out + 8, h->version);
	put_le32(out + 12, BK_HEADER_LEN);
	put_le32(out + 16, h->flags);
	out[20] = h->block_size_shift;
	out[21] = h->copies;
	put_le16(out + 22, h->copy_policy);
	put_le64(out + 24, h->vdi_size);
	put_le64(out + 32, h->from_size);
	put_le32(out + 40, h->from_vid);
	put_le32(out + 44, h->to_vid);
	put_le32(out + 48, h->from_snap_id);
	put_le32(out + 52, h->to_snap_id);
	put_le64(out + 56, h->from_ctime);
	put_le64(out + 64, h->to_ctime);
	put_le64(out + 72, h->created);
	put_name(out + 80, h->name);
	put_name(out + 336, h->from_tag);
	put_name(out + 592, h->to_tag);
	put_le64(out + BK_SUM_OFF, XXH3_64bits(out, BK_SUM_OFF));
}

static int __attribute__((format(printf, 3, 4))) fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool has_nul(const uint8_t *p, size_t len)
{
	return memchr(p, '\0', len) != NULL;
}

/* the fields' values, once the bytes are known to be a version 1 header */
static int header_check(const struct bk_header *h, char *err, size_t len)
{
	bool incr = h->flags & BK_F_INCREMENTAL;
	uint64_t max;

	if (h->flags & ~BK_F_KNOWN)
		return fail(err, len, "unknown flags 0x%x", h->flags & ~BK_F_KNOWN);
	if (h->block_size_shift < SD_MIN_BLOCK_SIZE_SHIFT ||
	    h->block_size_shift > SD_MAX_BLOCK_SIZE_SHIFT)
		return fail(err, len, "unusable object size (block_size_shift %u)",
			    h->block_size_shift);
	max = (UINT64_C(1) << h->block_size_shift) * MAX_DATA_OBJS;
	if (!h->vdi_size || h->vdi_size > max || h->from_size > h->vdi_size)
		return fail(err, len, "impossible vdi size %llu (from %llu)",
			    (unsigned long long)h->vdi_size, (unsigned long long)h->from_size);
	if (incr != (h->from_size != 0))
		return fail(err, len, "%s stream with a base size of %llu",
			    incr ? "an incremental" : "a full", (unsigned long long)h->from_size);
	if (!h->name[0])
		return fail(err, len, "no vdi name");
	return 0;
}

int bk_header_decode(const uint8_t in[BK_HEADER_LEN], struct bk_header *h, char *err,
		     size_t err_len)
{
	if (memcmp(in, BK_MAGIC, 8))
		return fail(err, err_len, "not a collie backup stream (bad magic)");
	memset(h, 0, sizeof(*h));
	h->version = get_le32(in + 8);
	if (h->version != BK_VERSION)
		return fail(err, err_len, "backup stream version %u (this collie reads %d)",
			    h->version, BK_VERSION);
	if (get_le32(in + 12) != BK_HEADER_LEN)
		return fail(err, err_len, "header length %u (version 1 has %d)", get_le32(in + 12),
			    BK_HEADER_LEN);
	if (get_le64(in + BK_SUM_OFF) != XXH3_64bits(in, BK_SUM_OFF))
		return fail(err, err_len, "damaged header (checksum mismatch)");
	if (!has_nul(in + 80, BK_NAME_LEN) || !has_nul(in + 336, BK_NAME_LEN) ||
	    !has_nul(in + 592, BK_NAME_LEN))
		return fail(err, err_len, "unterminated name in the header");
	h->flags = get_le32(in + 16);
	h->block_size_shift = in[20];
	h->copies = in[21];
	h->copy_policy = get_le16(in + 22);
	h->vdi_size = get_le64(in + 24);
	h->from_size = get_le64(in + 32);
	h->from_vid = get_le32(in + 40);
	h->to_vid = get_le32(in + 44);
	h->from_snap_id = get_le32(in + 48);
	h->to_snap_id = get_le32(in + 52);
	h->from_ctime = get_le64(in + 56);
	h->to_ctime = get_le64(in + 64);
	h->created = get_le64(in + 72);
	memcpy(h->name, in + 80, BK_NAME_LEN);
	memcpy(h->from_tag, in + 336, BK_NAME_LEN);
	memcpy(h->to_tag, in + 592, BK_NAME_LEN);
	return header_check(h, err, err_len);
}

static void record_encode(const struct bk_record *rec, uint8_t out[BK_RECORD_LEN])
{
	memset(out, 0, BK_RECORD_LEN);
	put_le32(out, rec->type);
	put_le32(out + 4, rec->seq);
	put_le32(out + 8, rec->idx);
	put_le32(out + 12, rec->offset);
	put_le32(out + 16, rec->length);
	put_le32(out + 20, rec->stored_len);
	put_le64(out + 24, rec->value);
}

/* XXH3-64 of the record's first 40 bytes and its payload, seeded with prev */
static uint64_t record_sum(const uint8_t *hdr, const void *payload, size_t len, uint64_t prev)
{
	XXH3_state_t st;

	XXH3_64bits_reset_withSeed(&st, prev);
	XXH3_64bits_update(&st, hdr, BK_RECORD_LEN - 8);
	if (len)
		XXH3_64bits_update(&st, payload, len);
	return XXH3_64bits_digest(&st);
}

int bk_writer_open(struct bk_writer *w, const struct bk_header *h, bk_write_fn fn, void *arg)
{
	uint8_t buf[BK_HEADER_LEN];

	memset(w, 0, sizeof(*w));
	w->write = fn;
	w->arg = arg;
	w->hdr = *h;
	w->hdr.version = BK_VERSION;
	if (h->flags & BK_F_ZSTD) {
		w->cctx = ZSTD_createCCtx();
		w->zcap = ZSTD_compressBound((size_t)1 << h->block_size_shift);
		w->zbuf = malloc(w->zcap);
		if (!w->cctx || !w->zbuf)
			return -ENOMEM;
		ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, BK_ZSTD_LEVEL);
		ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
	}
	bk_header_encode(&w->hdr, buf);
	w->prev_sum = get_le64(buf + BK_SUM_OFF);
	w->bytes = BK_HEADER_LEN;
	return fn(arg, buf, BK_HEADER_LEN);
}

static int writer_put(struct bk_writer *w, struct bk_record *rec, const void *payload)
{
	uint8_t buf[BK_RECORD_LEN];
	uint64_t sum;
	int ret;

	rec->seq = w->seq++;
	record_encode(rec, buf);
	sum = record_sum(buf, payload, rec->stored_len, w->prev_sum);
	put_le64(buf + BK_RECORD_LEN - 8, sum);
	w->prev_sum = sum;
	ret = w->write(w->arg, buf, BK_RECORD_LEN);
	if (!ret && rec->stored_len)
		ret = w->write(w->arg, payload, rec->stored_len);
	w->bytes += BK_RECORD_LEN + rec->stored_len;
	return ret;
}

int bk_writer_data(struct bk_writer *w, uint32_t idx, uint32_t offset, uint32_t length,
		   const void *data, uint64_t base_hash)
{
	struct bk_record rec = { .type = BK_DATA,
				 .idx = idx,
				 .offset = offset,
				 .length = length,
				 .stored_len = length,
				 .value = base_hash };
	const void *payload = data;

	if (w->cctx) {
		size_t n = ZSTD_compress2(w->cctx, w->zbuf, w->zcap, data, length);

		if (ZSTD_isError(n))
			return -EIO;
		rec.stored_len = (uint32_t)n;
		payload = w->zbuf;
	}
	w->total += length;
	return writer_put(w, &rec, payload);
}

int bk_writer_zero(struct bk_writer *w, uint32_t idx, uint32_t offset, uint32_t length,
		   uint64_t base_hash)
{
	struct bk_record rec = {
		.type = BK_ZERO, .idx = idx, .offset = offset, .length = length, .value = base_hash
	};

	w->total += length;
	return writer_put(w, &rec, NULL);
}

int bk_writer_end(struct bk_writer *w)
{
	struct bk_record rec = { .type = BK_END, .value = w->total };

	return writer_put(w, &rec, NULL);
}

void bk_writer_close(struct bk_writer *w)
{
	ZSTD_freeCCtx(w->cctx);
	free(w->zbuf);
	w->cctx = NULL;
	w->zbuf = NULL;
}

/* exactly len bytes: 0, -EINVAL at a premature end (truncated), -EIO */
static int read_exact(struct bk_reader *r, void *buf, size_t len, const char *what)
{
	ssize_t n = r->read(r->arg, buf, len);

	if (n > 0)
		r->pos += (uint64_t)n;
	if (n < 0) {
		snprintf(r->err, sizeof(r->err), "failed to read the stream: %s",
			 strerror((int)-n));
		return -EIO;
	}
	if ((size_t)n < len)
		return fail(r->err, sizeof(r->err), "truncated stream (it ends inside %s)", what);
	return 0;
}

int bk_reader_open(struct bk_reader *r, bk_read_fn fn, void *arg)
{
	uint8_t buf[BK_HEADER_LEN];
	int ret;

	memset(r, 0, sizeof(*r));
	r->read = fn;
	r->arg = arg;
	ret = read_exact(r, buf, sizeof(buf), "the header");
	if (ret)
		return ret;
	ret = bk_header_decode(buf, &r->hdr, r->err, sizeof(r->err));
	if (ret)
		return ret;
	r->obj_size = UINT64_C(1) << r->hdr.block_size_shift;
	r->prev_sum = get_le64(buf + BK_SUM_OFF);
	if (r->hdr.flags & BK_F_ZSTD) {
		r->dctx = ZSTD_createDCtx();
		r->zcap = ZSTD_compressBound(r->obj_size);
		r->zbuf = malloc(r->zcap);
		if (!r->dctx || !r->zbuf) {
			snprintf(r->err, sizeof(r->err), "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

/* a record header's fields against the stream so far */
static int record_check(struct bk_reader *r, const struct bk_record *rec)
{
	uint64_t start = ((uint64_t)rec->idx << r->hdr.block_size_shift) + rec->offset;
	bool zstd = r->hdr.flags & BK_F_ZSTD;
	char *e = r->err;
	size_t el = sizeof(r->err);

	if (rec->seq != r->seq)
		return fail(e, el, "record %u out of sequence (found %u)", r->seq, rec->seq);
	if (rec->type == BK_END) {
		if (rec->idx || rec->offset || rec->length || rec->stored_len)
			return fail(e, el, "malformed end record");
		if (rec->value != r->total)
			return fail(e, el, "the end record counts %llu bytes, the records %llu",
				    (unsigned long long)rec->value, (unsigned long long)r->total);
		return 0;
	}
	if (rec->type != BK_DATA && rec->type != BK_ZERO)
		return fail(e, el, "record %u has unknown type %u", rec->seq, rec->type);
	if (rec->type == BK_ZERO && !(r->hdr.flags & BK_F_INCREMENTAL))
		return fail(e, el, "record %u: a zero range in a full stream", rec->seq);
	if (!rec->length || rec->idx >= MAX_DATA_OBJS || rec->offset >= r->obj_size ||
	    rec->length > r->obj_size - rec->offset || start < r->next_pos ||
	    start + rec->length > r->hdr.vdi_size)
		return fail(e, el, "record %u: bad range %u+%u of object %u", rec->seq, rec->offset,
			    rec->length, rec->idx);
	if (rec->type == BK_ZERO ? rec->stored_len != 0
				 : (zstd ? rec->stored_len > r->zcap || !rec->stored_len
					 : rec->stored_len != rec->length))
		return fail(e, el, "record %u: bad payload length %u", rec->seq, rec->stored_len);
	if (!(r->hdr.flags & BK_F_INCREMENTAL) && rec->value)
		return fail(e, el, "record %u: a base hash in a full stream", rec->seq);
	return 0;
}

int bk_reader_next(struct bk_reader *r, struct bk_record *rec, void *buf, size_t cap)
{
	uint8_t hb[BK_RECORD_LEN];
	void *payload;
	int ret;

	if (r->ended)
		return 0;
	ret = read_exact(r, hb, sizeof(hb), "a record header");
	if (ret)
		return ret == -EINVAL
			   ? fail(r->err, sizeof(r->err),
				  "truncated stream (no end record after %u records)", r->seq)
			   : ret;
	memset(rec, 0, sizeof(*rec));
	rec->type = get_le32(hb);
	rec->seq = get_le32(hb + 4);
	rec->idx = get_le32(hb + 8);
	rec->offset = get_le32(hb + 12);
	rec->length = get_le32(hb + 16);
	rec->stored_len = get_le32(hb + 20);
	rec->value = get_le64(hb + 24);
	if (get_le64(hb + 32))
		return fail(r->err, sizeof(r->err), "record %u: reserved field set", rec->seq);
	ret = record_check(r, rec);
	if (ret)
		return ret;
	if (cap < r->obj_size && rec->type == BK_DATA)
		return fail(r->err, sizeof(r->err), "internal error: buffer too small");
	payload = (r->hdr.flags & BK_F_ZSTD) ? r->zbuf : buf;
	if (rec->stored_len && r->skip) {
		rec->unchecked = true;
		rec->payload_pos = r->pos;
		rec->prev_sum = r->prev_sum;
		memcpy(rec->raw, hb, sizeof(hb));
		ret = r->skip(r->arg, rec->stored_len);
		if (ret == -EINVAL)
			return fail(r->err, sizeof(r->err),
				    "truncated stream (it ends inside a record's data)");
		if (ret) {
			snprintf(r->err, sizeof(r->err), "failed to read the stream: %s",
				 strerror(-ret));
			return -EIO;
		}
		r->pos += rec->stored_len;
	} else {
		if (rec->stored_len) {
			ret = read_exact(r, payload, rec->stored_len, "a record's data");
			if (ret)
				return ret;
		}
		if (record_sum(hb, payload, rec->stored_len, r->prev_sum) != get_le64(hb + 40))
			return fail(r->err, sizeof(r->err),
				    "damaged stream: record %u fails its checksum", rec->seq);
	}
	r->prev_sum = get_le64(hb + 40);
	r->seq++;
	if (rec->type == BK_END) {
		uint8_t extra;

		ret = read_exact(r, &extra, 1, "");
		if (ret == -EIO)
			return ret;
		if (!ret)
			return fail(r->err, sizeof(r->err), "trailing data after the end record");
		r->ended = true;
		return 0;
	}
	if (rec->type == BK_DATA && (r->hdr.flags & BK_F_ZSTD)) {
		size_t n = ZSTD_decompressDCtx(r->dctx, buf, rec->length, payload, rec->stored_len);

		if (ZSTD_isError(n) || n != rec->length)
			return fail(r->err, sizeof(r->err), "record %u: bad compressed data",
				    rec->seq);
	}
	r->total += rec->length;
	r->next_pos = ((uint64_t)rec->idx << r->hdr.block_size_shift) + rec->offset + rec->length;
	return 1;
}

int bk_reader_skip_payloads(struct bk_reader *r, bk_skip_fn fn)
{
	if (r->hdr.flags & BK_F_ZSTD)
		return -EINVAL;
	r->skip = fn;
	return 0;
}

int bk_record_verify(const struct bk_record *rec, bk_pread_fn fn, void *arg, void *chunk,
		     size_t chunk_len, char *err, size_t err_len)
{
	uint64_t off = rec->payload_pos;
	uint32_t left = rec->stored_len;
	XXH3_state_t st;

	XXH3_64bits_reset_withSeed(&st, rec->prev_sum);
	XXH3_64bits_update(&st, rec->raw, BK_RECORD_LEN - 8);
	while (left) {
		size_t want = left < chunk_len ? left : chunk_len;
		ssize_t n = fn(arg, chunk, want, off);

		if (n < 0) {
			snprintf(err, err_len, "failed to read the stream: %s", strerror((int)-n));
			return -EIO;
		}
		if (!n)
			return fail(err, err_len, "truncated stream (it ends inside a record's data)");
		XXH3_64bits_update(&st, chunk, (size_t)n);
		off += (uint64_t)n;
		left -= (uint32_t)n;
	}
	if (XXH3_64bits_digest(&st) != get_le64(rec->raw + BK_RECORD_LEN - 8))
		return fail(err, err_len, "damaged stream: record %u fails its checksum", rec->seq);
	return 0;
}

void bk_reader_close(struct bk_reader *r)
{
	ZSTD_freeDCtx(r->dctx);
	free(r->zbuf);
	r->dctx = NULL;
	r->zbuf = NULL;
}
