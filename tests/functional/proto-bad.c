/*
 * The bad-input scenarios of proto-client: each sends something a correct
 * client never sends, prints what came back, and then checks on a new
 * connection that the daemon still serves a good request and that no data
 * was touched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto-client.h"
#include "util.h"

enum outcome { GOT_REPLY, GOT_EOF, GOT_TIMEOUT, GOT_ERROR };

#define WAIT_MS 5000
#define VICTIM_SEED 7

static uint32_t victim_vid;
static char victim_name[64];
static char victim_data[4096];

static enum outcome await(int fd, struct sd_rsp *rsp)
{
	int ret = recv_rsp(fd, rsp, NULL, 0);

	if (ret == 0)
		return GOT_REPLY;
	if (ret == -ECONNRESET)
		return GOT_EOF;
	if (ret == -EAGAIN || ret == -EWOULDBLOCK)
		return GOT_TIMEOUT;
	return GOT_ERROR;
}

static const char *outcome_str(enum outcome o, const struct sd_rsp *rsp)
{
	static char buf[64];

	switch (o) {
	case GOT_REPLY:
		snprintf(buf, sizeof(buf), "reply %s", res_name(rsp->result));
		return buf;
	case GOT_EOF:
		return "connection closed, no reply";
	case GOT_TIMEOUT:
		return "no reply (timeout)";
	default:
		return "connection reset, no reply";
	}
}

/* after an answered request: did the daemon close the connection? */
static bool closed_after(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* does a good request on this connection still get its answer? */
static bool serves(int fd)
{
	struct sd_req h;
	struct sd_rsp rsp;

	vdi_hdr(&h, SD_OP_GET_CLUSTER_DEFAULT, 0);
	return exec_req(fd, &h, NULL, 0, NULL, 0, &rsp) == 0 && rsp.result == SD_RES_SUCCESS;
}

static int raw_exchange(const struct sd_req *h, const void *body, uint32_t body_len,
			struct sd_rsp *rsp, int *fdp)
{
	int fd = pc_connect(WAIT_MS);
	int o;

	if (fd < 0)
		return GOT_ERROR;
	/* a failed send (the daemon closed early) may still leave a reply to read */
	if (send_all(fd, h, sizeof(*h)) == 0 && body_len)
		send_all(fd, body, body_len);
	o = await(fd, rsp);
	if (fdp)
		*fdp = fd;
	else
		close(fd);
	return o;
}

/* one request on a new connection that must be answered with want */
static void expect_reply(const char *label, const struct sd_req *h, const void *body,
			 uint32_t body_len, uint32_t want)
{
	struct sd_rsp rsp;
	int o = raw_exchange(h, body, body_len, &rsp, NULL);

	step("%s: %s", label, outcome_str(o, &rsp));
	check(o == GOT_REPLY && rsp.result == want, "expected reply %s", res_name(want));
}

static void read_victim(const char *label)
{
	char buf[sizeof(victim_data)];
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	if (!victim_vid)
		return;
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, vid_to_data_oid(victim_vid, 0), 0,
		sizeof(buf), 1, 0);
	ret = exec_ctl(&h, NULL, 0, buf, sizeof(buf), &rsp);
	step("%s: %s", label,
	     ret == 0 && rsp.result == SD_RES_SUCCESS && !memcmp(buf, victim_data, sizeof(buf))
		     ? "unchanged"
		     : "CHANGED or unreadable");
	check(ret == 0 && rsp.result == SD_RES_SUCCESS, "READ_OBJ victim: %s",
	      ret ? "transport error" : res_name(rsp.result));
}

/* a good request on a new connection after the abuse */
static void alive(void)
{
	uint8_t shift = 0;
	int ret = ctl_cluster_default(&shift);

	step("daemon still serves a good request: %s",
	     ret == SD_RES_SUCCESS && shift == SD_DEFAULT_BLOCK_SIZE_SHIFT ? "yes" : "no");
	check(ret == SD_RES_SUCCESS, "GET_CLUSTER_DEFAULT: %s",
	      ret < 0 ? "transport error" : res_name(ret));
	read_victim("victim object 0");
}

