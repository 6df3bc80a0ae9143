/*
 * Cluster state: format, membership and epochs.
 *
 * DIR/config holds the format (creation time, copies, object size); every
 * epoch's node list is stored as DIR/epoch/NNNNNNNN, so a restarted node
 * knows the history (the files: group_disk.c). Every membership change
 * after format starts an epoch; the same nodes in another order are none.
 * State is changed only on the main thread; readers on other threads take
 * the lock.
 *
 * Restart: a node that starts alone on a formatted directory whose newest
 * epoch had other nodes waits for them (group_is_waiting), serving nothing
 * and counting no epoch, until they are back or an operator forces it
 * (group_force_start). A clean stop (a cluster shutdown) is marked in
 * DIR/clean-stop for the next start (group_started_clean).
 *
 * Quorum: a node whose partition has no quorum (the cluster driver says
 * so, see cluster.h) counts no epoch and applies no event: it stops with
 * a failure status, so that the majority alone goes on. Restarted once
 * the network is back, it joins like any node.
 *
 * Eviction: when the others declared this node dead (it was stopped or
 * hung for longer than the heartbeat timeout, see cluster.h), its view is
 * stale. From that moment it is joining again (group_is_joining(): client
 * requests wait, peers on the new epoch are refused), and from the main
 * loop it leaves the driver and joins it again as a new member: a new
 * epoch, its objects set aside as stale and recovered like any joiner's.
 * If it comes back alone (every other node is gone), it is the cluster,
 * as a node that formed it alone is: the requests that waited since the
 * eviction are served then (news.serving).
 * Membership news goes up through the callbacks that main registered
 * (group_set_news), and so do the cluster's ordered messages
 * (group_set_deliver): this file calls nothing above it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "cluster/cluster.h"
#include "event.h"
#include "lock.h"
#include "net.h"
#include "ec.h"
#include "group_disk.h"
#include "group.h"
#include "daemon.h"
#include "stat.h"

#define CONFIG_MAGIC UINT64_C(0x53444f47434f4e46) /* "SDOGCONF" */

struct sheep_disk_config {
	uint64_t magic;
	uint64_t ctime;
	uint8_t copies;
	uint8_t block_size_shift;
	uint8_t copy_policy; /* 0 in a config older than erasure-coded formats */
	uint8_t pad[5];
};

static struct cluster_state cs;
static struct sd_node self_node;
static pthread_mutex_t cs_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct cluster_driver *driver;
static const struct cdrv_events driver_events; /* where the driver reports (below) */
static struct epoch_ring *cur_ring; /* under cs_lock */
static bool is_quorum_lost;	    /* main thread */
static bool is_cluster_stopping;    /* main thread: a cluster shutdown was delivered */
static int rejoin_fd = -1;	    /* main thread: armed when this node was evicted */
static bool has_joined;		    /* main thread: its own first join was delivered */
static bool is_waiting;	      /* under cs_lock (atomic reads): for the nodes of its newest epoch */
static uint32_t wait_gen;     /* main thread: membership changes while waiting */
static uint32_t nr_evictions; /* main thread */
static bool started_clean;    /* set at start: see group_started_clean() */

/*
 * Weights set by SET_VNODES (collie node vnodes set, cluster reweight): a
 * member's vnodes as the cluster's order last set them, over what it
 * announced when it joined, which the driver's lists carry. Every driver
 * event's list is patched with them before it is used, so every node
 * builds the same ring. A member's entry goes when it leaves or joins
 * again: it announces its own weight then (kept in its directory). A
 * joining node learns the weights set before its join from the newest
 * epoch it adopts (group_adopt). Under cs_lock.
 */
#define VNODES_FILE "vnodes"
#define VNODES_MAGIC UINT32_C(0x564e4f44) /* "VNOD" */

struct vnodes_msg {
	uint32_t magic;
	uint32_t nr;
	struct sd_vnodes_entry e[];
};

static struct weight {
	struct sd_node_id nid;
	uint16_t nr_vnodes;
	bool ordered; /* set by a delivered SET_VNODES, not learned at a join */
} weights[SD_MAX_NODES];
static int nr_weights;

static struct weight *find_weight(const struct sd_node_id *nid)
{
	for (int i = 0; i < nr_weights; i++)
		if (!memcmp(&weights[i].nid, nid, sizeof(*nid)))
			return &weights[i];
	return NULL;
}

static void set_weight(const struct sd_node_id *nid, uint16_t nr_vnodes, bool ordered)
{
	struct weight *w = find_weight(nid);

	if (!w) {
		if (nr_weights == SD_MAX_NODES)
			return; /* only members have one, and they are at most as many */
		w = &weights[nr_weights++];
		w->nid = *nid;
	}
	w->nr_vnodes = nr_vnodes;
	w->ordered = ordered;
}

static void forget_weight(const struct sd_node_id *nid)
{
	struct weight *w = find_weight(nid);

	if (w)
		*w = weights[--nr_weights];
}

/* main thread: members[nr] with the weights, in a buffer valid until the next call */
static const struct sd_node *with_weights(const struct sd_node *members, int nr)
{
	static struct sd_node patched[SD_MAX_NODES];

	memcpy(patched, members, nr * sizeof(*members));
	sd_mutex_lock(&cs_lock);
	for (int i = 0; i < nr; i++) {
		const struct weight *w = find_weight(&patched[i].nid);

		if (w)
			patched[i].nr_vnodes = w->nr_vnodes;
	}
	sd_mutex_unlock(&cs_lock);
	return patched;
}

