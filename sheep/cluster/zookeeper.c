/*
 * The zookeeper driver: membership and total order from a ZooKeeper
 * ensemble (`-c zookeeper:HOST:PORT[,HOST:PORT...][/PATH][,timeout=S]`),
 * through the ZooKeeper C client (libzookeeper_mt).
 *
 * Znodes, under BASE (/sheepdog, or /PATH):
 * - BASE/members/m-NNNNNNNNNN: one ephemeral sequential znode per member
 *   process, made at its join: its sequence number is the member's id, and
 *   ZooKeeper deletes it when the member's session ends (closed, or expired
 *   because the member went silent for the session timeout). Its data: the
 *   member's sd_node and how far it has delivered (its progress).
 * - BASE/queue/e-NNNNNNNNNN: the total order. Every event is one persistent
 *   sequential znode: JOIN and LEAVE (with the member list after them) and
 *   NOTIFY (a message). Every member delivers them in sequence order; a
 *   listing of the children is a prefix of the commits, and an entry
 *   committed later has a higher number, so no member sees a gap.
 * - BASE/view: the member list as of the latest JOIN or LEAVE in the queue.
 *   A JOIN or LEAVE is written in one multi with a versioned write of the
 *   view, so the two never disagree, and two writers that race (two
 *   joiners, two members recording one death) cannot both win: the loser
 *   reads the view again. A joiner thus learns the list at its own JOIN
 *   without any history, and delivers from the entry after it.
 *
 * Leaves: when a member znode disappears, the members see it (a child
 * watch, and a poll every tick) and the first live member of the view
 * records a LEAVE (the others do it after ZK_LEAVE_BACKUP_MS if it did
 * not). The znode is gone before the LEAVE is written, and a member can
 * write only while its znode exists (below), so every entry a member
 * wrote comes before its LEAVE: "messages sent before the leave are
 * delivered before it, everywhere". A graceful leave() deletes its own
 * znode and writes its LEAVE in one multi.
 *
 * Sending exactly once: every write of a member (a message, or its
 * progress) is a versioned write of its own znode, a message in one multi
 * with the creation of its entry. The writes are pipelined, in order, by
 * the worker. When one fails (the connection dropped: applied or not?),
 * the worker waits until none is in flight, reads the znode's version,
 * and knows which were applied; it sends the others again. A write that
 * the server applies late, after the retry, fails on the version: nothing
 * is ever queued twice. A write fails with ZNONODE once the znode is gone.
 *
 * Garbage: the first member of the view deletes, every ZK_GC_MS, the
 * entries that every member znode's progress has passed. A joiner's
 * progress is 0 until it has joined: nothing is collected meanwhile.
 *
 * Liveness and eviction (cluster.h): a member stopped (SIGSTOP) or dead
 * stops its session's pings, and the ensemble expires it after the session
 * timeout (`timeout=S`, by default the heartbeat timeout): its znode goes,
 * and the others record its LEAVE. A member whose main thread hangs while
 * the client's threads still answer pings is caught by the worker: main
 * has not ticked for the heartbeat timeout, so it deletes its own znode.
 * A member that has heard nothing from the ensemble for nearly the
 * session timeout (cut off, or stopped itself) cannot know whether the
 * others have declared it dead: it declares itself evicted before they
 * can have (evicted on the ensemble's clock is on the server; this is the
 * member's own, with a margin), so it never serves a view that the others
 * left. Evicted, it delivers left(myself) with the list it had less itself,
 * and then nothing; the daemon leaves (closing the session deletes the
 * znode if the ensemble still has it) and joins again as a new member. A
 * joiner first records the LEAVE of every member of the view whose znode
 * is gone, and of an older incarnation of itself (same address), so the
 * list never holds one node twice.
 *
 * Quorum: a member reads only what a quorum of the ensemble committed, so
 * its view never diverges from the others'; a member whose servers lost
 * quorum (or that cannot reach them) receives nothing: order stops, the
 * notify()s wait (up to ZK_MAX_OUT) and are sent when a quorum answers
 * again, while I/O that needs no order goes on. If that lasts nearly the
 * session timeout, the member evicts itself as above, since the majority
 * may be moving on without it. So there is no is_quorate() to ask and no
 * quorum_lost() to call: a partition cannot diverge, it can only be cut off.
 *
 * Threads: see zk.h. The client's callbacks only set flags under zk.lock
 * and wake the worker; the worker hands fetched entries to the main thread
 * through zk.ready and an eventfd in the main loop; the daemon's callbacks
 * run only on the main thread, from that handler, the tick, catch_up() and
 * join().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "event.h"
#include "logger.h"
#include "util.h"
#include "zk.h"

#define ZK_JOIN_WAIT_MS 20000 /* join(): for a server, and for the JOIN to commit */

