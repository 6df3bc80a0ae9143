/* The registry of cluster drivers. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "logger.h"
#include "stat.h"
#include "util.h"

#define MAX_CLUSTER_DRIVERS 8

static const struct cluster_driver *drivers[MAX_CLUSTER_DRIVERS];
static int nr_drivers;

static const struct cluster_driver *selected;
static char *selected_option;
static unsigned int heartbeat_ms = CDRV_DEFAULT_HEARTBEAT_MS;
/* main thread: the last tick in both clocks, and cdrv_stall_ms() in stat_clock() ticks */
static uint64_t last_tick_ns, last_tick_clk, stall_clk;
uint64_t cdrv_late_at = UINT64_MAX;

void cdrv_register(const struct cluster_driver *drv)
{
	if (!drv->name || !drv->init || !drv->join || !drv->leave || !drv->notify ||
	    nr_drivers >= MAX_CLUSTER_DRIVERS) {
		sd_emerg("cluster driver %s is incomplete", drv->name ? drv->name : "?");
		abort();
	}
	drivers[nr_drivers++] = drv;
}

const struct cluster_driver *cdrv_find(const char *arg)
{
	const char *colon = strchr(arg, ':');
	size_t len = colon ? (size_t)(colon - arg) : strlen(arg);

	for (int i = 0; i < nr_drivers; i++) {
		if (strlen(drivers[i]->name) != len || strncmp(drivers[i]->name, arg, len))
			continue;
		free(selected_option);
		selected_option = colon && colon[1] ? strdup(colon + 1) : NULL;
		selected = drivers[i];
		return drivers[i];
	}
	return NULL;
}

const char *cdrv_selected_option(void)
{
	return selected_option;
}

bool cdrv_stop_pending(void)
{
	sigset_t set;

	if (sigpending(&set) < 0)
		return false;
	return sigismember(&set, SIGTERM) == 1 || sigismember(&set, SIGINT) == 1;
}

bool cdrv_is_quorate(void)
{
	if (!selected || !selected->is_quorate)
		return true;
	return selected->is_quorate();
}

void cdrv_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < nr_drivers && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", drivers[i]->name);
}

void cdrv_set_heartbeat_timeout_ms(unsigned int ms)
{
	heartbeat_ms = ms;
}

unsigned int cdrv_heartbeat_timeout_ms(void)
{
	return heartbeat_ms;
}

unsigned int cdrv_stall_ms(void)
{
	return heartbeat_ms / 4 < CDRV_STALL_MS ? heartbeat_ms / 4 : CDRV_STALL_MS;
}

void cdrv_tick(void)
{
	uint64_t ns = sd_now_ns(), clk = stat_clock();

	if (last_tick_ns && ns > last_tick_ns && clk > last_tick_clk) {
		unsigned __int128 t = (unsigned __int128)(clk - last_tick_clk) *
				      ((uint64_t)cdrv_stall_ms() * 1000000) / (ns - last_tick_ns);

		stall_clk = t > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)t;
	}
	last_tick_ns = ns;
	last_tick_clk = clk;
	cdrv_late_at = stall_clk && selected && selected->catch_up ? clk + stall_clk : UINT64_MAX;
}

void cdrv_catch_up_late(uint64_t now)
{
	uint64_t ns = sd_now_ns();

	/* no tick since cdrv_late_at was set: cdrv_stall_ms() went by without one */
	sd_notice("no cluster tick for %" PRIu64 " ms (stopped?): catching up first",
		  (ns - last_tick_ns) / 1000000);
	last_tick_ns = ns;
	last_tick_clk = stat_clock();
	cdrv_late_at = last_tick_clk + stall_clk;
	selected->catch_up();
}
