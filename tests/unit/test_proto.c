/*
 * Unit tests of lib/proto_util.c and the inline helpers of sheepdog_proto.h:
 * FNV-1a, vid allocation on the READ_VDIS bitmap, request header checks.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "proto_util.h"
#include "util.h"

/* names found by search whose first probed vid is an edge of the space */
#define NAME_VID_FFFFFF "vdi7791164"
#define NAME_VID_0 "vdi16677191"

START_TEST(test_fnv_vectors)
{
	/* the published FNV-1a 64-bit test vectors */
	ck_assert_uint_eq(fnv_64a_buf("", 0, FNV1A_64_INIT), UINT64_C(0xcbf29ce484222325));
	ck_assert_uint_eq(fnv_64a_buf("a", 1, FNV1A_64_INIT), UINT64_C(0xaf63dc4c8601ec8c));
	ck_assert_uint_eq(fnv_64a_buf("foobar", 6, FNV1A_64_INIT), UINT64_C(0x85944171f73967e8));
	ck_assert_uint_eq(fnv_64a_buf("test", 4, FNV1A_64_INIT), UINT64_C(0xf9e6e6ef197c2b25));
	/* incremental hashing is the same as one pass */
	ck_assert_uint_eq(fnv_64a_buf("bar", 3, fnv_64a_buf("foo", 3, FNV1A_64_INIT)),
			  UINT64_C(0x85944171f73967e8));
	/* bytes are unsigned */
	ck_assert_uint_ne(fnv_64a_buf("\xff", 1, FNV1A_64_INIT),
			  fnv_64a_buf("\x7f", 1, FNV1A_64_INIT));
}
END_TEST

START_TEST(test_name_to_vid)
{
	/* observed from QEMU against real sheepdog: "test" -> 0x7c2b25 */
	ck_assert_uint_eq(sd_name_to_vid("test"), 0x7c2b25);
	ck_assert_uint_eq(sd_name_to_vid("/abs/path/scratch/t.raw"), 0x53b816);
	ck_assert_uint_eq(sd_name_to_vid(""), 0x222325);
	ck_assert_uint_eq(sd_name_to_vid(NAME_VID_FFFFFF), 0xffffff);
	ck_assert_uint_eq(sd_name_to_vid(NAME_VID_0), 0);
}
END_TEST

static uint8_t *new_bitmap(void)
{
	uint8_t *b = calloc(1, SD_VDI_BITMAP_SIZE);

	ck_assert_ptr_ne(b, NULL);
	return b;
}

START_TEST(test_vid_bits)
{
	uint8_t *b = new_bitmap();

	ck_assert(!sd_vid_test(b, 0x7c2b25));
	sd_vid_set(b, 0x7c2b25);
	ck_assert(sd_vid_test(b, 0x7c2b25));
	ck_assert(!sd_vid_test(b, 0x7c2b24));
	ck_assert(!sd_vid_test(b, 0x7c2b26));
	/* byte v/8, bit v%8 (the little-endian unsigned long layout) */
	ck_assert_uint_eq(b[0x7c2b25 >> 3], 1U << (0x7c2b25 & 7));
	sd_vid_set(b, SD_NR_VDIS - 1);
	ck_assert_uint_eq(b[SD_VDI_BITMAP_SIZE - 1], 0x80);
	free(b);
}
END_TEST

START_TEST(test_vid_find_free_probe)
{
	uint8_t *b = new_bitmap();

	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0x7c2b25);
	sd_vid_set(b, 0x7c2b25);
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0x7c2b26);
	sd_vid_set(b, 0x7c2b26);
	sd_vid_set(b, 0x7c2b27);
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0x7c2b28);
	/* a hole in the chain is taken first */
	b[0x7c2b26 >> 3] &= ~(1U << (0x7c2b26 & 7));
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0x7c2b26);
	/* other names are unaffected */
	ck_assert_uint_eq(sd_vid_find_free(b, "foobar"), 0x3967e8);
	free(b);
}
END_TEST