enum zk_state {
	ZK_IDLE,
	ZK_MEMBER,
	ZK_EVICTED,
};

/* main thread */
static const struct cdrv_events *events;
static struct zk_config cfg;
static enum zk_state state;
static int tick_fd = -1;
static struct zk_member view[SD_MAX_NODES];
static int nr_view;
static bool has_cond;

static void lock(void)
{
	if (pthread_mutex_lock(&zk.lock))
		abort();
}

static void unlock(void)
{
	if (pthread_mutex_unlock(&zk.lock))
		abort();
}

/* ------------------------------------------------------------------ */
/* the view, and delivery (main thread) */

/* the nodes of list, without member skip (UINT64_MAX: none) */
static const struct sd_node *view_nodes(const struct zk_member *list, int nr, uint64_t skip)
{
	static struct sd_node nodes[SD_MAX_NODES];
	int n = 0;

	for (int i = 0; i < nr; i++)
		if (list[i].id != skip)
			nodes[n++] = list[i].node;
	return nodes;
}

static void evict_self(const char *why)
{
	int n = nr_view - (zk_find(view, nr_view, zk.self_id) >= 0);

	if (state != ZK_MEMBER)
		return;
	state = ZK_EVICTED;
	lock();
	zk.is_evict_posted = true; /* the worker stops acting for this member */
	unlock();
	sd_err("this member is out of the cluster: %s", why);
	events->left(&zk.self_node, view_nodes(view, nr_view, zk.self_id), n);
}

static void deliver_entry(const struct zk_ready *r)
{
	struct zk_decoded d;
	struct sd_node node;
	int i;

	if (zk_decode_rec(r->data, r->len, false, &d))
		return; /* the worker checked it */
	i = zk_find(view, nr_view, d.id);
	if (i >= 0)
		node = view[i].node;
	switch (d.type) {
	case ZK_REC_JOIN:
		zk_copy_list(view, &d);
		nr_view = d.nr;
		i = zk_find(view, nr_view, d.id);
		if (i >= 0)
			events->joined(&view[i].node, view_nodes(view, nr_view, UINT64_MAX), nr_view);
		break;
	case ZK_REC_LEAVE:
		zk_copy_list(view, &d);
		nr_view = d.nr;
		if (d.id == zk.self_id) {
			state = ZK_EVICTED;
			lock();
			zk.is_evict_posted = true;
			unlock();
			sd_err("the others recorded this member as gone");
			events->left(&zk.self_node, view_nodes(view, nr_view, UINT64_MAX), nr_view);
		} else if (i >= 0) {
			events->left(&node, view_nodes(view, nr_view, UINT64_MAX), nr_view);
		}
		break;
	case ZK_REC_NOTIFY:
		if (i >= 0)
			events->notified(&node, d.msg, d.msg_len);
		break;
	}
}

/* deliver what the worker fetched, in order, until there is none or this member is out */
static void deliver_ready(void)
{
	while (state == ZK_MEMBER) {
		struct zk_ready *r = NULL;

		lock();
		if (!list_empty(&zk.ready)) {
			r = list_first_entry(&zk.ready, struct zk_ready, node);
			list_del(&r->node);
			zk.ready_bytes -= r->len;
		}
		unlock();
		if (!r)
			return;
		if (r->seq < 0) {
			r->data[r->len] = '\0';
			evict_self((const char *)r->data);
		} else {
			deliver_entry(r);
			__atomic_store_n(&zk.delivered_seq, r->seq, __ATOMIC_RELAXED);
		}
		free(r);
	}
}

