/*
 * proto-client: replays what QEMU's sheepdog driver sends (PROTOCOL.md
 * sections 9 and 10) and checks each reply field QEMU reads.
 *
 *   proto-client -p PORT SCENARIO
 *
 * Scenarios: qemu, pipeline, bad-opcode, bad-length, short-body, bad-range, bad-name,
 * garbage, unformatted, lock, release; inode-write, create, past-end, empty-answers,
 * discard, partial-create (proto-inode.c); reply-flood (proto-flood.c). Exit status 0
 * when every check passed.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "proto-client.h"
#include "util.h"

int pc_port = SD_LISTEN_PORT;
const char *pc_addr = "127.0.0.1";
int nr_fail;

void pc_fail(const char *fmt, ...)
{
	va_list ap;

	printf("  FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	nr_fail++;
}

static const char *const res_names[] = {
	[SD_RES_SUCCESS] = "SUCCESS",
	[SD_RES_UNKNOWN] = "UNKNOWN",
	[SD_RES_NO_OBJ] = "NO_OBJ",
	[SD_RES_EIO] = "EIO",
	[SD_RES_VDI_EXIST] = "VDI_EXIST",
	[SD_RES_INVALID_PARMS] = "INVALID_PARMS",
	[SD_RES_SYSTEM_ERROR] = "SYSTEM_ERROR",
	[SD_RES_VDI_LOCKED] = "VDI_LOCKED",
	[SD_RES_NO_VDI] = "NO_VDI",
	[SD_RES_NO_BASE_VDI] = "NO_BASE_VDI",
	[SD_RES_VDI_READ] = "VDI_READ",
	[SD_RES_VDI_WRITE] = "VDI_WRITE",
	[SD_RES_BASE_VDI_READ] = "BASE_VDI_READ",
	[SD_RES_BASE_VDI_WRITE] = "BASE_VDI_WRITE",
	[SD_RES_NO_TAG] = "NO_TAG",
	[SD_RES_STARTUP] = "STARTUP",
	[SD_RES_VDI_NOT_LOCKED] = "VDI_NOT_LOCKED",
	[SD_RES_SHUTDOWN] = "SHUTDOWN",
	[SD_RES_NO_MEM] = "NO_MEM",
	[SD_RES_FULL_VDI] = "FULL_VDI",
	[SD_RES_VER_MISMATCH] = "VER_MISMATCH",
	[SD_RES_NO_SPACE] = "NO_SPACE",
	[SD_RES_WAIT_FOR_FORMAT] = "WAIT_FOR_FORMAT",
	[SD_RES_WAIT_FOR_JOIN] = "WAIT_FOR_JOIN",
	[SD_RES_JOIN_FAILED] = "JOIN_FAILED",
	[SD_RES_HALT] = "HALT",
	[SD_RES_READONLY] = "READONLY",
	[SD_RES_NO_SUPPORT] = "NO_SUPPORT",
	[SD_RES_NOT_FORMATTED] = "NOT_FORMATTED",
	[SD_RES_ALREADY_FORMATTED] = "ALREADY_FORMATTED",
	[SD_RES_INVALID_VERSION] = "INVALID_VERSION",
	[SD_RES_ACCESS_DENIED] = "ACCESS_DENIED",
	[SD_RES_LOCK_NOT_OWNER] = "LOCK_NOT_OWNER",
};

const char *res_name(uint32_t result)
{
	static char buf[16];

	if (result < ARRAY_SIZE(res_names) && res_names[result])
		return res_names[result];
	snprintf(buf, sizeof(buf), "0x%x", result);
	return buf;
}

int pc_connect(int timeout_ms)
{
	int fd = sd_connect(pc_addr, pc_port, 3000);

	if (fd < 0) {
		fail("cannot connect: %s", strerror(-fd));
		return -1;
	}
	sd_set_timeout(fd, timeout_ms);
	return fd;
}

int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int send_req(int fd, const struct sd_req *hdr, const void *data, uint32_t wlen)
{
	int ret = send_all(fd, hdr, sizeof(*hdr));

	if (ret == 0 && wlen)
		ret = send_all(fd, data, wlen);
	return ret;
}

int recv_rsp(int fd, struct sd_rsp *rsp, void *buf, uint32_t cap)
{
	int ret = sd_read_full(fd, rsp, sizeof(*rsp));
	uint32_t len, extra;
	char sink[4096];

	if (ret)
		return ret;
	if (rsp->result != SD_RES_SUCCESS && rsp->data_length)
		fail("error reply %s carries %u payload bytes", res_name(rsp->result),
		     rsp->data_length);
	len = min_t(uint32_t, rsp->data_length, cap);
	if (len && (ret = sd_read_full(fd, buf, len)))
		return ret;
	for (extra = rsp->data_length - len; extra;) {
		uint32_t n = min_t(uint32_t, extra, sizeof(sink));

		if ((ret = sd_read_full(fd, sink, n)))
			return ret;
		extra -= n;
	}
	return 0;
}

int exec_req(int fd, const struct sd_req *hdr, const void *wdata, uint32_t wlen, void *rbuf,
	     uint32_t rcap, struct sd_rsp *rsp)
{
	int ret = send_req(fd, hdr, wdata, wlen);

	if (ret == 0)
		ret = recv_rsp(fd, rsp, rbuf, rcap);
	if (ret == 0 && rsp->id != hdr->id)
		fail("reply id %u to a request with id %u", rsp->id, hdr->id);
	return ret;
}

int exec_ctl(const struct sd_req *hdr, const void *wdata, uint32_t wlen, void *rbuf,
	     uint32_t rcap, struct sd_rsp *rsp)
{
	int fd = pc_connect(30000), ret;

	if (fd < 0)
		return -ECONNREFUSED;
	ret = exec_req(fd, hdr, wdata, wlen, rbuf, rcap, rsp);
	close(fd);
	return ret;
}

void vdi_hdr(struct sd_req *h, uint8_t opcode, uint32_t data_length)
{
	memset(h, 0, sizeof(*h));
	/* QEMU sets the version only for these three (PROTOCOL.md 3.1) */
	if (opcode == SD_OP_LOCK_VDI || opcode == SD_OP_GET_VDI_INFO ||
	    opcode == SD_OP_GET_CLUSTER_DEFAULT)
		h->proto_ver = SD_PROTO_VER;
	h->opcode = opcode;
	h->flags = data_length ? SD_FLAG_CMD_WRITE : 0;
	h->data_length = data_length;
}

