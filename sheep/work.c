/*
 * Worker thread pools. Each queue has a list of pending works under a mutex
 * and a condition variable; finished works go to one global list that the
 * main thread drains when the eventfd says so.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

#include "config.h"
#include "event.h"
#include "logger.h"
#include "stat.h"
#include "util.h"
#include "work.h"

struct work_queue {
	char name[16];
	int nr_threads;
	pthread_t *threads;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct list_head pending;
	bool stopping;
	/* the statistics: an add each; queued is pending's length, running a difference */
	uint64_t nr_taken; /* under lock */
	uint64_t nr_done;  /* under done_lock */
	struct work_queue *next;
};

static int done_fd = -1;
/* works queued and not yet through done_handler (busy polling waits for none) */
static uint64_t nr_outstanding;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(done_list);
static struct work_queue *all_queues;

static void done_handler(int fd, uint32_t events, void *data)
{
	uint64_t v;
	LIST_HEAD(local);

	(void)!read(fd, &v, sizeof(v));
	pthread_mutex_lock(&done_lock);
	list_splice_tail_init(&done_list, &local);
	pthread_mutex_unlock(&done_lock);

	while (!list_empty(&local)) {
		struct work *w = list_first_entry(&local, struct work, node);
		list_del(&w->node);
		__atomic_sub_fetch(&nr_outstanding, 1, __ATOMIC_RELAXED);
		if (w->done)
			w->done(w);
	}
}

int wq_init(void)
{
	done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (done_fd < 0)
		return -errno;
	return ev_add(done_fd, EPOLLIN, done_handler, NULL);
}

static void *worker_main(void *arg)
{
	struct work_queue *q = arg;
	uint64_t one = 1;
	int tid __unused = (int)syscall(SYS_gettid);

	for (;;) {
		struct work *w;

		pthread_mutex_lock(&q->lock);
		while (list_empty(&q->pending) && !q->stopping)
			pthread_cond_wait(&q->cond, &q->lock);
		if (list_empty(&q->pending)) {
			pthread_mutex_unlock(&q->lock);
			break;
		}
		w = list_first_entry(&q->pending, struct work, node);
		list_del(&w->node);
#ifdef STAT_ENABLED
		q->nr_taken++;
		__atomic_store_n(&w->tid, tid, __ATOMIC_RELAXED);
#endif
		pthread_mutex_unlock(&q->lock);

		w->fn(w);

		pthread_mutex_lock(&done_lock);
		list_add_tail(&w->node, &done_list);
#ifdef STAT_ENABLED
		q->nr_done++;
#endif
		pthread_mutex_unlock(&done_lock);
		(void)!write(done_fd, &one, sizeof(one));
	}
	return NULL;
}

struct work_queue *wq_create(const char *name, int nr_threads)
{
	struct work_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->threads = calloc(nr_threads, sizeof(pthread_t));
	if (!q->threads) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	INIT_LIST_HEAD(&q->pending);
	for (int i = 0; i < nr_threads; i++) {
		char tname[16];
		int ret = pthread_create(&q->threads[i], NULL, worker_main, q);
		if (ret) {
			sd_err("cannot start worker %s %d: %s", name, i, strerror(ret));
			break;
		}
		q->nr_threads++;
		snprintf(tname, sizeof(tname), "%s %d", name, i);
		pthread_setname_np(q->threads[i], tname);
	}
	if (!q->nr_threads) {
		free(q->threads);
		free(q);
		return NULL;
	}
	q->next = all_queues;
	all_queues = q;
	return q;
}

bool wq_idle(void)
{
	return !__atomic_load_n(&nr_outstanding, __ATOMIC_RELAXED);
}

void wq_queue(struct work_queue *q, struct work *w)
{
	wq_queue_at(q, w, stat_clock());
}

static void queue_work(struct work_queue *q, struct work *w, uint64_t now, bool urgent)
{
	struct list_node *before = &q->pending.n;

	w->queued = now;
	w->tid = 0;
	w->urgent = urgent;
	__atomic_add_fetch(&nr_outstanding, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&q->lock);
	/* behind the urgent works already waiting (few: the walk stops at the first other) */
	if (urgent)
		for (before = q->pending.n.next; before != &q->pending.n; before = before->next)
			if (!container_of(before, struct work, node)->urgent)
				break;
	list_insert_between(&w->node, before->prev, before);
	pthread_mutex_unlock(&q->lock);
	/*
	 * Signalled after the unlock: a worker woken under the lock ran at
	 * once on this CPU only to block on the lock that the main thread
	 * still held (two more futex calls and a context switch each way;
	 * the tracer saw wq_queue_at take 65-131 us in 30% of 4 KiB writes).
	 * A worker between its empty-list check and its wait holds the lock,
	 * so the work added above is never missed.
	 */
	pthread_cond_signal(&q->cond);
}

void wq_queue_at(struct work_queue *q, struct work *w, uint64_t now)
{
	queue_work(q, w, now, false);
}

void wq_queue_urgent(struct work_queue *q, struct work *w, uint64_t now)
{
	queue_work(q, w, now, true);
}

int wq_info_all(struct wq_info *out, int max)
{
	int n = 0;

	for (struct work_queue *q = all_queues; q && n < max; q = q->next, n++) {
		out[n].name = q->name;
		out[n].nr_threads = q->nr_threads;
		pthread_mutex_lock(&q->lock);
		/* the lock order: a queue's, then done_lock (workers take each alone) */
		pthread_mutex_lock(&done_lock);
		out[n].nr_done = q->nr_done;
		pthread_mutex_unlock(&done_lock);
		out[n].nr_running = (int)(q->nr_taken - out[n].nr_done);
		out[n].nr_queued = 0;
		out[n].oldest_queued = 0;
		/* not always the first: an urgent work goes ahead of older ones */
		for (struct list_node *p = q->pending.n.next; p != &q->pending.n; p = p->next) {
			uint64_t queued = container_of(p, struct work, node)->queued;

			out[n].nr_queued++;
			if (!out[n].oldest_queued || queued < out[n].oldest_queued)
				out[n].oldest_queued = queued;
		}
		pthread_mutex_unlock(&q->lock);
	}
	return n;
}

void wq_shutdown_all(void)
{
	for (struct work_queue *q = all_queues; q; q = q->next) {
		pthread_mutex_lock(&q->lock);
		q->stopping = true;
		pthread_cond_broadcast(&q->cond);
		pthread_mutex_unlock(&q->lock);
	}
	for (struct work_queue *q = all_queues; q; q = q->next)
		for (int i = 0; i < q->nr_threads; i++)
			pthread_join(q->threads[i], NULL);
}
