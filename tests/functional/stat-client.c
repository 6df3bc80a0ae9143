/*
 * stat-client: exact workloads for the statistics tests (125-139).
 *
 *   stat-client -p PORT io VDI NWRITES NREADS
 *	one CREATE_AND_WRITE_OBJ of 4 KiB into the VDI's first data object,
 *	then exactly NWRITES WRITE_OBJ and NREADS READ_OBJ of 4 KiB there
 *   stat-client -p PORT bad
 *	a READ_OBJ of an invalid oid (vid 0) and an unknown opcode (0x7f)
 *   stat-client -p PORT hold OID MS
 *	STAT_HOLD (test builds): an io worker held for MS ms at most
 *   stat-client -p PORT release
 *	STAT_RELEASE (test builds): every held worker goes
 *
 * Prints one line per command with each request's result; exit 0 when
 * every result was the one expected, 1 otherwise, 2 on a transport error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal_proto.h"
#include "net.h"
#include "proto_util.h"
#include "util.h"

#define LEN 4096

static int fd;
static uint32_t next_id = 1;

static uint32_t exec(struct sd_req *hdr, void *buf, uint32_t wlen, uint32_t rlen)
{
	struct sd_rsp rsp;

	hdr->id = next_id++;
	if (!hdr->proto_ver)
		hdr->proto_ver = sd_is_internal_op(hdr->opcode) ? SD_SHEEP_PROTO_VER : SD_PROTO_VER;
	if (sd_exec_req(fd, hdr, buf, wlen, rlen, &rsp)) {
		fprintf(stderr, "stat-client: request 0x%02x failed on the wire\n", hdr->opcode);
		exit(2);
	}
	return rsp.result;
}

static uint32_t lookup(const char *name)
{
	struct sd_req hdr = { 0 };
	struct sd_rsp rsp;
	char names[512] = { 0 };

	snprintf(names, 256, "%s", name);
	hdr.proto_ver = SD_PROTO_VER;
	hdr.opcode = SD_OP_GET_VDI_INFO;
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = sizeof(names);
	hdr.id = next_id++;
	if (sd_exec_req(fd, &hdr, names, sizeof(names), 0, &rsp) || rsp.result) {
		fprintf(stderr, "stat-client: no vdi %s\n", name);
		exit(1);
	}
	return rsp.vdi.vdi_id;
}

static int do_io(const char *vdi, long nw, long nr)
{
	static char buf[LEN];
	uint32_t vid = lookup(vdi);
	struct sd_req hdr = { 0 };
	long ok_w = 0, ok_r = 0;
	uint32_t res;

	memset(buf, 0x5a, sizeof(buf));
	hdr.opcode = SD_OP_CREATE_AND_WRITE_OBJ;
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = LEN;
	hdr.obj.oid = vid_to_data_oid(vid, 0);
	res = exec(&hdr, buf, LEN, 0);
	for (long i = 0; i < nw; i++) {
		memset(&hdr, 0, sizeof(hdr));
		hdr.opcode = SD_OP_WRITE_OBJ;
		hdr.flags = SD_FLAG_CMD_WRITE;
		hdr.data_length = LEN;
		hdr.obj.oid = vid_to_data_oid(vid, 0);
		ok_w += exec(&hdr, buf, LEN, 0) == SD_RES_SUCCESS;
	}
	for (long i = 0; i < nr; i++) {
		memset(&hdr, 0, sizeof(hdr));
		hdr.opcode = SD_OP_READ_OBJ;
		hdr.data_length = LEN;
		hdr.obj.oid = vid_to_data_oid(vid, 0);
		ok_r += exec(&hdr, buf, 0, LEN) == SD_RES_SUCCESS;
	}
	printf("io: create %s, %ld of %ld writes ok, %ld of %ld reads ok\n", sd_strerror(res), ok_w,
	       nw, ok_r, nr);
	return res == SD_RES_SUCCESS && ok_w == nw && ok_r == nr ? 0 : 1;
}

static int do_bad(void)
{
	char buf[LEN];
	struct sd_req hdr = { 0 };
	uint32_t r1, r2;

	hdr.opcode = SD_OP_READ_OBJ;
	hdr.data_length = LEN;
	hdr.obj.oid = 0; /* vid 0: no such object */
	r1 = exec(&hdr, buf, 0, LEN);
	memset(&hdr, 0, sizeof(hdr));
	hdr.opcode = 0x7f;
	r2 = exec(&hdr, buf, 0, 0);
	printf("bad read: %s\nunknown opcode: %s\n", sd_strerror(r1), sd_strerror(r2));
	return r1 != SD_RES_SUCCESS && r2 != SD_RES_SUCCESS ? 0 : 1;
}

static int do_hold(uint64_t oid, uint64_t ms)
{
	struct sd_req hdr = { 0 };
	uint32_t res;

	hdr.opcode = SD_OP_STAT_HOLD;
	hdr.obj.oid = oid;
	hdr.obj.offset = ms;
	res = exec(&hdr, NULL, 0, 0);
	printf("hold: %s\n", sd_strerror(res));
	return res == SD_RES_SUCCESS ? 0 : 1;
}

static int do_release(void)
{
	struct sd_req hdr = { 0 };
	uint32_t res;

	hdr.opcode = SD_OP_STAT_RELEASE;
	res = exec(&hdr, NULL, 0, 0);
	printf("release: %s\n", sd_strerror(res));
	return res == SD_RES_SUCCESS ? 0 : 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: stat-client -p PORT io VDI NWRITES NREADS | bad |"
			" hold OID MS | release\n");
	return 64;
}

int main(int argc, char **argv)
{
	int port = 0;

	if (argc < 4 || strcmp(argv[1], "-p"))
		return usage();
	port = atoi(argv[2]);
	fd = sd_connect("127.0.0.1", port, 3000);
	if (fd < 0) {
		fprintf(stderr, "stat-client: cannot connect to port %d\n", port);
		return 2;
	}
	if (!strcmp(argv[3], "io") && argc == 7)
		return do_io(argv[4], strtol(argv[5], NULL, 10), strtol(argv[6], NULL, 10));
	if (!strcmp(argv[3], "bad") && argc == 4)
		return do_bad();
	if (!strcmp(argv[3], "hold") && argc == 6)
		return do_hold(strtoull(argv[4], NULL, 16), strtoull(argv[5], NULL, 10));
	if (!strcmp(argv[3], "release") && argc == 4)
		return do_release();
	return usage();
}
