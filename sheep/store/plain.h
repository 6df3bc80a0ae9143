/*
 * The plain store's own parts (plain_file.c: names, the descriptor cache,
 * copies; plain.c: object I/O and flushes; plain_dir.c: walks of the object directories, stale copies,
 * moves between disks). Nothing outside sheep/store/plain*.c includes it.
 */
#ifndef SHEEP_STORE_PLAIN_H
#define SHEEP_STORE_PLAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* an object's file name: its oid in 16 hex digits (no printf on the I/O path) */
struct obj_name {
	char s[17];
};
struct obj_name obj_name(uint64_t oid);
/*
 * plain_file.c: the descriptor cache (see there). fd_get: a descriptor of
 * oid of that kind in the directory dfd (its disk's: the caller holds
 * md_get) and its slot (NULL: not cached), or -errno of the open; fd_put
 * gives either back. fd_get_nowait: as fd_get without waiting (the main
 * thread's): a cached descriptor, unchecked (the caller checks its link
 * count), or one opened where the dentry cache resolves the name alone;
 * -EAGAIN where the lookup would wait (or the kernel cannot tell).
 */
enum fd_kind { FD_WRITE, FD_READ };
struct fd_slot;
void fd_cache_init(void);
int fd_get(int dfd, uint64_t oid, enum fd_kind kind, struct fd_slot **slotp);
int fd_get_nowait(int dfd, uint64_t oid, enum fd_kind kind, struct fd_slot **slotp);
void fd_put(struct fd_slot *sl, int fd);
/* the cache's counters in out[0] (store.h, caches): 1, or 0 when max < 1 */
int fd_cache_stat(struct sd_stat_cache *out, int max);
/* SD_RES_* of a positive errno */
int err_to_res(int err);
/* forget oid's cached descriptors (every one when all): call after the directory changed */
void fd_forget(uint64_t oid, bool all);
/* copy the file src into fd: 0 or -errno */
int plain_copy_fd(int src, int fd);
/* move tmp to name in the directory dfd unless name exists: 0, -EEXIST, or -errno */
int plain_publish(int dfd, const char *tmp, const char *name);

/* plain_dir.c: the callbacks of store.h that walk directories */
int plain_for_each(int (*fn)(uint64_t oid, void *arg), void *arg);
int plain_stat(struct store_stat *st);
int plain_stale_all(uint64_t *nr);
int plain_read_stale(uint64_t oid, void *buf, uint32_t len, uint64_t off);
int plain_for_each_stale(int (*fn)(uint64_t oid, void *arg), void *arg);
int plain_purge_stale(void);
/* what md.c asks of the store */
extern const struct md_store_ops plain_md_ops;

#endif
