/*
 * Unit tests of sheep/inode.c: what a client may write into an inode. QEMU's
 * writes (map slices, a resize, the snapshot fields, the whole header sent
 * back as read) pass; a rename, copies, object size, ids or children
 * changed, a shrink, a size past the limit, or a snapshot's fields changed
 * are refused.
 */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "inode.h"

static struct sd_inode_header stored;

static void setup(void)
{
	memset(&stored, 0, sizeof(stored));
	strcpy(stored.name, "test");
	stored.create_time = UINT64_C(0x5f0000000000);
	stored.vdi_size = UINT64_C(1) << 30;
	stored.nr_copies = 3;
	stored.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	stored.snap_id = 1;
	stored.vdi_id = 0x7c2b25;
	stored.child_vdi_id[0] = 0x7c2b26;
}

/* the whole header, as a client sends it after changing h */
static int write_hdr(const struct sd_inode_header *h)
{
	return inode_check_write(&stored, 0, h, sizeof(*h));
}

/* one field of the header, written alone at its offset */
static int write_field(size_t off, const void *val, uint32_t len)
{
	return inode_check_write(&stored, off, val, len);
}

START_TEST(test_unchanged_header)
{
	struct sd_inode_header h = stored;

	ck_assert_int_eq(write_hdr(&h), SD_RES_SUCCESS);
	/* a part of it too */
	ck_assert_int_eq(write_field(10, (char *)&h + 10, 1000), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_map_writes)
{
	uint32_t map[128] = { 0x7c2b25, 0, 0x123456 };
	char big[8192];

	ck_assert_int_eq(write_field(SD_INODE_HEADER_SIZE, map, sizeof(map)), SD_RES_SUCCESS);
	ck_assert_int_eq(write_field(SD_INODE_SIZE - 4, map, 4), SD_RES_SUCCESS);
	/* a write across the end of the header: the header part must match */
	memset(big, 0, sizeof(big));
	memcpy(big, (char *)&stored + SD_INODE_HEADER_SIZE - 100, 100);
	ck_assert_int_eq(write_field(SD_INODE_HEADER_SIZE - 100, big, sizeof(big)), SD_RES_SUCCESS);
	big[99] = 1; /* the last byte of child_vdi_id[] */
	ck_assert_int_eq(write_field(SD_INODE_HEADER_SIZE - 100, big, sizeof(big)),
			 SD_RES_INVALID_PARMS);
}
END_TEST

START_TEST(test_resize)
{
	struct sd_inode_header h = stored;
	uint64_t size;

	h.vdi_size = UINT64_C(2) << 30;
	ck_assert_int_eq(write_hdr(&h), SD_RES_SUCCESS);
	/* the largest size of 4 MiB objects: 4 TiB */
	h.vdi_size = (uint64_t)MAX_DATA_OBJS << SD_DEFAULT_BLOCK_SIZE_SHIFT;
	ck_assert_int_eq(write_hdr(&h), SD_RES_SUCCESS);
	h.vdi_size++;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h.vdi_size = UINT64_MAX;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	/* shrinking is refused, as QEMU refuses it */
	h.vdi_size = stored.vdi_size - 512;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h.vdi_size = 0;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	/* the field alone */
	size = UINT64_C(3) << 30;
	ck_assert_int_eq(write_field(offsetof(struct sd_inode_header, vdi_size), &size, 8),
			 SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_snapshot_fields)
{
	struct sd_inode_header h = stored;

	strcpy(h.tag, "snap1");
	h.vm_state_size = 1234;
	h.vm_clock_nsec = 5678;
	ck_assert_int_eq(write_hdr(&h), SD_RES_SUCCESS);
	/* a tag without its NUL */
	memset(h.tag, 'a', sizeof(h.tag));
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
}
END_TEST

START_TEST(test_snapshot_frozen)
{
	struct sd_inode_header h;

	stored.snap_ctime = UINT64_C(0x5f00000100000000);
	strcpy(stored.tag, "snap1");
	h = stored;
	ck_assert_int_eq(write_hdr(&h), SD_RES_SUCCESS);
	strcpy(h.tag, "snap2");
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.vdi_size *= 2;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.vm_state_size = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	/* its map is the client's (QEMU's snapshot delete zeroes entries) */
	ck_assert_int_eq(write_field(SD_INODE_HEADER_SIZE, "\0\0\0\0", 4), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_daemon_fields)
{
	struct sd_inode_header h;
	uint8_t shift = 30, copies = 0;

	h = stored;
	strcpy(h.name, "canary");
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	memset(h.name, 0, sizeof(h.name));
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	/* bytes after the name's NUL count too */
	h = stored;
	h.name[100] = 'x';
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.nr_copies = 0;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.nr_copies = 31;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.block_size_shift = 0;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.snap_ctime = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.create_time = 0;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.copy_policy = 0x22;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.snap_id = 7;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.vdi_id = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.parent_vdi_id = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	h = stored;
	h.child_vdi_id[SD_MAX_CHILDREN - 1] = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
	/* one byte alone, as the attack of the issue wrote it */
	ck_assert_int_eq(write_field(offsetof(struct sd_inode_header, block_size_shift), &shift, 1),
			 SD_RES_INVALID_PARMS);
	ck_assert_int_eq(write_field(offsetof(struct sd_inode_header, nr_copies), &copies, 1),
			 SD_RES_INVALID_PARMS);
	/* allowed and refused changes in one write: refused */
	h = stored;
	h.vdi_size *= 2;
	h.nr_copies = 1;
	ck_assert_int_eq(write_hdr(&h), SD_RES_INVALID_PARMS);
}
END_TEST

static Suite *inode_suite(void)
{
	Suite *s = suite_create("inode");
	TCase *tc = tcase_create("write");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_unchanged_header);
	tcase_add_test(tc, test_map_writes);
	tcase_add_test(tc, test_resize);
	tcase_add_test(tc, test_snapshot_fields);
	tcase_add_test(tc, test_snapshot_frozen);
	tcase_add_test(tc, test_daemon_fields);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(inode_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
