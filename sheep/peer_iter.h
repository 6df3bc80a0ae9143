/*
 * Which nodes to ask for an object (peer_iter.c): a pure walk of an
 * epoch's ring, any thread.
 */
#ifndef SHEEP_PEER_ITER_H
#define SHEEP_PEER_ITER_H

#include <stdbool.h>
#include <stdint.h>

#include "group.h"

/*
 * The replica iterator: the nodes of er to try for oid, in order: the
 * ring's replicas for copies (local_first: this node first), then every
 * other node, since a replica of a new ring may not hold the object yet.
 * Never a node in skip (a bit per ring node). init returns how many
 * replicas the ring names (0: no node); next the next node (an index into
 * er->ring.nodes), or -1 when none is left.
 */
struct peer_iter {
	const struct epoch_ring *er;
	int idx[SD_MAX_NODES];
	int nr_replicas, pos;
	uint64_t skip;
};
int peer_iter_init(struct peer_iter *it, const struct epoch_ring *er, uint64_t oid, int copies,
		   bool local_first, uint64_t skip);
int peer_iter_next(struct peer_iter *it);

#endif
