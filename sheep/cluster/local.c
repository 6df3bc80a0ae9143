/*
 * The local driver: membership without any external service. In this
 * version it runs one sheep alone: join makes it the only member at once,
 * and a broadcast is delivered to itself, in order, on the main thread.
 */
#include <errno.h>
#include <string.h>

#include "cluster.h"

static struct sd_node self;
static bool joined;

static int local_init(const char *option)
{
	return 0;
}

static int local_join(const struct sd_node *myself)
{
	self = *myself;
	joined = true;
	sd_join_handler(&self, &self, 1);
	return 0;
}

static int local_leave(void)
{
	joined = false;
	return 0;
}

static int local_notify(const void *msg, size_t len)
{
	if (!joined)
		return -ENOTCONN;
	sd_notify_handler(&self, msg, len);
	return 0;
}

static const struct cluster_driver cdrv_local = {
	.name = "local",
	.init = local_init,
	.join = local_join,
	.leave = local_leave,
	.notify = local_notify,
};

cdrv_register_driver(cdrv_local);