START_TEST(test_vid_find_free_wrap)
{
	uint8_t *b = new_bitmap();

	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_FFFFFF), 0xffffff);
	sd_vid_set(b, 0xffffff);
	/* wraps past the end and skips vid 0 */
	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_FFFFFF), 1);
	sd_vid_set(b, 1);
	sd_vid_set(b, 2);
	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_FFFFFF), 3);
	free(b);
}
END_TEST

START_TEST(test_vid_find_free_skip_zero)
{
	uint8_t *b = new_bitmap();

	/* a name hashing to 0 must never get vid 0 (0 means a hole) */
	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_0), 1);
	/* even when bit 0 is clear and everything else is taken */
	memset(b, 0xff, SD_VDI_BITMAP_SIZE);
	b[0] = 0xfe;
	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_0), 0);
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0);
	free(b);
}
END_TEST

START_TEST(test_vid_find_free_full)
{
	uint8_t *b = new_bitmap();

	memset(b, 0xff, SD_VDI_BITMAP_SIZE);
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0);
	ck_assert_uint_eq(sd_vid_find_free(b, NAME_VID_FFFFFF), 0);
	/* one free vid far behind the start is still found */
	b[0x7c2b24 >> 3] &= ~(1U << (0x7c2b24 & 7));
	ck_assert_uint_eq(sd_vid_find_free(b, "test"), 0x7c2b24);
	free(b);
}
END_TEST

START_TEST(test_oid_helpers)
{
	ck_assert_uint_eq(vid_to_vdi_oid(0x7c2b25), UINT64_C(0x807c2b2500000000));
	ck_assert_uint_eq(vid_to_data_oid(0x7c2b25, 2), UINT64_C(0x007c2b2500000002));
	ck_assert_uint_eq(vid_to_vmstate_oid(0x7c2b25, 2), UINT64_C(0x407c2b2500000002));
	ck_assert_uint_eq(oid_to_vid(UINT64_C(0x807c2b2500000000)), 0x7c2b25);
	ck_assert_uint_eq(oid_to_idx(UINT64_C(0x007c2b25000fffff)), 0xfffff);
	ck_assert(is_vdi_obj(vid_to_vdi_oid(1)));
	ck_assert(is_data_obj(vid_to_data_oid(1, 0)));
	ck_assert(!is_data_obj(vid_to_vmstate_oid(1, 0)));
	ck_assert(is_vmstate_obj(vid_to_vmstate_oid(1, 0)));

	ck_assert(oid_is_valid(vid_to_vdi_oid(0x7c2b25)));
	ck_assert(oid_is_valid(vid_to_data_oid(0x7c2b25, MAX_DATA_OBJS - 1)));
	ck_assert(oid_is_valid(vid_to_vmstate_oid(0x7c2b25, 3)));
	ck_assert(!oid_is_valid(0));
	ck_assert(!oid_is_valid(vid_to_data_oid(0, 5)));
	ck_assert(!oid_is_valid(vid_to_vdi_oid(0)));
	ck_assert(!oid_is_valid(vid_to_vdi_oid(1) | 1)); /* inode with an index */
	ck_assert(!oid_is_valid(vid_to_data_oid(1, 0) | (UINT64_C(1) << 20)));
	ck_assert(!oid_is_valid(vid_to_data_oid(1, 0) | (UINT64_C(1) << 56)));
	ck_assert(!oid_is_valid(vid_to_vdi_oid(1) | VMSTATE_BIT));
}
END_TEST

START_TEST(test_name_is_valid)
{
	char name[SD_MAX_VDI_LEN];

	ck_assert(sd_name_is_valid("test", 5));
	memset(name, 0, sizeof(name));
	ck_assert(!sd_name_is_valid(name, sizeof(name)));
	memset(name, 'a', sizeof(name));
	ck_assert(!sd_name_is_valid(name, sizeof(name)));
	name[255] = '\0';
	ck_assert(sd_name_is_valid(name, sizeof(name)));
}
END_TEST

/* ---- sd_check_req_header ---- */

static struct sd_req obj_req(uint8_t opcode, uint64_t oid, uint32_t len, uint64_t off)
{
	struct sd_req h;

