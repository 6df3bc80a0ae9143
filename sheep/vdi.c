/*
 * The VDI namespace ops: names to vids, inode objects, snapshots, clones,
 * locks.
 *
 * Inodes live in the store like any object; the VDI table (vdi_table.c)
 * caches their headers, the lock state and the in-use bitmap. Vids are
 * allocated by linear probing from FNV-1a-64(name) mod 2^24, as QEMU
 * expects when it lists snapshots, and a deleted VDI keeps its bit (its
 * inode loses its name) so that the probe chain stays unbroken.
 *
 * Every namespace op, the lookups included, is an ordered op (ordered.c):
 * every node applies it, in the cluster's total order, on its
 * single-threaded cluster queue, so the tables agree everywhere and every
 * node answers a question alike (a lookup right after a create through
 * another node finds the VDI). Each op decides under the table's lock,
 * does its inode I/O without it (only the node that received the request,
 * req->ord.remote false, writes inodes, through the gateway, which replicates
 * them like data), and publishes under it. Only the cluster worker changes
 * the namespace, so what was decided still holds when it is published.
 * The start-up load is here too (vdi_init); a joining node's sync is in
 * vdi_sync.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "ec.h"
#include "list.h"
#include "ordered.h"
#include "proto_util.h"
#include "deleted.h"
#include "gateway.h"
#include "group.h"
#include "request.h"
#include "vdi.h"
#include "store/store.h"
#include "vdi_table.h"

/*
 * The front ends' part of a lock (main thread, vdi_set_lock_hooks): the
 * holder's gateway disconnects a holder whose lock an operator took away,
 * and follows a lock that a snapshot moved to the new working VDI. An op
 * runs on the apply thread: it leaves the call to the main thread
 * (ord.after), on every node, the holder's gateway's doing it.
 */
static void (*lock_broken_fn)(uint32_t vid, const struct sd_lock_owner *owner);
static void (*lock_moved_fn)(uint32_t from, uint32_t to);

static void lock_broken(struct request *req)
{
	if (lock_broken_fn)
		lock_broken_fn(req->ord.after_vid[0], &req->ord.after_owner);
}

static void lock_moved(struct request *req)
{
	if (lock_moved_fn)
		lock_moved_fn(req->ord.after_vid[0], req->ord.after_vid[1]);
}

static void after_lock(struct request *req, void (*fn)(struct request *), uint32_t vid,
		       uint32_t vid2, const struct sd_lock_owner *owner)
{
	req->ord.after = fn;
	req->ord.after_vid[0] = vid;
	req->ord.after_vid[1] = vid2;
	req->ord.after_owner = *owner;
}

/*
 * The copies of vid's objects, for the namespace ops' own inode I/O.
 * Caller holds the table's lock: the gateway must be given the copies,
 * since looking them up itself would take the lock again.
 */
static int copies_of(uint32_t vid)
{
	struct vdi_state *s = vdi_table_lookup(vid);

	return s && s->nr_copies ? s->nr_copies : group_copies();
}

static int read_local_header(uint32_t vid, struct sd_inode_header *h)
{
	return sd_store->read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0);
}

/* the gateway's view of a VDI the daemon itself reads and writes: its copies */
#define COPIES(n) (&(struct vdi_attr){ .nr_copies = (uint8_t)(n) })

static int read_header(uint32_t vid, struct sd_inode_header *h, int copies)
{
	return gateway_read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, COPIES(copies));
}

static int write_header(uint32_t vid, const struct sd_inode_header *h, int copies)
{
	return gateway_write(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, GW_SYNC,
			     COPIES(copies));
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
		vdi_table_wrlock();
		vdi_table_set_bit(vid);
		vdi_table_unlock();
		return 0;
	}
	vdi_table_wrlock();
	s = vdi_table_get(vid, NULL);
	if (s)
		vdi_table_fill(s, h);
	vdi_table_unlock();
	return s ? 0 : -ENOMEM;
}

