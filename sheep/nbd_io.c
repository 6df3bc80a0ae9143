/*
 * NBD requests mapped onto a VDI's objects, on the nbd worker threads.
 *
 * Every object access goes through the gateway (gateway.h), as the
 * sheepdog protocol's object ops do, with the VDI's attributes read from
 * the VDI table at each access: replication, snapshots' frozen data and
 * the discard policy apply alike. The VDI's data map (the inode's
 * data_vdi_id) is cached per export and changed like QEMU's sheepdog
 * driver did:
 *
 * - a read of an object whose entry is 0 is a hole (zeros); otherwise it
 *   reads oid(entry, idx), which may be an ancestor's object;
 * - a write to an object of the VDI's own vid is a plain write; to an
 *   unallocated one a CREATE_AND_WRITE; to an ancestor's a CREATE_AND_WRITE
 *   with COW from it (not needed when the write covers the whole object);
 *   after a creation the inode's entry is written (4 bytes at
 *   SD_INODE_HEADER_SIZE + 4 * idx);
 * - TRIM, and WRITE_ZEROES without NO_HOLE, release whole objects: the
 *   entry is zeroed, and the gateway's discard policy removes an object of
 *   the VDI's own vid, so that a later partial creation starts from zeros.
 *
 * A write that changes an entry marks the object busy for its whole
 * duration; any other request on that object waits for it (exp->cond).
 * Plain writes to own objects and reads of settled entries run in parallel.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "nbd.h"
#include "proto_util.h"
#include "gateway.h"
#include "lock.h"
#include "vdi_table.h"

uint32_t nbd_errno(int res)
{
	switch (res) {
	case SD_RES_SUCCESS:
		return 0;
	case SD_RES_READONLY:
		return NBD_EPERM;
	case SD_RES_NO_SPACE:
	case SD_RES_FULL_VDI:
		return NBD_ENOSPC;
	case SD_RES_INVALID_PARMS:
		return NBD_EINVAL;
	case SD_RES_NO_MEM:
		return NBD_ENOMEM;
	case SD_RES_SHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

static int resolve(const char *name, const char *tag, uint32_t snapid, uint32_t *vid);

static uint32_t obj_size(const struct nbd_export *e)
{
	return UINT32_C(1) << e->shift;
}

/*
 * What the gateway needs of vid now (a snapshot taken under the export
 * freezes it): for a read of a VDI the table does not know (an ancestor
 * deleted since), the cluster's defaults; a write needs the VDI. SD_RES_*.
 */
static int vdi_now(uint32_t vid, bool write, struct vdi_attr *attr)
{
	int ret = vdi_get_attr(vid, attr);

	if (ret != SD_RES_SUCCESS && !write) {
		*attr = (struct vdi_attr){ .shift = SD_MAX_BLOCK_SIZE_SHIFT };
		ret = SD_RES_SUCCESS;
	}
	return ret;
}

static int obj_read(uint32_t vid, uint32_t idx, void *buf, uint32_t len, uint32_t off)
{
	struct vdi_attr attr;

	vdi_now(vid, false, &attr);
	return gateway_read(vid_to_data_oid(vid, idx), buf, len, off, &attr);
}

/* write (or create, with cow_vid: from that VDI's object) object idx of vid */
static int obj_write(uint32_t vid, uint32_t idx, const void *buf, uint32_t len, uint32_t off,
		     bool create, uint32_t cow_vid, bool sync)
{
	struct vdi_attr attr;
	int ret = vdi_now(vid, true, &attr);

	if (ret != SD_RES_SUCCESS)
		return ret;
	if (create)
		return gateway_create(vid_to_data_oid(vid, idx),
				      cow_vid ? vid_to_data_oid(cow_vid, idx) : 0, buf, len, off,
				      sync ? GW_SYNC : 0, &attr);
	return gateway_write(vid_to_data_oid(vid, idx), buf, len, off, sync ? GW_SYNC : 0, &attr);
}

/* vid's inode entry for idx becomes val (0: the gateway discards vid's own object) */
static int set_entry(uint32_t vid, uint32_t idx, uint32_t val, bool sync)
{
	struct vdi_attr attr;
	int ret = vdi_now(vid, true, &attr);

	if (ret != SD_RES_SUCCESS)
		return ret;
	return gateway_write(vid_to_vdi_oid(vid), &val, sizeof(val),
			     SD_INODE_HEADER_SIZE + (uint64_t)idx * sizeof(uint32_t),
			     sync ? GW_SYNC : 0, &attr);
}

