/*
 * Recovery's planning: see recovery_plan.h. recovery.c lists the nodes'
 * objects into an obj_set, merges it, plans, fetches, and cleans with
 * recovery_keeps once every node recovered.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal_proto.h"
#include "ec.h"
#include "deleted.h"
#include "recovery_plan.h"
#include "vdi_table.h"

int recovery_add_oid(uint64_t oid, void *arg)
{
	struct obj_set *set = arg;

	if (set->nr == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 4096;
		struct obj_entry *e = realloc(set->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		set->e = e;
		set->cap = cap;
	}
	set->e[set->nr].oid = oid;
	set->e[set->nr].live = set->stale ? 0 : UINT64_C(1) << set->node;
	set->e[set->nr++].stale = set->stale ? UINT64_C(1) << set->node : 0;
	return 0;
}


static int cmp_entry(const void *a, const void *b)
{
	const struct obj_entry *x = a, *y = b;

	return x->oid < y->oid ? -1 : x->oid > y->oid;
}

void recovery_merge(struct obj_set *set)
{
	size_t n = 0;

	if (!set->nr) /* qsort takes no NULL base */
		return;
	qsort(set->e, set->nr, sizeof(*set->e), cmp_entry);
	for (size_t i = 0; i < set->nr; i++) {
		if (n && set->e[n - 1].oid == set->e[i].oid) {
			set->e[n - 1].live |= set->e[i].live;
			set->e[n - 1].stale |= set->e[i].stale;
		} else
			set->e[n++] = set->e[i];
	}
	set->nr = n;
}

/*
 * A strip of an erasure-coded object (ec.h): strip i's home is the i-th
 * node that the ring names for its object; -1 when it has none (fewer
 * nodes than strips: it stays where it is), -2 when oid is no strip.
 */
static int strip_home(const struct epoch_ring *er, uint64_t oid)
{
	int idx[SD_MAX_NODES], i = ec_oid_strip(oid), copies;

	if (i < 0)
		return -2;
	copies = vdi_copies(oid_to_vid(oid));
	if (copies <= 0 || i >= copies)
		return -1;
	return i < ring_map(&er->ring, ec_base_oid(oid), copies, idx) ? idx[i] : -1;
}

int recovery_add_strips(struct obj_set *set)
{
	size_t nr = set->nr;

	for (size_t i = 0; i < nr; i++) {
		uint64_t oid = set->e[i].oid;
		int copies = vdi_copies(oid_to_vid(oid));

		/* each strip listed adds all of its object's: the merge keeps one of each */
		if (ec_oid_strip(oid) < 0 || copies <= 0)
			continue;
		for (int k = 0; k < copies && k < SD_EC_MAX_STRIPS; k++) {
			if (recovery_add_oid(ec_strip_oid(oid, k), set))
				return -ENOMEM;
			set->e[set->nr - 1].live = set->e[set->nr - 1].stale = 0;
		}
	}
	if (set->nr != nr)
		recovery_merge(set);
	return 0;
}

bool recovery_is_mine(const struct epoch_ring *er, uint64_t oid)
{
	int idx[SD_MAX_NODES], copies = vdi_copies(oid_to_vid(oid)), home = strip_home(er, oid);
	int n;

	if (home != -2)
		return home >= 0 && home == er->local_idx;
	n = ring_map(&er->ring, oid, copies > 0 ? copies : group_copies(), idx);

	for (int i = 0; i < n; i++)
		if (idx[i] == er->local_idx)
			return true;
	return false;
}

uint64_t recovery_plan(const struct epoch_ring *er, struct obj_set *set,
		       void (*remove)(uint64_t oid))
{
	uint64_t local_bit = UINT64_C(1) << er->local_idx, nr_todo = 0;

	for (size_t i = 0; i < set->nr; i++) {
		if (deleted_has(set->e[i].oid)) {
			/* a node that was down during the delete: its copy goes now */
			if (set->e[i].live & local_bit)
				remove(set->e[i].oid);
			set->e[i].oid = 0;
		} else if ((set->e[i].live & local_bit) || !recovery_is_mine(er, set->e[i].oid)) {
			set->e[i].oid = 0; /* nothing to do */
		} else {
			nr_todo++;
		}
	}
	return nr_todo;
}

bool recovery_keeps(const struct epoch_ring *er, uint64_t oid)
{
	/* a VDI unknown here: its copies are unknown, keep its objects; a strip without a home too */
	return recovery_is_mine(er, oid) || vdi_copies(oid_to_vid(oid)) <= 0 ||
	       strip_home(er, oid) == -1;
}
