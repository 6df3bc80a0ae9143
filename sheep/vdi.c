/*
 * The VDI namespace: names to vids, inode objects, snapshots, clones, locks.
 *
 * Inodes live in the store like any object; this file keeps a cache of
 * their headers (name, tag, snapshot state, size, copies, object size) and
 * the in-use bitmap that READ_VDIS returns. Vids are allocated by linear
 * probing from FNV-1a-64(name) mod 2^24, as QEMU expects when it lists
 * snapshots, and a deleted VDI keeps its bit (its inode loses its name) so
 * that the probe chain stays unbroken.
 *
 * Every operation that changes the namespace is an ordered op (ordered.c):
 * every node applies it, in the cluster's total order, on its
 * single-threaded cluster queue, so the caches agree everywhere. Only the
 * node that received the request (req->remote false) writes inodes, through
 * the gateway, which replicates them like data. Object I/O threads only
 * read the cache, under the rwlock.
 */
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock.h"
#include "proto_util.h"
#include "sheep_priv.h"
#include "store/store.h"

struct vdi_state {
	uint32_t vid;
	uint32_t snap_id;
	uint32_t parent;
	uint8_t nr_copies;
	uint8_t shift;
	bool snapshot;
	bool deleted;
	bool locked;
	uint64_t size;
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	struct vdi_state *hnext;
};

#define VDI_HASH_SIZE 4096
/* locked VDIs a joining node can learn: one per running VM */
#define VDI_MAX_LOCKS 65536

static uint8_t *vdi_bitmap;
static struct vdi_state *vdi_hash[VDI_HASH_SIZE];
static pthread_rwlock_t vdi_lock = PTHREAD_RWLOCK_INITIALIZER;

static struct vdi_state *lookup_vid(uint32_t vid)
{
	for (struct vdi_state *s = vdi_hash[vid % VDI_HASH_SIZE]; s; s = s->hnext)
		if (s->vid == vid)
			return s;
	return NULL;
}

static struct vdi_state *get_state(uint32_t vid)
{
	struct vdi_state *s = lookup_vid(vid);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->vid = vid;
	s->hnext = vdi_hash[vid % VDI_HASH_SIZE];
	vdi_hash[vid % VDI_HASH_SIZE] = s;
	return s;
}

/*
 * The copies of a VDI as the table keeps them: an inode may say anything
 * (a client can write its header, a disk can rot), and every object op
 * trusts the table, so a value outside 1..SD_MAX_COPIES becomes the
 * cluster's (1 before format). Never 0: 0 means "ask the table" to the
 * gateway.
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

/* copy what the cache keeps from an inode header; caller holds the write lock */
static void fill_state(struct vdi_state *s, const struct sd_inode_header *h)
{
	memcpy(s->name, h->name, sizeof(s->name));
	s->name[sizeof(s->name) - 1] = '\0';
	memcpy(s->tag, h->tag, sizeof(s->tag));
	s->tag[sizeof(s->tag) - 1] = '\0';
	s->snap_id = h->snap_id;
	s->parent = h->parent_vdi_id;
	s->nr_copies = sane_copies(s->vid, h->nr_copies);
	s->shift = sane_shift(s->vid, h->block_size_shift);
	s->snapshot = h->snap_ctime != 0;
	s->deleted = h->name[0] == '\0';
	s->size = h->vdi_size;
}

/* a changed header, for a VDI s known already (or NULL); caller holds the write lock */
static void refill_state(struct vdi_state *s, const struct sd_inode_header *h)
{
	bool locked;

	if (!s)
		return;
	locked = s->locked; /* lock state is not in the inode */
	fill_state(s, h);
	s->locked = locked;
}

static int read_local_header(uint32_t vid, struct sd_inode_header *h)
{
	return sd_store->read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0);
}

/*
 * The copies of vid's objects. Caller holds the lock: the gateway must be
 * given the copies, since looking them up itself would take the lock again.
 */
