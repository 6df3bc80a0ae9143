/*
 * Several disks per node (md.c, md_ring.c): the plain store's objects
 * spread over a set of directories, one per disk, by a consistent-hash ring
 * of the disks (lib/ring.c's ring and hash, weighted by each disk's size),
 * so that a plug or an unplug moves only the objects whose disk changes.
 *
 * Without --disk the set is one disk, DIR itself (objects in DIR/obj, as
 * they always were): no thread, no lock but the stripe's, no lookup more.
 * With --disk each disk PATH keeps its objects in PATH/obj (and its stale
 * copies in PATH/obj/.stale); DIR keeps the epochs, the log and the rest.
 *
 * A plugged disk brings no live object: what its directory holds already
 * (it was in use before, it failed and came back) is set aside as stale
 * copies, recovery's last resort, which the next recovery purges.
 *
 * Finding an object: the disk the ring gives it, except while objects are
 * moving (after a start, a plug, an unplug): then every disk in use is
 * searched when the ring's disk does not have it, so an object stays
 * readable and writable during its move. Every access holds the read lock
 * of the object's stripe (md_get .. md_put); the mover holds the write lock
 * of one object's stripe while it moves that object, so no write lands on
 * a copy being moved away.
 *
 * A disk that fails (EIO on an object's read or write, or its directory no
 * longer the one at its path: unmounted, removed, replaced) is taken out by
 * the daemon itself, once, with one log line; the node stays a member, and
 * the callback that main registered (md_set_lost) learns it, so that the
 * objects that lived there are fetched again from their other copies. The
 * last disk in use is never taken out (the store then fails as it did
 * without md).
 *
 * Threads: md_get/md_put/md_failed on any thread (md_tryget too, without
 * blocking: the main thread's cached reads); plug, unplug and info on a
 * worker; one background thread (started with the first disk set of more
 * than one disk, or the first plug) moves objects and watches the disks.
 * Errors are 0 or -errno.
 */
#ifndef SHEEP_STORE_MD_H
#define SHEEP_STORE_MD_H

#include <stdbool.h>
#include <stdint.h>

#include "internal_proto.h"
#include "ring.h"

#define MD_MAX_DISKS SD_MAX_NODES

/* ---- md_ring.c: the disk ring, pure functions of the disks' names and weights ---- */

/* a disk's default weight (its vnodes) for a file system of size bytes */
uint16_t md_ring_weight(uint64_t size);
/*
 * The ring of nr disks: disk i named names[i] (its path) with vnodes[i]
 * points. Its node i is disk i. 0 or -errno; free with ring_free().
 */
int md_ring_build(struct sd_ring *ring, const char *const *names, const uint16_t *vnodes, int nr);
/* the disk (index given to md_ring_build) that oid goes to, or -1 for no disk */
int md_ring_place(const struct sd_ring *ring, uint64_t oid);

/* ---- md.c ---- */

/* --disk PATH[,WEIGHT], before md_init: 0, -EINVAL (bad weight, empty, too long), -ENOSPC */
int md_config_disk(const char *arg);
/* whether --disk was given */
bool md_configured(void);
/*
 * Open the disks (create PATH/obj as needed): the --disk ones, or DIR when
 * none was given. Again on the same set: the store's descriptors are new.
 * 0 or -errno (a disk that cannot be opened).
 */
int md_init(const char *dir);

/* what the store driver does for md (plain.c) */
struct md_store_ops {
	/* move oid's file from the directory from_fd to to_fd: 0 or -errno */
	int (*move)(uint64_t oid, int from_fd, int to_fd);
	/* forget every cached descriptor of object files (a disk went) */
	void (*forget)(void);
	/* the bytes and number of the live objects in the directory fd */
	int (*count)(int fd, uint64_t *used, uint64_t *nr);
	/*
	 * set every object in the directory fd aside as stale (a plugged disk
	 * brings no live object: its copies may have missed writes): 0 or -errno
	 */
	int (*set_aside)(int fd, uint64_t *nr);
};
void md_set_store(const struct md_store_ops *ops);
/* news for main: a disk failed (any thread, once per disk) */
void md_set_lost(void (*fn)(void));

/* an object's disk, pinned between md_get and md_put */
struct md_io {
	struct md_disk *disk;
	unsigned int stripe;
	int fd; /* the disk's object directory */
};
/*
 * The disk that holds oid or, when no disk does, the disk the ring gives it
 * (where a create goes): io->fd. Takes oid's stripe lock for reading.
 */
void md_get(uint64_t oid, struct md_io *io);
/* the same without waiting: false when a move holds the stripe */
bool md_tryget(uint64_t oid, struct md_io *io);
void md_put(struct md_io *io);
/*
 * An I/O on io's disk failed with err (a positive errno): true when that
 * took the disk out (EIO, or its directory gone) and the caller should
 * answer as if the object were not here; false for an error to report.
 */
bool md_failed(struct md_io *io, int err);
/* fn for the object directory of every disk in use (active, or unplugging): 0 or fn's */
int md_for_each_dir(int (*fn)(int fd, void *arg), void *arg);

/*
 * plug the directory PATH[,WEIGHT] (weight as --disk's): 0, -EINVAL, -EEXIST,
 * -ENOSPC, -ENAMETOOLONG or -errno of opening it
 */
int md_plug(const char *arg);
/* unplug it: its objects move to the other disks first. 0, -ENOENT, -EBUSY (the last) */
int md_unplug(const char *path);
/* up to max disks' states into out: how many */
int md_info(struct sd_md_disk *out, int max);
/* the mover has nothing left to move (tests) */
bool md_settled(void);

#endif
