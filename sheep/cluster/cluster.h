/*
 * Cluster drivers: where membership and the total order of cluster
 * messages come from. A driver is a const ops struct registered by
 * cdrv_register(); selected with `sheep -c NAME`.
 *
 * Contracts:
 * - init(option): prepare, no member visible yet. 0 or -errno.
 * - join(myself): become a member. The driver then calls
 *   sd_join_handler() on the main thread, on every member, in the same
 *   order, with the new member list.
 * - leave(): stop being a member (others see sd_leave_handler()).
 * - notify(msg, len): broadcast; every member, the sender included, gets
 *   sd_notify_handler() in one total order. 0 or -errno.
 */
#ifndef CLUSTER_H
#define CLUSTER_H

#include <stddef.h>
#include "internal_proto.h"

struct cluster_driver {
	const char *name;
	int (*init)(const char *option);
	int (*join)(const struct sd_node *myself);
	int (*leave)(void);
	int (*notify)(const void *msg, size_t len);
};

void cdrv_register(const struct cluster_driver *drv);
#define cdrv_register_driver(drv)                                      \
	static void __attribute__((constructor)) register_##drv(void) \
	{                                                             \
		cdrv_register(&drv);                                  \
	}
const struct cluster_driver *cdrv_find(const char *name);
/* "local, corosync": the names of the registered drivers */
void cdrv_names(char *buf, size_t len);

/* called by drivers on the main thread */
void sd_join_handler(const struct sd_node *joined, const struct sd_node *members, int nr);
void sd_leave_handler(const struct sd_node *left, const struct sd_node *members, int nr);
void sd_notify_handler(const struct sd_node *sender, const void *msg, size_t len);

#endif