/* a ring for nodes[nr] at epoch (NULL: no memory); no lock needed */
static struct epoch_ring *make_ring(const struct sd_node *nodes, int nr, uint32_t epoch)
{
	struct epoch_ring *er = calloc(1, sizeof(*er));

	if (!er || ring_build(&er->ring, nodes, nr)) {
		sd_err("cannot build the ring of epoch %" PRIu32, epoch);
		free(er);
		return NULL;
	}
	er->refcnt = 1;
	er->epoch = epoch;
	er->local_idx = ring_find_node(&er->ring, &self_node.nid);
	return er;
}

/* group_wait_epoch's waiters: broadcast under cs_lock as a ring is published */
static pthread_cond_t epoch_cond;
static pthread_once_t epoch_cond_once = PTHREAD_ONCE_INIT;

static void epoch_cond_init(void)
{
	sd_cond_init_monotonic(&epoch_cond);
}

/* caller holds cs_lock: er (if made) becomes the current ring */
static void publish_ring(struct epoch_ring *er)
{
	if (!er)
		return;
	if (cur_ring)
		group_ring_put(cur_ring);
	cur_ring = er;
	pthread_once(&epoch_cond_once, epoch_cond_init);
	pthread_cond_broadcast(&epoch_cond);
}

bool group_wait_epoch(uint32_t epoch, int timeout_ms)
{
	struct timespec until;
	bool past;

	pthread_once(&epoch_cond_once, epoch_cond_init);
	sd_deadline_ms(&until, timeout_ms);
	sd_mutex_lock(&cs_lock);
	while (!(past = cur_ring && cur_ring->epoch > epoch) &&
	       pthread_cond_timedwait(&epoch_cond, &cs_lock, &until) == 0)
		;
	sd_mutex_unlock(&cs_lock);
	return past;
}

/* caller holds cs_lock: a new ring for the current members and epoch */
static void rebuild_ring(void)
{
	publish_ring(make_ring(cs.nodes, cs.nr_nodes, cs.epoch));
}

struct epoch_ring *group_ring_get(void)
{
	struct epoch_ring *er;

	sd_mutex_lock(&cs_lock);
	er = cur_ring;
	if (er)
		__atomic_add_fetch(&er->refcnt, 1, __ATOMIC_ACQ_REL);
	sd_mutex_unlock(&cs_lock);
	return er;
}

void group_ring_put(struct epoch_ring *er)
{
	if (er && __atomic_sub_fetch(&er->refcnt, 1, __ATOMIC_ACQ_REL) == 0) {
		ring_free(&er->ring);
		free(er);
	}
}

uint32_t group_epoch(void)
{
	uint32_t e;

	sd_mutex_lock(&cs_lock);
	e = cs.epoch;
	sd_mutex_unlock(&cs_lock);
	return e;
}

/* node's --io-addr as a v4-mapped address into out[16]: false when it has none */
static bool io_addr_of(const struct sd_node *node, uint8_t out[16])
{
	if (!node->io_port)
		return false;
	memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, node->io_addr, 4);
	return true;
}

bool group_has_member_addr(const uint8_t addr[16], bool *lo_member)
{
	bool found = false;

	*lo_member = false;
	sd_mutex_lock(&cs_lock);
	for (int i = 0; i < cs.nr_nodes; i++) {
		uint8_t io[16];

		if (!memcmp(cs.nodes[i].nid.addr, addr, sizeof(cs.nodes[i].nid.addr)) ||
		    (io_addr_of(&cs.nodes[i], io) && !memcmp(io, addr, sizeof(io))))
			found = true;
		if (sd_addr_is_loopback(cs.nodes[i].nid.addr))
			*lo_member = true;
	}
	sd_mutex_unlock(&cs_lock);
	return found;
}

bool group_io_endpoint(const struct sd_node_id *nid, struct sd_node_id *to)
{
	bool found = false;

	sd_mutex_lock(&cs_lock);
	for (int i = 0; i < cs.nr_nodes && !found; i++) {
		if (memcmp(&cs.nodes[i].nid, nid, sizeof(*nid)))
			continue;
		*to = *nid;
		found = io_addr_of(&cs.nodes[i], to->addr);
		if (found)
			to->port = cs.nodes[i].io_port;
	}
	sd_mutex_unlock(&cs_lock);
	return found;
}

const struct sd_node_id *group_self(void)
{
	return &self_node.nid;
}

int group_notify(const void *msg, size_t len)
{
	return driver ? driver->notify(msg, len) : -ENOTCONN;
}

/*
 * The format's copies, scheme and object size, checked where they enter:
 * from DIR/config, from a member's answer, from MAKE_FS. Every VDI and
 * object op trusts them afterwards (a VDI's bad copies fall back on the
 * cluster's). An erasure-coded format's copies are its D + P, and D must
 * divide the object size. 0, or -EINVAL (logged, with where they came
 * from).
 */
static int check_format(uint8_t copies, uint8_t policy, uint8_t shift, const char *from)
{
	int d = 0, p = 0;

	if (copies < 1 || copies > SD_MAX_COPIES || shift < SD_MIN_BLOCK_SIZE_SHIFT ||
	    shift > SD_MAX_BLOCK_SIZE_SHIFT) {
		sd_err("%s: a format with %u copies and block_size_shift %u refused (copies 1..%d, "
		       "block_size_shift %d..%d)",
		       from, copies, shift, SD_MAX_COPIES, SD_MIN_BLOCK_SIZE_SHIFT,
		       SD_MAX_BLOCK_SIZE_SHIFT);
		return -EINVAL;
	}
	if (policy && (!ec_policy_to_dp(policy, &d, &p) || d + p != copies ||
		       !ec_strip_len(UINT32_C(1) << shift, d))) {
		sd_err("%s: an erasure-coded format (copy_policy 0x%x) with %u copies refused "
		       "(D:P with D 2, 4, 8 or 16, P 1..%d, D + P copies)",
		       from, policy, copies, SD_EC_MAX_PARITY);
		return -EINVAL;
	}
	return 0;
}

