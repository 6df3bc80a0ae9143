/*
 * The plain store: one file per object under DIR/obj, named by the oid in
 * 16 hex digits. New objects are written to a temporary file and renamed
 * into place, so an object appears whole or not at all; the rename never
 * replaces an object that another create published meanwhile (the replica
 * layer orders creates of one object; this is the last line). DIR/obj/.stale
 * keeps the objects that a rejoining node set aside (store.h, stale_all).
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
#include <sys/syscall.h>

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

	snprintf(obj_dir, sizeof(obj_dir), "%s/obj", dir);
	ret = sd_mkdir_p(obj_dir, 0755);
	if (ret) {
		sd_err("cannot create %s: %s", obj_dir, strerror(-ret));
		return SD_RES_EIO;
	}
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
	int fd, ret;

	fd = openat(obj_dir_fd, obj_name(oid).s, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_to_res(errno);
	ret = sd_pread_full(fd, buf, len, off);
	close(fd);
	if (ret) {
		sd_err("read %016" PRIx64 " failed: %s", oid, strerror(-ret));
		return err_to_res(-ret);
	}
	return SD_RES_SUCCESS;
}

static int plain_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	int fd, ret;

	fd = openat(obj_dir_fd, obj_name(oid).s, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_to_res(errno);
	ret = sd_pwrite_full(fd, buf, len, off);
	if (!ret && sync && fdatasync(fd) < 0)
		ret = -errno;
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
	char tmp[64];
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), ".tmp.%s.%ld", name.s, (long)syscall(SYS_gettid));
	fd = openat(obj_dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
	if (ret)
		goto out_unlink;
	if (sync && fdatasync(fd) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	close(fd);
	fd = -1;
	ret = publish(tmp, name.s);
	if (ret == -EEXIST) { /* created meanwhile: the write applies to it */
		unlinkat(obj_dir_fd, tmp, 0);
		return plain_write(oid, buf, len, off, sync);
	}
	if (ret)
		goto out_unlink;
	if (sync)
		fsync(obj_dir_fd);
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
	if (unlinkat(obj_dir_fd, obj_name(oid).s, 0) < 0)
		return err_to_res(errno);
	return SD_RES_SUCCESS;
}

static int plain_flush(void)
{
	if (syncfs(obj_dir_fd) < 0) {
		sd_err("syncfs %s failed: %m", obj_dir);
		return SD_RES_EIO;
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
	.write = plain_write,
	.create_and_write = plain_create_and_write,
	.remove = plain_remove,
	.flush = plain_flush,
	.for_each = plain_for_each,
	.stat = plain_stat,
	.stale_all = plain_stale_all,
	.read_stale = plain_read_stale,
	.for_each_stale = plain_for_each_stale,
	.purge_stale = plain_purge_stale,
};

store_driver_register(plain_store);
