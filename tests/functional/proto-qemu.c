/*
 * The qemu and pipeline scenarios of proto-client: what QEMU's sheepdog
 * driver sends (PROTOCOL.md sections 9 and 10), checked reply by reply.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto-client.h"
#include "util.h"


#define VDI_NAME "test"
#define VDI_SIZE (UINT64_C(1) << 30)
#define SNAP_TAG "snap1"

struct image {
	struct sd_inode *inode;
	uint32_t vid;
	int io_fd;
	uint32_t next_id;
	uint8_t copies;
};

static int expect(const char *what, int result, int want)
{
	if (result < 0)
		return result;
	step("%s: result %s", what, res_name((uint32_t)result));
	if (result != want)
		fail("%s: expected %s", what, res_name((uint32_t)want));
	return result;
}

/* READ_OBJ on a ctl connection (fd < 0: a new one); result or -1 */
static int read_obj(int fd, uint64_t oid, uint64_t off, uint32_t len, void *buf,
		    uint8_t copies, uint16_t cf)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	obj_hdr(&h, SD_OP_READ_OBJ, cf, oid, off, len, copies, 0);
	ret = fd < 0 ? exec_ctl(&h, NULL, 0, buf, len, &rsp)
		     : exec_req(fd, &h, NULL, 0, buf, len, &rsp);
	if (ret) {
		transport_fail("READ_OBJ", ret);
		return -1;
	}
	if (rsp.result == SD_RES_SUCCESS)
		check(rsp.data_length == len, "READ_OBJ %016llx returned %u bytes, wanted %u",
		      (unsigned long long)oid, rsp.data_length, len);
	return (int)rsp.result;
}

static int write_obj(int fd, uint8_t op, uint16_t flags, uint64_t oid, uint64_t cow,
		     uint64_t off, uint32_t len, const void *buf, uint8_t copies)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	obj_hdr(&h, op, flags, oid, off, len, copies, 0);
	h.obj.cow_oid = cow;
	ret = fd < 0 ? exec_ctl(&h, buf, len, NULL, 0, &rsp)
		     : exec_req(fd, &h, buf, len, NULL, 0, &rsp);
	if (ret) {
		transport_fail("write", ret);
		return -1;
	}
	check(rsp.data_length == 0, "write reply has %u payload bytes", rsp.data_length);
	return (int)rsp.result;
}

static void check_header(const struct sd_inode *ino, const char *what, uint32_t vid,
			 uint32_t snap_id, uint32_t parent)
{
	check(!strcmp(ino->name, VDI_NAME), "%s: name '%.32s'", what, ino->name);
	check(ino->vdi_size == VDI_SIZE, "%s: vdi_size %llu", what,
	      (unsigned long long)ino->vdi_size);
	check(ino->nr_copies >= 1, "%s: nr_copies 0", what);
	check(ino->block_size_shift == SD_DEFAULT_BLOCK_SIZE_SHIFT, "%s: block_size_shift %u",
	      what, ino->block_size_shift);
	check(ino->vdi_id == vid, "%s: vdi_id %x, expected %x", what, ino->vdi_id, vid);
	check(ino->snap_id == snap_id, "%s: snap_id %u, expected %u", what, ino->snap_id,
	      snap_id);
	check(ino->parent_vdi_id == parent, "%s: parent_vdi_id %x, expected %x", what,
	      ino->parent_vdi_id, parent);
}

static bool create_vdi(uint32_t *out_vid)
{
	uint8_t shift = 0, *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	uint32_t vid = 0, want;
	int ret;

	ret = ctl_cluster_default(&shift);
	if (ret >= 0) {
		step("GET_CLUSTER_DEFAULT: result %s, block_size_shift %u", res_name(ret), shift);
		check(ret == SD_RES_SUCCESS && shift == SD_DEFAULT_BLOCK_SIZE_SHIFT,
		      "expected SUCCESS and shift 22");
	}
	ctl_read_vdis(bitmap);
	want = sd_vid_find_free(bitmap, VDI_NAME);
	ret = ctl_new_vdi(VDI_NAME, VDI_SIZE, 0, 0, 0, &vid);
	if (expect("NEW_VDI " VDI_NAME " 1G", ret, SD_RES_SUCCESS) != SD_RES_SUCCESS) {
		free(bitmap);
		return false;
	}
	step("NEW_VDI vid %06x (first free on the FNV-1a probe: %s)", vid,
	     vid == want ? "yes" : "no");
	check(vid == want, "vid %x, expected %x", vid, want);
	ctl_read_vdis(bitmap);
	check(sd_vid_test(bitmap, vid), "READ_VDIS: bit of vid %x not set", vid);
	free(bitmap);
	*out_vid = vid;
	return true;
}