void obj_hdr(struct sd_req *h, uint8_t opcode, uint16_t flags, uint64_t oid, uint64_t offset,
	     uint32_t len, uint8_t copies, uint32_t id)
{
	memset(h, 0, sizeof(*h));
	h->opcode = opcode;
	h->flags = flags;
	h->id = id;
	h->data_length = len;
	h->obj.oid = oid;
	h->obj.copies = copies;
	h->obj.offset = offset;
}

void transport_fail(const char *what, int ret)
{
	fail("%s: %s", what, ret == -EAGAIN ? "no reply (timeout)" :
			       ret == -ECONNRESET ? "connection closed" : strerror(-ret));
}

int ctl_new_vdi(const char *name, uint64_t size, uint32_t base, uint32_t snapshot,
		uint8_t copies, uint32_t *vid)
{
	char buf[SD_MAX_VDI_LEN] = { 0 };
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	strncpy(buf, name, sizeof(buf) - 1);
	vdi_hdr(&h, SD_OP_NEW_VDI, SD_MAX_VDI_LEN);
	h.vdi.vdi_size = size;
	h.vdi.base_vdi_id = base;
	h.vdi.copies = copies;
	h.vdi.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	h.vdi.snapid = snapshot;
	/*
	 * PC_EC=D:P: every VDI erasure-coded, as QEMU's driver asks for one
	 * (redundancy=D:P): copy_policy (D / 2) << 4 | P and copies D + P
	 */
	if (getenv("PC_EC")) {
		unsigned int d = 0, p = 0;

		if (sscanf(getenv("PC_EC"), "%u:%u", &d, &p) == 2) {
			h.vdi.copy_policy = (uint8_t)(((d / 2) << 4) | p);
			h.vdi.copies = (uint8_t)(d + p);
		}
	}
	ret = exec_ctl(&h, buf, sizeof(buf), NULL, 0, &rsp);
	if (ret) {
		transport_fail("NEW_VDI", ret);
		return -1;
	}
	check(rsp.data_length == 0, "NEW_VDI reply has %u payload bytes", rsp.data_length);
	*vid = rsp.vdi.vdi_id;
	return (int)rsp.result;
}