/* a VDI with one written object, to see that bad requests touch no data */
static bool setup(const char *scenario)
{
	struct sd_req h;
	struct sd_rsp rsp;
	uint32_t vid = 0;
	int ret;

	snprintf(victim_name, sizeof(victim_name), "victim-%s", scenario);
	fill_pattern(victim_data, sizeof(victim_data), VICTIM_SEED);
	ret = ctl_new_vdi(victim_name, 100 * MiB, 0, 0, 0, &vid);
	if (ret != SD_RES_SUCCESS) {
		fail("setup: NEW_VDI %s: %s", victim_name, ret < 0 ? "transport" : res_name(ret));
		return false;
	}
	obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE,
		vid_to_data_oid(vid, 0), 0, sizeof(victim_data), 1, 0);
	ret = exec_ctl(&h, victim_data, sizeof(victim_data), NULL, 0, &rsp);
	if (ret || rsp.result != SD_RES_SUCCESS) {
		fail("setup: CREATE_AND_WRITE_OBJ: %s", ret ? "transport" : res_name(rsp.result));
		return false;
	}
	obj_hdr(&h, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE, vid_to_vdi_oid(vid),
		SD_INODE_HEADER_SIZE, 4, 1, 0);
	ret = exec_ctl(&h, &vid, 4, NULL, 0, &rsp);
	if (ret || rsp.result != SD_RES_SUCCESS) {
		fail("setup: inode map update: %s", ret ? "transport" : res_name(rsp.result));
		return false;
	}
	victim_vid = vid;
	step("setup: VDI %s with object 0 written", victim_name);
	return true;
}

/* ------------------------------------------------------------------ */

int scenario_bad_opcode(void)
{
	static const struct {
		const char *label;
		uint8_t ver, op;
		uint16_t flags;
		uint32_t len;
		uint32_t want;
		bool same_conn; /* the body was consumed: the connection must stay usable */
	} cases[] = {
		{ "unknown opcode 0x05", 0, 0x05, 0, 0, SD_RES_INVALID_PARMS, true },
		{ "unknown opcode 0x00", 0, 0x00, 0, 0, SD_RES_INVALID_PARMS, true },
		{ "unknown opcode 0x7f with a 100-byte payload", 0, 0x7f, SD_FLAG_CMD_WRITE, 100,
		  SD_RES_INVALID_PARMS, true },
		{ "unknown opcode 0x19 (one past GET_CLUSTER_DEFAULT)", 1, 0x19, 0, 0,
		  SD_RES_INVALID_PARMS, true },
		{ "unknown internal opcode 0xee", 0x80, 0xee, 0, 0, SD_RES_INVALID_PARMS, true },
		{ "internal opcode STAT_CLUSTER with version 1", 1, 0x81, 0, 0,
		  SD_RES_INVALID_VERSION, false },
		{ "GET_CLUSTER_DEFAULT with version 2", 2, SD_OP_GET_CLUSTER_DEFAULT, 0, 0,
		  SD_RES_VER_MISMATCH, false },
		{ "READ_VDIS with version 0x80", 0x80, SD_OP_READ_VDIS, 0, SD_VDI_BITMAP_SIZE,
		  SD_RES_VER_MISMATCH, false },
	};
	char body[100];

	memset(body, 0x5a, sizeof(body));
	if (!setup("bad-opcode"))
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sd_req h;
		struct sd_rsp rsp;
		int fd = -1, o;

		memset(&h, 0, sizeof(h));
		h.proto_ver = cases[i].ver;
		h.opcode = cases[i].op;
		h.flags = cases[i].flags;
		h.data_length = cases[i].len;
		o = raw_exchange(&h, body, cases[i].flags & SD_FLAG_CMD_WRITE ? cases[i].len : 0,
				 &rsp, &fd);
		step("%s: %s", cases[i].label, outcome_str(o, &rsp));
		check(o == GOT_REPLY && rsp.result == cases[i].want, "expected reply %s",
		      res_name(cases[i].want));
		if (cases[i].same_conn && o == GOT_REPLY) {
			bool ok = serves(fd);

			step("  same connection serves the next request: %s", ok ? "yes" : "no");
			check(ok, "the connection was dropped after a consumed request");
		}
		close(fd);
	}
	alive();
	return nr_fail ? 1 : 0;
}

