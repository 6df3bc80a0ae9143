/*
 * The local driver: several sheep of one machine form a cluster through a
 * directory they share (`-c local:DIR`), with no external service.
 *
 * DIR/log is an append-only event log; its order is the total order. A
 * writer holds flock(LOCK_EX) on it, reads up to the end (its "tail view"),
 * drops whatever a dead writer left half written, and appends one record
 * with a single pwritev(). Readers take no lock: a record counts only when
 * it is complete and its checksum matches, so a reader that meets a record
 * being written stops there and comes back later.
 *
 * Every member derives the member list from the records it has read (JOIN
 * appends a member, LEAVE removes it), so every member computes the same
 * list at the same place of the log. A joiner appends its JOIN under the
 * lock after reading the whole log, delivers its own join with the list it
 * computed, and starts delivering after its JOIN record: it never replays
 * older history. When a joiner finds no live member, it empties the log:
 * a new cluster starts.
 *
 * Wake-ups: inotify on DIR/log (IN_MODIFY) in the main event loop, plus a
 * timerfd every LOCAL_TICK_MS as a safety net and for the liveness check.
 *
 * Liveness: each member holds flock(LOCK_EX) on its own file DIR/m.<id>
 * from before its JOIN until after its LEAVE. On every tick, a member tries
 * to lock the files of the others: a lock that can be taken (or a file that
 * is gone) means the process died. It then takes the log lock, reads the
 * tail, and appends LEAVE for each member of the tail view that is still
 * dead, so the leave is recorded once, by whoever noticed first.
 * So that a death costs the cluster less than a tick, each member also
 * watches the others' processes (a pidfd each, from the pid in the
 * member's id) and runs the same check as soon as one exits. The pidfd is
 * only a wake-up: the lock stays the proof (a pid reused, or one from
 * another pid namespace, wakes the check for nothing).
 *
 * Heartbeat: a stopped (SIGSTOP) or hung member keeps its lock, so each
 * member also stamps its file with its CLOCK_MONOTONIC time (8 bytes at
 * offset 0) on every tick. A member whose stamp is older than the
 * heartbeat timeout (cdrv_heartbeat_timeout_ms) is recorded as left the
 * same way, and its file unlinked: it is evicted. A tick first delivers
 * what the log holds, so a member that was stopped itself reads its own
 * eviction before it looks at the others, and it evicts nobody on the tick
 * after a stall of its own (its view of the others may be stale). The one
 * case not covered: a member stopped while it holds the log lock (the
 * microseconds of an append) blocks every writer until it runs again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cluster.h"
#include "event.h"
#include "logger.h"
#include "util.h"

#define LOCAL_DEFAULT_DIR "/tmp/sheepdog-local"
#define LOCAL_MAGIC 0x4c434f4cU /* "LOCL" */
#define LOCAL_TICK_MS 200

enum local_type {
	LOCAL_JOIN = 1,
	LOCAL_LEAVE,
	LOCAL_NOTIFY,
};

/* where this driver reports (init) */
static const struct cdrv_events *events;

/* one record of DIR/log, followed by len bytes of payload */
struct local_rec {
	uint32_t magic;
	uint16_t type;
	uint16_t pad;
	uint32_t len;
	uint32_t pad2;
	uint64_t seq;
	uint64_t id;	     /* JOIN, NOTIFY: the sender; LEAVE: the member that left */
	uint64_t sum;	     /* FNV-1a of the record with sum = 0, then the payload */
	struct sd_node node; /* JOIN: the new member */
};

struct local_member {
	uint64_t id;
	struct sd_node node;
};

/* the state after reading the log up to off */
struct local_view {
	uint64_t off;
	uint64_t seq;
	int nr;
	struct local_member m[SD_MAX_NODES];
};

static char dir[4096];
static int log_fd = -1, self_fd = -1, ino_fd = -1, tick_fd = -1;
static uint64_t self_id;
static bool joined;
static struct local_view delivered; /* what the daemon has seen */
static struct local_view tail;	    /* valid only under the log lock */
/* main thread: the others' processes watched, a pidfd each (-1: none) */
static struct {
	uint64_t id;
	int fd;
} watched[SD_MAX_NODES];
static int nr_watched;
/* CDRV_MAX_MSG_LEN bytes each: a handler may notify() while it holds its msg */
static uint8_t *scan_buf, *deliver_buf;

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

