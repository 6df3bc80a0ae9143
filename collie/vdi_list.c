/*
 * collie vdi list and vdi tree: walk every vid in use (READ_VDIS bitmap),
 * read each inode whole, and print what they say.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"
#include "ec.h"

int vdi_for_each(void (*fn)(const struct sd_inode *inode, void *arg), void *arg)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint8_t *bitmap;
	struct sd_inode *inode;
	int ret;

	bitmap = calloc(1, SD_VDI_BITMAP_SIZE);
	inode = malloc(sizeof(*inode));
	if (!bitmap || !inode) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out_free;
	}
	collie_init_req(&hdr, SD_OP_READ_VDIS);
	hdr.data_length = SD_VDI_BITMAP_SIZE;
	ret = collie_run("failed to read the list of vdis", &hdr, bitmap, 0, SD_VDI_BITMAP_SIZE,
			 &rsp);
	if (ret)
		goto out_free;
	for (uint32_t vid = 1; vid < SD_NR_VDIS; vid++) {
		if (!bitmap[vid >> 3]) {
			vid |= 7;
			continue;
		}
		if (!sd_vid_test(bitmap, vid))
			continue;
		memset(inode, 0, sizeof(*inode));
		ret = vdi_read_inode(vid, inode, sizeof(*inode));
		if (ret)
			goto out_free;
		fn(inode, arg);
	}
out_free:
	free(inode);
	free(bitmap);
	return ret;
}

/* what list and tree need of an inode */
struct vdi_entry {
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	uint64_t create_time;
	uint64_t snap_ctime;
	uint64_t vdi_size;
	uint64_t used;	 /* bytes in objects of its own */
	uint64_t shared; /* bytes in objects of an ancestor */
	uint64_t frees;	 /* bytes that deleting it would free (vdi list computes it) */
	uint64_t obj_size;
	uint32_t snap_id;
	uint32_t vid;
	uint32_t parent_vid;
	uint32_t tree_parent; /* the nearest ancestor that is not deleted, or 0 */
	uint8_t nr_copies;
	char copies[8]; /* "3", or "4:2" for an erasure-coded vdi */
	bool deleted; /* kept only to link the tree across it */
	bool printed;
};

/* a live VDI's map entry: it reads object idx of owner */
struct vdi_ref {
	uint64_t key; /* owner << 32 | idx */
	uint32_t entry;
};

struct vdi_entries {
	struct vdi_entry *e;
	size_t nr, cap;
	struct vdi_ref *refs; /* with_refs: every live VDI's allocated entries */
	size_t nr_refs, cap_refs;
	bool with_refs;
	bool oom;
};

/* room for one more of nr elements of size at *arr (capacity *cap, doubled): false if none */
static bool grow(void **arr, size_t nr, size_t *cap, size_t size, size_t first)
{
	size_t n = *cap ? *cap * 2 : first;
	void *p;

	if (nr < *cap)
		return true;
	p = realloc(*arr, n * size);
	if (!p)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

static void add_ref(struct vdi_entries *v, uint32_t owner, uint32_t idx)
{
	if (!grow((void **)&v->refs, v->nr_refs, &v->cap_refs, sizeof(*v->refs), 4096)) {
		v->oom = true;
		return;
	}
	v->refs[v->nr_refs++] = (struct vdi_ref){ (uint64_t)owner << 32 | idx, (uint32_t)(v->nr - 1) };
}

static void collect(const struct sd_inode *inode, void *arg)
{
	struct vdi_entries *v = arg;
	struct vdi_entry *e;
	uint64_t obj_size, nr_own = 0, nr_shared = 0;
	uint8_t shift = inode->block_size_shift;
	int d, p;

	if (!grow((void **)&v->e, v->nr, &v->cap, sizeof(*v->e), 64)) {
		v->oom = true;
		return;
	}
	e = &v->e[v->nr++];
	memset(e, 0, sizeof(*e));
	memcpy(e->name, inode->name, sizeof(e->name) - 1);
	memcpy(e->tag, inode->tag, sizeof(e->tag) - 1);
	e->create_time = inode->create_time;
	e->snap_ctime = inode->snap_ctime;
	e->vdi_size = inode->vdi_size;
	e->snap_id = inode->snap_id;
	e->vid = inode->vdi_id;
	e->parent_vid = inode->parent_vdi_id;
	e->deleted = vdi_is_deleted(inode);
	e->nr_copies = inode->nr_copies;
	if (ec_policy_to_dp(inode->copy_policy, &d, &p))
		snprintf(e->copies, sizeof(e->copies), "%d:%d", d, p);
	else
		snprintf(e->copies, sizeof(e->copies), "%u", inode->nr_copies);
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++) {
		if (!inode->data_vdi_id[i])
			continue;
		if (inode->data_vdi_id[i] == inode->vdi_id)
			nr_own++;
		else
			nr_shared++;
		if (v->with_refs && !e->deleted)
			add_ref(v, inode->data_vdi_id[i], i);
	}
	if (shift < SD_MIN_BLOCK_SIZE_SHIFT || shift > 31)
		shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	obj_size = UINT64_C(1) << shift;
	e->obj_size = obj_size;
	e->used = nr_own * obj_size;
	e->shared = nr_shared * obj_size;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct vdi_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->snap_id != y->snap_id)
		return x->snap_id < y->snap_id ? -1 : 1;
	return x->vid < y->vid ? -1 : (x->vid > y->vid);
}