int scenario_bad_length(void)
{
	static const struct {
		const char *label;
		uint8_t ver, op;
		uint16_t flags;
		uint32_t len;
	} cases[] = {
		{ "READ_OBJ data_length 16 MiB + 1", 0, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE,
		  (16U << 20) + 1 },
		{ "WRITE_OBJ data_length 0xffffffff (header only)", 0, SD_OP_WRITE_OBJ,
		  SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE, 0xffffffffU },
		{ "CREATE_AND_WRITE_OBJ data_length 0x80000000 (header only)", 0,
		  SD_OP_CREATE_AND_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE, 0x80000000U },
		{ "NEW_VDI data_length 16 MiB + 1 (header only)", 0, SD_OP_NEW_VDI,
		  SD_FLAG_CMD_WRITE, (16U << 20) + 1 },
		{ "READ_VDIS data_length 0xffffffff", 0, SD_OP_READ_VDIS, 0, 0xffffffffU },
		{ "internal STAT_CLUSTER data_length 0xffffffff", 0x80, 0x81, 0, 0xffffffffU },
	};

	if (!setup("bad-length"))
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sd_req h;
		struct sd_rsp rsp;
		int fd = -1, o;

		memset(&h, 0, sizeof(h));
		h.proto_ver = cases[i].ver;
		h.opcode = cases[i].op;
		h.flags = cases[i].flags;
		h.data_length = cases[i].len;
		if (cases[i].op <= SD_OP_WRITE_OBJ) {
			h.obj.oid = vid_to_data_oid(victim_vid, 0);
			h.obj.copies = 1;
		}
		o = raw_exchange(&h, NULL, 0, &rsp, &fd);
		if (o == GOT_REPLY) {
			bool closed = closed_after(fd);

			step("%s: %s, then %s", cases[i].label, outcome_str(o, &rsp),
			     closed ? "connection closed" : "connection left open");
			check(closed, "the daemon keeps reading a stream it cannot frame");
		} else {
			step("%s: %s", cases[i].label, outcome_str(o, &rsp));
		}
		check(o == GOT_REPLY && rsp.result == SD_RES_INVALID_PARMS,
		      "expected reply INVALID_PARMS");
		close(fd);
	}
	alive();
	return nr_fail ? 1 : 0;
}

/* send a request whose body stops short, then EOF: nothing may be applied */
static void short_body(const char *label, const struct sd_req *h, const void *body,
		       uint32_t sent)
{
	struct sd_rsp rsp;
	int fd = pc_connect(WAIT_MS), o;

	if (fd < 0)
		return;
	send_all(fd, h, sizeof(*h));
	if (sent)
		send_all(fd, body, sent);
	shutdown(fd, SHUT_WR);
	o = await(fd, &rsp);
	if (o == GOT_EOF || o == GOT_ERROR || (o == GOT_REPLY && rsp.result != SD_RES_SUCCESS))
		step("%s: refused", label);
	else
		step("%s: %s", label, outcome_str(o, &rsp));
	check(o != GOT_TIMEOUT && !(o == GOT_REPLY && rsp.result == SD_RES_SUCCESS),
	      "a truncated request was %s", o == GOT_TIMEOUT ? "left hanging" : "accepted");
	close(fd);
}

