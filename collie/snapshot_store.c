/*
 * The directory of cluster snapshots (collie cluster snapshot ... DIR):
 *
 *   DIR/lock              flock: exclusive for save and delete, shared for load
 *   DIR/chunks/XX/HASH    one file per distinct chunk, named by its
 *                         XXH3-128 (32 hex digits, XX its first two)
 *   DIR/snapshots/TAG     the manifest of snapshot TAG (snapshot_manifest.h)
 *
 * A chunk is written to a temporary name and renamed, so a chunk file is
 * whole or absent; the manifest is written last, after syncfs, so a
 * manifest never names a chunk that is not on disk. A chunk read back is
 * hashed again and refused when it does not match its name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collie.h"
#include "snapshot_store.h"

static int sys_err(const char *what, const char *dir, int err)
{
	collie_err("%s in %s: %s", what, dir, strerror(err));
	return EXIT_SYSFAIL;
}

int cs_store_open(struct cs_store *s, const char *dir, bool create, bool exclusive)
{
	char sub[16];

	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->dirfd = s->lockfd = -1;
	if (create && mkdir(dir, 0700) && errno != EEXIST)
		return sys_err("failed to make the directory", dir, errno);
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (s->dirfd < 0) {
		if (errno == ENOENT) {
			collie_err("no snapshot directory %s", dir);
			return EXIT_MISSING;
		}
		return sys_err("failed to open the directory", dir, errno);
	}
	if (create) {
		if ((mkdirat(s->dirfd, "chunks", 0700) && errno != EEXIST) ||
		    (mkdirat(s->dirfd, "snapshots", 0700) && errno != EEXIST))
			return sys_err("failed to make the store", dir, errno);
		for (int i = 0; i < 256; i++) {
			snprintf(sub, sizeof(sub), "chunks/%02x", i);
			if (mkdirat(s->dirfd, sub, 0700) && errno != EEXIST)
				return sys_err("failed to make the store", dir, errno);
		}
	}
	s->lockfd = openat(s->dirfd, "lock", O_RDWR | O_CREAT, 0600);
	if (s->lockfd < 0 && !create && errno == EROFS)
		s->lockfd = openat(s->dirfd, "lock", O_RDONLY);
	if (s->lockfd < 0)
		return sys_err("failed to open the lock file", dir, errno);
	if (flock(s->lockfd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB)) {
		if (errno != EWOULDBLOCK)
			return sys_err("failed to lock", dir, errno);
		collie_err("%s is in use by another collie cluster snapshot", dir);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

void cs_store_close(struct cs_store *s)
{
	if (s->lockfd >= 0)
		close(s->lockfd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->lockfd = s->dirfd = -1;
}

static void chunk_path(const uint8_t hash[CS_HASH_LEN], char *buf, size_t len)
{
	char hex[2 * CS_HASH_LEN + 1];

	cs_hash_hex(hash, hex);
	snprintf(buf, len, "chunks/%.2s/%s", hex, hex);
}

int cs_store_put(struct cs_store *s, const uint8_t hash[CS_HASH_LEN], const void *buf, size_t len)
{
	char path[80], tmp[100];
	int fd, ret;

	chunk_path(hash, path, sizeof(path));
	if (!faccessat(s->dirfd, path, F_OK, 0)) {
		s->nr_dup++;
		return EXIT_OK;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return sys_err("failed to write a chunk", s->dir, errno);
	ret = sd_write_full(fd, buf, len);
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && renameat(s->dirfd, tmp, s->dirfd, path))
		ret = -errno;
	if (ret) {
		unlinkat(s->dirfd, tmp, 0);
		return sys_err("failed to write a chunk", s->dir, -ret);
	}
	s->nr_new++;
	s->new_bytes += len;
	return EXIT_OK;
}

int cs_store_get(struct cs_store *s, const uint8_t hash[CS_HASH_LEN], void *buf, size_t len)
{
	uint8_t got[CS_HASH_LEN];
	char path[80];
	ssize_t n;
	int fd;

	chunk_path(hash, path, sizeof(path));
	fd = openat(s->dirfd, path, O_RDONLY);
	if (fd < 0) {
		collie_err("chunk %s is missing from %s", path + 10, s->dir);
		return EXIT_FAIL;
	}
	n = pread(fd, buf, len, 0);
	close(fd);
	if (n < 0)
		return sys_err("failed to read a chunk", s->dir, errno);
	cs_hash(buf, len, got);
	if ((size_t)n != len || memcmp(got, hash, CS_HASH_LEN)) {
		collie_err("chunk %s in %s is damaged (its hash does not match its name)",
			   path + 10, s->dir);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int cmp_hash(const void *a, const void *b)
{
	return memcmp(a, b, CS_HASH_LEN);
}

/* every chunk the manifest names, once each: there, of the chunk size, its hash its name */
int cs_store_check_chunks(struct cs_store *s, const struct cs_manifest *m)
{
	uint8_t(*all)[CS_HASH_LEN];
	uint64_t nr = 0;
	char *buf;
	int ret = EXIT_OK;

	for (uint32_t i = 0; i < m->nr_vdis; i++)
		nr += m->vdis[i].nr_chunks;
	all = malloc((nr ? nr : 1) * CS_HASH_LEN);
	buf = malloc(m->chunk_size);
	if (!all || !buf) {
		free(all);
		free(buf);
		return sys_err("failed to check the chunks", s->dir, ENOMEM);
	}
	nr = 0;
	for (uint32_t i = 0; i < m->nr_vdis; i++)
		for (uint64_t c = 0; c < m->vdis[i].nr_chunks; c++)
			memcpy(all[nr++], m->vdis[i].chunks[c].hash, CS_HASH_LEN);
	if (nr)
		qsort(all, nr, CS_HASH_LEN, cmp_hash);
	for (uint64_t c = 0; !ret && c < nr; c++)
		if (!c || memcmp(all[c], all[c - 1], CS_HASH_LEN))
			ret = cs_store_get(s, all[c], buf, m->chunk_size);
	free(all);
	free(buf);
	return ret;
}

