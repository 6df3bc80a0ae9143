/*
 * The namespace scenarios of proto-client: raw VDI requests that test one
 * node's (or several nodes') answers about names, tags, ids and locks, and
 * inode header writes as QEMU's driver and an attacker send them.
 *
 * Every request waits at most NS_WAIT_MS for its reply: a node that no
 * longer answers shows as "no reply (timeout)" instead of hanging the test.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto-client.h"
#include "util.h"

#define NS_WAIT_MS 8000

/* one request on a new connection, waiting NS_WAIT_MS: the result, or -1 (printed) */
static int ns_exec(const char *what, const struct sd_req *h, const void *wdata, uint32_t wlen,
		   void *rbuf, uint32_t rcap, struct sd_rsp *rsp)
{
	int fd = pc_connect(NS_WAIT_MS), ret;

	if (fd < 0)
		return -1;
	ret = exec_req(fd, h, wdata, wlen, rbuf, rcap, rsp);
	close(fd);
	if (ret) {
		step("%s: %s", what, ret == -EAGAIN ? "no reply (timeout)" : "connection lost");
		return -1;
	}
	return (int)rsp->result;
}

static int ns_new_vdi(const char *name, uint64_t size, uint32_t base, uint32_t snapid,
		      uint32_t *vid)
{
	char buf[SD_MAX_VDI_LEN] = { 0 };
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	strncpy(buf, name, sizeof(buf) - 1);
	vdi_hdr(&h, SD_OP_NEW_VDI, sizeof(buf));
	h.vdi.vdi_size = size;
	h.vdi.base_vdi_id = base;
	h.vdi.snapid = snapid;
	h.vdi.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	ret = ns_exec("NEW_VDI", &h, buf, sizeof(buf), NULL, 0, &rsp);
	if (ret == SD_RES_SUCCESS && vid)
		*vid = rsp.vdi.vdi_id;
	return ret;
}

static int ns_lookup(uint8_t opcode, const char *name, const char *tag, uint32_t snapid,
		     uint32_t *vid)
{
	char buf[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN] = { 0 };
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	strncpy(buf, name, SD_MAX_VDI_LEN - 1);
	if (tag)
		strncpy(buf + SD_MAX_VDI_LEN, tag, SD_MAX_VDI_TAG_LEN - 1);
	vdi_hdr(&h, opcode, sizeof(buf));
	h.vdi.snapid = snapid;
	ret = ns_exec(opcode == SD_OP_LOCK_VDI ? "LOCK_VDI" : "GET_VDI_INFO", &h, buf, sizeof(buf),
		      NULL, 0, &rsp);
	if (ret == SD_RES_SUCCESS && vid)
		*vid = rsp.vdi.vdi_id;
	return ret;
}

/* WRITE_OBJ of len bytes at off of vid's inode */
static int ns_write_inode(uint32_t vid, uint64_t off, const void *buf, uint32_t len)
{
	struct sd_req h;
	struct sd_rsp rsp;

	obj_hdr(&h, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE, vid_to_vdi_oid(vid), off, len, 0, 1);
	return ns_exec("WRITE_OBJ", &h, buf, len, NULL, 0, &rsp);
}

static int ns_read_inode(uint32_t vid, void *buf, uint32_t len)
{
	struct sd_req h;
	struct sd_rsp rsp;

	obj_hdr(&h, SD_OP_READ_OBJ, 0, vid_to_vdi_oid(vid), 0, len, 0, 1);
	return ns_exec("READ_OBJ", &h, NULL, 0, buf, len, &rsp);
}

static const char *res_or_lost(int ret)
{
	return ret < 0 ? "no answer" : res_name((uint32_t)ret);
}

/*
 * wedge: nr_copies 0 written into a VDI's inode header, then a snapshot of
 * it; the node must go on answering every kind of request. The write
 * itself may be refused (a daemon that validates header writes): either
 * way is printed alike, what matters is what follows.
 */