int scenario_short_body(void)
{
	static char big[4 * MiB];
	char junk[4096], name[SD_MAX_VDI_LEN] = "partial-name";
	struct sd_req h;
	struct sd_rsp rsp;
	uint32_t vid;
	int ret;

	if (!setup("short-body"))
		return 1;
	memset(junk, 0xff, sizeof(junk));
	obj_hdr(&h, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE,
		vid_to_data_oid(victim_vid, 0), 0, 4096, 1, 0);
	short_body("WRITE_OBJ announcing 4096 bytes, 100 sent, EOF", &h, junk, 100);
	read_victim("object 0 after the truncated write");

	obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE,
		vid_to_data_oid(victim_vid, 5), 0, 4 * MiB, 1, 0);
	short_body("CREATE_AND_WRITE_OBJ announcing 4 MiB, 1 MiB sent, EOF", &h, big, MiB);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, vid_to_data_oid(victim_vid, 5), 0, 4096,
		1, 0);
	ret = exec_ctl(&h, NULL, 0, junk, sizeof(junk), &rsp);
	step("READ_OBJ object 5: %s", ret ? "transport error" : res_name(rsp.result));
	check(ret == 0 && rsp.result == SD_RES_NO_OBJ, "expected NO_OBJ: object 5 must not exist");

	vdi_hdr(&h, SD_OP_NEW_VDI, SD_MAX_VDI_LEN);
	h.vdi.vdi_size = 1 * MiB;
	h.vdi.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	short_body("NEW_VDI announcing 256 bytes, 20 sent, EOF", &h, name, 20);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, "partial-name", NULL, 0, &vid);
	step("GET_VDI_INFO partial-name: %s", ret < 0 ? "transport error" : res_name(ret));
	check(ret == SD_RES_NO_VDI, "expected NO_VDI");

	short_body("NEW_VDI header without its 256-byte body, EOF", &h, NULL, 0);
	{
		int fd = pc_connect(WAIT_MS);

		if (fd >= 0) {
			send_all(fd, &h, 20);
			shutdown(fd, SHUT_WR);
			step("20-byte header then EOF: %s", await(fd, &rsp) == GOT_TIMEOUT
								    ? "no reply (timeout)"
								    : "closed");
			close(fd);
		}
		fd = pc_connect(WAIT_MS);
		if (fd >= 0) {
			send_all(fd, &h, 47);
			close(fd);
			step("47-byte header then close: sent");
		}
	}

	/* a slow but complete request must work: header and body in pieces */
	{
		char data[4096], back[4096];
		int fd = pc_connect(WAIT_MS);

		fill_pattern(data, sizeof(data), 1234);
		obj_hdr(&h, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE,
			vid_to_data_oid(victim_vid, 0), 8192, sizeof(data), 1, 0);
		if (fd >= 0) {
			send_all(fd, &h, 10);
			usleep(50000);
			send_all(fd, (char *)&h + 10, sizeof(h) - 10);
			for (int i = 0; i < 8; i++) {
				usleep(30000);
				send_all(fd, data + i * 512, 512);
			}
			ret = await(fd, &rsp);
			step("WRITE_OBJ sent in pieces with pauses: %s", outcome_str(ret, &rsp));
			check(ret == GOT_REPLY && rsp.result == SD_RES_SUCCESS, "expected SUCCESS");
			close(fd);
		}
		obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, vid_to_data_oid(victim_vid, 0),
			8192, sizeof(back), 1, 0);
		ret = exec_ctl(&h, NULL, 0, back, sizeof(back), &rsp);
		step("read back: %s", ret == 0 && rsp.result == SD_RES_SUCCESS &&
					      !memcmp(back, data, sizeof(data)) ? "data ok" :
										  "data differs");
		check(ret == 0 && rsp.result == SD_RES_SUCCESS && !memcmp(back, data, sizeof(data)),
		      "slow write not applied");
	}
	alive();
	return nr_fail ? 1 : 0;
}

