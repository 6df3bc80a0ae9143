/*
 * The data-path scenarios of proto-client: what a client may write into an
 * inode, copy-on-write creates after such writes, objects past a VDI's end,
 * answers of no bytes, VDIs of any object size, and QEMU's discard and the
 * create that follows it (one request each, for a script to compose).
 *
 * Each prints one line per request with the result it got; a result other
 * than the expected one is a FAIL line.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto-client.h"
#include "util.h"

#define WAIT_MS 10000
#define WF (SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE)

/* one request on a new connection: the result, or -1 (printed) */
static int run(const struct sd_req *h, const void *wdata, void *rbuf, uint32_t rcap)
{
	struct sd_rsp rsp;
	int fd = pc_connect(WAIT_MS), ret;

	if (fd < 0)
		return -1;
	ret = exec_req(fd, h, wdata, (h->flags & SD_FLAG_CMD_WRITE) ? h->data_length : 0, rbuf,
		       rcap, &rsp);
	close(fd);
	if (ret) {
		transport_fail("request", ret);
		return -1;
	}
	return (int)rsp.result;
}

/* print "label: RESULT" and check it */
static int expect(const char *label, int ret, uint32_t want)
{
	step("%s: %s", label, ret < 0 ? "no reply" : res_name((uint32_t)ret));
	check(ret == (int)want, "expected %s", res_name(want));
	return ret;
}

static int obj_write(uint8_t op, uint16_t flags, uint64_t oid, uint64_t cow, uint64_t off,
		     const void *buf, uint32_t len)
{
	struct sd_req h;

	obj_hdr(&h, op, flags, oid, off, len, 0, 0);
	h.obj.cow_oid = cow;
	return run(&h, buf, NULL, 0);
}

static int obj_read(uint64_t oid, uint64_t off, void *buf, uint32_t len)
{
	struct sd_req h;

	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, oid, off, len, 0, 0);
	return run(&h, NULL, buf, len);
}

static int header_write(uint32_t vid, uint64_t off, const void *buf, uint32_t len)
{
	return obj_write(SD_OP_WRITE_OBJ, WF, vid_to_vdi_oid(vid), 0, off, buf, len);
}

static int new_vdi(const char *name, uint64_t size, uint32_t base, uint32_t snapshot,
		   uint8_t copies, uint8_t shift, uint32_t *vid)
{
	char buf[SD_MAX_VDI_LEN] = { 0 };
	struct sd_req h;
	struct sd_rsp rsp;
	int fd, ret;

	strncpy(buf, name, sizeof(buf) - 1);
	vdi_hdr(&h, SD_OP_NEW_VDI, sizeof(buf));
	h.vdi.vdi_size = size;
	h.vdi.base_vdi_id = base;
	h.vdi.copies = copies;
	h.vdi.block_size_shift = shift;
	h.vdi.snapid = snapshot;
	fd = pc_connect(WAIT_MS);
	if (fd < 0)
		return -1;
	ret = exec_req(fd, &h, buf, sizeof(buf), NULL, 0, &rsp);
	close(fd);
	if (ret) {
		transport_fail("NEW_VDI", ret);
		return -1;
	}
	*vid = rsp.vdi.vdi_id;
	return (int)rsp.result;
}

/* is the daemon still there, and does it still answer a lookup? */
static void alive(const char *name)
{
	uint32_t vid = 0;
	int ret = ctl_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, &vid);

	step("the daemon still serves: GET_VDI_INFO %s: %s", name,
	     ret < 0 ? "no reply" : res_name((uint32_t)ret));
	check(ret == SD_RES_SUCCESS, "expected SUCCESS");
}

/*
 * inode-write: the header writes a client may send and those it may not
 * (each refused with INVALID_PARMS and nothing changed), then the attack
 * of issue 8: block_size_shift rewritten, then a COW create, which used to
 * size its buffer from that shift.
 */
