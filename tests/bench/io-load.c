/*
 * io-load: the I/O patterns of the io-ratios benchmark at any queue depth,
 * against a sheep (the client protocol, as QEMU's sheepdog driver speaks it:
 * many requests in flight on one connection, a create followed by the
 * inode update that points at the new object) or against a raw file.
 *
 *   io-load sheep PORT VDI PATTERN [SIZE]
 *   io-load raw FILE PATTERN [SIZE]
 *
 * Patterns: seqwrite / seqread (4 MiB requests over SIZE bytes, default
 * 512M), write4k / read4k (4 KiB at random 4 KiB-aligned offsets within
 * SIZE, for SECONDS seconds, default 3). Environment: QD requests in flight
 * (default 1); for raw, DSYNC=1 opens the file O_DIRECT|O_DSYNC (the disk's
 * durable write rate), otherwise O_DIRECT. A request to a sheep goes out
 * header and payload in one send, as QEMU's corked send; at QD 1 one
 * thread sends each request and reads its reply, as QEMU's one event loop
 * does (a sender and a receiver thread would add a wake-up of the client's
 * own to every request). Sheep writes are write-through
 * (no cache flag), as QEMU sends them with cache=writethrough; CACHE=1
 * sets the cache flag on every request, as QEMU's default (writeback)
 * does, and the writes need not be durable before their answer.
 * SLOW_MS=N prints each request that took N ms or more to stderr as it
 * ends, "slow START LATENCY_us" with START the wall-clock second it began
 * (as `date +%s.%N`), so a script can say which event it crossed.
 *
 * Prints one line: "PATTERN MB_per_s IOPS REQUESTS p50_us p99_us max_us".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "net.h"
#include "sheepdog_proto.h"
#include "util.h"

#define OBJ (UINT64_C(4) << 20)
#define SMALL 4096
#define MAX_QD 256
#define MAX_SAMPLES (1 << 22)

struct op {
	bool write;
	bool inode_update; /* the follow-up of a create: data_vdi_id[idx] */
	uint32_t len;
	uint64_t off;
};

static struct {
	bool raw;
	int fd;
	int qd;
	const char *host;
	int port;
	uint32_t vid;
	uint8_t copies;
	uint32_t *map; /* data_vdi_id of the VDI */
	uint64_t size;
	bool seq, write;
	bool cache; /* CACHE=1: the cache flag, as QEMU's writeback mode */
	uint32_t len;
	uint64_t deadline_ns;
	uint64_t start_ns;
	uint64_t slow_ns; /* SLOW_MS: report requests this slow, 0 none */
	void *wbuf;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t next_seq;     /* next offset index of a sequential pattern */
	uint64_t rnd;	       /* xorshift state of the random patterns */
	uint64_t nr_done;      /* requests of the pattern completed */
	uint64_t nr_samples;
	uint64_t *lat_ns;
	/* sheep: one request per slot, its id the slot number */
	struct op slot_op[MAX_QD];
	uint64_t slot_t0[MAX_QD];
	bool slot_busy[MAX_QD];
	int nr_busy;
	/* objects created whose inode entry is to be written, and when each began */
	uint32_t followups[MAX_QD];
	uint64_t followup_t0[MAX_QD];
	int nr_followups;
	bool generating_done;
} g;

static void die(const char *what, int err)
{
	fprintf(stderr, "io-load: %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
	exit(2);
}

/* the next op of the pattern, or false when the pattern is done (lock held) */
static bool next_op(struct op *op)
{
	memset(op, 0, sizeof(*op));
	op->write = g.write;
	op->len = g.len;
	if (g.seq) {
		if (g.next_seq * OBJ >= g.size)
			return false;
		op->off = g.next_seq++ * OBJ;
		return true;
	}
	if (sd_now_ns() >= g.deadline_ns)
		return false;
	g.rnd ^= g.rnd << 13, g.rnd ^= g.rnd >> 7, g.rnd ^= g.rnd << 17;
	op->off = (g.rnd % (g.size / SMALL)) * SMALL;
	return true;
}

static void record(uint64_t t0)
{
	uint64_t d = sd_now_ns() - t0;

	g.nr_done++;
	if (g.nr_samples < MAX_SAMPLES)
		g.lat_ns[g.nr_samples++] = d;
	if (g.slow_ns && d >= g.slow_ns) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		fprintf(stderr, "slow %.6f %" PRIu64 "\n",
			(double)ts.tv_sec + ts.tv_nsec / 1e9 - d / 1e9, d / 1000);
	}
}