/* open as in 9.2: idle I/O connection first, LOCK_VDI, whole inode read */
static bool open_image(struct image *img, const char *tag, uint32_t snapid)
{
	uint32_t vid = 0;
	int ret;

	img->io_fd = pc_connect(30000);
	if (img->io_fd < 0)
		return false;
	ret = ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, tag, snapid, &vid);
	if (expect("LOCK_VDI " VDI_NAME, ret, SD_RES_SUCCESS) != SD_RES_SUCCESS)
		return false;
	check(vid == img->vid, "LOCK_VDI vid %x, expected %x", vid, img->vid);
	ret = read_obj(-1, vid_to_vdi_oid(vid), 0, SD_INODE_SIZE, img->inode, 0,
		       SD_FLAG_CMD_CACHE);
	if (expect("READ_OBJ inode (4198968 bytes)", ret, SD_RES_SUCCESS) != SD_RES_SUCCESS)
		return false;
	check_header(img->inode, "inode", img->vid, 1, 0);
	check(img->inode->snap_ctime == 0, "inode: snap_ctime set on a new VDI");
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		if (img->inode->data_vdi_id[i]) {
			fail("inode: data_vdi_id[%u] = %x in a new VDI", i,
			     img->inode->data_vdi_id[i]);
			break;
		}
	step("inode: name, vdi_size, nr_copies, block_size_shift, vdi_id, snap_id 1, "
	     "snap_ctime 0 checked");
	img->copies = img->inode->nr_copies;
	return true;
}

struct io {
	uint8_t op;
	uint16_t flags;
	uint64_t oid, cow, off;
	uint32_t len;
	void *buf;
	uint32_t id;
	int result;
	bool done;
};

/*
 * Send every request before reading any reply, then match the replies by
 * id in whatever order they come (PROTOCOL.md section 2).
 */
static bool pipeline(struct image *img, struct io *io, int nr)
{
	for (int i = 0; i < nr; i++) {
		struct sd_req h;
		bool wr = io[i].flags & SD_FLAG_CMD_WRITE;

		io[i].id = img->next_id++;
		io[i].done = false;
		obj_hdr(&h, io[i].op, io[i].flags, io[i].oid, io[i].off, io[i].len,
			img->copies, io[i].id);
		h.obj.cow_oid = io[i].cow;
		if (send_req(img->io_fd, &h, io[i].buf, wr ? io[i].len : 0)) {
			fail("send on the I/O connection failed");
			return false;
		}
	}
	for (int n = 0; n < nr; n++) {
		struct sd_rsp rsp;
		struct io *r = NULL;
		int ret = sd_read_full(img->io_fd, &rsp, sizeof(rsp));

		if (ret) {
			transport_fail("I/O reply", ret);
			return false;
		}
		for (int i = 0; i < nr; i++)
			if (io[i].id == rsp.id && !io[i].done)
				r = &io[i];
		if (!r) {
			fail("reply with unknown id %u on the I/O connection", rsp.id);
			return false;
		}
		r->done = true;
		r->result = (int)rsp.result;
		if (r->op == SD_OP_READ_OBJ && rsp.result == SD_RES_SUCCESS) {
			check(rsp.data_length == r->len, "READ_OBJ id %u: %u bytes, wanted %u",
			      r->id, rsp.data_length, r->len);
			if (rsp.data_length > r->len)
				return false;
			if (sd_read_full(img->io_fd, r->buf, rsp.data_length)) {
				fail("short READ_OBJ payload");
				return false;
			}
		} else if (rsp.data_length) {
			fail("reply id %u (%s) has %u payload bytes", rsp.id,
			     res_name(rsp.result), rsp.data_length);
			return false;
		}
	}
	return true;
}

static bool io_one(struct image *img, uint8_t op, uint16_t flags, uint64_t oid, uint64_t cow,
		   uint64_t off, uint32_t len, void *buf, int *result)
{
	struct io io = { .op = op, .flags = flags, .oid = oid, .cow = cow, .off = off,
			 .len = len, .buf = buf };

	if (!pipeline(img, &io, 1))
		return false;
	*result = io.result;
	return true;
}

static bool same(const void *a, const void *b, size_t len, const char *what)
{
	return check(!memcmp(a, b, len), "%s: data differs", what);
}

#define CF SD_FLAG_CMD_CACHE
#define WF (SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE)

/* 9.4: three creates pipelined, the inode map update, FLUSH_VDI */
static bool write_image(struct image *img, char *data)
{
	static const uint32_t lens[3] = { 4 * MiB, 4 * MiB, 2 * MiB };
	struct io io[3];
	int result;

	for (int i = 0; i < 3; i++)
		io[i] = (struct io){ .op = SD_OP_CREATE_AND_WRITE_OBJ, .flags = WF,
				     .oid = vid_to_data_oid(img->vid, i), .len = lens[i],
				     .buf = data + (size_t)i * OBJ_SIZE };
	if (!pipeline(img, io, 3))
		return false;
	for (int i = 0; i < 3; i++)
		expect(i == 0 ? "CREATE_AND_WRITE_OBJ idx 0 (id 0, 4 MiB)" :
		       i == 1 ? "CREATE_AND_WRITE_OBJ idx 1 (id 1, 4 MiB)" :
				"CREATE_AND_WRITE_OBJ idx 2 (id 2, 2 MiB)",
		       io[i].result, SD_RES_SUCCESS);
	for (int i = 0; i < 3; i++)
		img->inode->data_vdi_id[i] = img->vid;
	if (!io_one(img, SD_OP_WRITE_OBJ, WF, vid_to_vdi_oid(img->vid), 0,
		    SD_INODE_HEADER_SIZE, 12, img->inode->data_vdi_id, &result))
		return false;
	expect("WRITE_OBJ inode map at 4664, 12 bytes (id 3)", result, SD_RES_SUCCESS);
	if (!io_one(img, SD_OP_FLUSH_VDI, CF, vid_to_vdi_oid(img->vid), 0, 0, 0, NULL, &result))
		return false;
	expect("FLUSH_VDI (id 4)", result, SD_RES_SUCCESS);
	return true;
}