	memset(&h, 0, sizeof(h));
	h.opcode = opcode;
	h.data_length = len;
	h.obj.oid = oid;
	h.obj.offset = off;
	if (opcode == SD_OP_WRITE_OBJ || opcode == SD_OP_CREATE_AND_WRITE_OBJ)
		h.flags = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE;
	else
		h.flags = SD_FLAG_CMD_CACHE;
	return h;
}

static struct sd_req vdi_req(uint8_t opcode, uint8_t ver, uint32_t len)
{
	struct sd_req h;

	memset(&h, 0, sizeof(h));
	h.proto_ver = ver;
	h.opcode = opcode;
	h.data_length = len;
	h.flags = len ? SD_FLAG_CMD_WRITE : 0;
	return h;
}

static const uint8_t public_ops[] = {
	SD_OP_CREATE_AND_WRITE_OBJ, SD_OP_READ_OBJ, SD_OP_WRITE_OBJ, SD_OP_NEW_VDI,
	SD_OP_LOCK_VDI, SD_OP_RELEASE_VDI, SD_OP_GET_VDI_INFO, SD_OP_READ_VDIS,
	SD_OP_FLUSH_VDI, SD_OP_DEL_VDI, SD_OP_GET_CLUSTER_DEFAULT,
};

START_TEST(test_hdr_version_public)
{
	uint64_t oid = vid_to_data_oid(0x7c2b25, 0);

	for (size_t i = 0; i < ARRAY_SIZE(public_ops); i++) {
		uint8_t op = public_ops[i];
		struct sd_req h = obj_req(op, oid, 512, 0);

		for (int ver = 0; ver <= 1; ver++) {
			h.proto_ver = (uint8_t)ver;
			ck_assert_msg(sd_check_req_header(&h) == SD_RES_SUCCESS,
				      "op 0x%x version %d refused", op, ver);
		}
		for (int ver = 2; ver <= 255; ver++) {
			h.proto_ver = (uint8_t)ver;
			ck_assert_msg(sd_check_req_header(&h) == SD_RES_VER_MISMATCH,
				      "op 0x%x version %d gave %d", op, ver, sd_check_req_header(&h));
		}
	}
}
END_TEST

START_TEST(test_hdr_version_internal)
{
	struct sd_req h = vdi_req(SD_OP_MAKE_FS, SD_SHEEP_PROTO_VER, 0);

	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	for (int ver = 0; ver <= 255; ver++) {
		if (ver == SD_SHEEP_PROTO_VER)
			continue;
		h.proto_ver = (uint8_t)ver;
		ck_assert_msg(sd_check_req_header(&h) != SD_RES_SUCCESS,
			      "internal op accepted version %d", ver);
	}
	h.proto_ver = SD_PROTO_VER;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_VERSION);
	h.proto_ver = 0;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_VERSION);
	h.opcode = SD_OP_TRACE_READ;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_VERSION);
	h.opcode = 0xff;
	h.proto_ver = SD_SHEEP_PROTO_VER;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	ck_assert(sd_is_internal_op(0x80));
	ck_assert(sd_is_internal_op(0xff));
	ck_assert(!sd_is_internal_op(0x7f));
	ck_assert(!sd_is_internal_op(SD_OP_GET_CLUSTER_DEFAULT));
}
END_TEST

START_TEST(test_hdr_data_length)
{
	struct sd_req h = vdi_req(SD_OP_NEW_VDI, 0, SD_MAX_DATA_LEN);

	ck_assert_uint_ge(SD_MAX_DATA_LEN, SD_INODE_SIZE);
	ck_assert_uint_eq(SD_MAX_DATA_LEN, 16U << 20);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h.data_length = SD_MAX_DATA_LEN + 1;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h.data_length = UINT32_MAX;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = vdi_req(SD_OP_MAKE_FS, SD_SHEEP_PROTO_VER, SD_MAX_DATA_LEN + 1);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	/* the whole inode as QEMU reads it at open */
	h = obj_req(SD_OP_READ_OBJ, vid_to_vdi_oid(0x7c2b25), SD_INODE_SIZE, 0);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = obj_req(SD_OP_READ_OBJ, vid_to_data_oid(1, 0), UINT32_MAX, 0);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
}
END_TEST