/* ---- raw file: QD threads doing blocking pread/pwrite ---- */

static void *raw_worker(void *arg)
{
	void *buf;
	struct op op;

	if (posix_memalign(&buf, 4096, OBJ))
		die("out of memory", 0);
	memcpy(buf, g.wbuf, OBJ);
	for (;;) {
		uint64_t t0;
		int ret;

		pthread_mutex_lock(&g.lock);
		bool more = next_op(&op);
		pthread_mutex_unlock(&g.lock);
		if (!more)
			break;
		t0 = sd_now_ns();
		ret = op.write ? sd_pwrite_full(g.fd, buf, op.len, op.off)
			       : sd_pread_full(g.fd, buf, op.len, op.off);
		if (ret)
			die("raw i/o failed", -ret);
		pthread_mutex_lock(&g.lock);
		record(t0);
		pthread_mutex_unlock(&g.lock);
	}
	free(buf);
	return NULL;
}

static void run_raw(void)
{
	pthread_t th[MAX_QD];

	for (int i = 0; i < g.qd; i++)
		if (pthread_create(&th[i], NULL, raw_worker, NULL))
			die("cannot start a thread", 0);
	for (int i = 0; i < g.qd; i++)
		pthread_join(th[i], NULL);
	if (g.write && !getenv("DSYNC"))
		fdatasync(g.fd);
}

/* ---- sheep: a sender and a receiver on one connection ---- */

static void sheep_open(const char *name)
{
	struct sd_req hdr = { 0 };
	struct sd_rsp rsp;
	char names[512] = { 0 };
	struct sd_inode *inode = malloc(sizeof(*inode));
	int fd = sd_connect(g.host, g.port, 3000);

	if (fd < 0 || !inode)
		die("cannot connect", fd < 0 ? -fd : ENOMEM);
	snprintf(names, 256, "%s", name);
	hdr.proto_ver = SD_PROTO_VER;
	hdr.opcode = SD_OP_GET_VDI_INFO;
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = sizeof(names);
	if (sd_exec_req(fd, &hdr, names, sizeof(names), 0, &rsp) || rsp.result)
		die("no such vdi", 0);
	g.vid = rsp.vdi.vdi_id;
	memset(&hdr, 0, sizeof(hdr));
	hdr.proto_ver = SD_PROTO_VER;
	hdr.opcode = SD_OP_READ_OBJ;
	hdr.data_length = SD_INODE_SIZE;
	hdr.obj.oid = vid_to_vdi_oid(g.vid);
	if (sd_exec_req(fd, &hdr, inode, 0, SD_INODE_SIZE, &rsp) || rsp.result)
		die("cannot read the inode", 0);
	close(fd);
	g.copies = inode->nr_copies;
	g.map = malloc(sizeof(inode->data_vdi_id));
	if (!g.map)
		die("out of memory", 0);
	memcpy(g.map, inode->data_vdi_id, sizeof(inode->data_vdi_id));
	free(inode);
	g.fd = sd_connect(g.host, g.port, 3000);
	if (g.fd < 0)
		die("cannot connect", -g.fd);
	sd_set_timeout(g.fd, 60000);
}

static void make_req(const struct op *op, int slot, struct sd_req *hdr)
{
	uint32_t idx = (uint32_t)(op->off / OBJ);

	memset(hdr, 0, sizeof(*hdr));
	hdr->proto_ver = SD_PROTO_VER;
	hdr->id = (uint32_t)slot;
	hdr->obj.copies = g.copies;
	hdr->flags = g.cache ? SD_FLAG_CMD_CACHE : 0;
	if (op->inode_update) {
		hdr->opcode = SD_OP_WRITE_OBJ;
		hdr->flags |= SD_FLAG_CMD_WRITE;
		hdr->data_length = 4;
		hdr->obj.oid = vid_to_vdi_oid(g.vid);
		hdr->obj.offset = SD_INODE_HEADER_SIZE + 4 * idx;
	} else if (op->write) {
		bool create = g.map[idx] != g.vid;
		hdr->opcode = create ? SD_OP_CREATE_AND_WRITE_OBJ : SD_OP_WRITE_OBJ;
		hdr->flags |= SD_FLAG_CMD_WRITE;
		hdr->data_length = op->len;
		hdr->obj.oid = vid_to_data_oid(g.vid, idx);
		hdr->obj.offset = op->off % OBJ;
	} else {
		hdr->opcode = SD_OP_READ_OBJ;
		hdr->data_length = op->len;
		hdr->obj.oid = vid_to_data_oid(g.map[idx] ? g.map[idx] : g.vid, idx);
		hdr->obj.offset = op->off % OBJ;
	}
}