static bool read_back(struct image *img, const char *data)
{
	static char rbuf[3][4 * MiB], part[8192], zero[4096];
	struct io io[5];

	io[0] = (struct io){ .op = SD_OP_READ_OBJ, .flags = CF,
			     .oid = vid_to_data_oid(img->vid, 0), .len = 4 * MiB, .buf = rbuf[0] };
	io[1] = io[0];
	io[1].oid = vid_to_data_oid(img->vid, 1);
	io[1].buf = rbuf[1];
	io[2] = io[0];
	io[2].oid = vid_to_data_oid(img->vid, 2);
	io[2].len = 2 * MiB;
	io[2].buf = rbuf[2];
	/* an unaligned range, and the unwritten tail of object 2 */
	io[3] = io[0];
	io[3].oid = vid_to_data_oid(img->vid, 1);
	io[3].off = 512 + 3;
	io[3].len = 8192;
	io[3].buf = part;
	io[4] = io[0];
	io[4].oid = vid_to_data_oid(img->vid, 2);
	io[4].off = 2 * MiB;
	io[4].len = 4096;
	io[4].buf = rbuf[2] + 2 * MiB;
	if (!pipeline(img, io, 5))
		return false;
	for (int i = 0; i < 5; i++)
		check(io[i].result == SD_RES_SUCCESS, "READ_OBJ id %u: %s", io[i].id,
		      res_name(io[i].result));
	bool ok = same(rbuf[0], data, 4 * MiB, "object 0") &
		  same(rbuf[1], data + OBJ_SIZE, 4 * MiB, "object 1") &
		  same(rbuf[2], data + 2 * OBJ_SIZE, 2 * MiB, "object 2") &
		  same(part, data + OBJ_SIZE + 515, 8192, "object 1 at 515") &
		  same(rbuf[2] + 2 * MiB, zero, 4096, "unwritten tail of object 2");
	step("READ_OBJ x5 pipelined (ids 5-9): %s", ok ? "data ok" : "data differs");
	return ok;
}

/* 9.9: header write with the tag, NEW_VDI snapid=1, read of the new header */
static bool snapshot(struct image *img, uint32_t *snap_vid)
{
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	struct sd_inode *hdr = calloc(1, SD_INODE_SIZE);
	uint32_t new_vid = 0, want;
	int fd, ret;
	bool ok = false;

	ctl_read_vdis(bitmap);
	want = sd_vid_find_free(bitmap, VDI_NAME);
	strcpy(img->inode->tag, SNAP_TAG);
	img->inode->vm_clock_nsec = 123456789;
	fd = pc_connect(30000);
	if (fd < 0)
		goto out;
	ret = write_obj(fd, SD_OP_WRITE_OBJ, WF, vid_to_vdi_oid(img->vid), 0, 0,
			SD_INODE_HEADER_SIZE, img->inode, img->copies);
	expect("WRITE_OBJ inode header with tag '" SNAP_TAG "' (4664 bytes)", ret,
	       SD_RES_SUCCESS);
	ret = ctl_new_vdi(VDI_NAME, VDI_SIZE, img->vid, 1, img->copies, &new_vid);
	if (expect("NEW_VDI snapid=1 base=vid", ret, SD_RES_SUCCESS) != SD_RES_SUCCESS)
		goto out_close;
	step("NEW_VDI snapshot: new working vid %06x (next free on the probe: %s)", new_vid,
	     new_vid == want ? "yes" : "no");
	check(new_vid == want && new_vid != img->vid, "new vid %x, expected %x", new_vid, want);
	/* the same ctl connection as the header write */
	ret = read_obj(fd, vid_to_vdi_oid(new_vid), 0, SD_INODE_HEADER_SIZE, hdr, 0, CF);
	expect("READ_OBJ new inode header (4664 bytes)", ret, SD_RES_SUCCESS);
	check_header(hdr, "new working inode", new_vid, 2, img->vid);
	check(hdr->snap_ctime == 0, "new working inode: snap_ctime set");
	/* QEMU keeps its map; check that the daemon copied it too */
	ret = read_obj(fd, vid_to_vdi_oid(new_vid), 0, SD_INODE_SIZE, hdr, 0, CF);
	check(ret == SD_RES_SUCCESS, "READ_OBJ whole new inode: %s", res_name(ret));
	check(hdr->data_vdi_id[0] == img->vid && hdr->data_vdi_id[1] == img->vid &&
		      hdr->data_vdi_id[2] == img->vid && hdr->data_vdi_id[3] == 0,
	      "new inode map: %x %x %x %x", hdr->data_vdi_id[0], hdr->data_vdi_id[1],
	      hdr->data_vdi_id[2], hdr->data_vdi_id[3]);
	step("new working inode: snap_id 2, parent = old vid, data map copied: checked");
	*snap_vid = img->vid;
	img->vid = new_vid;
	memcpy(img->inode, hdr, SD_INODE_HEADER_SIZE);
	ok = true;
out_close:
	close(fd);
out:
	free(hdr);
	free(bitmap);
	return ok;
}

