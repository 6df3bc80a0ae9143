/*
 * The fake cluster of test_gateway.c (four nodes holding their objects in
 * memory, the ring over the first live ones), for the tests that share it:
 * test_gateway.c (replicated objects) and test_gateway_ec.c (erasure-coded
 * ones), built into one program.
 */
#ifndef TESTS_GATEWAY_FAKE_H
#define TESTS_GATEWAY_FAKE_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "group.h"

#define NR_NODES 4
#define SHIFT 20 /* 1 MiB objects */
#define OBJ_SIZE (1U << SHIFT)
#define MAX_OBJS 32

struct fake_obj {
	uint64_t oid;
	uint8_t *data;
};

struct fake_node {
	struct fake_obj objs[MAX_OBJS];
	int fail;      /* SD_RES_* every request gets (0: none) */
	int fail_read; /* SD_RES_* its reads get (a disk that fails reads) */
	int old_epoch; /* that many requests answer SD_RES_OLD_NODE_VER first */
	int copies;    /* its table's count: a write naming another is refused (0: none) */
	int nr_requests;
};

extern struct fake_node nodes[NR_NODES];
extern struct epoch_ring ring;
extern uint64_t bytes_read, bytes_written; /* every node's, this node's included */
extern int nr_fanouts;                      /* rounds of requests sent at once */
extern int nr_attr_lookups;                 /* the table asked for a VDI's attributes */

/* node's copy of oid, or NULL */
struct fake_obj *find(int node, uint64_t oid);
bool holds(int node, uint64_t oid);
/* node loses its copy of oid */
void drop(int node, uint64_t oid);
/* the ring of the first live nodes (a join or a leave: the objects stay where they are) */
void ring_of(int live);

/* test_gateway_ec.c: its tests, added to tc (whose fixture resets the cluster) */
void gateway_ec_tests(TCase *tc);

#endif