int vdi_init(void)
{
	struct sd_inode_header *h;
	int ret;

	h = malloc(SD_INODE_HEADER_SIZE);
	if (vdi_table_init() || !h) {
		free(h);
		return -ENOMEM;
	}
	ret = sd_store->for_each(load_one, h);
	free(h);
	return ret;
}

bool vdi_is_header_write(const struct sd_req *rq, uint32_t *vid)
{
	if ((rq->opcode != SD_OP_WRITE_OBJ && rq->opcode != SD_OP_CREATE_AND_WRITE_OBJ) ||
	    !is_vdi_obj(rq->obj.oid) || rq->obj.offset >= SD_INODE_HEADER_SIZE)
		return false;
	*vid = oid_to_vid(rq->obj.oid);
	return true;
}

/* main thread (vdi_set_copies_hook): what a VDI's new copies start on this node */
static void (*copies_changed_fn)(void);

static void copies_changed(struct request *req)
{
	(void)req;
	if (copies_changed_fn)
		copies_changed_fn();
}

void vdi_set_copies_hook(void (*changed)(void))
{
	copies_changed_fn = changed;
}

/*
 * ALTER_COPY, on the node asked (an io worker): the header of a replicated
 * VDI gets its new copies, written through the gateway to the holders of
 * the old count; NOTIFY_VDI_HEADER follows (vdi_op_alter_copy_notify) and
 * every node rereads it in the cluster's order, places the VDI's objects
 * with the new count from then on, and runs the epoch's recovery again,
 * which fetches the copies that the new count adds and, once every node
 * has them, removes those it drops (recovery.c: clean_epoch).
 *
 * Clients go on writing meanwhile: the nodes take the new count one after
 * the other, and a write placed with one count never lands where the
 * other is in force (peer.c refuses it, SD_RES_COPIES_CHANGED; the gateway
 * retries with its table's count once that changed: gateway.c), nor is an
 * object fetched for the new count from a node still on the old one. So a
 * node that fetched its new copy gets every write after that fetch.
 *
 * Why the header first and then the notification: every copy of the inode
 * says the new count before any node places with it, so a node that
 * restarts or joins (it loads the table from inodes, or from a member)
 * learns the same count; a crash in between leaves a header that says N
 * and tables that say the old count until the next restart, and running
 * the command again completes it.
 */
int vdi_op_alter_copy(struct request *req)
{
	uint32_t vid = req->rq.vdi.base_vdi_id;
	uint8_t copies = req->rq.vdi.copies;
	int nr_storing = group_nr_nodes() - group_nr_gateways();
	struct vdi_attr attr;
	struct vdi_state *s;
	int ret = SD_RES_SUCCESS;

	vdi_table_rdlock();
	s = vdi_table_lookup(vid);
	if (!s || s->deleted)
		ret = SD_RES_NO_VDI;
	else if (s->copy_policy)
		ret = SD_RES_INVALID_PARMS; /* D:P is the VDI's for good */
	vdi_table_unlock();
	if (ret == SD_RES_INVALID_PARMS)
		sd_warn("vid %06" PRIx32 ": alter-copy refused, the vdi is erasure-coded", vid);
	if (ret)
		return ret;
	if (copies < 1 || copies > SD_MAX_COPIES)
		return SD_RES_INVALID_PARMS;
	if (copies > nr_storing) {
		sd_warn("vid %06" PRIx32 ": alter-copy to %u copies refused, %d node(s) store objects",
			vid, copies, nr_storing);
		return SD_RES_TOO_FEW_NODES;
	}
	ret = vdi_get_attr(vid, &attr);
	if (ret == SD_RES_SUCCESS)
		ret = gateway_write(vid_to_vdi_oid(vid), &copies, sizeof(copies),
				    offsetof(struct sd_inode, nr_copies), GW_SYNC, &attr);
	if (ret)
		sd_err("vid %06" PRIx32 ": the header's copies could not be written: %s", vid,
		       sd_strerror(ret));
	return ret;
}

bool vdi_op_alter_copy_held(const struct request *req)
{
	return req->rp.result == SD_RES_SUCCESS;
}

