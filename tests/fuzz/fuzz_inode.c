/*
 * Inode headers as the daemon takes them in (sheep/vdi.c): from the local
 * store when it starts (vdi_init's load_one) and from recovery
 * (vdi_inode_recovered), then used by the lookups of the object path
 * (vdi_lookup_attr, vdi_copies) and the name resolution of LOCK_VDI and
 * GET_VDI_INFO (vdi_table_find).
 *
 * vdi.c is compiled into this file to reach load_one; the table
 * (vdi_table.c) is emptied between inputs; the rest of the daemon links as it is
 * (sheep_env.c). Input: an inode header (SD_INODE_HEADER_SIZE bytes, short
 * input padded with zeros); its vdi_id field names the vid.
 *
 * HOOK: a function that validates a client's inode header before it is
 * written (planned in sheep/gateway.c or a new sheep/inode.c) belongs in
 * check_header() below: call it first, and keep the assertions for the
 * headers it accepts.
 */
#include "../../sheep/vdi.c"
#include "fuzz_vdi.h"

#include "fuzz.h"

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
out_free:
	free(back);
	free(h);
	return 0;
}
