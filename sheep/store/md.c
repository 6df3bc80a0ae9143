/*
 * Several disks per node: see md.h.
 *
 * The map (which disks are in the ring, which are searched) is immutable
 * once published: a change builds a new one and swaps the pointer, and the
 * old ones stay (a few per plug, unplug or failure: never freed, so that a
 * reader needs no reference). Disks are slots that are never reused; an
 * unplugged disk's directory is closed once no access holds it.
 *
 * A new map that moves objects (a start on several disks, a plug, an
 * unplug) is unsettled: lookups search every disk in use until the mover
 * has walked every disk and put each object on its ring disk. Before it
 * walks, the mover takes and drops every stripe's write lock, so that no
 * access that still follows an older map is in flight: a create placed by
 * an older ring has landed where the walk will see it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "logger.h"
#include "util.h"
#include "md.h"

#define NR_STRIPES 256
#define WATCH_MS 500 /* how often the disks' directories are checked */

struct md_disk {
	char path[SD_MD_PATH_LEN]; /* the disk's directory, absolute */
	char obj[SD_MD_PATH_LEN + 8];
	int fd;	  /* the object directory; -1 once closed */
	int refs; /* accesses in flight (atomic) */
	int state; /* SD_MD_* (atomic) */
	uint16_t vnodes;
	bool warned_last; /* under md_lock: "last disk, kept" logged */
	dev_t dev;
	ino_t ino;
};

struct md_map {
	struct sd_ring ring;
	struct md_disk *ring_disk[MD_MAX_DISKS]; /* ring node i */
	struct md_disk *search[MD_MAX_DISKS];	 /* in use: active, or unplugging */
	int nr_search;
	bool settled; /* atomic: every object is on its ring disk */
	struct md_map *older; /* the map published before it (the list of all_maps) */
};