START_TEST(test_hdr_oids)
{
	static const uint64_t bad[] = {
		0,
		UINT64_C(0x0000000000000005),		/* vid 0 */
		UINT64_C(0x8000000000000000),		/* inode of vid 0 */
		UINT64_C(0x807c2b2500000001),		/* inode with an index */
		UINT64_C(0x007c2b2500100000),		/* reserved index bits */
		UINT64_C(0x017c2b2500000000),		/* reserved type bits */
		UINT64_C(0xc07c2b2500000000),		/* inode and vmstate */
		UINT64_MAX,
	};
	static const uint8_t ops[] = { SD_OP_READ_OBJ, SD_OP_WRITE_OBJ,
				       SD_OP_CREATE_AND_WRITE_OBJ };

	for (size_t o = 0; o < ARRAY_SIZE(ops); o++) {
		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			struct sd_req h = obj_req(ops[o], bad[i], 512, 0);

			ck_assert_msg(sd_check_req_header(&h) == SD_RES_INVALID_PARMS,
				      "op 0x%x oid %016llx accepted", ops[o],
				      (unsigned long long)bad[i]);
		}
		struct sd_req h = obj_req(ops[o], vid_to_vmstate_oid(0x7c2b25, 1), 512, 0);
		ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	}
}
END_TEST

START_TEST(test_hdr_cow)
{
	uint64_t oid = vid_to_data_oid(0x8f5130, 0), cow = vid_to_data_oid(0x8f512f, 0);
	struct sd_req h = obj_req(SD_OP_CREATE_AND_WRITE_OBJ, oid, 4096, 1048576);

	/* the observed QEMU COW create: flags 0x07 */
	h.flags = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_COW | SD_FLAG_CMD_CACHE;
	h.obj.cow_oid = cow;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h.flags = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_COW | SD_FLAG_CMD_DIRECT;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	/* COW needs a valid source */
	h.obj.cow_oid = 0;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h.obj.cow_oid = vid_to_data_oid(0, 0);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	/* COW only with CREATE_AND_WRITE_OBJ */
	h = obj_req(SD_OP_WRITE_OBJ, oid, 4096, 0);
	h.flags |= SD_FLAG_CMD_COW;
	h.obj.cow_oid = cow;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = obj_req(SD_OP_READ_OBJ, oid, 4096, 0);
	h.flags |= SD_FLAG_CMD_COW;
	h.obj.cow_oid = cow;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	/* cow_oid without the flag is ignored */
	h = obj_req(SD_OP_CREATE_AND_WRITE_OBJ, oid, 4096, 0);
	h.obj.cow_oid = UINT64_MAX;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_hdr_write_flag)
{
	uint64_t oid = vid_to_data_oid(1, 0);
	struct sd_req h = obj_req(SD_OP_WRITE_OBJ, oid, 4096, 0);

	h.flags = SD_FLAG_CMD_CACHE;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = obj_req(SD_OP_CREATE_AND_WRITE_OBJ, oid, 4096, 0);
	h.flags = SD_FLAG_CMD_DIRECT;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h.flags = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_DIRECT;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_hdr_offsets)
{
	uint64_t data = vid_to_data_oid(0x7c2b25, 2), inode = vid_to_vdi_oid(0x7c2b25);
	struct sd_req h;

	/* QEMU's inode map update */
	h = obj_req(SD_OP_WRITE_OBJ, inode, 12, SD_INODE_HEADER_SIZE);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	/* the last entry of the data map */
	h = obj_req(SD_OP_WRITE_OBJ, inode, 4, SD_INODE_SIZE - 4);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	/* partial write inside an object */
	h = obj_req(SD_OP_CREATE_AND_WRITE_OBJ, data, 3584, 512);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = obj_req(SD_OP_READ_OBJ, data, 4096, (4 << 20) - 4096);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	/* far past any object */
	h = obj_req(SD_OP_READ_OBJ, data, 512, UINT64_C(1) << 40);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = obj_req(SD_OP_READ_OBJ, data, 512, UINT64_MAX);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = obj_req(SD_OP_WRITE_OBJ, data, 4096, UINT64_MAX - 100);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	/* offset + length past the largest object */
	h = obj_req(SD_OP_WRITE_OBJ, data, SD_MAX_DATA_LEN, 1);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
	h = obj_req(SD_OP_READ_OBJ, data, 1U << 20, SD_INODE_SIZE);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = obj_req(SD_OP_READ_OBJ, data, 4096, UINT64_C(1) << SD_MAX_BLOCK_SIZE_SHIFT);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
}
END_TEST