/*
 * DIR/clean-stop: written as the daemon exits after a cluster shutdown,
 * removed (durably) as it starts, so that it says, at the next start, that
 * nothing was cut or written since: a crash or a power cut leaves none.
 */
#define CLEAN_STOP_FILE "clean-stop"
struct clean_stop {
	uint64_t ctime; /* the cluster's */
	uint32_t epoch; /* this node's newest */
	uint32_t pad;
};

/* at start, formatted: whether the last stop was clean at this epoch; the mark goes */
static int take_clean_stop(void)
{
	struct clean_stop c = { 0 };
	char path[4200];
	int ret;

	gd_path(path, sizeof(path), CLEAN_STOP_FILE);
	ret = gd_read_file(path, &c, sizeof(c));
	if (ret == -ENOENT)
		return 0;
	started_clean = !ret && c.ctime == cs.ctime && c.epoch == cs.epoch;
	/* gone for good before this node can serve anything */
	if (unlink(path) < 0 || gd_sync_dir()) {
		ret = -errno;
		sd_err("cannot remove %s: %s", path, strerror(-ret));
		started_clean = false;
		return ret;
	}
	if (started_clean)
		sd_info("stopped cleanly at epoch %" PRIu32 " by a cluster shutdown", cs.epoch);
	return 0;
}

bool group_started_clean(void)
{
	return started_clean;
}

void group_stopped(void)
{
	struct clean_stop c = { 0 };
	int ret;

	/*
	 * Not after a crash that this node did not take part in mending: one
	 * that waited since an unclean start and never served stays unclean.
	 */
	if (!is_cluster_stopping || !cs.formatted || daemon_exit_status() ||
	    (group_is_waiting() && !started_clean))
		return;
	c.ctime = cs.ctime;
	c.epoch = cs.epoch;
	ret = group_write_file(CLEAN_STOP_FILE, &c, sizeof(c));
	if (!ret)
		ret = gd_sync_dir();
	if (ret)
		sd_err("cannot mark the clean stop: %s", strerror(-ret));
}

int group_init(const char *dir)
{
	struct sheep_disk_config cfg;
	char path[4200];
	int ret;

	gd_init(dir);

	gd_path(path, sizeof(path), "epoch");
	ret = sd_mkdir_p(path, 0755);
	if (ret)
		return ret;
	gd_path(path, sizeof(path), "config");
	ret = gd_read_file(path, &cfg, sizeof(cfg));
	if (ret == -ENOENT)
		return 0;
	if (ret || cfg.magic != CONFIG_MAGIC) {
		sd_err("%s is unreadable or not a sheep config", path);
		return ret ? ret : -EINVAL;
	}
	ret = check_format(cfg.copies, cfg.copy_policy, cfg.block_size_shift, path);
	if (ret)
		return ret;
	cs.formatted = true;
	cs.ctime = cfg.ctime;
	cs.copies = cfg.copies;
	cs.copy_policy = cfg.copy_policy;
	cs.block_size_shift = cfg.block_size_shift;
	cs.epoch = gd_latest_epoch();
	sd_info("formatted cluster, copies %u, latest epoch %" PRIu32, cs.copies, cs.epoch);
	return take_clean_stop();
}

/*
 * Membership changed: a new epoch when formatted and the list differs.
 * While this node is joining, its epoch is not its own to count: only the
 * list is kept, and group_adopt() sets the epoch it learned from a member.
 * True when a new epoch began.
 *
 * The new epoch's log is written (two fsyncs) before cs_lock is taken, and
 * the lock only publishes the result: readers on other threads (every
 * peer op's epoch check, every gateway request's ring) never wait for the
 * disk. The cluster worker may change the state meanwhile (a format, or a
 * join that adopts a member's history, both under the lock): then the
 * decision is taken again on the state it left.
 */
static bool update_members(const struct sd_node *members, int nr)
{
	struct sd_epoch_log last;
	struct epoch_ring *er;
	bool changed, formatted, joining;
	uint32_t epoch;

	for (;;) {
		sd_mutex_lock(&cs_lock);
		formatted = cs.formatted;
		joining = cs.joining;
		epoch = cs.epoch;
		sd_mutex_unlock(&cs_lock);
		changed = false;
		/* a cluster shutdown stops every node: their exits are no new epoch */
		if (formatted && !joining && !is_waiting && !daemon_stopping() &&
		    !is_cluster_stopping &&
		    (epoch == 0 || gd_read_epoch_log(epoch, &last) ||
		     !gd_same_nodes(last.nodes, last.nr_nodes, members, nr) ||
		     !gd_same_weights(last.nodes, last.nr_nodes, members, nr))) {
			int ret = gd_write_epoch_log(epoch + 1, members, nr);

			if (ret) {
				sd_err("cannot store epoch %" PRIu32 ": %s", epoch + 1,
				       strerror(-ret));
			} else {
				epoch++;
				changed = true;
			}
		}
		er = make_ring(members, nr, epoch);
		sd_mutex_lock(&cs_lock);
		if (cs.formatted == formatted && cs.joining == joining &&
		    cs.epoch == epoch - changed)
			break;
		/*
		 * The cluster worker moved the state on: decide again. Never
		 * after a log was written here: the worker changes the epoch
		 * only while this node joins or is unformatted, and then none is.
		 */
		sd_mutex_unlock(&cs_lock);
		group_ring_put(er);
	}
	cs.nr_nodes = nr;
	memcpy(cs.nodes, members, nr * sizeof(*members));
	cs.local_idx = 0;
	for (int i = 0; i < nr; i++)
		if (!memcmp(&members[i].nid, &self_node.nid, sizeof(members[i].nid)))
			cs.local_idx = i;
	cs.epoch = epoch;
	if (er)
		publish_ring(er);
	else
		rebuild_ring(); /* no memory for a ring outside the lock: the old way */
	sd_mutex_unlock(&cs_lock);
	if (changed)
		sd_info("epoch %" PRIu32 ", %d nodes", epoch, nr);
	return changed;
}

