/*
 * io-bench: the I/O patterns of PERF-ANCHORS.md against a sheep (speaking
 * the client protocol as QEMU does) or against a raw file (O_DIRECT), so
 * that a script can print both side by side and their ratio.
 *
 *   io-bench sheep PORT VDI PATTERN [SIZE]
 *   io-bench raw FILE PATTERN [SIZE]
 *
 * Patterns: seqwrite (4 MiB requests, SIZE bytes, default 512M),
 * write4k / read4k (4 KiB at queue depth 1 over the first SIZE bytes, for
 * 3 s), seqread (4 MiB requests). The VDI must exist; write4k/read4k/
 * seqread expect its objects allocated (run seqwrite first). With COUNT in
 * the environment, write4k/read4k issue exactly COUNT requests instead.
 * With ONE_SEND=1 a request's header and payload go in one writev, as
 * QEMU's corked send does: the daemon finds a write whole at once, instead
 * of waking to the header alone now and then (an event loop turn more).
 * Prints one line: "PATTERN MB_per_s IOPS REQUESTS".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>

#include "net.h"
#include "sheepdog_proto.h"
#include "util.h"

#define OBJ (UINT64_C(4) << 20)
#define SMALL 4096
#define TIMED_NS (3ULL * 1000000000ULL)

struct target {
	int fd;		/* raw file, or the I/O connection */
	const char *host;
	int port;
	uint32_t vid;
	uint8_t copies;
	uint32_t *map; /* data_vdi_id of the VDI */
	uint32_t next_id;
	bool raw;
};

/* header and payload in one writev, then the reply as sd_exec_req reads it: 0 or -errno */
static int one_send_req(int fd, struct sd_req *hdr, void *buf, uint32_t wlen, uint32_t rlen,
			struct sd_rsp *rsp)
{
	struct iovec iov[2] = { { hdr, sizeof(*hdr) }, { buf, wlen } };
	int ret = sd_writev_full(fd, iov, 2);
	char sink[4096];
	uint32_t len;

	if (ret)
		return ret;
	ret = sd_read_full(fd, rsp, sizeof(*rsp));
	len = rsp->data_length < rlen ? rsp->data_length : rlen;
	if (!ret && len)
		ret = sd_read_full(fd, buf, len);
	for (uint32_t extra = ret ? 0 : rsp->data_length - len; extra && !ret;) {
		uint32_t m = extra < sizeof(sink) ? extra : (uint32_t)sizeof(sink);

		ret = sd_read_full(fd, sink, m);
		extra -= m;
	}
	return ret;
}

static int sheep_req(struct target *t, struct sd_req *hdr, void *buf, uint32_t wlen,
		     uint32_t rlen)
{
	static int one_send = -1;
	struct sd_rsp rsp;
	int ret;

	if (one_send < 0)
		one_send = getenv("ONE_SEND") && !strcmp(getenv("ONE_SEND"), "1");
	hdr->id = t->next_id++;
	if (one_send && (hdr->flags & SD_FLAG_CMD_WRITE) && wlen)
		ret = one_send_req(t->fd, hdr, buf, wlen, rlen, &rsp);
	else
		ret = sd_exec_req(t->fd, hdr, buf, wlen, rlen, &rsp);
	if (ret) {
		fprintf(stderr, "io-bench: request failed: %s\n", strerror(-ret));
		exit(2);
	}
	if (rsp.result) {
		fprintf(stderr, "io-bench: %s\n", sd_strerror(rsp.result));
		exit(1);
	}
	return 0;
}

static void sheep_open(struct target *t, const char *name)
{
	struct sd_req hdr = { 0 };
	struct sd_rsp rsp;
	char names[512] = { 0 };
	struct sd_inode *inode = malloc(sizeof(*inode));
	int fd;

	snprintf(names, 256, "%s", name);
	fd = sd_connect(t->host, t->port, 3000);
	if (fd < 0 || !inode) {
		fprintf(stderr, "io-bench: cannot connect to port %d\n", t->port);
		exit(2);
	}
	hdr.proto_ver = SD_PROTO_VER;
	hdr.opcode = SD_OP_GET_VDI_INFO;
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = sizeof(names);
	if (sd_exec_req(fd, &hdr, names, sizeof(names), 0, &rsp) || rsp.result) {
		fprintf(stderr, "io-bench: no vdi %s\n", name);
		exit(1);
	}
	t->vid = rsp.vdi.vdi_id;
	memset(&hdr, 0, sizeof(hdr));
	hdr.opcode = SD_OP_READ_OBJ;
	hdr.data_length = SD_INODE_SIZE;
	hdr.obj.oid = vid_to_vdi_oid(t->vid);
	if (sd_exec_req(fd, &hdr, inode, 0, SD_INODE_SIZE, &rsp) || rsp.result) {
		fprintf(stderr, "io-bench: cannot read the inode of %s\n", name);
		exit(1);
	}
	close(fd);
	t->copies = inode->nr_copies;
	t->map = malloc(sizeof(inode->data_vdi_id));
	memcpy(t->map, inode->data_vdi_id, sizeof(inode->data_vdi_id));
	free(inode);
	t->fd = sd_connect(t->host, t->port, 3000);
	if (t->fd < 0)
		exit(2);
}

