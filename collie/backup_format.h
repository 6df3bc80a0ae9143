/*
 * The VDI backup stream (collie vdi backup / vdi restore), version 1.
 *
 * A stream is a header, then records, then an END record, nothing after.
 * Every integer is little-endian, whatever the host.
 *
 * Header (BK_HEADER_LEN bytes):
 *      0  magic "SDBACKUP"
 *      8  u32 version (1)            12  u32 header length (1024)
 *     16  u32 flags: BK_F_INCREMENTAL, BK_F_ZSTD
 *     20  u8 block_size_shift        21  u8 copies    22  u16 copy_policy
 *     24  u64 vdi_size (the TO snapshot's)
 *     32  u64 from_size (the FROM snapshot's; 0 in a full backup)
 *     40  u32 from_vid   44  u32 to_vid   48  u32 from_snap_id   52  u32 to_snap_id
 *     56  u64 from_ctime 64  u64 to_ctime (the snapshots' snap_ctime)
 *     72  u64 created (seconds since 1970)
 *     80  name[256]   336  from_tag[256]   592  to_tag[256] (NUL-terminated)
 *    848  reserved, zeros
 *   1016  u64 checksum: XXH3-64 (seed 0) of bytes 0-1015
 *
 * Record header (BK_RECORD_LEN bytes), then stored_len bytes of payload:
 *      0  u32 type: BK_DATA, BK_ZERO, BK_END
 *      4  u32 seq: 0 for the first record, +1 for each
 *      8  u32 idx (object index)      12  u32 offset (in the object)
 *     16  u32 length (bytes of the VDI the record covers)
 *     20  u32 stored_len (payload bytes: length for raw DATA, the zstd frame's
 *         size for compressed DATA, 0 for ZERO and END)
 *     24  u64 value: DATA and ZERO of an incremental stream: XXH3-64 of the
 *         whole base object (zeros for a hole) the range is applied to, 0 in
 *         a full stream; END: the sum of the lengths of every record
 *     32  u64 reserved, zero
 *     40  u64 checksum: XXH3-64 of bytes 0-39 and the payload, seeded with the
 *         checksum before it (the header's for seq 0): the records are chained,
 *         so a record lost, repeated or moved breaks the chain
 *
 * DATA: length bytes at (idx, offset) become the payload (raw, or one zstd
 * frame that decompresses to exactly length bytes). ZERO: they become zeros
 * (a restore may release a whole object). Ranges come in increasing order of
 * (idx, offset), never overlap, stay inside one object and inside vdi_size.
 * A full stream holds DATA only: what it omits is zeros.
 */
#ifndef BACKUP_FORMAT_H
#define BACKUP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BK_MAGIC "SDBACKUP"
#define BK_VERSION 1
#define BK_HEADER_LEN 1024
#define BK_RECORD_LEN 48
#define BK_NAME_LEN 256

#define BK_F_INCREMENTAL 0x1
#define BK_F_ZSTD 0x2
#define BK_F_KNOWN (BK_F_INCREMENTAL | BK_F_ZSTD)

#define BK_DATA 1
#define BK_ZERO 2
#define BK_END 3

struct bk_header {
	uint32_t version;
	uint32_t flags;
	uint8_t block_size_shift;
	uint8_t copies;
	uint16_t copy_policy;
	uint64_t vdi_size;
	uint64_t from_size;
	uint32_t from_vid, to_vid;
	uint32_t from_snap_id, to_snap_id;
	uint64_t from_ctime, to_ctime;
	uint64_t created;
	char name[BK_NAME_LEN];
	char from_tag[BK_NAME_LEN];
	char to_tag[BK_NAME_LEN];
};

struct bk_record {
	uint32_t type;
	uint32_t seq;
	uint32_t idx;
	uint32_t offset;
	uint32_t length;
	uint32_t stored_len;
	uint64_t value;
	/*
	 * A record whose payload the reader skipped (bk_reader_skip_payloads):
	 * its checksum is still to be checked, with bk_record_verify. Where the
	 * payload is in the stream, the sum it follows, and its header's bytes.
	 */
	bool unchecked;
	uint64_t payload_pos;
	uint64_t prev_sum;
	uint8_t raw[BK_RECORD_LEN];
};