/* 9.4 after a snapshot: COW create of a partial range, then read around it */
static bool cow_write(struct image *img, uint32_t snap_vid, char *data)
{
	static char patch[4096], obj[4 * MiB], expect_obj[4 * MiB];
	int result;

	fill_pattern(patch, sizeof(patch), 99);
	if (!io_one(img, SD_OP_CREATE_AND_WRITE_OBJ, WF | SD_FLAG_CMD_COW,
		    vid_to_data_oid(img->vid, 1), vid_to_data_oid(snap_vid, 1), MiB,
		    sizeof(patch), patch, &result))
		return false;
	expect("CREATE_AND_WRITE_OBJ COW flags 0x07 idx 1, 4096 bytes at 1 MiB", result,
	       SD_RES_SUCCESS);
	img->inode->data_vdi_id[1] = img->vid;
	if (!io_one(img, SD_OP_WRITE_OBJ, WF, vid_to_vdi_oid(img->vid), 0,
		    SD_INODE_HEADER_SIZE + 4, 4, &img->inode->data_vdi_id[1], &result))
		return false;
	expect("WRITE_OBJ inode map entry 1", result, SD_RES_SUCCESS);

	memcpy(expect_obj, data + OBJ_SIZE, 4 * MiB);
	memcpy(expect_obj + MiB, patch, sizeof(patch));
	if (!io_one(img, SD_OP_READ_OBJ, CF, vid_to_data_oid(img->vid, 1), 0, 0, 4 * MiB, obj,
		    &result))
		return false;
	check(result == SD_RES_SUCCESS, "READ_OBJ COW object: %s", res_name(result));
	step("COW object: %s", same(obj, expect_obj, 4 * MiB, "COW object")
				       ? "old data around the new range"
				       : "wrong data");
	if (!io_one(img, SD_OP_READ_OBJ, CF, vid_to_data_oid(snap_vid, 1), 0, 0, 4 * MiB, obj,
		    &result))
		return false;
	check(result == SD_RES_SUCCESS, "READ_OBJ snapshot object: %s", res_name(result));
	step("snapshot object: %s", same(obj, data + OBJ_SIZE, 4 * MiB, "snapshot object")
					    ? "old data"
					    : "wrong data");
	/* objects of a snapshot are read-only (RES_READONLY, PROTOCOL.md 6) */
	if (!io_one(img, SD_OP_WRITE_OBJ, WF, vid_to_data_oid(snap_vid, 0), 0, 0,
		    sizeof(patch), patch, &result))
		return false;
	expect("WRITE_OBJ to a snapshot's object", result, SD_RES_READONLY);
	if (!io_one(img, SD_OP_READ_OBJ, CF, vid_to_data_oid(snap_vid, 0), 0, 0, 4 * MiB, obj,
		    &result))
		return false;
	step("snapshot object 0 after that write: %s",
	     same(obj, data, 4 * MiB, "snapshot object 0") ? "unchanged" : "changed");
	return true;
}

/* 9.10: READ_VDIS, then inode headers along the probe chain */
static void list_snapshots(uint32_t snap_vid, uint32_t work_vid)
{
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	struct sd_inode *hdr = calloc(1, sizeof(*hdr));
	int fd, nr = 0, found = 0;

	if (ctl_read_vdis(bitmap) != SD_RES_SUCCESS)
		goto out;
	check(sd_vid_test(bitmap, snap_vid) && sd_vid_test(bitmap, work_vid),
	      "READ_VDIS: bits of the snapshot and the working VDI not both set");
	fd = pc_connect(30000);
	if (fd < 0)
		goto out;
	for (uint32_t vid = sd_name_to_vid(VDI_NAME); sd_vid_test(bitmap, vid);
	     vid = (vid + 1) & (SD_NR_VDIS - 1)) {
		int ret = read_obj(fd, vid_to_vdi_oid(vid), 0, SD_INODE_HEADER_SIZE, hdr, 0, CF);

		nr++;
		if (ret != SD_RES_SUCCESS || strcmp(hdr->name, VDI_NAME) || !hdr->snap_ctime)
			continue;
		found++;
		step("snapshot list: id %u tag '%s' (snap_ctime set, vm_clock_nsec %llu)",
		     hdr->snap_id, hdr->tag, (unsigned long long)hdr->vm_clock_nsec);
		check(vid == snap_vid && hdr->snap_id == 1 && !strcmp(hdr->tag, SNAP_TAG),
		      "unexpected snapshot at vid %x", vid);
		if (nr > 1024)
			break;
	}
	close(fd);
	step("snapshot list: %d inode(s) on the probe chain, %d snapshot(s)", nr, found);
	check(found == 1, "expected one snapshot");
out:
	free(hdr);
	free(bitmap);
}