/*
 * The cluster shutdown is delivered: from here on no membership change is
 * an epoch. Set on delivery, on the main thread, and not when the op is
 * applied on the cluster worker: a node that stopped quickly can be seen
 * leaving before this node's worker gets to it, and that node would then
 * store an epoch that the others do not (the histories would diverge).
 */
void group_cluster_stopping(void)
{
	is_cluster_stopping = true;
}

/* main thread: this partition has no quorum; stop, once */
static void stop_without_quorum(void)
{
	if (is_quorum_lost)
		return;
	is_quorum_lost = true;
	sd_emerg("lost quorum: this node is in a minority partition; stopping, restart it once the "
		 "network is back");
	daemon_stop(1);
}

/* main thread: false, and the daemon stops, when this partition has no quorum */
static bool check_quorum(void)
{
	if (!is_quorum_lost && !cdrv_is_quorate())
		stop_without_quorum();
	return !is_quorum_lost;
}

/* membership news for the layer above (recovery), registered by main */
static struct group_news news;

void group_set_news(const struct group_news *n)
{
	news = *n;
}

static void news_joined(void)
{
	if (news.joined)
		news.joined();
}

static void news_epoch_changed(void)
{
	if (news.epoch_changed)
		news.epoch_changed();
}

static void news_serving(void)
{
	if (news.serving)
		news.serving();
}

static void news_wait_covered(uint32_t gen)
{
	if (news.wait_covered)
		news.wait_covered(gen);
}

static void news_node_left(const struct sd_node *left)
{
	if (news.node_left)
		news.node_left(&left->nid);
}

static void news_node_gone(const struct sd_node *left)
{
	if (news.node_gone)
		news.node_gone(&left->nid);
}

/* where a delivered message goes (ordered.c's ordered_deliver), registered by main */
static group_deliver_fn deliver_fn;

void group_set_deliver(group_deliver_fn fn)
{
	deliver_fn = fn;
}

/*
 * main thread: how many storing nodes of the newest stored epoch are not
 * members (0: none, or no log)
 */
static int nr_awaited(const struct sd_node *members, int nr)
{
	struct sd_epoch_log *last = calloc(1, sizeof(*last)); /* zeroed: script/analyze */
	int missing = 0;

	if (!last)
		return 0;
	sd_mutex_lock(&cs_lock);
	if (cs.formatted && cs.epoch && !gd_read_epoch_log(cs.epoch, last))
		for (uint32_t i = 0; i < last->nr_nodes; i++) /* a gateway holds no object */
			missing += !(last->nodes[i].flags & SD_NODE_GATEWAY) &&
				   gd_find_node(&last->nodes[i].nid, members, nr) < 0;
	sd_mutex_unlock(&cs_lock);
	free(last);
	return missing;
}

static void set_waiting(bool on)
{
	sd_mutex_lock(&cs_lock);
	__atomic_store_n(&is_waiting, on, __ATOMIC_RELEASE);
	sd_mutex_unlock(&cs_lock);
}

bool group_is_waiting(void)
{
	return __atomic_load_n(&is_waiting, __ATOMIC_ACQUIRE);
}

/*
 * Main thread, on a membership change while this node waits (see
 * group_joined): the list is kept, no epoch counted, until every node
 * of the newest stored epoch is back. Then the layer above waits until
 * each member has compared its own history with this node's and accepted
 * it (news.wait_covered: one whose history is newer refuses and leaves),
 * and group_end_wait() ends the wait if no member came or went meanwhile.
 */
static void wait_members_changed(const struct sd_node *members, int nr)
{
	int missing = nr_awaited(members, nr);

	wait_gen++;
	update_members(members, nr);
	if (missing) {
		sd_info("waiting for %d more node(s) of epoch %" PRIu32 " before serving", missing,
			group_epoch());
		return;
	}
	sd_info("the nodes of epoch %" PRIu32 " are back: waiting for each to accept this "
		"node's history",
		group_epoch());
	news_wait_covered(wait_gen);
}

/* serve: a new epoch if the members differ from the newest stored one's, and recover */
static void end_wait(void)
{
	struct cluster_state *now = malloc(sizeof(*now));

	set_waiting(false);
	if (now) {
		group_get_state(now);
		update_members(now->nodes, now->nr_nodes);
		free(now);
	}
	news_epoch_changed();
}

void group_end_wait(uint32_t gen)
{
	if (!group_is_waiting() || gen != wait_gen)
		return;
	end_wait();
	sd_info("every node that is back accepted this node's history: serving at epoch %" PRIu32,
		group_epoch());
}

