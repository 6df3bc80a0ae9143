/*
 * collie cluster snapshot save / list / load / delete: every VDI of the
 * cluster into a directory of content-addressed chunks (snapshot_store.c)
 * with a manifest per tag (snapshot_manifest.h), and back onto a freshly
 * formatted cluster.
 *
 * Save reads each distinct object once (a snapshot and its children share
 * objects: one oid, one read), cuts it into CS_CHUNK_SIZE chunks, and
 * stores each non-zero chunk under its XXH3-128 unless the directory has it
 * already: a second snapshot after a few writes adds the chunks those
 * writes changed and its manifest, which lists parents first and each
 * child as its differences from its parent (a snapshot chain costs the
 * lines of its changes, not of every VDI's whole size).
 *
 * Load recreates the VDIs parent first: a root is created, a VDI whose
 * parent is a snapshot of the same name continues in the working VDI that
 * snapshotting the parent made, any other child is cloned from its parent;
 * each gets the objects whose chunks differ from its parent's (whole
 * objects, every chunk's hash checked as it is read), and a snapshot is
 * then taken with its tag. Working VDIs that no saved VDI continues (the
 * original's was deleted) are deleted at the end. Before anything is
 * written, every chunk the manifest names is read once and its hash
 * checked; each is checked again as it is loaded.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collie.h"
#include "snapshot_store.h"
#include "vdi_io.h"

#define CS_CHUNK_SIZE 65536

static const uint8_t zero_hash[CS_HASH_LEN];

static bool is_zero_hash(const uint8_t *h)
{
	return !memcmp(h, zero_hash, CS_HASH_LEN);
}

static int check_args(const char *tag)
{
	if (!cs_tag_valid(tag))
		return collie_usage_err("invalid snapshot tag '%s' (1-%d of A-Z a-z 0-9 . _ -, "
					"not starting with '.')",
					tag, CS_TAG_MAX);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* save */

/* an object to read: its oid and, once read, the hashes of its chunks */
struct obj_ent {
	uint64_t oid; /* 0: a free slot of the table */
	uint8_t shift;
	uint8_t (*hashes)[CS_HASH_LEN];
};

struct save {
	struct cs_manifest m;
	uint32_t **idx, **owner; /* per VDI: its allocated indexes and their owners */
	struct obj_ent *tab;
	size_t tab_cap;
	uint8_t max_shift;
	bool oom;
	struct cs_store st;
	struct vdi_io io;
	size_t slot_ent[IO_NR_SLOTS];
	uint64_t nr_read;
};

static void collect(const struct sd_inode *inode, void *arg)
{
	struct save *sv = arg;
	struct cs_vdi *v, *nv;
	uint32_t nr = 0, n = 0;

	if (vdi_is_deleted(inode) || sv->oom)
		return;
	nv = realloc(sv->m.vdis, (sv->m.nr_vdis + 1) * sizeof(*nv));
	sv->idx = realloc(sv->idx, (sv->m.nr_vdis + 1) * sizeof(*sv->idx));
	sv->owner = realloc(sv->owner, (sv->m.nr_vdis + 1) * sizeof(*sv->owner));
	if (nv)
		sv->m.vdis = nv;
	if (!nv || !sv->idx || !sv->owner) {
		sv->oom = true;
		return;
	}
	v = &sv->m.vdis[sv->m.nr_vdis];
	memset(v, 0, sizeof(*v));
	memcpy(v->name, inode->name, sizeof(v->name) - 1);
	memcpy(v->tag, inode->tag, sizeof(v->tag) - 1);
	v->vid = inode->vdi_id;
	v->parent = inode->parent_vdi_id;
	v->snap_id = inode->snap_id;
	v->snapshot = vdi_is_snapshot(inode);
	v->size = inode->vdi_size;
	v->copies = inode->nr_copies;
	v->copy_policy = (uint8_t)inode->copy_policy;
	v->erasure = inode->copy_policy != 0;
	v->block_size_shift = inode->block_size_shift;
	v->create_time = inode->create_time;
	v->snap_ctime = inode->snap_ctime;
	v->vm_clock_nsec = inode->vm_clock_nsec;
	v->vm_state_size = inode->vm_state_size;
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		nr += inode->data_vdi_id[i] != 0;
	sv->idx[sv->m.nr_vdis] = malloc((nr ? nr : 1) * sizeof(uint32_t));
	sv->owner[sv->m.nr_vdis] = malloc((nr ? nr : 1) * sizeof(uint32_t));
	sv->m.nr_vdis++;
	v->nr_chunks = nr; /* for now: the number of objects */
	if (!sv->idx[sv->m.nr_vdis - 1] || !sv->owner[sv->m.nr_vdis - 1]) {
		sv->oom = true;
		return;
	}
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		if (inode->data_vdi_id[i]) {
			sv->idx[sv->m.nr_vdis - 1][n] = i;
			sv->owner[sv->m.nr_vdis - 1][n++] = inode->data_vdi_id[i];
		}
	sv->max_shift = max_t(uint8_t, sv->max_shift, inode->block_size_shift);
}