int ctl_lookup(uint8_t opcode, const char *name, const char *tag, uint32_t snapid,
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
	h.vdi.type = SD_LOCK_TYPE_NORMAL;
	ret = exec_ctl(&h, buf, sizeof(buf), NULL, 0, &rsp);
	if (ret) {
		transport_fail(opcode == SD_OP_LOCK_VDI ? "LOCK_VDI" : "GET_VDI_INFO", ret);
		return -1;
	}
	check(rsp.data_length == 0, "lookup reply has %u payload bytes", rsp.data_length);
	*vid = rsp.vdi.vdi_id;
	return (int)rsp.result;
}

int ctl_release(const char *name, uint32_t vid)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	/* strlen + 1 bytes, not padded (PROTOCOL.md 9.8) */
	vdi_hdr(&h, SD_OP_RELEASE_VDI, (uint32_t)strlen(name) + 1);
	h.vdi.base_vdi_id = vid;
	ret = exec_ctl(&h, name, (uint32_t)strlen(name) + 1, NULL, 0, &rsp);
	if (ret) {
		transport_fail("RELEASE_VDI", ret);
		return -1;
	}
	return (int)rsp.result;
}

int ctl_del(const char *name, const char *tag, uint32_t snapid, uint32_t base)
{
	char buf[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN] = { 0 };
	uint32_t len = tag ? sizeof(buf) : SD_MAX_VDI_LEN;
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	strncpy(buf, name, SD_MAX_VDI_LEN - 1);
	if (tag)
		strncpy(buf + SD_MAX_VDI_LEN, tag, SD_MAX_VDI_TAG_LEN - 1);
	vdi_hdr(&h, SD_OP_DEL_VDI, len);
	h.vdi.snapid = snapid;
	h.vdi.base_vdi_id = base;
	ret = exec_ctl(&h, buf, len, NULL, 0, &rsp);
	if (ret) {
		transport_fail("DEL_VDI", ret);
		return -1;
	}
	return (int)rsp.result;
}

int ctl_read_vdis(uint8_t *bitmap)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	memset(&h, 0, sizeof(h));
	h.opcode = SD_OP_READ_VDIS;
	h.data_length = SD_VDI_BITMAP_SIZE;
	memset(bitmap, 0, SD_VDI_BITMAP_SIZE);
	ret = exec_ctl(&h, NULL, 0, bitmap, SD_VDI_BITMAP_SIZE, &rsp);
	if (ret) {
		transport_fail("READ_VDIS", ret);
		return -1;
	}
	if (rsp.result == SD_RES_SUCCESS)
		check(rsp.data_length == SD_VDI_BITMAP_SIZE, "READ_VDIS returned %u bytes",
		      rsp.data_length);
	return (int)rsp.result;
}

int ctl_cluster_default(uint8_t *shift)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	vdi_hdr(&h, SD_OP_GET_CLUSTER_DEFAULT, 0);
	ret = exec_ctl(&h, NULL, 0, NULL, 0, &rsp);
	if (ret) {
		transport_fail("GET_CLUSTER_DEFAULT", ret);
		return -1;
	}
	check(rsp.data_length == 0, "GET_CLUSTER_DEFAULT reply has %u payload bytes",
	      rsp.data_length);
	*shift = rsp.cluster.block_size_shift;
	return (int)rsp.result;
}