int group_force_start(void)
{
	if (!group_is_waiting())
		return -EALREADY;
	end_wait();
	sd_warn("forced to serve without the missing nodes of its last epoch: epoch %" PRIu32
		", %d node(s)",
		group_epoch(), group_nr_nodes());
	return 0;
}

static void group_joined(const struct sd_node *joined, const struct sd_node *members, int nr)
{
	bool is_self = !memcmp(&joined->nid, &self_node.nid, sizeof(joined->nid));

	if (!check_quorum())
		return;
	/*
	 * Back after an eviction, and alone: nobody to learn from. It is the
	 * cluster now, as a node that restarts alone is (a new epoch of one),
	 * so what waited since the eviction is served by the same rules as
	 * what comes next (a write that needs more nodes than there are fails
	 * with SD_RES_HALT); left waiting, it would wait for a join that
	 * never comes.
	 */
	/*
	 * Started alone on a formatted directory whose newest epoch had other
	 * nodes: this node's copies may be older than theirs (it may have been
	 * down while they wrote), and an epoch it counted alone would fork the
	 * history. It serves nothing and counts no epoch until they are back
	 * (or collie cluster recover force); the nodes that join meanwhile
	 * learn its state once it serves.
	 */
	if (is_self && !has_joined) {
		has_joined = true;
		if (nr == 1 && nr_awaited(members, nr)) {
			set_waiting(true);
			wait_members_changed(members, nr);
			return;
		}
	}
	if (group_is_waiting()) {
		wait_members_changed(members, nr);
		return;
	}
	if (is_self && nr == 1) {
		bool was_joining;

		sd_mutex_lock(&cs_lock);
		was_joining = cs.joining;
		cs.joining = false;
		sd_mutex_unlock(&cs_lock);
		if (update_members(members, nr))
			news_epoch_changed();
		if (was_joining)
			news_serving();
		return;
	}
	/* joining a cluster that runs: learn its state before serving */
	if (is_self && nr > 1) {
		sd_mutex_lock(&cs_lock);
		cs.joining = true;
		sd_mutex_unlock(&cs_lock);
		update_members(members, nr);
		news_joined();
		return;
	}
	if (update_members(members, nr))
		news_epoch_changed();
}

/* main thread, from the loop: leave the driver and join it again */
static void rejoin(int fd, uint32_t events, void *data)
{
	uint64_t expirations;
	int ret;

	if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		return;
	ev_del(fd);
	close(fd);
	rejoin_fd = -1;
	if (daemon_stopping())
		return;
	driver->leave();
	ret = driver->init(NULL, &driver_events);
	if (!ret)
		ret = driver->join(&self_node);
	if (ret) {
		sd_emerg("cannot join the cluster again after the eviction: %s; stopping",
			 strerror(-ret));
		daemon_stop(1);
		return;
	}
	sd_notice("joined again after eviction %" PRIu32, nr_evictions);
}

/*
 * The others declared this node dead: its view is stale. Stop serving at
 * once (joining again: client requests wait, the old epoch refuses peers
 * that moved on), and join again from the main loop, since a driver's
 * handler must not call leave() or join().
 */
static void evicted(void)
{
	struct itimerspec its = { .it_value = { 0, 1000000 } };

	nr_evictions++;
	sd_mutex_lock(&cs_lock);
	cs.joining = true;
	sd_mutex_unlock(&cs_lock);
	sd_err("this node was evicted from the cluster at epoch %" PRIu32
	       " (silent for longer than the heartbeat timeout, %u ms): it stops serving and "
	       "joins again",
	       cs.epoch, cdrv_heartbeat_timeout_ms());
	if (daemon_stopping() || rejoin_fd >= 0)
		return;
	rejoin_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (rejoin_fd < 0 || timerfd_settime(rejoin_fd, 0, &its, NULL) < 0 ||
	    ev_add(rejoin_fd, EPOLLIN, rejoin, NULL)) {
		sd_emerg("cannot schedule the join after the eviction: %m; stopping");
		if (rejoin_fd >= 0)
			close(rejoin_fd);
		rejoin_fd = -1;
		daemon_stop(1);
	}
}

static void group_left(const struct sd_node *left, const struct sd_node *members, int nr)
{
	bool changed;

	if (!memcmp(&left->nid, &self_node.nid, sizeof(left->nid))) {
		evicted();
		return;
	}
	if (!check_quorum())
		return;
	if (group_is_waiting()) {
		wait_members_changed(members, nr);
		return;
	}
	news_node_left(left);
	changed = update_members(members, nr);
	/*
	 * Workers blocked on it (stopped, evicted) give up now, not before:
	 * cut while the old ring was still published (the epoch log's fsyncs
	 * take a while), a retry found the old ring and blocked on the gone
	 * node again for PEER_TIMEOUT_MS, past its client's deadline.
	 */
	news_node_gone(left);
	if (changed)
		news_epoch_changed();
}

void group_catch_up(uint64_t now)
{
	cdrv_catch_up(now);
}

/* this node's weight for its next start (main thread) */
static void save_vnodes(uint16_t nr_vnodes)
{
	uint32_t v = nr_vnodes;
	int ret = group_write_file(VNODES_FILE, &v, sizeof(v));

	if (ret)
		sd_err("cannot keep this node's vnodes (%u) for its next start: %s", nr_vnodes,
		       strerror(-ret));
}

/*
 * SET_VNODES delivered, on every node at the same place of the order: the
 * members named take their new weights, and one epoch begins with them.
 * A member that left meanwhile is passed over.
 */