/*
 * The VDIs in an order where a parent comes before its children, so that
 * the manifest lists a child as its differences from its parent.
 */
static int parents_first(struct save *sv)
{
	uint32_t n = sv->m.nr_vdis, k = 0;
	struct cs_vdi *v = malloc((n + 1) * sizeof(*v));
	uint32_t **idx = malloc((n + 1) * sizeof(*idx)), **owner = malloc((n + 1) * sizeof(*owner));
	bool *done = calloc(n + 1, sizeof(bool));
	int ret = 0;

	if (!v || !idx || !owner || !done) {
		ret = -ENOMEM;
		goto out;
	}
	while (k < n) {
		uint32_t before = k;

		for (uint32_t i = 0; i < n; i++) {
			bool ready = true;

			for (uint32_t j = 0; !done[i] && j < n; j++)
				if (!done[j] && j != i && sv->m.vdis[j].vid == sv->m.vdis[i].parent)
					ready = false;
			if (done[i] || !ready)
				continue;
			done[i] = true;
			v[k] = sv->m.vdis[i];
			idx[k] = sv->idx[i];
			owner[k++] = sv->owner[i];
		}
		if (k == before) /* a loop: cannot be, but never hang */
			for (uint32_t i = 0; i < n; i++)
				if (!done[i]) {
					done[i] = true;
					v[k] = sv->m.vdis[i];
					idx[k] = sv->idx[i];
					owner[k++] = sv->owner[i];
				}
	}
	memcpy(sv->m.vdis, v, n * sizeof(*v));
	memcpy(sv->idx, idx, n * sizeof(*idx));
	memcpy(sv->owner, owner, n * sizeof(*owner));
out:
	free(v);
	free(idx);
	free(owner);
	free(done);
	return ret;
}

