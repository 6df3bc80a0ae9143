/*
 * Unit tests of sheep/nbd_io.c: how NBD commands map onto a VDI's objects
 * through the gateway (gateway.h), which is a stand-in here keeping every
 * object in memory and recording each call. What is checked:
 *
 * - an export loads its size, object size and data map from the inode;
 * - a read across objects reads each allocated piece from the object its
 *   map entry names (an ancestor's too) and gives zeros (or a hole run,
 *   with structured replies) for unallocated ones;
 * - a write to the VDI's own object is a plain write; to an unallocated
 *   one a create, then the map entry; to an ancestor's a create that copies
 *   it (COW), unless the write covers the whole object; FUA makes every
 *   gateway write synchronous;
 * - TRIM of a whole object zeroes its map entry once and removes nothing
 *   itself (the gateway's discard policy does); a partial TRIM does
 *   nothing; WRITE_ZEROES writes zeros where it cannot punch;
 * - a create whose map entry cannot be written is removed again;
 * - a VDI snapshotted under the export (the gateway answers READONLY): the
 *   export follows its name to the new working VDI and the write lands
 *   there, copied on write from the snapshot.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "gateway.h"
#include "nbd.h"
#include "vdi_table.h"

#define SHIFT 20
#define OBJ (1U << SHIFT)
#define NR_OBJS 4
#define VID 0x10    /* the working VDI */
#define PARENT 0x0f /* its snapshot's */
#define NEXT 0x11   /* the working VDI after a snapshot under the export */

/* ---- the gateway in memory, with a log of calls ---- */

#define MAX_OBJS 32
static struct {
	uint64_t oid;
	uint8_t *data;
} objs[MAX_OBJS];

static struct call {
	char what; /* r(ead) w(rite) c(reate) x (remove) f(lush) */
	uint64_t oid, cow;
	uint32_t len;
	uint64_t off;
	unsigned int flags;
} calls[64];
static int nr_calls;
static int fail_map_write;  /* SD_RES_* for the next inode map write */
static uint32_t frozen_vid; /* writes of this VDI answer READONLY */

static uint8_t *obj(uint64_t oid, bool make)
{
	int free_slot = -1;

	for (int i = 0; i < MAX_OBJS; i++) {
		if (objs[i].data && objs[i].oid == oid)
			return objs[i].data;
		if (!objs[i].data && free_slot < 0)
			free_slot = i;
	}
	if (!make)
		return NULL;
	ck_assert_int_ge(free_slot, 0);
	objs[free_slot].oid = oid;
	objs[free_slot].data = calloc(1, is_vdi_obj(oid) ? SD_INODE_SIZE : OBJ);
	return objs[free_slot].data;
}

static void log_call(char what, uint64_t oid, uint64_t cow, uint32_t len, uint64_t off,
		     unsigned int flags)
{
	ck_assert_int_lt(nr_calls, 64);
	calls[nr_calls++] = (struct call){ what, oid, cow, len, off, flags };
}

int gateway_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, const struct vdi_attr *attr)
{
	const uint8_t *d = obj(oid, false);

	(void)attr;
	log_call('r', oid, 0, len, off, 0);
	if (!d)
		return SD_RES_NO_OBJ;
	memcpy(buf, d + off, len);
	return SD_RES_SUCCESS;
}

bool gateway_read_cached(uint64_t oid, void *buf, uint32_t len, uint64_t off,
			 const struct vdi_attr *attr)
{
	(void)oid;
	(void)buf;
	(void)len;
	(void)off;
	(void)attr;
	return false;
}

int gateway_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, unsigned int flags,
		  const struct vdi_attr *attr)
{
	uint8_t *d = obj(oid, false);

	ck_assert_ptr_nonnull(attr);
	log_call('w', oid, 0, len, off, flags);
	if (attr->snapshot || oid_to_vid(oid) == frozen_vid)
		return SD_RES_READONLY;
	if (is_vdi_obj(oid) && fail_map_write) {
		int ret = fail_map_write;

		fail_map_write = 0;
		return ret;
	}
	if (!d)
		return SD_RES_NO_OBJ;
	memcpy(d + off, buf, len);
	return SD_RES_SUCCESS;
}

int gateway_create(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len, uint64_t off,
		   unsigned int flags, const struct vdi_attr *attr)
{
	uint8_t *d;

	ck_assert_ptr_nonnull(attr);
	ck_assert_uint_eq(attr->shift, SHIFT);
	log_call('c', oid, cow_oid, len, off, flags);
	if (oid_to_vid(oid) == frozen_vid)
		return SD_RES_READONLY;
	d = obj(oid, true);
	if (cow_oid) {
		const uint8_t *src = obj(cow_oid, false);

		if (!src)
			return SD_RES_BASE_VDI_READ;
		memcpy(d, src, OBJ);
	}
	memcpy(d + off, buf, len);
	return SD_RES_SUCCESS;
}