/*
 * Nothing heard from the ensemble for nearly the session timeout: the
 * others may be declaring this member dead. The margin covers a round
 * trip and a tick of this thread.
 */
static void check_session(uint64_t now)
{
	uint64_t last = __atomic_load_n(&zk.last_ok_ns, __ATOMIC_RELAXED);
	uint64_t margin = (uint64_t)zk.session_ms * 100000 + 2 * ZK_TICK_MS * 1000000ULL;
	uint64_t bound = (uint64_t)zk.session_ms * 1000000;
	bool expired;

	lock();
	expired = zk.is_expired;
	unlock();
	if (state != ZK_MEMBER)
		return;
	if (expired) {
		deliver_ready();
		evict_self("the ensemble expired this member's session");
	} else if (now > last && now - last + margin > bound) {
		deliver_ready();
		sd_warn("no answer from ZooKeeper for %" PRIu64 " ms (session timeout %u ms)",
			(now - last) / 1000000, zk.session_ms);
		evict_self("cut off from the ensemble for nearly the session timeout");
	}
}

static void zk_ready_handler(int fd, uint32_t ev, void *data)
{
	uint64_t n;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		sd_err("eventfd: %m");
	deliver_ready();
}

static void zk_tick(int fd, uint32_t ev, void *data)
{
	uint64_t n, now = sd_now_ns();

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		sd_err("timerfd: %m");
	cdrv_tick();
	__atomic_store_n(&zk.main_alive_ns, now, __ATOMIC_RELAXED);
	deliver_ready();
	check_session(now);
}

static void zk_catch_up(void)
{
	deliver_ready();
	check_session(sd_now_ns());
}

/* ------------------------------------------------------------------ */
/* the session, and joining (main thread, synchronous) */

static int init_cond(void)
{
	pthread_condattr_t attr;

	if (has_cond)
		return 0;
	if (pthread_condattr_init(&attr) || pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
	    pthread_cond_init(&zk.cond, &attr))
		return -ENOMEM;
	pthread_condattr_destroy(&attr);
	has_cond = true;
	return 0;
}

static int zk_init(const char *option, const struct cdrv_events *ev)
{
	char err[256];
	int ret;

	events = ev;
	if (!option)
		option = cdrv_selected_option();
	if (zk_parse_option(option, &cfg, err, sizeof(err))) {
		sd_err("-c zookeeper:%s: %s", option ? option : "", err);
		return -EINVAL;
	}
	ret = init_cond();
	if (ret)
		return ret;
	snprintf(zk.base_path, sizeof(zk.base_path), "%s", cfg.base);
	snprintf(zk.members_path, sizeof(zk.members_path), "%s/members", cfg.base);
	snprintf(zk.queue_path, sizeof(zk.queue_path), "%s/queue", cfg.base);
	snprintf(zk.view_path, sizeof(zk.view_path), "%s/view", cfg.base);
	snprintf(zk.entry_prefix, sizeof(zk.entry_prefix), "%s/queue/e-", cfg.base);
	zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
	return 0;
}

/* wait (zk.lock held) until the connection is up or deadline; true if up */
static bool wait_connected(uint64_t deadline)
{
	while (!zk.is_connected && !zk.is_expired && sd_now_ns() < deadline &&
	       !cdrv_stop_pending()) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&zk.cond, &zk.lock, &ts);
	}
	return zk.is_connected;
}