static size_t tab_slot(const struct save *sv, uint64_t oid)
{
	size_t i = (size_t)((oid * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (sv->tab_cap - 1);

	while (sv->tab[i].oid && sv->tab[i].oid != oid)
		i = (i + 1) & (sv->tab_cap - 1);
	return i;
}

/* every distinct object of every VDI in the table */
static int build_table(struct save *sv)
{
	size_t nr = 0;

	for (uint32_t v = 0; v < sv->m.nr_vdis; v++)
		nr += sv->m.vdis[v].nr_chunks;
	for (sv->tab_cap = 64; sv->tab_cap < 2 * nr; sv->tab_cap *= 2)
		;
	sv->tab = calloc(sv->tab_cap, sizeof(*sv->tab));
	if (!sv->tab)
		return -ENOMEM;
	for (uint32_t v = 0; v < sv->m.nr_vdis; v++)
		for (uint64_t k = 0; k < sv->m.vdis[v].nr_chunks; k++) {
			uint64_t oid = vid_to_data_oid(sv->owner[v][k], sv->idx[v][k]);
			size_t i = tab_slot(sv, oid);

			sv->tab[i].oid = oid;
			sv->tab[i].shift = sv->m.vdis[v].block_size_shift;
		}
	return 0;
}

/* an object read: its chunks hashed and stored */
static int store_object(struct save *sv, struct obj_ent *e, const char *buf)
{
	uint32_t nr = (uint32_t)((UINT64_C(1) << e->shift) / CS_CHUNK_SIZE);
	int ret;

	e->hashes = calloc(nr, CS_HASH_LEN);
	if (!e->hashes) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	for (uint32_t k = 0; k < nr; k++) {
		const char *c = buf + (size_t)k * CS_CHUNK_SIZE;

		if (c[0] == 0 && !memcmp(c, c + 1, CS_CHUNK_SIZE - 1))
			continue; /* zeros: no chunk */
		cs_hash(c, CS_CHUNK_SIZE, e->hashes[k]);
		if (is_zero_hash(e->hashes[k])) /* 2^-128: refuse rather than lose it */
			return EXIT_FAIL;
		ret = cs_store_put(&sv->st, e->hashes[k], c, CS_CHUNK_SIZE);
		if (ret)
			return ret;
	}
	sv->nr_read++;
	return EXIT_OK;
}

/* read every object of the table once, IO_NR_SLOTS at a time */
static int read_objects(struct save *sv)
{
	struct vdi_io *io = &sv->io;
	size_t next = 0;
	int ret, result;

	for (;;) {
		struct io_slot *s;

		while (next < sv->tab_cap && (s = vdi_io_free_slot(io))) {
			struct obj_ent *e = &sv->tab[next];

			if (!e->oid) {
				next++;
				continue;
			}
			s->idx = oid_to_idx(e->oid);
			s->len = 1U << e->shift;
			sv->slot_ent[s - io->slots] = next++;
			ret = vdi_io_send(io, s, SD_OP_READ_OBJ, 0, e->oid, 0, 0, NULL);
			if (ret)
				return ret;
		}
		if (!io->nr_busy)
			return EXIT_OK;
		ret = vdi_io_recv(io, &s, &result);
		if (ret)
			return ret;
		if (result != SD_RES_SUCCESS) {
			collie_err("failed to read object %016" PRIx64 ": %s",
				   sv->tab[sv->slot_ent[s - io->slots]].oid, sd_strerror(result));
			return collie_exit_code(result);
		}
		ret = store_object(sv, &sv->tab[sv->slot_ent[s - io->slots]], s->buf);
		if (ret)
			return ret;
	}
}

/* each VDI's chunks, from its objects' hashes, inside its size */
static int list_chunks(struct save *sv)
{
	uint32_t per_obj;

	for (uint32_t v = 0; v < sv->m.nr_vdis; v++) {
		struct cs_vdi *vd = &sv->m.vdis[v];
		uint64_t nr_objs = vd->nr_chunks, n = 0;

		per_obj = (uint32_t)((UINT64_C(1) << vd->block_size_shift) / CS_CHUNK_SIZE);
		vd->chunks = calloc(nr_objs * per_obj + 1, sizeof(*vd->chunks));
		if (!vd->chunks) {
			collie_err("out of memory");
			return EXIT_SYSFAIL;
		}
		for (uint64_t k = 0; k < nr_objs; k++) {
			uint64_t oid = vid_to_data_oid(sv->owner[v][k], sv->idx[v][k]);
			const struct obj_ent *e = &sv->tab[tab_slot(sv, oid)];

			for (uint32_t c = 0; c < per_obj; c++) {
				uint64_t off = ((uint64_t)sv->idx[v][k] << vd->block_size_shift) +
					       (uint64_t)c * CS_CHUNK_SIZE;

				if (off >= vd->size || is_zero_hash(e->hashes[c]))
					continue;
				vd->chunks[n].offset = off;
				memcpy(vd->chunks[n++].hash, e->hashes[c], CS_HASH_LEN);
			}
		}
		vd->nr_chunks = n;
	}
	return EXIT_OK;
}

static void save_free(struct save *sv)
{
	for (uint32_t v = 0; v < sv->m.nr_vdis; v++) {
		free(sv->idx[v]);
		free(sv->owner[v]);
	}
	for (size_t i = 0; i < sv->tab_cap; i++)
		free(sv->tab[i].hashes);
	free(sv->tab);
	free(sv->idx);
	free(sv->owner);
	vdi_io_close(&sv->io);
	cs_store_close(&sv->st);
	cs_manifest_free(&sv->m);
}

static int cluster_settings(struct cs_manifest *m)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	collie_init_req(&hdr, SD_OP_STAT_CLUSTER);
	ret = collie_run("failed to get the cluster state", &hdr, NULL, 0, 0, &rsp);
	if (ret)
		return ret;
	if (rsp.cinfo.status != SD_STATUS_OK) {
		collie_err("the cluster is not running (collie cluster info)");
		return EXIT_FAIL;
	}
	m->copies = rsp.cinfo.copies;
	m->block_size_shift = rsp.cinfo.block_size_shift;
	m->ctime = collie_time_to_sec(rsp.cinfo.ctime);
	return EXIT_OK;
}

static int snapshot_save(int argc, char **argv)
{
	const char *tag = argv[0], *dir = argv[1];
	struct save sv;
	int ret;

	memset(&sv, 0, sizeof(sv));
	sv.io.fd = sv.st.dirfd = sv.st.lockfd = -1;
	ret = check_args(tag);
	if (ret)
		return ret;
	ret = cs_store_open(&sv.st, dir, true, true);
	if (!ret && cs_store_has(&sv.st, tag)) {
		collie_err("snapshot '%s' exists in %s", tag, dir);
		ret = EXIT_EXISTS;
	}
	if (!ret)
		ret = cluster_settings(&sv.m);
	if (!ret)
		ret = vdi_for_each(collect, &sv);
	if (!ret && (sv.oom || parents_first(&sv) || build_table(&sv))) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
	}
	if (!ret && sv.m.nr_vdis)
		ret = vdi_io_connect(&sv.io, "the cluster", sv.max_shift);
	if (!ret)
		ret = read_objects(&sv);
	if (!ret)
		ret = list_chunks(&sv);
	if (ret)
		goto out;
	snprintf(sv.m.tag, sizeof(sv.m.tag), "%s", tag);
	sv.m.created = (uint64_t)time(NULL);
	sv.m.chunk_size = CS_CHUNK_SIZE;
	ret = cs_store_write_manifest(&sv.st, &sv.m);
	if (!ret)
		printf("saved '%s': %u vdis, %" PRIu64 " objects read, %" PRIu64
		       " new chunks (%" PRIu64 " bytes), %" PRIu64
		       " already stored, manifest %" PRIu64 " bytes\n",
		       tag, sv.m.nr_vdis, sv.nr_read, sv.st.nr_new, sv.st.new_bytes, sv.st.nr_dup,
		       sv.st.manifest_bytes);
out:
	save_free(&sv);
	return ret;
}