void vdi_op_alter_copy_notify(struct request *req)
{
	ordered_notify_header(req, req->rq.vdi.base_vdi_id);
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
	struct vdi_state *s;
	int copies, ret, now = 0;

	vdi_table_rdlock();
	s = vdi_table_lookup(vid);
	copies = s ? copies_of(vid) : 0;
	vdi_table_unlock();
	if (!copies)
		return SD_RES_NO_VDI;
	h = malloc(sizeof(*h));
	if (!h)
		return SD_RES_NO_MEM;
	ret = read_header(vid, h, copies);
	if (ret == SD_RES_SUCCESS) {
		/* s stays (a state is never freed): only its fields may have changed */
		vdi_table_wrlock();
		vdi_table_refill(s, h);
		now = s->copy_policy ? 0 : s->nr_copies;
		vdi_table_unlock();
		/* ALTER_COPY: its objects have new places; recovery moves them (main thread) */
		if (now && now != copies) {
			sd_info("vid %06" PRIx32 ": %d copies now, %d before: recovery moves them",
				vid, now, copies);
			req->ord.after = copies_changed;
		}
	} else {
		sd_err("the header of vid %06" PRIx32 " changed and cannot be reread: %s", vid,
		       sd_strerror(ret));
	}
	free(h);
	return ret;
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

	return gateway_create(vid_to_vdi_oid(inode->vdi_id), 0, inode, len, 0, GW_SYNC,
			      COPIES(inode->nr_copies));
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
	bool is_snapshot;	   /* the working VDI parent_vid becomes a snapshot */
	struct vdi_state *working; /* that VDI's state, when is_snapshot */
	uint32_t snap_id;
	uint8_t copies;
	uint8_t copy_policy; /* 0: replicated; else D:P (ec.h) */
};

/*
 * The new VDI's copies and scheme: the request's, else its base's, else
 * the cluster's (cluster format -c D:P makes erasure coding the default;
 * a request that names copies only is replicated whatever the default).
 * Erasure coding is copy_policy (D / 2) << 4 | P with copies D + P (0
 * copies: D + P). A snapshot or a clone keeps its base's scheme: copies
 * and D:P never mix among the VDIs that share objects.
 */
static int plan_scheme(const struct sd_req *rq, const char *name, const struct vdi_state *base,
		       struct new_plan *p)
{
	uint8_t policy = rq->vdi.copy_policy;
	int d, k;