static struct md_disk disks[MD_MAX_DISKS];
static int nr_disks; /* slots used (under md_lock) */
static struct md_map *cur_map; /* atomic */
static struct md_map *all_maps; /* every map published (under md_lock): never freed */
static pthread_mutex_t md_lock = PTHREAD_MUTEX_INITIALIZER; /* map changes */
static pthread_rwlock_t stripes[NR_STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

/* --disk, before md_init */
static struct {
	char path[SD_MD_PATH_LEN];
	uint16_t weight; /* 0: by size */
} config[MD_MAX_DISKS];
static int nr_config;

static const struct md_store_ops *store_ops;
static void (*lost_fn)(void);

/* the mover and watcher */
static pthread_t mover;
static bool mover_started;
static pthread_mutex_t mover_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mover_cond = PTHREAD_COND_INITIALIZER;
static bool mover_kicked;
static bool reap_pending; /* atomic: a failed disk was unplugged */

static void init_stripes(void)
{
	for (int i = 0; i < NR_STRIPES; i++)
		pthread_rwlock_init(&stripes[i], NULL);
}

static unsigned int stripe_of(uint64_t oid)
{
	return (unsigned int)((oid ^ (oid >> 32)) % NR_STRIPES);
}

static struct md_map *map_get(void)
{
	return __atomic_load_n(&cur_map, __ATOMIC_ACQUIRE);
}

static int split_weight(const char *arg, char *buf, size_t len, uint16_t *weight);

int md_config_disk(const char *arg)
{
	int ret;

	if (nr_config >= MD_MAX_DISKS)
		return -ENOSPC;
	ret = split_weight(arg, config[nr_config].path, sizeof(config[nr_config].path),
			   &config[nr_config].weight);
	if (!ret)
		nr_config++;
	return ret;
}

bool md_configured(void)
{
	return nr_config > 0;
}

void md_set_store(const struct md_store_ops *ops)
{
	store_ops = ops;
}

void md_set_lost(void (*fn)(void))
{
	lost_fn = fn;
}

/* ---- maps ---- */

/* md_lock held: publish the map of the disks in use now; settled when nothing moves */
static int publish_map(bool settled)
{
	struct md_map *m = calloc(1, sizeof(*m));
	const char *names[MD_MAX_DISKS];
	uint16_t vnodes[MD_MAX_DISKS];
	int nr = 0, ret;

	if (!m)
		return -ENOMEM;
	for (int i = 0; i < nr_disks; i++) {
		int st = __atomic_load_n(&disks[i].state, __ATOMIC_ACQUIRE);

		if (st == SD_MD_ACTIVE) {
			names[nr] = disks[i].path;
			vnodes[nr] = disks[i].vnodes;
			m->ring_disk[nr++] = &disks[i];
		}
		if (st == SD_MD_ACTIVE || st == SD_MD_UNPLUGGING)
			m->search[m->nr_search++] = &disks[i];
	}
	ret = md_ring_build(&m->ring, names, vnodes, nr);
	if (ret) {
		free(m);
		return ret;
	}
	m->settled = settled || m->nr_search <= 1;
	m->older = all_maps;
	all_maps = m;
	__atomic_store_n(&cur_map, m, __ATOMIC_RELEASE);
	return 0;
}

static struct md_disk *placed(const struct md_map *m, uint64_t oid)
{
	int i;

	if (m->ring.nr_nodes == 1) /* one disk (no --disk): no hashing on the I/O path */
		return m->ring_disk[0];
	i = md_ring_place(&m->ring, oid);

	return i < 0 ? m->search[0] : m->ring_disk[i];
}

static bool has(const struct md_disk *d, uint64_t oid)
{
	char name[17];

	snprintf(name, sizeof(name), "%016" PRIx64, oid);
	return faccessat(d->fd, name, F_OK, 0) == 0;
}

/* stripe held: the disk of oid in m */
static struct md_disk *find(const struct md_map *m, uint64_t oid)
{
	struct md_disk *d = placed(m, oid);

	if (__atomic_load_n(&m->settled, __ATOMIC_ACQUIRE) || has(d, oid))
		return d;
	for (int i = 0; i < m->nr_search; i++)
		if (m->search[i] != d && has(m->search[i], oid))
			return m->search[i];
	return d;
}

static void pin(struct md_io *io, uint64_t oid)
{
	struct md_disk *d = find(map_get(), oid);

	__atomic_add_fetch(&d->refs, 1, __ATOMIC_ACQ_REL);
	io->disk = d;
	io->fd = d->fd;
}

void md_get(uint64_t oid, struct md_io *io)
{
	io->stripe = stripe_of(oid);
	pthread_rwlock_rdlock(&stripes[io->stripe]);
	pin(io, oid);
}

bool md_tryget(uint64_t oid, struct md_io *io)
{
	io->stripe = stripe_of(oid);
	if (pthread_rwlock_tryrdlock(&stripes[io->stripe]))
		return false;
	pin(io, oid);
	return true;
}

void md_put(struct md_io *io)
{
	__atomic_sub_fetch(&io->disk->refs, 1, __ATOMIC_ACQ_REL);
	pthread_rwlock_unlock(&stripes[io->stripe]);
}

/* take d out (it failed): true when it was in use and is out now */
static bool take_out(struct md_disk *d, const char *why)
{
	struct md_map *m;
	int active = 0;
	bool out = false, did = false;

	pthread_mutex_lock(&md_lock);
	m = map_get();
	for (int i = 0; i < m->nr_search; i++)
		active += __atomic_load_n(&m->search[i]->state, __ATOMIC_ACQUIRE) == SD_MD_ACTIVE;
	if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == SD_MD_FAILED) {
		out = true; /* another thread took it out */
	} else if (active <= 1 && __atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == SD_MD_ACTIVE) {
		if (!d->warned_last) /* once: the store's own errors say the rest */
			sd_err("disk %s: %s; it is this node's last disk, kept", d->path, why);
		d->warned_last = true;
	} else {
		__atomic_store_n(&d->state, SD_MD_FAILED, __ATOMIC_RELEASE);
		/* the objects of the others stay where they are: nothing moves */
		if (publish_map(__atomic_load_n(&m->settled, __ATOMIC_ACQUIRE)) == 0) {
			sd_err("disk %s failed (%s): taken out; its objects are fetched again "
			       "from their other copies",
			       d->path, why);
			out = did = true;
		} else {
			__atomic_store_n(&d->state, SD_MD_ACTIVE, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&md_lock);
	if (did && store_ops)
		store_ops->forget();
	if (did && lost_fn)
		lost_fn();
	return out;
}

bool md_failed(struct md_io *io, int err)
{
	if (err != EIO && err != ENOENT && err != ESTALE && err != ENOTDIR)
		return false;
	if (err != EIO) { /* a missing file is no failure; a missing directory is */
		struct stat st;

		if (fstat(io->disk->fd, &st) == 0 && st.st_nlink)
			return false;
	}
	return take_out(io->disk, strerror(err));
}

int md_for_each_dir(int (*fn)(int fd, void *arg), void *arg)
{
	struct md_map *m = map_get();
	int ret = 0;

	for (int i = 0; i < m->nr_search && !ret; i++) {
		struct md_disk *d = m->search[i];

		__atomic_add_fetch(&d->refs, 1, __ATOMIC_ACQ_REL);
		if (d->fd >= 0)
			ret = fn(d->fd, arg);
		__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL);
	}
	return ret;
}

/* ---- opening a disk ---- */

/* md_lock held: open path as the next slot (not yet in a map): the slot, or -errno */
static int open_disk(const char *path, const char *objdir, uint16_t weight)
{
	struct md_disk *d = &disks[nr_disks];
	struct statvfs vfs;
	struct stat st;
	int ret;

	if (nr_disks >= MD_MAX_DISKS)
		return -ENOSPC;
	memset(d, 0, sizeof(*d));
	if (strlen(path) >= sizeof(d->path))
		return -ENAMETOOLONG;
	strcpy(d->path, path);
	snprintf(d->obj, sizeof(d->obj), "%s", objdir);
	ret = sd_mkdir_p(d->obj, 0755);
	if (ret)
		return ret;
	d->fd = open(d->obj, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0)
		return -errno;
	if (fstat(d->fd, &st) || fstatvfs(d->fd, &vfs)) {
		ret = -errno;
		close(d->fd);
		return ret;
	}
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	d->vnodes = weight ? weight : md_ring_weight((uint64_t)vfs.f_blocks * vfs.f_frsize);
	d->state = SD_MD_ACTIVE;
	return nr_disks++;
}

/* a path as the daemon names it: absolute, without trailing slashes */
static int canonical(const char *path, char *out, size_t len)
{
	char *abs = realpath(path, NULL);

	if (!abs)
		return -errno;
	if (strlen(abs) >= len) {
		free(abs);
		return -ENAMETOOLONG;
	}
	strcpy(out, abs);
	free(abs);
	return 0;
}

static void start_mover(void);

int md_init(const char *dir)
{
	char path[PATH_MAX], obj[PATH_MAX + 8];
	int ret = 0;

	pthread_once(&stripes_once, init_stripes);
	pthread_mutex_lock(&md_lock);
	/* again: close what the last init opened (the daemon inits once; tests more) */
	for (int i = 0; i < nr_disks; i++)
		if (disks[i].fd >= 0 && disks[i].state != SD_MD_UNPLUGGED)
			close(disks[i].fd);
	nr_disks = 0;
	cur_map = NULL; /* the old maps stay allocated on all_maps: readers may hold them */
	for (int i = 0; i < (nr_config ? nr_config : 1) && !ret; i++) {
		if (nr_config) {
			/* never created here: a missing mount point is no empty disk */
			ret = canonical(config[i].path, path, sizeof(path));
			snprintf(obj, sizeof(obj), "%s/obj", path);
		} else {
			snprintf(path, sizeof(path), "%s", dir);
			snprintf(obj, sizeof(obj), "%s/obj", dir);
		}
		if (ret || (ret = open_disk(path, obj, nr_config ? config[i].weight : 0)) < 0) {
			sd_err("cannot open the disk %s: %s", nr_config ? config[i].path : dir,
			       strerror(-ret));
			break;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(disks[j].path, path) ||
			    (disks[j].dev == disks[i].dev && disks[j].ino == disks[i].ino)) {
				sd_err("disk %s is given twice", path);
				ret = -EEXIST;
			}
		ret = ret > 0 ? 0 : ret;
	}
	/* several disks: objects may lie off their ring disk (the set changed since) */
	if (!ret)
		ret = publish_map(nr_disks <= 1);
	pthread_mutex_unlock(&md_lock);
	if (!ret && nr_config)
		start_mover();
	return ret;
}

/* PATH[,WEIGHT]: the path into buf, the weight (0: none given); 0 or -EINVAL */
static int split_weight(const char *arg, char *buf, size_t len, uint16_t *weight)
{
	const char *comma = strrchr(arg, ',');
	size_t n = comma ? (size_t)(comma - arg) : strlen(arg);
	uint64_t w = 0;

	if (!n || n >= len || n >= SD_MD_PATH_LEN)
		return -EINVAL;
	if (comma && sd_parse_uint(comma + 1, 1, UINT16_MAX, &w))
		return -EINVAL;
	memcpy(buf, arg, n);
	buf[n] = '\0';
	*weight = (uint16_t)w;
	return 0;
}

int md_plug(const char *arg)
{
	char path[SD_MD_PATH_LEN], abs[PATH_MAX], obj[PATH_MAX + 8];
	uint16_t weight;
	struct stat st;
	int ret, slot;

	ret = split_weight(arg, path, sizeof(path), &weight);
	if (!ret)
		ret = canonical(path, abs, sizeof(abs));
	if (ret)
		return ret;
	if (stat(abs, &st) || !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	snprintf(obj, sizeof(obj), "%s/obj", abs);
	pthread_mutex_lock(&md_lock);
	for (int i = 0; i < nr_disks; i++) {
		int s = __atomic_load_n(&disks[i].state, __ATOMIC_ACQUIRE);

		if ((s == SD_MD_ACTIVE || s == SD_MD_UNPLUGGING) && !strcmp(disks[i].path, abs)) {
			pthread_mutex_unlock(&md_lock);
			return -EEXIST;
		}
	}
	slot = open_disk(abs, obj, weight);
	ret = slot < 0 ? slot : 0;
	if (!ret && store_ops) {
		uint64_t nr = 0;

		ret = store_ops->set_aside(disks[slot].fd, &nr);
		if (nr)
			sd_info("disk %s: %" PRIu64 " object(s) it held set aside as stale", abs, nr);
	}
	if (!ret)
		ret = publish_map(false);
	if (!ret)
		sd_info("disk %s plugged (%u vnodes): objects move to it in the background", abs,
			disks[slot].vnodes);
	else if (slot >= 0) {
		close(disks[slot].fd);
		nr_disks--;
	}
	pthread_mutex_unlock(&md_lock);
	if (!ret)
		start_mover();
	return ret;
}

int md_unplug(const char *path)
{
	char abs[PATH_MAX];
	struct md_disk *d = NULL;
	int active = 0, ret = 0;

	/* a disk that is gone (it failed) is named as it was given */
	if (canonical(path, abs, sizeof(abs)))
		snprintf(abs, sizeof(abs), "%s", path);
	pthread_mutex_lock(&md_lock);
	for (int i = 0; i < nr_disks; i++) {
		int s = __atomic_load_n(&disks[i].state, __ATOMIC_ACQUIRE);

		active += s == SD_MD_ACTIVE;
		if (s != SD_MD_UNPLUGGED && s != SD_MD_UNPLUGGING && !strcmp(disks[i].path, abs))
			d = &disks[i];
	}
	if (!d)
		ret = -ENOENT;
	else if (d->state == SD_MD_FAILED) {
		/* nothing to move: it is only forgotten, once nothing holds it */
		__atomic_store_n(&d->state, SD_MD_UNPLUGGED, __ATOMIC_RELEASE);
		__atomic_store_n(&reap_pending, true, __ATOMIC_RELEASE);
		sd_info("disk %s (failed) unplugged", abs);
	} else if (active <= 1)
		ret = -EBUSY;
	else {
		__atomic_store_n(&d->state, SD_MD_UNPLUGGING, __ATOMIC_RELEASE);
		ret = publish_map(false);
		if (ret)
			__atomic_store_n(&d->state, SD_MD_ACTIVE, __ATOMIC_RELEASE);
		else
			sd_info("disk %s unplugging: its objects move to the other disks", abs);
	}
	pthread_mutex_unlock(&md_lock);
	if (!ret)
		start_mover();
	return ret;
}

int md_info(struct sd_md_disk *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&md_lock);
	for (int i = 0; i < nr_disks && n < max; i++, n++) {
		struct md_disk *d = &disks[i];
		struct sd_md_disk *o = &out[n];
		struct statvfs vfs;

		memset(o, 0, sizeof(*o));
		memcpy(o->path, d->path, sizeof(o->path));
		o->state = (uint32_t)__atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
		o->vnodes = d->vnodes;
		if (o->state != SD_MD_ACTIVE && o->state != SD_MD_UNPLUGGING)
			continue;
		if (fstatvfs(d->fd, &vfs) == 0)
			o->size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
		if (store_ops)
			store_ops->count(d->fd, &o->used, &o->nr_objects);
	}
	pthread_mutex_unlock(&md_lock);
	return n;
}

bool md_settled(void)
{
	struct md_map *m = map_get();

	return m && __atomic_load_n(&m->settled, __ATOMIC_ACQUIRE);
}

/* ---- the mover and watcher ---- */

/* no access that follows an older map is in flight once this returns */
static void barrier(void)
{
	for (int i = 0; i < NR_STRIPES; i++) {
		pthread_rwlock_wrlock(&stripes[i]);
		pthread_rwlock_unlock(&stripes[i]);
	}
}

/* move every object of from that m places elsewhere: 0, -EAGAIN (m is old), or -EIO */
static int walk_disk(struct md_map *m, struct md_disk *from, uint64_t *moved)
{
	struct dirent *de;
	int fd, ret = 0, failed = 0;
	DIR *dir;

	fd = openat(from->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	while ((de = readdir(dir))) {
		struct md_disk *to;
		char *end;
		uint64_t oid;
		unsigned int s;
		int r;

		if (strlen(de->d_name) != 16)
			continue;
		oid = strtoull(de->d_name, &end, 16);
		if (*end || (to = placed(m, oid)) == from)
			continue;
		if (map_get() != m) {
			ret = -EAGAIN;
			break;
		}
		s = stripe_of(oid);
		pthread_rwlock_wrlock(&stripes[s]);
		r = store_ops->move(oid, from->fd, to->fd);
		pthread_rwlock_unlock(&stripes[s]);
		if (!r)
			(*moved)++;
		else if (r != -ENOENT && !failed++) /* ENOENT: removed meanwhile */
			sd_err("cannot move %016" PRIx64 " from %s to %s: %s", oid, from->path,
			       to->path, strerror(-r));
	}
	closedir(dir);
	return ret ? ret : failed ? -EIO : 0;
}

/* md_lock held, after m settled: close the disks that were unplugging */
static void finish_unplugs(void)
{
	bool changed = false;

	for (int i = 0; i < nr_disks; i++)
		if (__atomic_load_n(&disks[i].state, __ATOMIC_ACQUIRE) == SD_MD_UNPLUGGING) {
			__atomic_store_n(&disks[i].state, SD_MD_UNPLUGGED, __ATOMIC_RELEASE);
			sd_info("disk %s unplugged: every object moved", disks[i].path);
			changed = true;
		}
	if (changed)
		publish_map(true);
}

/* close the directories of unplugged disks that nothing holds any more */
static void reap(void)
{
	barrier();
	pthread_mutex_lock(&md_lock);
	for (int i = 0; i < nr_disks; i++) {
		struct md_disk *d = &disks[i];

		if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == SD_MD_UNPLUGGED && d->fd >= 0 &&
		    !__atomic_load_n(&d->refs, __ATOMIC_ACQUIRE)) {
			close(d->fd);
			d->fd = -1;
		}
	}
	pthread_mutex_unlock(&md_lock);
	if (store_ops)
		store_ops->forget();
}

/*
 * Walk every disk until a whole pass moves nothing: a directory read while
 * files come and go in it may miss one (readdir promises nothing about
 * them), and creates under an older map may have landed meanwhile.
 */
#define MAX_PASSES 8
static void settle(struct md_map *m)
{
	uint64_t moved = 0, before;
	int ret = 0, pass = 0;

	barrier();
	do {
		before = moved;
		for (int i = 0; i < m->nr_search && !ret; i++)
			ret = walk_disk(m, m->search[i], &moved);
	} while (!ret && moved != before && ++pass < MAX_PASSES);
	if (ret || moved != before)
		return; /* a newer map, or a failed move: the next round walks again */
	pthread_mutex_lock(&md_lock);
	if (map_get() == m) {
		__atomic_store_n(&m->settled, true, __ATOMIC_RELEASE);
		finish_unplugs();
	}
	pthread_mutex_unlock(&md_lock);
	sd_info("disks settled: %" PRIu64 " object(s) moved", moved);
	reap();
}

/* a disk whose directory is no longer the one at its path failed */
static void watch(void)
{
	struct md_map *m = map_get();

	for (int i = 0; i < m->nr_search; i++) {
		struct md_disk *d = m->search[i];
		struct stat st;

		if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) != SD_MD_ACTIVE)
			continue;
		if (stat(d->obj, &st) || st.st_dev != d->dev || st.st_ino != d->ino)
			if (take_out(d, "its directory is gone"))
				m = map_get();
	}
}

static void *mover_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts;
		struct md_map *m;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WATCH_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&mover_lock);
		if (!mover_kicked)
			pthread_cond_timedwait(&mover_cond, &mover_lock, &ts);
		mover_kicked = false;
		pthread_mutex_unlock(&mover_lock);
		watch();
		m = map_get();
		if (!__atomic_load_n(&m->settled, __ATOMIC_ACQUIRE))
			settle(m);
		else if (__atomic_exchange_n(&reap_pending, false, __ATOMIC_ACQ_REL))
			reap();
	}
	return NULL;
}

static void start_mover(void)
{
	pthread_mutex_lock(&mover_lock);
	if (!mover_started) {
		if (pthread_create(&mover, NULL, mover_main, NULL) == 0) {
			pthread_detach(mover);
			mover_started = true;
		} else
			sd_err("cannot start the disk mover: objects stay off their disks");
	}
	mover_kicked = true;
	pthread_cond_signal(&mover_cond);
	pthread_mutex_unlock(&mover_lock);
}