static void close_image(struct image *img)
{
	int result, ret;

	if (io_one(img, SD_OP_FLUSH_VDI, CF, vid_to_vdi_oid(img->vid), 0, 0, 0, NULL, &result))
		expect("FLUSH_VDI", result, SD_RES_SUCCESS);
	ret = ctl_release(VDI_NAME, img->vid);
	if (ret >= 0) {
		/* QEMU accepts both */
		step("RELEASE_VDI at close: %s", ret == SD_RES_SUCCESS || ret ==
			SD_RES_VDI_NOT_LOCKED ? "accepted" : res_name(ret));
		check(ret == SD_RES_SUCCESS || ret == SD_RES_VDI_NOT_LOCKED, "RELEASE_VDI: %s",
		      res_name(ret));
	}
	close(img->io_fd);
	img->io_fd = -1;
}

static void locks(uint32_t snap_vid, uint32_t work_vid)
{
	uint32_t vid = 0;
	/* QEMU opens its I/O connection before it locks (section 2): the locks are bound to it */
	int io_fd = pc_connect(30000), ret;

	ret = ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, SNAP_TAG, 0, &vid);
	expect("LOCK_VDI by tag '" SNAP_TAG "'", ret, SD_RES_SUCCESS);
	check(ret != SD_RES_SUCCESS || vid == snap_vid, "vid %x, expected the snapshot %x", vid,
	      snap_vid);
	expect("RELEASE_VDI snapshot", ctl_release(VDI_NAME, snap_vid), SD_RES_SUCCESS);
	ret = ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, NULL, 1, &vid);
	expect("LOCK_VDI by snapid 1", ret, SD_RES_SUCCESS);
	check(ret != SD_RES_SUCCESS || vid == snap_vid, "vid %x, expected the snapshot %x", vid,
	      snap_vid);
	expect("RELEASE_VDI snapshot", ctl_release(VDI_NAME, snap_vid), SD_RES_SUCCESS);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, SNAP_TAG, 0, &vid);
	expect("GET_VDI_INFO by tag", ret, SD_RES_SUCCESS);
	check(ret != SD_RES_SUCCESS || vid == snap_vid, "vid %x, expected %x", vid, snap_vid);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, NULL, 0, &vid);
	expect("GET_VDI_INFO working VDI", ret, SD_RES_SUCCESS);
	check(ret != SD_RES_SUCCESS || vid == work_vid, "vid %x, expected %x", vid, work_vid);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, "no-such-tag", 0, &vid);
	if (ret >= 0) {
		step("GET_VDI_INFO unknown tag: %s",
		     ret == SD_RES_NO_TAG || ret == SD_RES_NO_VDI ? "not found" : res_name(ret));
		check(ret == SD_RES_NO_TAG || ret == SD_RES_NO_VDI, "expected NO_TAG or NO_VDI");
	}
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, NULL, 77, &vid);
	expect("GET_VDI_INFO unknown snapid 77", ret, SD_RES_NO_VDI);

	ret = ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, NULL, 0, &vid);
	expect("LOCK_VDI working VDI", ret, SD_RES_SUCCESS);
	check(ret != SD_RES_SUCCESS || vid == work_vid, "vid %x, expected %x", vid, work_vid);
	expect("LOCK_VDI working VDI again", ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, NULL, 0, &vid),
	       SD_RES_VDI_LOCKED);
	expect("RELEASE_VDI working VDI", ctl_release(VDI_NAME, work_vid), SD_RES_SUCCESS);
	expect("LOCK_VDI after release", ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, NULL, 0, &vid),
	       SD_RES_SUCCESS);
	expect("RELEASE_VDI working VDI", ctl_release(VDI_NAME, work_vid), SD_RES_SUCCESS);
	ret = ctl_release(VDI_NAME, work_vid);
	if (ret >= 0) {
		step("RELEASE_VDI not locked: %s",
		     ret == SD_RES_SUCCESS || ret == SD_RES_VDI_NOT_LOCKED ? "accepted"
									   : res_name(ret));
		check(ret == SD_RES_SUCCESS || ret == SD_RES_VDI_NOT_LOCKED, "RELEASE_VDI: %s",
		      res_name(ret));
	}
	ret = ctl_lookup(SD_OP_LOCK_VDI, "no-such-vdi", NULL, 0, &vid);
	expect("LOCK_VDI unknown name", ret, SD_RES_NO_VDI);
	if (io_fd >= 0)
		close(io_fd);
}