int scenario_inode_write(void)
{
	struct sd_inode_header *h = malloc(sizeof(*h)), *orig = malloc(sizeof(*orig));
	static char data[65536], back[65536], base[65536];
	uint32_t vid = 0, other = 0, snap = 0, work = 0;
	uint64_t size;
	static const uint8_t shifts[] = { 0, 19, 25, 40, 255, 32 };
	uint8_t b;
	int ret;

	if (!h || !orig)
		return 1;
	if (new_vdi("canary", 64 * MiB, 0, 0, 0, SD_DEFAULT_BLOCK_SIZE_SHIFT, &other) ||
	    new_vdi("victim", 64 * MiB, 0, 0, 0, SD_DEFAULT_BLOCK_SIZE_SHIFT, &vid)) {
		fail("setup: NEW_VDI");
		return 1;
	}
	if (obj_read(vid_to_vdi_oid(vid), 0, orig, sizeof(*orig)) != SD_RES_SUCCESS) {
		fail("setup: inode read");
		return 1;
	}
	step("setup: vdis canary and victim");

	*h = *orig;
	expect("the header sent back unchanged (QEMU's resize does so)",
	       header_write(vid, 0, h, sizeof(*h)), SD_RES_SUCCESS);
	h->vdi_size = 128 * MiB;
	expect("vdi_size 64 MiB -> 128 MiB", header_write(vid, 0, h, sizeof(*h)), SD_RES_SUCCESS);
	h->vdi_size = 96 * MiB;
	expect("vdi_size 128 MiB -> 96 MiB (a shrink)", header_write(vid, 0, h, sizeof(*h)),
	       SD_RES_INVALID_PARMS);
	size = ((uint64_t)MAX_DATA_OBJS << SD_DEFAULT_BLOCK_SIZE_SHIFT) + 512;
	expect("vdi_size past 2^20 objects",
	       header_write(vid, offsetof(struct sd_inode_header, vdi_size), &size, 8),
	       SD_RES_INVALID_PARMS);
	h->vdi_size = 128 * MiB;
	strcpy(h->tag, "t1");
	h->vm_state_size = 4096;
	h->vm_clock_nsec = 1;
	expect("tag, vm_state_size, vm_clock_nsec (QEMU's snapshot path)",
	       header_write(vid, 0, h, sizeof(*h)), SD_RES_SUCCESS);
	*orig = *h;

	h = memcpy(h, orig, sizeof(*h));
	strcpy(h->name, "canary");
	expect("name -> canary (an existing name)", header_write(vid, 0, h, sizeof(*h)),
	       SD_RES_INVALID_PARMS);
	expect("name -> empty", header_write(vid, 0, "", 1), SD_RES_INVALID_PARMS);
	h = memcpy(h, orig, sizeof(*h));
	h->nr_copies = 0;
	expect("nr_copies -> 0", header_write(vid, 0, h, sizeof(*h)), SD_RES_INVALID_PARMS);
	b = 31;
	expect("nr_copies -> 31 (more than the nodes)",
	       header_write(vid, offsetof(struct sd_inode_header, nr_copies), &b, 1),
	       SD_RES_INVALID_PARMS);
	b = 24;
	expect("block_size_shift -> 24",
	       header_write(vid, offsetof(struct sd_inode_header, block_size_shift), &b, 1),
	       SD_RES_INVALID_PARMS);
	h = memcpy(h, orig, sizeof(*h));
	h->snap_ctime = 1;
	expect("snap_ctime -> 1", header_write(vid, 0, h, sizeof(*h)), SD_RES_INVALID_PARMS);
	h = memcpy(h, orig, sizeof(*h));
	h->vdi_id = other;
	expect("vdi_id -> canary's", header_write(vid, 0, h, sizeof(*h)), SD_RES_INVALID_PARMS);
	h = memcpy(h, orig, sizeof(*h));
	h->child_vdi_id[0] = other;
	expect("child_vdi_id[0] -> canary's", header_write(vid, 0, h, sizeof(*h)),
	       SD_RES_INVALID_PARMS);
	h = memcpy(h, orig, sizeof(*h));
	h->vdi_size = 256 * MiB;
	h->nr_copies = 2;
	expect("vdi_size and nr_copies in one write", header_write(vid, 0, h, sizeof(*h)),
	       SD_RES_INVALID_PARMS);
	expect("a map entry (what QEMU writes after a create)",
	       header_write(vid, SD_INODE_HEADER_SIZE + 4, &vid, 4), SD_RES_SUCCESS);
	expect("CREATE_AND_WRITE_OBJ of the inode",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_vdi_oid(vid), 0, 0, orig, 512),
	       SD_RES_INVALID_PARMS);
	ret = obj_read(vid_to_vdi_oid(vid), 0, h, sizeof(*h));
	step("the header after the refused writes: %s",
	     ret == SD_RES_SUCCESS && !memcmp(h, orig, sizeof(*h)) ? "as last accepted"
								   : "CHANGED");
	check(ret == SD_RES_SUCCESS && !memcmp(h, orig, sizeof(*h)), "header changed");

	/*
	 * The attack, on a VDI of its own: object 1 written, a snapshot, the
	 * working VDI's shift rewritten (32: its objects would be 4 GiB, and
	 * 1 << 32 in 32 bits is 1), then a COW create of object 1.
	 */
	if (expect("NEW_VDI attacked",
		   new_vdi("attacked", 64 * MiB, 0, 0, 0, SD_DEFAULT_BLOCK_SIZE_SHIFT, &snap),
		   SD_RES_SUCCESS))
		return 1;
	fill_pattern(base, sizeof(base), 1);
	fill_pattern(data, sizeof(data), 2);
	expect("CREATE_AND_WRITE_OBJ object 1",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(snap, 1), 0, 0, base,
			 sizeof(base)),
	       SD_RES_SUCCESS);
	expect("map entry 1", header_write(snap, SD_INODE_HEADER_SIZE + 4, &snap, 4),
	       SD_RES_SUCCESS);
	ret = new_vdi("attacked", 64 * MiB, snap, 1, 0, SD_DEFAULT_BLOCK_SIZE_SHIFT, &work);
	expect("NEW_VDI snapshot of attacked", ret, SD_RES_SUCCESS);
	/* the last one stays if accepted: the COW create then sizes its buffer by it */
	for (size_t i = 0; i < ARRAY_SIZE(shifts); i++) {
		char label[64];

		b = shifts[i];
		snprintf(label, sizeof(label), "block_size_shift of the working vdi -> %u", b);
		expect(
		    label,
		    header_write(work, offsetof(struct sd_inode_header, block_size_shift), &b, 1),
		    SD_RES_INVALID_PARMS);
	}
	expect("COW CREATE_AND_WRITE_OBJ 64 KiB at 64 KiB of object 1",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF | SD_FLAG_CMD_COW, vid_to_data_oid(work, 1),
			 vid_to_data_oid(snap, 1), 65536, data, sizeof(data)),
	       SD_RES_SUCCESS);
	ret = obj_read(vid_to_data_oid(work, 1), 0, back, sizeof(back));
	step("its first 64 KiB, from the snapshot: %s",
	     ret == SD_RES_SUCCESS && !memcmp(back, base, sizeof(back)) ? "ok" : "differ");
	check(ret == SD_RES_SUCCESS && !memcmp(back, base, sizeof(back)), "COW source lost");
	ret = obj_read(vid_to_data_oid(work, 1), 65536, back, sizeof(back));
	step("the next 64 KiB, the write: %s",
	     ret == SD_RES_SUCCESS && !memcmp(back, data, sizeof(back)) ? "ok" : "differ");
	check(ret == SD_RES_SUCCESS && !memcmp(back, data, sizeof(back)), "COW write lost");
	ret = obj_read(vid_to_data_oid(work, 1), 4 * MiB - 512, back, 512);
	step("its last 512 bytes: %s", ret < 0 ? "no reply" : res_name((uint32_t)ret));
	check(ret == SD_RES_SUCCESS, "a 4 MiB object expected");
	expect("COW CREATE_AND_WRITE_OBJ from another index",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF | SD_FLAG_CMD_COW, vid_to_data_oid(work, 2),
			 vid_to_data_oid(snap, 1), 0, data, 512),
	       SD_RES_INVALID_PARMS);
	expect("COW CREATE_AND_WRITE_OBJ from an inode",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF | SD_FLAG_CMD_COW, vid_to_data_oid(work, 1),
			 vid_to_vdi_oid(snap), 0, data, 512),
	       SD_RES_INVALID_PARMS);
	/* a snapshot's own fields are frozen */
	ret = obj_read(vid_to_vdi_oid(snap), 0, h, sizeof(*h));
	if (ret == SD_RES_SUCCESS) {
		strcpy(h->tag, "other");
		expect("the snapshot's tag -> other", header_write(snap, 0, h, sizeof(*h)),
		       SD_RES_INVALID_PARMS);
	}
	alive("canary");
	alive("victim");
	alive("attacked");
	free(h);
	free(orig);
	return nr_fail ? 1 : 0;
}

