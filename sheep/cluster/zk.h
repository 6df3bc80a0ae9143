/*
 * What the zookeeper driver's files share: zookeeper.c (the driver's
 * callbacks, on the main thread) over zk_worker.c (the thread that talks to
 * ZooKeeper), both over zk_session.c (the shared state and calls). Private
 * to sheep/cluster/.
 *
 * Threads: the main thread (join, leave, notify, the tick, delivery); the
 * worker (every ZooKeeper call after the join, synchronous); the client
 * library's own two threads (its I/O thread, and its completion thread,
 * which runs zk_watcher() and the completions of the asynchronous sends).
 * State that more than one of them touches is under zk.lock, or atomic
 * where marked; the rest belongs to the thread named beside it.
 */
#ifndef ZK_H
#define ZK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* the client's synchronous calls are declared for the multi-threaded library only */
#define THREADED
#include <zookeeper/zookeeper.h>

#include "list.h"
#include "zk_wire.h"

#define ZK_TICK_MS 200		  /* main's tick, and the worker's poll */
#define ZK_PROGRESS_MS 1000	  /* how often a member publishes how far it delivered */
#define ZK_GC_MS 2000		  /* how often the first member collects the queue */
#define ZK_LEAVE_BACKUP_MS 1000	  /* the others record a leave the first did not */
#define ZK_MAX_READY (64 << 20)	  /* bytes fetched ahead of delivery */
#define ZK_MAX_OUT 4096		  /* messages waiting to be sent */
#define ZK_MAX_RESENDS 20	  /* failed sends of one write before giving up */
#define ZK_BUF_LEN (1024 * 1024) /* the largest znode a server hands out */
#define ZK_DIR_LEN (ZK_MAX_BASE_LEN + 16)
#define ZK_PATH_LEN (ZK_DIR_LEN + 64)

/* an entry fetched for the main thread, or the news of this member's eviction */
struct zk_ready {
	struct list_node node;
	int64_t seq; /* -1: evicted, why in data */
	size_t len;
	uint8_t data[] __attribute__((aligned(8)));
};

/* a write to this member's znode, alone (progress) or with a queue entry (message) */
struct zk_out {
	struct list_node node;
	bool is_submitted;
	bool is_progress;
	int nr_resends;
	int32_t version; /* the znode's version this write expects, when submitted */
	struct zk_member_data mdata;
	zoo_op_t ops[2];
	zoo_op_result_t results[2];
	struct Stat stat;
	char created[ZK_PATH_LEN];
	size_t len;
	uint8_t rec[] __attribute__((aligned(8)));
};

struct zk_shared {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the worker waits on it (CLOCK_MONOTONIC) */
	/* under lock */
	bool is_connected, is_expired;
	bool wake_queue, wake_members, stop;
	bool need_resync;     /* a send failed: find out what was applied */
	bool is_evict_posted; /* an eviction went into ready */
	struct list_head ready; /* struct zk_ready, in sequence order */
	size_t ready_bytes;
	struct list_head out; /* struct zk_out: submitted ones first, in order */
	int nr_out, nr_in_flight;
	int32_t member_version; /* the version of this member's znode before the next write */
	/* atomic */
	uint64_t last_ok_ns;	/* a server last answered */
	uint64_t main_alive_ns; /* the main thread last ticked */
	int64_t delivered_seq;	/* main delivered every entry up to this */
	uintptr_t gen; /* the handle's: events of an older handle are ignored */
	/* set before the worker starts, then read-only */
	zhandle_t *zh;
	int ready_fd; /* eventfd: ready has entries */
	uint64_t self_id;
	struct sd_node self_node;
	unsigned int session_ms; /* negotiated */
	char base_path[ZK_MAX_BASE_LEN], members_path[ZK_DIR_LEN], queue_path[ZK_DIR_LEN],
	    view_path[ZK_DIR_LEN], entry_prefix[ZK_DIR_LEN], self_path[ZK_PATH_LEN];
	int64_t fetched_seq; /* worker: the last entry handed to ready */
};

extern struct zk_shared zk;

/* main thread, after the join: start the worker; 0 or -errno */
int zk_worker_start(void);
/* main thread: stop it and wait for it */
void zk_worker_stop(void);
/* the worker or the completion thread: tell main this member is out (once) */
void zk_post_evicted(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* any thread: a server answered */
void zk_stamp_ok(void);
/* the client's completion thread: session events and watches */
void zk_watcher(zhandle_t *h, int type, int zstate, const char *path, void *ctx);
/* the client's log, into ours */
void zk_log(const char *message);
/*
 * Main thread or worker, synchronous: commit the view list[nr] (read at
 * version) without the members gone[nr_gone], each recorded as a LEAVE,
 * then with joiner (if any) recorded as a JOIN, after the extra ops (the
 * joiner's own znode write, a leaver's delete), in one multi. The ZooKeeper
 * error of the op that failed, or ZOK; *join_seq gets the JOIN's sequence.
 */
int zk_commit_view(const struct zk_member *list, int nr, int32_t version, const uint64_t *gone,
		   int nr_gone, const struct zk_member *joiner, const zoo_op_t *extra, int nr_extra,
		   int64_t *join_seq);
/* the error of the op that failed in a multi of nr ops */
int zk_multi_error(int rc, const zoo_op_result_t *results, int nr);
/* read BASE/view: ZOK and list (SD_MAX_NODES), *nr, *version, or an error */
int zk_read_view(struct zk_member *list, int *nr, int32_t *version);
/* the ids of the member znodes now (at most max): their number, or -1 */
int zk_alive_ids(uint64_t *ids, int max, bool watch);

#endif