static int copies_of(uint32_t vid)
{
	struct vdi_state *s = lookup_vid(vid);

	return s && s->nr_copies ? s->nr_copies : group_copies();
}

static int read_header(uint32_t vid, struct sd_inode_header *h, int copies)
{
	return gateway_obj_read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, copies);
}

static int write_header(uint32_t vid, const struct sd_inode_header *h, int copies)
{
	return gateway_obj_write(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, false, copies);
}

static int load_one(uint64_t oid, void *arg)
{
	struct sd_inode_header *h = arg;
	uint32_t vid = oid_to_vid(oid);
	struct vdi_state *s;

	if (!is_vdi_obj(oid))
		return 0;
	if (read_local_header(vid, h) != SD_RES_SUCCESS) {
		sd_err("inode %016" PRIx64 " is unreadable; vid %06" PRIx32 " stays reserved", oid,
		       vid);
		sd_vid_set(vdi_bitmap, vid);
		return 0;
	}
	s = get_state(vid);
	if (!s)
		return -ENOMEM;
	fill_state(s, h);
	sd_vid_set(vdi_bitmap, vid);
	return 0;
}

int vdi_init(void)
{
	struct sd_inode_header *h;
	int ret;

	vdi_bitmap = calloc(1, SD_VDI_BITMAP_SIZE);
	h = malloc(SD_INODE_HEADER_SIZE);
	if (!vdi_bitmap || !h) {
		free(h);
		return -ENOMEM;
	}
	ret = sd_store->for_each(load_one, h);
	free(h);
	return ret;
}