static bool is_busy(const struct nbd_export *e, uint32_t idx)
{
	return e->busy[idx / 8] & (1U << (idx % 8));
}

/*
 * The entry of idx once no change of it is in flight, and in *vid the
 * VDI's vid at that moment. With claim, the object becomes busy (the
 * caller changes the entry) unless want_own and the entry is the VDI's own.
 */
static uint32_t get_entry(struct nbd_export *e, uint32_t idx, bool claim, bool want_own,
			  uint32_t *vid)
{
	uint32_t cur;

	pthread_mutex_lock(&e->lock);
	while (is_busy(e, idx))
		pthread_cond_wait(&e->cond, &e->lock);
	cur = e->map[idx];
	*vid = e->vid;
	if (claim && !(want_own && cur == e->vid))
		e->busy[idx / 8] |= 1U << (idx % 8);
	pthread_mutex_unlock(&e->lock);
	return cur;
}

static void put_entry(struct nbd_export *e, uint32_t idx, uint32_t val)
{
	pthread_mutex_lock(&e->lock);
	e->map[idx] = val;
	e->busy[idx / 8] &= ~(1U << (idx % 8));
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/* an object that the map does not name (its entry could not be written) */
static void remove_own(uint32_t vid, uint32_t idx)
{
	int ret = gateway_remove(vid_to_data_oid(vid, idx), NULL);

	if (ret != SD_RES_SUCCESS && ret != SD_RES_NO_OBJ)
		sd_warn("released object %016" PRIx64 " stays: %s", vid_to_data_oid(vid, idx),
			sd_strerror(ret));
}

/*
 * The working VDI became a snapshot under the export (collie vdi snapshot)
 * and its lock moved to the new working VDI: follow it, as QEMU's driver
 * did on READONLY. The name resolves to the new VDI, whose map names the
 * old objects (copied on their next write). Holds e->lock throughout, so
 * that every request sees the old VDI or the new one. SD_RES_*.
 */
static int follow_snapshot(struct nbd_export *e, uint32_t stale)
{
	struct nbd_export tmp;
	int ret = SD_RES_SUCCESS;

	pthread_mutex_lock(&e->lock);
	if (e->vid != stale)
		goto out_unlock; /* another request followed it already */
	memset(&tmp, 0, sizeof(tmp));
	snprintf(tmp.name, sizeof(tmp.name), "%s", e->name);
	ret = resolve(tmp.name, "", 0, &tmp.vid);
	if (ret == SD_RES_SUCCESS && tmp.vid == stale)
		ret = SD_RES_READONLY;
	if (ret == SD_RES_SUCCESS)
		ret = nbd_export_load(&tmp, true);
	if (ret == SD_RES_SUCCESS &&
	    (tmp.readonly || tmp.shift != e->shift || tmp.nr_objs != e->nr_objs))
		ret = SD_RES_READONLY;
	if (ret == SD_RES_SUCCESS) {
		/* entries being changed keep theirs: their writers put them back */
		for (uint32_t i = 0; i < e->nr_objs && i < tmp.nr_objs; i++)
			if (is_busy(e, i))
				tmp.map[i] = e->map[i];
		free(e->map);
		e->map = tmp.map;
		tmp.map = NULL;
		sd_info("nbd: vdi %s was snapshotted: the export follows it from %06" PRIx32
			" to %06" PRIx32,
			e->name, stale, tmp.vid);
		e->vid = tmp.vid;
		e->copies = tmp.copies;
	}
	free(tmp.map);
	free(tmp.busy);
out_unlock:
	pthread_mutex_unlock(&e->lock);
	return ret;
}

/* write len bytes of buf at off into object idx, creating it if needed */
static int write_piece(struct nbd_export *e, uint32_t idx, const void *buf, uint32_t len,
		       uint32_t off, bool sync)
{
	bool whole = off == 0 && len == obj_size(e);
	uint32_t vid, cur;
	int ret;

	for (int tries = 0;; tries++) {
		cur = get_entry(e, idx, true, true, &vid);
		if (cur == vid) {
			ret = obj_write(vid, idx, buf, len, off, false, 0, sync);
		} else {
			ret = obj_write(vid, idx, buf, len, off, true, whole ? 0 : cur, sync);
			if (ret == SD_RES_SUCCESS) {
				ret = set_entry(vid, idx, vid, sync);
				/* an object the map does not name must not leak into a later
				 * creation */
				if (ret != SD_RES_SUCCESS)
					remove_own(vid, idx);
			}
			put_entry(e, idx, ret == SD_RES_SUCCESS ? vid : cur);
		}
		if (ret != SD_RES_READONLY || e->readonly || tries == 2 ||
		    follow_snapshot(e, vid) != SD_RES_SUCCESS)
			return ret;
	}
}

/* the whole object idx reads as zeros from now on */
static int release_piece(struct nbd_export *e, uint32_t idx, bool sync)
{
	uint32_t vid, cur;
	int ret;

	for (int tries = 0;; tries++) {
		cur = get_entry(e, idx, true, false, &vid);
		ret = SD_RES_SUCCESS;
		/* the gateway's discard policy removes an object of vid's own */
		if (cur)
			ret = set_entry(vid, idx, 0, sync);
		put_entry(e, idx, ret == SD_RES_SUCCESS ? 0 : cur);
		if (ret != SD_RES_READONLY || tries == 2 ||
		    follow_snapshot(e, vid) != SD_RES_SUCCESS)
			return ret;
	}
}

static void add_run(struct nbd_io *io, uint32_t off, uint32_t len, bool hole)
{
	struct nbd_run *last = io->nr_runs ? &io->runs[io->nr_runs - 1] : NULL;

	if (last && last->hole == hole && last->off + last->len == off) {
		last->len += len;
		return;
	}
	io->runs[io->nr_runs++] = (struct nbd_run){ off, len, hole };
}

/* call fn on each object piece of [io->offset, +io->length) */
#define for_each_piece(e, start, length, idx, off, len, done)                                      \
	for (done = 0; done < (length) &&                                                          \
		       (idx = (uint32_t)(((start) + done) >> (e)->shift),                          \
		       off = (uint32_t)(((start) + done) & (obj_size(e) - 1)),                     \
		       len = (uint32_t)min_t(uint64_t, obj_size(e) - off, (length)-done), 1);      \
	     done += len)

static int do_read(struct nbd_io *io)
{
	struct nbd_export *e = io->exp;
	uint64_t done;
	uint32_t idx, off, len;

	for_each_piece(e, io->offset, io->length, idx, off, len, done) {
		uint32_t own, vid = get_entry(e, idx, false, false, &own);
		char *p = (char *)io->buf + done;
		int ret;

		if (!vid) {
			if (!io->structured)
				memset(p, 0, len);
			add_run(io, done, len, io->structured);
			continue;
		}
		ret = obj_read(vid, idx, p, len, off);
		if (ret == SD_RES_NO_OBJ && vid != own) {
			/* an ancestor's object that was never written reads as zeros */
			memset(p, 0, len);
			ret = SD_RES_SUCCESS;
		}
		if (ret != SD_RES_SUCCESS)
			return ret;
		add_run(io, done, len, false);
	}
	return SD_RES_SUCCESS;
}

bool nbd_read_inline(struct nbd_io *io)
{
	struct nbd_export *e = io->exp;
	uint32_t idx = (uint32_t)(io->offset >> e->shift);
	uint32_t off = (uint32_t)(io->offset & (obj_size(e) - 1)), vid;
	struct vdi_attr attr;
	bool busy;

	if ((uint64_t)off + io->length > obj_size(e))
		return false;
	/* an entry that a write is changing: the worker waits for it */
	pthread_mutex_lock(&e->lock);
	busy = is_busy(e, idx);
	vid = e->map[idx];
	pthread_mutex_unlock(&e->lock);
	if (busy)
		return false;
	if (vid) {
		vdi_now(vid, false, &attr);
		if (!gateway_read_cached(vid_to_data_oid(vid, idx), io->buf, io->length, off,
					 &attr))
			return false;
	} else if (!io->structured) {
		memset(io->buf, 0, io->length);
	}
	add_run(io, 0, io->length, !vid && io->structured);
	return true;
}

static int do_write(struct nbd_io *io, const void *zeros)
{
	struct nbd_export *e = io->exp;
	bool sync = io->flags & NBD_CMD_FLAG_FUA;
	uint64_t done;
	uint32_t idx, off, len;

	for_each_piece(e, io->offset, io->length, idx, off, len, done) {
		const void *p = zeros ? zeros : (const char *)io->buf + done;
		int ret = write_piece(e, idx, p, len, off, sync);

		if (ret != SD_RES_SUCCESS)
			return ret;
	}
	return SD_RES_SUCCESS;
}

static const void *zero_obj;
static pthread_once_t zero_obj_once = PTHREAD_ONCE_INIT;

static void map_zero_obj(void)
{
	void *p = mmap(NULL, UINT32_C(1) << SD_MAX_BLOCK_SIZE_SHIFT, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		sd_err("nbd: cannot map the object of zeros: %m");
	else
		zero_obj = p;
}

/*
 * The zeros that WRITE_ZEROES writes: one read-only mapping of the largest
 * object, shared by every worker and never written, so that it reads as
 * the kernel's zero page and costs no memory. (A buffer per request was
 * payload outside the --max-inflight-bytes bound: an object's worth per
 * worker.) NULL when it cannot be mapped.
 */
static const void *zeros_of_obj(void)
{
	pthread_once(&zero_obj_once, map_zero_obj);
	return zero_obj;
}

/*
 * TRIM releases the whole objects of the range and leaves the edges alone
 * (a trim is advice). WRITE_ZEROES releases whole objects too unless
 * NO_HOLE, and writes zeros over the rest.
 */
static int do_trim_or_zero(struct nbd_io *io)
{
	struct nbd_export *e = io->exp;
	bool zero = io->type == NBD_CMD_WRITE_ZEROES;
	bool punch = !(zero && (io->flags & NBD_CMD_FLAG_NO_HOLE));
	bool sync = io->flags & NBD_CMD_FLAG_FUA;
	const void *zeros = NULL;
	uint64_t done;
	uint32_t idx, off, len, vid;
	int ret = SD_RES_SUCCESS;

	for_each_piece(e, io->offset, io->length, idx, off, len, done) {
		if (punch && len == obj_size(e)) {
			ret = release_piece(e, idx, sync);
		} else if (zero) {
			if (!zeros)
				zeros = zeros_of_obj();
			if (!zeros)
				return SD_RES_NO_MEM;
			/* an unallocated object reads as zeros already */
			if (!get_entry(e, idx, false, false, &vid) && punch)
				continue;
			ret = write_piece(e, idx, zeros, len, off, sync);
		}
		if (ret != SD_RES_SUCCESS)
			break;
	}
	return ret;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* base:allocation: extents of allocated (0) and unallocated (hole|zero) objects */
#define NBD_MAX_EXTENTS 1024

static int do_block_status(struct nbd_io *io)
{
	struct nbd_export *e = io->exp;
	uint32_t nr = 0, max = (io->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : NBD_MAX_EXTENTS;
	uint32_t last_flags = 0, *len_at = NULL;
	uint8_t *p;
	uint64_t done;
	uint32_t idx, off, len;

	io->buf = malloc(4 + 8 * max);
	if (!io->buf)
		return SD_RES_NO_MEM;
	p = io->buf;
	put_be32(p, NBD_META_ID_ALLOCATION);
	for_each_piece(e, io->offset, io->length, idx, off, len, done) {
		uint32_t own, entry = get_entry(e, idx, false, false, &own);
		uint32_t flags = entry ? 0 : NBD_STATE_HOLE | NBD_STATE_ZERO;

		if (len_at && flags == last_flags) {
			uint32_t sum = ((uint32_t)len_at[0]) + len;

			if (sum >= len) { /* no overflow of the 32-bit length */
				len_at[0] = sum;
				continue;
			}
		}
		if (nr == max)
			break;
		len_at = (uint32_t *)(p + 4 + 8 * nr);
		len_at[0] = len;
		len_at[1] = flags;
		last_flags = flags;
		nr++;
	}
	/* to big-endian in place */
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t *d = (uint32_t *)(p + 4 + 8 * i), l = d[0], f = d[1];

		put_be32((uint8_t *)&d[0], l);
		put_be32((uint8_t *)&d[1], f);
	}
	io->buf_len = 4 + 8 * nr;
	return SD_RES_SUCCESS;
}

void nbd_io_work(struct work *w)
{
	struct nbd_io *io = container_of(w, struct nbd_io, work);
	int ret;

	switch (io->type) {
	case NBD_CMD_READ:
		ret = do_read(io);
		break;
	case NBD_CMD_WRITE:
		ret = do_write(io, NULL); /* FUA: every object write is synchronous */
		break;
	case NBD_CMD_FLUSH:
		ret = gateway_flush(vid_to_vdi_oid(io->exp->vid));
		break;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		ret = do_trim_or_zero(io);
		break;
	case NBD_CMD_BLOCK_STATUS:
		ret = do_block_status(io);
		break;
	default:
		ret = SD_RES_INVALID_PARMS;
		break;
	}
	io->error = nbd_errno(ret);
	if (ret != SD_RES_SUCCESS)
		sd_debug("nbd %s: command %u at %" PRIu64 " length %" PRIu32 ": %s", io->exp->name,
			 io->type, io->offset, io->length, sd_strerror(ret));
}

/* a name (and tag, or snapid) to its vid: the VDI table's answer */
static int resolve(const char *name, const char *tag, uint32_t snapid, uint32_t *vid)
{
	return vdi_find_vid(name, snapid, tag, vid);
}

int nbd_export_resolve(struct nbd_export *e, const char *export)
{
	const char *at = strrchr(export, '@'), *sel = at ? at + 1 : "";
	size_t nlen = at ? (size_t)(at - export) : strlen(export);
	uint64_t id = 0;

	while (*export == '/' && nlen > 1) { /* nbd://host/NAME carries no slash, be lenient */
		export ++;
		nlen--;
	}
	if (nlen == 0 || nlen >= sizeof(e->name) || strlen(sel) >= sizeof(e->tag))
		return SD_RES_NO_VDI;
	memcpy(e->name, export, nlen);
	e->name[nlen] = '\0';
	if (at && !*sel)
		return SD_RES_NO_TAG;
	if (*sel && sel[strspn(sel, "0123456789")] == '\0' && strlen(sel) < 10)
		id = strtoull(sel, NULL, 10);
	if (id)
		e->snapid = (uint32_t)id;
	else
		snprintf(e->tag, sizeof(e->tag), "%s", sel);
	return resolve(e->name, e->tag, e->snapid, &e->vid);
}

int nbd_export_load(struct nbd_export *e, bool with_map)
{
	struct sd_inode_header *h = malloc(sizeof(*h));
	int ret;

	if (!h)
		return SD_RES_NO_MEM;
	ret = gateway_read(vid_to_vdi_oid(e->vid), h, SD_INODE_HEADER_SIZE, 0, NULL);
	if (ret == SD_RES_SUCCESS) {
		e->size = h->vdi_size;
		e->shift = h->block_size_shift ? h->block_size_shift : SD_DEFAULT_BLOCK_SIZE_SHIFT;
		e->copies = h->nr_copies;
		e->readonly = h->snap_ctime != 0;
		e->nr_objs = (uint32_t)((e->size + obj_size(e) - 1) >> e->shift);
		if (e->shift < SD_MIN_BLOCK_SIZE_SHIFT || e->shift > SD_MAX_BLOCK_SIZE_SHIFT ||
		    e->nr_objs > MAX_DATA_OBJS)
			ret = SD_RES_EIO;
	}
	free(h);
	if (ret != SD_RES_SUCCESS || !with_map)
		return ret;
	free(e->map);
	free(e->busy);
	e->map = calloc(e->nr_objs + 1, sizeof(uint32_t));
	e->busy = calloc(e->nr_objs / 8 + 1, 1);
	if (!e->map || !e->busy)
		return SD_RES_NO_MEM;
	if (e->nr_objs)
		ret = gateway_read(vid_to_vdi_oid(e->vid), e->map, e->nr_objs * sizeof(uint32_t),
				   SD_INODE_HEADER_SIZE, NULL);
	return ret;
}

void nbd_export_free(struct nbd_export *e)
{
	if (!e)
		return;
	free(e->map);
	free(e->busy);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
}

/* an export name for the inode header h, or NULL if it is deleted */
static char *export_name(const struct sd_inode_header *h)
{
	char *s;

	if (!h->name[0])
		return NULL;
	if (!h->snap_ctime)
		return strndup(h->name, SD_MAX_VDI_LEN - 1);
	if (asprintf(&s, "%.*s@%" PRIu32, SD_MAX_VDI_LEN - 1, h->name, h->snap_id) < 0)
		return NULL;
	return s;
}

int nbd_list_exports(char ***names)
{
	struct sd_inode_header *h = malloc(sizeof(*h));
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	char **v = NULL;
	int n = 0, cap = 0, ret = -ENOMEM;

	if (!h || !bitmap)
		goto out_free;
	vdi_copy_bitmap(bitmap, SD_VDI_BITMAP_SIZE);
	for (uint32_t vid = 1; vid < SD_NR_VDIS; vid++) {
		char *name;

		if (!bitmap[vid / 8]) {
			vid |= 7;
			continue;
		}
		if (!sd_vid_test(bitmap, vid) ||
		    gateway_read(vid_to_vdi_oid(vid), h, SD_INODE_HEADER_SIZE, 0, NULL))
			continue;
		name = export_name(h);
		if (!name)
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));

			if (!nv) {
				free(name);
				goto out_free;
			}
			v = nv;
		}
		v[n++] = name;
	}
	*names = v;
	v = NULL;
	ret = n;
out_free:
	if (v)
		while (n--)
			free(v[n]);
	free(v);
	free(bitmap);
	free(h);
	return ret;
}