static void deletes(uint32_t snap_vid, uint32_t work_vid, const char *data)
{
	static char obj[4 * MiB];
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	int io_fd = pc_connect(30000); /* the open image's, as in locks() */
	uint32_t vid = 0, want;
	int ret;

	/* 9.12: LOCK_VDI of the snapshot, then DEL_VDI name + tag */
	expect("LOCK_VDI snapshot before delete", ctl_lookup(SD_OP_LOCK_VDI, VDI_NAME, NULL, 1,
							     &vid), SD_RES_SUCCESS);
	expect("DEL_VDI snapshot (512 bytes, snapid 1)", ctl_del(VDI_NAME, SNAP_TAG, 1, 0),
	       SD_RES_SUCCESS);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, SNAP_TAG, 0, &vid);
	if (ret >= 0) {
		step("GET_VDI_INFO deleted snapshot: %s",
		     ret == SD_RES_NO_TAG || ret == SD_RES_NO_VDI ? "not found" : res_name(ret));
		check(ret == SD_RES_NO_TAG || ret == SD_RES_NO_VDI, "expected NO_TAG or NO_VDI");
	}
	/* the working VDI still maps objects 0 and 2 to the deleted snapshot */
	ret = read_obj(-1, vid_to_data_oid(snap_vid, 0), 0, 4 * MiB, obj, 1, CF);
	expect("READ_OBJ object shared with the deleted snapshot", ret, SD_RES_SUCCESS);
	if (ret == SD_RES_SUCCESS)
		step("shared object: %s", same(obj, data, 4 * MiB, "shared object")
						  ? "data intact"
						  : "data differs");

	expect("DEL_VDI working VDI (256 bytes)", ctl_del(VDI_NAME, NULL, 0, work_vid),
	       SD_RES_SUCCESS);
	expect("GET_VDI_INFO after delete", ctl_lookup(SD_OP_GET_VDI_INFO, VDI_NAME, NULL, 0,
						       &vid), SD_RES_NO_VDI);
	expect("DEL_VDI again", ctl_del(VDI_NAME, NULL, 0, work_vid), SD_RES_NO_VDI);
	if (ctl_read_vdis(bitmap) == SD_RES_SUCCESS)
		step("READ_VDIS after delete: bits of deleted vids %s",
		     sd_vid_test(bitmap, snap_vid) && sd_vid_test(bitmap, work_vid)
			     ? "kept (probe chain intact)"
			     : "cleared");

	/* the name is free again: a new vid further along the chain */
	want = sd_vid_find_free(bitmap, VDI_NAME);
	ret = ctl_new_vdi(VDI_NAME, VDI_SIZE, 0, 0, 0, &vid);
	expect("NEW_VDI " VDI_NAME " again", ret, SD_RES_SUCCESS);
	step("NEW_VDI vid %06x (next free on the probe: %s)", vid, vid == want ? "yes" : "no");
	check(vid == want, "vid %x, expected %x", vid, want);
	expect("NEW_VDI existing name", ctl_new_vdi(VDI_NAME, VDI_SIZE, 0, 0, 0, &vid),
	       SD_RES_VDI_EXIST);
	free(bitmap);
	if (io_fd >= 0)
		close(io_fd);
}

/*
 * On a VDI named the way the iotests spell it (with slashes), opened with
 * cache=none: a partial create (9.4), discard (9.6), truncate (9.7) and
 * vmstate objects (9.13).
 */
#define RAW_NAME "/abs/path/scratch/t.raw"
#define DF SD_FLAG_CMD_DIRECT
#define DWF (SD_FLAG_CMD_WRITE | SD_FLAG_CMD_DIRECT)

