/*
 * Store drivers: where objects live on a node's disk. Every callback returns
 * SD_RES_*. Objects are named by their oid only, never by a VDI name.
 *
 * Contracts:
 * - read: fill len bytes from off; bytes past the end of the stored object
 *   read as zeros; SD_RES_NO_OBJ if the object does not exist.
 * - write: the object must exist (SD_RES_NO_OBJ otherwise); durable before
 *   returning unless sync is false.
 * - create_and_write: create the object (zero-filled, or a copy of cow_oid
 *   when cow_oid != 0), apply the write, durable before returning unless
 *   sync is false. The object appears whole or not at all. If it exists
 *   already the write is applied to it.
 * - remove: SD_RES_NO_OBJ if absent.
 * - flush: make every earlier write durable.
 * - flush_vdi: make durable every earlier write without sync to the objects
 *   of one VDI (its data objects and its inode), and no more than needed.
 * - for_each: call fn for every stored object; stop at the first non-zero.
 * - stale_all: set every stored object aside as stale (a node that rejoins
 *   cannot know which of its objects missed writes). Stale objects are not
 *   read, listed or served; *nr says how many were set aside. A stale copy
 *   replaces an older stale copy of the same object.
 * - read_stale: read a stale copy, as read; recovery's last resort when no
 *   live node has the object.
 * - for_each_stale: as for_each, over the stale copies.
 * - purge_stale: remove every stale copy.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stdint.h>

struct store_stat {
	uint64_t size, free, used, nr_objects;
};

struct store_driver {
	const char *name;
	int (*init)(const char *dir);
	bool (*exist)(uint64_t oid);
	int (*read)(uint64_t oid, void *buf, uint32_t len, uint64_t off);
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
};

void store_register(const struct store_driver *drv);

#define store_driver_register(drv)                                    \
	static void __attribute__((constructor)) register_##drv(void) \
	{                                                             \
		store_register(&drv);                                 \
	}

/* select a driver by name and init it on dir: 0 or -errno */
int store_init(const char *name, const char *dir);
extern const struct store_driver *sd_store;

#endif
