/*
 * The VDIs' locks (vdi_priv.h: what they share with vdi.c's other
 * namespace ops): LOCK_VDI and GET_VDI_INFO resolve a name, RELEASE_VDI
 * is its holder's, UNLOCK_VDI an operator's, vdi_release_owner frees those
 * of a client or a node that left, GET_VDI_LOCKS lists them. Ordered ops
 * like every namespace op: the lock state is the VDI table's, the same on
 * every node.
 */
#include <inttypes.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "group.h"
#include "request.h"
#include "vdi.h"
#include "vdi_priv.h"
#include "vdi_table.h"

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

	ret = vdi_parse_names(req, &name, &tag);
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

	ret = vdi_parse_names(req, &name, &tag);
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
		vdi_after_lock(req, vdi_lock_broken, vid, 0, &owner);
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