int vdi_get_attr(uint32_t vid, struct vdi_attr *attr)
{
	struct vdi_state *s;
	int ret = SD_RES_NO_VDI;

	sd_rw_rdlock(&vdi_lock);
	s = lookup_vid(vid);
	if (s && !s->deleted) {
		attr->shift = s->shift;
		attr->nr_copies = s->nr_copies;
		attr->snapshot = s->snapshot;
		attr->size = s->size;
		ret = SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot)
{
	struct vdi_state *s;
	int ret = SD_RES_NO_VDI;

	sd_rw_rdlock(&vdi_lock);
	s = lookup_vid(vid);
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
	struct vdi_state *s;
	int copies = 0;

	sd_rw_rdlock(&vdi_lock);
	s = lookup_vid(vid);
	if (s)
		copies = s->nr_copies;
	sd_rw_unlock(&vdi_lock);
	return copies;
}

bool vdi_is_header_write(const struct sd_req *rq, uint32_t *vid)
{
	if ((rq->opcode != SD_OP_WRITE_OBJ && rq->opcode != SD_OP_CREATE_AND_WRITE_OBJ) ||
	    !is_vdi_obj(rq->obj.oid) || rq->obj.offset >= SD_INODE_HEADER_SIZE)
		return false;
	*vid = oid_to_vid(rq->obj.oid);
	return true;
}

/*
 * NOTIFY_VDI_HEADER, on every node in the cluster's order: reread the
 * header from the replicas (no lock held) and publish it. A VDI unknown
 * here (never created through the namespace) is left alone.
 */
int vdi_op_header_changed(struct request *req)
{
	uint32_t vid = req->rq.vdi.base_vdi_id;
	struct sd_inode_header *h;
	int copies, ret;

	sd_rw_rdlock(&vdi_lock);
	copies = lookup_vid(vid) ? copies_of(vid) : 0;
	sd_rw_unlock(&vdi_lock);
	if (!copies)
		return SD_RES_NO_VDI;
	h = malloc(sizeof(*h));
	if (!h)
		return SD_RES_NO_MEM;
	ret = read_header(vid, h, copies);
	if (ret == SD_RES_SUCCESS) {
		sd_rw_wrlock(&vdi_lock);
		refill_state(lookup_vid(vid), h);
		sd_rw_unlock(&vdi_lock);
	} else {
		sd_err("the header of vid %06" PRIx32 " changed and cannot be reread: %s", vid,
		       sd_strerror(ret));
	}
	free(h);
	return ret;
}

/*
 * Find a live VDI called name: with snapid, the one with that snap_id; with
 * a tag, the snapshot carrying it; otherwise the working (non-snapshot)
 * VDI. Caller holds the lock. NULL and *res = NO_VDI or NO_TAG.
 */
static struct vdi_state *find_vdi(const char *name, uint32_t snapid, const char *tag, int *res)
{
	uint32_t start = sd_name_to_vid(name), vid = start;
	bool name_seen = false;

	do {
		if (vid != 0) {
			struct vdi_state *s;

			if (!sd_vid_test(vdi_bitmap, vid))
				break;
			s = lookup_vid(vid);
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

/*
 * Payload of VDI requests: name[256] and optionally tag[256]. Checks that
 * both are NUL-terminated in their fields; name must be non-empty.
 */
static int parse_names(struct request *req, const char **name, const char **tag)
{
	uint32_t len = req->rq.data_length;
	char *p = req->data;

	if (!(req->rq.flags & SD_FLAG_CMD_WRITE) || len == 0)
		return SD_RES_INVALID_PARMS;
	if (!memchr(p, '\0', min_t(uint32_t, len, SD_MAX_VDI_LEN)) || p[0] == '\0')
		return SD_RES_INVALID_PARMS;
	*name = p;
	*tag = NULL;
	if (len > SD_MAX_VDI_LEN) {
		char *t = p + SD_MAX_VDI_LEN;
		if (!memchr(t, '\0', min_t(uint32_t, len - SD_MAX_VDI_LEN, SD_MAX_VDI_TAG_LEN)))
			return SD_RES_INVALID_PARMS;
		*tag = t;
	}
	return SD_RES_SUCCESS;
}

static uint64_t now_ctime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec << 32) | (uint32_t)ts.tv_nsec;
}

/*
 * Write a new inode: only the header and, when the map has entries, the
 * map (the rest of the object reads as zeros). Durable before returning.
 */
static int create_inode(const struct sd_inode *inode, bool has_map)
{
	uint32_t len = has_map ? SD_INODE_SIZE : SD_INODE_HEADER_SIZE;

	return gateway_obj_write(vid_to_vdi_oid(inode->vdi_id), inode, len, 0, true,
				 inode->nr_copies);
}

static bool map_is_empty(const struct sd_inode *inode)
{
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		if (inode->data_vdi_id[i])
			return false;
	return true;
}

static void add_child(struct sd_inode_header *parent, uint32_t child)
{
	for (int i = 0; i < SD_MAX_CHILDREN; i++)
		if (!parent->child_vdi_id[i]) {
			parent->child_vdi_id[i] = child;
			return;
		}
}

/* what NEW_VDI decided under the table's lock, for the I/O done outside it */
struct new_plan {
	uint32_t vid;	     /* the new VDI */
	uint32_t base_vid;   /* the VDI whose map the new one starts with, or 0 */
	uint8_t base_copies; /* its copies */
	uint32_t parent_vid; /* the new VDI's parent, or 0 */
	uint8_t parent_copies;
	bool is_snapshot; /* the working VDI parent_vid becomes a snapshot */
	uint32_t snap_id;
	uint8_t copies;
};

/*
 * NEW_VDI's decisions, under the table's lock: which VDI is the working
 * one, the base, the copies, the vid. Caller holds the lock. SD_RES_*.
 */
static int plan_new(const struct request *req, const char *name, struct new_plan *p)
{
	const struct sd_req *rq = &req->rq;
	struct vdi_state *cur, *base = NULL;
	int res;

	memset(p, 0, sizeof(*p));
	cur = find_vdi(name, 0, NULL, &res);
	if (rq->vdi.base_vdi_id) {
		base = lookup_vid(rq->vdi.base_vdi_id);
		if (!base || base->deleted)
			return SD_RES_NO_BASE_VDI;
	}
	if (rq->vdi.snapid && cur) {
		/* the tag the working VDI carries names the snapshot: one per VDI */
		if (cur->tag[0] && find_vdi(name, 0, cur->tag, &res)) {
			sd_err("vdi %s: a snapshot tagged %s exists already", name, cur->tag);
			return SD_RES_VDI_EXIST;
		}
		p->is_snapshot = true;
		p->parent_vid = cur->vid;
		p->parent_copies = cur->nr_copies;
		p->snap_id = cur->snap_id + 1;
		if (!base)
			base = cur;
	} else if (cur) {
		return SD_RES_VDI_EXIST;
	} else if (base) {
		p->parent_vid = base->vid;
		p->parent_copies = base->nr_copies;
	}
	if (!p->snap_id)
		p->snap_id = 1;
	if (base) {
		p->base_vid = base->vid;
		p->base_copies = base->nr_copies;
	}
	p->copies = rq->vdi.copies ? rq->vdi.copies : base ? base->nr_copies : group_copies();
	/* a VDI never claims more copies than there are nodes to hold them */
	if (p->copies > req->nr_members) {
		sd_err("vdi %s: %u copies asked, %d node(s)", name, p->copies, req->nr_members);
		return SD_RES_TOO_FEW_NODES;
	}
	p->vid = sd_vid_find_free(vdi_bitmap, name);
	return p->vid ? SD_RES_SUCCESS : SD_RES_FULL_VDI;
}

/*
 * The originator's inode I/O for NEW_VDI (no lock held): the new inode
 * first, a crash in between leaves the old one untouched; then the
 * parent's header (snapshot time, child). SD_RES_*.
 */
static int write_new_inodes(const struct new_plan *p, struct sd_inode *inode)
{
	struct sd_inode_header *ph;
	int ret;

	ret = create_inode(inode, p->base_vid && !map_is_empty(inode));
	if (ret || !p->parent_vid)
		return ret;
	ph = malloc(SD_INODE_HEADER_SIZE);
	if (!ph)
		return SD_RES_NO_MEM;
	ret = read_header(p->parent_vid, ph, p->parent_copies);
	if (!ret) {
		if (p->is_snapshot)
			ph->snap_ctime = now_ctime();
		add_child(ph, p->vid);
		ret = write_header(p->parent_vid, ph, p->parent_copies);
	}
	free(ph);
	if (ret) {
		sd_err("cannot update the parent %06" PRIx32 " of %06" PRIx32, p->parent_vid,
		       p->vid);
		ret = SD_RES_BASE_VDI_WRITE;
	}
	return ret;
}

/*
 * NEW_VDI. snapid != 0 means "snapshot the working VDI": it becomes a
 * snapshot and a new working VDI with the same name takes its place.
 * base_vdi_id != 0 without snapid makes a clone of that VDI.
 *
 * Every node decides under the table's lock, the originator alone writes
 * the inodes with no lock held (the gateway's I/O looks the table up
 * itself), and every node then publishes the new VDI under the lock. Only
 * the cluster worker changes the namespace, so what was decided still
 * holds when it is published.
 */
int vdi_op_new(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	const char *name, *tag;
	uint8_t shift = rq->vdi.block_size_shift ? rq->vdi.block_size_shift
						 : SD_DEFAULT_BLOCK_SIZE_SHIFT;
	struct vdi_state *s, *ns;
	struct sd_inode *inode = NULL;
	struct new_plan p;
	int ret;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	if (shift < SD_MIN_BLOCK_SIZE_SHIFT || shift > SD_MAX_BLOCK_SIZE_SHIFT ||
	    rq->vdi.vdi_size == 0 || rq->vdi.vdi_size > ((uint64_t)MAX_DATA_OBJS << shift) ||
	    rq->vdi.copies > SD_MAX_COPIES)
		return SD_RES_INVALID_PARMS;

	sd_rw_rdlock(&vdi_lock);
	ret = plan_new(req, name, &p);
	sd_rw_unlock(&vdi_lock);
	if (ret)
		return ret;

	/* a remote copy changes the cache only: it needs no map */
	inode = calloc(1, req->remote ? SD_INODE_HEADER_SIZE : sizeof(*inode));
	ns = calloc(1, sizeof(*ns));
	if (!inode || !ns) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	if (p.base_vid && !req->remote) {
		ret = gateway_obj_read(vid_to_vdi_oid(p.base_vid), inode, SD_INODE_SIZE, 0,
				       p.base_copies);
		if (ret) {
			ret = SD_RES_BASE_VDI_READ;
			goto out_free;
		}
		memset(inode, 0, SD_INODE_HEADER_SIZE);
	}
	snprintf(inode->name, sizeof(inode->name), "%s", name);
	inode->create_time = now_ctime();
	inode->vdi_size = rq->vdi.vdi_size;
	inode->copy_policy = rq->vdi.copy_policy;
	inode->nr_copies = p.copies;
	inode->block_size_shift = shift;
	inode->snap_id = p.snap_id;
	inode->vdi_id = p.vid;
	inode->parent_vdi_id = p.parent_vid;
	if (!req->remote) {
		ret = write_new_inodes(&p, inode);
		if (ret)
			goto out_free;
	}

	sd_rw_wrlock(&vdi_lock);
	s = lookup_vid(p.vid);
	if (!s) {
		s = ns;
		ns = NULL;
		s->vid = p.vid;
		s->hnext = vdi_hash[p.vid % VDI_HASH_SIZE];
		vdi_hash[p.vid % VDI_HASH_SIZE] = s;
	}
	fill_state(s, (const struct sd_inode_header *)inode);
	sd_vid_set(vdi_bitmap, p.vid);
	if (p.is_snapshot) {
		struct vdi_state *ps = lookup_vid(p.parent_vid);

		ps->snapshot = true;
		/* the client that had the working VDI open now writes to the new one */
		if (ps->locked) {
			ps->locked = false;
			s->locked = true;
		}
	}
	sd_rw_unlock(&vdi_lock);
	sd_info("new vdi %s vid %06" PRIx32 "%s", name, p.vid,
		p.is_snapshot ? " (snapshot of the working vdi)" : "");
	req->rp.vdi.vdi_id = p.vid;
	ret = SD_RES_SUCCESS;
out_free:
	free(inode);
	free(ns);
	return ret;
}

/* is vid one of s's ancestors (the VDIs whose objects s may share)? */
static bool descends_from(const struct vdi_state *s, uint32_t vid)
{
	for (int depth = 0; s && s->parent && depth < 4096; depth++) {
		if (s->parent == vid)
			return true;
		s = lookup_vid(s->parent);
	}
	return false;
}

struct remove_ctx {
	uint32_t vid;
	uint8_t *shared; /* bit per index: still used by a descendant */
	uint64_t nr_removed;
};

static int remove_unshared(uint64_t oid, void *arg)
{
	struct remove_ctx *ctx = arg;
	uint32_t idx = oid_to_idx(oid);

	if (is_vdi_obj(oid) || oid_to_vid(oid) != ctx->vid)
		return 0;
	if (is_data_obj(oid) && sd_vid_test(ctx->shared, idx))
		return 0;
	if (sd_store->remove(oid) == SD_RES_SUCCESS)
		ctx->nr_removed++;
	return 0;
}

struct vid_copies {
	uint32_t vid;
	uint8_t copies;
};

/*
 * The live descendants of vid (the VDIs that may read its objects), with
 * their copies, in a new array (*out, *nr). Caller holds the lock. SD_RES_*.
 */
static int list_descendants(uint32_t vid, struct vid_copies **out, size_t *nr)
{
	size_t cap = 0;

	*out = NULL;
	*nr = 0;
	for (int b = 0; b < VDI_HASH_SIZE; b++)
		for (struct vdi_state *s = vdi_hash[b]; s; s = s->hnext) {
			if (s->vid == vid || s->deleted || !descends_from(s, vid))
				continue;
			if (*nr == cap) {
				struct vid_copies *n;

				cap = cap ? cap * 2 : 16;
				n = realloc(*out, cap * sizeof(*n));
				if (!n) {
					free(*out);
					*out = NULL;
					return SD_RES_NO_MEM;
				}
				*out = n;
			}
			(*out)[(*nr)++] = (struct vid_copies){ s->vid, s->nr_copies };
		}
	return SD_RES_SUCCESS;
}

/* mark in ctx->shared the indexes whose object one of the VDIs in d still reads */
static int mark_shared(struct remove_ctx *ctx, const struct vid_copies *d, size_t nr)
{
	uint32_t *map = malloc(4 * MAX_DATA_OBJS);
	int ret = SD_RES_SUCCESS;

	if (!map)
		return SD_RES_NO_MEM;
	for (size_t k = 0; k < nr && ret == SD_RES_SUCCESS; k++) {
		if (gateway_obj_read(vid_to_vdi_oid(d[k].vid), map, 4 * MAX_DATA_OBJS,
				     SD_INODE_HEADER_SIZE, d[k].copies)) {
			ret = SD_RES_EIO;
			break;
		}
		for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
			if (map[i] == ctx->vid)
				sd_vid_set(ctx->shared, i);
	}
	free(map);
	return ret;
}

/* find the VDI that DEL_VDI names and its descendants, under the lock: SD_RES_* */
static int plan_del(struct request *req, const char *name, const char *tag, uint32_t *vid,
		    uint8_t *copies, struct vid_copies **d, size_t *nr)
{
	struct vdi_state *s;
	int ret = SD_RES_SUCCESS;

	sd_rw_rdlock(&vdi_lock);
	s = find_vdi(name, req->rq.vdi.snapid, tag, &ret);
	/* a snapshot id or tag names a snapshot: never the working VDI (its snap_id too) */
	if (s && (req->rq.vdi.snapid || (tag && tag[0])) && !s->snapshot) {
		s = NULL;
		ret = SD_RES_NO_VDI;
	}
	if (s) {
		*vid = s->vid;
		*copies = s->nr_copies;
		ret = list_descendants(s->vid, d, nr);
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

/*
 * DEL_VDI: the working VDI (name only, snapid 0) or a snapshot (snapid or
 * tag). Its objects go unless a descendant still reads them; its inode
 * stays, nameless, to keep the vid's bit set. No lock check: QEMU locks a
 * snapshot before it deletes it (snapshot -d).
 *
 * As NEW_VDI: found under the lock, the maps read and the header written
 * without it, the deletion published under it, and only then this node's
 * replicas of the unshared objects removed.
 */
int vdi_op_del(struct request *req)
{
	const char *name, *tag;
	struct vdi_state *s;
	struct remove_ctx ctx = { 0 };
	struct sd_inode_header *h = NULL;
	struct vid_copies *d = NULL;
	size_t nr_d = 0;
	uint8_t copies = 0;
	int ret;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	ret = plan_del(req, name, tag, &ctx.vid, &copies, &d, &nr_d);
	if (ret)
		return ret;
	ctx.shared = calloc(1, MAX_DATA_OBJS / 8);
	h = malloc(SD_INODE_HEADER_SIZE);
	if (!ctx.shared || !h) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	ret = mark_shared(&ctx, d, nr_d);
	if (ret)
		goto out_free;
	/*
	 * The name goes first: a crash in between leaves garbage, never a half
	 * VDI. Every node then removes its own replicas of the unshared objects.
	 */
	if (!req->remote) {
		ret = read_header(ctx.vid, h, copies);
		if (ret)
			goto out_free;
		memset(h->name, 0, sizeof(h->name));
		ret = write_header(ctx.vid, h, copies);
		if (ret)
			goto out_free;
	}
	sd_rw_wrlock(&vdi_lock);
	s = lookup_vid(ctx.vid);
	s->deleted = true;
	s->name[0] = '\0';
	sd_rw_unlock(&vdi_lock);
	/* recorded before anything is removed: no recovery brings it back */
	ret = deleted_add(ctx.vid, ctx.shared);
	if (ret)
		sd_err("cannot record the deletion of vid %06" PRIx32 ": %s", ctx.vid,
		       strerror(-ret));
	sd_store->for_each(remove_unshared, &ctx);
	sd_info("deleted vdi %s vid %06" PRIx32 ", %" PRIu64 " objects removed", name, ctx.vid,
		ctx.nr_removed);
	ret = SD_RES_SUCCESS;
out_free:
	free(ctx.shared);
	free(d);
	free(h);
	return ret;
}

static int resolve(struct request *req, bool lock)
{
	const char *name, *tag;
	struct vdi_state *s;
	int ret, res;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	sd_rw_wrlock(&vdi_lock);
	s = find_vdi(name, req->rq.vdi.snapid, tag, &res);
	if (!s) {
		ret = res;
	} else if (lock && s->locked && req->rq.vdi.type != SD_LOCK_TYPE_SHARED) {
		ret = SD_RES_VDI_LOCKED;
	} else {
		if (lock)
			s->locked = true;
		req->rp.vdi.vdi_id = s->vid;
		ret = SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

int vdi_op_lock(struct request *req)
{
	return resolve(req, true);
}

int vdi_op_get_info(struct request *req)
{
	return resolve(req, false);
}

/*
 * RELEASE_VDI: base_vdi_id names the VDI; the payload is its name with one
 * NUL (strlen + 1 bytes, QEMU does not pad it). The vid decides, but a
 * payload that is not a name is refused like in every other VDI op.
 */
int vdi_op_release(struct request *req)
{
	const char *name, *tag;
	struct vdi_state *s;
	int ret;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	sd_rw_wrlock(&vdi_lock);
	s = lookup_vid(req->rq.vdi.base_vdi_id);
	if (!s || s->deleted)
		ret = SD_RES_NO_VDI;
	else if (!s->locked)
		ret = SD_RES_VDI_NOT_LOCKED;
	else {
		s->locked = false;
		ret = SD_RES_SUCCESS;
	}
	sd_rw_unlock(&vdi_lock);
	return ret;
}

int vdi_op_read_vdis(struct request *req)
{
	uint32_t len = min_t(uint32_t, req->rq.data_length, SD_VDI_BITMAP_SIZE);

	sd_rw_rdlock(&vdi_lock);
	memcpy(req->data, vdi_bitmap, len);
	sd_rw_unlock(&vdi_lock);
	req->rp.data_length = len;
	return SD_RES_SUCCESS;
}

/* GET_VDI_LOCKS: the vids of the locked VDIs; BUFFER_SMALL if they do not fit */
int vdi_op_get_locks(struct request *req)
{
	uint32_t max = req->rq.data_length / sizeof(uint32_t), n = 0;
	uint32_t *vids = req->data;
	int ret = SD_RES_SUCCESS;

	sd_rw_rdlock(&vdi_lock);
	for (size_t i = 0; i < VDI_HASH_SIZE && ret == SD_RES_SUCCESS; i++)
		for (const struct vdi_state *s = vdi_hash[i]; s; s = s->hnext) {
			if (!s->locked || s->deleted)
				continue;
			if (n == max) {
				ret = SD_RES_BUFFER_SMALL;
				break;
			}
			vids[n++] = s->vid;
		}
	sd_rw_unlock(&vdi_lock);
	req->rp.data_length = n * sizeof(uint32_t);
	return ret;
}

/* take member nid's lock state (joining, after the namespace): SD_RES_* */
static int sync_locks_from(const struct sd_node_id *nid)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
			     .opcode = SD_OP_GET_VDI_LOCKS,
			     .data_length = VDI_MAX_LOCKS * sizeof(uint32_t) };
	uint32_t *vids = malloc(rq.data_length);
	struct sd_rsp rsp;
	int ret = SD_RES_NO_MEM, nr_locked = 0;

	if (vids)
		ret = peer_request(nid, &rq, NULL, vids, &rsp) ? SD_RES_EIO : (int)rsp.result;
	if (ret == SD_RES_SUCCESS) {
		sd_rw_wrlock(&vdi_lock);
		for (uint32_t i = 0; i < rsp.data_length / sizeof(uint32_t); i++) {
			struct vdi_state *s = lookup_vid(vids[i]);

			if (s && !s->deleted) {
				s->locked = true;
				nr_locked++;
			} else {
				sd_warn("vid %06" PRIx32 " locked in the cluster, unknown here",
					vids[i]);
			}
		}
		sd_rw_unlock(&vdi_lock);
		sd_info("learned %d locked vdi(s) from the cluster", nr_locked);
	}
	free(vids);
	return ret;
}

void vdi_inode_recovered(uint32_t vid, const struct sd_inode_header *h)
{
	sd_rw_wrlock(&vdi_lock);
	sd_vid_set(vdi_bitmap, vid);
	refill_state(get_state(vid), h);
	sd_rw_unlock(&vdi_lock);
}

/*
 * A node that joined a running cluster learns the namespace from member
 * nid: its in-use bitmap, then the header of every vid it did not know,
 * read through the gateway (from whichever node has the inode). Runs on the
 * cluster worker, so no ordered op is applied meanwhile. Then the lock
 * state (GET_VDI_LOCKS): a VDI locked through another node stays locked here.
 */
int vdi_sync_from(const struct sd_node_id *nid)
{
	struct sd_req rq = { .proto_ver = SD_PROTO_VER, .opcode = SD_OP_READ_VDIS,
			     .data_length = SD_VDI_BITMAP_SIZE };
	struct sd_inode_header *h = malloc(sizeof(*h));
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	struct sd_rsp rsp;
	int ret, locks_ret, nr_new = 0;

	if (!h || !bitmap) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	ret = peer_request(nid, &rq, NULL, bitmap, &rsp);
	if (ret) {
		ret = SD_RES_EIO;
		goto out_free;
	}
	ret = rsp.result;
	if (ret != SD_RES_SUCCESS)
		goto out_free;
	memset(bitmap + rsp.data_length, 0, SD_VDI_BITMAP_SIZE - rsp.data_length);
	for (uint32_t vid = 0; vid < SD_NR_VDIS; vid++) {
		struct vdi_state *s;
		int r;

		if (!bitmap[vid / 8]) {
			vid |= 7;
			continue;
		}
		if (!sd_vid_test(bitmap, vid))
			continue;
		r = read_header(vid, h, group_copies());
		sd_rw_wrlock(&vdi_lock);
		sd_vid_set(vdi_bitmap, vid);
		s = r == SD_RES_SUCCESS ? get_state(vid) : NULL;
		if (s) {
			refill_state(s, h);
			nr_new++;
		}
		sd_rw_unlock(&vdi_lock);
		if (r != SD_RES_SUCCESS)
			sd_err("inode of vid %06" PRIx32 " unreadable while joining: %s", vid,
			       sd_strerror(r));
	}
	sd_info("learned %d vdi(s) from the cluster", nr_new);
	/* logged here: the caller's message is about the namespace */
	locks_ret = sync_locks_from(nid);
	if (locks_ret != SD_RES_SUCCESS)
		sd_err("cannot learn the locked vdis from the cluster: %s", sd_strerror(locks_ret));
out_free:
	free(bitmap);
	free(h);
	return ret;
}
