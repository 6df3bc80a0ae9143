/*
 * Work queues: named pools of worker threads. A work's fn runs on a worker;
 * its done runs afterwards on the main thread (woken through an eventfd).
 * The main thread never blocks on disk or on another node.
 */
#ifndef WORK_H
#define WORK_H

#include <stdbool.h>
#include <stdint.h>

#include "list.h"

struct work;
typedef void (*work_fn)(struct work *);

struct work {
	struct list_node node;
	work_fn fn;	    /* on a worker thread */
	work_fn done;	    /* on the main thread */
	uint64_t queued;	    /* stat_clock() when queued */
	int tid;	    /* the worker running fn, once it runs (read with __atomic) */
	bool urgent;	    /* queued by wq_queue_urgent: ahead of the others */
};

struct work_queue;

/* Call once on the main thread, after ev_init(): 0 or -errno. */
int wq_init(void);
/* A queue of nr_threads threads named "name N". NULL on failure. */
struct work_queue *wq_create(const char *name, int nr_threads);
void wq_queue(struct work_queue *q, struct work *w);
/* the same, with the caller's stat_clock() reading of now (it already had one) */
void wq_queue_at(struct work_queue *q, struct work *w, uint64_t now);
/*
 * The same, ahead of every work queued without it (behind the urgent ones
 * already waiting: first come, first served among them). For the work a
 * client waits on, on a queue that background work fills (a write's fetch
 * behind recovery's).
 */
void wq_queue_urgent(struct work_queue *q, struct work *w, uint64_t now);
/* a queue's state, for the statistics */
struct wq_info {
	const char *name;
	int nr_threads;
	int nr_queued;
	int nr_running; /* picked, not yet handed to the main thread */
	uint64_t nr_done;
	uint64_t oldest_queued; /* queued of the oldest waiting work, 0 if none */
};
/* every queue into out (up to max), newest first; how many */
int wq_info_all(struct wq_info *out, int max);
/* no work queued or running, nor finished and waiting for its done */
bool wq_idle(void);
/* Stop and join every queue's threads (pending works are finished first). */
void wq_shutdown_all(void);

#endif
