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

#endif
