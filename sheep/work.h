/*
 * Work queues: named pools of worker threads. A work's fn runs on a worker;
 * its done runs afterwards on the main thread (woken through an eventfd).
 * The main thread never blocks on disk or on another node.
 */
#ifndef WORK_H
#define WORK_H

#include "list.h"

struct work;
typedef void (*work_fn)(struct work *);

struct work {
	struct list_node node;
	work_fn fn;   /* on a worker thread */
	work_fn done; /* on the main thread */
};

struct work_queue;

/* Call once on the main thread, after ev_init(): 0 or -errno. */
int wq_init(void);
/* A queue of nr_threads threads named "name N". NULL on failure. */
struct work_queue *wq_create(const char *name, int nr_threads);
void wq_queue(struct work_queue *q, struct work *w);
/* Stop and join every queue's threads (pending works are finished first). */
void wq_shutdown_all(void);

#endif
