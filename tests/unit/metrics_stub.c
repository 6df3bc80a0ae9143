/*
 * For unit tests that link sheep/metrics.c without the rest of the daemon:
 * the node state it reports (group, recovery, the store) as a node that
 * has not joined anything. The tests do not render it.
 */
#include <string.h>

#include "internal_proto.h"
#include "group.h"
#include "recovery.h"
#include "store/store.h"

const struct store_driver *sd_store;

uint32_t group_epoch(void)
{
	return 0;
}

int group_nr_nodes(void)
{
	return 0;
}

uint8_t group_copies(void)
{
	return 0;
}

void recovery_get_info(struct sd_recovery_info *out)
{
	memset(out, 0, sizeof(*out));
}
