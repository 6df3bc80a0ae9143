/* The vnode ring: see ring.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define FNV1A_64_INIT UINT64_C(0xcbf29ce484222325)
#define FNV_64_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv1a_64(const void *buf, size_t len, uint64_t h)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= FNV_64_PRIME;
	}
	return h;
}

/* MurmurHash3's fmix64: every input bit reaches every output bit */
static uint64_t fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}

static uint64_t vnode_hash(const struct sd_node *n, uint32_t i)
{
	uint64_t h = fnv1a_64(n->nid.addr, sizeof(n->nid.addr), FNV1A_64_INIT);

	h = fnv1a_64(&n->nid.port, sizeof(n->nid.port), h);
	h = fnv1a_64(&i, sizeof(i), h);
	return fmix64(h);
}

uint64_t ring_oid_hash(uint64_t oid)
{
	return ring_buf_hash(&oid, sizeof(oid));
}

uint64_t ring_buf_hash(const void *buf, size_t len)
{
	return fmix64(fnv1a_64(buf, len, FNV1A_64_INIT));
}

static int cmp_vnode(const void *a, const void *b)
{
	const struct sd_vnode *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	/* equal hashes (never seen in practice): order by node, for determinism */
	return (int)x->node_idx - (int)y->node_idx;
}

static int cmp_nid(const struct sd_node_id *a, const struct sd_node_id *b)
{
	return memcmp(a, b, sizeof(*a));
}

int ring_build(struct sd_ring *ring, const struct sd_node *nodes, int nr)
{
	int total = 0, k = 0;

	memset(ring, 0, sizeof(*ring));
	if (nr < 0 || nr > SD_MAX_NODES)
		return -EINVAL;
	/* the nodes that store: a gateway owns no point and is not in ring->nodes */
	for (int i = 0; i < nr; i++)
		if (!(nodes[i].flags & SD_NODE_GATEWAY))
			ring->nodes[ring->nr_nodes++] = nodes[i];
	for (int i = 0; i < ring->nr_nodes; i++) {
		const struct sd_node *n = &ring->nodes[i];
		int seen = 0;

		total += n->nr_vnodes ? n->nr_vnodes : SD_DEFAULT_VNODES;
		for (int j = 0; j < i; j++)
			if (ring->nodes[j].zone == n->zone)
				seen = 1;
		ring->nr_zones += !seen;
	}
	ring->vnodes = total ? calloc(total, sizeof(*ring->vnodes)) : NULL;
	if (total && !ring->vnodes) {
		ring->nr_nodes = 0;
		return -ENOMEM;
	}
	for (int i = 0; i < ring->nr_nodes; i++) {
		const struct sd_node *n = &ring->nodes[i];
		int nv = n->nr_vnodes ? n->nr_vnodes : SD_DEFAULT_VNODES;

		for (int v = 0; v < nv; v++) {
			ring->vnodes[k].hash = vnode_hash(n, (uint32_t)v);
			ring->vnodes[k].node_idx = (uint16_t)i;
			k++;
		}
	}
	ring->nr_vnodes = total;
	if (total) /* no node: vnodes may be NULL, which qsort must not get */
		qsort(ring->vnodes, total, sizeof(*ring->vnodes), cmp_vnode);
	return 0;
}

void ring_free(struct sd_ring *ring)
{
	free(ring->vnodes);
	ring->vnodes = NULL;
	ring->nr_vnodes = 0;
	ring->nr_nodes = 0;
}

/* the first vnode at or after hash (wrapping to 0) */
static int first_vnode(const struct sd_ring *ring, uint64_t hash)
{
	int lo = 0, hi = ring->nr_vnodes;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (ring->vnodes[mid].hash < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == ring->nr_vnodes ? 0 : lo;
}

static int picked(const int *idx, int n, int node)
{
	for (int i = 0; i < n; i++)
		if (idx[i] == node)
			return 1;
	return 0;
}

static int zone_used(const struct sd_ring *ring, const int *idx, int n, uint32_t zone)
{
	for (int i = 0; i < n; i++)
		if (ring->nodes[idx[i]].zone == zone)
			return 1;
	return 0;
}

int ring_map(const struct sd_ring *ring, uint64_t oid, int copies, int *idx)
{
	int want = copies < ring->nr_nodes ? copies : ring->nr_nodes;
	int zoned = want < ring->nr_zones ? want : ring->nr_zones;
	int n = 0, start;

	if (want <= 0 || ring->nr_vnodes == 0)
		return 0;
	start = first_vnode(ring, ring_oid_hash(oid));
	/* first pass: one node per zone, as long as zones last */
	for (int i = 0; i < ring->nr_vnodes && n < zoned; i++) {
		int node = ring->vnodes[(start + i) % ring->nr_vnodes].node_idx;
		if (!picked(idx, n, node) && !zone_used(ring, idx, n, ring->nodes[node].zone))
			idx[n++] = node;
	}
	/* then any node not taken yet */
	for (int i = 0; i < ring->nr_vnodes && n < want; i++) {
		int node = ring->vnodes[(start + i) % ring->nr_vnodes].node_idx;
		if (!picked(idx, n, node))
			idx[n++] = node;
	}
	return n;
}

int ring_find_node(const struct sd_ring *ring, const struct sd_node_id *nid)
{
	for (int i = 0; i < ring->nr_nodes; i++)
		if (!cmp_nid(&ring->nodes[i].nid, nid))
			return i;
	return -1;
}
