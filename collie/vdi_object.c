/*
 * collie vdi rollback, alter-copy and vdi object.
 *
 * rollback NAME -s SNAP makes the working VDI's content the snapshot's by
 * rewriting its data map with the snapshot's entries, in two inode writes:
 * first every entry that names one of the working VDI's own objects
 * becomes 0 (the gateway removes an object of the VDI's own whose entry a
 * write discards, as for an NBD trim), then every entry becomes the
 * snapshot's. The working VDI keeps its vid, its place in the tree and its
 * size (a VDI cannot shrink: past the snapshot's end it reads zeros). It is
 * refused while a client holds the VDI's lock. A failure between the two
 * writes leaves a VDI that reads zeros where it had its own objects: run
 * the rollback again.
 *
 * object NAME [INDEX] says, for one object or every allocated one, which
 * VDI owns it (the VDI or an ancestor it shares it with), its size, the
 * nodes that the current epoch's ring places its copies on and whether
 * each holds one (a READ_PEER of its first sector at that epoch), and its
 * state: ok, degraded (fewer copies than wanted) or lost.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"
#include "ec.h"
#include "ring.h"

/* the map entries [lo, hi] of inode written back */
static int write_map(const struct sd_inode *inode, uint32_t lo, uint32_t hi)
{
	return vdi_write_inode(inode, SD_INODE_HEADER_SIZE + 4 * lo, 4 * (hi - lo + 1));
}

int vdi_rollback(int argc, char **argv)
{
	const char *name = argv[0];
	struct sd_inode *cur = NULL, *snap = NULL;
	uint32_t vid, snap_vid, lo = UINT32_MAX, hi = 0;
	bool locked, own = false;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (!opts.snapshot)
		return collie_usage_err("rollback needs the snapshot to go back to: -s SNAP");
	ret = vdi_lookup(name, NULL, &vid);
	if (!ret)
		ret = vdi_lookup(name, opts.snapshot, &snap_vid);
	if (ret)
		return ret;
	cur = vdi_load_inode(vid, SD_INODE_SIZE, &ret);
	if (cur)
		snap = vdi_load_inode(snap_vid, SD_INODE_SIZE, &ret);
	if (!snap)
		goto out;
	if (!vdi_is_snapshot(snap)) {
		collie_err("'%s' names the working vdi '%s', not a snapshot", opts.snapshot, name);
		ret = EXIT_FAIL;
		goto out;
	}
	ret = vdi_is_locked(vid, &locked);
	if (!ret && locked) {
		collie_err("vdi '%s' is locked by a client: stop it first", name);
		ret = EXIT_FAIL;
	}
	if (ret)
		goto out;
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++) {
		if (cur->data_vdi_id[i] == snap->data_vdi_id[i])
			continue;
		lo = min_t(uint32_t, lo, i);
		hi = i;
		if (cur->data_vdi_id[i] == vid) {
			cur->data_vdi_id[i] = 0;
			own = true;
		}
	}
	if (lo > hi) /* the same already */
		goto out;
	if (own)
		ret = write_map(cur, lo, hi);
	if (!ret) {
		memcpy(&cur->data_vdi_id[lo], &snap->data_vdi_id[lo], 4 * (hi - lo + 1));
		ret = write_map(cur, lo, hi);
	}
	if (ret)
		collie_err("vdi '%s' is partly rolled back: run the rollback again", name);
out:
	free(cur);
	free(snap);
	return ret;
}

/* ALTER_COPY of vid (a VDI called name): EXIT_OK, or an exit code after saying why */
static int alter_one(uint32_t vid, const char *name, uint8_t copies)
{
	char what[64 + SD_MAX_VDI_LEN];
	struct sd_req hdr;
	struct sd_rsp rsp;

	collie_init_req(&hdr, SD_OP_ALTER_COPY);
	hdr.vdi.base_vdi_id = vid;
	hdr.vdi.copies = copies;
	snprintf(what, sizeof(what), "failed to change the copies of vdi '%s'", name);
	return collie_run(what, &hdr, NULL, 0, 0, &rsp);
}

