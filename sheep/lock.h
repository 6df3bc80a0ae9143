/*
 * Checked locking. A pthread lock call that fails (EDEADLK when a thread
 * takes a read lock under its own write lock, EPERM when it unlocks what it
 * does not hold, EINVAL) is a bug in the daemon, and going on after one
 * corrupts the lock: an rwlock whose failed rdlock was "unlocked" anyway
 * lets its writer go and later wedges every thread that touches it. So
 * every lock call goes through these wrappers, which log the error with
 * the caller's place and abort, in every build: a node that stops is
 * rejoined and recovered, a wedged one serves nobody and never leaves.
 */
#ifndef SHEEP_LOCK_H
#define SHEEP_LOCK_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logger.h"

static inline void sd_lock_check(int err, const char *what, const char *func, int line)
{
	if (likely(err == 0))
		return;
	sd_log_write(SDOG_EMERG, func, line, "%s failed: %s; aborting", what, strerror(err));
	abort();
}

#define sd_rw_rdlock(l) sd_lock_check(pthread_rwlock_rdlock(l), "rwlock rdlock", __func__, __LINE__)
#define sd_rw_wrlock(l) sd_lock_check(pthread_rwlock_wrlock(l), "rwlock wrlock", __func__, __LINE__)
#define sd_rw_unlock(l) sd_lock_check(pthread_rwlock_unlock(l), "rwlock unlock", __func__, __LINE__)
#define sd_mutex_lock(l) sd_lock_check(pthread_mutex_lock(l), "mutex lock", __func__, __LINE__)
#define sd_mutex_unlock(l)                                                                         \
	sd_lock_check(pthread_mutex_unlock(l), "mutex unlock", __func__, __LINE__)

/* a condition whose timed waits count on CLOCK_MONOTONIC (a clock step moves no deadline) */
static inline void sd_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

/* the CLOCK_MONOTONIC time ms from now, for such a condition's timed wait */
static inline void sd_deadline_ms(struct timespec *until, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

#endif