/* ------------------------------------------------------------------ */
/* load */

struct load {
	struct cs_manifest m;
	struct cs_store st;
	uint32_t *new_vid; /* per VDI of the manifest: its vid on this cluster */
	uint32_t *pending; /* per snapshot: the working VDI its snapshot made, not yet continued */
	uint64_t bytes, nr_objs;
};

static void count_vdis(const struct sd_inode *inode, void *arg)
{
	*(uint32_t *)arg += !vdi_is_deleted(inode);
}

/* the manifest index of vid, or -1 */
static int find_vdi(const struct cs_manifest *m, uint32_t vid)
{
	for (uint32_t i = 0; i < m->nr_vdis; i++)
		if (vid && m->vdis[i].vid == vid)
			return (int)i;
	return -1;
}

/* the chunks of v inside object idx: [*first, *end) */
static void obj_chunks(const struct cs_vdi *v, uint32_t idx, uint64_t *first, uint64_t *end)
{
	uint64_t lo = (uint64_t)idx << v->block_size_shift,
		 hi = lo + (UINT64_C(1) << v->block_size_shift);

	while (*first < v->nr_chunks && v->chunks[*first].offset < lo)
		(*first)++;
	for (*end = *first; *end < v->nr_chunks && v->chunks[*end].offset < hi; (*end)++)
		;
}

static bool same_chunks(const struct cs_vdi *a, uint64_t a0, uint64_t a1, const struct cs_vdi *b,
			uint64_t b0, uint64_t b1)
{
	if (a1 - a0 != b1 - b0)
		return false;
	for (uint64_t i = 0; i < a1 - a0; i++)
		if (a->chunks[a0 + i].offset != b->chunks[b0 + i].offset ||
		    memcmp(a->chunks[a0 + i].hash, b->chunks[b0 + i].hash, CS_HASH_LEN))
			return false;
	return true;
}

