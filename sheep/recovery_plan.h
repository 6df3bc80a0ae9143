/*
 * Recovery's planning (recovery_plan.c): what the nodes' object lists say
 * this node must fetch, remove and keep after an epoch change. Pure
 * functions of the lists, the ring and the VDIs' copies (any thread), so
 * that they are tested alone.
 */
#ifndef SHEEP_RECOVERY_PLAN_H
#define SHEEP_RECOVERY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"

/* an object the nodes listed: which of them hold it live, which stale */
struct obj_entry {
	uint64_t oid;
	uint64_t live;	/* bit i: ring node i stores it */
	uint64_t stale; /* bit i: ring node i keeps a stale copy */
};

/* the nodes' lists, gathered: add_oid fills it for node (a list of stale copies or not) */
struct obj_set {
	struct obj_entry *e;
	size_t nr, cap;
	int node;   /* the node being listed */
	bool stale; /* its stale copies */
};

/* add oid as listed by set->node (its stale copies when set->stale): 0 or -ENOMEM */
int recovery_add_oid(uint64_t oid, void *arg);
/* sort set and merge the entries of one oid (its holders' bits) */
void recovery_merge(struct obj_set *set);
/*
 * Merged set: for every strip of an erasure-coded object listed (ec.h),
 * its sibling strips too, held by no node when nobody listed them (a strip
 * that lived only on a node that left: rebuilt by whoever the ring now
 * gives it). Merged again. 0 or -ENOMEM.
 */
int recovery_add_strips(struct obj_set *set);
/* does er's ring give oid to this node (its VDI's copies, else the cluster's)? */
bool recovery_is_mine(const struct epoch_ring *er, uint64_t oid);
/*
 * After an epoch change: keep in set (merged) only what this node must
 * fetch (the ring gives it, it holds no live copy, its VDI is not
 * deleted); an object of a deleted VDI that this node holds live goes
 * through remove (a node that was down during the delete). How many to
 * fetch.
 */
uint64_t recovery_plan(const struct epoch_ring *er, struct obj_set *set,
		       void (*remove)(uint64_t oid));
/* once every node recovered: does this node keep its live copy of oid? */
bool recovery_keeps(const struct epoch_ring *er, uint64_t oid);

#endif