int gateway_remove(uint64_t oid, const struct vdi_attr *attr)
{
	(void)attr;
	log_call('x', oid, 0, 0, 0, 0);
	return SD_RES_SUCCESS;
}

int gateway_flush(uint64_t oid)
{
	log_call('f', oid, 0, 0, 0, 0);
	return SD_RES_SUCCESS;
}

/* ---- the VDI table ---- */

static uint32_t working_vid = VID;

int vdi_get_attr(uint32_t vid, struct vdi_attr *attr)
{
	if (vid != VID && vid != PARENT && vid != NEXT)
		return SD_RES_NO_VDI;
	*attr = (struct vdi_attr){ .shift = SHIFT,
				   .nr_copies = 3,
				   .snapshot = vid != working_vid,
				   .size = (uint64_t)NR_OBJS << SHIFT };
	return SD_RES_SUCCESS;
}

int vdi_find_vid(const char *name, uint32_t snapid, const char *tag, uint32_t *vid)
{
	(void)snapid;
	(void)tag;
	if (strcmp(name, "vm"))
		return SD_RES_NO_VDI;
	*vid = working_vid;
	return SD_RES_SUCCESS;
}

void vdi_copy_bitmap(void *buf, uint32_t len)
{
	memset(buf, 0, len);
}

struct work_queue *nbd_wq;

/* ---- helpers ---- */

static struct nbd_export *ex;

/* an inode for vid whose map entries are map[NR_OBJS] */
static void make_inode(uint32_t vid, const uint32_t *map, bool snapshot)
{
	struct sd_inode_header *h = (struct sd_inode_header *)obj(vid_to_vdi_oid(vid), true);

	h->vdi_size = (uint64_t)NR_OBJS << SHIFT;
	h->block_size_shift = SHIFT;
	h->nr_copies = 3;
	h->snap_ctime = snapshot ? 1 : 0;
	h->vdi_id = vid;
	memcpy((uint8_t *)h + SD_INODE_HEADER_SIZE, map, NR_OBJS * 4);
}

static uint32_t entry(uint32_t vid, uint32_t idx)
{
	uint32_t e;

	memcpy(&e, obj(vid_to_vdi_oid(vid), false) + SD_INODE_HEADER_SIZE + 4 * idx, 4);
	return e;
}

static void fill(uint64_t oid, uint8_t byte)
{
	memset(obj(oid, true), byte, OBJ);
}

static void setup(void)
{
	/* objects 0 (own) and 2 (the parent's) allocated, 1 and 3 holes */
	static const uint32_t map[NR_OBJS] = { VID, 0, PARENT, 0 };

	for (int i = 0; i < MAX_OBJS; i++) {
		free(objs[i].data);
		objs[i].data = NULL;
	}
	nr_calls = 0;
	fail_map_write = 0;
	frozen_vid = 0;
	working_vid = VID;
	make_inode(VID, map, false);
	fill(vid_to_data_oid(VID, 0), 'A');
	fill(vid_to_data_oid(PARENT, 2), 'P');
	ex = calloc(1, sizeof(*ex));
	pthread_mutex_init(&ex->lock, NULL);
	pthread_cond_init(&ex->cond, NULL);
	ck_assert_int_eq(nbd_export_resolve(ex, "vm"), SD_RES_SUCCESS);
	ck_assert_uint_eq(ex->vid, VID);
	ck_assert_int_eq(nbd_export_load(ex, true), SD_RES_SUCCESS);
	nr_calls = 0;
}

static void teardown(void)
{
	nbd_export_free(ex);
	ex = NULL;
}

static struct nbd_io *run(uint16_t type, uint16_t flags, uint64_t off, uint32_t len, void *buf,
			  bool structured)
{
	struct nbd_io *io = calloc(1, sizeof(*io));

	io->exp = ex;
	io->type = type;
	io->flags = flags;
	io->offset = off;
	io->length = len;
	io->buf = buf;
	io->structured = structured;
	nbd_io_work(&io->work);
	return io;
}

static int count(char what)
{
	int n = 0;

	for (int i = 0; i < nr_calls; i++)
		n += calls[i].what == what;
	return n;
}

/* ---- tests ---- */

START_TEST(test_export_loaded)
{
	ck_assert_uint_eq(ex->size, (uint64_t)NR_OBJS << SHIFT);
	ck_assert_uint_eq(ex->shift, SHIFT);
	ck_assert_uint_eq(ex->nr_objs, NR_OBJS);
	ck_assert(!ex->readonly);
	ck_assert_uint_eq(ex->map[0], VID);
	ck_assert_uint_eq(ex->map[1], 0);
	ck_assert_uint_eq(ex->map[2], PARENT);
	/* a name the table does not know */
	ck_assert_int_eq(nbd_export_resolve(&(struct nbd_export){ 0 }, "nope"), SD_RES_NO_VDI);
}
END_TEST

