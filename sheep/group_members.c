/*
 * Membership as the cluster driver reports it, on the main thread
 * (group.h): what each join, leave or delivered message changes in the
 * state, which group.c holds and applies (group_update_members).
 *
 * Restart: a node that starts alone on a formatted directory whose newest
 * epoch had other nodes waits for them (group_is_waiting), serving nothing
 * and counting no epoch, until they are back or an operator forces it
 * (group_force_start).
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
 *
 * Weights: SET_VNODES goes through the cluster's order, and every node
 * gives the members their new vnodes at the same place of it (group.c
 * keeps them); this node's own is kept in DIR/vnodes for its next start.
 *
 * Membership news goes up through the callbacks that main registered
 * (group_set_news), and so do the cluster's ordered messages
 * (group_set_deliver): this file calls nothing above it.
 */
#include <errno.h>
#include <inttypes.h>
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
#include "group_disk.h"
#include "group.h"
#include "group_priv.h"
#include "daemon.h"

static const struct cluster_driver *driver;
static const struct cdrv_events driver_events; /* where the driver reports (below) */
static bool is_quorum_lost;		       /* main thread */
static int rejoin_fd = -1;		       /* main thread: armed when this node was evicted */
static bool has_joined;			       /* main thread: its own first join was delivered */
static uint32_t wait_gen;		       /* main thread: membership changes while waiting */
static uint32_t nr_evictions;		       /* main thread */

/* SET_VNODES's message, delivered in the cluster's order; DIR/vnodes: this node's weight */
#define VNODES_FILE "vnodes"
#define VNODES_MAGIC UINT32_C(0x564e4f44) /* "VNOD" */

struct vnodes_msg {
	uint32_t magic;
	uint32_t nr;
	struct sd_vnodes_entry e[];
};

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
	sd_mutex_lock(&group_cs_lock);
	if (group_cs.formatted && group_cs.epoch && !gd_read_epoch_log(group_cs.epoch, last))
		for (uint32_t i = 0; i < last->nr_nodes; i++) /* a gateway holds no object */
			missing += !(last->nodes[i].flags & SD_NODE_GATEWAY) &&
				   gd_find_node(&last->nodes[i].nid, members, nr) < 0;
	sd_mutex_unlock(&group_cs_lock);
	free(last);
	return missing;
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
	group_update_members(members, nr);
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

	group_set_waiting(false);
	if (now) {
		group_get_state(now);
		group_update_members(now->nodes, now->nr_nodes);
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
	bool is_self = !memcmp(&joined->nid, &group_self_node.nid, sizeof(joined->nid));

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
			group_set_waiting(true);
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

		sd_mutex_lock(&group_cs_lock);
		was_joining = group_cs.joining;
		group_cs.joining = false;
		sd_mutex_unlock(&group_cs_lock);
		if (group_update_members(members, nr))
			news_epoch_changed();
		if (was_joining)
			news_serving();
		return;
	}
	/* joining a cluster that runs: learn its state before serving */
	if (is_self && nr > 1) {
		sd_mutex_lock(&group_cs_lock);
		group_cs.joining = true;
		sd_mutex_unlock(&group_cs_lock);
		group_update_members(members, nr);
		news_joined();
		return;
	}
	if (group_update_members(members, nr))
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
		ret = driver->join(&group_self_node);
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
	sd_mutex_lock(&group_cs_lock);
	group_cs.joining = true;
	sd_mutex_unlock(&group_cs_lock);
	sd_err("this node was evicted from the cluster at epoch %" PRIu32
	       " (silent for longer than the heartbeat timeout, %u ms): it stops serving and "
	       "joins again",
	       group_cs.epoch, cdrv_heartbeat_timeout_ms());
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

	if (!memcmp(&left->nid, &group_self_node.nid, sizeof(left->nid))) {
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
	changed = group_update_members(members, nr);
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
	if (group_is_cluster_stopping)
		return;
	sd_mutex_lock(&group_cs_lock);
	nr = group_cs.nr_nodes;
	memcpy(nodes, group_cs.nodes, nr * sizeof(*nodes));
	for (uint32_t i = 0; i < hdr.nr; i++) {
		struct sd_vnodes_entry e;
		int j;

		memcpy(&e, (const char *)msg + sizeof(hdr) + i * sizeof(e), sizeof(e));
		j = gd_find_node(&e.nid, nodes, nr);
		if (j < 0 || (nodes[j].flags & SD_NODE_GATEWAY) || e.nr_vnodes < 1 ||
		    e.nr_vnodes > SD_MAX_VNODES)
			continue;
		group_set_weight(&e.nid, (uint16_t)e.nr_vnodes, true);
		nodes[j].nr_vnodes = (uint16_t)e.nr_vnodes;
		nr_set++;
		if (!memcmp(&e.nid, &group_self_node.nid, sizeof(e.nid)))
			mine = (uint16_t)e.nr_vnodes;
	}
	sd_mutex_unlock(&group_cs_lock);
	if (mine) {
		group_self_node.nr_vnodes = mine; /* a join after an eviction announces it */
		save_vnodes(mine);
		sd_notice("this node's vnodes are %u now", mine);
	}
	if (!nr_set)
		return;
	if (group_is_waiting()) {
		wait_members_changed(nodes, nr);
		return;
	}
	if (group_update_members(nodes, nr))
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
		deliver_fn(msg, len, group_cs.nr_nodes);
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
	sd_mutex_lock(&group_cs_lock);
	group_forget_weight(&joined->nid);
	sd_mutex_unlock(&group_cs_lock);
	group_joined(joined, group_with_weights(members, nr), nr);
}

static void driver_left(const struct sd_node *left, const struct sd_node *members, int nr)
{
	sd_mutex_lock(&group_cs_lock);
	group_forget_weight(&left->nid);
	sd_mutex_unlock(&group_cs_lock);
	group_left(left, group_with_weights(members, nr), nr);
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

	group_self_node = *me;
	driver = drv;
	ret = drv->init(option, &driver_events);
	return ret ? ret : drv->join(me);
}

int group_notify(const void *msg, size_t len)
{
	return driver ? driver->notify(msg, len) : -ENOTCONN;
}

int group_set_vnodes(const struct sd_vnodes_entry *e, int n)
{
	struct vnodes_msg *msg;
	size_t len;
	int ret = 0, nr_changed = 0;

	if (n < 1 || n > SD_MAX_NODES)
		return -EINVAL;
	sd_mutex_lock(&group_cs_lock);
	if (!group_cs.formatted)
		ret = -EAGAIN;
	else if (group_cs.joining || group_is_waiting())
		ret = -EBUSY;
	for (int i = 0; i < n && !ret; i++) {
		int j = gd_find_node(&e[i].nid, group_cs.nodes, group_cs.nr_nodes);

		if (e[i].nr_vnodes < 1 || e[i].nr_vnodes > SD_MAX_VNODES)
			ret = -EINVAL;
		else if (j < 0)
			ret = -ENOENT;
		else if (group_cs.nodes[j].flags & SD_NODE_GATEWAY)
			ret = -EPERM;
		for (int k = 0; k < i && !ret; k++)
			if (!memcmp(&e[k].nid, &e[i].nid, sizeof(e[i].nid)))
				ret = -EINVAL;
		if (!ret && group_cs.nodes[j].nr_vnodes != e[i].nr_vnodes)
			nr_changed++;
	}
	sd_mutex_unlock(&group_cs_lock);
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
