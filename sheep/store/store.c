/*
 * The registry of store drivers: each registers itself at start-up
 * (store_driver_register), and sheep --store NAME chooses one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "store.h"

#define MAX_STORE_DRIVERS 8

static const struct store_driver *drivers[MAX_STORE_DRIVERS];
static int nr_drivers;
const struct store_driver *sd_store;

/* every callback of the contract: the core calls each one unconditionally */
static bool complete(const struct store_driver *d)
{
	return d->name && d->init && d->exist && d->read && d->write && d->create_and_write &&
	       d->remove && d->flush && d->flush_vdi && d->for_each && d->stat && d->stale_all &&
	       d->read_stale && d->for_each_stale && d->purge_stale;
}

int store_register(const struct store_driver *drv)
{
	if (!complete(drv)) {
		sd_emerg("store driver %s lacks a callback: refused", drv->name ? drv->name : "?");
		return -EINVAL;
	}
	if (store_find(drv->name)) {
		sd_emerg("store driver %s is registered twice: refused", drv->name);
		return -EEXIST;
	}
	if (nr_drivers >= MAX_STORE_DRIVERS) {
		sd_emerg("too many store drivers: %s refused", drv->name);
		return -ENOSPC;
	}
	drivers[nr_drivers++] = drv;
	return 0;
}

const struct store_driver *store_find(const char *name)
{
	for (int i = 0; i < nr_drivers; i++)
		if (!strcmp(drivers[i]->name, name))
			return drivers[i];
	return NULL;
}

void store_names(char *buf, size_t len)
{
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < nr_drivers && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", drivers[i]->name);
}

int store_init(const char *name, const char *dir)
{
	const struct store_driver *d = store_find(name);

	if (!d)
		return -ENOENT;
	sd_store = d;
	return d->init(dir) == 0 ? 0 : -EIO;
}
