/*
 * Cluster state: format, membership and epochs (group.h), in three files.
 *
 * This one holds the state and what reads it: the format, the epoch and
 * the members (struct cluster_state) under group_cs_lock, the members'
 * weights, and the placement ring of the current epoch, shared by
 * reference (group_ring_get). A membership change is applied here
 * (group_update_members): every change after format starts an epoch, whose
 * node list is stored as DIR/epoch/NNNNNNNN (the files: group_disk.c), so
 * that a restarted node knows the history; the same nodes in another order
 * are none. State is changed only on the main thread; readers on other
 * threads take the lock.
 *
 * group_format.c formats the cluster, reads DIR/config at start and checks
 * and adopts a member's epoch history; group_members.c takes the cluster
 * driver's events (joins, leaves, evictions, quorum, delivered messages)
 * and decides what each changes here. Both use this file only, through
 * group_priv.h; this one uses neither.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "lock.h"
#include "net.h"
#include "group_disk.h"
#include "group.h"
#include "group_priv.h"
#include "daemon.h"

struct cluster_state group_cs;
struct sd_node group_self_node;
pthread_mutex_t group_cs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epoch_ring *cur_ring; /* under group_cs_lock */
bool group_is_cluster_stopping;	    /* main thread: a cluster shutdown was delivered */
static bool is_waiting; /* under group_cs_lock (atomic reads): for the nodes of its newest epoch */

/*
 * Weights set by SET_VNODES (collie node vnodes set, cluster reweight): a
 * member's vnodes as the cluster's order last set them, over what it
 * announced when it joined, which the driver's lists carry. Every driver
 * event's list is patched with them before it is used, so every node
 * builds the same ring. A member's entry goes when it leaves or joins
 * again: it announces its own weight then (kept in its directory). A
 * joining node learns the weights set before its join from the newest
 * epoch it adopts (group_adopt). Under group_cs_lock.
 */
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

void group_set_weight(const struct sd_node_id *nid, uint16_t nr_vnodes, bool ordered)
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

void group_forget_weight(const struct sd_node_id *nid)
{
	struct weight *w = find_weight(nid);

	if (w)
		*w = weights[--nr_weights];
}

/* main thread: members[nr] with the weights, in a buffer valid until the next call */
const struct sd_node *group_with_weights(const struct sd_node *members, int nr)
{
	static struct sd_node patched[SD_MAX_NODES];

	memcpy(patched, members, nr * sizeof(*members));
	sd_mutex_lock(&group_cs_lock);
	for (int i = 0; i < nr; i++) {
		const struct weight *w = find_weight(&patched[i].nid);

		if (w)
			patched[i].nr_vnodes = w->nr_vnodes;
	}
	sd_mutex_unlock(&group_cs_lock);
	return patched;
}

/*
 * group_cs_lock held, joining: the weights that SET_VNODES set since this node
 * joined are in the member's newest epoch too (else the member has not
 * applied them yet: ask again)
 */
bool group_weights_agree(const struct sd_epoch_log *newest)
{
	for (int i = 0; i < nr_weights; i++) {
		int j = gd_find_node(&weights[i].nid, newest->nodes, (int)newest->nr_nodes);

		if (weights[i].ordered && j >= 0 &&
		    newest->nodes[j].nr_vnodes != weights[i].nr_vnodes)
			return false;
	}
	return true;
}

/*
 * group_cs_lock held, joining: the members' weights as the newest epoch
 * has them (set before the join)
 */
void group_take_weights(const struct sd_epoch_log *newest)
{
	for (int i = 0; i < group_cs.nr_nodes; i++) {
		int j = gd_find_node(&group_cs.nodes[i].nid, newest->nodes, (int)newest->nr_nodes);

		if (j < 0 || newest->nodes[j].nr_vnodes == group_cs.nodes[i].nr_vnodes)
			continue;
		group_set_weight(&group_cs.nodes[i].nid, newest->nodes[j].nr_vnodes, false);
		group_cs.nodes[i].nr_vnodes = newest->nodes[j].nr_vnodes;
	}
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
	er->local_idx = ring_find_node(&er->ring, &group_self_node.nid);
	return er;
}

/* group_wait_epoch's waiters: broadcast under group_cs_lock as a ring is published */
static pthread_cond_t epoch_cond;
static pthread_once_t epoch_cond_once = PTHREAD_ONCE_INIT;

static void epoch_cond_init(void)
{
	sd_cond_init_monotonic(&epoch_cond);
}

/* caller holds group_cs_lock: er (if made) becomes the current ring */
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
	sd_mutex_lock(&group_cs_lock);
	while (!(past = cur_ring && cur_ring->epoch > epoch) &&
	       pthread_cond_timedwait(&epoch_cond, &group_cs_lock, &until) == 0)
		;
	sd_mutex_unlock(&group_cs_lock);
	return past;
}

/* caller holds group_cs_lock: a new ring for the current members and epoch */
void group_rebuild_ring(void)
{
	publish_ring(make_ring(group_cs.nodes, group_cs.nr_nodes, group_cs.epoch));
}

struct epoch_ring *group_ring_get(void)
{
	struct epoch_ring *er;

	sd_mutex_lock(&group_cs_lock);
	er = cur_ring;
	if (er)
		__atomic_add_fetch(&er->refcnt, 1, __ATOMIC_ACQ_REL);
	sd_mutex_unlock(&group_cs_lock);
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