/* ------------------------------------------------------------------ */
/* the reply of a request, as iovecs over io->hdr and io->buf (main thread) */

static uint8_t *put_chunk(uint8_t *h, uint16_t flags, uint16_t type, uint64_t cookie, uint32_t len)
{
	uint32_t v32 = htobe32(NBD_STRUCTURED_REPLY_MAGIC);
	uint16_t v16;
	uint64_t v64 = htobe64(cookie);

	memcpy(h, &v32, 4);
	v16 = htobe16(flags);
	memcpy(h + 4, &v16, 2);
	v16 = htobe16(type);
	memcpy(h + 6, &v16, 2);
	memcpy(h + 8, &v64, 8);
	v32 = htobe32(len);
	memcpy(h + 16, &v32, 4);
	return h + 20;
}

static void add_iov(struct nbd_io *io, void *base, size_t len)
{
	io->iov[io->tx.nr_iov].iov_base = base;
	io->iov[io->tx.nr_iov++].iov_len = len;
}

/* the chunks of a structured reply to READ */
static void build_read_chunks(struct nbd_io *io)
{
	uint8_t *h = io->hdr;

	if (io->nr_runs == 0) {
		uint8_t *end =
		    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, io->cookie, 0);
		add_iov(io, h, end - h);
		return;
	}
	for (int i = 0; i < io->nr_runs; i++) {
		const struct nbd_run *r = &io->runs[i];
		uint16_t flags = i == io->nr_runs - 1 ? NBD_REPLY_FLAG_DONE : 0;
		uint64_t off = htobe64(io->offset + r->off);
		uint8_t *start = h;

		if (r->hole) {
			uint32_t hl = htobe32(r->len);

			h = put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_HOLE, io->cookie, 12);
			memcpy(h, &off, 8);
			memcpy(h + 8, &hl, 4);
			h += 12;
			add_iov(io, start, h - start);
		} else {
			h = put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_DATA, io->cookie, 8 + r->len);
			memcpy(h, &off, 8);
			h += 8;
			add_iov(io, start, h - start);
			add_iov(io, (char *)io->buf + r->off, r->len);
		}
	}
}