static void vnodes_delivered(const void *msg, size_t len)
{
	static struct sd_node nodes[SD_MAX_NODES];
	struct vnodes_msg hdr;
	uint16_t mine = 0;
	int nr, nr_set = 0;

	memcpy(&hdr, msg, sizeof(hdr));
	if (hdr.nr < 1 || hdr.nr > SD_MAX_NODES ||
	    len != sizeof(hdr) + hdr.nr * sizeof(struct sd_vnodes_entry)) {
		sd_err("a SET_VNODES message of %zu bytes for %" PRIu32 " nodes: ignored", len,
		       hdr.nr);
		return;
	}
	if (is_cluster_stopping)
		return;
	sd_mutex_lock(&cs_lock);
	nr = cs.nr_nodes;
	memcpy(nodes, cs.nodes, nr * sizeof(*nodes));
	for (uint32_t i = 0; i < hdr.nr; i++) {
		struct sd_vnodes_entry e;
		int j;

		memcpy(&e, (const char *)msg + sizeof(hdr) + i * sizeof(e), sizeof(e));
		j = gd_find_node(&e.nid, nodes, nr);
		if (j < 0 || (nodes[j].flags & SD_NODE_GATEWAY) || e.nr_vnodes < 1 ||
		    e.nr_vnodes > SD_MAX_VNODES)
			continue;
		set_weight(&e.nid, (uint16_t)e.nr_vnodes, true);
		nodes[j].nr_vnodes = (uint16_t)e.nr_vnodes;
		nr_set++;
		if (!memcmp(&e.nid, &self_node.nid, sizeof(e.nid)))
			mine = (uint16_t)e.nr_vnodes;
	}
	sd_mutex_unlock(&cs_lock);
	if (mine) {
		self_node.nr_vnodes = mine; /* a join after an eviction announces it */
		save_vnodes(mine);
		sd_notice("this node's vnodes are %u now", mine);
	}
	if (!nr_set)
		return;
	if (group_is_waiting()) {
		wait_members_changed(nodes, nr);
		return;
	}
	if (update_members(nodes, nr))
		news_epoch_changed();
}

static void group_notified(const struct sd_node *sender, const void *msg, size_t len)
{
	uint32_t magic = 0;

	if (!check_quorum())
		return;
	if (len >= sizeof(struct vnodes_msg))
		memcpy(&magic, msg, sizeof(magic));
	if (magic == VNODES_MAGIC)
		vnodes_delivered(msg, len);
	else if (deliver_fn)
		deliver_fn(msg, len, cs.nr_nodes);
	else
		sd_err("a cluster message of %zu bytes and nobody to take it", len);
}

static void group_quorum_lost(void)
{
	stop_without_quorum();
}

/* the driver's events, their lists with the weights (a member that joins or leaves has none) */
static void driver_joined(const struct sd_node *joined, const struct sd_node *members, int nr)
{
	sd_mutex_lock(&cs_lock);
	forget_weight(&joined->nid);
	sd_mutex_unlock(&cs_lock);
	group_joined(joined, with_weights(members, nr), nr);
}

static void driver_left(const struct sd_node *left, const struct sd_node *members, int nr)
{
	sd_mutex_lock(&cs_lock);
	forget_weight(&left->nid);
	sd_mutex_unlock(&cs_lock);
	group_left(left, with_weights(members, nr), nr);
}

/* where the cluster driver reports */
static const struct cdrv_events driver_events = {
	.joined = driver_joined,
	.left = driver_left,
	.notified = group_notified,
	.quorum_lost = group_quorum_lost,
};

int group_join(const struct cluster_driver *drv, const char *option, const struct sd_node *me)
{
	int ret;

	self_node = *me;
	driver = drv;
	ret = drv->init(option, &driver_events);
	return ret ? ret : drv->join(me);
}

int group_format(uint64_t ctime, uint8_t copies, uint8_t copy_policy, uint8_t shift,
		 int nr_storing)
{
	struct sheep_disk_config cfg = { .magic = CONFIG_MAGIC };
	int ret, d = 0, p = 0;

	sd_mutex_lock(&cs_lock);
	if (cs.formatted) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (copy_policy && ec_policy_to_dp(copy_policy, &d, &p) && !copies)
		copies = (uint8_t)(d + p);
	if (copies == 0)
		copies = (uint8_t)min_t(int, 3, nr_storing);
	if (copies == 0) {
		sd_err("format refused: no node stores objects");
		ret = -ERANGE;
		goto out_unlock;
	}
	if (shift == 0)
		shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	ret = check_format(copies, copy_policy, shift, "MAKE_FS");
	if (ret)
		goto out_unlock;
	if (copies > nr_storing) {
		sd_err("format with %u %s refused: %d node(s) store objects", copies,
		       copy_policy ? "strips" : "copies", nr_storing);
		ret = -ERANGE;
		goto out_unlock;
	}
	cfg.ctime = ctime ? ctime : (uint64_t)time(NULL);
	cfg.copies = copies;
	cfg.copy_policy = copy_policy;
	cfg.block_size_shift = shift;
	ret = gd_write_epoch_log(1, cs.nodes, cs.nr_nodes);
	if (!ret)
		ret = group_write_file("config", &cfg, sizeof(cfg));
	if (ret) {
		sd_err("cannot store the format: %s", strerror(-ret));
		goto out_unlock;
	}
	cs.formatted = true;
	cs.ctime = cfg.ctime;
	cs.copies = copies;
	cs.copy_policy = copy_policy;
	cs.block_size_shift = shift;
	cs.epoch = 1;
	rebuild_ring();
	if (copy_policy)
		sd_info("cluster formatted: erasure coded %d:%d, epoch 1", d, p);
	else
		sd_info("cluster formatted: %u copies, epoch 1", copies);
	ret = 0;
out_unlock:
	sd_mutex_unlock(&cs_lock);
	return ret;
}

