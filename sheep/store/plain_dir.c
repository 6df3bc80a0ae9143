/*
 * The plain store's walks of its object directories (plain.h): every disk's
 * (md.h), for listing, statistics and the stale copies, and the move of an
 * object from one disk to another that md.c's mover asks for.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "internal_proto.h"
#include "logger.h"
#include "util.h"
#include "md.h"
#include "plain.h"

#define STALE_DIR ".stale"

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

/* a walk of every disk: fn and arg of the caller, and the disk being walked */
struct walk {
	int (*fn)(uint64_t oid, void *arg);
	void *arg;
	int dfd;
};

static int walk_dir(int dfd, void *arg)
{
	struct walk *w = arg;

	return for_each_in(dfd, w->fn, w->arg);
}

int plain_for_each(int (*fn)(uint64_t oid, void *arg), void *arg)
{
	struct walk w = { fn, arg, -1 };

	return md_for_each_dir(walk_dir, &w);
}

struct count_acc {
	int dfd;
	uint64_t used, nr;
};

static int count_one(uint64_t oid, void *arg)
{
	struct count_acc *acc = arg;
	struct stat st;

	if (fstatat(acc->dfd, obj_name(oid).s, &st, 0) == 0) {
		acc->used += (uint64_t)st.st_blocks * 512;
		acc->nr++;
	}
	return 0;
}

static int count_dir(int dfd, uint64_t *used, uint64_t *nr)
{
	struct count_acc acc = { dfd, 0, 0 };
	int ret = for_each_in(dfd, count_one, &acc);

	*used = acc.used;
	*nr = acc.nr;
	return ret;
}

/* the sum over the disks; a file system that holds several is counted once */
struct stat_acc {
	struct store_stat st;
	unsigned long fsid[MD_MAX_DISKS];
	int nr_fs;
};

static int stat_dir(int dfd, void *arg)
{
	struct stat_acc *acc = arg;
	struct statvfs vfs;
	uint64_t used, nr;
	bool seen = false;

	if (fstatvfs(dfd, &vfs) < 0 || count_dir(dfd, &used, &nr) < 0)
		return -EIO;
	for (int i = 0; i < acc->nr_fs; i++)
		seen |= acc->fsid[i] == vfs.f_fsid;
	if (!seen && acc->nr_fs < MD_MAX_DISKS) {
		acc->fsid[acc->nr_fs++] = vfs.f_fsid;
		acc->st.size += (uint64_t)vfs.f_blocks * vfs.f_frsize;
		acc->st.free += (uint64_t)vfs.f_bavail * vfs.f_frsize;
	}
	acc->st.used += used;
	acc->st.nr_objects += nr;
	return 0;
}

int plain_stat(struct store_stat *st)
{
	struct stat_acc acc = { 0 };

	if (md_for_each_dir(stat_dir, &acc))
		return SD_RES_EIO;
	*st = acc.st;
	return SD_RES_SUCCESS;
}

/*
 * Set oid aside, found in the directory dfd. Under oid's stripe lock: a
 * move that took it to another disk meanwhile is finished, and it is set
 * aside there.
 */
static int stale_one(uint64_t oid, void *arg)
{
	struct walk *w = arg;
	struct obj_name n = obj_name(oid);
	struct md_io io;
	char to[32];
	int ret;

	snprintf(to, sizeof(to), STALE_DIR "/%s", n.s);
	md_get(oid, &io);
	ret = renameat(w->dfd, n.s, w->dfd, to);
	if (ret < 0 && errno == ENOENT && io.fd != w->dfd) {
		(void)mkdirat(io.fd, STALE_DIR, 0755); /* there already, or the rename says */
		ret = renameat(io.fd, n.s, io.fd, to);
	}
	if (ret < 0 && errno == ENOENT)
		ret = 0; /* removed meanwhile */
	else if (ret < 0)
		sd_err("cannot set %016" PRIx64 " aside: %m", oid);
	else
		(*(uint64_t *)w->arg)++;
	fd_forget(oid, false);
	md_put(&io);
	return ret < 0 ? -EIO : 0;
}

/* set oid aside in the directory of w->dfd, which no access reaches yet */
static int aside_one(uint64_t oid, void *arg)
{
	struct walk *w = arg;
	struct obj_name n = obj_name(oid);
	char to[32];

	snprintf(to, sizeof(to), STALE_DIR "/%s", n.s);
	if (renameat(w->dfd, n.s, w->dfd, to) < 0)
		return -errno;
	(*(uint64_t *)w->arg)++;
	return 0;
}

