/*
 * repl-chain: the shortest path a copies=3 durable 4 KiB write can take on
 * one machine, whatever the daemon's design: the floor that io-ratios
 * prints beside sheep's replicated writes.
 *
 *   repl-chain GATEWAY_FILE REPLICA_FILE REPLICA_FILE [SIZE]
 *
 * Four processes, one thread each, blocking sockets on loopback TCP
 * (TCP_NODELAY), nothing between a socket and the disk: a client sends a
 * sheepdog write request (48-byte header and 4 KiB, one send) to a gateway;
 * the gateway forwards it to two replicas, writes its own copy, waits for
 * both replicas' answers and answers the client. Each node writes its copy
 * with pwrite to its file opened O_DIRECT|O_DSYNC at the request's offset,
 * so a write is durable on every node before the client hears of it, as a
 * write-through sheep write is. No event loop, no queue, no thread hand-off,
 * no lookup: each hop is one wake-up of the process that waits for it.
 *
 * The client writes at queue depth 1 at random 4 KiB-aligned offsets within
 * SIZE (default 512M; the files should be written whole first, as a VDI's
 * objects are before its 4 KiB writes) for SECONDS seconds (default 3).
 * NODISK=1 leaves the writes out: the network path alone.
 *
 * Prints one line, as io-load does:
 * "chain4k MB_per_s IOPS REQUESTS p50_us p99_us max_us".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "sheepdog_proto.h"
#include "util.h"

#define BLOCK 4096
#define MAX_SAMPLES (1 << 22)

struct msg {
	struct sd_req hdr;
	char data[BLOCK];
} __attribute__((packed));

static bool nodisk;

static void die(const char *what, int err)
{
	fprintf(stderr, "repl-chain: %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
	exit(1);
}

/* a listening socket on 127.0.0.1, its port in *port */
static int listen_loopback(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		die("listen", errno);
	*port = ntohs(a.sin_port);
	return fd;
}

static int accept_one(int lfd)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		die("accept", errno);
	sd_set_nodelay(fd);
	close(lfd);
	return fd;
}

static int connect_to(int port)
{
	int fd = sd_connect("127.0.0.1", port, 5000);

	if (fd < 0)
		die("connect", -fd);
	sd_set_nodelay(fd);
	return fd;
}

static int open_store(const char *path)
{
	int fd;

	if (nodisk)
		return -1;
	fd = open(path, O_WRONLY | O_DIRECT | O_DSYNC);
	if (fd < 0)
		die(path, errno);
	return fd;
}

/* this node's copy: durable before it returns */
static void store_write(int fd, const struct msg *m, char *block)
{
	if (fd < 0)
		return;
	memcpy(block, m->data, BLOCK);
	if (pwrite(fd, block, BLOCK, (off_t)m->hdr.obj.offset) != BLOCK)
		die("pwrite", errno);
}

static char *aligned_block(void)
{
	void *p;

	if (posix_memalign(&p, BLOCK, BLOCK))
		die("posix_memalign", ENOMEM);
	return p;
}

/* a replica: serves the gateway's connection until it closes */
static void replica(int lfd, const char *path)
{
	int fd = open_store(path), c = accept_one(lfd);
	char *block = aligned_block();
	struct msg m;
	struct sd_rsp rsp = { 0 };

	while (sd_read_full(c, &m, sizeof(m)) == 0) {
		store_write(fd, &m, block);
		rsp.id = m.hdr.id;
		if (sd_write_full(c, &rsp, sizeof(rsp)))
			break;
	}
	_exit(0);
}

/* the gateway: serves the client's connection until it closes */
static void gateway(int lfd, const char *path, const int rport[2])
{
	int fd = open_store(path), c = accept_one(lfd), r[2], i;
	char *block = aligned_block();
	struct msg m;
	struct sd_rsp rsp;

	for (i = 0; i < 2; i++)
		r[i] = connect_to(rport[i]);
	while (sd_read_full(c, &m, sizeof(m)) == 0) {
		for (i = 0; i < 2; i++)
			if (sd_write_full(r[i], &m, sizeof(m)))
				_exit(1);
		store_write(fd, &m, block);
		for (i = 0; i < 2; i++)
			if (sd_read_full(r[i], &rsp, sizeof(rsp)))
				_exit(1);
		if (sd_write_full(c, &rsp, sizeof(rsp)))
			break;
	}
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	uint64_t size = UINT64_C(512) << 20, secs = 3, n = 0, t0, start, elapsed, *lat;
	const char *s;
	int lg, lr[2], pg, pr[2], c, i;
	pid_t kid[3];
	struct msg m = { 0 };
	struct sd_rsp rsp;
	unsigned int seed = 1;

	if (argc < 4 || argc > 5) {
		fprintf(stderr,
			"usage: repl-chain GATEWAY_FILE REPLICA_FILE REPLICA_FILE [SIZE]\n");
		return 64;
	}
	if (argc == 5 && (sd_parse_size(argv[4], &size) || size < BLOCK))
		die("bad size", 0);
	if ((s = getenv("SECONDS")) && sd_parse_uint(s, 1, 3600, &secs))
		die("bad SECONDS", 0);
	nodisk = (s = getenv("NODISK")) && !strcmp(s, "1");
	lat = malloc(MAX_SAMPLES * sizeof(*lat));
	if (!lat)
		die("malloc", ENOMEM);

	lg = listen_loopback(&pg);
	for (i = 0; i < 2; i++)
		lr[i] = listen_loopback(&pr[i]);
	for (i = 0; i < 3; i++) {
		kid[i] = fork();
		if (kid[i] < 0)
			die("fork", errno);
		if (kid[i] == 0 && i < 2)
			replica(lr[i], argv[2 + i]);
		if (kid[i] == 0)
			gateway(lg, argv[1], pr);
	}
	c = connect_to(pg);

	m.hdr.proto_ver = SD_PROTO_VER;
	m.hdr.opcode = SD_OP_WRITE_OBJ;
	m.hdr.flags = SD_FLAG_CMD_WRITE;
	m.hdr.data_length = BLOCK;
	memset(m.data, 0x5a, BLOCK);
	start = sd_now_ns();
	while (n < MAX_SAMPLES && (t0 = sd_now_ns()) - start < secs * 1000000000) {
		m.hdr.id = (uint32_t)n;
		m.hdr.obj.offset = (uint64_t)(rand_r(&seed) % (size / BLOCK)) * BLOCK;
		if (sd_write_full(c, &m, sizeof(m)) || sd_read_full(c, &rsp, sizeof(rsp)))
			die("the chain broke", 0);
		lat[n++] = sd_now_ns() - t0;
	}
	elapsed = sd_now_ns() - start;
	close(c);
	for (i = 0; i < 3; i++) {
		kill(kid[i], SIGKILL);
		waitpid(kid[i], NULL, 0);
	}
	if (!n)
		die("no write finished", 0);
	qsort(lat, n, sizeof(*lat), cmp_u64);
	printf("chain4k %.1f %.0f %" PRIu64 " %.0f %.0f %.0f\n",
	       (double)n * BLOCK / (1 << 20) / (elapsed / 1e9), (double)n / (elapsed / 1e9), n,
	       lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3, lat[n - 1] / 1e3);
	free(lat);
	return 0;
}