void group_get_state(struct cluster_state *out)
{
	sd_mutex_lock(&cs_lock);
	*out = cs;
	sd_mutex_unlock(&cs_lock);
}

bool group_is_joining(void)
{
	return __atomic_load_n(&cs.joining, __ATOMIC_ACQUIRE);
}

/* gd_check_history against this node's state (caller holds cs_lock) */
static int check_history(uint32_t their_epoch, const struct sd_epoch_log *logs, int n, bool joining)
{
	if (!cs.formatted || cs.epoch == 0)
		return 0;
	return gd_check_history(cs.epoch, their_epoch, logs, n, joining);
}

int group_check_history(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n,
			bool joining)
{
	int ret = 0;

	sd_mutex_lock(&cs_lock);
	/* another cluster's or an unformatted one's: group_adopt says so */
	if ((rsp->cinfo.status == SD_STATUS_OK || rsp->cinfo.status == SD_STATUS_WAIT_FOR_JOIN) &&
	    cs.formatted && cs.ctime == rsp->cinfo.ctime)
		ret = gd_valid_logs(logs, n) ?: check_history(rsp->cinfo.epoch, logs, n, joining);
	sd_mutex_unlock(&cs_lock);
	return ret;
}

/*
 * cs_lock held, joining: the weights that SET_VNODES set since this node
 * joined are in the member's newest epoch too (else the member has not
 * applied them yet: ask again)
 */
static bool weights_agree(const struct sd_epoch_log *newest)
{
	for (int i = 0; i < nr_weights; i++) {
		int j = gd_find_node(&weights[i].nid, newest->nodes, (int)newest->nr_nodes);

		if (weights[i].ordered && j >= 0 &&
		    newest->nodes[j].nr_vnodes != weights[i].nr_vnodes)
			return false;
	}
	return true;
}

/* cs_lock held, joining: the members' weights as the newest epoch has them (set before the join) */
static void take_weights(const struct sd_epoch_log *newest)
{
	for (int i = 0; i < cs.nr_nodes; i++) {
		int j = gd_find_node(&cs.nodes[i].nid, newest->nodes, (int)newest->nr_nodes);

		if (j < 0 || newest->nodes[j].nr_vnodes == cs.nodes[i].nr_vnodes)
			continue;
		set_weight(&cs.nodes[i].nid, newest->nodes[j].nr_vnodes, false);
		cs.nodes[i].nr_vnodes = newest->nodes[j].nr_vnodes;
	}
}

/*
 * Take the state that member answered (rsp: STAT_CLUSTER's cinfo, logs[n]
 * newest first) as this node's: its format, epoch and epoch history. Only
 * when the member's newest epoch has the very node list that this node
 * sees now (-EAGAIN otherwise: one of the two has not caught up yet).
 * -EINVAL when the member belongs to another cluster (another format) or
 * sent a log that cannot be one (epoch 0, more than SD_MAX_NODES nodes)
 * or a format this daemon cannot serve (copies, object size); -ESTALE when
 * this node's own history is newer or forked (see check_history): it must
 * not take the member's.
 */
int group_adopt(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n)
{
	struct sheep_disk_config cfg = { .magic = CONFIG_MAGIC };
	int ret = 0;

	sd_mutex_lock(&cs_lock);
	/* it waits for the nodes of its newest epoch: it serves, and answers, once they are back */
	if (rsp->cinfo.status == SD_STATUS_WAIT_FOR_JOIN) {
		ret = -EAGAIN;
		goto out_unlock;
	}
	if (rsp->cinfo.status != SD_STATUS_OK) {
		/* the cluster is not formatted (yet): nothing to learn */
		if (cs.formatted) {
			ret = -EINVAL;
			goto out_unlock;
		}
		goto out_joined;
	}
	/* what the member sent is checked before any of it is used or written */
	ret = check_format(rsp->cinfo.copies, rsp->cinfo.copy_policy, rsp->cinfo.block_size_shift,
			   "the cluster's state");
	if (ret || (ret = gd_valid_logs(logs, n)))
		goto out_unlock;
	if (n < 1 || logs[0].epoch != rsp->cinfo.epoch ||
	    !gd_same_nodes(logs[0].nodes, (int)logs[0].nr_nodes, cs.nodes, cs.nr_nodes) ||
	    !weights_agree(&logs[0])) {
		ret = -EAGAIN;
		goto out_unlock;
	}
	if (cs.formatted && cs.ctime != rsp->cinfo.ctime) {
		ret = -EINVAL;
		goto out_unlock;
	}
	ret = check_history(rsp->cinfo.epoch, logs, n, true);
	if (ret)
		goto out_unlock;
	for (int i = 0; i < n && !ret; i++)
		ret = gd_write_epoch_log(logs[i].epoch, logs[i].nodes, (int)logs[i].nr_nodes);
	/* new here, or the default copies changed while this node was away (ALTER_CLUSTER_COPY) */
	if (!ret && (!cs.formatted || cs.copies != rsp->cinfo.copies)) {
		cfg.ctime = rsp->cinfo.ctime;
		cfg.copies = rsp->cinfo.copies;
		cfg.copy_policy = rsp->cinfo.copy_policy;
		cfg.block_size_shift = rsp->cinfo.block_size_shift;
		ret = group_write_file("config", &cfg, sizeof(cfg));
	}
	if (ret)
		goto out_unlock;
	cs.formatted = true;
	cs.ctime = rsp->cinfo.ctime;
	cs.copies = rsp->cinfo.copies;
	cs.copy_policy = rsp->cinfo.copy_policy;
	cs.block_size_shift = rsp->cinfo.block_size_shift;
	cs.epoch = rsp->cinfo.epoch;
	take_weights(&logs[0]);
	rebuild_ring();
	sd_info("joined the cluster at epoch %" PRIu32 ", %d nodes, copies %u", cs.epoch,
		cs.nr_nodes, cs.copies);
out_joined:
	__atomic_store_n(&cs.joining, false, __ATOMIC_RELEASE);
out_unlock:
	sd_mutex_unlock(&cs_lock);
	return ret;
}