/* the live vids called name (the working VDI and its snapshots), snapshots first */
struct family {
	const char *name;
	uint32_t working;
	uint32_t *vids;
	uint8_t *copies;
	int nr, cap;
	bool oom;
};

/* vid (with its copies) appended to f: false when out of memory */
static bool family_add(struct family *f, uint32_t vid, uint8_t copies)
{
	if (f->nr == f->cap) {
		int cap = f->cap ? f->cap * 2 : 16;
		uint32_t *v = realloc(f->vids, (size_t)cap * sizeof(*v));
		uint8_t *c;

		if (!v)
			return false;
		f->vids = v;
		c = realloc(f->copies, (size_t)cap);
		if (!c)
			return false;
		f->copies = c;
		f->cap = cap;
	}
	f->copies[f->nr] = copies;
	f->vids[f->nr++] = vid;
	return true;
}

static void add_member(const struct sd_inode *inode, void *arg)
{
	struct family *f = arg;

	if (vdi_is_deleted(inode) || strcmp(inode->name, f->name))
		return;
	if (!vdi_is_snapshot(inode))
		f->working = inode->vdi_id;
	else if (!family_add(f, inode->vdi_id, inode->nr_copies))
		f->oom = true;
}

/*
 * alter-copy NAME -c N: every live VDI called NAME (its snapshots, then the
 * working VDI) gets N copies, one ALTER_COPY each; each node's recovery
 * then moves the objects while the VDI's clients go on (the daemon's side
 * is in sheep/vdi.c). Refused, before anything changes, for an
 * erasure-coded VDI.
 */
int vdi_alter_copy(int argc, char **argv)
{
	const char *name = argv[0];
	struct family *f = NULL;
	struct sd_inode *inode = NULL;
	uint8_t was = 0;
	uint32_t vid;
	int ret, nr_changed = 0;

	(void)argc;
	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (!opts.has_copies)
		return collie_usage_err("alter-copy needs the new number of copies: -c N");
	if (opts.copy_policy)
		return collie_usage_err("alter-copy changes the copies of a replicated vdi: -c N "
					"(an erasure code is chosen when a vdi is created)");
	ret = vdi_lookup(name, NULL, &vid);
	if (ret)
		return ret;
	f = calloc(1, sizeof(*f));
	inode = malloc(sizeof(*inode));
	if (!f || !inode) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	f->name = name;
	ret = vdi_for_each(add_member, f);
	if (ret)
		goto out;
	if (!f->working) {
		collie_err("vdi '%s' not found", name);
		ret = EXIT_MISSING;
		goto out;
	}
	if (f->oom) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	ret = vdi_read_inode(f->working, inode, SD_INODE_HEADER_SIZE);
	if (ret)
		goto out;
	if (inode->copy_policy) {
		collie_err("vdi '%s' is erasure-coded: its data and parity strips are fixed when it "
			   "is created",
			   name);
		ret = EXIT_FAIL;
		goto out;
	}
	was = inode->nr_copies;
	if (!family_add(f, f->working, was)) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	for (int i = 0; !ret && i < f->nr; i++) {
		if (f->copies[i] == opts.copies)
			continue;
		ret = alter_one(f->vids[i], name, opts.copies);
		if (!ret)
			nr_changed++;
	}
	if (ret && nr_changed)
		collie_err("vdi '%s' is partly changed (%d of %d vdis): run alter-copy again", name,
			   nr_changed, f->nr);
	else if (!ret && nr_changed)
		printf("vdi '%s': copies %u -> %u (%d vdi(s): the working vdi and its snapshots); "
		       "recovery moves the objects (collie node recovery)\n",
		       name, was, opts.copies, nr_changed);
	else if (!ret)
		printf("vdi '%s': copies %u already\n", name, opts.copies);
out:
	free(inode);
	if (f) {
		free(f->vids);
		free(f->copies);
	}
	free(f);
	return ret;
}

/* every live replicated VDI whose count is not the one wanted, and the erasure-coded ones */
struct cluster_vdis {
	uint8_t copies;
	uint32_t *vids;
	char (*names)[SD_MAX_VDI_LEN];
	size_t nr, cap, nr_ec, nr_same;
	bool oom;
};