void fill_pattern(void *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		if ((i & 7) == 0) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		p[i] = (unsigned char)(x >> ((i & 7) * 8));
	}
}

/* lock / release: LOCK_VDI or RELEASE_VDI of the VDI named by $PC_VDI */
static int lock_or_release(bool lock)
{
	const char *name = getenv("PC_VDI"), *op = lock ? "LOCK_VDI" : "RELEASE_VDI";
	uint32_t vid = 0;
	int ret;

	if (!name)
		return fprintf(stderr, "%s: set PC_VDI\n", op), 2;
	ret = ctl_lookup(lock ? SD_OP_LOCK_VDI : SD_OP_GET_VDI_INFO, name, NULL, 0, &vid);
	if (!lock && ret == SD_RES_SUCCESS)
		ret = ctl_release(name, vid);
	if (ret < 0)
		return 1;
	printf("%s %s: %s\n", op, name, res_name((uint32_t)ret));
	return 0;
}

static int scenario_lock(void)
{
	return lock_or_release(true);
}

static int scenario_release(void)
{
	return lock_or_release(false);
}

/*
 * lock-hold: as QEMU opens a disk, an I/O connection first, then LOCK_VDI
 * on a control connection that closes; the I/O connection stays open (the
 * lock is bound to it) until SIGTERM or $PC_HOLD seconds (default 120).
 * With $PC_IO set, it also reads the inode through the I/O connection.
 */
static volatile sig_atomic_t hold_stop;

static void hold_signal(int sig)
{
	(void)sig;
	hold_stop = 1;
}

static int scenario_lock_hold(void)
{
	const char *name = getenv("PC_VDI"), *hold = getenv("PC_HOLD");
	int io = pc_connect(10000), ret, secs = hold ? atoi(hold) : 120;
	uint32_t vid = 0;

	if (!name)
		return fprintf(stderr, "lock-hold: set PC_VDI\n"), 2;
	if (io < 0)
		return 1;
	signal(SIGTERM, hold_signal);
	ret = ctl_lookup(SD_OP_LOCK_VDI, name, NULL, 0, &vid);
	if (ret < 0)
		return 1;
	printf("LOCK_VDI %s: %s\n", name, res_name((uint32_t)ret));
	fflush(stdout);
	if (ret == SD_RES_SUCCESS && getenv("PC_IO")) {
		struct sd_req h;
		struct sd_rsp rsp;
		uint8_t buf[512];

		memset(&h, 0, sizeof(h));
		h.opcode = SD_OP_READ_OBJ;
		h.data_length = sizeof(buf);
		h.obj.oid = vid_to_vdi_oid(vid);
		if (sd_write_full(io, &h, sizeof(h)) || sd_read_full(io, &rsp, sizeof(rsp)) ||
		    sd_read_full(io, buf, rsp.data_length))
			return 1;
	}
	for (int i = 0; i < secs * 10 && !hold_stop; i++)
		usleep(100000);
	close(io);
	return 0;
}

/* FLUSH_VDI for vid on fd, as QEMU sends it (id: the request's), and its result printed */
static void flush_vdi(int fd, const char *name, uint32_t vid, uint32_t id)
{
	struct sd_req h;
	struct sd_rsp rsp;
	int ret;

	obj_hdr(&h, SD_OP_FLUSH_VDI, SD_FLAG_CMD_CACHE, vid_to_vdi_oid(vid), 0, 0, 0, id);
	ret = exec_req(fd, &h, NULL, 0, NULL, 0, &rsp);
	if (ret)
		transport_fail("FLUSH_VDI", ret);
	printf("FLUSH_VDI %s: %s\n", name, res_name(rsp.result));
}