	if (!policy && base && (!rq->vdi.copies || rq->vdi.copies == base->nr_copies))
		policy = base->copy_policy;
	else if (!policy && !base && !rq->vdi.copies)
		policy = group_copy_policy();
	p->copies = rq->vdi.copies ? rq->vdi.copies : base ? base->nr_copies : group_copies();
	if (policy) {
		if (!ec_policy_to_dp(policy, &d, &k)) {
			sd_err("vdi %s: copy_policy 0x%x names no erasure code", name, policy);
			return SD_RES_INVALID_PARMS;
		}
		if (rq->vdi.copies && rq->vdi.copies != d + k) {
			sd_err("vdi %s: %d:%d with %u copies", name, d, k, rq->vdi.copies);
			return SD_RES_INVALID_PARMS;
		}
		p->copies = (uint8_t)(d + k);
	}
	if (base && policy != base->copy_policy) {
		sd_err("vdi %s: its base %06" PRIx32 " has another redundancy scheme", name,
		       base->vid);
		return SD_RES_INVALID_PARMS;
	}
	p->copy_policy = policy;
	return SD_RES_SUCCESS;
}

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
	cur = vdi_table_find(name, 0, NULL, &res);
	if (rq->vdi.base_vdi_id) {
		base = vdi_table_lookup(rq->vdi.base_vdi_id);
		if (!base || base->deleted)
			return SD_RES_NO_BASE_VDI;
	}
	if (rq->vdi.snapid && cur) {
		/* the tag the working VDI carries names the snapshot: one per VDI */
		if (cur->tag[0] && vdi_table_find(name, 0, cur->tag, &res)) {
			sd_err("vdi %s: a snapshot tagged %s exists already", name, cur->tag);
			return SD_RES_VDI_EXIST;
		}
		p->is_snapshot = true;
		p->working = cur;
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
	res = plan_scheme(rq, name, base, p);
	if (res)
		return res;
	/* a VDI never claims more copies (or strips) than there are nodes to hold them */
	if (p->copies > req->ord.nr_storing) {
		sd_err("vdi %s: %u copies asked, %d node(s) store objects", name, p->copies,
		       req->ord.nr_storing);
		return SD_RES_TOO_FEW_NODES;
	}
	p->vid = vdi_table_free_vid(name);
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

	vdi_table_rdlock();
	ret = plan_new(req, name, &p);
	vdi_table_unlock();
	if (ret)
		return ret;

	/* a remote copy changes the cache only: it needs no map */
	inode = calloc(1, req->ord.remote ? SD_INODE_HEADER_SIZE : sizeof(*inode));
	ns = calloc(1, sizeof(*ns));
	if (!inode || !ns) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	if (p.base_vid && !req->ord.remote) {
		ret = gateway_read(vid_to_vdi_oid(p.base_vid), inode, SD_INODE_SIZE, 0,
				   COPIES(p.base_copies));
		if (ret) {
			ret = SD_RES_BASE_VDI_READ;
			goto out_free;
		}
		memset(inode, 0, SD_INODE_HEADER_SIZE);
	}
	snprintf(inode->name, sizeof(inode->name), "%s", name);
	inode->create_time = now_ctime();
	inode->vdi_size = rq->vdi.vdi_size;
	inode->copy_policy = p.copy_policy;
	inode->nr_copies = p.copies;
	inode->block_size_shift = shift;
	inode->snap_id = p.snap_id;
	inode->vdi_id = p.vid;
	inode->parent_vdi_id = p.parent_vid;
	if (!req->ord.remote) {
		ret = write_new_inodes(&p, inode);
		if (ret)
			goto out_free;
	}

	/* publish: ns was allocated before the I/O, so this cannot fail */
	vdi_table_wrlock();
	s = vdi_table_get(p.vid, &ns);
	vdi_table_fill(s, (const struct sd_inode_header *)inode);
	if (p.working) {
		p.working->snapshot = true;
		/* the client that had the working VDI open now writes to the new one */
		if (p.working->locked) {
			p.working->locked = false;
			s->locked = true;
			s->owner = p.working->owner;
			/* its holder's gateway follows: the client releases the new vid */
			if (!memcmp(&s->owner.node, group_self(), sizeof(s->owner.node)))
				after_lock(req, lock_moved, p.working->vid, p.vid, &s->owner);
		}
	}
	vdi_table_unlock();
	sd_info("new vdi %s vid %06" PRIx32 "%s", name, p.vid,
		p.is_snapshot ? " (snapshot of the working vdi)" : "");
	req->rp.vdi.vdi_id = p.vid;
	ret = SD_RES_SUCCESS;
out_free:
	free(inode);
	free(ns);
	return ret;
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

/* the live descendants of a VDI (the VDIs that may read its objects), with their copies */
struct descendants {
	uint32_t vid;
	struct vid_copies *d;
	size_t nr, cap;
};

static int add_descendant(struct vdi_state *s, void *arg)
{
	struct descendants *ds = arg;

	if (s->vid == ds->vid || s->deleted || !vdi_table_descends_from(s, ds->vid))
		return 0;
	if (ds->nr == ds->cap) {
		size_t cap = ds->cap ? ds->cap * 2 : 16;
		struct vid_copies *n = realloc(ds->d, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ds->d = n;
		ds->cap = cap;
	}
	ds->d[ds->nr++] = (struct vid_copies){ s->vid, s->nr_copies };
	return 0;
}

/* vid's live descendants in a new array (*out, *nr). Caller holds the lock. SD_RES_*. */
static int list_descendants(uint32_t vid, struct vid_copies **out, size_t *nr)
{
	struct descendants ds = { .vid = vid };

	if (vdi_table_for_each(add_descendant, &ds)) {
		free(ds.d);
		*out = NULL;
		*nr = 0;
		return SD_RES_NO_MEM;
	}
	*out = ds.d;
	*nr = ds.nr;
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
		if (gateway_read(vid_to_vdi_oid(d[k].vid), map, 4 * MAX_DATA_OBJS,
				 SD_INODE_HEADER_SIZE, COPIES(d[k].copies))) {
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

/*
 * The deleted ancestors of a VDI that was just deleted (from parent up)
 * kept the objects their live descendants read: what no live VDI reads
 * any more goes now, this node's replicas of it, and their records keep
 * only what is still read (deleted.c), so that the space comes back when
 * the last VDI that shared an object is deleted, and no recovery brings
 * the object back. Every node does it, in the delete's place of the order,
 * on the maps it reads through the gateway. An ancestor whose descendants'
 * maps cannot be read keeps everything. How many objects went.
 */
static uint64_t free_ancestors(uint32_t parent)
{
	uint8_t *kept = malloc(MAX_DATA_OBJS / 8), *read = malloc(MAX_DATA_OBJS / 8);
	uint64_t nr_freed = 0;

	for (uint32_t vid = parent; vid && kept && read;) {
		struct remove_ctx ctx = { .vid = vid, .shared = read };
		struct vid_copies *d = NULL;
		struct vdi_state *a;
		bool deleted;
		size_t nr_d = 0;
		int ret = SD_RES_SUCCESS;

		vdi_table_rdlock();
		a = vdi_table_lookup(vid);
		deleted = a && a->deleted;
		vid = a ? a->parent : 0;
		if (deleted)
			ret = list_descendants(ctx.vid, &d, &nr_d);
		vdi_table_unlock();
		if (!deleted || ret || !deleted_kept(ctx.vid, kept)) {
			free(d);
			continue;
		}
		memset(read, 0, MAX_DATA_OBJS / 8);
		ret = mark_shared(&ctx, d, nr_d);
		free(d);
		if (ret) {
			sd_warn("vid %06" PRIx32 ": the maps of its descendants cannot be read; "
				"its kept objects stay",
				ctx.vid);
			continue;
		}
		/* recorded before the removals, as a delete's: a fetch racing with them sees it */
		ret = deleted_add(ctx.vid, read);
		if (ret) {
			sd_err("cannot record what vid %06" PRIx32 " keeps: %s", ctx.vid,
			       strerror(-ret));
			continue;
		}
		for (uint32_t i = 0; i < MAX_DATA_OBJS; i++) {
			if (!sd_vid_test(kept, i) || sd_vid_test(read, i))
				continue;
			if (sd_store->remove(vid_to_data_oid(ctx.vid, i)) == SD_RES_SUCCESS)
				nr_freed++;
		}
	}
	free(kept);
	free(read);
	return nr_freed;
}

/*
 * Find the VDI that DEL_VDI names, its copies and its descendants, under
 * the lock. Its state (which stays valid with no lock held, see
 * vdi_table.h), or NULL and *res (SD_RES_*).
 */
static struct vdi_state *plan_del(struct request *req, const char *name, const char *tag,
				  uint8_t *copies, struct vid_copies **d, size_t *nr, int *res)
{
	struct vdi_state *s;

	vdi_table_rdlock();
	s = vdi_table_find(name, req->rq.vdi.snapid, tag, res);
	/* a snapshot id or tag names a snapshot: never the working VDI (its snap_id too) */
	if (s && (req->rq.vdi.snapid || (tag && tag[0])) && !s->snapshot) {
		s = NULL;
		*res = SD_RES_NO_VDI;
	}
	if (s) {
		*copies = s->nr_copies;
		*res = list_descendants(s->vid, d, nr);
		if (*res)
			s = NULL;
	}
	vdi_table_unlock();
	return s;
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
	uint32_t parent;
	int ret;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	s = plan_del(req, name, tag, &copies, &d, &nr_d, &ret);
	if (!s)
		return ret;
	ctx.vid = s->vid; /* fixed for the life of the state */
	parent = s->parent;
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
	if (!req->ord.remote) {
		ret = read_header(ctx.vid, h, copies);
		if (ret)
			goto out_free;
		memset(h->name, 0, sizeof(h->name));
		ret = write_header(ctx.vid, h, copies);
		if (ret)
			goto out_free;
	}
	vdi_table_wrlock();
	s->deleted = true;
	s->name[0] = '\0';
	vdi_table_unlock();
	/* recorded before anything is removed: no recovery brings it back */
	ret = deleted_add(ctx.vid, ctx.shared);
	if (ret)
		sd_err("cannot record the deletion of vid %06" PRIx32 ": %s", ctx.vid,
		       strerror(-ret));
	sd_store->for_each(remove_unshared, &ctx);
	ctx.nr_removed += free_ancestors(parent);
	sd_info("deleted vdi %s vid %06" PRIx32 ", %" PRIu64 " objects removed", name, ctx.vid,
		ctx.nr_removed);
	ret = SD_RES_SUCCESS;
out_free:
	free(ctx.shared);
	free(d);
	free(h);
	return ret;
}

static bool same_owner(const struct sd_lock_owner *a, const struct sd_lock_owner *b)
{
	return !memcmp(&a->node, &b->node, sizeof(a->node)) && !memcmp(a->addr, b->addr, 16) &&
	       a->conn == b->conn;
}


struct release_ctx {
	const struct sd_lock_owner *owner;
	bool whole_node;
	int nr;
};

static int release_one(struct vdi_state *s, void *arg)
{
	struct release_ctx *ctx = arg;

	if (!s->locked || memcmp(&s->owner.node, &ctx->owner->node, sizeof(s->owner.node)))
		return 0;
	if (!ctx->whole_node && !same_owner(&s->owner, ctx->owner))
		return 0;
	s->locked = false;
	ctx->nr++;
	return 0;
}

static int resolve(struct request *req, bool lock)
{
	const char *name, *tag;
	struct vdi_state *s;
	int ret, res;

	ret = parse_names(req, &name, &tag);
	if (ret)
		return ret;
	vdi_table_wrlock();
	s = vdi_table_find(name, req->rq.vdi.snapid, tag, &res);
	if (!s) {
		ret = res;
	} else if (lock && s->locked && req->rq.vdi.type != SD_LOCK_TYPE_SHARED &&
		   !same_owner(&s->owner, &req->ord.owner)) {
		ret = SD_RES_VDI_LOCKED;
	} else {
		/* its holder's again (a VM reopened through the same gateway), or new */
		if (lock && !s->locked) {
			s->locked = true;
			s->owner = req->ord.owner;
		}
		req->rp.vdi.vdi_id = s->vid;
		ret = SD_RES_SUCCESS;
	}
	vdi_table_unlock();
	return ret;
}

int vdi_op_lock(struct request *req)
{
	return resolve(req, true);
}

/* GET_VDI_INFO: on another node's behalf, the same lookup changes nothing */
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
	vdi_table_wrlock();
	s = vdi_table_lookup(req->rq.vdi.base_vdi_id);
	if (!s || s->deleted)
		ret = SD_RES_NO_VDI;
	else if (!s->locked)
		ret = SD_RES_VDI_NOT_LOCKED;
	else if (!same_owner(&s->owner, &req->ord.owner))
		ret = SD_RES_LOCK_NOT_OWNER; /* only its holder, or an operator (UNLOCK_VDI) */
	else {
		s->locked = false;
		ret = SD_RES_SUCCESS;
	}
	vdi_table_unlock();
	return ret;
}

static bool is_member(const struct sd_node_id *nid, const struct sd_node *members, int nr)
{
	for (int i = 0; i < nr; i++)
		if (!memcmp(&members[i].nid, nid, sizeof(*nid)))
			return true;
	return false;
}

/*
 * UNLOCK_VDI: an operator takes a VDI's lock away. Refused while the
 * holder's gateway is a member (its client is connected: a connection that
 * closes releases its locks), unless forced; forced, the holder's gateway
 * also disconnects it (vdi_set_lock_hooks), so that a second writer never
 * writes beside the first. The members are those of the op's place in the
 * order (ordered.c), so that every node answers alike.
 */
int vdi_op_unlock(struct request *req)
{
	bool force = req->rq.vdi.type == SD_UNLOCK_FORCE, held_here = false;
	struct sd_lock_owner owner;
	struct vdi_state *s;
	uint32_t vid = req->rq.vdi.base_vdi_id;
	int ret;

	vdi_table_wrlock();
	s = vdi_table_lookup(req->rq.vdi.base_vdi_id);
	if (!s || s->deleted) {
		ret = SD_RES_NO_VDI;
	} else if (!s->locked) {
		ret = SD_RES_VDI_NOT_LOCKED;
	} else if (!force && (!req->ord.members ||
			      is_member(&s->owner.node, req->ord.members, req->ord.nr_members))) {
		ret = SD_RES_VDI_LOCKED;
		req->rp.vdi.vdi_id = s->vid;
	} else {
		owner = s->owner;
		held_here = !memcmp(&owner.node, group_self(), sizeof(owner.node));
		s->locked = false;
		ret = SD_RES_SUCCESS;
	}
	vdi_table_unlock();
	/* the lock's holder is gone from the owner's: it must stop writing */
	if (held_here)
		after_lock(req, lock_broken, vid, 0, &owner);
	if (ret == SD_RES_VDI_LOCKED)
		sd_info("vid %06" PRIx32 ": unlock refused, its holder is connected", vid);
	return ret;
}

int vdi_release_owner(const struct sd_lock_owner *owner, bool whole_node)
{
	struct release_ctx ctx = { owner, whole_node, 0 };

	vdi_table_wrlock();
	vdi_table_for_each(release_one, &ctx);
	vdi_table_unlock();
	if (ctx.nr)
		sd_info("released %d lock(s) of %s", ctx.nr,
			whole_node ? "a node that left" : "a client that left");
	return ctx.nr;
}

void vdi_set_lock_hooks(void (*broken)(uint32_t vid, const struct sd_lock_owner *owner),
			void (*moved)(uint32_t from, uint32_t to))
{
	lock_broken_fn = broken;
	lock_moved_fn = moved;
}

/* READ_VDIS: the in-use bitmap; another node's question is answered there */
int vdi_op_read_vdis(struct request *req)
{
	uint32_t len = min_t(uint32_t, req->rq.data_length, SD_VDI_BITMAP_SIZE);

	if (req->ord.remote)
		return SD_RES_SUCCESS;

	vdi_table_rdlock();
	vdi_table_copy_bitmap(req->data, len);
	vdi_table_unlock();
	req->rp.data_length = len;
	return SD_RES_SUCCESS;
}

struct locked_vids {
	struct sd_vdi_lock *locks;
	uint32_t nr, max;
};

static int add_locked(struct vdi_state *s, void *arg)
{
	struct locked_vids *l = arg;

	if (!s->locked || s->deleted)
		return 0;
	if (l->nr == l->max)
		return SD_RES_BUFFER_SMALL;
	l->locks[l->nr++] = (struct sd_vdi_lock){ .vid = s->vid, .owner = s->owner };
	return 0;
}

/* GET_VDI_LOCKS: the locked VDIs and their holders; BUFFER_SMALL if they do not fit */
int vdi_op_get_locks(struct request *req)
{
	struct locked_vids l = { req->data, 0, req->rq.data_length / sizeof(struct sd_vdi_lock) };
	int ret;

	vdi_table_rdlock();
	ret = vdi_table_for_each(add_locked, &l);
	vdi_table_unlock();
	req->rp.data_length = l.nr * sizeof(struct sd_vdi_lock);
	return ret;
}
