/*
 * The daemon's life: see daemon.h.
 */
#include "daemon.h"

static bool stopping;
static int exit_status;
static void (*stop_handler)(void);

bool daemon_stopping(void)
{
	return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

void daemon_stop(int status)
{
	int none = 0;

	if (status)
		__atomic_compare_exchange_n(&exit_status, &none, status, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
	__atomic_store_n(&stopping, true, __ATOMIC_RELEASE);
	if (stop_handler)
		stop_handler();
}

int daemon_exit_status(void)
{
	return __atomic_load_n(&exit_status, __ATOMIC_ACQUIRE);
}

uint64_t daemon_conn_id(void)
{
	static uint64_t last;

	return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

void daemon_set_stop_handler(void (*fn)(void))
{
	stop_handler = fn;
}
