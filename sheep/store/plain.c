/*
 * The plain store: one file per object under DIR/obj (under PATH/obj of
 * each disk with sheep --disk: md.h finds an object's disk), named by the
 * oid in 16 hex digits. New objects are written to a temporary file and renamed
 * into place, so an object appears whole or not at all; the rename never
 * replaces an object that another create published meanwhile (the replica
 * layer orders creates of one object; this is the last line). obj/.stale
 * keeps the objects that a rejoining node set aside (store.h, stale_all;
 * plain_dir.c: the walks of the directories, the stale copies, the moves
 * between disks).
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
#include "md.h"
#include "plain.h"

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

/* the leftovers of creations and moves that a crash interrupted */
static int clean_tmp(int dfd, void *arg)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	(void)arg;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ".tmp.", 5))
			unlinkat(dfd, de->d_name, 0);
	closedir(d);
	return 0;
}

static int plain_init(const char *dir)
{
	int ret;

	fd_cache_init();
	md_set_store(&plain_md_ops);
	ret = md_init(dir);
	if (ret) {
		sd_err("cannot open the store's disks: %s", strerror(-ret));
		return SD_RES_EIO;
	}
	md_for_each_dir(clean_tmp, NULL);
	return SD_RES_SUCCESS;
}

static bool plain_exist(uint64_t oid)
{
	struct md_io io;
	bool ret;

	md_get(oid, &io);
	ret = faccessat(io.fd, obj_name(oid).s, F_OK, 0) == 0;
	md_put(&io);
	return ret;
}

/*
 * The answer to an I/O that failed with err on io's disk: a disk taken out
 * for it (md_failed) lost the object, which the layers above fetch again
 * or read elsewhere (SD_RES_NO_OBJ); anything else as it is.
 */
static int io_err(struct md_io *io, int err)
{
	if (md_failed(io, err))
		return SD_RES_NO_OBJ;
	return err_to_res(err);
}

static int plain_read(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	struct fd_slot *sl;
	struct md_io io;
	int fd, ret;

	md_get(oid, &io);
	fd = fd_get(io.fd, oid, FD_READ, &sl);
	if (fd < 0) {
		ret = io_err(&io, -fd);
		goto out_put;
	}
	ret = sd_pread_full(fd, buf, len, off);
	fd_put(sl, fd);
	if (ret) {
		sd_err("read %016" PRIx64 " failed: %s", oid, strerror(-ret));
		ret = io_err(&io, -ret);
	}
out_put:
	md_put(&io);
	return ret;
}

/*
 * A read from the page cache alone, for the main thread: through the
 * cached read descriptor, or one opened from the dentry cache alone
 * (openat2's RESOLVE_CACHED: a miss here would otherwise cost the read a
 * hop to an io worker), with RWF_NOWAIT (no wait for the disk: EAGAIN
 * when a page is not in memory).
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
	struct md_io io;
	struct stat st;
	ssize_t n;
	bool ok;
	int fd;

	if (off > (uint64_t)INT64_MAX - len)
		return false;
	if (!md_tryget(oid, &io)) /* a move holds it: the worker's read waits */
		return false;
	fd = fd_get_nowait(io.fd, oid, FD_READ, &sl);
	if (fd < 0) {
		md_put(&io);
		return false;
	}
	n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);
	ok = n >= 0 && fstat(fd, &st) == 0 && st.st_nlink &&
	     ((uint64_t)n == len || off + (uint64_t)n >= (uint64_t)st.st_size);
	fd_put(sl, fd);
	md_put(&io);
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

