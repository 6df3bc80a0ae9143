/*
 * The peer ops: this node's side of another gateway's requests (peer.c).
 */
#ifndef SHEEP_PEER_H
#define SHEEP_PEER_H

struct request;

/* peer.c: the peer ops, this node's side of another gateway's requests */
int peer_op_read(struct request *req);
int peer_op_write(struct request *req);
int peer_op_create_and_write(struct request *req);
int peer_op_remove(struct request *req);
int peer_op_flush(struct request *req);
int peer_op_get_obj_list(struct request *req);
int peer_op_fetch(struct request *req);
int peer_op_stat_recovery(struct request *req);

#endif
