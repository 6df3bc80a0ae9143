/*
 * The plain store's object files (plain.h): their names, the cache of
 * their descriptors, copies and the publication of a new file under its
 * name. The floor below plain.c and plain_dir.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/openat2.h>

#include "internal_proto.h"
#include "util.h"
#include "fds.h"
#include "plain.h"

struct obj_name obj_name(uint64_t oid)
{
	static const char hex[] = "0123456789abcdef";
	struct obj_name n;

	for (int i = 15; i >= 0; i--, oid >>= 4)
		n.s[i] = hex[oid & 0xf];
	n.s[16] = '\0';
	return n;
}

/*
 * The descriptor cache of durable direct writes and of reads: a 4 KiB
 * write or read spent two syscalls and a path lookup on openat and close
 * around its pwrite or pread. A slot is one oid and one kind (FD_WRITE:
 * O_DIRECT|O_DSYNC, FD_READ: buffered, read-only). Set associative (a set
 * per hash of the oid, both kinds in it, LRU within it), under one lock,
 * bounded: its share of the descriptor limit (fds.h: an eighth, at most
 * FD_MAX_SETS x FD_WAYS, 2,048, the files of 8 GiB of 4 MiB objects; 256
 * held half of a 2 GiB VDI's random reads), as fd_sets sets of fd_ways,
 * both set by fd_cache_init before any I/O. A user holds a
 * reference; a slot dropped while in use is dead (never found again) and
 * closed by its last user.
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
 *
 * Counted (fd_cache_stat: collie node stat --caches, /metrics): hits,
 * misses (an open), evictions (a slot taken for another oid) and
 * invalidations (a slot dropped by fd_forget or found unlinked), relaxed
 * atomics beside the lock.
 */
#define FD_MAX_SETS 256 /* a power of 2 */
#define FD_WAYS 8
_Static_assert(FD_MAX_SETS * FD_WAYS == FDS_STORE_CACHE_MAX, "the cache's share of descriptors");

struct fd_slot {
	uint64_t oid;
	uint64_t used; /* fd_clock at the last use: LRU within the set */
	int fd;	       /* -1: free */
	int refs;
	enum fd_kind kind;
	bool dead;
};

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fd_slot fd_cache[FD_MAX_SETS][FD_WAYS] = {
	[0 ... FD_MAX_SETS - 1] = { [0 ... FD_WAYS - 1] = { .fd = -1 } }
};
static int fd_sets = 1, fd_ways; /* fd_cache_init: from the descriptor limit */
static uint64_t fd_gen, fd_clock;
static uint64_t fd_hits, fd_misses, fd_evictions, fd_invalidations;

#define FD_COUNT(c) __atomic_fetch_add(&(c), 1, __ATOMIC_RELAXED)

static int fd_set_of(uint64_t oid)
{
	/* the product's top bits: consecutive indexes of one VDI spread over the sets */
	return (int)((oid * UINT64_C(0x9e3779b97f4a7c15)) >> 56 & (uint64_t)(fd_sets - 1));
}

static struct fd_slot *fd_cache_set(uint64_t oid)
{
	return fd_cache[fd_set_of(oid)];
}

/* fd_lock held: drop a slot; its descriptor, to close after the unlock, or -1 */
static int fd_drop(struct fd_slot *sl)
{
	int fd = sl->fd;

	if (fd < 0 || sl->dead)
		return -1;
	FD_COUNT(fd_invalidations);
	if (sl->refs) {
		sl->dead = true; /* its last user closes it */
		return -1;
	}
	sl->fd = -1;
	return fd;
}

/*
 * Every slot (all: of every set there may be, whatever fd_sets is now), or
 * oid's; the descriptors are closed after the unlock
 */
void fd_forget(uint64_t oid, bool all)
{
	int close_fds[FD_MAX_SETS * FD_WAYS], n = 0;
	int from = all ? 0 : fd_set_of(oid), to = all ? FD_MAX_SETS : from + 1;

	pthread_mutex_lock(&fd_lock);
	fd_gen++;
	for (int i = from; i < to; i++)
		for (int w = 0; w < FD_WAYS; w++) {
			int fd;

			if (!all && fd_cache[i][w].oid != oid)
				continue;
			fd = fd_drop(&fd_cache[i][w]);
			if (fd >= 0)
				close_fds[n++] = fd;
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
static bool nowait_off; /* openat2 without RESOLVE_CACHED (before Linux 5.12): no more tries */

/* openat, or (nowait) openat2 with RESOLVE_CACHED: -EAGAIN where the lookup would wait */
static int open_name(int dfd, const char *name, int flags, bool nowait)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = RESOLVE_CACHED };
	long fd;

	if (!nowait)
		return openat(dfd, name, flags | O_CLOEXEC);
	if (__atomic_load_n(&nowait_off, __ATOMIC_RELAXED)) {
		errno = EAGAIN;
		return -1;
	}
	fd = syscall(SYS_openat2, dfd, name, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == EINVAL || errno == E2BIG)) {
		__atomic_store_n(&nowait_off, true, __ATOMIC_RELAXED);
		errno = EAGAIN;
	}
	return (int)fd;
}

