/*
 * Scenarios of proto-client about what a snapshot freezes and about every
 * node answering a namespace question alike.
 *
 * snap-map: a snapshot's data objects and its inode's data map are
 * frozen: writes to them through the sheepdog protocol are refused with
 * READONLY and change nothing, while the working VDI's map stays writable.
 *
 * ns-order: NEW_VDI through this node ($PC_PORT, -p), then at once
 * GET_VDI_INFO and READ_VDIS through node $PC_PORT_B: the second node must
 * find every VDI the first one created.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto-client.h"
#include "proto_util.h"
#include "util.h"

#define SNAP_WAIT_MS 10000

static int snap_exec(const struct sd_req *h, const void *wdata, void *rbuf, uint32_t rcap,
		     struct sd_rsp *rsp)
{
	int fd = pc_connect(SNAP_WAIT_MS), ret;

	if (fd < 0)
		return -1;
	ret = exec_req(fd, h, wdata, (h->flags & SD_FLAG_CMD_WRITE) ? h->data_length : 0, rbuf,
		       rcap, rsp);
	close(fd);
	return ret ? -1 : (int)rsp->result;
}

static int obj_io(uint8_t op, uint64_t oid, uint64_t off, void *buf, uint32_t len)
{
	uint16_t flags = op == SD_OP_READ_OBJ ? 0 : SD_FLAG_CMD_WRITE;
	struct sd_req h;
	struct sd_rsp rsp;

	obj_hdr(&h, op, flags, oid, off, len, 0, 0);
	return snap_exec(&h, op == SD_OP_READ_OBJ ? NULL : buf, op == SD_OP_READ_OBJ ? buf : NULL,
			 op == SD_OP_READ_OBJ ? len : 0, &rsp);
}

static void expect(const char *label, int ret, uint32_t want)
{
	step("%s: %s", label, ret < 0 ? "no reply" : res_name((uint32_t)ret));
	check(ret == (int)want, "expected %s", res_name(want));
}

int scenario_snap_map(void)
{
	uint32_t vid = 0, work = 0, e0 = 0, e1 = 0, val;
	uint64_t map = SD_INODE_HEADER_SIZE;
	char data[4096];
	int ret;

	memset(data, 'd', sizeof(data));
	ret = ctl_new_vdi("sm", 16 * MiB, 0, 0, 1, &vid);
	expect("NEW_VDI sm", ret, SD_RES_SUCCESS);
	if (ret)
		return 1;
	/* as QEMU writes: the data object, then its map entry */
	expect("CREATE_AND_WRITE_OBJ its object 0",
	       obj_io(SD_OP_CREATE_AND_WRITE_OBJ, vid_to_data_oid(vid, 0), 0, data, sizeof(data)),
	       SD_RES_SUCCESS);
	expect("WRITE_OBJ its map entry 0",
	       obj_io(SD_OP_WRITE_OBJ, vid_to_vdi_oid(vid), map, &vid, 4), SD_RES_SUCCESS);
	ret = ctl_new_vdi("sm", 16 * MiB, vid, 1, 1, &work);
	expect("NEW_VDI snapshot of sm (sm's vid is the snapshot now)", ret, SD_RES_SUCCESS);
	if (ret)
		return 1;

	val = vid;
	expect("WRITE_OBJ the snapshot's map entry 1",
	       obj_io(SD_OP_WRITE_OBJ, vid_to_vdi_oid(vid), map + 4, &val, 4), SD_RES_READONLY);
	val = 0;
	expect("WRITE_OBJ the snapshot's map entry 0 (a discard)",
	       obj_io(SD_OP_WRITE_OBJ, vid_to_vdi_oid(vid), map, &val, 4), SD_RES_READONLY);
	expect("WRITE_OBJ the snapshot's object 0",
	       obj_io(SD_OP_WRITE_OBJ, vid_to_data_oid(vid, 0), 0, data, 512), SD_RES_READONLY);
	expect("CREATE_AND_WRITE_OBJ a snapshot's object 1",
	       obj_io(SD_OP_CREATE_AND_WRITE_OBJ, vid_to_data_oid(vid, 1), 0, data, 512),
	       SD_RES_READONLY);
	expect("READ_OBJ the snapshot's map entries",
	       obj_io(SD_OP_READ_OBJ, vid_to_vdi_oid(vid), map, &e0, 4), SD_RES_SUCCESS);
	obj_io(SD_OP_READ_OBJ, vid_to_vdi_oid(vid), map + 4, &e1, 4);
	step("the snapshot's map: entry 0 %s, entry 1 %s", e0 == vid ? "its own object" : "changed",
	     e1 == 0 ? "empty" : "changed");
	check(e0 == vid && e1 == 0, "the snapshot's map changed");

	/* the working VDI's map stays the client's: QEMU allocates there */
	expect("CREATE_AND_WRITE_OBJ the working vdi's object 1",
	       obj_io(SD_OP_CREATE_AND_WRITE_OBJ, vid_to_data_oid(work, 1), 0, data, 512),
	       SD_RES_SUCCESS);
	expect("WRITE_OBJ the working vdi's map entry 1",
	       obj_io(SD_OP_WRITE_OBJ, vid_to_vdi_oid(work), map + 4, &work, 4), SD_RES_SUCCESS);
	return nr_fail ? 1 : 0;
}

#define NR_ORDER 5

int scenario_ns_order(void)
{
	const char *b = getenv("PC_PORT_B");
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	int port_a = pc_port, nr_missed = 0, nr_unset = 0;

	if (!b || !bitmap) {
		fprintf(stderr, "ns-order: set PC_PORT_B\n");
		free(bitmap);
		return 2;
	}
	for (int i = 0; i < NR_ORDER; i++) {
		char name[32];
		uint32_t vid = 0, found = 0;
		int ret;

		snprintf(name, sizeof(name), "order%d", i);
		pc_port = port_a;
		ret = ctl_new_vdi(name, 4 * MiB, 0, 0, 1, &vid);
		if (ret) {
			step("NEW_VDI %s: %s", name,
			     ret < 0 ? "no reply" : res_name((uint32_t)ret));
			fail("NEW_VDI failed");
			break;
		}
		pc_port = atoi(b);
		ret = ctl_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, &found);
		if (ret != SD_RES_SUCCESS || found != vid)
			nr_missed++;
		if (ctl_read_vdis(bitmap) != SD_RES_SUCCESS || !sd_vid_test(bitmap, vid))
			nr_unset++;
	}
	pc_port = port_a;
	step("%d vdis created through node A; node B missed %d in GET_VDI_INFO, %d in READ_VDIS",
	     NR_ORDER, nr_missed, nr_unset);
	check(!nr_missed && !nr_unset, "node B answered otherwise than node A");
	free(bitmap);
	return nr_fail ? 1 : 0;
}
