/*
 * reply-flood: one I/O connection sends many small writes while it reads
 * none of their replies, then reads them all. The client's receive buffer
 * is small, so the daemon's sends fill the socket: replies sent by the
 * workers themselves (request_reply.c, reply_early), those a worker could send
 * only in part, and those left to the main thread all share one stream.
 * Every reply must come whole and once, with its id, and every write must
 * have landed.
 */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "proto-client.h"

#define FLOOD_NR 30000
#define FLOOD_LEN 8

struct flood {
	int fd;
	uint32_t vid;
	int ret;
	uint32_t nr_sent; /* atomic */
};

static void flood_data(uint32_t i, uint8_t *buf)
{
	for (int k = 0; k < FLOOD_LEN; k++)
		buf[k] = (uint8_t)(i >> (k % 4 * 8)) ^ (uint8_t)k;
}

static void *flood_sender(void *arg)
{
	struct flood *f = arg;
	uint8_t buf[FLOOD_LEN];

	for (uint32_t i = 0; i < FLOOD_NR; i++) {
		struct sd_req h;

		/* each write its own 8 bytes of the object: all of them must land */
		obj_hdr(&h, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE, vid_to_data_oid(f->vid, 0),
			(uint64_t)i * FLOOD_LEN, FLOOD_LEN, 0, i);
		flood_data(i, buf);
		f->ret = send_req(f->fd, &h, buf, FLOOD_LEN);
		if (f->ret)
			break;
		__atomic_store_n(&f->nr_sent, i + 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&f->nr_sent, FLOOD_NR, __ATOMIC_RELAXED);
	return NULL;
}

/* a connection whose receive buffer is small from the start (its window never opens wide) */
static int connect_small(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char port[16];
	int fd, small = 4096;

	snprintf(port, sizeof(port), "%d", pc_port);
	if (getaddrinfo(pc_addr, port, &hints, &res)) {
		fail("cannot resolve %s", pc_addr);
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) ||
			connect(fd, res->ai_addr, res->ai_addrlen))) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		fail("cannot connect with a small receive buffer");
		return -1;
	}
	sd_set_timeout(fd, 60000);
	return fd;
}

int scenario_reply_flood(void)
{
	struct flood f = { .fd = -1 };
	uint8_t *seen = calloc(FLOOD_NR, 1), *back = malloc((size_t)FLOOD_NR * FLOOD_LEN);
	int nr_ok = 0, nr_dup = 0, nr_bad = 0, bad_data = 0, fd = -1;
	struct sd_rsp rsp;
	struct sd_req h;
	pthread_t th;
	uint8_t buf[FLOOD_LEN];

	if (!seen || !back)
		goto out;
	if (!check(ctl_new_vdi("flood", 64 * MiB, 0, 0, 0, &f.vid) == SD_RES_SUCCESS,
		   "NEW_VDI flood"))
		goto out;
	fd = connect_small();
	if (fd < 0)
		goto out;
	/* the object, zeros over the range the writes take */
	memset(back, 0, (size_t)FLOOD_NR * FLOOD_LEN);
	obj_hdr(&h, SD_OP_CREATE_AND_WRITE_OBJ, SD_FLAG_CMD_WRITE, vid_to_data_oid(f.vid, 0), 0,
		FLOOD_NR * FLOOD_LEN, 0, 1);
	if (exec_req(fd, &h, back, FLOOD_NR * FLOOD_LEN, NULL, 0, &rsp) ||
	    !check(rsp.result == SD_RES_SUCCESS, "create: %s", res_name(rsp.result)))
		goto out;
	f.fd = fd;
	if (pthread_create(&th, NULL, flood_sender, &f)) {
		fail("cannot start the sender");
		goto out;
	}
	/*
	 * Let the replies pile up before reading any: until the sender is
	 * done, or stuck for a second (the daemon stopped reading because its
	 * replies could not go out). Then the daemon's send buffer is full.
	 */
	for (uint32_t last = UINT32_MAX, now;
	     (now = __atomic_load_n(&f.nr_sent, __ATOMIC_RELAXED)) < FLOOD_NR && now != last;
	     last = now)
		sleep(1);
	for (int i = 0; i < FLOOD_NR; i++) {
		int ret = recv_rsp(fd, &rsp, NULL, 0);

		if (ret) {
			transport_fail("reply", ret);
			break;
		}
		if (rsp.id >= FLOOD_NR || rsp.opcode != SD_OP_WRITE_OBJ || rsp.data_length) {
			nr_bad++;
			break; /* the stream lost step: nothing after can be trusted */
		}
		if (seen[rsp.id]++)
			nr_dup++;
		else
			nr_ok += rsp.result == SD_RES_SUCCESS;
	}
	pthread_join(th, NULL);
	check(!f.ret, "sending the writes failed");
	step("%d writes without reading, then every reply: %d SUCCESS, %d duplicate(s), %d "
	     "malformed",
	     FLOOD_NR, nr_ok, nr_dup, nr_bad);
	check(nr_ok == FLOOD_NR && !nr_dup && !nr_bad, "replies lost, repeated or malformed");
	obj_hdr(&h, SD_OP_READ_OBJ, 0, vid_to_data_oid(f.vid, 0), 0, FLOOD_NR * FLOOD_LEN, 0, 2);
	if (!exec_req(fd, &h, NULL, 0, back, FLOOD_NR * FLOOD_LEN, &rsp) &&
	    check(rsp.result == SD_RES_SUCCESS, "read back: %s", res_name(rsp.result))) {
		for (uint32_t i = 0; i < FLOOD_NR; i++) {
			flood_data(i, buf);
			bad_data += !!memcmp(back + (size_t)i * FLOOD_LEN, buf, FLOOD_LEN);
		}
		step("read back: %d write(s) missing", bad_data);
		check(!bad_data, "writes missing");
	}
out:
	if (fd >= 0)
		close(fd);
	free(seen);
	free(back);
	return nr_fail ? 1 : 0;
}
