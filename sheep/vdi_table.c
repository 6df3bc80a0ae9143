/*
 * The VDI table: what every node knows of every VDI, in memory.
 *
 * A cache of the inode headers (name, tag, snapshot state, size, copies,
 * object size), the lock state, and the in-use bitmap that READ_VDIS
 * returns, all under one rwlock. It does no I/O: the namespace ops
 * (vdi.c) and the join sync (vdi_sync.c) read and write inodes without
 * the lock and publish here under it; the object path (gateway, recovery,
 * NBD) only reads, through vdi_get_attr, vdi_lookup_attr and vdi_copies,
 * which take the lock themselves.
 *
 * What an inode says is checked once, where it enters the table: a header
 * may say anything (a client can write one, a disk can rot), and every
 * object op trusts the table, so copies and the object size are clamped
 * to what the daemon can serve.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "lock.h"
#include "ec.h"
#include "proto_util.h"
#include "group.h"
#include "vdi_table.h"

#define VDI_HASH_SIZE 4096

static uint8_t *vdi_bitmap;
static struct vdi_state *vdi_hash[VDI_HASH_SIZE];
static pthread_rwlock_t vdi_lock = PTHREAD_RWLOCK_INITIALIZER;

int vdi_table_init(void)
{
	if (!vdi_bitmap)
		vdi_bitmap = calloc(1, SD_VDI_BITMAP_SIZE);
	return vdi_bitmap ? 0 : -ENOMEM;
}

void vdi_table_clear(void)
{
	sd_rw_wrlock(&vdi_lock);
	for (int i = 0; i < VDI_HASH_SIZE; i++) {
		while (vdi_hash[i]) {
			struct vdi_state *s = vdi_hash[i];

			vdi_hash[i] = s->hnext;
			free(s);
		}
	}
	if (vdi_bitmap)
		memset(vdi_bitmap, 0, SD_VDI_BITMAP_SIZE);
	sd_rw_unlock(&vdi_lock);
}

void vdi_table_rdlock(void)
{
	sd_rw_rdlock(&vdi_lock);
}

void vdi_table_wrlock(void)
{
	sd_rw_wrlock(&vdi_lock);
}

void vdi_table_unlock(void)
{
	sd_rw_unlock(&vdi_lock);
}

struct vdi_state *vdi_table_lookup(uint32_t vid)
{
	for (struct vdi_state *s = vdi_hash[vid % VDI_HASH_SIZE]; s; s = s->hnext)
		if (s->vid == vid)
			return s;
	return NULL;
}

bool vdi_table_in_use(uint32_t vid)
{
	return sd_vid_test(vdi_bitmap, vid);
}

void vdi_table_set_bit(uint32_t vid)
{
	sd_vid_set(vdi_bitmap, vid);
}

uint32_t vdi_table_free_vid(const char *name)
{
	return sd_vid_find_free(vdi_bitmap, name);
}

void vdi_table_copy_bitmap(void *buf, uint32_t len)
{
	memcpy(buf, vdi_bitmap, min_t(uint32_t, len, SD_VDI_BITMAP_SIZE));
}

struct vdi_state *vdi_table_get(uint32_t vid, struct vdi_state **spare)
{
	struct vdi_state *s = vdi_table_lookup(vid);

	if (s)
		return s;
	if (spare && *spare) {
		s = *spare;
		*spare = NULL;
		memset(s, 0, sizeof(*s));
	} else {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
	}
	s->vid = vid;
	s->hnext = vdi_hash[vid % VDI_HASH_SIZE];
	vdi_hash[vid % VDI_HASH_SIZE] = s;
	sd_vid_set(vdi_bitmap, vid);
	return s;
}

/*
 * The copies of a VDI as the table keeps them: a value outside
 * 1..SD_MAX_COPIES becomes the cluster's (1 before format). Never 0: 0
 * means "ask the table" to the gateway.
 */
static uint8_t sane_copies(uint32_t vid, uint8_t copies)
{
	uint8_t def = group_copies() ? group_copies() : 1;

	if (copies >= 1 && copies <= SD_MAX_COPIES)
		return copies;
	sd_warn("vid %06" PRIx32 ": inode says %u copies; %u used", vid, copies, def);
	return def;
}