/*
 * past-end: data objects past the end of a 1 GiB VDI of 4 MiB objects (256
 * objects: index 255 is the last) are refused, whatever the request.
 */
int scenario_past_end(void)
{
	static char buf[4096];
	uint64_t size;
	uint32_t vid = 0;
	int ret = new_vdi("short", UINT64_C(1) << 30, 0, 0, 0, SD_DEFAULT_BLOCK_SIZE_SHIFT, &vid);

	if (expect("NEW_VDI short, 1 GiB", ret, SD_RES_SUCCESS))
		return 1;
	fill_pattern(buf, sizeof(buf), 3);
	expect("CREATE_AND_WRITE_OBJ index 255 (the last)",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, 255), 0, 0, buf,
			 sizeof(buf)),
	       SD_RES_SUCCESS);
	expect("CREATE_AND_WRITE_OBJ index 256",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, 256), 0, 0, buf,
			 sizeof(buf)),
	       SD_RES_INVALID_PARMS);
	expect("CREATE_AND_WRITE_OBJ index 0xfffff",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, 0xfffff), 0, 0, buf,
			 sizeof(buf)),
	       SD_RES_INVALID_PARMS);
	expect(
	    "WRITE_OBJ index 0xfffff",
	    obj_write(SD_OP_WRITE_OBJ, WF, vid_to_data_oid(vid, 0xfffff), 0, 0, buf, sizeof(buf)),
	    SD_RES_INVALID_PARMS);
	expect("READ_OBJ index 0xfffff", obj_read(vid_to_data_oid(vid, 0xfffff), 0, buf, 512),
	       SD_RES_INVALID_PARMS);
	expect("READ_OBJ index 255", obj_read(vid_to_data_oid(vid, 255), 0, buf, 512),
	       SD_RES_SUCCESS);
	size = UINT64_C(2) << 30;
	expect("vdi_size -> 2 GiB (QEMU's resize)",
	       header_write(vid, offsetof(struct sd_inode_header, vdi_size), &size, 8),
	       SD_RES_SUCCESS);
	expect("CREATE_AND_WRITE_OBJ index 256, inside now",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, 256), 0, 0, buf,
			 sizeof(buf)),
	       SD_RES_SUCCESS);
	expect("CREATE_AND_WRITE_OBJ index 512",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, 512), 0, 0, buf,
			 sizeof(buf)),
	       SD_RES_INVALID_PARMS);
	alive("short");
	return nr_fail ? 1 : 0;
}