static int cmp_ref(const void *a, const void *b)
{
	const struct vdi_ref *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

static struct vdi_entry *find_vid(struct vdi_entries *v, uint32_t vid);

/*
 * What deleting each live VDI would free: the objects that it alone reads
 * among the live VDIs, of its own or of a deleted ancestor (whose objects
 * were kept for the VDIs that read them: the daemon frees them once the
 * last of those is deleted). A live snapshot's objects stay with it.
 */
static void count_frees(struct vdi_entries *v)
{
	if (v->nr_refs)
		qsort(v->refs, v->nr_refs, sizeof(*v->refs), cmp_ref);
	for (size_t i = 0; i < v->nr_refs;) {
		size_t j = i + 1;
		struct vdi_entry *reader, *owner;

		while (j < v->nr_refs && v->refs[j].key == v->refs[i].key)
			j++;
		reader = &v->e[v->refs[i].entry];
		owner = find_vid(v, (uint32_t)(v->refs[i].key >> 32));
		if (j == i + 1 && (owner == reader || (owner && owner->deleted)))
			reader->frees += reader->obj_size;
		i = j;
	}
}

static int load_entries(struct vdi_entries *v, bool with_refs)
{
	int ret;

	memset(v, 0, sizeof(*v));
	v->with_refs = with_refs;
	ret = vdi_for_each(collect, v);
	if (!ret && v->oom) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
	}
	if (ret) {
		free(v->e);
		free(v->refs);
		return ret;
	}
	if (with_refs)
		count_frees(v);
	free(v->refs);
	v->refs = NULL;
	if (v->nr) /* qsort takes no NULL base, even for 0 entries */
		qsort(v->e, v->nr, sizeof(*v->e), cmp_entry);
	return EXIT_OK;
}

static bool is_clone(const struct vdi_entry *e)
{
	return !e->snap_ctime && e->parent_vid && e->snap_id == 1;
}

void vdi_print_names(void)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	struct sd_inode_header h;
	uint8_t *bitmap = calloc(1, SD_VDI_BITMAP_SIZE);

	if (!bitmap)
		return;
	collie_init_req(&hdr, SD_OP_READ_VDIS);
	hdr.data_length = SD_VDI_BITMAP_SIZE;
	if (collie_exec(&hdr, bitmap, 0, SD_VDI_BITMAP_SIZE, &rsp) || rsp.result != SD_RES_SUCCESS)
		goto out_free;
	for (uint32_t vid = 1; vid < SD_NR_VDIS; vid++) {
		if (!bitmap[vid >> 3]) {
			vid |= 7;
			continue;
		}
		if (!sd_vid_test(bitmap, vid))
			continue;
		memset(&h, 0, sizeof(h));
		if (vdi_read_inode(vid, (struct sd_inode *)&h, SD_INODE_HEADER_SIZE))
			break;
		if (!h.snap_ctime && h.name[0])
			printf("%.*s\n", SD_MAX_VDI_LEN, h.name);
	}