bool group_is_formatted(void)
{
	return __atomic_load_n(&cs.formatted, __ATOMIC_ACQUIRE);
}

int group_set_copies(uint8_t copies, int nr_storing)
{
	struct sheep_disk_config cfg = { .magic = CONFIG_MAGIC };
	int ret = 0;

	sd_mutex_lock(&cs_lock);
	if (!cs.formatted)
		ret = -ENOENT;
	else if (cs.copy_policy || copies < 1 || copies > SD_MAX_COPIES)
		ret = -EINVAL;
	else if (copies > nr_storing)
		ret = -ERANGE;
	if (ret || copies == cs.copies)
		goto out_unlock;
	cfg.ctime = cs.ctime;
	cfg.copies = copies;
	cfg.copy_policy = cs.copy_policy;
	cfg.block_size_shift = cs.block_size_shift;
	ret = group_write_file("config", &cfg, sizeof(cfg));
	if (ret) {
		sd_err("cannot store the new default copies: %s", strerror(-ret));
		goto out_unlock;
	}
	sd_info("the cluster's default copies: %u, %u before", copies, cs.copies);
	__atomic_store_n(&cs.copies, copies, __ATOMIC_RELEASE);
out_unlock:
	sd_mutex_unlock(&cs_lock);
	return ret;
}

uint8_t group_copies(void)
{
	return __atomic_load_n(&cs.copies, __ATOMIC_ACQUIRE);
}

uint8_t group_copy_policy(void)
{
	return cs.copy_policy;
}

int group_nr_nodes(void)
{
	return cs.nr_nodes;
}

int group_nr_gateways(void)
{
	int n = 0;

	sd_mutex_lock(&cs_lock);
	for (int i = 0; i < cs.nr_nodes; i++)
		n += !!(cs.nodes[i].flags & SD_NODE_GATEWAY);
	sd_mutex_unlock(&cs_lock);
	return n;
}

int group_read_epoch_logs(struct sd_epoch_log *logs, int max)
{
	int n = 0, nr;
	uint32_t latest, *epochs;

	sd_mutex_lock(&cs_lock);
	latest = cs.epoch;
	sd_mutex_unlock(&cs_lock);
	nr = gd_list_epochs(latest, &epochs);
	for (int i = 0; epochs && i < nr && n < max; i++)
		if (gd_read_epoch_log(epochs[i], &logs[n]) == 0)
			n++;
	free(epochs);
	return n;
}

int group_set_vnodes(const struct sd_vnodes_entry *e, int n)
{
	struct vnodes_msg *msg;
	size_t len;
	int ret = 0, nr_changed = 0;

	if (n < 1 || n > SD_MAX_NODES)
		return -EINVAL;
	sd_mutex_lock(&cs_lock);
	if (!cs.formatted)
		ret = -EAGAIN;
	else if (cs.joining || group_is_waiting())
		ret = -EBUSY;
	for (int i = 0; i < n && !ret; i++) {
		int j = gd_find_node(&e[i].nid, cs.nodes, cs.nr_nodes);

		if (e[i].nr_vnodes < 1 || e[i].nr_vnodes > SD_MAX_VNODES)
			ret = -EINVAL;
		else if (j < 0)
			ret = -ENOENT;
		else if (cs.nodes[j].flags & SD_NODE_GATEWAY)
			ret = -EPERM;
		for (int k = 0; k < i && !ret; k++)
			if (!memcmp(&e[k].nid, &e[i].nid, sizeof(e[i].nid)))
				ret = -EINVAL;
		if (!ret && cs.nodes[j].nr_vnodes != e[i].nr_vnodes)
			nr_changed++;
	}
	sd_mutex_unlock(&cs_lock);
	if (ret || !nr_changed)
		return ret;
	len = sizeof(*msg) + (size_t)n * sizeof(*e);
	msg = calloc(1, len);
	if (!msg)
		return -ENOMEM;
	msg->magic = VNODES_MAGIC;
	msg->nr = (uint32_t)n;
	memcpy(msg->e, e, (size_t)n * sizeof(*e));
	ret = group_notify(msg, len);
	free(msg);
	return ret;
}

int group_saved_vnodes(bool forget)
{
	char path[4200];
	uint32_t v = 0;
	int ret;

	gd_path(path, sizeof(path), VNODES_FILE);
	if (forget) {
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
		return 0;
	}
	ret = gd_read_file(path, &v, sizeof(v));
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	if (v < 1 || v > SD_MAX_VNODES) {
		sd_err("%s holds no vnode count (%" PRIu32 "): ignored", path, v);
		return 0;
	}
	return (int)v;
}