static int open_kind(int dfd, uint64_t oid, enum fd_kind kind, bool nowait)
{
	int flags = kind == FD_READ ? O_RDONLY | O_NOATIME : O_WRONLY | O_DIRECT | O_DSYNC;
	int fd = open_name(dfd, obj_name(oid).s, flags, nowait);

	if (fd < 0 && errno == EPERM && kind == FD_READ)
		fd = open_name(dfd, obj_name(oid).s, O_RDONLY, nowait);
	return fd < 0 ? -errno : fd;
}

/* the cached descriptor of oid of that kind, taken (fd_put gives it back), or -1 */
static int find(uint64_t oid, enum fd_kind kind, struct fd_slot **slotp)
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
 * fd_get, or fd_get_nowait: a hit there is not checked (its caller checks
 * the link count itself), and it opens only what the dentry cache resolves
 */
static int get(int dfd, uint64_t oid, enum fd_kind kind, struct fd_slot **slotp, bool nowait)
{
	struct fd_slot *set = fd_cache_set(oid), *victim = NULL, *sl;
	int fd, old = -1;
	uint64_t gen;
	struct stat st;

	fd = find(oid, kind, &sl);
	if (fd >= 0 && (nowait || (fstat(fd, &st) == 0 && st.st_nlink))) {
		FD_COUNT(fd_hits);
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
	fd = open_kind(dfd, oid, kind, nowait);
	if (fd != -EAGAIN || !nowait)
		FD_COUNT(fd_misses);
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
		if (old >= 0)
			FD_COUNT(fd_evictions);
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

int fd_get(int dfd, uint64_t oid, enum fd_kind kind, struct fd_slot **slotp)
{
	return get(dfd, oid, kind, slotp, false);
}

int fd_get_nowait(int dfd, uint64_t oid, enum fd_kind kind, struct fd_slot **slotp)
{
	return get(dfd, oid, kind, slotp, true);
}

void fd_put(struct fd_slot *sl, int fd)
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

/*
 * The cache's shape for the descriptor limit: its share (fds.h) in as many
 * whole sets of FD_WAYS as fit (a power of 2), or one smaller set under a
 * limit below 64 (none below 8)
 */
static void fd_shape_for_limit(int *sets, int *ways)
{
	struct rlimit rl;
	uint64_t n;

	*sets = 1;
	*ways = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	n = fds_store_cache(rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur);
	if (n < FD_WAYS) {
		*ways = (int)n;
		return;
	}
	*ways = FD_WAYS;
	while (*sets * 2 <= FD_MAX_SETS && (uint64_t)*sets * 2 * FD_WAYS <= n)
		*sets *= 2;
}

int err_to_res(int err)
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

/* copy the file src into fd: 0 or -errno */
int plain_copy_fd(int src, int fd)
{
	char *buf;
	int ret = 0;
	off_t off = 0;

	buf = malloc(1 << 20);
	if (!buf)
		return -ENOMEM;
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
	return ret;
}

/*
 * Move tmp to name unless name exists: 0, -EEXIST, or -errno. One syscall
 * where the filesystem has RENAME_NOREPLACE, a link and an unlink where not.
 */
int plain_publish(int dfd, const char *tmp, const char *name)
{
	if (renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dfd, tmp, dfd, name, 0) < 0)
		return -errno;
	unlinkat(dfd, tmp, 0);
	return 0;
}


void fd_cache_init(void)
{
	/* another directory, or this one again: no descriptor of before is valid */
	fd_forget(0, true);
	pthread_mutex_lock(&fd_lock);
	fd_shape_for_limit(&fd_sets, &fd_ways);
	pthread_mutex_unlock(&fd_lock);
}

int fd_cache_stat(struct sd_stat_cache *out, int max)
{
	uint32_t cached = 0, in_use = 0;

	if (max < 1)
		return 0;
	pthread_mutex_lock(&fd_lock);
	for (int i = 0; i < FD_MAX_SETS; i++)
		for (int w = 0; w < FD_WAYS; w++) {
			const struct fd_slot *sl = &fd_cache[i][w];

			if (sl->fd < 0 || sl->dead)
				continue;
			cached++;
			in_use += sl->refs > 0;
		}
	out->capacity = (uint32_t)(fd_sets * fd_ways);
	pthread_mutex_unlock(&fd_lock);
	snprintf(out->name, sizeof(out->name), "fd");
	out->nr_cached = cached;
	out->nr_in_use = in_use;
	out->nr_hits = __atomic_load_n(&fd_hits, __ATOMIC_RELAXED);
	out->nr_misses = __atomic_load_n(&fd_misses, __ATOMIC_RELAXED);
	out->nr_evictions = __atomic_load_n(&fd_evictions, __ATOMIC_RELAXED);
	out->nr_invalidations = __atomic_load_n(&fd_invalidations, __ATOMIC_RELAXED);
	return 1;
}