/* the object size of a VDI as the table keeps it: 0 or out of range is the default */
static uint8_t sane_shift(uint32_t vid, uint8_t shift)
{
	if (shift >= SD_MIN_BLOCK_SIZE_SHIFT && shift <= SD_MAX_BLOCK_SIZE_SHIFT)
		return shift;
	if (shift)
		sd_warn("vid %06" PRIx32 ": inode says block_size_shift %u; %u used", vid, shift,
			SD_DEFAULT_BLOCK_SIZE_SHIFT);
	return SD_DEFAULT_BLOCK_SIZE_SHIFT;
}

/*
 * The scheme of a VDI as the table keeps it: a copy_policy that names no
 * valid D:P, or whose D + P is not the inode's copies, is replicated.
 */
static uint8_t sane_policy(uint32_t vid, const struct sd_inode_header *h, uint8_t copies)
{
	int d, p;

	if (!h->copy_policy)
		return 0;
	if (ec_policy_to_dp(h->copy_policy, &d, &p) && d + p == copies)
		return (uint8_t)h->copy_policy;
	sd_warn("vid %06" PRIx32 ": inode says copy_policy 0x%x with %u copies; replicated",
		vid, h->copy_policy, copies);
	return 0;
}

void vdi_table_fill(struct vdi_state *s, const struct sd_inode_header *h)
{
	memcpy(s->name, h->name, sizeof(s->name));
	s->name[sizeof(s->name) - 1] = '\0';
	memcpy(s->tag, h->tag, sizeof(s->tag));
	s->tag[sizeof(s->tag) - 1] = '\0';
	s->snap_id = h->snap_id;
	s->parent = h->parent_vdi_id;
	s->nr_copies = sane_copies(s->vid, h->nr_copies);
	s->shift = sane_shift(s->vid, h->block_size_shift);
	s->copy_policy = sane_policy(s->vid, h, s->nr_copies);
	s->snapshot = h->snap_ctime != 0;
	s->deleted = h->name[0] == '\0';
	s->size = h->vdi_size;
}

/* starts at 1: an attr's gen 0 means "not the table's" */
static uint32_t copies_gen = 1;

uint32_t vdi_copies_generation(void)
{
	return __atomic_load_n(&copies_gen, __ATOMIC_ACQUIRE);
}

/* vdi_wait_copies_generation's waiters: woken as the generation moves */
static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gen_cond;
static pthread_once_t gen_cond_once = PTHREAD_ONCE_INIT;

static void gen_cond_init(void)
{
	sd_cond_init_monotonic(&gen_cond);
}

bool vdi_wait_copies_generation(uint32_t gen, int timeout_ms)
{
	struct timespec until;
	bool moved;

	pthread_once(&gen_cond_once, gen_cond_init);
	sd_deadline_ms(&until, timeout_ms);
	sd_mutex_lock(&gen_lock);
	while (!(moved = vdi_copies_generation() != gen) &&
	       pthread_cond_timedwait(&gen_cond, &gen_lock, &until) == 0)
		;
	sd_mutex_unlock(&gen_lock);
	return moved;
}

void vdi_table_refill(struct vdi_state *s, const struct sd_inode_header *h)
{
	struct sd_lock_owner owner = s->owner;
	bool locked = s->locked;
	uint8_t copies = s->nr_copies;

	vdi_table_fill(s, h);
	s->locked = locked;
	s->owner = owner;
	/* under the write lock: a reader sees the new count with the new generation */
	if (s->nr_copies != copies) {
		/* under gen_lock too: a waiter between its test and its wait is not missed */
		pthread_once(&gen_cond_once, gen_cond_init);
		sd_mutex_lock(&gen_lock);
		__atomic_add_fetch(&copies_gen, 1, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&gen_cond);
		sd_mutex_unlock(&gen_lock);
	}
}

struct vdi_state *vdi_table_find(const char *name, uint32_t snapid, const char *tag, int *res)
{
	uint32_t start = sd_name_to_vid(name), vid = start;
	bool name_seen = false;