static int connect_session(uint64_t deadline)
{
	unsigned int want = cfg.timeout_ms ? cfg.timeout_ms : cdrv_heartbeat_timeout_ms();
	bool up;

	lock();
	zk.is_connected = zk.is_expired = zk.stop = false;
	zk.wake_queue = zk.wake_members = zk.need_resync = zk.is_evict_posted = false;
	zk.gen++;
	unlock();
	zk.zh = zookeeper_init2(cfg.hosts, zk_watcher, (int)want, NULL, (void *)zk.gen, 0, zk_log);
	if (!zk.zh) {
		sd_err("zookeeper_init(%s): %m", cfg.hosts);
		return -errno ? -errno : -EINVAL;
	}
	lock();
	up = wait_connected(deadline);
	unlock();
	if (!up) {
		if (cdrv_stop_pending())
			return -EINTR;
		sd_err("no ZooKeeper server of %s answered", cfg.hosts);
		return -ECONNREFUSED;
	}
	zk.session_ms = (unsigned int)zoo_recv_timeout(zk.zh);
	if (zk.session_ms != want)
		sd_warn("the ensemble set the session timeout to %u ms (asked for %u ms: see its "
			"minSessionTimeout and maxSessionTimeout)",
			zk.session_ms, want);
	sd_info("connected to ZooKeeper %s, session timeout %u ms, cluster %s", cfg.hosts,
		zk.session_ms, cfg.base);
	return 0;
}

/* create path (and its parents): ZOK or an error */
static int ensure_path(const char *path, const void *data, int len)
{
	char buf[ZK_PATH_LEN];
	int rc = ZOK;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;

		*p = '\0';
		rc = zoo_create(zk.zh, buf, c ? NULL : data, c ? -1 : len, &ZOO_OPEN_ACL_UNSAFE, 0,
				NULL, 0);
		if (rc == ZNODEEXISTS)
			rc = ZOK;
		*p = c;
		if (rc != ZOK || !c)
			return rc;
	}
}

static int ensure_paths(void)
{
	uint8_t empty[sizeof(struct zk_rec)];
	size_t n = zk_encode_view(empty, sizeof(empty), NULL, 0);
	int rc = ensure_path(zk.base_path, NULL, -1);

	if (rc == ZOK)
		rc = ensure_path(zk.members_path, NULL, -1);
	if (rc == ZOK)
		rc = ensure_path(zk.queue_path, NULL, -1);
	if (rc == ZOK)
		rc = ensure_path(zk.view_path, empty, (int)n);
	if (rc != ZOK)
		sd_err("cannot create %s in ZooKeeper: %s", zk.base_path, zerror(rc));
	return rc;
}

/* this member's znode: ZOK, and zk.self_path and zk.self_id set */
static int create_self(void)
{
	struct zk_member_data md = { .magic = ZK_MAGIC, .node = zk.self_node };
	char prefix[ZK_PATH_LEN];

	/* not joined yet: the first member collects nothing meanwhile */
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/m-", zk.members_path);
	rc = zoo_create(zk.zh, prefix, (const char *)&md, sizeof(md), &ZOO_OPEN_ACL_UNSAFE,
			ZOO_EPHEMERAL | ZOO_SEQUENCE, zk.self_path, sizeof(zk.self_path));
	if (rc == ZOK)
		zk.self_id = (uint64_t)zk_seq_of(zk.self_path);
	return rc;
}

static bool same_nid(const struct sd_node *a, const struct sd_node *b)
{
	return !memcmp(&a->nid, &b->nid, sizeof(a->nid));
}

/*
 * One try at the JOIN: read who is alive and the view, record the LEAVE of
 * whoever is gone (and of an older self), then the JOIN. ZOK, and the view
 * in view[]/nr_view and the JOIN's sequence in *seq.
 */
