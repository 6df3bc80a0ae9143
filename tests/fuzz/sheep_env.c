/*
 * The environment of the daemon's code without sheep.c: the globals its
 * main owns, and work queues that run each work at once on the caller's
 * thread (fn, then done), so that a request is answered before the harness
 * returns and nothing runs behind its back. Everything else (request.c,
 * ops.c, group.c, vdi.c, peer.c, gateway.c, the plain store) is the real
 * code, on a private directory with no cluster joined: the node is not
 * formatted and has no peer, as a freshly started sheep.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "internal_proto.h"
#include "cluster/cluster.h"
#include "event.h"
#include "group.h"
#include "join.h"
#include "ordered.h"
#include "peer_io.h"
#include "recovery.h"
#include "request.h"
#include "daemon.h"
#include "ops.h"
#include "ops_exec.h"
#include "vdi.h"
#include "work.h"
#include "store/store.h"

#include "fuzz.h"


struct work_queue {
	const char *name;
};

static struct work_queue queues[8];
static int nr_queues;

int wq_init(void)
{
	return 0;
}

struct work_queue *wq_create(const char *name, int nr_threads)
{
	if (nr_queues == (int)(sizeof(queues) / sizeof(queues[0])))
		return NULL;
	queues[nr_queues].name = name;
	return &queues[nr_queues++];
}

void wq_queue(struct work_queue *q, struct work *w)
{
	w->fn(w);
	w->done(w);
}

void wq_queue_at(struct work_queue *q, struct work *w, uint64_t now)
{
	wq_queue(q, w);
}

void wq_queue_urgent(struct work_queue *q, struct work *w, uint64_t now)
{
	wq_queue(q, w);
}

/* the statistics' view of the queues: names only, nothing ever waits here */
int wq_info_all(struct wq_info *out, int max)
{
	int n = 0;

	for (; n < nr_queues && n < max; n++) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].name = queues[n].name;
	}
	return n;
}

void wq_shutdown_all(void)
{
}

/*
 * Time does not pass here: the daemon's waits (a write that waits for a
 * VDI another node may be creating, the gateway's retries) return at once,
 * so that an input costs its work and not its sleeps. Their loops still
 * run, bounded as they are.
 */
int nanosleep(const struct timespec *req, struct timespec *rem)
{
	return 0;
}

/* daemon.c's, with a reset: an input may ask for a shutdown, the next one is served */
static bool stopping;

bool daemon_stopping(void)
{
	return stopping;
}

void daemon_stop(int status)
{
	stopping = true;
}

int daemon_exit_status(void)
{
	return 0;
}

void daemon_set_stop_handler(void (*fn)(void))
{
}

uint64_t daemon_conn_id(void)
{
	static uint64_t last;

	return ++last;
}

void fuzz_daemon_reset(void)
{
	stopping = false;
}

/*
 * A cluster of this node alone: join delivers the join of a one-member
 * cluster, notify delivers the message back at once (a total order of one
 * sender), as a real driver would from the event loop a moment later.
 */
static struct sd_node self = {
	.nid = { .addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 }, .port = 7000 },
};

static const struct cdrv_events *single_events;

static int single_init(const char *option, const struct cdrv_events *events)
{
	single_events = events;
	return 0;
}

static int single_join(const struct sd_node *myself)
{
	single_events->joined(myself, myself, 1);
	return 0;
}

static int single_leave(void)
{
	return 0;
}

static int single_notify(const void *msg, size_t len)
{
	if (len > CDRV_MAX_MSG_LEN)
		return -EMSGSIZE;
	single_events->notified(&self, msg, len);
	return 0;
}

static const struct cluster_driver single_driver = {
	.name = "fuzz-single",
	.init = single_init,
	.join = single_join,
	.leave = single_leave,
	.notify = single_notify,
};

static char dir[256];

const char *fuzz_sheep_dir(void)
{
	if (!dir[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/sheep-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return ftw->level ? remove(path) : 0;
}

static int rm_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_F ? remove(path) : 0;
}

/* remove the directory at exit: a harness leaves nothing behind */
static void remove_dir(void)
{
	if (dir[0]) {
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		rmdir(dir);
	}
}

void fuzz_store_wipe(void)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/obj", dir);
	nftw(path, rm_file, 16, FTW_PHYS);
}

/* what group.c reads as DIR/config: a cluster formatted with copies 1 */
static void write_config(void)
{
	struct {
		uint64_t magic, ctime;
		uint8_t copies, block_size_shift, pad[6];
	} cfg = { UINT64_C(0x53444f47434f4e46), 1700000000, 1, SD_DEFAULT_BLOCK_SIZE_SHIFT, { 0 } };
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/config", dir);
	f = fopen(path, "wb");
	if (!f || fwrite(&cfg, sizeof(cfg), 1, f) != 1 || fclose(f)) {
		perror(path);
		abort();
	}
}

void fuzz_sheep_setup(bool formatted)
{
	static bool done;

	if (done)
		return;
	done = true;
	const char *dir = fuzz_sheep_dir();

	atexit(remove_dir);
	if (formatted)
		write_config();
	/* the news the layers below send up, registered as sheep.c does */
	group_set_news(&(struct group_news){ .joined = join_start,
					     .epoch_changed = recovery_kick,
					     .node_left = peer_abort_node,
					     .serving = request_join_done });
	group_set_deliver(ordered_deliver);
	/* every level, so that each message is formatted; nothing is kept */
	if (sd_log_init("/dev/null", SDOG_DEBUG, "sheep") || ev_init(64) ||
	    store_init("plain", dir) || group_init(dir) || vdi_init()) {
		fprintf(stderr, "fuzz: cannot set up a daemon in %s\n", dir);
		abort();
	}
	if (ops_exec_init(
		1, &(struct ops_answer){ .done = request_done, .early = request_reply_early })) {
		fprintf(stderr, "fuzz: cannot set up the op queues\n");
		abort();
	}
	ordered_init(ops_queue(OP_ORDERED), get_sd_op, request_ordered_done);
	if (recovery_init()) {
		fprintf(stderr, "fuzz: cannot set up recovery\n");
		abort();
	}
	join_init(ops_queue(OP_CLUSTER), recovery_queue(), request_join_done);
	/* formatted: a member of its own cluster, at epoch 1, its ring itself */
	if (formatted && group_join(&single_driver, NULL, &self)) {
		fprintf(stderr, "fuzz: cannot join a cluster of one\n");
		abort();
	}
}
