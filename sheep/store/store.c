/* The registry of store drivers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "store.h"

#define MAX_STORE_DRIVERS 8

static const struct store_driver *drivers[MAX_STORE_DRIVERS];
static int nr_drivers;
const struct store_driver *sd_store;

void store_register(const struct store_driver *drv)
{
	/* refuse an incomplete driver at start-up, loudly */
	if (!drv->name || !drv->init || !drv->exist || !drv->read || !drv->write ||
	    !drv->create_and_write || !drv->remove || !drv->flush || !drv->for_each ||
	    !drv->stat || nr_drivers >= MAX_STORE_DRIVERS) {
		sd_emerg("store driver %s is incomplete", drv->name ? drv->name : "?");
		abort();
	}
	drivers[nr_drivers++] = drv;
}

int store_init(const char *name, const char *dir)
{
	for (int i = 0; i < nr_drivers; i++) {
		if (strcmp(drivers[i]->name, name))
			continue;
		sd_store = drivers[i];
		return sd_store->init(dir) == 0 ? 0 : -EIO;
	}
	return -ENOENT;
}
