/*
 * The access scenarios: what a client that is not a cluster member gets
 * for the internal ops, and that the public VDI protocol stays open to it.
 *
 *   access  (-a ADDR -p PORT, VDI "acl" holding "sheep185" at offset 0):
 *           STAT_CLUSTER, then WRITE_PEER, CREATE_AND_WRITE_PEER,
 *           REMOVE_PEER, GET_OBJ_LIST and FETCH_PEER on the VDI's first
 *           data object with the epoch of $PC_EPOCH (default 1), then a
 *           public GET_VDI_INFO + READ_OBJ; one line per request with its
 *           result.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal_proto.h"
#include "proto-client.h"
#include "util.h"

struct peer_op {
	const char *name;
	uint8_t opcode;
	uint16_t flags;
	uint64_t oid;
	int fd;
};

static void peer_hdr(struct sd_req *h, const struct peer_op *p, uint32_t epoch, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->proto_ver = SD_SHEEP_PROTO_VER;
	h->opcode = p->opcode;
	h->flags = p->flags;
	h->epoch = epoch;
	h->id = p->opcode;
	h->data_length = len;
	h->obj.oid = p->oid;
	h->obj.copies = 2;
}

/*
 * Each op on its own connection, all sent before any answer is read: a
 * refused member op is held up to 2 s by the daemon, so they wait together.
 */
static void peer_ops(struct peer_op *ops, int n, uint32_t epoch, void *buf, uint32_t len)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	for (int i = 0; i < n; i++) {
		ops[i].fd = pc_connect(10000);
		if (ops[i].fd < 0)
			continue;
		peer_hdr(&h, &ops[i], epoch, len);
		ret = send_req(ops[i].fd, &h, buf, (ops[i].flags & SD_FLAG_CMD_WRITE) ? len : 0);
		if (ret)
			transport_fail(ops[i].name, ret);
	}
	for (int i = 0; i < n; i++) {
		if (ops[i].fd < 0)
			continue;
		ret = recv_rsp(ops[i].fd, &rsp, buf, len);
		if (ret)
			transport_fail(ops[i].name, ret);
		else
			step("%s: %s", ops[i].name, res_name(rsp.result));
		close(ops[i].fd);
	}
}

int scenario_access(void)
{
	const char *e = getenv("PC_EPOCH");
	uint32_t epoch = e ? (uint32_t)strtoul(e, NULL, 0) : 1, vid = 0;
	char *buf = calloc(1, OBJ_SIZE);
	uint64_t oid;
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	if (!buf)
		return 1;
	/* an admin op: refused too, so the epoch comes from the test */
	struct peer_op stat = { "STAT_CLUSTER", SD_OP_STAT_CLUSTER, 0, 0, -1 };

	peer_ops(&stat, 1, 0, buf, 4096);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, "acl", NULL, 0, &vid);
	step("GET_VDI_INFO: %s", ret < 0 ? "transport error" : res_name((uint32_t)ret));
	if (ret != SD_RES_SUCCESS) {
		free(buf);
		return 1;
	}
	oid = vid_to_data_oid(vid, 0);
	struct peer_op ops[] = {
		{ "WRITE_PEER", SD_OP_WRITE_PEER, SD_FLAG_CMD_WRITE, oid, -1 },
		{ "CREATE_AND_WRITE_PEER", SD_OP_CREATE_AND_WRITE_PEER, SD_FLAG_CMD_WRITE,
		  vid_to_data_oid(vid, 1), -1 },
		{ "REMOVE_PEER", SD_OP_REMOVE_PEER, 0, oid, -1 },
		{ "GET_OBJ_LIST", SD_OP_GET_OBJ_LIST, 0, 0, -1 },
		{ "FETCH_PEER", SD_OP_FETCH_PEER, 0, oid, -1 },
		{ "FETCH_PEER_NOW", SD_OP_FETCH_PEER_NOW, 0, oid, -1 },
		/* an admin op: req.vdi's base_vdi_id and copies are the oid's low 5 bytes */
		{ "ALTER_COPY", SD_OP_ALTER_COPY, 0, vid | UINT64_C(1) << 32, -1 },
		{ "ALTER_CLUSTER_COPY", SD_OP_ALTER_CLUSTER_COPY, 0, 0, -1 },
	};

	memset(buf, 'X', 4096);
	peer_ops(ops, (int)ARRAY_SIZE(ops), epoch, buf, 4096);
	/* the public protocol answers this client */
	obj_hdr(&h, SD_OP_READ_OBJ, 0, oid, 0, 8, 2, 7);
	memset(buf, 0, 9);
	ret = exec_ctl(&h, NULL, 0, buf, 8, &rsp);
	if (ret) {
		transport_fail("READ_OBJ", ret);
	} else {
		step("READ_OBJ: %s '%.8s'", res_name(rsp.result), buf);
		check(rsp.result == SD_RES_SUCCESS && !memcmp(buf, "sheep185", 8),
		      "the public read did not return the data");
	}
	free(buf);
	return 0;
}