/* slot s filled with object idx of v from its chunks [c0, c1), and written */
static int load_object(struct load *ld, struct vdi_io *io, struct io_slot *s,
		       const struct cs_vdi *v, uint32_t idx, uint64_t c0, uint64_t c1)
{
	uint64_t start = (uint64_t)idx << io->shift;
	int ret;

	memset(s->buf, 0, io->obj_size);
	for (uint64_t c = c0; c < c1; c++) {
		ret = cs_store_get(&ld->st, v->chunks[c].hash,
				   s->buf + (v->chunks[c].offset - start), ld->m.chunk_size);
		if (ret)
			return ret;
	}
	s->idx = idx;
	s->off = start;
	s->len = (uint32_t)min_t(uint64_t, io->obj_size, v->size - start);
	ld->bytes += s->len;
	ld->nr_objs++;
	return vdi_io_write_issue(io, s);
}

/*
 * The objects of working VDI v.name where v's chunks differ from base's
 * (NULL: none): written whole, or released when v has none there.
 */
static int load_data(struct load *ld, const struct cs_vdi *v, const struct cs_vdi *base)
{
	struct write_state st = { .min_idx = UINT32_MAX };
	uint64_t c0 = 0, c1, b0 = 0, b1 = 0;
	struct vdi_io io;
	struct io_slot *s;
	uint32_t nr, idx = 0;
	int ret, result;

	ret = vdi_io_open(&io, v->name, NULL);
	if (ret)
		goto out;
	nr = (uint32_t)((v->size + io.obj_size - 1) >> io.shift);
	for (;;) {
		while (!st.err && idx < nr && (s = vdi_io_free_slot(&io))) {
			obj_chunks(v, idx, &c0, &c1);
			if (base)
				obj_chunks(base, idx, &b0, &b1);
			if (base && same_chunks(v, c0, c1, base, b0, b1)) {
				idx++;
				continue;
			}
			if (c0 == c1) { /* zeros: a hole */
				if (io.inode->data_vdi_id[idx]) {
					io.inode->data_vdi_id[idx] = 0;
					st.min_idx = min_t(uint32_t, st.min_idx, idx);
					st.max_idx = max_t(uint32_t, st.max_idx, idx);
				}
				idx++;
				continue;
			}
			st.err = load_object(ld, &io, s, v, idx++, c0, c1);
		}
		if (!io.nr_busy)
			break;
		ret = vdi_io_recv(&io, &s, &result);
		if (ret)
			goto out;
		vdi_io_write_done(&io, s, result, &st);
	}
	ret = st.err;
	if (st.min_idx <= st.max_idx)
		ret = ret ?: vdi_io_write_inode_slice(&io, st.min_idx, st.max_idx);
out:
	vdi_io_close(&io);
	return ret;
}

/* snapshot the working VDI vid with v's tag: the new working VDI's vid in *w */
static int take_snapshot(const struct cs_vdi *v, uint32_t vid, uint32_t *w)
{
	struct sd_inode *inode;
	int ret;

	inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
	if (!inode)
		return ret;
	memset(inode->tag, 0, sizeof(inode->tag));
	memcpy(inode->tag, v->tag, strnlen(v->tag, sizeof(inode->tag) - 1));
	ret = vdi_write_inode(inode, offsetof(struct sd_inode, tag), sizeof(inode->tag));
	if (!ret) {
		ret = vdi_new(v->name, inode->vdi_size, vid, inode->nr_copies,
			      (uint8_t)inode->copy_policy, inode->block_size_shift, 1, w);
		if (ret)
			ret = vdi_new_err("snapshot", v->name, ret);
	}
	free(inode);
	return ret;
}

/* grow the working VDI vid to size */
static int grow(uint32_t vid, uint64_t size)
{
	struct sd_inode *inode;
	int ret;

	inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
	if (!inode)
		return ret;
	if (size > inode->vdi_size) {
		inode->vdi_size = size;
		ret = vdi_write_inode(inode, offsetof(struct sd_inode, vdi_size),
				      sizeof(inode->vdi_size));
	}
	free(inode);
	return ret;
}