int scenario_bad_range(void)
{
	static char body[16 * 1024];
	uint64_t obj0, obj1, inode;
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;
	const uint16_t wf = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE;

	if (!setup("bad-range"))
		return 1;
	obj0 = vid_to_data_oid(victim_vid, 0);
	obj1 = vid_to_data_oid(victim_vid, 1);
	inode = vid_to_vdi_oid(victim_vid);
	memset(body, 0xee, sizeof(body));

	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0, 4 * MiB - 512, 4096, 1, 0);
	expect_reply("READ_OBJ 4096 bytes at 4 MiB - 512", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0, 4 * MiB, 1, 1, 0);
	expect_reply("READ_OBJ 1 byte at 4 MiB", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0, 0, 16 * MiB, 1, 0);
	expect_reply("READ_OBJ 16 MiB of a 4 MiB object", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_WRITE_OBJ, wf, obj0, 4 * MiB - 100, 200, 1, 0);
	expect_reply("WRITE_OBJ 200 bytes at 4 MiB - 100", &h, body, 200, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, wf, obj1, 4 * MiB, 512, 1, 0);
	expect_reply("CREATE_AND_WRITE_OBJ 512 bytes at 4 MiB", &h, body, 512,
		     SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj1, 0, 512, 1, 0);
	ret = exec_ctl(&h, NULL, 0, body, 512, &rsp);
	step("READ_OBJ object 1 (must not exist): %s",
	     ret ? "transport error" : res_name(rsp.result));
	check(ret == 0 && rsp.result == SD_RES_NO_OBJ, "expected NO_OBJ");
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, inode, SD_INODE_SIZE - 10, 100, 0, 0);
	expect_reply("READ_OBJ inode 100 bytes at 4198958", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_WRITE_OBJ, wf, inode, SD_INODE_SIZE, 4, 1, 0);
	expect_reply("WRITE_OBJ inode 4 bytes at 4198968", &h, body, 4, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0, UINT64_C(1) << 40, 512, 1, 0);
	expect_reply("READ_OBJ at offset 2^40", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0, UINT64_MAX - 100, 200, 1, 0);
	expect_reply("READ_OBJ at offset 2^64 - 101 (wraps)", &h, NULL, 0,
		     SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_WRITE_OBJ, wf, obj0, UINT64_MAX - 100, 200, 1, 0);
	expect_reply("WRITE_OBJ at offset 2^64 - 101 (wraps)", &h, body, 200,
		     SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, vid_to_data_oid(0, 0), 0, 512, 1, 0);
	expect_reply("READ_OBJ oid of vid 0", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, obj0 | (UINT64_C(1) << 57), 0, 512, 1,
		0);
	expect_reply("READ_OBJ oid with reserved bits", &h, NULL, 0, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_WRITE_OBJ, wf, inode | 3, 0, 4, 1, 0);
	expect_reply("WRITE_OBJ inode oid with an index", &h, body, 4, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_WRITE_OBJ, wf | SD_FLAG_CMD_COW, obj0, 0, 512, 1, 0);
	expect_reply("WRITE_OBJ with the COW flag", &h, body, 512, SD_RES_INVALID_PARMS);
	obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, wf | SD_FLAG_CMD_COW, obj1, 0, 512, 1, 0);
	expect_reply("COW create with cow_oid 0", &h, body, 512, SD_RES_INVALID_PARMS);
	alive();
	return nr_fail ? 1 : 0;
}

static void name_req(const char *label, uint8_t op, const void *payload, uint32_t len,
		     uint32_t want)
{
	struct sd_req h;

	vdi_hdr(&h, op, len);
	h.vdi.vdi_size = 4 * MiB;
	h.vdi.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	expect_reply(label, &h, payload, len, want);
}

static int count_bits(const uint8_t *bitmap)
{
	int n = 0;

	for (uint32_t i = 0; i < SD_VDI_BITMAP_SIZE; i++)
		n += __builtin_popcount(bitmap[i]);
	return n;
}

