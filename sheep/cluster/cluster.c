/* The registry of cluster drivers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "logger.h"

#define MAX_CLUSTER_DRIVERS 8

static const struct cluster_driver *drivers[MAX_CLUSTER_DRIVERS];
static int nr_drivers;

void cdrv_register(const struct cluster_driver *drv)
{
	if (!drv->name || !drv->init || !drv->join || !drv->leave || !drv->notify ||
	    nr_drivers >= MAX_CLUSTER_DRIVERS) {
		sd_emerg("cluster driver %s is incomplete", drv->name ? drv->name : "?");
		abort();
	}
	drivers[nr_drivers++] = drv;
}

const struct cluster_driver *cdrv_find(const char *name)
{
	for (int i = 0; i < nr_drivers; i++)
		if (!strcmp(drivers[i]->name, name))
			return drivers[i];
	return NULL;
}

void cdrv_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < nr_drivers && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", drivers[i]->name);
}