static void add_cluster_vdi(const struct sd_inode *inode, void *arg)
{
	struct cluster_vdis *c = arg;

	if (vdi_is_deleted(inode) || c->oom)
		return;
	if (inode->copy_policy) {
		c->nr_ec++;
		return;
	}
	if (inode->nr_copies == c->copies) {
		c->nr_same++;
		return;
	}
	if (c->nr == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		uint32_t *v = realloc(c->vids, cap * sizeof(*v));
		char(*n)[SD_MAX_VDI_LEN] = v ? realloc(c->names, cap * sizeof(*n)) : NULL;

		if (v)
			c->vids = v;
		if (!v || !n) {
			c->oom = true;
			return;
		}
		c->names = n;
		c->cap = cap;
	}
	c->vids[c->nr] = inode->vdi_id;
	memcpy(c->names[c->nr], inode->name, SD_MAX_VDI_LEN);
	c->names[c->nr][SD_MAX_VDI_LEN - 1] = '\0';
	c->nr++;
}

/*
 * cluster alter-copy -c N: the cluster's default copies (ALTER_CLUSTER_COPY,
 * in the cluster's order on every node), then every live replicated VDI
 * that has another count, one ALTER_COPY each; the erasure-coded ones keep
 * their D:P.
 */
int cluster_alter_copy(int argc, char **argv)
{
	struct cluster_vdis c = { 0 };
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint8_t was;
	size_t nr_changed = 0;
	int ret;

	(void)argc;
	(void)argv;
	if (!opts.has_copies)
		return collie_usage_err("alter-copy needs the new number of copies: -c N");
	if (opts.copy_policy)
		return collie_usage_err("alter-copy changes the copies of replicated vdis: -c N "
					"(an erasure code is chosen when a vdi is created)");
	collie_init_req(&hdr, SD_OP_STAT_CLUSTER);
	ret = collie_run("failed to get the cluster state", &hdr, NULL, 0, 0, &rsp);
	if (ret)
		return ret;
	was = rsp.cinfo.copies;
	if (rsp.cinfo.copy_policy) {
		collie_err("the cluster's default is erasure coding: alter-copy changes the copies "
			   "of a replicated cluster");
		return EXIT_FAIL;
	}
	collie_init_req(&hdr, SD_OP_ALTER_CLUSTER_COPY);
	hdr.cluster.copies = opts.copies;
	ret = collie_run("failed to change the cluster's default copies", &hdr, NULL, 0, 0, &rsp);
	if (ret)
		return ret;
	c.copies = opts.copies;
	ret = vdi_for_each(add_cluster_vdi, &c);
	if (!ret && c.oom) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
	}
	for (size_t i = 0; !ret && i < c.nr; i++) {
		ret = alter_one(c.vids[i], c.names[i], opts.copies);
		if (!ret)
			nr_changed++;
	}
	if (ret)
		collie_err("the cluster is partly changed (%zu of %zu vdis): run alter-copy again",
			   nr_changed, c.nr);
	else
		printf("cluster: default copies %u -> %u; %zu vdi(s) changed, %zu had %u already, "
		       "%zu erasure-coded kept; recovery moves the objects (collie node recovery)\n",
		       was, opts.copies, nr_changed, c.nr_same, opts.copies, c.nr_ec);
	free(c.vids);
	free(c.names);
	return ret;
}

struct objview {
	struct sd_ring ring;
	uint32_t epoch;
	char *buf;
};

static int view_init(struct objview *ov)
{
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	memset(ov, 0, sizeof(ov->ring));
	collie_init_req(&hdr, SD_OP_STAT_CLUSTER);
	ret = collie_run("failed to get the cluster state", &hdr, NULL, 0, 0, &rsp);
	if (ret)
		return ret;
	ov->epoch = rsp.cinfo.epoch;
	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (ring_build(&ov->ring, nodes, (int)nr)) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
	}
	free(nodes);
	return ret;
}