static int md_set_aside(int dfd, uint64_t *nr)
{
	struct walk w = { aside_one, nr, dfd };
	int ret;

	*nr = 0;
	if (mkdirat(dfd, STALE_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	ret = for_each_in(dfd, aside_one, &w);
	if (!ret && fsync(dfd) < 0)
		ret = -errno;
	return ret;
}

static int stale_dir(int dfd, void *arg)
{
	struct walk *w = arg;
	int ret;

	if (mkdirat(dfd, STALE_DIR, 0755) < 0 && errno != EEXIST) {
		sd_err("cannot create a disk's " STALE_DIR ": %m");
		return -EIO;
	}
	w->dfd = dfd;
	ret = for_each_in(dfd, stale_one, w);
	if (!ret && fsync(dfd) < 0)
		ret = -errno;
	return ret;
}

int plain_stale_all(uint64_t *nr)
{
	struct walk w = { NULL, nr, -1 };

	*nr = 0;
	return md_for_each_dir(stale_dir, &w) ? SD_RES_EIO : SD_RES_SUCCESS;
}

struct stale_read {
	uint64_t oid, off;
	void *buf;
	uint32_t len;
	int ret;
};

/* 1 once read (the walk stops), 0 when this disk has no stale copy */
static int read_stale_in(int dfd, void *arg)
{
	struct stale_read *r = arg;
	char path[32];
	int fd;

	snprintf(path, sizeof(path), STALE_DIR "/%s", obj_name(r->oid).s);
	fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			r->ret = err_to_res(errno);
		return 0;
	}
	r->ret = sd_pread_full(fd, r->buf, r->len, r->off);
	r->ret = r->ret ? err_to_res(-r->ret) : SD_RES_SUCCESS;
	close(fd);
	return 1;
}

int plain_read_stale(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	struct stale_read r = { oid, off, buf, len, SD_RES_NO_OBJ };

	md_for_each_dir(read_stale_in, &r);
	return r.ret;
}

static int for_each_stale_in(int dfd, void *arg)
{
	struct walk *w = arg;
	int fd = openat(dfd, STALE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	w->dfd = dfd;
	ret = for_each_in(fd, w->fn, w->arg);
	close(fd);
	return ret;
}

int plain_for_each_stale(int (*fn)(uint64_t oid, void *arg), void *arg)
{
	struct walk w = { fn, arg, -1 };

	return md_for_each_dir(for_each_stale_in, &w);
}

static int unlink_stale(uint64_t oid, void *arg)
{
	struct walk *w = arg;
	char path[32];

	snprintf(path, sizeof(path), STALE_DIR "/%s", obj_name(oid).s);
	if (unlinkat(w->dfd, path, 0) < 0 && errno != ENOENT) {
		sd_err("cannot remove the stale copy of %016" PRIx64 ": %m", oid);
		return -EIO;
	}
	return 0;
}

static int purge_dir(int dfd, void *arg)
{
	struct walk w = { unlink_stale, NULL, dfd };
	int fd = openat(dfd, STALE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	(void)arg;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	w.arg = &w;
	ret = for_each_in(fd, unlink_stale, &w);
	close(fd);
	return ret;
}

int plain_purge_stale(void)
{
	return md_for_each_dir(purge_dir, NULL) ? SD_RES_EIO : SD_RES_SUCCESS;
}

/* whether the file src was modified after name in the directory dfd */
static bool newer_than(int src, int dfd, const char *name)
{
	struct stat a, b;

	if (fstat(src, &a) || fstatat(dfd, name, &b, 0))
		return false;
	return a.st_mtim.tv_sec > b.st_mtim.tv_sec ||
	       (a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec > b.st_mtim.tv_nsec);
}

/* tmp over name in the directory dfd: 0 or -errno */
static int replace(int dfd, const char *tmp, const char *name)
{
	return renameat(dfd, tmp, dfd, name) < 0 ? -errno : 0;
}

/*
 * md's move, under oid's stripe lock: a durable copy on the new disk first,
 * then the old one unlinked. A copy on the new disk already (a crash in the
 * middle of a move, a disk listed again at a start) stays unless the old
 * one was written after it.
 */
static int md_move(uint64_t oid, int from_fd, int to_fd)
{
	struct obj_name n = obj_name(oid);
	char tmp[64];
	int src, dst, ret;

	src = openat(from_fd, n.s, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		return -errno;
	snprintf(tmp, sizeof(tmp), ".tmp.%s.move", n.s);
	dst = openat(to_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (dst < 0) {
		ret = -errno;
		close(src);
		return ret;
	}
	ret = plain_copy_fd(src, dst);
	if (!ret && fdatasync(dst) < 0)
		ret = -errno;
	close(dst);
	if (!ret)
		ret = plain_publish(to_fd, tmp, n.s);
	if (ret == -EEXIST) /* two copies: the one written last is the live one */
		ret = newer_than(src, to_fd, n.s) ? replace(to_fd, tmp, n.s) : 0;
	close(src);
	if (ret) {
		unlinkat(to_fd, tmp, 0);
		return ret;
	}
	unlinkat(to_fd, tmp, 0); /* after an EEXIST */
	if (fsync(to_fd) < 0)
		return -errno;
	if (unlinkat(from_fd, n.s, 0) < 0)
		return -errno;
	fd_forget(oid, false);
	return 0;
}

static void md_forget(void)
{
	fd_forget(0, true);
}

const struct md_store_ops plain_md_ops = {
	.move = md_move,
	.forget = md_forget,
	.count = count_dir,
	.set_aside = md_set_aside,
};