static int write_direct(int dfd, uint64_t oid, const void *buf, uint32_t len, uint64_t off)
{
	struct fd_slot *sl;
	int fd, ret;

	if (!direct_ok(buf, len, off))
		return 1;
	fd = fd_get(dfd, oid, FD_WRITE, &sl);
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

/* write to oid in the directory dfd: 0 or -errno */
static int write_in(int dfd, uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	int fd, ret;

	if (sync) {
		ret = write_direct(dfd, oid, buf, len, off);
		if (ret <= 0)
			goto out;
	}
	fd = openat(dfd, obj_name(oid).s, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = sd_pwrite_full(fd, buf, len, off);
	if (!ret && sync && fdatasync(fd) < 0)
		ret = -errno;
	if (!ret && !sync)
		ret = mark_dirty(oid, fd, false);
	close(fd);
out:
	if (ret)
		sd_err("write %016" PRIx64 " failed: %s", oid, strerror(-ret));
	return ret;
}

static int plain_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	struct md_io io;
	int ret;

	md_get(oid, &io);
	ret = write_in(io.fd, oid, buf, len, off, sync);
	ret = ret ? io_err(&io, -ret) : SD_RES_SUCCESS;
	md_put(&io);
	return ret;
}

/* copy the stored object cow_oid into fd; a missing source is an error */
static int copy_object(uint64_t cow_oid, int fd)
{
	struct md_io io;
	int src, ret;

	md_get(cow_oid, &io);
	src = openat(io.fd, obj_name(cow_oid).s, O_RDONLY | O_CLOEXEC);
	ret = src < 0 ? -errno : plain_copy_fd(src, fd);
	if (src >= 0)
		close(src);
	md_put(&io);
	return ret;
}

/* create oid in the directory dfd: 0 or -errno; *no_base when cow_oid is not stored */
static int create_in(int dfd, uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len,
		     uint64_t off, bool sync, bool *no_base)
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
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0),
		    0644);
	if (fd < 0 && direct && errno == EINVAL) {
		__atomic_store_n(&direct_off, true, __ATOMIC_RELAXED);
		direct = false;
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
			*no_base = ret == -ENOENT;
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
	ret = plain_publish(dfd, tmp, name.s);
	if (!ret) /* a descriptor of an earlier file of that name is stale */
		fd_forget(oid, false);
	if (ret == -EEXIST) { /* created meanwhile: the write applies to it */
		unlinkat(dfd, tmp, 0);
		return write_in(dfd, oid, buf, len, off, sync);
	}
	if (ret)
		goto out_unlink;
	if (sync)
		fsync(dfd);
	else if (mark_dirty(oid, -1, true))
		return -EIO;
	return 0;

out_unlink:
	if (fd >= 0)
		close(fd);
	unlinkat(dfd, tmp, 0);
out_err:
	sd_err("create %016" PRIx64 " failed: %s", oid, strerror(-ret));
	return ret;
}

static int plain_create_and_write(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len,
				  uint64_t off, bool sync)
{
	bool no_base = false, again;
	struct md_io io;
	int ret;

	do {
		md_get(oid, &io);
		ret = create_in(io.fd, oid, cow_oid, buf, len, off, sync, &no_base);
		/* its disk failed and is out: once more, on the disk that takes it now */
		again = ret && !no_base && md_failed(&io, -ret);
		md_put(&io);
	} while (again);
	if (no_base)
		return SD_RES_NO_BASE_VDI;
	return ret ? err_to_res(-ret) : SD_RES_SUCCESS;
}

static int plain_remove(uint64_t oid)
{
	struct md_io io;
	int ret;

	md_get(oid, &io);
	ret = unlinkat(io.fd, obj_name(oid).s, 0) < 0 ? errno : 0;
	fd_forget(oid, false);
	md_put(&io);
	return ret ? err_to_res(ret) : SD_RES_SUCCESS;
}

static int syncfs_one(int dfd, void *arg)
{
	(void)arg;
	if (syncfs(dfd) < 0) {
		sd_err("syncfs of a store disk failed: %m");
		return -EIO;
	}
	return 0;
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
	return md_for_each_dir(syncfs_one, NULL) ? SD_RES_EIO : SD_RES_SUCCESS;
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
		struct md_io io;
		int fd, err = 0;

		md_get(job->oids[i], &io);
		fd = openat(io.fd, obj_name(job->oids[i]).s, O_RDONLY | O_CLOEXEC);
		md_put(&io);
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

static int fsync_one(int dfd, void *arg)
{
	(void)arg;
	return fsync(dfd) < 0 ? -errno : 0;
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
	if (dir && md_for_each_dir(fsync_one, NULL) && !job.ret)
		job.ret = -EIO;
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
	.caches = fd_cache_stat,
};

store_driver_register(plain_store);