START_TEST(test_read_across_objects)
{
	uint32_t len = 3 * OBJ;
	uint8_t *buf = malloc(len);
	struct nbd_io *io;

	memset(buf, 0xee, len);
	/* from the middle of object 0 to the middle of object 3 */
	io = run(NBD_CMD_READ, 0, OBJ / 2, len, buf, false);
	ck_assert_uint_eq(io->error, 0);
	for (uint32_t i = 0; i < len; i++) {
		uint64_t at = OBJ / 2 + i;
		uint8_t want = at < OBJ ? 'A' : at < 2 * OBJ ? 0 : at < 3 * OBJ ? 'P' : 0;

		if (buf[i] != want)
			ck_abort_msg("byte %u: %02x, want %02x", i, buf[i], want);
	}
	/* the allocated pieces only were read, each from the object its entry names */
	ck_assert_int_eq(count('r'), 2);
	ck_assert_uint_eq(calls[0].oid, vid_to_data_oid(VID, 0));
	ck_assert_uint_eq(calls[0].off, OBJ / 2);
	ck_assert_uint_eq(calls[0].len, OBJ / 2);
	ck_assert_uint_eq(calls[1].oid, vid_to_data_oid(PARENT, 2));
	ck_assert_uint_eq(calls[1].off, 0);
	ck_assert_uint_eq(calls[1].len, OBJ);
	free(io);

	/* structured: the holes are runs of their own, not zeros in the data */
	io = run(NBD_CMD_READ, 0, 0, 2 * OBJ, buf, true);
	ck_assert_int_eq(io->nr_runs, 2);
	ck_assert(!io->runs[0].hole);
	ck_assert(io->runs[1].hole);
	ck_assert_uint_eq(io->runs[1].off, OBJ);
	ck_assert_uint_eq(io->runs[1].len, OBJ);
	free(io);
	free(buf);
}
END_TEST