/* VDI i of the manifest, its parent (if any) already loaded */
static int load_vdi(struct load *ld, uint32_t i)
{
	const struct cs_vdi *v = &ld->m.vdis[i];
	int p = find_vdi(&ld->m, v->parent);
	const struct cs_vdi *base = p >= 0 ? &ld->m.vdis[p] : NULL;
	uint32_t vid = 0;
	int ret;

	if (base && ld->pending[p] && !strcmp(base->name, v->name)) {
		vid = ld->pending[p]; /* continue in the working VDI its snapshot made */
		ld->pending[p] = 0;
		ret = grow(vid, v->size);
	} else {
		ret = vdi_new(v->name, v->size, base ? ld->new_vid[p] : 0, v->copies,
			      v->copy_policy, v->block_size_shift, 0, &vid);
		if (ret)
			ret = vdi_new_err("load", v->name, ret);
	}
	if (!ret)
		ret = load_data(ld, v, base);
	ld->new_vid[i] = vid;
	if (!ret && v->snapshot)
		ret = take_snapshot(v, vid, &ld->pending[i]);
	return ret;
}

/* every VDI, parents first */
static int load_all(struct load *ld)
{
	uint32_t n = ld->m.nr_vdis, done_nr = 0;
	bool *done = calloc(n + 1, sizeof(bool));
	int ret = EXIT_OK;

	if (!done) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	while (!ret && done_nr < n) {
		uint32_t before = done_nr;

		for (uint32_t i = 0; !ret && i < n; i++) {
			int p = find_vdi(&ld->m, ld->m.vdis[i].parent);

			if (done[i] || (p >= 0 && !done[p]))
				continue;
			ret = load_vdi(ld, i);
			done[i] = true;
			done_nr++;
		}
		if (!ret && before == done_nr) {
			collie_err("snapshot '%s': its vdis' parents form a loop", ld->m.tag);
			ret = EXIT_FAIL;
		}
	}
	/* working VDIs that no saved VDI continued: the original had deleted them */
	for (uint32_t i = 0; !ret && i < n; i++)
		if (ld->pending[i] && vdi_del(ld->m.vdis[i].name, ld->pending[i]))
			ret = EXIT_FAIL;
	free(done);
	return ret;
}

static int snapshot_load(int argc, char **argv)
{
	const char *tag = argv[0], *dir = argv[1];
	struct load ld;
	uint32_t nr = 0;
	int ret;

	memset(&ld, 0, sizeof(ld));
	ret = check_args(tag);
	if (ret)
		return ret;
	ret = cs_store_open(&ld.st, dir, false, false);
	if (!ret)
		ret = cs_store_read_manifest(&ld.st, tag, &ld.m);
	if (!ret)
		ret = cs_store_check_chunks(&ld.st, &ld.m);
	if (!ret)
		ret = vdi_for_each(count_vdis, &nr);
	if (!ret && nr) {
		collie_err("the cluster has %u vdis: load onto a freshly formatted cluster", nr);
		ret = EXIT_EXISTS;
	}
	if (ret)
		goto out;
	ld.new_vid = calloc(ld.m.nr_vdis + 1, sizeof(uint32_t));
	ld.pending = calloc(ld.m.nr_vdis + 1, sizeof(uint32_t));
	if (!ld.new_vid || !ld.pending) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	ret = load_all(&ld);
	if (!ret)
		printf("loaded '%s': %u vdis, %" PRIu64 " objects written (%" PRIu64 " bytes)\n",
		       tag, ld.m.nr_vdis, ld.nr_objs, ld.bytes);
out:
	free(ld.new_vid);
	free(ld.pending);
	cs_manifest_free(&ld.m);
	cs_store_close(&ld.st);
	return ret;
}

/* ------------------------------------------------------------------ */
/* list, delete */

