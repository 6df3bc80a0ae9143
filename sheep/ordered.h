/*
 * Cluster operations in the driver's total order (ordered.c).
 */
#ifndef SHEEP_ORDERED_H
#define SHEEP_ORDERED_H

#include <stddef.h>
#include <stdint.h>

struct request;

/* ordered.c: cluster operations in the driver's total order */
/* main thread: broadcast req; it is answered once applied here */
void ordered_submit(struct request *req);
/*
 * main thread: the successful client request req wrote the header of vid's
 * inode; broadcast NOTIFY_VDI_HEADER and answer req once it is applied here
 */
void ordered_notify_header(struct request *req, uint32_t vid);
/* main thread, a group_deliver_fn (registered by main): apply a delivered op */
void ordered_deliver(const void *msg, size_t len, int nr_members);
/*
 * Main, before any delivery: q applies the ops (one worker: in order),
 * lookup finds an opcode's entry in the op table, done answers a request
 * once its op is applied here (request_reply.c's request_done)
 */
struct sd_op_template;
struct work_queue;
void ordered_init(struct work_queue *q, const struct sd_op_template *(*lookup)(uint8_t opcode),
		  void (*done)(struct request *req));
/*
 * Main thread, group_news.node_left: nid left the cluster; what its
 * clients held goes, at this place of the order, through fn (main
 * registers vdi_release_owner's call; owner->node is nid)
 */
void ordered_node_left(const struct sd_node_id *nid);
struct sd_lock_owner;
void ordered_set_node_left(void (*fn)(const struct sd_lock_owner *owner));

#endif