out_free:
	free(bitmap);
}

/*
 * "nbd://HOST:PORT/" when the node collie talks to serves NBD (sheep
 * --nbd), else an empty string. A node listening on every address is
 * reached at the address collie used.
 */
static void nbd_base(char *buf, size_t len)
{
	static const uint8_t any4[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t any6[16];
	struct sd_node_info info;
	struct sd_req hdr;
	struct sd_rsp rsp;
	char host[80];

	buf[0] = '\0';
	memset(&info, 0, sizeof(info));
	collie_init_req(&hdr, SD_OP_STAT_SHEEP);
	hdr.data_length = sizeof(info);
	if (collie_exec(&hdr, &info, 0, sizeof(info), &rsp) || rsp.result != SD_RES_SUCCESS ||
	    rsp.data_length < sizeof(info) || !info.nbd_port)
		return;
	if (!memcmp(info.nbd_addr, any4, 16) || !memcmp(info.nbd_addr, any6, 16)) {
		if (strchr(opts.addr, ':'))
			snprintf(buf, len, "nbd://[%s]:%u/", opts.addr, info.nbd_port);
		else
			snprintf(buf, len, "nbd://%s:%u/", opts.addr, info.nbd_port);
		return;
	}
	sd_addr_to_str(info.nbd_addr, (uint16_t)info.nbd_port, host, sizeof(host));
	snprintf(buf, len, "nbd://%s/", host);
}

/* the export of e: NAME, or NAME@ID for a snapshot */
static void print_nbd_url(const char *base, const struct vdi_entry *e)
{
	if (e->snap_ctime)
		printf("  %s%s@%u", base, e->name, e->snap_id);
	else
		printf("  %s%s", base, e->name);
}

static void print_entry(const struct vdi_entry *e, const char *nbd)
{
	char size[32], used[32], shared[32], frees[32], when[32];
	uint64_t t = e->snap_ctime ? e->snap_ctime : e->create_time;
	char type = e->snap_ctime ? 's' : (is_clone(e) ? 'c' : (opts.raw ? '=' : ' '));

	collie_fmt_size(e->vdi_size, size, sizeof(size));
	collie_fmt_size(e->used, used, sizeof(used));
	collie_fmt_size(e->shared, shared, sizeof(shared));
	collie_fmt_size(e->frees, frees, sizeof(frees));
	if (opts.raw) {
		printf("%c ", type);
		collie_print_escaped(e->name);
			printf(" %u %s %s %s %llu %x %s %s", e->snap_id, size, used, shared,
		       (unsigned long long)collie_time_to_sec(t), e->vid, e->copies, frees);
		if (e->tag[0]) {
			putchar(' ');
			collie_print_escaped(e->tag);
		}
		putchar('\n');
		return;
	}
	collie_fmt_time(t, "%Y-%m-%d %H:%M", when, sizeof(when));
	if (nbd[0]) {
		printf("%c %-8s %5u %7s %7s %7s %7s %16s %8x %6s  %-8s", type, e->name, e->snap_id,
		       size, used, shared, frees, when, e->vid, e->copies, e->tag);
		print_nbd_url(nbd, e);
		putchar('\n');
		return;
	}
	printf("%c %-8s %5u %7s %7s %7s %7s %16s %8x %6s%s%s\n", type, e->name, e->snap_id, size,
	       used, shared, frees, when, e->vid, e->copies, e->tag[0] ? "  " : "", e->tag);
}

int vdi_list(int argc, char **argv)
{
	struct vdi_entries v;
	char nbd[128] = "";
	int ret;

	ret = load_entries(&v, true);
	if (ret)
		return ret;
	/* the NBD column: only in the table, when the node serves NBD */
	if (!opts.raw)
		nbd_base(nbd, sizeof(nbd));
	if (!opts.raw && nbd[0])
		printf("  %-8s %5s %7s %7s %7s %7s %16s %8s %6s  %-8s  %s\n", "Name", "Id", "Size",
		       "Used", "Shared", "Frees", "Creation time", "VDI id", "Copies", "Tag", "NBD");
	else if (!opts.raw)
		printf("  %-8s %5s %7s %7s %7s %7s %16s %8s %6s  %s\n", "Name", "Id", "Size", "Used",
		       "Shared", "Frees", "Creation time", "VDI id", "Copies", "Tag");
	for (size_t i = 0; i < v.nr; i++)
		if (!v.e[i].deleted)
			print_entry(&v.e[i], nbd);
	free(v.e);
	return EXIT_OK;
}

static void print_label(const struct vdi_entry *e)
{
	if (!e->snap_ctime)
		printf("%s (current)\n", e->name);
	else if (e->tag[0])
		printf("%s (snapshot %u '%s')\n", e->name, e->snap_id, e->tag);
	else
		printf("%s (snapshot %u)\n", e->name, e->snap_id);
}

static struct vdi_entry *find_vid(struct vdi_entries *v, uint32_t vid)
{
	if (!vid)
		return NULL;
	for (size_t i = 0; i < v->nr; i++)
		if (v->e[i].vid == vid)
			return &v->e[i];
	return NULL;
}

/*
 * Link each VDI to its nearest ancestor that is still there, walking
 * through deleted ones (a deleted snapshot in the middle of a chain keeps
 * its inode and its parent link). At most v->nr steps: a cycle ends it.
 */
static void link_tree(struct vdi_entries *v)
{
	for (size_t i = 0; i < v->nr; i++) {
		struct vdi_entry *p = find_vid(v, v->e[i].parent_vid);
		size_t steps = 0;

		while (p && p->deleted && steps++ < v->nr)
			p = find_vid(v, p->parent_vid);
		v->e[i].tree_parent = p && !p->deleted ? p->vid : 0;
	}
}

/*
 * Print e and its subtree. prefix holds the drawing of the ancestors'
 * columns ("|   " or "    " each); depth is bounded by the number of VDIs,
 * and printed marks stop a cycle a broken daemon could report.
 */
static void print_tree(struct vdi_entries *v, struct vdi_entry *e, char *prefix, size_t plen,
		       size_t cap)
{
	size_t last = SIZE_MAX;

	e->printed = true;
	print_label(e);
	for (size_t i = 0; i < v->nr; i++)
		if (!v->e[i].printed && v->e[i].tree_parent == e->vid && &v->e[i] != e)
			last = i;
	for (size_t i = 0; i < v->nr && last != SIZE_MAX; i++) {
		struct vdi_entry *c = &v->e[i];
		bool is_last = i == last;

		if (c->printed || c->tree_parent != e->vid)
			continue;
		printf("%.*s%s", (int)plen, prefix, is_last ? "`-- " : "|-- ");
		if (plen + 4 < cap) {
			memcpy(prefix + plen, is_last ? "    " : "|   ", 4);
			print_tree(v, c, prefix, plen + 4, cap);
		} else {
			print_tree(v, c, prefix, plen, cap);
		}
		if (is_last)
			break;
	}
}

int vdi_tree(int argc, char **argv)
{
	struct vdi_entries v;
	char *prefix;
	size_t cap;
	int ret;

	ret = load_entries(&v, false);
	if (ret)
		return ret;
	cap = 4 * (v.nr + 1);
	prefix = malloc(cap);
	if (!prefix) {
		free(v.e);
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	link_tree(&v);
	for (size_t i = 0; i < v.nr; i++)
		v.e[i].printed = v.e[i].deleted;
	for (size_t i = 0; i < v.nr; i++) {
		struct vdi_entry *e = &v.e[i];

		if (!e->printed && !e->tree_parent)
			print_tree(&v, e, prefix, 0, cap);
	}
	/* whatever is left sits on a parent cycle: print it as roots */
	for (size_t i = 0; i < v.nr; i++)
		if (!v.e[i].printed)
			print_tree(&v, &v.e[i], prefix, 0, cap);
	free(prefix);
	free(v.e);
	return EXIT_OK;
}
