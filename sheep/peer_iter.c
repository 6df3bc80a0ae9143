/*
 * The replica iterator: see peer_iter.h.
 */
#include "peer_iter.h"

int peer_iter_init(struct peer_iter *it, const struct epoch_ring *er, uint64_t oid, int copies,
		   bool local_first, uint64_t skip)
{
	it->er = er;
	it->pos = 0;
	it->skip = skip;
	it->nr_replicas = ring_map(&er->ring, oid, copies, it->idx);
	/* this node's copy first: no copy over the network */
	for (int i = 1; local_first && i < it->nr_replicas; i++)
		if (it->idx[i] == er->local_idx) {
			it->idx[i] = it->idx[0];
			it->idx[0] = er->local_idx;
		}
	return it->nr_replicas;
}

int peer_iter_next(struct peer_iter *it)
{
	while (it->pos < it->nr_replicas + it->er->ring.nr_nodes) {
		int i = it->pos++;
		int node = i < it->nr_replicas ? it->idx[i] : i - it->nr_replicas;
		uint64_t bit = UINT64_C(1) << node;

		if (it->skip & bit)
			continue;
		it->skip |= bit;
		return node;
	}
	return -1;
}