static uint64_t rec_sum(const struct local_rec *rec, const void *data)
{
	struct local_rec r = *rec;

	r.sum = 0;
	return fnv1a(fnv1a(UINT64_C(0xcbf29ce484222325), &r, sizeof(r)), data, r.len);
}

/* the complete, valid record at off: its length, or 0 (end, partial, bad) */
static size_t read_rec(uint64_t off, struct local_rec *rec, void *data)
{
	if (pread(log_fd, rec, sizeof(*rec), off) != sizeof(*rec))
		return 0;
	if (rec->magic != LOCAL_MAGIC || rec->len > CDRV_MAX_MSG_LEN)
		return 0;
	if (rec->len && pread(log_fd, data, rec->len, off + sizeof(*rec)) != rec->len)
		return 0;
	if (rec_sum(rec, data) != rec->sum)
		return 0;
	return sizeof(*rec) + rec->len;
}

static int view_find(const struct local_view *v, uint64_t id)
{
	for (int i = 0; i < v->nr; i++)
		if (v->m[i].id == id)
			return i;
	return -1;
}

static void view_apply(struct local_view *v, const struct local_rec *rec, size_t rec_len)
{
	int i;

	v->off += rec_len;
	v->seq = rec->seq;
	switch (rec->type) {
	case LOCAL_JOIN:
		if (v->nr < SD_MAX_NODES && view_find(v, rec->id) < 0) {
			v->m[v->nr].id = rec->id;
			v->m[v->nr].node = rec->node;
			v->nr++;
		}
		break;
	case LOCAL_LEAVE:
		i = view_find(v, rec->id);
		if (i >= 0) {
			v->nr--;
			memmove(&v->m[i], &v->m[i + 1], (v->nr - i) * sizeof(v->m[0]));
		}
		break;
	}
}

static void view_nodes(const struct local_view *v, struct sd_node *nodes)
{
	for (int i = 0; i < v->nr; i++)
		nodes[i] = v->m[i].node;
}