	sd_mutex_lock(&group_cs_lock);
	e = group_cs.epoch;
	sd_mutex_unlock(&group_cs_lock);
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
	sd_mutex_lock(&group_cs_lock);
	for (int i = 0; i < group_cs.nr_nodes; i++) {
		uint8_t io[16];

		if (!memcmp(group_cs.nodes[i].nid.addr, addr, sizeof(group_cs.nodes[i].nid.addr)) ||
		    (io_addr_of(&group_cs.nodes[i], io) && !memcmp(io, addr, sizeof(io))))
			found = true;
		if (sd_addr_is_loopback(group_cs.nodes[i].nid.addr))
			*lo_member = true;
	}
	sd_mutex_unlock(&group_cs_lock);
	return found;
}

bool group_io_endpoint(const struct sd_node_id *nid, struct sd_node_id *to)
{
	bool found = false;

	sd_mutex_lock(&group_cs_lock);
	for (int i = 0; i < group_cs.nr_nodes && !found; i++) {
		if (memcmp(&group_cs.nodes[i].nid, nid, sizeof(*nid)))
			continue;
		*to = *nid;
		found = io_addr_of(&group_cs.nodes[i], to->addr);
		if (found)
			to->port = group_cs.nodes[i].io_port;
	}
	sd_mutex_unlock(&group_cs_lock);
	return found;
}

const struct sd_node_id *group_self(void)
{
	return &group_self_node.nid;
}

/*
 * Membership changed: a new epoch when formatted and the list differs.
 * While this node is joining, its epoch is not its own to count: only the
 * list is kept, and group_adopt() sets the epoch it learned from a member.
 * True when a new epoch began.
 *
 * The new epoch's log is written (two fsyncs) before group_cs_lock is taken, and
 * the lock only publishes the result: readers on other threads (every
 * peer op's epoch check, every gateway request's ring) never wait for the
 * disk. The cluster worker may change the state meanwhile (a format, or a
 * join that adopts a member's history, both under the lock): then the
 * decision is taken again on the state it left.
 */
bool group_update_members(const struct sd_node *members, int nr)
{
	struct sd_epoch_log last;
	struct epoch_ring *er;
	bool changed, formatted, joining;
	uint32_t epoch;

	for (;;) {
		sd_mutex_lock(&group_cs_lock);
		formatted = group_cs.formatted;
		joining = group_cs.joining;
		epoch = group_cs.epoch;
		sd_mutex_unlock(&group_cs_lock);
		changed = false;
		/* a cluster shutdown stops every node: their exits are no new epoch */
		if (formatted && !joining && !is_waiting && !daemon_stopping() &&
		    !group_is_cluster_stopping &&
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
		sd_mutex_lock(&group_cs_lock);
		if (group_cs.formatted == formatted && group_cs.joining == joining &&
		    group_cs.epoch == epoch - changed)
			break;
		/*
		 * The cluster worker moved the state on: decide again. Never
		 * after a log was written here: the worker changes the epoch
		 * only while this node joins or is unformatted, and then none is.
		 */
		sd_mutex_unlock(&group_cs_lock);
		group_ring_put(er);
	}
	group_cs.nr_nodes = nr;
	memcpy(group_cs.nodes, members, nr * sizeof(*members));
	group_cs.local_idx = 0;
	for (int i = 0; i < nr; i++)
		if (!memcmp(&members[i].nid, &group_self_node.nid, sizeof(members[i].nid)))
			group_cs.local_idx = i;
	group_cs.epoch = epoch;
	if (er)
		publish_ring(er);
	else
		group_rebuild_ring(); /* no memory for a ring outside the lock: the old way */
	sd_mutex_unlock(&group_cs_lock);
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
	group_is_cluster_stopping = true;
}

void group_set_waiting(bool on)
{
	sd_mutex_lock(&group_cs_lock);
	__atomic_store_n(&is_waiting, on, __ATOMIC_RELEASE);
	sd_mutex_unlock(&group_cs_lock);
}

bool group_is_waiting(void)
{
	return __atomic_load_n(&is_waiting, __ATOMIC_ACQUIRE);
}

void group_get_state(struct cluster_state *out)
{
	sd_mutex_lock(&group_cs_lock);
	*out = group_cs;
	sd_mutex_unlock(&group_cs_lock);
}

bool group_is_joining(void)
{
	return __atomic_load_n(&group_cs.joining, __ATOMIC_ACQUIRE);
}

bool group_is_formatted(void)
{
	return __atomic_load_n(&group_cs.formatted, __ATOMIC_ACQUIRE);
}

uint8_t group_copies(void)
{
	return __atomic_load_n(&group_cs.copies, __ATOMIC_ACQUIRE);
}

uint8_t group_copy_policy(void)
{
	return group_cs.copy_policy;
}

int group_nr_nodes(void)
{
	return group_cs.nr_nodes;
}

int group_nr_gateways(void)
{
	int n = 0;

	sd_mutex_lock(&group_cs_lock);
	for (int i = 0; i < group_cs.nr_nodes; i++)
		n += !!(group_cs.nodes[i].flags & SD_NODE_GATEWAY);
	sd_mutex_unlock(&group_cs_lock);
	return n;
}

int group_read_epoch_logs(struct sd_epoch_log *logs, int max)
{
	int n = 0, nr;
	uint32_t latest, *epochs;

	sd_mutex_lock(&group_cs_lock);
	latest = group_cs.epoch;
	sd_mutex_unlock(&group_cs_lock);
	nr = gd_list_epochs(latest, &epochs);
	for (int i = 0; epochs && i < nr && n < max; i++)
		if (gd_read_epoch_log(epochs[i], &logs[n]) == 0)
			n++;
	free(epochs);
	return n;
}