int scenario_bad_name(void)
{
	char buf[600];
	uint8_t *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	uint32_t vid = 0, vid2 = 0;
	int before, ret;

	if (!setup("bad-name"))
		return 1;
	ctl_read_vdis(bitmap);
	before = count_bits(bitmap);

	memset(buf, 'a', sizeof(buf));
	name_req("NEW_VDI name of 256 bytes without a NUL", SD_OP_NEW_VDI, buf, 256,
		 SD_RES_INVALID_PARMS);
	memset(buf, 'b', 299);
	buf[299] = '\0';
	name_req("NEW_VDI name of 299 bytes + NUL (data_length 300)", SD_OP_NEW_VDI, buf, 300,
		 SD_RES_INVALID_PARMS);
	memset(buf, 0, sizeof(buf));
	name_req("NEW_VDI empty name", SD_OP_NEW_VDI, buf, 256, SD_RES_INVALID_PARMS);
	name_req("NEW_VDI without a payload", SD_OP_NEW_VDI, NULL, 0, SD_RES_INVALID_PARMS);
	memset(buf, 'a', 256);
	name_req("LOCK_VDI name without a NUL", SD_OP_LOCK_VDI, buf, 512, SD_RES_INVALID_PARMS);
	memset(buf, 0, sizeof(buf));
	strcpy(buf, victim_name);
	memset(buf + 256, 'x', 256);
	name_req("LOCK_VDI tag without a NUL", SD_OP_LOCK_VDI, buf, 512, SD_RES_INVALID_PARMS);
	memset(buf, 0, sizeof(buf));
	name_req("GET_VDI_INFO empty name", SD_OP_GET_VDI_INFO, buf, 512, SD_RES_INVALID_PARMS);
	memset(buf, 'd', 256);
	name_req("DEL_VDI name without a NUL", SD_OP_DEL_VDI, buf, 256, SD_RES_INVALID_PARMS);
	name_req("RELEASE_VDI 'victim-bad-name' without its NUL", SD_OP_RELEASE_VDI,
		 victim_name, (uint32_t)strlen(victim_name), SD_RES_INVALID_PARMS);

	/* the longest legal name, and bytes after the NUL that must be ignored */
	memset(buf, 0, sizeof(buf));
	memset(buf, 'c', 255);
	ret = ctl_new_vdi(buf, 4 * MiB, 0, 0, 0, &vid);
	step("NEW_VDI name of 255 bytes + NUL: %s", ret < 0 ? "transport error" : res_name(ret));
	check(ret == SD_RES_SUCCESS, "expected SUCCESS");
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, buf, NULL, 0, &vid2);
	step("GET_VDI_INFO of it: %s, same vid: %s", ret < 0 ? "transport error" : res_name(ret),
	     vid == vid2 ? "yes" : "no");
	check(ret == SD_RES_SUCCESS && vid == vid2, "lookup of the 255-byte name failed");

	memset(buf, 0, sizeof(buf));
	strcpy(buf, "after-nul");
	memset(buf + 10, 'z', 246);
	name_req("NEW_VDI 'after-nul' with junk after the NUL", SD_OP_NEW_VDI, buf, 256,
		 SD_RES_SUCCESS);
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, "after-nul", NULL, 0, &vid2);
	step("GET_VDI_INFO after-nul: %s", ret < 0 ? "transport error" : res_name(ret));
	check(ret == SD_RES_SUCCESS, "expected SUCCESS");

	if (ctl_read_vdis(bitmap) == SD_RES_SUCCESS) {
		int added = count_bits(bitmap) - before;

		step("READ_VDIS: %d new vid(s)", added);
		check(added == 2, "expected exactly the two valid names to get vids");
	}
	free(bitmap);
	alive();
	return nr_fail ? 1 : 0;
}

/* drain whatever comes back until EOF or a short timeout */
static void drain(int fd)
{
	char buf[65536];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			return;
	}
}

