/*
 * Inode headers as the daemon takes them in (sheep/vdi.c): from the local
 * store when it starts (vdi_init's load_one) and from recovery
 * (vdi_inode_recovered), then used by the lookups of the object path
 * (vdi_lookup_attr, vdi_copies) and the name resolution of LOCK_VDI and
 * GET_VDI_INFO (vdi_table_find).
 *
 * A client's write to a header (sheep/inode.c's inode_check_write, what
 * the gateway asks before it writes): the stored header, a write at an
 * offset; a write it accepts is applied, stored and reread as a header
 * change notification does (vdi_op_header_changed), and must have changed
 * only what QEMU's driver may change.
 *
 * vdi.c is compiled into this file to reach load_one; the table
 * (vdi_table.c) is emptied between inputs; the rest of the daemon links as it is
 * (sheep_env.c). Input: an inode header (SD_INODE_HEADER_SIZE bytes, short
 * input padded with zeros); its vdi_id field names the vid. After it,
 * optionally, a write: a 32-bit little-endian offset (modulo the header
 * size + 64, so that writes past the header are tried too) and the bytes
 * written.
 */
#include "../../sheep/vdi.c"
#include "fuzz_vdi.h"

#include "fuzz.h"
#include "inode.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sheep_setup(true);
	return 0;
}

/* what the object path may rely on for a VDI the cache knows */
static void check_header(uint32_t vid)
{
	uint8_t shift = 0;
	bool is_snapshot;

	/* the gateway sizes objects as 1 << shift */
	if (vdi_lookup_attr(vid, &shift, &is_snapshot) == SD_RES_SUCCESS)
		FUZZ_ASSERT(shift >= SD_MIN_BLOCK_SIZE_SHIFT && shift <= SD_MAX_BLOCK_SIZE_SHIFT);
	vdi_copies(vid);
}

/* the fields the daemon owns: a write inode_check_write accepts keeps them */
static void check_owned(const struct sd_inode_header *a, const struct sd_inode_header *b)
{
	FUZZ_ASSERT(!memcmp(a->name, b->name, sizeof(a->name)));
	FUZZ_ASSERT(a->create_time == b->create_time && a->snap_ctime == b->snap_ctime);
	FUZZ_ASSERT(a->copy_policy == b->copy_policy && a->nr_copies == b->nr_copies);
	FUZZ_ASSERT(a->block_size_shift == b->block_size_shift && a->snap_id == b->snap_id);
	FUZZ_ASSERT(a->vdi_id == b->vdi_id && a->parent_vdi_id == b->parent_vdi_id);
	FUZZ_ASSERT(!memcmp(a->child_vdi_id, b->child_vdi_id, sizeof(a->child_vdi_id)));
}

static void client_write(struct sd_inode_header *stored, const uint8_t *w, size_t wlen)
{
	struct sd_inode_header *h = malloc(sizeof(*h));
	uint32_t vid = stored->vdi_id & (SD_NR_VDIS - 1), off, len;
	uint64_t oid = vid_to_vdi_oid(vid);
	int res;

	FUZZ_ASSERT(h);
	memcpy(&off, w, 4);
	off = le32toh(off) % (SD_INODE_HEADER_SIZE + 64);
	len = (uint32_t)(wlen - 4);
	res = inode_check_write(stored, off, w + 4, len);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "write of %u bytes at %u to vid %06x: %s\n", len, off, vid,
			sd_strerror(res));
	if (res != SD_RES_SUCCESS)
		goto out;
	*h = *stored;
	if (off < SD_INODE_HEADER_SIZE)
		memcpy((char *)h + off, w + 4,
		       len < SD_INODE_HEADER_SIZE - off ? len : SD_INODE_HEADER_SIZE - off);
	check_owned(stored, h);
	FUZZ_ASSERT(memchr(h->tag, '\0', sizeof(h->tag)));
	if (h->vdi_size != stored->vdi_size) {
		/* a resize: growing, of a working VDI, within the objects it may have */
		FUZZ_ASSERT(h->vdi_size > stored->vdi_size && !stored->snap_ctime);
		FUZZ_ASSERT(h->block_size_shift <= SD_MAX_BLOCK_SIZE_SHIFT);
		FUZZ_ASSERT(h->vdi_size <= ((uint64_t)MAX_DATA_OBJS << h->block_size_shift));
	}
	if (stored->snap_ctime) /* a snapshot is frozen */
		FUZZ_ASSERT(!memcmp(h, stored, sizeof(*h)));

	/* stored, then reread on every node as the notification makes them */
	if (off >= SD_INODE_HEADER_SIZE ||
	    sd_store->create_and_write(oid, 0, stored, sizeof(*stored), 0, false) != SD_RES_SUCCESS)
		goto out;
	if (load_one(oid, h) == 0) { /* the cache knows the stored header */
		uint32_t n = len < SD_INODE_HEADER_SIZE - off ? len : SD_INODE_HEADER_SIZE - off;
		struct request req;

		FUZZ_ASSERT(sd_store->write(oid, w + 4, n, off, false) == SD_RES_SUCCESS);
		memset(&req, 0, sizeof(req));
		req.rq.vdi.base_vdi_id = vid;
		vdi_op_header_changed(&req);
		check_header(vid);
	}
	sd_store->remove(oid);
	fuzz_forget_vdis();
out:
	free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_inode_header *h = calloc(1, sizeof(*h)), *back = malloc(sizeof(*h));
	uint32_t vid;
	uint64_t oid;
	int res;

	if (!h || !back)
		goto out_free;
	memcpy(h, data, size < sizeof(*h) ? size : sizeof(*h));
	vid = h->vdi_id & (SD_NR_VDIS - 1);
	oid = vid_to_vdi_oid(vid);

	/* from recovery: a vid the cache knows gets the new header */
	vdi_table_wrlock();
	vdi_table_get(vid, NULL);
	vdi_table_unlock();
	vdi_inode_recovered(vid, h);
	check_header(vid);
	fuzz_forget_vdis();

	/* from the store at start-up */
	if (sd_store->create_and_write(oid, 0, h, sizeof(*h), 0, false) == SD_RES_SUCCESS) {
		FUZZ_ASSERT(load_one(oid, back) == 0);
		check_header(vid);
		vdi_table_rdlock();
		vdi_table_find(h->name[0] ? h->name : "x", h->snap_id, h->tag, &res);
		vdi_table_find(h->name[0] ? h->name : "x", 0, NULL, &res);
		vdi_table_unlock();
		sd_store->remove(oid);
	}
	fuzz_forget_vdis();

	/* a client's write to it */
	if (size >= sizeof(*h) + 4)
		client_write(h, data + sizeof(*h), size - sizeof(*h));
out_free:
	free(back);
	free(h);
	return 0;
}
