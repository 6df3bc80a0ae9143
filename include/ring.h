/*
 * Placement: a consistent-hash ring of virtual nodes.
 *
 * Every node owns nr_vnodes points on a 64-bit ring (its weight: a node
 * configured with twice the capacity gets twice the vnodes). A point is
 * FNV-1a-64 of the node's address, port and vnode index, passed through a
 * 64-bit finaliser so that inputs differing in their last bytes spread over
 * the whole ring. An object goes to the owners of the first points at or
 * after the hash of its oid, walking clockwise: distinct nodes always, and
 * distinct zones as long as there are zones left. Adding or removing one
 * node of N moves about 1/N of the objects. The ring depends only on the
 * node list, so every node with the same list computes the same placement.
 */
#ifndef RING_H
#define RING_H

#include <stddef.h>
#include <stdint.h>
#include "internal_proto.h"

struct sd_vnode {
	uint64_t hash;
	uint16_t node_idx; /* into sd_ring.nodes */
	uint16_t pad[3];
};

struct sd_ring {
	int nr_nodes;
	int nr_zones; /* distinct zones among the nodes */
	struct sd_node nodes[SD_MAX_NODES];
	int nr_vnodes;
	struct sd_vnode *vnodes; /* sorted by hash */
};

/*
 * Build ring from nodes[nr] (nr <= SD_MAX_NODES; a node with nr_vnodes 0
 * counts as SD_DEFAULT_VNODES). A gateway (SD_NODE_GATEWAY) stores nothing:
 * ring->nodes holds the other nodes only, in their order. 0 or -errno;
 * free with ring_free().
 */
#define SD_DEFAULT_VNODES 128
int ring_build(struct sd_ring *ring, const struct sd_node *nodes, int nr);
void ring_free(struct sd_ring *ring);

/* the ring position of an object */
uint64_t ring_oid_hash(uint64_t oid);
/* the same hash (FNV-1a-64 and the finaliser) of len bytes: a name's */
uint64_t ring_buf_hash(const void *buf, size_t len);

/*
 * The nodes that hold oid: fills idx[] with up to copies indexes into
 * ring->nodes, primary first, and returns how many (min(copies, nr_nodes)).
 */
int ring_map(const struct sd_ring *ring, uint64_t oid, int copies, int *idx);

/* index of node id nid in ring->nodes, or -1 */
int ring_find_node(const struct sd_ring *ring, const struct sd_node_id *nid);

#endif