static void misc_ops(void)
{
	static char buf[8192], back[8192], zero[512];
	struct sd_inode *ino = calloc(1, SD_INODE_SIZE);
	uint32_t vid = 0, lvid = 0;
	int ret, fd;

	ret = ctl_new_vdi(RAW_NAME, 64 * MiB, 0, 0, 0, &vid);
	if (expect("NEW_VDI " RAW_NAME " 64M", ret, SD_RES_SUCCESS) != SD_RES_SUCCESS)
		goto out;
	step("NEW_VDI vid %06x", vid);
	fd = pc_connect(30000);
	expect("LOCK_VDI " RAW_NAME, ctl_lookup(SD_OP_LOCK_VDI, RAW_NAME, NULL, 0, &lvid),
	       SD_RES_SUCCESS);
	check(lvid == vid, "LOCK_VDI vid %x, expected %x", lvid, vid);
	read_obj(-1, vid_to_vdi_oid(vid), 0, SD_INODE_SIZE, ino, 0, DF);

	/* the partial create of the example in 9.4: offset 512, 3584 bytes */
	fill_pattern(buf, 3584, 5);
	ret = write_obj(fd, SD_OP_CREATE_AND_WRITE_OBJ, DWF, vid_to_data_oid(vid, 0), 0, 512,
			3584, buf, ino->nr_copies);
	expect("CREATE_AND_WRITE_OBJ flags 0x09, 3584 bytes at 512", ret, SD_RES_SUCCESS);
	ino->data_vdi_id[0] = vid;
	ret = write_obj(fd, SD_OP_WRITE_OBJ, DWF, vid_to_vdi_oid(vid), 0, SD_INODE_HEADER_SIZE, 4,
			&ino->data_vdi_id[0], ino->nr_copies);
	expect("WRITE_OBJ inode map entry 0", ret, SD_RES_SUCCESS);
	ret = read_obj(fd, vid_to_data_oid(vid, 0), 0, 8192, back, ino->nr_copies, DF);
	check(ret == SD_RES_SUCCESS, "READ_OBJ flags 0x08: %s", res_name(ret));
	step("partial create: %s",
	     ret == SD_RES_SUCCESS && !memcmp(back, zero, 512) && !memcmp(back + 512, buf, 3584) &&
		     !memcmp(back + 4096, zero, 512)
		     ? "zeros around the written range"
		     : "wrong data");

	/* discard object 0: a zero entry written into the inode's map */
	ret = write_obj(fd, SD_OP_WRITE_OBJ, DWF, vid_to_vdi_oid(vid), 0, SD_INODE_HEADER_SIZE, 4,
			zero, ino->nr_copies);
	if (ret >= 0) {
		step("discard (WRITE_OBJ of a zero map entry): %s",
		     ret == SD_RES_SUCCESS || ret == SD_RES_INVALID_PARMS ? "accepted"
									  : res_name(ret));
		check(ret == SD_RES_SUCCESS || ret == SD_RES_INVALID_PARMS, "discard: %s",
		      res_name(ret));
	}
	if (ret == SD_RES_SUCCESS) {
		read_obj(-1, vid_to_vdi_oid(vid), 0, SD_INODE_SIZE, ino, 0, DF);
		step("inode map entry 0 after discard: %s",
		     ino->data_vdi_id[0] == 0 ? "0 (hole)" : "still set");
		check(ino->data_vdi_id[0] == 0, "discarded entry is %x", ino->data_vdi_id[0]);
	}

	/* truncate (grow) to 128 MiB: the 4664-byte header rewritten on a new ctl */
	ino->vdi_size = 128 * MiB;
	ret = write_obj(-1, SD_OP_WRITE_OBJ, DWF, vid_to_vdi_oid(vid), 0, 0, SD_INODE_HEADER_SIZE,
			ino, ino->nr_copies);
	expect("WRITE_OBJ inode header with vdi_size 128 MiB", ret, SD_RES_SUCCESS);
	memset(ino, 0, SD_INODE_HEADER_SIZE);
	ret = read_obj(-1, vid_to_vdi_oid(vid), 0, SD_INODE_HEADER_SIZE, ino, 0, DF);
	step("vdi_size after truncate: %llu MiB", (unsigned long long)(ino->vdi_size >> 20));
	check(ino->vdi_size == 128 * MiB && !strcmp(ino->name, RAW_NAME) && ino->vdi_id == vid,
	      "header after truncate: size %llu name '%.32s'", (unsigned long long)ino->vdi_size,
	      ino->name);

	/* vmstate (savevm): create at offset 0, write further on, read back */
	fill_pattern(buf, sizeof(buf), 6);
	ret = write_obj(-1, SD_OP_CREATE_AND_WRITE_OBJ, DWF, vid_to_vmstate_oid(vid, 0), 0, 0,
			4096, buf, ino->nr_copies);
	expect("CREATE_AND_WRITE_OBJ vmstate object 0", ret, SD_RES_SUCCESS);
	ret = write_obj(-1, SD_OP_WRITE_OBJ, DWF, vid_to_vmstate_oid(vid, 0), 0, 4096, 4096,
			buf + 4096, ino->nr_copies);
	expect("WRITE_OBJ vmstate object 0 at 4096", ret, SD_RES_SUCCESS);
	ret = read_obj(-1, vid_to_vmstate_oid(vid, 0), 0, 8192, back, ino->nr_copies, DF);
	step("vmstate read back: %s",
	     ret == SD_RES_SUCCESS && !memcmp(buf, back, sizeof(buf)) ? "data ok" : "wrong data");
	check(ret == SD_RES_SUCCESS && !memcmp(buf, back, sizeof(buf)), "vmstate data");

	/* QEMU's close (9.8): RELEASE_VDI, then the I/O connection closes */
	expect("RELEASE_VDI " RAW_NAME, ctl_release(RAW_NAME, vid), SD_RES_SUCCESS);
	close(fd);
out:
	free(ino);
}

/*
 * Deep pipelining on one I/O connection, as a busy guest does: 256 writes
 * of 16 KiB to distinct ranges of four objects in flight at once, then 256
 * reads of the same ranges, each batch's replies matched by id.
 */
#define PIPE_NR 256
#define PIPE_LEN 16384