/*
 * empty-answers: requests that ask for no answer bytes at all (data_length
 * 0) where an answer usually has some: every one answered, none touches a
 * buffer that does not exist (UBSan reports that in the sanitizer build)
 */
int scenario_empty_answers(void)
{
	static const struct {
		const char *label;
		uint8_t ver, op;
	} cases[] = {
		{ "GET_NODE_LIST", SD_SHEEP_PROTO_VER, SD_OP_GET_NODE_LIST },
		{ "STAT_SHEEP", SD_SHEEP_PROTO_VER, SD_OP_STAT_SHEEP },
		{ "STAT_RECOVERY", SD_SHEEP_PROTO_VER, SD_OP_STAT_RECOVERY },
		{ "STAT_CLUSTER", SD_SHEEP_PROTO_VER, SD_OP_STAT_CLUSTER },
		{ "READ_VDIS", 0, SD_OP_READ_VDIS },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sd_req h;
		char label[64];

		memset(&h, 0, sizeof(h));
		h.proto_ver = cases[i].ver;
		h.opcode = cases[i].op;
		snprintf(label, sizeof(label), "%s with data_length 0", cases[i].label);
		expect(label, run(&h, NULL, NULL, 0), SD_RES_SUCCESS);
	}
	return nr_fail ? 1 : 0;
}