/* write len bytes: 0 or -errno */
typedef int (*bk_write_fn)(void *arg, const void *buf, size_t len);
/* read up to len bytes: the count (less only at the end of input) or -errno */
typedef ssize_t (*bk_read_fn)(void *arg, void *buf, size_t len);
/* move past len bytes: 0, -EINVAL when fewer are left (truncated), or -errno */
typedef int (*bk_skip_fn)(void *arg, size_t len);
/* read up to len bytes at off: the count (less only at the end) or -errno */
typedef ssize_t (*bk_pread_fn)(void *arg, void *buf, size_t len, uint64_t off);

/* header <-> bytes; decode checks everything a reader must (see bk_header_check) */
void bk_header_encode(const struct bk_header *h, uint8_t out[BK_HEADER_LEN]);
/* 0, or -EINVAL (err says why) */
int bk_header_decode(const uint8_t in[BK_HEADER_LEN], struct bk_header *h, char *err,
		     size_t err_len);

struct bk_writer {
	bk_write_fn write;
	void *arg;
	struct bk_header hdr;
	uint64_t prev_sum;
	uint32_t seq;
	uint64_t total;
	void *cctx; /* ZSTD_CCtx */
	void *zbuf;
	size_t zcap;
	uint64_t bytes; /* written so far, header included */
};

/* write the header: 0 or -errno */
int bk_writer_open(struct bk_writer *w, const struct bk_header *h, bk_write_fn fn, void *arg);
/* a DATA record (compressed when the header says zstd): 0 or -errno */
int bk_writer_data(struct bk_writer *w, uint32_t idx, uint32_t offset, uint32_t length,
		   const void *data, uint64_t base_hash);
int bk_writer_zero(struct bk_writer *w, uint32_t idx, uint32_t offset, uint32_t length,
		   uint64_t base_hash);
/* the END record: 0 or -errno */
int bk_writer_end(struct bk_writer *w);
void bk_writer_close(struct bk_writer *w);

struct bk_reader {
	bk_read_fn read;
	bk_skip_fn skip; /* set: payloads are skipped, their sums left to the caller */
	void *arg;
	uint64_t pos; /* bytes of the stream read or skipped */
	struct bk_header hdr;
	uint64_t obj_size;
	uint64_t prev_sum;
	uint32_t seq;
	uint64_t total;
	uint64_t next_pos; /* the lowest VDI offset the next range may start at */
	bool ended;
	void *dctx; /* ZSTD_DCtx */
	void *zbuf;
	size_t zcap;
	char err[160];
};

/* read and check the header: 0, or -EINVAL / -EIO (r->err says why) */
int bk_reader_open(struct bk_reader *r, bk_read_fn fn, void *arg);
/*
 * The next record, checked: 1 with rec filled (a DATA record's length
 * bytes in buf, which holds cap >= the object size), 0 after the END record
 * (checked, and nothing after it), -EINVAL for a damaged or truncated
 * stream, -EIO for a failed read (r->err says why).
 */
int bk_reader_next(struct bk_reader *r, struct bk_record *rec, void *buf, size_t cap);
void bk_reader_close(struct bk_reader *r);
/*
 * From now on, skip each payload with fn instead of reading it: the
 * records come back with unchecked set (those with a payload), and the
 * caller checks each with bk_record_verify before it trusts the stream.
 * Only for a stream without compression (its data must be decompressed
 * to be checked): -EINVAL for a compressed one.
 */
int bk_reader_skip_payloads(struct bk_reader *r, bk_skip_fn fn);
/*
 * The checksum of a record that came back unchecked, its payload read
 * with fn (at rec->payload_pos) through chunk (chunk_len bytes): 0 when it
 * matches, -EINVAL when it does not or the payload is cut short, -EIO when
 * fn fails; err says why. Thread-safe: records can be checked in parallel.
 */
int bk_record_verify(const struct bk_record *rec, bk_pread_fn fn, void *arg, void *chunk,
		     size_t chunk_len, char *err, size_t err_len);

/* XXH3-64 of a buffer (the hash the records name base objects by) */
uint64_t bk_hash(const void *buf, size_t len);

#endif