	do {
		if (vid != 0) {
			struct vdi_state *s;

			if (!sd_vid_test(vdi_bitmap, vid))
				break;
			s = vdi_table_lookup(vid);
			if (s && !s->deleted && !strcmp(s->name, name)) {
				name_seen = true;
				if (snapid ? s->snap_id == snapid
					   : (tag && tag[0] ? s->snapshot && !strcmp(s->tag, tag)
							    : !s->snapshot))
					return s;
			}
		}
		vid = (vid + 1) & (SD_NR_VDIS - 1);
	} while (vid != start);
	*res = (name_seen && tag && tag[0] && !snapid) ? SD_RES_NO_TAG : SD_RES_NO_VDI;
	return NULL;
}

bool vdi_table_descends_from(const struct vdi_state *s, uint32_t vid)
{
	for (int depth = 0; s && s->parent && depth < 4096; depth++) {
		if (s->parent == vid)
			return true;
		s = vdi_table_lookup(s->parent);
	}
	return false;
}

int vdi_table_for_each(int (*fn)(struct vdi_state *s, void *arg), void *arg)
{
	for (int b = 0; b < VDI_HASH_SIZE; b++)
		for (struct vdi_state *s = vdi_hash[b]; s; s = s->hnext) {
			int ret = fn(s, arg);

			if (ret)
				return ret;
		}
	return 0;
}

int vdi_get_attr(uint32_t vid, struct vdi_attr *attr)
{
	struct vdi_state *s;
	int ret = SD_RES_NO_VDI;

	sd_rw_rdlock(&vdi_lock);
	s = vdi_table_lookup(vid);
	if (s && !s->deleted) {
		attr->shift = s->shift;
		attr->nr_copies = s->nr_copies;
		attr->copy_policy = s->copy_policy;
		attr->snapshot = s->snapshot;
		attr->size = s->size;
		attr->gen = vdi_copies_generation();
		ret = SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

int vdi_find_vid(const char *name, uint32_t snapid, const char *tag, uint32_t *vid)
{
	struct vdi_state *s;
	int ret;

	sd_rw_rdlock(&vdi_lock);
	s = vdi_table_find(name, snapid, tag, &ret);
	if (s) {
		*vid = s->vid;
		ret = SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

void vdi_copy_bitmap(void *buf, uint32_t len)
{
	sd_rw_rdlock(&vdi_lock);
	vdi_table_copy_bitmap(buf, len);
	sd_rw_unlock(&vdi_lock);
}

int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot)
{
	struct vdi_state *s;
	int ret = SD_RES_NO_VDI;

	sd_rw_rdlock(&vdi_lock);
	s = vdi_table_lookup(vid);
	if (s) {
		*shift = s->shift;
		*is_snapshot = s->snapshot;
		ret = s->deleted ? SD_RES_NO_VDI : SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

int vdi_copies(uint32_t vid)
{
	uint32_t gen;

	return vdi_copies_at(vid, &gen);
}

int vdi_copies_at(uint32_t vid, uint32_t *gen)
{
	struct vdi_state *s;
	int copies = 0;

	sd_rw_rdlock(&vdi_lock);
	s = vdi_table_lookup(vid);
	if (s)
		copies = s->nr_copies;
	*gen = vdi_copies_generation();
	sd_rw_unlock(&vdi_lock);
	return copies;
}

uint8_t vdi_copy_policy(uint32_t vid)
{
	struct vdi_state *s;
	uint8_t policy = 0;

	sd_rw_rdlock(&vdi_lock);
	s = vdi_table_lookup(vid);
	if (s)
		policy = s->copy_policy;
	sd_rw_unlock(&vdi_lock);
	return policy;
}

void vdi_inode_recovered(uint32_t vid, const struct sd_inode_header *h)
{
	struct vdi_state *s;

	sd_rw_wrlock(&vdi_lock);
	s = vdi_table_get(vid, NULL);
	if (s)
		vdi_table_refill(s, h);
	else
		sd_vid_set(vdi_bitmap, vid);
	sd_rw_unlock(&vdi_lock);
}
