/*
 * How the daemon shares its descriptor limit (RLIMIT_NOFILE; LimitNOFILE
 * in the systemd unit): the store's cache of open object files takes an
 * eighth of it, at most FDS_STORE_CACHE_MAX (sheep/store/plain_file.c);
 * LISTEN_FD_RESERVE (listen.h) stays for the peers' connections, the log
 * and the store's opens past its cache; the connection caps share the
 * rest (listen_fd_budget).
 */
#ifndef SHEEP_FDS_H
#define SHEEP_FDS_H

#include <stdint.h>

#define FDS_STORE_CACHE_MAX 2048

/* the descriptors the store's cache may hold under the limit nofile */
static inline uint64_t fds_store_cache(uint64_t nofile)
{
	return nofile / 8 < FDS_STORE_CACHE_MAX ? nofile / 8 : FDS_STORE_CACHE_MAX;
}

#endif