static int lock_log(void)
{
	while (flock(log_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void unlock_log(void)
{
	flock(log_fd, LOCK_UN);
}

/* under the lock: read to the end, cut what a dead writer left behind */
static int scan_tail(void)
{
	struct local_rec rec;
	struct stat st;
	size_t n;

	while ((n = read_rec(tail.off, &rec, scan_buf)))
		view_apply(&tail, &rec, n);
	if (fstat(log_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > tail.off) {
		sd_warn("dropping %" PRIu64 " bytes of a half written record",
			(uint64_t)st.st_size - tail.off);
		if (ftruncate(log_fd, tail.off) < 0)
			return -errno;
	}
	return 0;
}

/* under the lock, after scan_tail(): append one record. 0 or -errno */
static int append(uint16_t type, uint64_t id, const struct sd_node *node, const void *data,
		  size_t len)
{
	struct local_rec rec = {
		.magic = LOCAL_MAGIC,
		.type = type,
		.len = (uint32_t)len,
		.seq = tail.seq + 1,
		.id = id,
	};
	struct iovec iov[2] = {
		{ .iov_base = &rec, .iov_len = sizeof(rec) },
		{ .iov_base = (void *)data, .iov_len = len },
	};
	ssize_t n;

	if (node)
		rec.node = *node;
	rec.sum = rec_sum(&rec, data);
	n = pwritev(log_fd, iov, len ? 2 : 1, tail.off);
	if (n != (ssize_t)(sizeof(rec) + len)) {
		int err = n < 0 ? -errno : -EIO;

		if (ftruncate(log_fd, tail.off) < 0)
			sd_err("cannot cut %s/log: %m", dir);
		return err;
	}
	view_apply(&tail, &rec, sizeof(rec) + len);
	return 0;
}

static void member_path(char *buf, size_t len, uint64_t id)
{
	snprintf(buf, len, "%s/m.%016" PRIx64, dir, id);
}

enum member_health {
	MEMBER_ALIVE,
	MEMBER_DEAD,   /* no process holds its file */
	MEMBER_SILENT, /* held, but its stamp is older than the heartbeat timeout */
};

static bool may_evict; /* main thread: this member's own ticks are on time */

/* how the member id is: *silent_ms says for how long it has been silent */
static enum member_health member_health(uint64_t id, uint64_t *silent_ms)
{
	uint64_t stamp = 0, now;
	char path[4200];
	int fd, ret;

	member_path(path, sizeof(path), id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? MEMBER_DEAD : MEMBER_ALIVE;
	ret = flock(fd, LOCK_EX | LOCK_NB);
	if (ret == 0) {
		close(fd);
		return MEMBER_DEAD;
	}
	/* no stamp yet (it is joining): alive */
	if (pread(fd, &stamp, sizeof(stamp), 0) != sizeof(stamp))
		stamp = 0;
	close(fd);
	now = sd_now_ns();
	if (!stamp || now < stamp)
		return MEMBER_ALIVE;
	*silent_ms = (now - stamp) / 1000000;
	if (!may_evict || *silent_ms <= cdrv_heartbeat_timeout_ms())
		return MEMBER_ALIVE;
	return MEMBER_SILENT;
}

/* true when no live process holds the member file of id */
static bool member_is_dead(uint64_t id)
{
	uint64_t ms;

	return member_health(id, &ms) == MEMBER_DEAD;
}

/* this member is alive: stamp its file */
static void stamp_self(void)
{
	uint64_t now = sd_now_ns();

	if (self_fd >= 0 && pwrite(self_fd, &now, sizeof(now), 0) != sizeof(now))
		sd_err("cannot stamp the member file in %s: %m", dir);
}

/* under the lock, after scan_tail(): record the leave of dead and silent members */
static int reap_dead(void)
{
	char path[4200];
	uint64_t ms = 0;
	int ret;

	for (int i = 0; i < tail.nr; i++) {
		uint64_t id = tail.m[i].id;
		enum member_health h = id == self_id ? MEMBER_ALIVE : member_health(id, &ms);

		if (h == MEMBER_ALIVE)
			continue;
		ret = append(LOCAL_LEAVE, id, NULL, NULL, 0);
		if (ret)
			return ret;
		if (h == MEMBER_DEAD)
			sd_info("member %016" PRIx64 " died: leave recorded", id);
		else
			sd_warn("member %016" PRIx64 " silent for %" PRIu64 " ms: evicted", id, ms);
		member_path(path, sizeof(path), id);
		unlink(path);
		i--; /* the array moved down */
	}
	return 0;
}

static void check_members(void);

/* the process of a member: its id's upper half (join_locked) */
static pid_t member_pid(uint64_t id)
{
	return (pid_t)(id >> 32);
}

static void unwatch(int i)
{
	if (watched[i].fd >= 0) {
		ev_del(watched[i].fd);
		close(watched[i].fd);
	}
	watched[i] = watched[--nr_watched];
}

/* a watched process exited: check now rather than at the next tick */
static void member_exited(int fd, uint32_t events, void *data)
{
	for (int i = 0; i < nr_watched; i++)
		if (watched[i].fd == fd) {
			sd_info("member %016" PRIx64 ": its process %d exited", watched[i].id,
				(int)member_pid(watched[i].id));
			ev_del(fd);
			close(fd);
			watched[i].fd = -1; /* its id stays, not to be watched again */
			break;
		}
	if (joined)
		check_members();
}

/* watch the processes of the delivered members, and only theirs */
static void watch_members(void)
{
	for (int i = 0; i < nr_watched; i++)
		if (!joined || view_find(&delivered, watched[i].id) < 0)
			unwatch(i--);
	for (int i = 0; joined && i < delivered.nr; i++) {
		uint64_t id = delivered.m[i].id;
		int j, fd;

		for (j = 0; j < nr_watched && watched[j].id != id; j++)
			;
		if (id == self_id || j < nr_watched || nr_watched == SD_MAX_NODES)
			continue;
		fd = pidfd_open(member_pid(id), 0);
		if (fd >= 0 && ev_add(fd, EPOLLIN, member_exited, NULL)) {
			close(fd);
			fd = -1;
		}
		/* no pidfd (ESRCH: gone already; an old kernel): the tick checks */
		watched[nr_watched].id = id;
		watched[nr_watched++].fd = fd;
	}
}

/* deliver the complete records after the delivered view, in order */
static void deliver(void)
{
	static struct sd_node nodes[SD_MAX_NODES];
	struct local_rec rec;
	struct sd_node node;
	bool changed = false;
	size_t n;
	int i;

	while (joined && (n = read_rec(delivered.off, &rec, deliver_buf))) {
		changed |= rec.type != LOCAL_NOTIFY;
		i = view_find(&delivered, rec.id);
		if (i >= 0)
			node = delivered.m[i].node;
		view_apply(&delivered, &rec, n);
		view_nodes(&delivered, nodes);
		switch (rec.type) {
		case LOCAL_JOIN:
			events->joined(&rec.node, nodes, delivered.nr);
			break;
		case LOCAL_LEAVE:
			if (i < 0)
				break;
			if (rec.id == self_id) {
				sd_err("the others recorded this member as dead");
				joined = false;
			}
			events->left(&node, nodes, delivered.nr);
			break;
		case LOCAL_NOTIFY:
			if (i >= 0)
				events->notified(&node, deliver_buf, rec.len);
			break;
		}
	}
	if (changed)
		watch_members();
}

static void local_inotify(int fd, uint32_t events, void *data)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	deliver();
}

/* record the leave of the members that died or fell silent, then deliver it */
static void check_members(void)
{
	bool dead = false;
	uint64_t ms = 0;

	for (int i = 0; i < delivered.nr && !dead; i++)
		dead = delivered.m[i].id != self_id &&
		       member_health(delivered.m[i].id, &ms) != MEMBER_ALIVE;
	if (dead && !lock_log()) {
		if (scan_tail() || reap_dead())
			sd_err("cannot record a dead member in %s/log: %m", dir);
		unlock_log();
	}
	deliver();
}

static void local_tick(int fd, uint32_t events, void *data)
{
	static uint64_t last_ns;
	uint64_t expirations, now = sd_now_ns();

	if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		sd_err("timerfd: %m");
	cdrv_tick();
	/* first what happened meanwhile: this member may have been evicted */
	deliver();
	if (!joined)
		return;
	stamp_self();
	/* after a stall of this member's own, the others' stamps prove nothing yet */
	may_evict = last_ns && now - last_ns < (uint64_t)cdrv_heartbeat_timeout_ms() * 500000;
	last_ns = now;
	check_members();
}

static void local_catch_up(void)
{
	deliver();
}

static int local_init(const char *option, const struct cdrv_events *ev)
{
	events = ev;
	struct itimerspec its = {
		.it_interval = { 0, LOCAL_TICK_MS * 1000000L },
		.it_value = { 0, LOCAL_TICK_MS * 1000000L },
	};
	char path[4200];
	int ret;

	if (log_fd >= 0)
		return 0; /* again, to join again after an eviction */
	if (!option)
		option = cdrv_selected_option();
	snprintf(dir, sizeof(dir), "%s", option ? option : LOCAL_DEFAULT_DIR);
	ret = sd_mkdir_p(dir, 0755);
	if (ret)
		return ret;
	scan_buf = scan_buf ? scan_buf : malloc(CDRV_MAX_MSG_LEN);
	deliver_buf = deliver_buf ? deliver_buf : malloc(CDRV_MAX_MSG_LEN);
	if (!scan_buf || !deliver_buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/log", dir);
	log_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (log_fd < 0)
		return -errno;
	ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ino_fd < 0 || inotify_add_watch(ino_fd, path, IN_MODIFY) < 0)
		goto out_errno;
	tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tick_fd < 0 || timerfd_settime(tick_fd, 0, &its, NULL) < 0)
		goto out_errno;
	sd_info("local cluster in %s", dir);
	return 0;
out_errno:
	ret = -errno;
	if (tick_fd >= 0)
		close(tick_fd);
	if (ino_fd >= 0)
		close(ino_fd);
	close(log_fd);
	tick_fd = ino_fd = log_fd = -1;
	return ret;
}

/*
 * Under the lock with no live member: start a new cluster. Member files
 * that nobody holds are left by processes that died before their JOIN.
 */
static int reset_log(void)
{
	char path[4200];
	struct dirent *de;
	DIR *d;

	if (ftruncate(log_fd, 0) < 0)
		return -errno;
	memset(&tail, 0, sizeof(tail));
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		uint64_t id;

		if (sscanf(de->d_name, "m.%16" SCNx64, &id) != 1 || id == self_id ||
		    !member_is_dead(id))
			continue;
		member_path(path, sizeof(path), id);
		unlink(path);
	}
	closedir(d);
	return 0;
}

/* under the lock: create and lock DIR/m.<id>, append JOIN. 0 or -errno */
static int join_locked(const struct sd_node *myself)
{
	char path[4200];
	int ret;

	/* member_pid() reads the pid back */
	self_id = ((uint64_t)getpid() << 32) ^ (sd_now_ns() & 0xffffffffU);
	member_path(path, sizeof(path), self_id);
	self_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (self_fd < 0)
		return -errno;
	if (flock(self_fd, LOCK_EX | LOCK_NB) < 0)
		return -errno;
	stamp_self();
	memset(&tail, 0, sizeof(tail));
	ret = scan_tail();
	if (!ret)
		ret = reap_dead();
	if (!ret && tail.nr == 0)
		ret = reset_log();
	if (ret)
		return ret;
	if (tail.nr >= SD_MAX_NODES)
		return -ENOSPC;
	ret = append(LOCAL_JOIN, self_id, myself, NULL, 0);
	if (ret)
		return ret;
	delivered = tail;
	return 0;
}

static int local_join(const struct sd_node *myself)
{
	struct sd_node nodes[SD_MAX_NODES];
	char path[4200];
	int ret;

	if (log_fd < 0 || joined)
		return -EINVAL;
	ret = lock_log();
	if (ret)
		return ret;
	ret = join_locked(myself);
	unlock_log();
	if (!ret)
		ret = ev_add(ino_fd, EPOLLIN, local_inotify, NULL);
	if (!ret)
		ret = ev_add(tick_fd, EPOLLIN, local_tick, NULL);
	if (ret) {
		ev_del(ino_fd);
		member_path(path, sizeof(path), self_id);
		unlink(path);
		if (self_fd >= 0)
			close(self_fd);
		self_fd = -1;
		return ret;
	}
	joined = true;
	watch_members();
	sd_info("joined as member %016" PRIx64 ", %d members", self_id, delivered.nr);
	view_nodes(&delivered, nodes);
	events->joined(myself, nodes, delivered.nr);
	return 0;
}

static int local_leave(void)
{
	char path[4200];
	int ret;

	if (self_fd < 0)
		return 0;
	joined = false;
	watch_members(); /* none now */
	ev_del(ino_fd);
	ev_del(tick_fd);
	ret = lock_log();
	if (ret)
		return ret;
	ret = scan_tail();
	if (!ret && view_find(&tail, self_id) >= 0)
		ret = append(LOCAL_LEAVE, self_id, NULL, NULL, 0);
	member_path(path, sizeof(path), self_id);
	unlink(path);
	unlock_log();
	close(self_fd);
	self_fd = -1;
	return ret;
}

static int local_notify(const void *msg, size_t len)
{
	int ret;

	if (!joined)
		return -ENOTCONN;
	if (len > CDRV_MAX_MSG_LEN)
		return -EMSGSIZE;
	ret = lock_log();
	if (ret)
		return ret;
	ret = scan_tail();
	if (!ret)
		ret = append(LOCAL_NOTIFY, self_id, NULL, msg, len);
	unlock_log();
	return ret;
}

static const struct cluster_driver cdrv_local = {
	.name = "local",
	.init = local_init,
	.join = local_join,
	.leave = local_leave,
	.notify = local_notify,
	.catch_up = local_catch_up,
};

cdrv_register_driver(cdrv_local);
