/* Request header checks and vid allocation. */
#include <string.h>

#include "proto_util.h"

bool sd_is_internal_op(uint8_t opcode)
{
	return opcode >= 0x80;
}

static bool is_obj_op(uint8_t opcode)
{
	return opcode == SD_OP_CREATE_AND_WRITE_OBJ || opcode == SD_OP_READ_OBJ ||
	       opcode == SD_OP_WRITE_OBJ || opcode == SD_OP_REMOVE_OBJ;
}

int sd_check_req_header(const struct sd_req *hdr)
{
	if (sd_is_internal_op(hdr->opcode)) {
		if (hdr->proto_ver != SD_SHEEP_PROTO_VER)
			return SD_RES_INVALID_VERSION;
	} else if (hdr->proto_ver > SD_PROTO_VER) {
		return SD_RES_VER_MISMATCH;
	}
	if (hdr->data_length > SD_MAX_DATA_LEN)
		return SD_RES_INVALID_PARMS;
	if (!is_obj_op(hdr->opcode))
		return SD_RES_SUCCESS;
	if (!oid_is_valid(hdr->obj.oid))
		return SD_RES_INVALID_PARMS;
	if ((hdr->flags & SD_FLAG_CMD_COW) &&
	    (hdr->opcode != SD_OP_CREATE_AND_WRITE_OBJ || !oid_is_valid(hdr->obj.cow_oid)))
		return SD_RES_INVALID_PARMS;
	/* no object is larger than SD_MAX_DATA_LEN; the daemon checks the real size */
	if (hdr->obj.offset > SD_MAX_DATA_LEN ||
	    hdr->obj.offset + hdr->data_length > (uint64_t)SD_MAX_DATA_LEN)
		return SD_RES_INVALID_PARMS;
	if ((hdr->opcode == SD_OP_WRITE_OBJ || hdr->opcode == SD_OP_CREATE_AND_WRITE_OBJ) &&
	    !(hdr->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	return SD_RES_SUCCESS;
}

uint32_t sd_name_to_vid(const char *name)
{
	return (uint32_t)(fnv_64a_buf(name, strlen(name), FNV1A_64_INIT) & (SD_NR_VDIS - 1));
}

uint32_t sd_vid_find_free(const uint8_t *bitmap, const char *name)
{
	uint32_t start = sd_name_to_vid(name), vid = start;

	do {
		if (vid != 0 && !sd_vid_test(bitmap, vid))
			return vid;
		vid = (vid + 1) & (SD_NR_VDIS - 1);
	} while (vid != start);
	return 0;
}

bool sd_name_is_valid(const char *name, size_t field_len)
{
	return name[0] != '\0' && memchr(name, '\0', field_len) != NULL;
}