static int try_join(int64_t *seq)
{
	static struct zk_member list[SD_MAX_NODES];
	uint64_t alive[SD_MAX_NODES * 2], gone[SD_MAX_NODES];
	struct zk_member_data md = { .magic = ZK_MAGIC, .node = zk.self_node };
	struct zk_member me = { .id = zk.self_id, .node = zk.self_node };
	int nr, nr_alive, nr_gone = 0, rc;
	int32_t version;
	zoo_op_t op;

	nr_alive = zk_alive_ids(alive, SD_MAX_NODES * 2, false);
	if (nr_alive < 0)
		return ZCONNECTIONLOSS;
	rc = zk_read_view(list, &nr, &version);
	if (rc != ZOK)
		return rc;
	for (int i = 0; i < nr; i++) {
		bool is_alive = false;

		for (int j = 0; j < nr_alive && !is_alive; j++)
			is_alive = alive[j] == list[i].id;
		if (is_alive && !same_nid(&list[i].node, &zk.self_node))
			continue;
		if (is_alive) {
			char path[ZK_PATH_LEN];

			sd_notice("an older incarnation of this node (member %" PRIu64
				  ") is still in the cluster: removing it",
				  list[i].id);
			snprintf(path, sizeof(path), "%s/m-%010" PRIu64, zk.members_path,
				 list[i].id);
			zoo_delete(zk.zh, path, -1);
		}
		gone[nr_gone++] = list[i].id;
	}
	if (nr - nr_gone + 1 > SD_MAX_NODES)
		return ZBADARGUMENTS;
	zoo_set_op_init(&op, zk.self_path, (const char *)&md, sizeof(md), 0, NULL);
	rc = zk_commit_view(list, nr, version, gone, nr_gone, &me, &op, 1, seq);
	if (rc != ZOK)
		return rc;
	nr_view = 0;
	for (int i = 0; i < nr; i++) {
		bool is_gone = false;

		for (int j = 0; j < nr_gone; j++)
			is_gone |= gone[j] == list[i].id;
		if (!is_gone)
			view[nr_view++] = list[i];
	}
	view[nr_view++] = me;
	return ZOK;
}

/* the JOIN committed, within deadline: ZOK and *seq, or an error */
static int join_cluster(uint64_t deadline, int64_t *seq)
{
	int rc = create_self();

	while (rc == ZOK || rc == ZBADVERSION || rc == ZNONODE || rc == ZCONNECTIONLOSS ||
	       rc == ZOPERATIONTIMEOUT) {
		if (rc == ZOK) {
			rc = try_join(seq);
			if (rc == ZOK)
				return ZOK;
		}
		if (sd_now_ns() > deadline || cdrv_stop_pending())
			break;
		if (rc == ZBADVERSION) {
			/* another joiner or leaver won the view: read it again */
			usleep(1000 + (useconds_t)(random() % 20000));
			rc = ZOK;
			continue;
		}
		/*
		 * This member's znode is gone, or the JOIN may or may not have
		 * committed: drop the znode (the others then record a LEAVE
		 * for it if it did) and start again as a new member.
		 */
		sd_notice("join interrupted (%s): trying again as a new member", zerror(rc));
		zoo_delete(zk.zh, zk.self_path, -1);
		lock();
		wait_connected(deadline);
		unlock();
		rc = create_self();
	}
	return rc;
}

static void close_session(void)
{
	if (zk.zh)
		zookeeper_close(zk.zh);
	zk.zh = NULL;
	lock();
	zk.is_connected = false;
	while (!list_empty(&zk.ready)) {
		struct zk_ready *r = list_first_entry(&zk.ready, struct zk_ready, node);

		list_del(&r->node);
		free(r);
	}
	while (!list_empty(&zk.out)) {
		struct zk_out *o = list_first_entry(&zk.out, struct zk_out, node);

		list_del(&o->node);
		free(o);
	}
	zk.ready_bytes = 0;
	zk.nr_out = zk.nr_in_flight = 0;
	unlock();
	if (zk.ready_fd >= 0)
		close(zk.ready_fd);
	if (tick_fd >= 0)
		close(tick_fd);
	zk.ready_fd = tick_fd = -1;
}

static int start_loop(void)
{
	struct itimerspec its = {
		.it_interval = { 0, ZK_TICK_MS * 1000000L },
		.it_value = { 0, ZK_TICK_MS * 1000000L },
	};
	int ret;

	__atomic_store_n(&zk.main_alive_ns, sd_now_ns(), __ATOMIC_RELAXED);
	tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tick_fd < 0 || timerfd_settime(tick_fd, 0, &its, NULL) < 0)
		return -errno;
	ret = ev_add(zk.ready_fd, EPOLLIN, zk_ready_handler, NULL);
	if (!ret)
		ret = ev_add(tick_fd, EPOLLIN, zk_tick, NULL);
	if (!ret)
		ret = zk_worker_start();
	if (ret) {
		ev_del(zk.ready_fd);
		ev_del(tick_fd);
	}
	return ret;
}