/* whether node i holds oid: 1 yes, 0 no, or an exit code (after saying why) as -code */
static int holds(struct objview *ov, int i, uint64_t oid)
{
	const struct sd_node *n = &ov->ring.nodes[i];
	char buf[512], host[64];
	struct sd_req hdr;
	struct sd_rsp rsp;

	collie_node_host(n, host, sizeof(host));
	collie_init_req(&hdr, SD_OP_READ_PEER);
	hdr.epoch = ov->epoch;
	hdr.data_length = sizeof(buf);
	hdr.obj.oid = oid;
	if (collie_exec_at(host, n->nid.port, &hdr, buf, 0, sizeof(buf), &rsp))
		return -EXIT_SYSFAIL;
	if (rsp.result == SD_RES_SUCCESS)
		return 1;
	if (rsp.result == SD_RES_NO_OBJ)
		return 0;
	if (rsp.result == SD_RES_OLD_NODE_VER || rsp.result == SD_RES_NEW_NODE_VER)
		collie_err("the epoch changed (it was %u): run it again", ov->epoch);
	else
		collie_err("failed to ask %s:%u: %s", host, n->nid.port,
			   sd_strerror((int)rsp.result));
	return -EXIT_FAIL;
}

static const char *state_of(int have, int want)
{
	return have == want ? "ok" : (have ? "degraded" : "lost");
}

/* who owns the object of entry owner: "this vdi", or the ancestor's name and tag */
static void owner_name(uint32_t owner, const struct sd_inode *inode, char *buf, size_t len)
{
	struct sd_inode *o;
	int ret;

	if (owner == inode->vdi_id) {
		snprintf(buf, len, "this vdi");
		return;
	}
	o = vdi_load_inode(owner, SD_INODE_HEADER_SIZE, &ret);
	if (!o)
		snprintf(buf, len, "vdi %06x", owner);
	else if (vdi_is_snapshot(o))
		snprintf(buf, len, "snapshot %u '%s' of '%s'", o->snap_id, o->tag, o->name);
	else
		snprintf(buf, len, "vdi '%s'", o->name);
	free(o);
}

/* what the k-th placed node of oid holds: the object, or strip k of an erasure-coded one */
static uint64_t placed_oid(const struct sd_inode *inode, uint64_t oid, int k)
{
	return inode->copy_policy ? ec_strip_oid(oid, k) : oid;
}

/* an erasure-coded object is lost with fewer than D strips, not only with none */
static const char *ec_state_of(const struct sd_inode *inode, int have)
{
	int d, p;

	if (!ec_policy_to_dp(inode->copy_policy, &d, &p))
		return state_of(have, inode->nr_copies);
	return have == inode->nr_copies ? "ok" : (have >= d ? "degraded" : "lost");
}

/* an erasure-coded object in detail: a line per strip, on the node placed for it */
static int show_one_ec(struct objview *ov, const struct sd_inode *inode, uint64_t oid,
		       const int *place, int nr)
{
	char host[64];
	int have = 0;

	for (int k = 0; k < nr; k++) {
		int h = holds(ov, place[k], ec_strip_oid(oid, k));

		if (h < 0)
			return -h;
		have += h;
		collie_node_host(&ov->ring.nodes[place[k]], host, sizeof(host));
		printf("  strip %d  %s:%u  %s\n", k, host, ov->ring.nodes[place[k]].nid.port,
		       h ? "holds it" : "has none");
	}
	printf("state: %s (%d of %u strips)\n", ec_state_of(inode, have), have, inode->nr_copies);
	return have == inode->nr_copies ? EXIT_OK : EXIT_FAIL;
}