START_TEST(test_hdr_offsets_big_objects)
{
	/*
	 * The daemon accepts block_size_shift up to SD_MAX_BLOCK_SIZE_SHIFT
	 * (16 MiB objects), so every offset inside such an object must pass
	 * the header check: the upper part of an 8 or 16 MiB object is as
	 * legal as its first 4 MiB.
	 */
	uint64_t data = vid_to_data_oid(0x7c2b25, 2);
	uint64_t max_obj = UINT64_C(1) << SD_MAX_BLOCK_SIZE_SHIFT;
	struct sd_req h;

	h = obj_req(SD_OP_WRITE_OBJ, data, 4096, 8 << 20);
	ck_assert_msg(sd_check_req_header(&h) == SD_RES_SUCCESS,
		      "write at 8 MiB inside a 16 MiB object refused: %d", sd_check_req_header(&h));
	h = obj_req(SD_OP_READ_OBJ, data, 4096, max_obj - 4096);
	ck_assert_msg(sd_check_req_header(&h) == SD_RES_SUCCESS,
		      "read of the last 4 KiB of a 16 MiB object refused: %d",
		      sd_check_req_header(&h));
	h = obj_req(SD_OP_READ_OBJ, data, 4097, max_obj - 4096);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_INVALID_PARMS);
}
END_TEST

START_TEST(test_hdr_vdi_ops)
{
	/* VDI ops are not object requests: their oid bytes are vdi_size etc. */
	struct sd_req h = vdi_req(SD_OP_NEW_VDI, 0, SD_MAX_VDI_LEN);

	h.vdi.vdi_size = 1ULL << 30;
	h.vdi.block_size_shift = 22;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = vdi_req(SD_OP_LOCK_VDI, 1, SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = vdi_req(SD_OP_RELEASE_VDI, 0, 5);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = vdi_req(SD_OP_GET_CLUSTER_DEFAULT, 1, 0);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	h = vdi_req(SD_OP_READ_VDIS, 0, 0);
	h.data_length = SD_VDI_BITMAP_SIZE;
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
	/* FLUSH_VDI as QEMU sends it */
	h = obj_req(SD_OP_FLUSH_VDI, vid_to_vdi_oid(0x7c2b25), 0, 0);
	ck_assert_int_eq(sd_check_req_header(&h), SD_RES_SUCCESS);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto_util");
	TCase *tc = tcase_create("vid");

	tcase_add_test(tc, test_fnv_vectors);
	tcase_add_test(tc, test_name_to_vid);
	tcase_add_test(tc, test_vid_bits);
	tcase_add_test(tc, test_vid_find_free_probe);
	tcase_add_test(tc, test_vid_find_free_wrap);
	tcase_add_test(tc, test_vid_find_free_skip_zero);
	tcase_add_test(tc, test_vid_find_free_full);
	tcase_add_test(tc, test_oid_helpers);
	tcase_add_test(tc, test_name_is_valid);
	suite_add_tcase(s, tc);

	tc = tcase_create("header");
	tcase_add_test(tc, test_hdr_version_public);
	tcase_add_test(tc, test_hdr_version_internal);
	tcase_add_test(tc, test_hdr_data_length);
	tcase_add_test(tc, test_hdr_oids);
	tcase_add_test(tc, test_hdr_cow);
	tcase_add_test(tc, test_hdr_write_flag);
	tcase_add_test(tc, test_hdr_offsets);
	tcase_add_test(tc, test_hdr_offsets_big_objects);
	tcase_add_test(tc, test_hdr_vdi_ops);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(proto_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