/*
 * cached-flush: $PC_NR (default 4) cached 4 KiB creates (SD_FLAG_CMD_CACHE,
 * as QEMU sends them in writeback mode) to the first data objects of
 * $PC_VDI, then FLUSH_VDI for it (PC_FLUSH=0: no flush)
 */
static int scenario_cached_flush(void)
{
	const char *name = getenv("PC_VDI"), *nr_s = getenv("PC_NR"), *fl = getenv("PC_FLUSH");
	uint64_t nr = 4;
	uint32_t vid = 0;
	char buf[4096];
	struct sd_req h;
	struct sd_rsp rsp;
	int fd, ret;

	if (!name || (nr_s && sd_parse_uint(nr_s, 0, 1024, &nr)))
		return fprintf(stderr, "cached-flush: set PC_VDI (PC_NR)\n"), 2;
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, &vid);
	if (ret != SD_RES_SUCCESS)
		return fprintf(stderr, "cached-flush: lookup %s: %d\n", name, ret), 1;
	fd = pc_connect(10000);
	if (fd < 0)
		return 1;
	fill_pattern(buf, sizeof(buf), vid);
	for (uint32_t i = 0; i < nr; i++) {
		obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE,
			vid_to_data_oid(vid, i), 0, sizeof(buf), 0, i);
		ret = exec_req(fd, &h, buf, sizeof(buf), NULL, 0, &rsp);
		if (ret)
			transport_fail("CREATE_AND_WRITE_OBJ", ret);
		if (rsp.result != SD_RES_SUCCESS)
			printf("cached write %u: %s\n", i, res_name(rsp.result));
	}
	printf("%s: %u cached writes\n", name, (unsigned)nr);
	if (!fl || strcmp(fl, "0"))
		flush_vdi(fd, name, vid, (uint32_t)nr);
	close(fd);
	return 0;
}

/*
 * cached-big: per data object i < $PC_NR (default 3) of $PC_VDI (4 MiB
 * objects): a cached create of the whole object, then, as QEMU sends them
 * in writeback mode (SD_FLAG_CMD_CACHE), a cached write of the whole
 * object and one of 1 MiB + 5 bytes at an odd offset (the gateway writes
 * its own copy of these in slices between its sends), then FLUSH_VDI.
 * PC_CHECK=1: only read every object back (through this node) and compare.
 */