/* one object in detail: a line per node that is placed or holds it */
static int show_one(struct objview *ov, const struct sd_inode *inode, uint32_t idx)
{
	uint32_t owner = inode->data_vdi_id[idx];
	uint64_t oid = vid_to_data_oid(owner, idx);
	int place[SD_MAX_COPIES], nr, have = 0;
	char who[640], host[64];

	if (!owner) {
		printf("object %u: a hole (no object; reads as zeros)\n", idx);
		return EXIT_OK;
	}
	owner_name(owner, inode, who, sizeof(who));
	nr = ring_map(&ov->ring, oid, inode->nr_copies, place);
	if (inode->copy_policy) {
		printf("object %u: oid %016" PRIx64 ", %u bytes, owned by %s, %u strips\n", idx,
		       oid, 1U << inode->block_size_shift, who, inode->nr_copies);
		return show_one_ec(ov, inode, oid, place, nr);
	}
	printf("object %u: oid %016" PRIx64 ", %u bytes, owned by %s, %u copies wanted\n", idx, oid,
	       1U << inode->block_size_shift, who, inode->nr_copies);
	for (int i = 0; i < ov->ring.nr_nodes; i++) {
		bool placed = false;
		int h = holds(ov, i, oid);

		if (h < 0)
			return -h;
		for (int k = 0; k < nr; k++)
			placed |= place[k] == i;
		if (!placed && !h)
			continue;
		have += placed && h;
		collie_node_host(&ov->ring.nodes[i], host, sizeof(host));
		printf("  %s:%u  %s, %s\n", host, ov->ring.nodes[i].nid.port,
		       placed ? "placed" : "not placed", h ? "holds a copy" : "has no copy");
	}
	printf("state: %s (%d of %u copies)\n", state_of(have, inode->nr_copies), have,
	       inode->nr_copies);
	return have == inode->nr_copies ? EXIT_OK : EXIT_FAIL;
}

/* every allocated object: a line each */
static int show_all(struct objview *ov, const struct sd_inode *inode, uint32_t nr_objs)
{
	int ret = EXIT_OK;

	if (!opts.raw)
		printf("  %7s  %-16s  %6s  %6s  %s\n", "Index", "Oid", "Owner", "Copies", "State");
	for (uint32_t idx = 0; idx < nr_objs; idx++) {
		uint32_t owner = inode->data_vdi_id[idx];
		uint64_t oid = vid_to_data_oid(owner, idx);
		int place[SD_MAX_COPIES], nr, have = 0;

		if (!owner)
			continue;
		nr = ring_map(&ov->ring, oid, inode->nr_copies, place);
		for (int k = 0; k < nr; k++) {
			int h = holds(ov, place[k], placed_oid(inode, oid, k));

			if (h < 0)
				return -h;
			have += h;
		}
		if (have != inode->nr_copies)
			ret = EXIT_FAIL;
		printf(opts.raw ? "%u %016" PRIx64 " %06x %d/%u %s\n"
				: "  %7u  %016" PRIx64 "  %06x  %4d/%u  %s\n",
		       idx, oid, owner, have, inode->nr_copies, ec_state_of(inode, have));
	}
	return ret;
}

int vdi_object(int argc, char **argv)
{
	const char *name = argv[0];
	struct sd_inode *inode;
	struct objview ov;
	uint32_t vid, nr_objs;
	uint64_t idx = 0;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (argc > 1 && sd_parse_uint(argv[1], 0, MAX_DATA_OBJS - 1, &idx))
		return collie_usage_err("invalid object index '%s'", argv[1]);
	ret = vdi_lookup(name, opts.snapshot, &vid);
	if (ret)
		return ret;
	inode = vdi_load_inode(vid, SD_INODE_SIZE, &ret);
	if (!inode)
		return ret;
	nr_objs =
	    inode->block_size_shift <= SD_MAX_BLOCK_SIZE_SHIFT
		? (uint32_t)((inode->vdi_size + (UINT64_C(1) << inode->block_size_shift) - 1) >>
			     inode->block_size_shift)
		: 0;
	if (argc > 1 && idx >= nr_objs) {
		collie_err("vdi '%s' has %u objects (0-%u): no object %s", name, nr_objs,
			   nr_objs ? nr_objs - 1 : 0, argv[1]);
		ret = EXIT_FAIL;
		goto out;
	}
	ret = view_init(&ov);
	if (!ret) {
		ret =
		    argc > 1 ? show_one(&ov, inode, (uint32_t)idx) : show_all(&ov, inode, nr_objs);
		ring_free(&ov.ring);
	}
out:
	free(inode);
	return ret;
}