int cs_store_read_manifest(struct cs_store *s, const char *tag, struct cs_manifest *m)
{
	char path[CS_TAG_MAX + 16], err[160];
	struct stat st;
	char *text;
	int fd, ret;

	memset(m, 0, sizeof(*m));
	snprintf(path, sizeof(path), "snapshots/%s", tag);
	fd = openat(s->dirfd, path, O_RDONLY);
	if (fd < 0) {
		if (errno != ENOENT)
			return sys_err("failed to open a manifest", s->dir, errno);
		collie_err("no snapshot '%s' in %s", tag, s->dir);
		return EXIT_MISSING;
	}
	if (fstat(fd, &st) || !(text = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return sys_err("failed to read a manifest", s->dir, ENOMEM);
	}
	ret = sd_read_full(fd, text, (size_t)st.st_size);
	close(fd);
	if (ret) {
		free(text);
		return sys_err("failed to read a manifest", s->dir, -ret);
	}
	ret = cs_manifest_parse(text, (size_t)st.st_size, m, err, sizeof(err));
	free(text);
	if (ret == -ENOMEM)
		return sys_err("failed to read a manifest", s->dir, ENOMEM);
	if (ret) {
		collie_err("snapshot '%s' in %s: %s", tag, s->dir, err);
		return EXIT_FAIL;
	}
	if (strcmp(m->tag, tag)) {
		collie_err("snapshot '%s' in %s: its manifest names tag '%s'", tag, s->dir, m->tag);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cs_store_write_manifest(struct cs_store *s, const struct cs_manifest *m)
{
	char path[CS_TAG_MAX + 16], tmp[CS_TAG_MAX + 32];
	size_t len;
	char *text = cs_manifest_format(m, &len);
	int fd, ret;

	if (!text)
		return sys_err("failed to write the manifest", s->dir, ENOMEM);
	/* the chunks it names are on disk before it is */
	if (syncfs(s->dirfd)) {
		free(text);
		return sys_err("failed to sync", s->dir, errno);
	}
	snprintf(path, sizeof(path), "snapshots/%s", m->tag);
	snprintf(tmp, sizeof(tmp), "snapshots/.%s.tmp", m->tag);
	fd = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ret = fd < 0 ? -errno : sd_write_full(fd, text, len);
	if (!ret && fsync(fd))
		ret = -errno;
	if (fd >= 0 && close(fd) && !ret)
		ret = -errno;
	if (!ret && renameat(s->dirfd, tmp, s->dirfd, path))
		ret = -errno;
	if (!ret && syncfs(s->dirfd))
		ret = -errno;
	free(text);
	s->manifest_bytes = len;
	if (ret) {
		unlinkat(s->dirfd, tmp, 0);
		return sys_err("failed to write the manifest", s->dir, -ret);
	}
	return EXIT_OK;
}

int cs_store_has(struct cs_store *s, const char *tag)
{
	char path[CS_TAG_MAX + 16];

	snprintf(path, sizeof(path), "snapshots/%s", tag);
	return !faccessat(s->dirfd, path, F_OK, 0);
}

int cs_store_list(struct cs_store *s, char (**tags)[CS_TAG_MAX + 1], int *nr)
{
	char(*v)[CS_TAG_MAX + 1];
	int n = 0, cap = 0;
	struct dirent *e;
	DIR *d;
	int fd = openat(s->dirfd, "snapshots", O_RDONLY | O_DIRECTORY);

	*tags = NULL;
	*nr = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return errno == ENOENT ? EXIT_OK : sys_err("failed to list", s->dir, errno);
	}
	/* count, then fill: a tag saved meanwhile is left for the next list */
	while ((e = readdir(d)))
		cap += cs_tag_valid(e->d_name);
	rewinddir(d);
	v = calloc((size_t)cap + 1, sizeof(*v));
	while (v && n < cap && (e = readdir(d)))
		if (cs_tag_valid(e->d_name))
			memcpy(v[n++], e->d_name, strlen(e->d_name) + 1);
	closedir(d);
	if (!v)
		return sys_err("failed to list", s->dir, ENOMEM);
	*tags = v;
	*nr = n;
	return EXIT_OK;
}

/* the hashes every remaining manifest names, sorted: EXIT_OK or an exit code */
static int referenced(struct cs_store *s, uint8_t (**refs)[CS_HASH_LEN], size_t *nr)
{
	char(*tags)[CS_TAG_MAX + 1];
	int nr_tags, ret;
	size_t cap = 0;

	*refs = NULL;
	*nr = 0;
	ret = cs_store_list(s, &tags, &nr_tags);
	for (int t = 0; !ret && t < nr_tags; t++) {
		struct cs_manifest m;

		ret = cs_store_read_manifest(s, tags[t], &m);
		for (uint32_t i = 0; !ret && i < m.nr_vdis; i++)
			for (uint64_t c = 0; !ret && c < m.vdis[i].nr_chunks; c++) {
				if (*nr == cap) {
					void *n = realloc(*refs, (cap = cap ? 2 * cap : 4096) *
								     CS_HASH_LEN);
					if (!n) {
						ret = sys_err("out of memory", s->dir, ENOMEM);
						break;
					}
					*refs = n;
				}
				memcpy((*refs)[(*nr)++], m.vdis[i].chunks[c].hash, CS_HASH_LEN);
			}
		cs_manifest_free(&m);
	}
	free(tags);
	if (!ret && *nr)
		qsort(*refs, *nr, CS_HASH_LEN, cmp_hash);
	return ret;
}

static int hex_to_hash(const char *s, uint8_t out[CS_HASH_LEN])
{
	if (strlen(s) != 2 * CS_HASH_LEN)
		return -1;
	for (int i = 0; i < CS_HASH_LEN; i++) {
		unsigned int v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return 0;
}

int cs_store_gc(struct cs_store *s, uint64_t *nr_removed, uint64_t *bytes)
{
	uint8_t(*refs)[CS_HASH_LEN], h[CS_HASH_LEN];
	size_t nr_refs;
	char sub[16];
	int ret;

	*nr_removed = *bytes = 0;
	ret = referenced(s, &refs, &nr_refs);
	if (ret) {
		collie_err("no chunk removed: a manifest could not be read");
		return ret;
	}
	for (int i = 0; i < 256; i++) {
		int fd;
		DIR *d;
		struct dirent *e;
		struct stat st;

		snprintf(sub, sizeof(sub), "chunks/%02x", i);
		fd = openat(s->dirfd, sub, O_RDONLY | O_DIRECTORY);
		if (fd < 0 || !(d = fdopendir(fd))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || hex_to_hash(e->d_name, h))
				continue;
			if (nr_refs && bsearch(h, refs, nr_refs, CS_HASH_LEN, cmp_hash))
				continue;
			if (!fstatat(dirfd(d), e->d_name, &st, 0) &&
			    !unlinkat(dirfd(d), e->d_name, 0)) {
				(*nr_removed)++;
				*bytes += (uint64_t)st.st_size;
			}
		}
		closedir(d);
	}
	free(refs);
	return EXIT_OK;
}