int scenario_pipeline(void)
{
	struct image img = { .io_fd = -1 };
	static struct io io[PIPE_NR];
	char *data = malloc(4 * OBJ_SIZE), *back = calloc(1, 4 * OBJ_SIZE);
	int bad = 0, nr_ok = 0;

	img.inode = calloc(1, SD_INODE_SIZE);
	fill_pattern(data, 4 * OBJ_SIZE, 42);
	expect("NEW_VDI pipe 64M", ctl_new_vdi("pipe", 64 * MiB, 0, 0, 0, &img.vid),
	       SD_RES_SUCCESS);
	img.io_fd = pc_connect(60000);
	if (img.io_fd < 0)
		goto out;
	img.copies = 1;
	/* create the four objects with their first range */
	for (int i = 0; i < 4; i++)
		io[i] = (struct io){ .op = SD_OP_CREATE_AND_WRITE_OBJ, .flags = WF,
				     .oid = vid_to_data_oid(img.vid, i), .len = PIPE_LEN,
				     .buf = data + (size_t)i * OBJ_SIZE };
	if (!pipeline(&img, io, 4))
		goto out;
	for (int i = 0; i < 4; i++)
		nr_ok += io[i].result == SD_RES_SUCCESS;
	step("4 creates pipelined: %d SUCCESS", nr_ok);
	/* ranges 1..64 of each object, interleaved across objects */
	for (int i = 0; i < PIPE_NR; i++) {
		int obj = i % 4, range = 1 + i / 4;
		size_t off = (size_t)range * PIPE_LEN;

		io[i] = (struct io){ .op = SD_OP_WRITE_OBJ, .flags = WF,
				     .oid = vid_to_data_oid(img.vid, obj), .off = off,
				     .len = PIPE_LEN, .buf = data + (size_t)obj * OBJ_SIZE + off };
	}
	if (!pipeline(&img, io, PIPE_NR))
		goto out;
	nr_ok = 0;
	for (int i = 0; i < PIPE_NR; i++)
		nr_ok += io[i].result == SD_RES_SUCCESS;
	step("%d writes pipelined: %d SUCCESS", PIPE_NR, nr_ok);
	for (int i = 0; i < PIPE_NR; i++) {
		int obj = i % 4, range = i / 4;
		size_t off = (size_t)range * PIPE_LEN;

		io[i] = (struct io){ .op = SD_OP_READ_OBJ, .flags = CF,
				     .oid = vid_to_data_oid(img.vid, obj), .off = off,
				     .len = PIPE_LEN, .buf = back + (size_t)obj * OBJ_SIZE + off };
	}
	if (!pipeline(&img, io, PIPE_NR))
		goto out;
	nr_ok = 0;
	for (int i = 0; i < PIPE_NR; i++)
		nr_ok += io[i].result == SD_RES_SUCCESS;
	for (int obj = 0; obj < 4; obj++)
		for (int range = 0; range < PIPE_NR / 4; range++) {
			size_t off = (size_t)obj * OBJ_SIZE + (size_t)range * PIPE_LEN;

			bad += !!memcmp(back + off, data + off, PIPE_LEN);
		}
	step("%d reads pipelined: %d SUCCESS, %d range(s) with wrong data", PIPE_NR, nr_ok, bad);
	check(bad == 0, "pipelined data differs");
	/* the last range of each object was never written: zeros */
	memset(back, 1, PIPE_LEN);
	{
		int result;

		if (io_one(&img, SD_OP_READ_OBJ, CF, vid_to_data_oid(img.vid, 3), 0,
			   (PIPE_NR / 4 + 1) * PIPE_LEN, PIPE_LEN, back, &result)) {
			bool zero = result == SD_RES_SUCCESS;

			for (int i = 0; i < PIPE_LEN && zero; i++)
				zero = back[i] == 0;
			step("unwritten range: %s", zero ? "zeros" : "not zeros");
			check(zero, "unwritten range of a created object is not zero");
		}
	}
out:
	if (img.io_fd >= 0)
		close(img.io_fd);
	free(img.inode);
	free(data);
	free(back);
	return nr_fail ? 1 : 0;
}

int scenario_qemu(void)
{
	struct image img = { .io_fd = -1 };
	uint32_t snap_vid = 0;
	char *data = malloc(3 * OBJ_SIZE);

	img.inode = calloc(1, SD_INODE_SIZE);
	fill_pattern(data, 3 * OBJ_SIZE, 1);
	if (!create_vdi(&img.vid))
		goto out;
	if (!open_image(&img, NULL, 0) || !write_image(&img, data) || !read_back(&img, data))
		goto out;
	if (!snapshot(&img, &snap_vid) || !cow_write(&img, snap_vid, data))
		goto out;
	close_image(&img);
	list_snapshots(snap_vid, img.vid);
	locks(snap_vid, img.vid);
	deletes(snap_vid, img.vid, data);

	misc_ops();
out:
	if (img.io_fd >= 0)
		close(img.io_fd);
	free(img.inode);
	free(data);
	return nr_fail ? 1 : 0;
}

