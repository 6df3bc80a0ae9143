/*
 * Joining a running cluster (join.c), and the check that lets a node
 * restarted alone serve again. Main thread, but for the predicates (any
 * thread).
 */
#ifndef SHEEP_JOIN_H
#define SHEEP_JOIN_H

#include <stdbool.h>
#include <stdint.h>

struct work_queue;

/*
 * Main, before the cluster is joined: the join runs on cluster_q (the
 * cluster worker, in step with ordered ops), the wait check on wait_q
 * (recovery's queue); done is called on the main thread once a join is
 * over (request.c: the client requests that waited).
 */
void join_init(struct work_queue *cluster_q, struct work_queue *wait_q, void (*done)(void));
/* group_news.joined: this node joined a running cluster; learn its state */
void join_start(void);
/* true while this node learns the state of the cluster it joined */
bool join_in_progress(void);
/* true while it does, from a member that waits for the nodes of its last epoch */
bool join_waits(void);
/* group_news.wait_covered: the nodes that are back accept this node's history? */
void join_wait_check(uint32_t gen);

#endif