START_TEST(test_write_own_hole_and_parent)
{
	uint8_t buf[4096];
	struct nbd_io *io;

	memset(buf, 'w', sizeof(buf));
	/* own object: one plain write, not synchronous */
	io = run(NBD_CMD_WRITE, 0, 100, sizeof(buf), buf, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 1);
	ck_assert_int_eq(calls[0].what, 'w');
	ck_assert_uint_eq(calls[0].oid, vid_to_data_oid(VID, 0));
	ck_assert_uint_eq(calls[0].flags & GW_SYNC, 0);
	free(io);

	/* a hole, with FUA: a create, then the map entry, both synchronous */
	nr_calls = 0;
	io = run(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, OBJ + 8, sizeof(buf), buf, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 2);
	ck_assert_int_eq(calls[0].what, 'c');
	ck_assert_uint_eq(calls[0].oid, vid_to_data_oid(VID, 1));
	ck_assert_uint_eq(calls[0].cow, 0);
	ck_assert_uint_eq(calls[0].off, 8);
	ck_assert_int_eq(calls[1].what, 'w');
	ck_assert_uint_eq(calls[1].oid, vid_to_vdi_oid(VID));
	ck_assert_uint_eq(calls[1].off, SD_INODE_HEADER_SIZE + 4 * 1);
	ck_assert(calls[0].flags & GW_SYNC);
	ck_assert(calls[1].flags & GW_SYNC);
	ck_assert_uint_eq(entry(VID, 1), VID);
	ck_assert_uint_eq(ex->map[1], VID);
	free(io);

	/* the parent's object: copied on write, the copy's entry is the VDI's own */
	nr_calls = 0;
	io = run(NBD_CMD_WRITE, 0, 2 * OBJ + 4096, sizeof(buf), buf, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(calls[0].what, 'c');
	ck_assert_uint_eq(calls[0].oid, vid_to_data_oid(VID, 2));
	ck_assert_uint_eq(calls[0].cow, vid_to_data_oid(PARENT, 2));
	ck_assert_uint_eq(obj(vid_to_data_oid(VID, 2), false)[0], 'P');
	ck_assert_uint_eq(obj(vid_to_data_oid(VID, 2), false)[4096], 'w');
	ck_assert_uint_eq(ex->map[2], VID);
	free(io);
}
END_TEST

START_TEST(test_whole_object_needs_no_cow)
{
	uint8_t *buf = malloc(OBJ);
	struct nbd_io *io;

	memset(buf, 'z', OBJ);
	io = run(NBD_CMD_WRITE, 0, 2 * OBJ, OBJ, buf, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(calls[0].what, 'c');
	ck_assert_uint_eq(calls[0].cow, 0);
	ck_assert_uint_eq(calls[0].len, OBJ);
	free(io);
	free(buf);
}
END_TEST

START_TEST(test_trim)
{
	struct nbd_io *io;

	/* a partial object: advice, nothing done */
	io = run(NBD_CMD_TRIM, 0, 10, OBJ / 2, NULL, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 0);
	free(io);
	/* objects 0 (own) and 1 (a hole) whole: the entry of 0 zeroed, once; no removal here */
	io = run(NBD_CMD_TRIM, 0, 0, 2 * OBJ, NULL, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 1);
	ck_assert_int_eq(calls[0].what, 'w');
	ck_assert_uint_eq(calls[0].oid, vid_to_vdi_oid(VID));
	ck_assert_uint_eq(calls[0].off, SD_INODE_HEADER_SIZE);
	ck_assert_int_eq(count('x'), 0);
	ck_assert_uint_eq(entry(VID, 0), 0);
	ck_assert_uint_eq(ex->map[0], 0);
	free(io);
}
END_TEST

START_TEST(test_write_zeroes)
{
	struct nbd_io *io;

	/* NO_HOLE over object 0's first half: zeros written, the object stays */
	io = run(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, 0, OBJ / 2, NULL, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 1);
	ck_assert_int_eq(calls[0].what, 'w');
	ck_assert_uint_eq(obj(vid_to_data_oid(VID, 0), false)[0], 0);
	ck_assert_uint_eq(obj(vid_to_data_oid(VID, 0), false)[OBJ / 2], 'A');
	free(io);
	/* a hole's part that may be punched reads as zeros already: nothing */
	nr_calls = 0;
	io = run(NBD_CMD_WRITE_ZEROES, 0, OBJ, 4096, NULL, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 0);
	free(io);
}
END_TEST

START_TEST(test_create_without_entry_removed)
{
	uint8_t buf[512] = { 1 };
	struct nbd_io *io;

	fail_map_write = SD_RES_NO_SPACE;
	io = run(NBD_CMD_WRITE, 0, 3 * OBJ, sizeof(buf), buf, false);
	ck_assert_uint_eq(io->error, NBD_ENOSPC);
	/* created, its entry not written: removed again, and the map still says hole */
	ck_assert_int_eq(calls[0].what, 'c');
	ck_assert_int_eq(calls[1].what, 'w');
	ck_assert_int_eq(calls[2].what, 'x');
	ck_assert_uint_eq(calls[2].oid, vid_to_data_oid(VID, 3));
	ck_assert_uint_eq(ex->map[3], 0);
	free(io);
}
END_TEST

START_TEST(test_follows_a_snapshot)
{
	static const uint32_t next_map[NR_OBJS] = { VID, 0, PARENT, 0 };
	uint8_t buf[64];
	struct nbd_io *io;

	/* collie vdi snapshot: VID is frozen, NEXT is the working VDI, its map VID's */
	make_inode(NEXT, next_map, false);
	working_vid = NEXT;
	memset(buf, 's', sizeof(buf));
	io = run(NBD_CMD_WRITE, 0, 0, sizeof(buf), buf, false);
	ck_assert_uint_eq(io->error, 0);
	ck_assert_uint_eq(ex->vid, NEXT);
	/* the write landed in NEXT's own copy of object 0, copied from VID's */
	ck_assert_uint_eq(ex->map[0], NEXT);
	ck_assert_uint_eq(entry(NEXT, 0), NEXT);
	ck_assert_uint_eq(obj(vid_to_data_oid(NEXT, 0), false)[0], 's');
	ck_assert_uint_eq(obj(vid_to_data_oid(NEXT, 0), false)[sizeof(buf)], 'A');
	ck_assert_uint_eq(obj(vid_to_data_oid(VID, 0), false)[0], 'A');
	free(io);
}
END_TEST

START_TEST(test_flush)
{
	struct nbd_io *io = run(NBD_CMD_FLUSH, 0, 0, 0, NULL, false);

	ck_assert_uint_eq(io->error, 0);
	ck_assert_int_eq(nr_calls, 1);
	ck_assert_int_eq(calls[0].what, 'f');
	ck_assert_uint_eq(calls[0].oid, vid_to_vdi_oid(VID));
	free(io);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd_io");
	TCase *tc = tcase_create("mapping");
	SRunner *sr;
	int nr_failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_export_loaded);
	tcase_add_test(tc, test_read_across_objects);
	tcase_add_test(tc, test_write_own_hole_and_parent);
	tcase_add_test(tc, test_whole_object_needs_no_cow);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_write_zeroes);
	tcase_add_test(tc, test_create_without_entry_removed);
	tcase_add_test(tc, test_follows_a_snapshot);
	tcase_add_test(tc, test_flush);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