static int cmp_tag(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int snapshot_list(int argc, char **argv)
{
	struct cs_store st;
	char(*tags)[CS_TAG_MAX + 1] = NULL, when[32], size[32];
	int nr = 0, ret;

	ret = cs_store_open(&st, argv[0], false, false);
	if (!ret)
		ret = cs_store_list(&st, &tags, &nr);
	if (nr)
		qsort(tags, (size_t)nr, sizeof(*tags), cmp_tag);
	if (!ret && !opts.raw)
		printf("  %-20s %-19s %5s %9s %8s\n", "Tag", "Created", "VDIs", "Size", "Chunks");
	for (int t = 0; t < nr; t++) {
		struct cs_manifest m;
		uint64_t total = 0, chunks = 0;
		int r = cs_store_read_manifest(&st, tags[t], &m);

		ret = ret ?: r;
		for (uint32_t i = 0; !r && i < m.nr_vdis; i++) {
			total += m.vdis[i].size;
			chunks += m.vdis[i].nr_chunks;
		}
		collie_fmt_size(total, size, sizeof(size));
		if (r)
			;
		else if (opts.raw)
			printf("%s %" PRIu64 " %u %" PRIu64 " %" PRIu64 "\n", m.tag, m.created,
			       m.nr_vdis, total, chunks);
		else {
			collie_fmt_time(m.created, "%Y-%m-%d %H:%M:%S", when, sizeof(when));
			printf("  %-20s %-19s %5u %9s %8" PRIu64 "\n", m.tag, when, m.nr_vdis, size,
			       chunks);
		}
		cs_manifest_free(&m);
	}
	free(tags);
	cs_store_close(&st);
	return ret;
}

static int snapshot_delete(int argc, char **argv)
{
	const char *tag = argv[0], *dir = argv[1];
	char path[CS_TAG_MAX + 16];
	struct cs_store st;
	uint64_t nr, bytes;
	int ret;

	ret = check_args(tag);
	if (ret)
		return ret;
	ret = cs_store_open(&st, dir, false, true);
	if (!ret && !cs_store_has(&st, tag)) {
		collie_err("no snapshot '%s' in %s", tag, dir);
		ret = EXIT_MISSING;
	}
	if (ret)
		goto out;
	snprintf(path, sizeof(path), "snapshots/%s", tag);
	if (unlinkat(st.dirfd, path, 0)) {
		collie_err("failed to delete snapshot '%s' in %s: %s", tag, dir, strerror(errno));
		ret = EXIT_SYSFAIL;
		goto out;
	}
	ret = cs_store_gc(&st, &nr, &bytes);
	if (!ret)
		printf("deleted '%s': %" PRIu64 " chunks (%" PRIu64 " bytes) no other snapshot "
		       "uses removed\n",
		       tag, nr, bytes);
out:
	cs_store_close(&st);
	return ret;
}

const struct subcommand cluster_snapshot_cmds[] = {
	{ "save", "TAG DIR", 0, "save every vdi of the cluster as snapshot TAG in DIR",
	  snapshot_save, NULL, 2, 2, "  collie cluster snapshot save monday /backup/cluster\n",
	  "Each object is read once, cut into 64 KiB chunks, and each non-zero chunk\n"
	  "stored in DIR once by its XXH3-128 hash, whatever the snapshots that hold it:\n"
	  "a second snapshot adds only the chunks that changed, and its manifest.\n"
	  "Save a cluster that no VM writes (or snapshot the vdis first).\n" },
	{ "list", "DIR", OPT_RAW, "list the snapshots saved in DIR", snapshot_list, NULL, 1, 1 },
	{ "load", "TAG DIR", 0, "recreate every vdi of snapshot TAG on a freshly formatted cluster",
	  snapshot_load, NULL, 2, 2,
	  "  collie cluster format -c 3\n  collie cluster snapshot load monday /backup/cluster\n",
	  "Recreates the names, snapshot tags, snapshot trees and clones, each vdi's\n"
	  "copies and object size, and the data; every chunk's hash is checked as it\n"
	  "is read. Refused on a cluster that has a vdi. Snapshot ids are renumbered\n"
	  "from 1 where the original had deleted some; times are those of the load.\n" },
	{ "delete", "TAG DIR", 0, "delete snapshot TAG from DIR, and the chunks only it used",
	  snapshot_delete, NULL, 2, 2 },
	{ NULL },
};