/* a request's header and payload in one send, as QEMU's corked send */
static void send_req(struct sd_req *hdr, bool inode_update)
{
	struct iovec iov[2] = { { hdr, sizeof(*hdr) }, { NULL, 0 } };
	int ret;

	if (hdr->flags & SD_FLAG_CMD_WRITE)
		iov[1] = (struct iovec){ inode_update ? (void *)&g.vid : g.wbuf, hdr->data_length };
	ret = sd_writev_full(g.fd, iov, 2);
	if (ret)
		die("send failed", -ret);
}

/* the reply to a request, its payload read into rbuf and dropped */
static void recv_rsp(struct sd_rsp *rsp, void *rbuf)
{
	if (sd_read_full(g.fd, rsp, sizeof(*rsp)))
		die("the sheep closed the connection", 0);
	if (rsp->data_length > OBJ ||
	    (rsp->data_length && sd_read_full(g.fd, rbuf, rsp->data_length)))
		die("bad reply", 0);
	if (rsp->result) {
		fprintf(stderr, "io-load: %s\n", sd_strerror(rsp->result));
		exit(1);
	}
}

static void *sheep_sender(void *arg)
{
	for (;;) {
		struct op op;
		struct sd_req hdr;
		uint64_t t0 = 0;
		int slot = 0;

		pthread_mutex_lock(&g.lock);
		while (g.nr_busy == g.qd)
			pthread_cond_wait(&g.cond, &g.lock);
		if (g.nr_followups) {
			memset(&op, 0, sizeof(op));
			op.inode_update = true;
			g.nr_followups--;
			op.off = g.followups[g.nr_followups] * OBJ;
			t0 = g.followup_t0[g.nr_followups];
		} else if (g.generating_done || !next_op(&op)) {
			g.generating_done = true;
			/* wait for creates whose follow-ups may still come */
			if (!g.nr_busy) {
				pthread_cond_broadcast(&g.cond);
				pthread_mutex_unlock(&g.lock);
				return NULL;
			}
			pthread_cond_wait(&g.cond, &g.lock);
			pthread_mutex_unlock(&g.lock);
			continue;
		}
		while (g.slot_busy[slot])
			slot++;
		g.slot_busy[slot] = true;
		g.nr_busy++;
		g.slot_op[slot] = op;
		g.slot_t0[slot] = op.inode_update ? t0 : sd_now_ns();
		make_req(&op, slot, &hdr);
		pthread_cond_broadcast(&g.cond); /* the receiver waits for work */
		pthread_mutex_unlock(&g.lock);
		send_req(&hdr, op.inode_update);
	}
}

static void *sheep_receiver(void *arg)
{
	void *rbuf = malloc(OBJ);

	if (!rbuf)
		die("out of memory", 0);
	for (;;) {
		struct sd_rsp rsp;
		struct op *op;
		uint32_t idx;

		/* read only while something is in flight */
		pthread_mutex_lock(&g.lock);
		while (!g.nr_busy && !(g.generating_done && !g.nr_followups))
			pthread_cond_wait(&g.cond, &g.lock);
		bool done = !g.nr_busy;
		pthread_mutex_unlock(&g.lock);
		if (done)
			break;
		recv_rsp(&rsp, rbuf);
		if (rsp.id >= (uint32_t)g.qd)
			die("reply to an unknown request", 0);
		pthread_mutex_lock(&g.lock);
		op = &g.slot_op[rsp.id];
		idx = (uint32_t)(op->off / OBJ);
		if (op->inode_update) {
			record(g.slot_t0[rsp.id]);
		} else if (op->write && g.map[idx] != g.vid) {
			/* created: the inode update follows, and ends this request */
			g.map[idx] = g.vid;
			g.followup_t0[g.nr_followups] = g.slot_t0[rsp.id];
			g.followups[g.nr_followups++] = idx;
		} else {
			record(g.slot_t0[rsp.id]);
		}
		g.slot_busy[rsp.id] = false;
		g.nr_busy--;
		pthread_cond_broadcast(&g.cond);
		pthread_mutex_unlock(&g.lock);
	}
	free(rbuf);
	return NULL;
}

/*
 * Queue depth 1: one thread sends a request and reads its reply, as QEMU's
 * one event loop does (a sender and a receiver thread would add a thread
 * wake-up of the client's own to each request). A create's inode update
 * follows it and ends the request.
 */