void nbd_build_reply(struct nbd_io *io)
{
	uint8_t *h = io->hdr;
	bool read = io->type == NBD_CMD_READ, bs = io->type == NBD_CMD_BLOCK_STATUS;

	io->tx.iov = io->iov;
	io->tx.nr_iov = 0;
	io->tx.idx = 0;
	if (io->structured && (read || bs || io->error)) {
		if (io->error) {
			uint32_t err = htobe32(io->error);
			uint16_t mlen = 0;
			uint8_t *end =
			    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, io->cookie, 6);

			memcpy(end, &err, 4);
			memcpy(end + 4, &mlen, 2);
			add_iov(io, h, end + 6 - h);
		} else if (read) {
			build_read_chunks(io);
		} else {
			uint8_t *end =
			    put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
				      io->cookie, io->buf_len);
			add_iov(io, h, end - h);
			add_iov(io, io->buf, io->buf_len);
		}
		return;
	}
	uint32_t magic = htobe32(NBD_SIMPLE_REPLY_MAGIC), err = htobe32(io->error);
	uint64_t cookie = htobe64(io->cookie);

	memcpy(h, &magic, 4);
	memcpy(h + 4, &err, 4);
	memcpy(h + 8, &cookie, 8);
	add_iov(io, h, 16);
	if (read && !io->error && io->length)
		add_iov(io, io->buf, io->length);
}