static int zk_join(const struct sd_node *myself)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)ZK_JOIN_WAIT_MS * 1000000;
	int64_t seq = 0;
	int ret, rc;

	if (state != ZK_IDLE || !events)
		return -EINVAL;
	zk.self_node = *myself;
	INIT_LIST_HEAD(&zk.ready);
	INIT_LIST_HEAD(&zk.out);
	zk.ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zk.ready_fd < 0)
		return -errno;
	ret = connect_session(deadline);
	if (ret)
		goto out_close;
	rc = ensure_paths();
	if (rc == ZOK)
		rc = join_cluster(deadline, &seq);
	if (rc != ZOK) {
		ret = cdrv_stop_pending() ? -EINTR
		      : rc == ZBADARGUMENTS ? -ENOSPC
					    : -ETIMEDOUT;
		if (ret != -EINTR)
			sd_err("cannot join the cluster in %s: %s", cfg.base,
			       rc == ZBADARGUMENTS ? "it has the most members a cluster may have"
						   : zerror(rc));
		goto out_close;
	}
	zk.member_version = 1;
	zk.fetched_seq = seq;
	__atomic_store_n(&zk.delivered_seq, seq, __ATOMIC_RELAXED);
	ret = start_loop();
	if (ret)
		goto out_close;
	state = ZK_MEMBER;
	sd_info("joined %s as member %" PRIu64 " at entry %" PRId64 ", %d members", cfg.base,
		zk.self_id, seq, nr_view);
	events->joined(myself, view_nodes(view, nr_view, UINT64_MAX), nr_view);
	return 0;
out_close:
	close_session();
	return ret;
}

/* a graceful leave: delete this member's znode and record its LEAVE, in one multi */
static void record_own_leave(void)
{
	static struct zk_member list[SD_MAX_NODES];
	int32_t version;
	zoo_op_t op;
	int nr, rc = ZBADVERSION;

	for (int tries = 0; tries < 10 && rc == ZBADVERSION; tries++) {
		rc = zk_read_view(list, &nr, &version);
		if (rc != ZOK)
			break;
		if (zk_find(list, nr, zk.self_id) < 0)
			return; /* recorded already */
		zoo_delete_op_init(&op, zk.self_path, -1);
		rc = zk_commit_view(list, nr, version, &zk.self_id, 1, NULL, &op, 1, NULL);
	}
	if (rc != ZOK)
		sd_warn("cannot record this member's leave (%s): the others will", zerror(rc));
}

static int zk_leave(void)
{
	bool is_connected;

	if (state == ZK_IDLE)
		return 0;
	zk_worker_stop();
	ev_del(zk.ready_fd);
	ev_del(tick_fd);
	lock();
	is_connected = zk.is_connected;
	unlock();
	if (state == ZK_MEMBER && is_connected)
		record_own_leave();
	state = ZK_IDLE;
	close_session();
	return 0;
}

static int zk_notify(const void *msg, size_t len)
{
	struct zk_out *o;
	size_t rec_len = sizeof(struct zk_rec) + len;

	if (state != ZK_MEMBER)
		return -ENOTCONN;
	if (len > ZK_MAX_MSG_LEN)
		return -EMSGSIZE;
	o = calloc(1, sizeof(*o) + rec_len);
	if (!o)
		return -ENOMEM;
	o->len = zk_encode_rec(o->rec, rec_len, ZK_REC_NOTIFY, zk.self_id, NULL, 0, msg, len);
	lock();
	if (zk.nr_out >= ZK_MAX_OUT) {
		unlock();
		free(o);
		return -EAGAIN;
	}
	list_add_tail(&o->node, &zk.out);
	zk.nr_out++;
	pthread_cond_broadcast(&zk.cond);
	unlock();
	return 0;
}

static const struct cluster_driver cdrv_zookeeper = {
	.name = "zookeeper",
	.init = zk_init,
	.join = zk_join,
	.leave = zk_leave,
	.notify = zk_notify,
	.catch_up = zk_catch_up,
};

cdrv_register_driver(cdrv_zookeeper);