int scenario_wedge(void)
{
	uint8_t zero = 0, *bitmap;
	struct sd_inode_header *h;
	uint32_t vid = 0, snap_vid = 0, other = 0;
	struct sd_req rq;
	struct sd_rsp rsp;
	int ret;

	ret = ns_new_vdi("wedge", 64 * MiB, 0, 0, &vid);
	step("NEW_VDI wedge: %s", res_or_lost(ret));
	if (ret)
		return 1;
	ret = ns_write_inode(vid, offsetof(struct sd_inode_header, nr_copies), &zero, 1);
	step("WRITE_OBJ nr_copies=0 into its header: %s",
	     ret == SD_RES_SUCCESS || ret == SD_RES_INVALID_PARMS ? "answered" : res_or_lost(ret));
	ret = ns_new_vdi("wedge", 64 * MiB, vid, 1, &snap_vid);
	step("NEW_VDI snapshot of wedge: %s", res_or_lost(ret));
	ret = ns_lookup(SD_OP_GET_VDI_INFO, "wedge", NULL, 0, &other);
	step("GET_VDI_INFO wedge: %s", res_or_lost(ret));
	h = malloc(sizeof(*h));
	bitmap = malloc(SD_VDI_BITMAP_SIZE);
	if (!h || !bitmap)
		return 1;
	ret = ns_read_inode(other, h, sizeof(*h));
	step("READ_OBJ of its inode: %s", res_or_lost(ret));
	if (ret == SD_RES_SUCCESS)
		step("its copies: %s", h->nr_copies >= 1 ? "1 or more" : "0");
	ret = ns_write_inode(other, offsetof(struct sd_inode_header, vm_clock_nsec), &zero, 1);
	step("WRITE_OBJ of its inode: %s", res_or_lost(ret));
	ret = ns_new_vdi("after", 64 * MiB, 0, 0, &other);
	step("NEW_VDI after: %s", res_or_lost(ret));
	memset(&rq, 0, sizeof(rq));
	rq.opcode = SD_OP_READ_VDIS;
	rq.data_length = SD_VDI_BITMAP_SIZE;
	ret = ns_exec("READ_VDIS", &rq, NULL, 0, bitmap, SD_VDI_BITMAP_SIZE, &rsp);
	step("READ_VDIS: %s", res_or_lost(ret));
	free(h);
	free(bitmap);
	return 0;
}

/* $name, or a usage error (2) */
static const char *need_env(const char *name, const char *scenario)
{
	const char *v = getenv(name);

	if (!v)
		fprintf(stderr, "%s: set %s\n", scenario, name);
	return v;
}

/*
 * lookup: GET_VDI_INFO of $PC_VDI, by $PC_TAG or $PC_SNAPID when set, as
 * QEMU's driver opens `sheepdog:NAME#TAG`; prints the result and the vid.
 */
int scenario_lookup(void)
{
	const char *name = need_env("PC_VDI", "lookup"), *tag = getenv("PC_TAG");
	const char *snap = getenv("PC_SNAPID");
	uint32_t vid = 0;
	int ret;

	if (!name)
		return 2;
	ret = ns_lookup(SD_OP_GET_VDI_INFO, name, tag, snap ? (uint32_t)atoi(snap) : 0, &vid);
	if (ret < 0)
		return 1;
	if (ret == SD_RES_SUCCESS)
		step("GET_VDI_INFO %s%s%s: SUCCESS vid %06x", name, tag ? " tag " : "",
		     tag ? tag : "", vid);
	else
		step("GET_VDI_INFO %s%s%s: %s", name, tag ? " tag " : "", tag ? tag : "",
		     res_name((uint32_t)ret));
	return 0;
}

/* the vid of the working VDI $PC_VDI, its header read into h: 0, or 1 (printed) */
static int working_vdi(const char *name, uint32_t *vid, struct sd_inode_header *h)
{
	int ret = ns_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, vid);

	if (ret == SD_RES_SUCCESS)
		ret = ns_read_inode(*vid, h, sizeof(*h));
	if (ret == SD_RES_SUCCESS)
		return 0;
	step("working vdi %s: %s", name, res_or_lost(ret));
	return 1;
}

/* set-tag: write $PC_TAG into the tag field of the working VDI $PC_VDI's header */
int scenario_set_tag(void)
{
	const char *name = need_env("PC_VDI", "set-tag"), *tag = need_env("PC_TAG", "set-tag");
	char field[SD_MAX_VDI_TAG_LEN] = { 0 };
	struct sd_inode_header h;
	uint32_t vid;
	int ret;

	if (!name || !tag)
		return 2;
	if (working_vdi(name, &vid, &h))
		return 1;
	strncpy(field, tag, sizeof(field) - 1);
	ret = ns_write_inode(vid, offsetof(struct sd_inode_header, tag), field, sizeof(field));
	step("WRITE_OBJ tag %s into the header of %s: %s", tag, name, res_or_lost(ret));
	return ret < 0;
}

/* snapshot: NEW_VDI of the working VDI $PC_VDI as a snapshot, as QEMU sends it */
int scenario_snapshot(void)
{
	const char *name = need_env("PC_VDI", "snapshot");
	struct sd_inode_header h;
	uint32_t vid, snap_vid = 0;
	int ret;

	if (!name)
		return 2;
	if (working_vdi(name, &vid, &h))
		return 1;
	ret = ns_new_vdi(name, h.vdi_size, vid, 1, &snap_vid);
	step("NEW_VDI snapshot of %s: %s", name, res_or_lost(ret));
	return ret < 0;
}
