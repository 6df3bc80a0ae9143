/*
 * Running an op (ops_exec.c): the queues of the op table and how a request
 * whose op is done goes back to its client. Main thread.
 */
#ifndef SHEEP_OPS_EXEC_H
#define SHEEP_OPS_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

struct request;
struct work_queue;

/*
 * How a request whose op is done goes back to its client: done on the
 * main thread (always called, once); early, optional, on the worker right
 * after process, for a front end that may send the reply from there (it
 * is not called when the op holds its reply).
 */
struct ops_answer {
	void (*done)(struct request *req);
	void (*early)(struct request *req);
};
/*
 * Start the op queues (before any request): io and peer with nr_io_threads
 * workers each, cluster (ordered ops too) and trace with one, fetch with
 * two. 0 or -errno.
 */
int ops_exec_init(int nr_io_threads, const struct ops_answer *answer);
/* the queue that runs the ops of type (NULL: the main thread, or none yet) */
struct work_queue *ops_queue(enum op_type type);
/* its name ("io", "cluster", ...; NULL for the main thread) */
const char *ops_queue_name(enum op_type type);
/*
 * Run req's op (req->op set; the front end's checks passed): on the main
 * thread at once, on its op's queue, or through the cluster's order; it is
 * answered through ops_answer.
 */
void ops_execute(struct request *req);
/* log that req, from client, is in flight for age_ns: its op, oid and worker */
void ops_report_hang(const struct request *req, const char *client, uint64_t age_ns);
/* does req's op hold its reply for more work (ops.h: reply_held)? */
bool ops_reply_held(const struct request *req);

#endif
