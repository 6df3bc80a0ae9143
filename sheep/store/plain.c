/*
 * The plain store: one file per object under DIR/obj, named by the oid in
 * 16 hex digits. New objects are written to a temporary file and renamed
 * into place, so an object appears whole or not at all; the rename never
 * replaces an object that another create published meanwhile (the replica
 * layer orders creates of one object; this is the last line). DIR/obj/.stale
 * keeps the objects that a rejoining node set aside (store.h, stale_all).
 * The descriptors of durable direct writes and of reads stay open in a
 * small cache (below, fd_get); whatever unlinks or renames an object's file
 * here drops its descriptors, so that no I/O goes through a stale one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "internal_proto.h"
#include "logger.h"
#include "store.h"

static char obj_dir[4096];
static int obj_dir_fd = -1;

/* an object's file name: its oid in 16 hex digits (no printf on the I/O path) */
struct obj_name {
	char s[17];
};

static struct obj_name obj_name(uint64_t oid)
{
	static const char hex[] = "0123456789abcdef";
	struct obj_name n;

	for (int i = 15; i >= 0; i--, oid >>= 4)
		n.s[i] = hex[oid & 0xf];
	n.s[16] = '\0';
	return n;
}

/*
 * The dirty set: objects written without sync since they were last made
 * durable (an open-addressing hash set of oids under one lock). A VDI's
 * flush takes its objects out and fdatasyncs each, from a few threads,
 * instead of syncing the filesystem with every other tenant's dirty pages.
 * A create without sync also leaves the directory entry to sync: one fsync
 * of the directory per flush that finds dir_dirty.
 */
#define DIRTY_MIN_SLOTS 1024
#define FLUSH_THREADS 4

static pthread_mutex_t dirty_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *dirty; /* 0: an empty slot (oid 0 is no object) */
static size_t dirty_slots, dirty_nr;
static bool dir_dirty;
/* objects synced by flushes of one VDI, for the log and the tests */
static uint64_t nr_vdi_synced;

static size_t dirty_hash(uint64_t oid)
{
	return (size_t)((oid * UINT64_C(0x9e3779b97f4a7c15)) >> 20);
}

/* dirty_lock held; false when out of memory (the caller syncs at once) */
static bool dirty_insert(uint64_t oid)
{
	size_t i;

	if ((dirty_nr + 1) * 2 > dirty_slots) {
		size_t nr = dirty_slots ? dirty_slots * 2 : DIRTY_MIN_SLOTS;
		uint64_t *t = calloc(nr, sizeof(*t)), *old = dirty;

		if (!t)
			return false;
		for (size_t j = 0; j < dirty_slots; j++) {
			if (!old[j])
				continue;
			for (i = dirty_hash(old[j]) & (nr - 1); t[i]; i = (i + 1) & (nr - 1))
				;
			t[i] = old[j];
		}
		free(old);
		dirty = t;
		dirty_slots = nr;
	}
	for (i = dirty_hash(oid) & (dirty_slots - 1); dirty[i]; i = (i + 1) & (dirty_slots - 1))
		if (dirty[i] == oid)
			return true;
	dirty[i] = oid;
	dirty_nr++;
	return true;
}

