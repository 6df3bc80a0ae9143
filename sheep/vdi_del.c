/*
 * DEL_VDI, and the objects that no live VDI reads any more (vdi_priv.h:
 * the helpers it shares with vdi.c's other namespace ops).
 *
 * A deleted VDI's objects go, on every node, unless a live descendant (a
 * clone or a snapshot's working VDI) still reads them through its map;
 * what they keep is recorded (deleted.c) and freed, ancestor by deleted
 * ancestor, once the last VDI that read it is deleted too.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "proto_util.h"
#include "deleted.h"
#include "gateway.h"
#include "request.h"
#include "vdi.h"
#include "vdi_priv.h"
#include "store/store.h"
#include "vdi_table.h"

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

	ret = vdi_parse_names(req, &name, &tag);
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
		ret = vdi_read_header(ctx.vid, h, copies);
		if (ret)
			goto out_free;
		memset(h->name, 0, sizeof(h->name));
		ret = vdi_write_header(ctx.vid, h, copies);
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