/* one write inside an object, QEMU-style: create, then the inode update */
static void sheep_write(struct target *t, void *buf, uint32_t len, uint64_t off)
{
	uint32_t idx = (uint32_t)(off / OBJ);
	struct sd_req hdr = { 0 };
	bool create = t->map[idx] != t->vid;

	hdr.opcode = create ? SD_OP_CREATE_AND_WRITE_OBJ : SD_OP_WRITE_OBJ;
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = len;
	hdr.obj.oid = vid_to_data_oid(t->vid, idx);
	hdr.obj.copies = t->copies;
	hdr.obj.offset = off % OBJ;
	sheep_req(t, &hdr, buf, len, 0);
	if (create) {
		t->map[idx] = t->vid;
		memset(&hdr, 0, sizeof(hdr));
		hdr.opcode = SD_OP_WRITE_OBJ;
		hdr.flags = SD_FLAG_CMD_WRITE;
		hdr.data_length = 4;
		hdr.obj.oid = vid_to_vdi_oid(t->vid);
		hdr.obj.copies = t->copies;
		hdr.obj.offset = SD_INODE_HEADER_SIZE + 4 * idx;
		sheep_req(t, &hdr, &t->map[idx], 4, 0);
	}
}

static void sheep_read(struct target *t, void *buf, uint32_t len, uint64_t off)
{
	uint32_t idx = (uint32_t)(off / OBJ);
	struct sd_req hdr = { 0 };

	if (!t->map[idx]) {
		memset(buf, 0, len);
		return;
	}
	hdr.opcode = SD_OP_READ_OBJ;
	hdr.data_length = len;
	hdr.obj.oid = vid_to_data_oid(t->map[idx], idx);
	hdr.obj.copies = t->copies;
	hdr.obj.offset = off % OBJ;
	sheep_req(t, &hdr, buf, len, len);
}

static void do_io(struct target *t, bool write, void *buf, uint32_t len, uint64_t off)
{
	if (!t->raw) {
		if (write)
			sheep_write(t, buf, len, off);
		else
			sheep_read(t, buf, len, off);
		return;
	}
	int ret = write ? sd_pwrite_full(t->fd, buf, len, off) : sd_pread_full(t->fd, buf, len, off);
	if (ret) {
		fprintf(stderr, "io-bench: raw i/o failed: %s\n", strerror(-ret));
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct target t = { .host = "127.0.0.1" };
	const char *pattern;
	uint64_t size = UINT64_C(512) << 20, n = 0, bytes = 0, start, elapsed, rnd = 88172645463325252ULL;
	void *buf;
	int argi;

	if (argc >= 5 && !strcmp(argv[1], "sheep")) {
		t.port = atoi(argv[2]);
		sheep_open(&t, argv[3]);
		argi = 4;
	} else if (argc >= 4 && !strcmp(argv[1], "raw")) {
		t.raw = true;
		t.fd = open(argv[2], O_RDWR | O_CREAT | O_DIRECT, 0644);
		if (t.fd < 0) {
			perror("io-bench: open");
			return 2;
		}
		argi = 3;
	} else {
		fprintf(stderr, "usage: io-bench sheep PORT VDI PATTERN [SIZE] | raw FILE PATTERN [SIZE]\n");
		return 64;
	}
	pattern = argv[argi];
	if (argi + 1 < argc && sd_parse_size(argv[argi + 1], &size)) {
		fprintf(stderr, "io-bench: bad size %s\n", argv[argi + 1]);
		return 64;
	}
	if (posix_memalign(&buf, 4096, OBJ))
		return 2;
	memset(buf, 0x5a, OBJ);

	start = sd_now_ns();
	if (!strcmp(pattern, "seqwrite") || !strcmp(pattern, "seqread")) {
		bool w = pattern[3] == 'w';
		for (uint64_t off = 0; off < size; off += OBJ, n++, bytes += OBJ)
			do_io(&t, w, buf, OBJ, off);
		if (w && t.raw)
			fdatasync(t.fd);
	} else if (!strcmp(pattern, "write4k") || !strcmp(pattern, "read4k")) {
		bool w = pattern[0] == 'w';
		const char *count = getenv("COUNT");
		uint64_t limit = count ? strtoull(count, NULL, 10) : 0;
		do {
			for (int i = 0; i < 64 && (!limit || n < limit); i++, n++, bytes += SMALL) {
				rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
				do_io(&t, w, buf, SMALL, (rnd % (size / SMALL)) * SMALL);
			}
		} while (limit ? n < limit : sd_now_ns() - start < TIMED_NS);
	} else {
		fprintf(stderr, "io-bench: unknown pattern %s\n", pattern);
		return 64;
	}
	elapsed = sd_now_ns() - start;
	printf("%s %.1f %.0f %" PRIu64 "\n", pattern, (double)bytes / (1 << 20) / (elapsed / 1e9),
	       (double)n / (elapsed / 1e9), n);
	return 0;
}