#define BIG_OBJ (4U << 20)
#define BIG_OFF 1234567U
#define BIG_LEN ((1U << 20) + 5)
static int scenario_cached_big(void)
{
	const char *name = getenv("PC_VDI"), *nr_s = getenv("PC_NR"), *chk = getenv("PC_CHECK");
	bool check_only = chk && strcmp(chk, "0");
	char *want = malloc(BIG_OBJ), *buf = malloc(BIG_OBJ);
	uint16_t cf = SD_FLAG_CMD_WRITE | SD_FLAG_CMD_CACHE;
	uint64_t nr = 3;
	uint32_t vid = 0;
	struct sd_req h;
	struct sd_rsp rsp;
	int fd, ret;

	if (!name || !want || !buf || (nr_s && sd_parse_uint(nr_s, 1, 64, &nr)))
		return fprintf(stderr, "cached-big: set PC_VDI (PC_NR)\n"), 2;
	ret = ctl_lookup(SD_OP_GET_VDI_INFO, name, NULL, 0, &vid);
	if (ret != SD_RES_SUCCESS)
		return fprintf(stderr, "cached-big: lookup %s: %d\n", name, ret), 1;
	fd = pc_connect(30000);
	if (fd < 0)
		return 1;
	for (uint32_t i = 0; i < nr; i++) {
		uint64_t oid = vid_to_data_oid(vid, i);
		const struct {
			uint8_t op;
			uint32_t off, len, seed;
		} w[] = { { SD_OP_CREATE_AND_WRITE_OBJ, 0, BIG_OBJ, 100 + i },
			  { SD_OP_WRITE_OBJ, 0, BIG_OBJ, 200 + i },
			  { SD_OP_WRITE_OBJ, BIG_OFF, BIG_LEN, 300 + i } };

		for (size_t k = 0; k < ARRAY_SIZE(w); k++) {
			fill_pattern(buf, w[k].len, w[k].seed);
			memcpy(want + w[k].off, buf, w[k].len);
			if (check_only)
				continue;
			obj_hdr(&h, w[k].op, cf, oid, w[k].off, w[k].len, 0, i);
			ret = exec_req(fd, &h, buf, w[k].len, NULL, 0, &rsp);
			if (ret)
				transport_fail("cached write", ret);
			if (rsp.result != SD_RES_SUCCESS)
				printf("object %u, write %zu: %s\n", i, k, res_name(rsp.result));
		}
		obj_hdr(&h, SD_OP_READ_OBJ, SD_FLAG_CMD_CACHE, oid, 0, BIG_OBJ, 0, i);
		ret = exec_req(fd, &h, NULL, 0, buf, BIG_OBJ, &rsp);
		if (ret)
			transport_fail("READ_OBJ", ret);
		if (rsp.result != SD_RES_SUCCESS || rsp.data_length != BIG_OBJ)
			printf("object %u: read %s, %u bytes\n", i, res_name(rsp.result),
			       rsp.data_length);
		else if (memcmp(want, buf, BIG_OBJ))
			for (uint32_t b = 0; b < BIG_OBJ; b++)
				if (want[b] != buf[b]) {
					printf("object %u: differs at byte %u\n", i, b);
					break;
				}
	}
	printf("%s: %u objects %s\n", name, (unsigned)nr, check_only ? "read back" : "written");
	if (!check_only)
		flush_vdi(fd, name, vid, (uint32_t)nr);
	close(fd);
	free(want);
	free(buf);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} scenarios[] = {
	{ "qemu", scenario_qemu },
	{ "pipeline", scenario_pipeline },
	{ "bad-opcode", scenario_bad_opcode },
	{ "bad-length", scenario_bad_length },
	{ "short-body", scenario_short_body },
	{ "bad-range", scenario_bad_range },
	{ "bad-name", scenario_bad_name },
	{ "garbage", scenario_garbage },
	{ "unformatted", scenario_unformatted },
	{ "lock", scenario_lock },
	{ "lock-hold", scenario_lock_hold },
	{ "release", scenario_release },
	{ "cached-flush", scenario_cached_flush },
	{ "cached-big", scenario_cached_big },
	{ "wedge", scenario_wedge },
	{ "lookup", scenario_lookup },
	{ "set-tag", scenario_set_tag },
	{ "snapshot", scenario_snapshot },
	{ "inode-write", scenario_inode_write },
	{ "create", scenario_create },
	{ "past-end", scenario_past_end },
	{ "empty-answers", scenario_empty_answers },
	{ "discard", scenario_discard },
	{ "partial-create", scenario_partial_create },
	{ "access", scenario_access },
	{ "snap-map", scenario_snap_map },
	{ "ns-order", scenario_ns_order },
	{ "reply-flood", scenario_reply_flood },
};

static void usage(void)
{
	fprintf(stderr, "usage: proto-client [-a ADDR] [-p PORT] SCENARIO\nscenarios:");
	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
		fprintf(stderr, " %s", scenarios[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;
	uint64_t v;

	while ((opt = getopt(argc, argv, "a:p:h")) != -1) {
		switch (opt) {
		case 'a':
			pc_addr = optarg;
			break;
		case 'p':
			if (sd_parse_uint(optarg, 1, 65535, &v))
				usage();
			pc_port = (int)v;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++) {
		if (strcmp(argv[optind], scenarios[i].name))
			continue;
		int ret = scenarios[i].fn();

		if (nr_fail)
			printf("%d check(s) failed\n", nr_fail);
		return ret || nr_fail ? 1 : 0;
	}
	usage();
	return 2;
}
