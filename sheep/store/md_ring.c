/*
 * The disk ring (md.h): lib/ring.c's vnode ring over the disks of one
 * node. A disk is a ring node whose address is the hash of its path, so
 * its points depend on its path alone, never on the order of --disk or on
 * the other disks: adding or removing one moves only the objects that go
 * to it or came from it. An object's key on this ring is its ring hash
 * hashed once more: the node ring already chose this node by the oid's
 * hash, and the disk ring must spread this node's share, not follow it.
 */
#include <errno.h>
#include <string.h>

#include "md.h"

uint16_t md_ring_weight(uint64_t size)
{
	/* a vnode per 256 MiB, 32 at least (an even spread), 65535 at most */
	uint64_t v = size >> 28;

	if (v < 32)
		return 32;
	return v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
}

int md_ring_build(struct sd_ring *ring, const char *const *names, const uint16_t *vnodes, int nr)
{
	struct sd_node nodes[MD_MAX_DISKS];

	if (nr < 0 || nr > MD_MAX_DISKS)
		return -EINVAL;
	memset(nodes, 0, sizeof(nodes));
	for (int i = 0; i < nr; i++) {
		uint64_t h = ring_buf_hash(names[i], strlen(names[i]));

		if (!vnodes[i])
			return -EINVAL;
		memcpy(nodes[i].nid.addr, &h, sizeof(h));
		nodes[i].nr_vnodes = vnodes[i];
	}
	return ring_build(ring, nodes, nr);
}

int md_ring_place(const struct sd_ring *ring, uint64_t oid)
{
	int idx;

	if (ring_map(ring, ring_oid_hash(oid), 1, &idx) != 1)
		return -1;
	return idx;
}
