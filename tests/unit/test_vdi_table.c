/*
 * Unit tests of sheep/vdi_table.c, the in-memory table of VDI states: a
 * header goes in and is found by vid and by name; a changed header keeps
 * the lock state; copies and the object size are clamped where they enter
 * (the cluster's copies stand in for a bad value); the snapshot flag
 * follows snap_ctime and decides which VDI a name or a tag finds; an
 * unknown or deleted vid answers NO_VDI and 0 copies; readers on other
 * threads never see half of a header while a writer changes it; the
 * generation of copies moves with a count only and wakes its waiters.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logger.h"
#include "internal_proto.h"
#include "proto_util.h"
#include "group.h"
#include "stat.h"
#include "vdi_table.h"

/* the cluster's copies, as group.c would answer: the table falls back on them */
static uint8_t cluster_copies;

uint8_t group_copies(void)
{
	return cluster_copies;
}

static void setup(void)
{
	ck_assert_int_eq(vdi_table_init(), 0);
	cluster_copies = 3;
}

static void teardown(void)
{
	vdi_table_clear();
}

static void header(struct sd_inode_header *h, const char *name, uint32_t vid, uint8_t copies,
		   uint8_t shift, uint64_t size)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->vdi_id = vid;
	h->nr_copies = copies;
	h->block_size_shift = shift;
	h->vdi_size = size;
	h->snap_id = 1;
}

/* insert h under the write lock, as the namespace ops publish */
static struct vdi_state *insert(const struct sd_inode_header *h)
{
	struct vdi_state *s;

	vdi_table_wrlock();
	s = vdi_table_get(h->vdi_id, NULL);
	ck_assert_ptr_ne(s, NULL);
	vdi_table_fill(s, h);
	vdi_table_unlock();
	return s;
}

