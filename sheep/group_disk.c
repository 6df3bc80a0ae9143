/*
 * The group's files under DIR (the layer below group*.c): the epoch logs
 * (DIR/epoch/NNNNNNNN), the format's config and the other small files the
 * group keeps (DIR/clean-stop), each written whole and durably.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "internal_proto.h"
#include "group_disk.h"
#include "group.h"
#include "util.h"

/* the daemon's directory (gd_init) */
static const char *gd_dir = ".";

void gd_init(const char *dir)
{
	gd_dir = dir;
}

void gd_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", gd_dir, name);
}


/* write a small file whole: tmp, fsync, rename, fsync dir. 0 or -errno */
static int write_file_atomic(const char *path, const void *buf, size_t len)
{
	char tmp[4200];
	int fd, ret;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ret = sd_write_full(fd, buf, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

int group_write_file(const char *name, const void *buf, size_t len)
{
	char path[4200];

	gd_path(path, sizeof(path), name);
	return write_file_atomic(path, buf, len);
}

int gd_read_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = sd_read_full(fd, buf, len);
	close(fd);
	return ret;
}

int gd_write_epoch_log(uint32_t epoch, const struct sd_node *nodes, int nr)
{
	struct sd_epoch_log log = { 0 };
	char path[4200], name[64];

	log.ctime = (uint64_t)time(NULL);
	log.epoch = epoch;
	log.nr_nodes = nr;
	memcpy(log.nodes, nodes, nr * sizeof(*nodes));
	snprintf(name, sizeof(name), "epoch/%08" PRIu32, epoch);
	gd_path(path, sizeof(path), name);
	return write_file_atomic(path, &log, sizeof(log));
}

/* 0, or -errno; -EINVAL for a file that is not epoch's log */
int gd_read_epoch_log(uint32_t epoch, struct sd_epoch_log *log)
{
	char path[4200], name[64];
	int ret;

	snprintf(name, sizeof(name), "epoch/%08" PRIu32, epoch);
	gd_path(path, sizeof(path), name);
	ret = gd_read_file(path, log, sizeof(*log));
	if (!ret && (log->epoch != epoch || log->nr_nodes > SD_MAX_NODES)) {
		sd_err("%s is not the log of epoch %" PRIu32, path, epoch);
		ret = -EINVAL;
	}
	return ret;
}

uint32_t gd_latest_epoch(void)
{
	char path[4200];
	DIR *d;
	struct dirent *de;
	uint32_t max = 0;

	gd_path(path, sizeof(path), "epoch");
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char *end;
		unsigned long e = strtoul(de->d_name, &end, 10);
		if (*end == '\0' && strlen(de->d_name) == 8 && e > max)
			max = (uint32_t)e;
	}
	closedir(d);
	return max;
}

/* fsync the daemon's directory (DIR): 0 or -errno */
int gd_sync_dir(void)
{
	int fd = open(gd_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int cmp_epoch_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * The epochs of DIR/epoch up to latest, newest first, in a malloc'ed array
 * (*out): how many, or -errno. Listed rather than probed one number after
 * the other: the history may have gaps (a node that joined late adopted
 * only the newest epochs), and a probe from a huge epoch down to 1 would
 * take billions of open() calls.
 */
int gd_list_epochs(uint32_t latest, uint32_t **out)
{
	char path[4200];
	uint32_t *v = NULL;
	int n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	gd_path(path, sizeof(path), "epoch");
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long e = strtoul(de->d_name, &end, 10);

		if (*end || strlen(de->d_name) != 8 || e == 0 || e > latest)
			continue;
		if (n == cap) {
			uint32_t *nv = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
			cap = cap ? cap * 2 : 64;
		}
		v[n++] = (uint32_t)e;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_epoch_desc);
	*out = v;
	return n;
}

/* the index of nid in nodes[nr], or -1 */
int gd_find_node(const struct sd_node_id *nid, const struct sd_node *nodes, int nr)
{
	for (int i = 0; i < nr; i++)
		if (!memcmp(nid, &nodes[i].nid, sizeof(*nid)))
			return i;
	return -1;
}

/*
 * The same nodes (address, port and zone), in any order: the driver lists
 * the members in the order they joined, which a restart need not repeat.
 * A list holds no node twice.
 */
bool gd_same_nodes(const struct sd_node *a, int nr_a, const struct sd_node *b, int nr_b)
{
	if (nr_a != nr_b)
		return false;
	for (int i = 0; i < nr_a; i++) {
		int j = gd_find_node(&a[i].nid, b, nr_b);

		if (j < 0 || b[j].zone != a[i].zone)
			return false;
	}
	return true;
}

bool gd_same_weights(const struct sd_node *a, int nr_a, const struct sd_node *b, int nr_b)
{
	for (int i = 0; i < nr_a; i++) {
		int j = gd_find_node(&a[i].nid, b, nr_b);

		if (j >= 0 && b[j].nr_vnodes != a[i].nr_vnodes)
			return false;
	}
	return true;
}

/* a member's epoch logs can be ones: 0 or -EINVAL */
int gd_valid_logs(const struct sd_epoch_log *logs, int n)
{
	for (int i = 0; i < n; i++)
		if (logs[i].epoch == 0 || logs[i].nr_nodes > SD_MAX_NODES)
			return -EINVAL;
	return 0;
}

/*
 * Whether two epoch histories can be one: this node's and a member's
 * (logs[n], newest first; their newest epoch their_epoch). Not when one
 * stored an epoch that the other did not: a newer one, or one of the same
 * number with other nodes (the histories forked, as when a node that was
 * down for the last epochs restarted first and counted epochs alone).
 * joining: this node would take the member's history, set its own objects
 * aside and recover the member's: refused when its own is the newer, as
 * acknowledged writes would be lost. Otherwise this node, restarted alone,
 * waits for the nodes of its newest epoch and the member is one of them:
 * refused when the member's history is the newer (this node's copies are
 * the older; it must not be the one the others learn from). A node whose
 * newest epoch the other's history holds alike was only away: its copies
 * may be older, never newer. own_epoch: this node's newest (formatted,
 * not 0). 0 or -ESTALE (logged).
 */
int gd_check_history(uint32_t own_epoch, uint32_t their_epoch, const struct sd_epoch_log *logs,
		     int n, bool joining)
{
	struct sd_epoch_log *own;
	int ret = 0;

	if (joining && own_epoch > their_epoch) {
		sd_err("this node stored epoch %" PRIu32 ", newer than the cluster's %" PRIu32,
		       own_epoch, their_epoch);
		return -ESTALE;
	}
	if (!joining && their_epoch > own_epoch) {
		sd_err("a member stored epoch %" PRIu32 ", newer than this node's %" PRIu32,
		       their_epoch, own_epoch);
		return -ESTALE;
	}
	own = calloc(1, sizeof(*own)); /* zeroed: no path reads it unset (script/analyze) */
	if (!own)
		return -ENOMEM;
	for (int i = 0; i < n && !ret; i++) {
		if (logs[i].epoch > own_epoch || gd_read_epoch_log(logs[i].epoch, own))
			continue; /* not stored here: nothing to compare */
		if (!gd_same_nodes(own->nodes, (int)own->nr_nodes, logs[i].nodes,
				(int)logs[i].nr_nodes)) {
			sd_err("epoch %" PRIu32 " has other nodes here than on the member: "
			       "the histories forked",
			       logs[i].epoch);
			ret = -ESTALE;
		}
	}
	free(own);
	return ret;
}
