/* Pure helpers on protocol data: request checks, vid allocation. */
#ifndef PROTO_UTIL_H
#define PROTO_UTIL_H

#include <stdint.h>
#include <stdbool.h>
#include "internal_proto.h"

/* the largest payload a request or response may carry */
#define SD_MAX_DATA_LEN ((uint32_t)SD_INODE_SIZE > (UINT32_C(1) << SD_MAX_BLOCK_SIZE_SHIFT) \
			 ? (uint32_t)SD_INODE_SIZE : (UINT32_C(1) << SD_MAX_BLOCK_SIZE_SHIFT))

bool sd_is_internal_op(uint8_t opcode);

/*
 * Check a request header before anything else looks at it: the version byte
 * (0 or SD_PROTO_VER for public opcodes, SD_SHEEP_PROTO_VER for internal
 * ones), the payload length against SD_MAX_DATA_LEN, object ids and offsets
 * of object requests. Returns SD_RES_SUCCESS or the result to answer with.
 * Opcode knowledge (is it known at all) lives in the daemon's op table.
 */
int sd_check_req_header(const struct sd_req *hdr);

/*
 * Does [off, off + len) lie inside the largest object oid may be (an inode,
 * or a data or vmstate object of the largest object size)? For the nodes
 * that store objects: the gateway has checked the range against the VDI's
 * own object size already.
 */
static inline bool sd_obj_range_valid(uint64_t oid, uint64_t off, uint32_t len)
{
	uint64_t max = (oid & VDI_BIT) ? (uint64_t)SD_INODE_SIZE
				       : UINT64_C(1) << SD_MAX_BLOCK_SIZE_SHIFT;

	return off <= max && len <= max - off;
}

/* the first vid QEMU probes for a name: FNV-1a-64(name) mod 2^24 */
uint32_t sd_name_to_vid(const char *name);

/* bit helpers on the READ_VDIS bitmap (SD_VDI_BITMAP_SIZE bytes) */
static inline bool sd_vid_test(const uint8_t *bitmap, uint32_t vid)
{
	return bitmap[vid >> 3] & (1U << (vid & 7));
}
static inline void sd_vid_set(uint8_t *bitmap, uint32_t vid)
{
	bitmap[vid >> 3] |= (uint8_t)(1U << (vid & 7));
}

/*
 * Find the vid for a new VDI called name: linear probe from
 * sd_name_to_vid(name) (wrapping, skipping vid 0) to the first clear bit.
 * Returns the vid, or 0 when every vid is taken.
 */
uint32_t sd_vid_find_free(const uint8_t *bitmap, const char *name);

/* a name in a fixed field is valid when NUL-terminated and non-empty */
bool sd_name_is_valid(const char *name, size_t field_len);

#endif