START_TEST(test_insert_lookup_update)
{
	struct sd_inode_header h;
	struct vdi_attr attr;
	struct vdi_state *s, *spare = calloc(1, sizeof(*spare));
	uint32_t vid = sd_name_to_vid("vm1");
	int res = 0;

	ck_assert_ptr_ne(spare, NULL);
	header(&h, "vm1", vid, 2, 22, UINT64_C(1) << 30);
	vdi_table_wrlock();
	s = vdi_table_get(vid, &spare);
	ck_assert_ptr_eq(spare, NULL); /* the spare was taken */
	vdi_table_fill(s, &h);
	/* a second get finds the same state and leaves a spare alone */
	spare = calloc(1, sizeof(*spare));
	ck_assert_ptr_eq(vdi_table_get(vid, &spare), s);
	ck_assert_ptr_ne(spare, NULL);
	free(spare);
	ck_assert(vdi_table_in_use(vid));
	ck_assert_ptr_eq(vdi_table_find("vm1", 0, NULL, &res), s);
	ck_assert_ptr_eq(vdi_table_find("vm2", 0, NULL, &res), NULL);
	ck_assert_int_eq(res, SD_RES_NO_VDI);
	/* the next vid of the probe chain is the one a second name there would get */
	ck_assert_uint_ne(vdi_table_free_vid("vm1"), vid);
	s->locked = true;
	vdi_table_unlock();

	ck_assert_int_eq(vdi_get_attr(vid, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.nr_copies, 2);
	ck_assert_uint_eq(attr.shift, 22);
	ck_assert_uint_eq(attr.size, UINT64_C(1) << 30);
	ck_assert(!attr.snapshot);
	ck_assert_int_eq(vdi_copies(vid), 2);

	/* a changed header (a resize, through NOTIFY_VDI_HEADER) keeps the lock */
	h.vdi_size = UINT64_C(2) << 30;
	vdi_table_wrlock();
	vdi_table_refill(s, &h);
	ck_assert(s->locked);
	vdi_table_unlock();
	ck_assert_int_eq(vdi_get_attr(vid, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.size, UINT64_C(2) << 30);

	/* recovery's copy of a header: known or not, it is in the table afterwards */
	header(&h, "vm9", vid + 7, 1, 23, 4096);
	vdi_inode_recovered(vid + 7, &h);
	ck_assert_int_eq(vdi_copies(vid + 7), 1);
	vdi_table_rdlock();
	ck_assert(vdi_table_in_use(vid + 7));
	vdi_table_unlock();
}
END_TEST

START_TEST(test_clamps_on_entry)
{
	struct sd_inode_header h;
	struct vdi_attr attr;
	uint8_t shift;
	bool snap;

	/* copies 0 and past SD_MAX_COPIES: the cluster's copies */
	header(&h, "a", 100, 0, 22, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_copies(100), 3);
	header(&h, "b", 101, SD_MAX_COPIES + 1, 22, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_copies(101), 3);
	header(&h, "c", 102, SD_MAX_COPIES, 22, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_copies(102), SD_MAX_COPIES);
	/* before the format there are no cluster copies: 1, never 0 */
	cluster_copies = 0;
	header(&h, "d", 103, 255, 22, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_copies(103), 1);

	/* a shift out of range (or 0, QEMU's "default") is the default object size */
	header(&h, "e", 104, 1, SD_MIN_BLOCK_SIZE_SHIFT - 1, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_lookup_attr(104, &shift, &snap), SD_RES_SUCCESS);
	ck_assert_uint_eq(shift, SD_DEFAULT_BLOCK_SIZE_SHIFT);
	header(&h, "f", 105, 1, SD_MAX_BLOCK_SIZE_SHIFT + 1, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_get_attr(105, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.shift, SD_DEFAULT_BLOCK_SIZE_SHIFT);
	header(&h, "g", 106, 1, 0, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_get_attr(106, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.shift, SD_DEFAULT_BLOCK_SIZE_SHIFT);
	header(&h, "h", 107, 1, SD_MAX_BLOCK_SIZE_SHIFT, 4096);
	insert(&h);
	ck_assert_int_eq(vdi_get_attr(107, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.shift, SD_MAX_BLOCK_SIZE_SHIFT);

	/* an unterminated name and tag are cut, not read past */
	memset(&h, 'x', sizeof(h));
	h.vdi_id = 108;
	insert(&h);
	vdi_table_rdlock();
	ck_assert_uint_eq(strlen(vdi_table_lookup(108)->name), SD_MAX_VDI_LEN - 1);
	ck_assert_uint_eq(strlen(vdi_table_lookup(108)->tag), SD_MAX_VDI_TAG_LEN - 1);
	vdi_table_unlock();
}
END_TEST

START_TEST(test_snapshot_flags)
{
	struct sd_inode_header h;
	struct vdi_state *snap, *work;
	uint32_t vid = sd_name_to_vid("disk");
	uint8_t shift;
	bool is_snap;
	int res = 0;

	/* snapshot 1 tagged "before", the working VDI (snap_id 2) after it */
	header(&h, "disk", vid, 2, 22, 1 << 30);
	h.snap_ctime = 12345;
	snprintf(h.tag, sizeof(h.tag), "before");
	snap = insert(&h);
	header(&h, "disk", vid + 1, 2, 22, 1 << 30);
	h.snap_id = 2;
	h.parent_vdi_id = vid;
	work = insert(&h);

	ck_assert_int_eq(vdi_lookup_attr(vid, &shift, &is_snap), SD_RES_SUCCESS);
	ck_assert(is_snap);
	ck_assert_int_eq(vdi_lookup_attr(vid + 1, &shift, &is_snap), SD_RES_SUCCESS);
	ck_assert(!is_snap);
	vdi_table_rdlock();
	/* the name alone is the working VDI, a tag or a snap_id the snapshot */
	ck_assert_ptr_eq(vdi_table_find("disk", 0, NULL, &res), work);
	ck_assert_ptr_eq(vdi_table_find("disk", 0, "", &res), work);
	ck_assert_ptr_eq(vdi_table_find("disk", 0, "before", &res), snap);
	ck_assert_ptr_eq(vdi_table_find("disk", 1, NULL, &res), snap);
	ck_assert_ptr_eq(vdi_table_find("disk", 0, "after", &res), NULL);
	ck_assert_int_eq(res, SD_RES_NO_TAG);
	ck_assert_ptr_eq(vdi_table_find("disk", 9, NULL, &res), NULL);
	ck_assert_int_eq(res, SD_RES_NO_VDI);
	ck_assert(vdi_table_descends_from(work, vid));
	ck_assert(!vdi_table_descends_from(snap, vid + 1));
	vdi_table_unlock();

	/* a deleted VDI (nameless inode) is no VDI, but keeps its bit */
	h.name[0] = '\0';
	vdi_table_wrlock();
	vdi_table_refill(work, &h);
	vdi_table_unlock();
	ck_assert_int_eq(vdi_lookup_attr(vid + 1, &shift, &is_snap), SD_RES_NO_VDI);
	vdi_table_rdlock();
	ck_assert(vdi_table_in_use(vid + 1));
	ck_assert_ptr_eq(vdi_table_find("disk", 0, NULL, &res), NULL);
	vdi_table_unlock();
}
END_TEST

START_TEST(test_unknown_vid)
{
	struct vdi_attr attr = { .shift = 99, .nr_copies = 99 };
	uint8_t shift = 99;
	bool is_snap = true;
	int res = 0;

	ck_assert_int_eq(vdi_get_attr(0x123456, &attr), SD_RES_NO_VDI);
	ck_assert_uint_eq(attr.shift, 99); /* untouched */
	ck_assert_int_eq(vdi_lookup_attr(0x123456, &shift, &is_snap), SD_RES_NO_VDI);
	ck_assert_uint_eq(shift, 99);
	ck_assert_int_eq(vdi_copies(0x123456), 0);
	vdi_table_rdlock();
	ck_assert_ptr_eq(vdi_table_lookup(0x123456), NULL);
	ck_assert(!vdi_table_in_use(0x123456));
	ck_assert_ptr_eq(vdi_table_find("nobody", 0, NULL, &res), NULL);
	ck_assert_int_eq(res, SD_RES_NO_VDI);
	vdi_table_unlock();
}
END_TEST

/*
 * One writer flips a VDI between two headers that differ in every field
 * the object path reads; readers on other threads must see one header or
 * the other, never a mix.
 */
#define NR_READERS 2
#define NR_FLIPS 50000
static const uint32_t flip_vid = 0x00abcd;
static volatile int flipping;

static void *reader(void *arg)
{
	long mixed = 0, seen = 0;

	(void)arg;
	while (__atomic_load_n(&flipping, __ATOMIC_ACQUIRE)) {
		struct vdi_attr a;

		if (vdi_get_attr(flip_vid, &a) != SD_RES_SUCCESS) {
			mixed++;
			continue;
		}
		seen++;
		if (!((a.nr_copies == 2 && a.shift == 22 && a.size == 100 && !a.snapshot) ||
		      (a.nr_copies == 5 && a.shift == 20 && a.size == 200 && a.snapshot)))
			mixed++;
	}
	return (void *)(mixed ? -1L : seen);
}

START_TEST(test_readers_and_a_writer)
{
	struct sd_inode_header a, b;
	struct vdi_state *s;
	pthread_t t[NR_READERS];

	header(&a, "flip", flip_vid, 2, 22, 100);
	header(&b, "flip", flip_vid, 5, 20, 200);
	b.snap_ctime = 1;
	s = insert(&a);
	__atomic_store_n(&flipping, 1, __ATOMIC_RELEASE);
	for (long i = 0; i < NR_READERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, reader, NULL), 0);
	for (int i = 0; i < NR_FLIPS; i++) {
		vdi_table_wrlock();
		vdi_table_refill(s, i % 2 ? &a : &b);
		vdi_table_unlock();
	}
	__atomic_store_n(&flipping, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NR_READERS; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		ck_assert_msg((long)ret >= 0, "reader %d saw a mixed or missing header", i);
	}
}
END_TEST

static struct vdi_state *gen_state;
static struct sd_inode_header gen_hdr;

/* another thread changes the VDI's copies 50 ms later, as NOTIFY_VDI_HEADER does */
static void *change_copies(void *arg)
{
	struct timespec ts = { 0, 50 * 1000000L };

	(void)arg;
	nanosleep(&ts, NULL);
	vdi_table_wrlock();
	vdi_table_refill(gen_state, &gen_hdr);
	vdi_table_unlock();
	return NULL;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* the generation moves with a VDI's count only, and wakes whoever waits for it */
START_TEST(test_copies_generation_wait)
{
	uint32_t vid = sd_name_to_vid("gen"), gen;
	pthread_t t;
	uint64_t t0;

	header(&gen_hdr, "gen", vid, 2, 22, 4096);
	gen_state = insert(&gen_hdr);
	gen = vdi_copies_generation();
	/* another size, the same count: no new generation */
	gen_hdr.vdi_size = 8192;
	vdi_table_wrlock();
	vdi_table_refill(gen_state, &gen_hdr);
	vdi_table_unlock();
	ck_assert_uint_eq(vdi_copies_generation(), gen);
	/* nothing moves: false once the time is over, not before */
	t0 = mono_ms();
	ck_assert(!vdi_wait_copies_generation(gen, 30));
	ck_assert_uint_ge(mono_ms() - t0, 29);
	/* a generation already gone: true at once */
	ck_assert(vdi_wait_copies_generation(gen - 1, 10000));
	/* a new count on another thread wakes the waiter */
	gen_hdr.nr_copies = 3;
	ck_assert_int_eq(pthread_create(&t, NULL, change_copies, NULL), 0);
	ck_assert(vdi_wait_copies_generation(gen, 10000));
	ck_assert_uint_eq(vdi_copies_generation(), gen + 1);
	ck_assert_int_eq(vdi_copies(vid), 3);
	pthread_join(t, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vdi_table");
	TCase *tc = tcase_create("vdi_table");
	SRunner *sr;
	int nr_failed;

	sd_log_init(NULL, SDOG_EMERG, "test_vdi_table");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_insert_lookup_update);
	tcase_add_test(tc, test_clamps_on_entry);
	tcase_add_test(tc, test_snapshot_flags);
	tcase_add_test(tc, test_unknown_vid);
	tcase_add_test(tc, test_readers_and_a_writer);
	tcase_add_test(tc, test_copies_generation_wait);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
