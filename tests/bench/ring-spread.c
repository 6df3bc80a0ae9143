/*
 * How evenly the vnode ring (lib/ring.c) spreads objects over N nodes:
 * OBJECTS data objects (of VDIs of 4 GiB: 1,024 objects each, vids spread
 * like the daemon's hash of a name), each mapped to COPIES nodes; prints
 * per node count the most and fewest replicas a node holds, over the mean.
 *
 * usage: ring-spread OBJECTS COPIES N [N...]
 * prints one line per N: "N max/mean min/mean"; VNODES in the environment
 * gives every node that many vnodes instead of SD_DEFAULT_VNODES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

static uint32_t vid_of(int k)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	/* FNV-1a of "vdi-K", cut to 24 bits like a vid */
	char name[32];
	int len = snprintf(name, sizeof(name), "vdi-%d", k);

	for (int i = 0; i < len; i++) {
		h ^= (uint8_t)name[i];
		h *= 0x100000001b3ULL;
	}
	return (uint32_t)(h & 0xffffff);
}

int main(int argc, char **argv)
{
	static struct sd_ring ring;
	struct sd_node nodes[SD_MAX_NODES];
	const char *vnodes_env = getenv("VNODES");
	long nr_objects, copies, vnodes = SD_DEFAULT_VNODES;

	if (argc < 4) {
		fprintf(stderr, "usage: ring-spread OBJECTS COPIES N [N...]\n");
		return 64;
	}
	nr_objects = atol(argv[1]);
	copies = atol(argv[2]);
	if (vnodes_env)
		vnodes = atol(vnodes_env);
	if (vnodes < 1 || vnodes > UINT16_MAX) {
		fprintf(stderr, "ring-spread: VNODES must be 1 to %d\n", UINT16_MAX);
		return 64;
	}
	for (int a = 3; a < argc; a++) {
		int nr = atoi(argv[a]), idx[8];
		long count[SD_MAX_NODES] = { 0 }, max = 0, min = -1, total = 0;

		if (nr < 1 || nr > SD_MAX_NODES || copies < 1 || copies > 8)
			return 64;
		memset(nodes, 0, sizeof(nodes));
		for (int i = 0; i < nr; i++) {
			nodes[i].nid.addr[10] = nodes[i].nid.addr[11] = 0xff;
			nodes[i].nid.addr[12] = 127;
			nodes[i].nid.addr[15] = 1;
			nodes[i].nid.port = (uint16_t)(7000 + i);
			nodes[i].zone = (uint32_t)i;
			nodes[i].nr_vnodes = (uint16_t)vnodes;
		}
		if (ring_build(&ring, nodes, nr))
			return 1;
		for (long o = 0; o < nr_objects; o++) {
			uint64_t oid = ((uint64_t)vid_of((int)(o / 1024)) << 32) | (uint64_t)(o % 1024);
			int n = ring_map(&ring, oid, (int)copies, idx);

			for (int c = 0; c < n; c++)
				count[idx[c]]++;
			total += n;
		}
		for (int i = 0; i < nr; i++) {
			max = count[i] > max ? count[i] : max;
			min = min < 0 || count[i] < min ? count[i] : min;
		}
		printf("%d %.3f %.3f\n", nr, (double)max * nr / (double)total,
		       (double)min * nr / (double)total);
		ring_free(&ring);
	}
	return 0;
}