/*
 * create: NEW_VDI $PC_VDI of $PC_SIZE bytes with $PC_SHIFT (object size)
 * and $PC_COPIES (0: the cluster's), as QEMU's `qemu-img create -o
 * object_size=...,redundancy=...` sends it
 */
int scenario_create(void)
{
	const char *name = getenv("PC_VDI"), *size = getenv("PC_SIZE");
	const char *shift = getenv("PC_SHIFT"), *copies = getenv("PC_COPIES");
	uint64_t sz, sh = SD_DEFAULT_BLOCK_SIZE_SHIFT, c = 0;
	uint32_t vid = 0;
	int ret;

	if (!name || !size || sd_parse_uint(size, 1, UINT64_MAX, &sz) ||
	    (shift && sd_parse_uint(shift, 0, 255, &sh)) ||
	    (copies && sd_parse_uint(copies, 0, 255, &c))) {
		fprintf(stderr, "create: set PC_VDI and PC_SIZE (PC_SHIFT, PC_COPIES)\n");
		return 2;
	}
	ret = new_vdi(name, sz, 0, 0, (uint8_t)c, (uint8_t)sh, &vid);
	step("NEW_VDI %s shift %u: %s", name, (unsigned)sh,
	     ret < 0 ? "no reply" : res_name((uint32_t)ret));
	return ret == SD_RES_SUCCESS ? 0 : 1;
}

/* PC_VDI's vid (looked up) and the object index PC_IDX: 0, or 2 (printed) */
static int vdi_and_idx(const char *what, uint32_t *vid, uint64_t *idx)
{
	const char *name = getenv("PC_VDI"), *i = getenv("PC_IDX");

	if (!name || !i || sd_parse_uint(i, 0, MAX_DATA_OBJS - 1, idx)) {
		fprintf(stderr, "%s: set PC_VDI and PC_IDX\n", what);
		return 2;
	}
	if (ctl_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, vid) != SD_RES_SUCCESS) {
		fail("%s: no vdi %s", what, name);
		return 2;
	}
	return 0;
}

static int set_map_entry(uint32_t vid, uint64_t idx, uint32_t entry)
{
	return header_write(vid, SD_INODE_HEADER_SIZE + idx * sizeof(entry), &entry, sizeof(entry));
}

/*
 * discard: what QEMU's discard of a whole object sends (PROTOCOL.md 9.6):
 * a WRITE_OBJ of 4 zero bytes over the object's entry in the VDI's own
 * inode; the data object itself is not touched by the client.
 */
int scenario_discard(void)
{
	uint32_t vid = 0;
	uint64_t idx;

	if (vdi_and_idx("discard", &vid, &idx))
		return 2;
	expect("discard: map entry zeroed", set_map_entry(vid, idx, 0), SD_RES_SUCCESS);
	return nr_fail ? 1 : 0;
}

/*
 * partial-create: what QEMU sends for a write to an object its map shows
 * unallocated (after a discard, say): CREATE_AND_WRITE_OBJ of 4 KiB of 'y'
 * at 1 MiB into the object, then the map entry set to the VDI.
 */
int scenario_partial_create(void)
{
	static char buf[4096];
	uint32_t vid = 0;
	uint64_t idx;

	if (vdi_and_idx("partial-create", &vid, &idx))
		return 2;
	memset(buf, 'y', sizeof(buf));
	expect("CREATE_AND_WRITE 4 KiB at 1 MiB",
	       obj_write(SD_OP_CREATE_AND_WRITE_OBJ, WF, vid_to_data_oid(vid, (uint32_t)idx), 0,
			 MiB, buf, sizeof(buf)),
	       SD_RES_SUCCESS);
	expect("map entry set", set_map_entry(vid, idx, vid), SD_RES_SUCCESS);
	return nr_fail ? 1 : 0;
}