static void run_sheep_qd1(void)
{
	void *rbuf = malloc(OBJ);
	struct op op;

	if (!rbuf)
		die("out of memory", 0);
	while (next_op(&op)) {
		uint32_t idx = (uint32_t)(op.off / OBJ);
		uint64_t t0 = sd_now_ns();
		bool create = op.write && g.map[idx] != g.vid;
		struct sd_req hdr;
		struct sd_rsp rsp;

		make_req(&op, 0, &hdr);
		send_req(&hdr, false);
		recv_rsp(&rsp, rbuf);
		if (create) {
			g.map[idx] = g.vid;
			op.inode_update = true;
			make_req(&op, 0, &hdr);
			send_req(&hdr, true);
			recv_rsp(&rsp, rbuf);
		}
		record(t0);
	}
	free(rbuf);
}

static void run_sheep(void)
{
	pthread_t s, r;

	if (g.qd == 1) {
		run_sheep_qd1();
		return;
	}

	if (pthread_create(&s, NULL, sheep_sender, NULL) ||
	    pthread_create(&r, NULL, sheep_receiver, NULL))
		die("cannot start a thread", 0);
	pthread_join(s, NULL);
	pthread_join(r, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *pattern, *qd = getenv("QD"), *secs = getenv("SECONDS");
	const char *slow = getenv("SLOW_MS");
	uint64_t elapsed, p50 = 0, p99 = 0, max = 0;
	int argi;

	g.host = "127.0.0.1";
	g.cache = getenv("CACHE") && strcmp(getenv("CACHE"), "0");
	g.size = UINT64_C(512) << 20;
	g.rnd = 88172645463325252ULL;
	g.qd = qd ? atoi(qd) : 1;
	if (g.qd < 1 || g.qd > MAX_QD)
		die("QD must be 1-256", 0);
	if (slow) {
		if (atoi(slow) < 1)
			die("SLOW_MS must be a number of milliseconds, 1 or more", 0);
		g.slow_ns = (uint64_t)atoi(slow) * 1000000;
	}
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	if (argc >= 5 && !strcmp(argv[1], "sheep")) {
		g.port = atoi(argv[2]);
		sheep_open(argv[3]);
		argi = 4;
	} else if (argc >= 4 && !strcmp(argv[1], "raw")) {
		int flags = O_RDWR | O_CREAT | O_DIRECT | (getenv("DSYNC") ? O_DSYNC : 0);
		g.raw = true;
		g.fd = open(argv[2], flags, 0644);
		if (g.fd < 0)
			die(argv[2], errno);
		argi = 3;
	} else {
		fprintf(stderr, "usage: io-load sheep PORT VDI PATTERN [SIZE] | raw FILE PATTERN [SIZE]\n");
		return 64;
	}
	pattern = argv[argi];
	if (argi + 1 < argc && sd_parse_size(argv[argi + 1], &g.size))
		die("bad size", 0);
	if (!strcmp(pattern, "seqwrite") || !strcmp(pattern, "seqread")) {
		g.seq = true;
		g.len = OBJ;
	} else if (!strcmp(pattern, "write4k") || !strcmp(pattern, "read4k")) {
		g.len = SMALL;
	} else {
		fprintf(stderr, "io-load: unknown pattern %s\n", pattern);
		return 64;
	}
	g.write = pattern[0] == 'w' || pattern[3] == 'w';
	g.lat_ns = malloc(MAX_SAMPLES * sizeof(uint64_t));
	if (!g.lat_ns || posix_memalign(&g.wbuf, 4096, OBJ))
		die("out of memory", 0);
	memset(g.wbuf, 0x5a, OBJ);

	g.start_ns = sd_now_ns();
	g.deadline_ns = g.start_ns + (uint64_t)(secs ? atof(secs) : 3.0) * 1000000000ULL;
	if (g.raw)
		run_raw();
	else
		run_sheep();
	elapsed = sd_now_ns() - g.start_ns;
	if (g.nr_samples) {
		qsort(g.lat_ns, g.nr_samples, sizeof(uint64_t), cmp_u64);
		p50 = g.lat_ns[g.nr_samples / 2];
		p99 = g.lat_ns[g.nr_samples * 99 / 100];
		max = g.lat_ns[g.nr_samples - 1];
	}
	printf("%s %.1f %.0f %" PRIu64 " %.0f %.0f %.0f\n", pattern,
	       (double)g.nr_done * g.len / (1 << 20) / (elapsed / 1e9),
	       (double)g.nr_done / (elapsed / 1e9), g.nr_done, p50 / 1e3, p99 / 1e3, max / 1e3);
	return 0;
}