/* remember an unsynced write; 0, or -errno when it had to be synced now */
static int mark_dirty(uint64_t oid, int fd, bool created)
{
	bool ok;

	pthread_mutex_lock(&dirty_lock);
	ok = dirty_insert(oid);
	if (created)
		dir_dirty = true;
	pthread_mutex_unlock(&dirty_lock);
	if (!ok && fd >= 0 && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

/* take the objects of vid out of the set: a malloc'ed array, *nr of them */
static uint64_t *dirty_take(uint32_t vid, size_t *nr, bool *dir)
{
	uint64_t *out = NULL, *keep = NULL;
	size_t n = 0, k = 0;

	pthread_mutex_lock(&dirty_lock);
	*dir = dir_dirty;
	dir_dirty = false;
	if (!dirty_nr) { /* no slot in use: nothing to take */
		pthread_mutex_unlock(&dirty_lock);
		*nr = 0;
		return NULL;
	}
	out = malloc(dirty_nr * sizeof(*out));
	keep = malloc(dirty_nr * sizeof(*keep));
	if (!out || !keep) {
		free(out);
		free(keep);
		dir_dirty = *dir;
		pthread_mutex_unlock(&dirty_lock);
		*nr = SIZE_MAX;
		return NULL;
	}
	for (size_t i = 0; i < dirty_slots; i++) {
		if (!dirty[i])
			continue;
		if (oid_to_vid(dirty[i]) == vid)
			out[n++] = dirty[i];
		else
			keep[k++] = dirty[i];
		dirty[i] = 0;
	}
	/* rebuild without vid's objects (linear probing has no plain delete) */
	dirty_nr = 0;
	for (size_t i = 0; i < k; i++)
		dirty_insert(keep[i]);
	pthread_mutex_unlock(&dirty_lock);
	free(keep);
	*nr = n;
	return out;
}

/*
 * The descriptor cache of durable direct writes and of reads: a 4 KiB
 * write or read spent two syscalls and a path lookup on openat and close
 * around its pwrite or pread. A slot is one oid and one kind (FD_WRITE:
 * O_DIRECT|O_DSYNC, FD_READ: buffered, read-only). Set associative (a set
 * per hash of the oid, both kinds in it, LRU within it), under one lock,
 * bounded (FD_SETS x fd_ways descriptors, fewer under a low descriptor
 * limit). A user holds a reference; a slot dropped while in use is dead
 * (never found again) and closed by its last user.
 *
 * Never a stale descriptor: plain_remove, stale_all, a create's publish
 * and init drop the oid's descriptor after they change the directory, and
 * bump fd_gen, so that a descriptor opened before the change by a user
 * that missed is used once and not cached. A write (read) through a
 * descriptor taken before a concurrent remove lands on (reads) the removed
 * file, as one that opened the file just before the remove would. A file
 * unlinked behind the daemon's back (an operator) is found by its link
 * count on each hit: the user then opens the name again, and misses as it
 * should.
 */
#define FD_SETS 32
#define FD_MAX_WAYS 8

enum fd_kind { FD_WRITE, FD_READ };

struct fd_slot {
	uint64_t oid;
	uint64_t used; /* fd_clock at the last use: LRU within the set */
	int fd;	       /* -1: free */
	int refs;
	enum fd_kind kind;
	bool dead;
};

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fd_slot fd_cache[FD_SETS][FD_MAX_WAYS] = {
	[0 ... FD_SETS - 1] = { [0 ... FD_MAX_WAYS - 1] = { .fd = -1 } }
};
static int fd_ways; /* set by plain_init from the descriptor limit */
static uint64_t fd_gen, fd_clock;

static struct fd_slot *fd_cache_set(uint64_t oid)
{
	return fd_cache[(oid * UINT64_C(0x9e3779b97f4a7c15)) >> 59 & (FD_SETS - 1)];
}

/* fd_lock held: drop a slot; its descriptor, to close after the unlock, or -1 */
static int fd_drop(struct fd_slot *sl)
{
	int fd = sl->fd;

	if (fd < 0 || sl->dead)
		return -1;
	if (sl->refs) {
		sl->dead = true; /* its last user closes it */
		return -1;
	}
	sl->fd = -1;
	return fd;
}

/* forget oid's descriptors (every one when all): call after the directory changed */
static void fd_forget(uint64_t oid, bool all)
{
	int close_fds[FD_SETS * FD_MAX_WAYS], n = 0;

	pthread_mutex_lock(&fd_lock);
	fd_gen++;
	for (int i = 0; i < FD_SETS; i++) {
		struct fd_slot *set = fd_cache[i];

		if (!all && set != fd_cache_set(oid))
			continue;
		for (int w = 0; w < FD_MAX_WAYS; w++) {
			int fd;

			if (!all && set[w].oid != oid)
				continue;
			fd = fd_drop(&set[w]);
			if (fd >= 0)
				close_fds[n++] = fd;
		}
	}
	pthread_mutex_unlock(&fd_lock);
	while (n--)
		close(close_fds[n]);
}

/*
 * A read descriptor does not update the access time: a read after a write
 * would otherwise write the inode (relatime), and read_cached must not
 * wait for the journal. O_NOATIME needs the files' owner: without it, the
 * reads update the time as any reader's would.
 */
static int open_kind(uint64_t oid, enum fd_kind kind)
{
	int flags = kind == FD_READ ? O_RDONLY | O_NOATIME : O_WRONLY | O_DIRECT | O_DSYNC;
	int fd = openat(obj_dir_fd, obj_name(oid).s, flags | O_CLOEXEC);

	if (fd < 0 && errno == EPERM && kind == FD_READ)
		fd = openat(obj_dir_fd, obj_name(oid).s, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* the cached descriptor of oid of that kind, taken (fd_put gives it back), or -1 */
static int fd_find(uint64_t oid, enum fd_kind kind, struct fd_slot **slotp)
{
	struct fd_slot *set = fd_cache_set(oid);
	int fd = -1;

	*slotp = NULL;
	pthread_mutex_lock(&fd_lock);
	for (int w = 0; w < fd_ways; w++) {
		struct fd_slot *sl = &set[w];

		if (sl->fd < 0 || sl->dead || sl->oid != oid || sl->kind != kind)
			continue;
		sl->refs++;
		sl->used = ++fd_clock;
		fd = sl->fd;
		*slotp = sl;
		break;
	}
	pthread_mutex_unlock(&fd_lock);
	return fd;
}

/*
 * A descriptor of oid of that kind, and its slot (NULL: not cached, the
 * caller closes it; fd_put does either): fd, or -errno of the open
 */
static int fd_get(uint64_t oid, enum fd_kind kind, struct fd_slot **slotp)
{
	struct fd_slot *set = fd_cache_set(oid), *victim = NULL, *sl;
	int fd, old = -1;
	uint64_t gen;
	struct stat st;

	fd = fd_find(oid, kind, &sl);
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink) {
		*slotp = sl;
		return fd;
	}
	pthread_mutex_lock(&fd_lock);
	if (fd >= 0) { /* unlinked behind our back: forget it, and look the name up again */
		sl->refs--;
		old = fd_drop(sl);
	}
	gen = fd_gen;
	pthread_mutex_unlock(&fd_lock);
	*slotp = NULL;
	if (old >= 0)
		close(old);
	old = -1;
	fd = open_kind(oid, kind);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&fd_lock);
	/* not if the directory changed meanwhile, or another writer cached it first */
	for (int w = 0; gen == fd_gen && w < fd_ways; w++) {
		struct fd_slot *sl = &set[w];

		if (sl->fd >= 0 && !sl->dead && sl->oid == oid && sl->kind == kind) {
			victim = NULL;
			break;
		}
		if (sl->fd < 0)
			victim = sl;
		else if (!sl->refs && !sl->dead &&
			 (!victim || (victim->fd >= 0 && sl->used < victim->used)))
			victim = sl;
	}
	if (gen == fd_gen && victim) {
		old = victim->fd;
		victim->fd = fd;
		victim->oid = oid;
		victim->kind = kind;
		victim->refs = 1;
		victim->dead = false;
		victim->used = ++fd_clock;
		*slotp = victim;
	}
	pthread_mutex_unlock(&fd_lock);
	if (old >= 0)
		close(old);
	return fd;
}

static void fd_put(struct fd_slot *sl, int fd)
{
	if (!sl) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&fd_lock);
	if (--sl->refs || !sl->dead)
		fd = -1;
	else {
		sl->fd = -1;
		sl->dead = false;
	}
	pthread_mutex_unlock(&fd_lock);
	if (fd >= 0)
		close(fd);
}

/* a few descriptors per 256 of the limit, at most FD_SETS x FD_MAX_WAYS */
static int fd_ways_for_limit(void)
{
	struct rlimit rl;
	uint64_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	n = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	/* a descriptor in 8 at most: the connections and the peers come first */
	n /= 8 * FD_SETS;
	return n > FD_MAX_WAYS ? FD_MAX_WAYS : (int)n;
}

static int err_to_res(int err)
{
	switch (err) {
	case ENOENT:
		return SD_RES_NO_OBJ;
	case ENOSPC:
	case EDQUOT:
		return SD_RES_NO_SPACE;
	default:
		return SD_RES_EIO;
	}
}

static int plain_init(const char *dir)
{
	int ret;

	/* another directory, or this one again: no descriptor of before is valid */
	fd_forget(0, true);
	fd_ways = fd_ways_for_limit();
	snprintf(obj_dir, sizeof(obj_dir), "%s/obj", dir);
	ret = sd_mkdir_p(obj_dir, 0755);
	if (ret) {
		sd_err("cannot create %s: %s", obj_dir, strerror(-ret));
		return SD_RES_EIO;
	}
	if (obj_dir_fd >= 0)
		close(obj_dir_fd);
	obj_dir_fd = open(obj_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (obj_dir_fd < 0) {
		sd_err("cannot open %s: %m", obj_dir);
		return SD_RES_EIO;
	}
	/* leftovers of creations that a crash interrupted */
	DIR *d = opendir(obj_dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, ".tmp.", 5))
			unlinkat(obj_dir_fd, de->d_name, 0);
	if (d)
		closedir(d);
	return SD_RES_SUCCESS;
}

static bool plain_exist(uint64_t oid)
{
	return faccessat(obj_dir_fd, obj_name(oid).s, F_OK, 0) == 0;
}

static int plain_read(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	struct fd_slot *sl;
	int fd, ret;

	fd = fd_get(oid, FD_READ, &sl);
	if (fd < 0)
		return err_to_res(-fd);
	ret = sd_pread_full(fd, buf, len, off);
	fd_put(sl, fd);
	if (ret) {
		sd_err("read %016" PRIx64 " failed: %s", oid, strerror(-ret));
		return err_to_res(-ret);
	}
	return SD_RES_SUCCESS;
}

/*
 * A read from the page cache alone, for the main thread: through a read
 * descriptor that an earlier plain_read cached (no path lookup), with
 * RWF_NOWAIT (no wait for the disk: EAGAIN when a page is not in memory).
 * What it read is all there is: the whole range, or up to the end of the
 * file as fstat sees it after the read (the rest reads as zeros; a file
 * never shrinks here, so one that grew meanwhile shows), and the file was
 * not unlinked behind the daemon's back (plain_read's check). Anything
 * else (a short read of pages not all in memory included): false.
 */
static bool plain_read_cached(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	struct iovec iov = { buf, len };
	struct fd_slot *sl;
	struct stat st;
	ssize_t n;
	bool ok;
	int fd;

	if (off > (uint64_t)INT64_MAX - len)
		return false;
	fd = fd_find(oid, FD_READ, &sl);
	if (fd < 0)
		return false;
	n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
	ok = n >= 0 && fstat(fd, &st) == 0 && st.st_nlink &&
	     ((uint64_t)n == len || off + (uint64_t)n >= (uint64_t)st.st_size);
	fd_put(sl, fd);
	if (ok && (uint64_t)n < len)
		memset((char *)buf + n, 0, len - (size_t)n);
	return ok;
}

/*
 * A durable write the disk can take directly: buffer, offset and length
 * aligned to DIRECT_ALIGN (payload.c's buffers are). One
 * O_DIRECT|O_DSYNC pwrite costs about what a raw durable write does; a
 * buffered write and fdatasync took twice that (the tracer: 4 KiB QD1 on
 * one node, ~57 us in pwrite and ~210 us in fdatasync). 0 on success, 1
 * when this file system or this write cannot go direct (the caller writes
 * it buffered), or -errno.
 */
#define DIRECT_ALIGN 4096
static bool direct_off; /* a file system without O_DIRECT: stop trying */

/* a durable write of buf that may go direct: O_DIRECT is on, and all is aligned */
static bool direct_ok(const void *buf, uint32_t len, uint64_t off)
{
	return !__atomic_load_n(&direct_off, __ATOMIC_RELAXED) &&
	       !(((uintptr_t)buf | len | off) & (DIRECT_ALIGN - 1));
}

static int write_direct(uint64_t oid, const void *buf, uint32_t len, uint64_t off)
{
	struct fd_slot *sl;
	int fd, ret;

	if (!direct_ok(buf, len, off))
		return 1;
	fd = fd_get(oid, FD_WRITE, &sl);
	if (fd == -EINVAL) {
		__atomic_store_n(&direct_off, true, __ATOMIC_RELAXED);
		return 1;
	}
	if (fd < 0)
		return fd;
	ret = sd_pwrite_full(fd, buf, len, off);
	fd_put(sl, fd);
	return ret == -EINVAL ? 1 : ret;
}

static int plain_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	int fd, ret;

	if (sync) {
		ret = write_direct(oid, buf, len, off);
		if (ret <= 0) {
			if (ret) {
				sd_err("write %016" PRIx64 " failed: %s", oid, strerror(-ret));
				return err_to_res(-ret);
			}
			return SD_RES_SUCCESS;
		}
	}
	fd = openat(obj_dir_fd, obj_name(oid).s, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_to_res(errno);
	ret = sd_pwrite_full(fd, buf, len, off);
	if (!ret && sync && fdatasync(fd) < 0)
		ret = -errno;
	if (!ret && !sync)
		ret = mark_dirty(oid, fd, false);
	close(fd);
	if (ret) {
		sd_err("write %016" PRIx64 " failed: %s", oid, strerror(-ret));
		return err_to_res(-ret);
	}
	return SD_RES_SUCCESS;
}

/* copy the stored object cow_oid into fd; a missing source is an error */
static int copy_object(uint64_t cow_oid, int fd)
{
	char *buf;
	int src, ret = 0;
	off_t off = 0;

	src = openat(obj_dir_fd, obj_name(cow_oid).s, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		return -errno;
	buf = malloc(1 << 20);
	if (!buf) {
		close(src);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = pread(src, buf, 1 << 20, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		ret = sd_pwrite_full(fd, buf, n, off);
		if (ret)
			break;
		off += n;
	}
	free(buf);
	close(src);
	return ret;
}

/*
 * Move tmp to name unless name exists: 0, -EEXIST, or -errno. One syscall
 * where the filesystem has RENAME_NOREPLACE, a link and an unlink where not.
 */
static int publish(const char *tmp, const char *name)
{
	if (renameat2(obj_dir_fd, tmp, obj_dir_fd, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(obj_dir_fd, tmp, obj_dir_fd, name, 0) < 0)
		return -errno;
	unlinkat(obj_dir_fd, tmp, 0);
	return 0;
}

static int plain_create_and_write(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len,
				  uint64_t off, bool sync)
{
	struct obj_name name = obj_name(oid);
	/*
	 * a durable create the disk can take directly skips the page cache,
	 * as write_direct does: its data must reach the disk before the
	 * answer anyway, and the copy into the cache was most of its CPU
	 * (perf, a 3-node copies=3 512 MiB fresh write: 68% of all samples in
	 * copy_folio_from_iter_atomic under pwrite)
	 */
	bool direct = sync && !cow_oid && direct_ok(buf, len, off);
	char tmp[64];
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), ".tmp.%s.%ld", name.s, (long)syscall(SYS_gettid));
	fd = openat(obj_dir_fd, tmp,
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
	if (fd < 0 && direct && errno == EINVAL) {
		__atomic_store_n(&direct_off, true, __ATOMIC_RELAXED);
		direct = false;
		fd = openat(obj_dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (fd < 0) {
		ret = -errno;
		goto out_err;
	}
	if (cow_oid) {
		ret = copy_object(cow_oid, fd);
		if (ret) {
			sd_err("copy-on-write of %016" PRIx64 " from %016" PRIx64 " failed: %s", oid,
			       cow_oid, strerror(-ret));
			goto out_unlink;
		}
	}
	ret = sd_pwrite_full(fd, buf, len, off);
	if (ret == -EINVAL && direct && fcntl(fd, F_SETFL, 0) == 0)
		ret = sd_pwrite_full(fd, buf, len, off); /* this one cannot go direct */
	if (ret)
		goto out_unlink;
	if (sync && fdatasync(fd) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	close(fd);
	fd = -1;
	ret = publish(tmp, name.s);
	if (!ret) /* a descriptor of an earlier file of that name is stale */
		fd_forget(oid, false);
	if (ret == -EEXIST) { /* created meanwhile: the write applies to it */
		unlinkat(obj_dir_fd, tmp, 0);
		return plain_write(oid, buf, len, off, sync);
	}
	if (ret)
		goto out_unlink;
	if (sync)
		fsync(obj_dir_fd);
	else if (mark_dirty(oid, -1, true))
		return SD_RES_EIO;
	return SD_RES_SUCCESS;

out_unlink:
	if (fd >= 0)
		close(fd);
	unlinkat(obj_dir_fd, tmp, 0);
out_err:
	sd_err("create %016" PRIx64 " failed: %s", oid, strerror(-ret));
	return ret == -ENOENT ? SD_RES_NO_BASE_VDI : err_to_res(-ret);
}

static int plain_remove(uint64_t oid)
{
	int ret = unlinkat(obj_dir_fd, obj_name(oid).s, 0) < 0 ? errno : 0;

	fd_forget(oid, false);
	return ret ? err_to_res(ret) : SD_RES_SUCCESS;
}

static int plain_flush(void)
{
	/* everything written before the syncfs is durable after it */
	pthread_mutex_lock(&dirty_lock);
	if (dirty)
		memset(dirty, 0, dirty_slots * sizeof(*dirty));
	dirty_nr = 0;
	dir_dirty = false;
	pthread_mutex_unlock(&dirty_lock);
	if (syncfs(obj_dir_fd) < 0) {
		sd_err("syncfs %s failed: %m", obj_dir);
		return SD_RES_EIO;
	}
	return SD_RES_SUCCESS;
}

struct sync_job {
	const uint64_t *oids;
	size_t nr;
	size_t next; /* atomic */
	int ret;     /* the first error, -errno (atomic) */
};

static void *sync_worker(void *arg)
{
	struct sync_job *job = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->nr) {
		int fd = openat(obj_dir_fd, obj_name(job->oids[i]).s, O_RDONLY | O_CLOEXEC), err = 0;

		if (fd < 0) {
			if (errno != ENOENT) /* removed since: nothing to sync */
				err = -errno;
		} else {
			if (fdatasync(fd) < 0)
				err = -errno;
			close(fd);
		}
		if (err) {
			int zero = 0;

			__atomic_compare_exchange_n(&job->ret, &zero, err, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

/* make durable what vid wrote without sync since its last flush */
static int plain_flush_vdi(uint32_t vid)
{
	struct sync_job job = { 0 };
	pthread_t th[FLUSH_THREADS];
	size_t nr;
	bool dir;
	int n = 0;
	uint64_t *oids = dirty_take(vid, &nr, &dir);

	if (nr == SIZE_MAX) { /* no memory to sort them out: sync everything */
		free(oids); /* NULL then; said for the analyser */
		return plain_flush();
	}
	job.oids = oids;
	job.nr = nr;
	/* a few threads: the disk sees several syncs at once, as it would a syncfs */
	while (nr > 1 && n < FLUSH_THREADS && (size_t)n < nr &&
	       !pthread_create(&th[n], NULL, sync_worker, &job))
		n++;
	sync_worker(&job);
	while (n--)
		pthread_join(th[n], NULL);
	if (dir && fsync(obj_dir_fd) < 0 && !job.ret)
		job.ret = -errno;
	if (job.ret) {
		/* not durable: keep them dirty, for the next flush to try again */
		pthread_mutex_lock(&dirty_lock);
		for (size_t i = 0; oids && i < nr; i++)
			dirty_insert(oids[i]);
		dir_dirty |= dir;
		pthread_mutex_unlock(&dirty_lock);
	}
	__atomic_add_fetch(&nr_vdi_synced, nr, __ATOMIC_RELAXED);
	sd_debug("flush of vid %06" PRIx32 ": %zu object(s) synced%s, %" PRIu64 " in all", vid,
		 nr, dir ? " and the directory" : "",
		 __atomic_load_n(&nr_vdi_synced, __ATOMIC_RELAXED));
	free(oids);
	if (job.ret) {
		sd_err("flush of vid %06" PRIx32 " failed: %s", vid, strerror(-job.ret));
		return err_to_res(-job.ret);
	}
	return SD_RES_SUCCESS;
}

/*
 * fn for every object file (16 hex digits) in the directory fd: 0, fn's
 * first non-zero (a -errno), or -errno of reading the directory
 */
static int for_each_in(int fd, int (*fn)(uint64_t oid, void *arg), void *arg)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;

	fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (!ret && (de = readdir(d))) {
		char *end;
		uint64_t oid;

		if (strlen(de->d_name) != 16)
			continue;
		oid = strtoull(de->d_name, &end, 16);
		if (*end)
			continue;
		ret = fn(oid, arg);
	}
	closedir(d);
	return ret;
}

static int plain_for_each(int (*fn)(uint64_t oid, void *arg), void *arg)
{
	return for_each_in(obj_dir_fd, fn, arg);
}

struct stat_acc {
	uint64_t used, nr;
};

static int stat_one(uint64_t oid, void *arg)
{
	struct stat_acc *acc = arg;
	struct stat st;

	if (fstatat(obj_dir_fd, obj_name(oid).s, &st, 0) == 0) {
		acc->used += (uint64_t)st.st_blocks * 512;
		acc->nr++;
	}
	return 0;
}

static int plain_stat(struct store_stat *st)
{
	struct statvfs vfs;
	struct stat_acc acc = { 0 };

	if (statvfs(obj_dir, &vfs) < 0)
		return SD_RES_EIO;
	st->size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	st->free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (plain_for_each(stat_one, &acc) < 0)
		return SD_RES_EIO;
	st->used = acc.used;
	st->nr_objects = acc.nr;
	return SD_RES_SUCCESS;
}

#define STALE_DIR ".stale"

static int stale_one(uint64_t oid, void *arg)
{
	uint64_t *nr = arg;
	struct obj_name n = obj_name(oid);
	char to[32];

	snprintf(to, sizeof(to), STALE_DIR "/%s", n.s);
	if (renameat(obj_dir_fd, n.s, obj_dir_fd, to) < 0) {
		sd_err("cannot set %016" PRIx64 " aside: %m", oid);
		return -EIO;
	}
	fd_forget(oid, false);
	(*nr)++;
	return 0;
}

static int plain_stale_all(uint64_t *nr)
{
	int ret;

	*nr = 0;
	if (mkdirat(obj_dir_fd, STALE_DIR, 0755) < 0 && errno != EEXIST) {
		sd_err("cannot create %s/" STALE_DIR ": %m", obj_dir);
		return SD_RES_EIO;
	}
	ret = plain_for_each(stale_one, nr);
	if (!ret && fsync(obj_dir_fd) < 0)
		ret = -errno;
	return ret ? SD_RES_EIO : SD_RES_SUCCESS;
}

static int plain_read_stale(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	char path[32];
	int fd, ret;

	snprintf(path, sizeof(path), STALE_DIR "/%s", obj_name(oid).s);
	fd = openat(obj_dir_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_to_res(errno);
	ret = sd_pread_full(fd, buf, len, off);
	close(fd);
	return ret ? err_to_res(-ret) : SD_RES_SUCCESS;
}

static int plain_for_each_stale(int (*fn)(uint64_t oid, void *arg), void *arg)
{
	int fd = openat(obj_dir_fd, STALE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	ret = for_each_in(fd, fn, arg);
	close(fd);
	return ret;
}

static int unlink_stale(uint64_t oid, void *arg)
{
	char path[32];

	snprintf(path, sizeof(path), STALE_DIR "/%s", obj_name(oid).s);
	if (unlinkat(obj_dir_fd, path, 0) < 0 && errno != ENOENT) {
		sd_err("cannot remove the stale copy of %016" PRIx64 ": %m", oid);
		return -EIO;
	}
	return 0;
}

static int plain_purge_stale(void)
{
	return plain_for_each_stale(unlink_stale, NULL) ? SD_RES_EIO : SD_RES_SUCCESS;
}

static const struct store_driver plain_store = {
	.name = "plain",
	.init = plain_init,
	.exist = plain_exist,
	.read = plain_read,
	.read_cached = plain_read_cached,
	.write = plain_write,
	.create_and_write = plain_create_and_write,
	.remove = plain_remove,
	.flush = plain_flush,
	.flush_vdi = plain_flush_vdi,
	.for_each = plain_for_each,
	.stat = plain_stat,
	.stale_all = plain_stale_all,
	.read_stale = plain_read_stale,
	.for_each_stale = plain_for_each_stale,
	.purge_stale = plain_purge_stale,
};

store_driver_register(plain_store);