int scenario_garbage(void)
{
	static const uint8_t ops[] = {
		SD_OP_CREATE_AND_WRITE_OBJ, SD_OP_READ_OBJ, SD_OP_WRITE_OBJ, SD_OP_NEW_VDI,
		SD_OP_LOCK_VDI, SD_OP_RELEASE_VDI, SD_OP_GET_VDI_INFO, SD_OP_READ_VDIS,
		SD_OP_FLUSH_VDI, SD_OP_DEL_VDI, SD_OP_GET_CLUSTER_DEFAULT, 0x80, 0x81, 0x82, 0x83,
		0xb2,
	};
	static char buf[256 * 1024];
	int nr = 0;

	if (!setup("garbage"))
		return 1;
	/* whole random headers */
	for (int i = 0; i < 20; i++) {
		int fd = pc_connect(1000);

		if (fd < 0)
			break;
		fill_pattern(buf, 48, 1000 + i);
		send_all(fd, buf, 48);
		shutdown(fd, SHUT_WR);
		drain(fd);
		close(fd);
		nr++;
	}
	/* truncated headers: 1..47 bytes, then close */
	for (int len = 1; len < 48; len += 5) {
		int fd = pc_connect(1000);

		if (fd < 0)
			break;
		fill_pattern(buf, (size_t)len, 2000 + len);
		send_all(fd, buf, (size_t)len);
		close(fd);
		nr++;
	}
	/* plausible headers with random fields and a random payload */
	for (int i = 0; i < 40; i++) {
		struct sd_req h;
		uint32_t len;
		int fd = pc_connect(1000);

		if (fd < 0)
			break;
		fill_pattern(&h, sizeof(h), 3000 + i);
		h.opcode = ops[i % ARRAY_SIZE(ops)];
		h.proto_ver = h.opcode >= 0x80 ? 0x80 : (uint8_t)(i & 1);
		len = h.data_length % sizeof(buf);
		h.data_length = len;
		if (i % 3 == 0)
			h.flags |= SD_FLAG_CMD_WRITE;
		if (i % 4 == 0) /* an oid that passes the header check */
			h.obj.oid = vid_to_data_oid(0xabcdef, i);
		fill_pattern(buf, len, 4000 + i);
		send_all(fd, &h, sizeof(h));
		send_all(fd, buf, (h.flags & SD_FLAG_CMD_WRITE) ? len : 0);
		shutdown(fd, SHUT_WR);
		drain(fd);
		close(fd);
		nr++;
	}
	/* a lot of random bytes on one connection */
	for (int i = 0; i < 3; i++) {
		int fd = pc_connect(1000);

		if (fd < 0)
			break;
		fill_pattern(buf, sizeof(buf), 5000 + i);
		send_all(fd, buf, sizeof(buf));
		shutdown(fd, SHUT_WR);
		drain(fd);
		close(fd);
		nr++;
	}
	/* requests whose replies nobody reads: the daemon writes to a closed socket */
	for (int i = 0; i < 3; i++) {
		struct sd_req h[64];
		int fd = pc_connect(1000);

		if (fd < 0)
			break;
		for (int j = 0; j < 64; j++) {
			memset(&h[j], 0, sizeof(h[j]));
			h[j].opcode = SD_OP_READ_VDIS;
			h[j].data_length = SD_VDI_BITMAP_SIZE;
		}
		send_all(fd, h, sizeof(h));
		close(fd);
		nr++;
	}
	step("garbage: %d connections done", nr);
	alive();
	return nr_fail ? 1 : 0;
}

