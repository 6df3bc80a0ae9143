/*
 * Store drivers: where objects live on a node's disk. Every callback returns
 * SD_RES_* (the op boundary is right above: peer.c answers them as they
 * are), except the iterators, which return 0/-errno as the code inside does.
 * Objects are named by their oid only, never by a VDI name.
 *
 * Contracts (unit/store-contract.c checks them for every registered driver):
 * - init: open (create if needed) the store under dir; may be called again
 *   on the same dir, and what was stored is still there. Removes what an
 *   interrupted create left behind.
 * - exist: whether a live copy of oid is stored (a stale copy is not).
 * - read: fill len bytes from off; bytes past the end of the stored object
 *   read as zeros; SD_RES_NO_OBJ if the object does not exist.
 * - read_cached (optional: NULL when the driver has none): as read, but
 *   only if it can be done at once, from memory, without waiting for the
 *   disk (the main thread calls it): true when buf holds what read would
 *   give; false for anything else (read then decides, errors included).
 * - write: the object must exist (SD_RES_NO_OBJ otherwise); durable before
 *   returning unless sync is false.
 * - create_and_write: create the object (zero-filled, or a copy of cow_oid
 *   when cow_oid != 0), apply the write, durable before returning unless
 *   sync is false. The object appears whole or not at all. If it exists
 *   already the write is applied to it.
 * - create_and_write with a cow_oid that is not stored: fails
 *   (SD_RES_NO_BASE_VDI for plain), and creates nothing.
 * - remove: SD_RES_NO_OBJ if absent.
 * - flush: make every earlier write durable.
 * - flush_vdi: make durable every earlier write without sync to the objects
 *   of one VDI (its data objects and its inode), and no more than needed.
 * - for_each: call fn for every stored object; fn returns 0 to go on or a
 *   -errno to stop. Returns 0, fn's -errno, or -errno of the store's own
 *   failure (a directory that cannot be read).
 * - stale_all: set every stored object aside as stale (a node that rejoins
 *   cannot know which of its objects missed writes). Stale objects are not
 *   read, listed or served; *nr says how many were set aside. A stale copy
 *   replaces an older stale copy of the same object.
 * - read_stale: read a stale copy, as read; recovery's last resort when no
 *   live node has the object.
 * - for_each_stale: as for_each, over the stale copies.
 * - purge_stale: remove every stale copy; live copies stay.
 * - stat: the filesystem's size and free space, the bytes that live
 *   objects take and how many there are.
 * - caches (optional: NULL when the driver keeps none): the counters of
 *   the caches it keeps (struct sd_stat_cache, collie node stat --caches),
 *   at most max rows into out; how many. Called from the main thread, at
 *   any time after init.
 * Every callback but read_cached and caches is required: the registry
 * refuses a driver without one.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sd_stat_cache;

struct store_stat {
	uint64_t size, free, used, nr_objects;
};

struct store_driver {
	const char *name;
	int (*init)(const char *dir);
	bool (*exist)(uint64_t oid);
	int (*read)(uint64_t oid, void *buf, uint32_t len, uint64_t off);
	bool (*read_cached)(uint64_t oid, void *buf, uint32_t len, uint64_t off);
	int (*write)(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync);
	int (*create_and_write)(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len,
				uint64_t off, bool sync);
	int (*remove)(uint64_t oid);
	int (*flush)(void);
	int (*flush_vdi)(uint32_t vid);
	int (*for_each)(int (*fn)(uint64_t oid, void *arg), void *arg);
	int (*stat)(struct store_stat *st);
	int (*stale_all)(uint64_t *nr);
	int (*read_stale)(uint64_t oid, void *buf, uint32_t len, uint64_t off);
	int (*for_each_stale)(int (*fn)(uint64_t oid, void *arg), void *arg);
	int (*purge_stale)(void);
	int (*caches)(struct sd_stat_cache *out, int max);
};

/*
 * Add a driver: 0, or -EINVAL (a callback is missing), -EEXIST (its name is
 * taken), -ENOSPC (the registry is full). A refused driver is logged and
 * cannot be chosen.
 */
int store_register(const struct store_driver *drv);

#define store_driver_register(drv)                                    \
	static void __attribute__((constructor)) register_##drv(void) \
	{                                                             \
		(void)store_register(&drv);                           \
	}

/* the registered driver of that name, or NULL */
const struct store_driver *store_find(const char *name);
/* the registered drivers' names, comma-separated, into buf */
void store_names(char *buf, size_t len);
/* select a driver by name and init it on dir: 0, -ENOENT (no such driver) or -EIO */
int store_init(const char *name, const char *dir);
extern const struct store_driver *sd_store;

#endif
