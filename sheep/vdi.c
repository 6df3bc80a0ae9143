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
 *
 * This file holds the helpers that every namespace op uses (vdi_priv.h),
 * the creations, the copies and header changes, and READ_VDIS; a deletion
 * and what it frees is in vdi_del.c, the locks' ops in vdi_lock.c.
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
#include "gateway.h"
#include "group.h"
#include "request.h"
#include "vdi.h"
#include "vdi_priv.h"
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

void vdi_lock_broken(struct request *req)
{
	if (lock_broken_fn)
		lock_broken_fn(req->ord.after_vid[0], &req->ord.after_owner);
}

static void lock_moved(struct request *req)
{
	if (lock_moved_fn)
		lock_moved_fn(req->ord.after_vid[0], req->ord.after_vid[1]);
}

void vdi_after_lock(struct request *req, void (*fn)(struct request *), uint32_t vid, uint32_t vid2,
		    const struct sd_lock_owner *owner)
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

int vdi_read_header(uint32_t vid, struct sd_inode_header *h, int copies)
{
	return gateway_read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, COPIES(copies));
}

int vdi_write_header(uint32_t vid, const struct sd_inode_header *h, int copies)
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
	ret = vdi_read_header(vid, h, copies);
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
int vdi_parse_names(struct request *req, const char **name, const char **tag)
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
	ret = vdi_read_header(p->parent_vid, ph, p->parent_copies);
	if (!ret) {
		if (p->is_snapshot)
			ph->snap_ctime = now_ctime();
		add_child(ph, p->vid);
		ret = vdi_write_header(p->parent_vid, ph, p->parent_copies);
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

	ret = vdi_parse_names(req, &name, &tag);
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
				vdi_after_lock(req, lock_moved, p.working->vid, p.vid, &s->owner);
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