int scenario_unformatted(void)
{
	static char data[4096], names[512] = "test";
	static const struct {
		const char *label;
		uint8_t op;
		uint16_t flags;
		uint32_t len;
		const void *body;
	} cases[] = {
		{ "NEW_VDI", SD_OP_NEW_VDI, SD_FLAG_CMD_WRITE, 256, names },
		{ "LOCK_VDI", SD_OP_LOCK_VDI, SD_FLAG_CMD_WRITE, 512, names },
		{ "GET_VDI_INFO", SD_OP_GET_VDI_INFO, SD_FLAG_CMD_WRITE, 512, names },
		{ "DEL_VDI", SD_OP_DEL_VDI, SD_FLAG_CMD_WRITE, 256, names },
		{ "READ_OBJ", SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, 4096, NULL },
		{ "WRITE_OBJ", SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE, 4096, data },
		{ "CREATE_AND_WRITE_OBJ", SD_OP_CREATE_AND_WRITE_OBJ,
		  SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE, 4096, data },
		{ "FLUSH_VDI", SD_OP_FLUSH_VDI, SD_FLAG_CMD_CACHE, 0, NULL },
	};
	uint8_t shift = 0, *bitmap = malloc(SD_VDI_BITMAP_SIZE);
	int ret;

	ret = ctl_cluster_default(&shift);
	if (ret >= 0) {
		/* QEMU uses the shift of any SUCCESS: 0 would mean 1-byte objects */
		bool safe = ret != SD_RES_SUCCESS || (shift >= 20 && shift <= 31);

		step("GET_CLUSTER_DEFAULT: %s", safe ? "no unusable default" : "unusable shift");
		check(safe, "SUCCESS with block_size_shift %u", shift);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sd_req h;
		struct sd_rsp rsp;
		int fd = -1, o;

		if (cases[i].op <= SD_OP_WRITE_OBJ || cases[i].op == SD_OP_FLUSH_VDI)
			obj_hdr(&h, cases[i].op, cases[i].flags, cases[i].op == SD_OP_FLUSH_VDI ?
				vid_to_vdi_oid(0x7c2b25) : vid_to_data_oid(0x7c2b25, 0), 0,
				cases[i].len, 1, 0);
		else
			vdi_hdr(&h, cases[i].op, cases[i].len);
		h.vdi.block_size_shift = cases[i].op == SD_OP_NEW_VDI ? 22 : h.vdi.block_size_shift;
		if (cases[i].op == SD_OP_NEW_VDI)
			h.vdi.vdi_size = MiB;
		o = raw_exchange(&h, cases[i].body,
				 cases[i].flags & SD_FLAG_CMD_WRITE ? cases[i].len : 0, &rsp, &fd);
		step("%s before format: %s", cases[i].label, outcome_str(o, &rsp));
		check(o == GOT_REPLY && rsp.result == SD_RES_WAIT_FOR_FORMAT,
		      "expected reply WAIT_FOR_FORMAT");
		if (o == GOT_REPLY) {
			bool ok = serves(fd);

			/* GET_CLUSTER_DEFAULT itself may answer WAIT_FOR_FORMAT here */
			(void)ok;
		}
		close(fd);
	}
	ret = ctl_read_vdis(bitmap);
	if (ret >= 0) {
		bool empty = true;

		for (uint32_t i = 0; i < SD_VDI_BITMAP_SIZE && ret == SD_RES_SUCCESS; i++)
			if (bitmap[i])
				empty = false;
		step("READ_VDIS before format: %s",
		     (ret == SD_RES_SUCCESS && empty) || ret == SD_RES_WAIT_FOR_FORMAT ? "no vdis"
										       : res_name(ret));
		check((ret == SD_RES_SUCCESS && empty) || ret == SD_RES_WAIT_FOR_FORMAT,
		      "READ_VDIS: %s", res_name(ret));
	}
	ret = ctl_release("test", 0x7c2b25);
	step("RELEASE_VDI before format: %s", ret < 0 ? "transport error" : res_name(ret));
	check(ret == SD_RES_WAIT_FOR_FORMAT, "expected WAIT_FOR_FORMAT");
	ret = ctl_cluster_default(&shift);
	step("daemon still answers: %s", ret >= 0 ? "yes" : "no");
	free(bitmap);
	return nr_fail ? 1 : 0;
}
