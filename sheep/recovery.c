/*
 * Recovery: every object in its place after an epoch change, and a node
 * that joins a running cluster brought up to date.
 *
 * Joining. A node that joins members that already run cannot count epochs
 * by itself: it sets its own objects aside as stale (it cannot know which
 * of them missed writes while it was away), asks a member for the cluster's
 * format and epoch history (STAT_CLUSTER) until that member's newest epoch
 * has the node list this node sees, takes them as its own, learns the VDI
 * namespace, and only then serves clients. It runs on the cluster worker,
 * so ordered ops delivered meanwhile wait and apply afterwards.
 *
 * Recovery. After every new epoch one run on the recovery thread asks each
 * node of the ring which objects it stores (GET_OBJ_LIST), works out those
 * that the ring now gives to this node and that it lacks, and fetches each
 * whole from a node that has it (FETCH_PEER), preferring the nodes that the
 * new ring names, since they are the ones that got every write since the
 * epoch began. A newer epoch aborts the run, and a new run starts on it.
 *
 * Client I/O goes on meanwhile: a write to an object that this node should
 * hold but has not fetched yet fetches it first (replica_write), under the
 * object's lock, which the background run takes too (replica_fetch: the
 * fetch is the replica layer's); so the object is fetched once and the
 * write lands on top of it. Reads fail over in the gateway to any node
 * that has the object.
 *
 * Stale copies count too: every node lists its live objects and its stale
 * ones, and an object that no node holds live is fetched from a stale copy
 * (after a whole cluster restarted, some objects are held only there).
 * Never an object of a deleted VDI (deleted.c): a node that was down during
 * the delete removes its copies, and nobody fetches them back.
 *
 * Cleaning. Once every node of the epoch reports its objects fetched with
 * no failure, each node removes what the ring no longer gives it and its
 * stale copies: every one of them was listed, so the nodes that the ring
 * names have it. A node with a failed fetch removes nothing, and neither
 * does anyone else for that epoch.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto_util.h"
#include "lock.h"
#include "sheep_priv.h"
#include "store/store.h"

#define JOIN_TRIES 300 /* x JOIN_SLEEP_MS: how long a join may take */
#define JOIN_SLEEP_MS 100
#define LIST_TRIES 50	  /* epoch mismatches tolerated when listing a node */
#define JOIN_MAX_LOGS 64  /* epoch history learned when joining */
#define NR_FETCHERS 2	  /* objects fetched at once by a recovery run */
#define RETRY_MIN_MS 1000 /* failed objects are fetched again after this, */
#define RETRY_MAX_MS 8000 /* doubled up to this */

static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_recovery_info info; /* under info_lock */
static struct work_queue *recovery_wq;

/* main thread only */
static bool run_queued;
static uint32_t want_epoch; /* written on the main thread, read by the run */
static struct work run_work, join_work;
static bool is_joining; /* atomic: clients wait until the join is done */
static bool is_member_waiting; /* atomic: its member waits (SD_STATUS_WAIT_FOR_JOIN) */
static uint32_t member_epoch;  /* join_fn's: the member's newest epoch, at the history check */
static bool member_clean;      /* and whether it stopped cleanly (SD_CINFO_CLEAN_STOP) */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * --recovery-max-bandwidth: the background fetchers together copy at most
 * this many bytes per second (0: unlimited), so that clients keep the disk
 * and the network. A token bucket with no burst: each fetched object moves
 * the next allowed start later by its size / rate, and the fetcher sleeps
 * until then (in slices, so that a new epoch is seen). A client's write
 * that fetches a missing object first (replica_write) is never paced.
 */
static uint64_t max_bw = (uint64_t)RECOVERY_DEFAULT_BW * 1000000; /* bytes/s */
static pthread_mutex_t pace_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t pace_next_ns;

static bool superseded(uint32_t epoch);

void recovery_set_max_bandwidth(uint64_t mb_per_s)
{
	max_bw = mb_per_s * 1000000;
}

static void pace(const struct epoch_ring *er, uint64_t bytes)
{
	uint64_t now = sd_now_ns(), until;

	if (!max_bw)
		return;
	sd_mutex_lock(&pace_lock);
	if (pace_next_ns < now)
		pace_next_ns = now;
	pace_next_ns += bytes * 1000000000 / max_bw;
	until = pace_next_ns;
	sd_mutex_unlock(&pace_lock);
	while ((now = sd_now_ns()) < until && !superseded(er->epoch)) {
		uint64_t ms = (until - now) / 1000000 + 1;

		sleep_ms(ms > 100 ? 100 : (int)ms);
	}
}

/* the replica layer's lock of oid: creates of oid wait for its fetch */
static pthread_mutex_t *oid_lock(uint64_t oid)
{
	return replica_oid_lock(oid);
}

static void set_info(uint32_t epoch, uint32_t state)
{
	sd_mutex_lock(&info_lock);
	info.epoch = epoch;
	info.state = state;
	sd_mutex_unlock(&info_lock);
}

static void count(uint64_t *field, uint64_t n)
{
	sd_mutex_lock(&info_lock);
	*field += n;
	sd_mutex_unlock(&info_lock);
}

static bool superseded(uint32_t epoch)
{
	return sys.shutting_down || __atomic_load_n(&want_epoch, __ATOMIC_ACQUIRE) != epoch;
}

/* ---- the background run ---- */

struct obj_entry {
	uint64_t oid;
	uint64_t live;	/* bit i: ring node i stores it */
	uint64_t stale; /* bit i: ring node i keeps a stale copy */
};

struct obj_set {
	struct obj_entry *e;
	size_t nr, cap;
	int node;   /* the node being listed */
	bool stale; /* its stale copies */
};

static int add_oid(uint64_t oid, void *arg)
{
	struct obj_set *set = arg;

	if (set->nr == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 4096;
		struct obj_entry *e = realloc(set->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		set->e = e;
		set->cap = cap;
	}
	set->e[set->nr].oid = oid;
	set->e[set->nr].live = set->stale ? 0 : UINT64_C(1) << set->node;
	set->e[set->nr++].stale = set->stale ? UINT64_C(1) << set->node : 0;
	return 0;
}

/*
 * The oids that node stores (stale: its stale copies), added to set. 0,
 * -EAGAIN (unreachable, or on another epoch: try again) or -errno.
 */
static int list_node(const struct epoch_ring *er, int node, bool stale, struct obj_set *set)
{
	uint32_t cap = 1 << 16; /* oids; doubled while the answer does not fit */
	struct sd_rsp rsp;
	uint64_t *oids;
	int ret = 0;

	set->node = node;
	set->stale = stale;
	if (node == er->local_idx)
		return stale ? sd_store->for_each_stale(add_oid, set)
			     : sd_store->for_each(add_oid, set);
	for (int tries = 0;; tries++) {
		struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
				     .opcode = SD_OP_GET_OBJ_LIST,
				     .flags = stale ? SD_FLAG_CMD_STALE : 0,
				     .epoch = er->epoch,
				     .data_length = cap * sizeof(uint64_t) };

		oids = malloc(rq.data_length);
		if (!oids)
			return -ENOMEM;
		ret = peer_request(&er->ring.nodes[node].nid, &rq, NULL, oids, &rsp);
		if (ret) { /* unreachable: dying (a new epoch will follow), or restarting */
			free(oids);
			return -EAGAIN;
		}
		if (rsp.result == SD_RES_SUCCESS) {
			for (uint32_t i = 0; !ret && i < rsp.data_length / sizeof(uint64_t); i++)
				ret = add_oid(oids[i], set);
			break;
		}
		free(oids);
		oids = NULL;
		if (rsp.result == SD_RES_NO_SPACE) {
			if ((uint64_t)cap * 2 * sizeof(uint64_t) <= SD_MAX_DATA_LEN) {
				cap *= 2;
				continue;
			}
			sd_err("node %d stores more objects than one list can carry", node);
			return -EAGAIN;
		}
		if ((rsp.result != SD_RES_OLD_NODE_VER && rsp.result != SD_RES_NEW_NODE_VER) ||
		    tries >= LIST_TRIES || superseded(er->epoch))
			return -EAGAIN;
		sleep_ms(JOIN_SLEEP_MS);
	}
	free(oids);
	return ret;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct obj_entry *x = a, *y = b;

	return x->oid < y->oid ? -1 : x->oid > y->oid;
}

/* sort and merge the entries of one oid */
static void merge(struct obj_set *set)
{
	size_t n = 0;

	if (!set->nr) /* qsort takes no NULL base */
		return;
	qsort(set->e, set->nr, sizeof(*set->e), cmp_entry);
	for (size_t i = 0; i < set->nr; i++) {
		if (n && set->e[n - 1].oid == set->e[i].oid) {
			set->e[n - 1].live |= set->e[i].live;
			set->e[n - 1].stale |= set->e[i].stale;
		} else
			set->e[n++] = set->e[i];
	}
	set->nr = n;
}

/* does the ring give oid to this node? */
static bool is_mine(const struct epoch_ring *er, uint64_t oid)
{
	int idx[SD_MAX_NODES], copies = vdi_copies(oid_to_vid(oid));
	int n = ring_map(&er->ring, oid, copies > 0 ? copies : group_copies(), idx);

	for (int i = 0; i < n; i++)
		if (idx[i] == er->local_idx)
			return true;
	return false;
}

/* the header of an inode of a VDI unknown here, read from its replicas, into the table */
static bool learn_vdi(uint64_t oid, struct sd_inode_header *h)
{
	if (gateway_obj_read(oid, h, SD_INODE_HEADER_SIZE, 0, group_copies()) != SD_RES_SUCCESS)
		return false;
	vdi_inode_recovered(oid_to_vid(oid), h);
	return true;
}

/*
 * The VDIs whose inodes the nodes list and that this node does not know
 * (the first node back after a whole cluster stopped knows only the
 * inodes it stores): learn their headers, so that their objects are placed
 * with their own copies. An inode that no node holds live yet (only in
 * the stale sets of nodes that rejoined) cannot be read now: its oid goes
 * to missed (how many returned), for clean_epoch to learn once every node
 * has its objects back.
 */
static size_t learn_vdis(const struct obj_set *set, uint64_t **missed)
{
	struct sd_inode_header *h = malloc(sizeof(*h));
	size_t nr_missed = 0;

	*missed = NULL;
	if (!h)
		return 0;
	for (size_t i = 0; i < set->nr; i++) {
		uint64_t oid = set->e[i].oid, *m;

		if (!is_vdi_obj(oid) || deleted_has(oid) || vdi_copies(oid_to_vid(oid)) > 0)
			continue;
		if (set->e[i].live && learn_vdi(oid, h))
			continue;
		m = realloc(*missed, (nr_missed + 1) * sizeof(*m));
		if (!m)
			break;
		m[nr_missed++] = oid;
		*missed = m;
	}
	free(h);
	return nr_missed;
}

/* clean_epoch, every node recovered: what learn_vdis could not read then */
static void learn_missed_vdis(const uint64_t *missed, size_t nr)
{
	struct sd_inode_header *h = malloc(sizeof(*h));
	size_t nr_learned = 0;

	for (size_t i = 0; h && i < nr; i++)
		if (vdi_copies(oid_to_vid(missed[i])) > 0 || learn_vdi(missed[i], h))
			nr_learned++;
	if (nr)
		sd_info("learned %zu of %zu vdi(s) whose inodes only stale copies held", nr_learned,
			nr);
	free(h);
}

/* has node of er fetched what the ring of er gives it, with no failure? */
static bool node_recovered(const struct epoch_ring *er, int node)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
			     .opcode = SD_OP_STAT_RECOVERY,
			     .data_length = sizeof(struct sd_recovery_info) };
	struct sd_recovery_info ri = { 0 };
	struct sd_rsp rsp;

	if (node == er->local_idx) {
		sd_mutex_lock(&info_lock);
		ri = info;
		sd_mutex_unlock(&info_lock);
	} else if (peer_request(&er->ring.nodes[node].nid, &rq, NULL, &ri, &rsp) ||
		   rsp.result != SD_RES_SUCCESS) {
		return false;
	}
	return ri.epoch == er->epoch && ri.nr_failed == 0 &&
	       (ri.state == SD_RECOVERY_WAITING || ri.state == SD_RECOVERY_DONE);
}

/*
 * Once every node of the epoch has its objects (none failed), what the ring
 * no longer gives this node is removed, and so are its stale copies: each
 * of them was listed, so the nodes that the ring names fetched it. Waits
 * for the others as long as the epoch lasts. True when cleaned.
 */
static bool clean_epoch(const struct epoch_ring *er, struct obj_set *set, const uint64_t *missed,
			size_t nr_missed)
{
	uint64_t nr_removed = 0;

	for (int i = 0; i < er->ring.nr_nodes; i++) {
		while (!node_recovered(er, i)) {
			if (superseded(er->epoch))
				return false;
			sleep_ms(JOIN_SLEEP_MS);
		}
	}
	learn_missed_vdis(missed, nr_missed);
	set->nr = 0;
	if (list_node(er, er->local_idx, false, set))
		return false;
	for (size_t i = 0; i < set->nr && !superseded(er->epoch); i++) {
		uint64_t oid = set->e[i].oid;

		/* a VDI unknown here: its copies are unknown, keep its objects */
		if (is_mine(er, oid) || vdi_copies(oid_to_vid(oid)) <= 0)
			continue;
		sd_mutex_lock(oid_lock(oid));
		if (sd_store->remove(oid) == SD_RES_SUCCESS)
			nr_removed++;
		sd_mutex_unlock(oid_lock(oid));
	}
	count(&info.nr_removed, nr_removed);
	if (superseded(er->epoch))
		return false;
	if (sd_store->purge_stale() == SD_RES_SUCCESS) {
		sd_mutex_lock(&info_lock);
		info.nr_stale = 0;
		sd_mutex_unlock(&info_lock);
	}
	sd_info("epoch %" PRIu32 " recovered everywhere: %" PRIu64
		" object(s) no longer this node's removed",
		er->epoch, nr_removed);
	return true;
}

/* this node's live copy of an object of a deleted VDI */
static void remove_deleted(uint64_t oid)
{
	sd_mutex_lock(oid_lock(oid));
	if (sd_store->remove(oid) == SD_RES_SUCCESS) {
		sd_info("%016" PRIx64 " belongs to a deleted vdi: removed", oid);
		count(&info.nr_removed, 1);
	}
	sd_mutex_unlock(oid_lock(oid));
}

/*
 * The entries of set to fetch (oid 0: none), shared by the fetchers. An
 * entry fetched becomes 0: what is left afterwards failed, for a retry.
 */
struct fetch_job {
	const struct epoch_ring *er;
	struct obj_set *set;
	size_t next; /* atomic: the next entry to take */
	bool retry;  /* a retry of earlier failures: they were logged then */
};

static void *fetcher(void *arg)
{
	struct fetch_job *job = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->set->nr &&
	       !superseded(job->er->epoch)) {
		struct obj_entry *e = &job->set->e[i];
		bool had;
		int r;

		if (!e->oid)
			continue;
		sd_mutex_lock(oid_lock(e->oid));
		had = sd_store->exist(e->oid);
		/* not synced one by one: fetch_all syncs them all at the end */
		r = replica_fetch(job->er, e->oid, e->live, e->stale, false);
		sd_mutex_unlock(oid_lock(e->oid));
		if (r == SD_RES_SUCCESS && !had)
			pace(job->er, replica_object_size(e->oid));
		/* deleted meanwhile: nothing to hold, nothing failed */
		if (r != SD_RES_SUCCESS && deleted_has(e->oid))
			r = SD_RES_SUCCESS;
		if (r == SD_RES_SUCCESS) {
			count(&info.nr_done, 1);
			e->oid = 0;
		} else {
			if (job->retry)
				sd_debug("recovery of %016" PRIx64 " failed again: %s", e->oid,
					 sd_strerror(r));
			else
				sd_err("recovery of %016" PRIx64 " failed: %s", e->oid,
				       sd_strerror(r));
			count(&info.nr_failed, 1);
		}
	}
	return NULL;
}

/*
 * Fetch the entries of set with NR_FETCHERS threads: one object's network
 * copy overlaps another's disk write. The objects are made durable all at
 * once at the end (one syncfs rather than a sync and a directory sync per
 * object). The threads live for one run (the tracer stops them like any
 * other).
 */
static void fetch_all(const struct epoch_ring *er, struct obj_set *set, bool retry)
{
	struct fetch_job job = { er, set, 0, retry };
	pthread_t th[NR_FETCHERS];
	int n = 0;

	while (n < NR_FETCHERS && !pthread_create(&th[n], NULL, fetcher, &job)) {
		pthread_setname_np(th[n], "recovery fetch");
		n++;
	}
	if (!n) /* no thread to be had: fetch from this one */
		fetcher(&job);
	while (n--)
		pthread_join(th[n], NULL);
	/* durable before this node says it has them: then others may remove theirs */
	if (sd_store->flush() != SD_RES_SUCCESS)
		count(&info.nr_failed, 1);
}

/*
 * The objects that failed (a node without space, none reachable that has
 * it) are fetched again, every RETRY_MIN_MS at first and then less often,
 * as long as the epoch lasts: once space is freed, recovery completes and
 * the epoch is cleaned with no new epoch needed. The others go on
 * meanwhile; `collie node recovery` shows the failed count of the last try.
 */
static void retry_failed(const struct epoch_ring *er, struct obj_set *set)
{
	int wait_ms = RETRY_MIN_MS;

	while (!superseded(er->epoch)) {
		uint64_t nr_failed;

		sd_mutex_lock(&info_lock);
		nr_failed = info.nr_failed;
		sd_mutex_unlock(&info_lock);
		if (!nr_failed)
			return;
		set_info(er->epoch, SD_RECOVERY_WAITING);
		sd_info("recovery of epoch %" PRIu32 ": %" PRIu64
			" object(s) failed; retrying in %d ms",
			er->epoch, nr_failed, wait_ms);
		for (int slept = 0; slept < wait_ms && !superseded(er->epoch);
		     slept += JOIN_SLEEP_MS)
			sleep_ms(JOIN_SLEEP_MS);
		if (superseded(er->epoch))
			return;
		set_info(er->epoch, SD_RECOVERY_RUNNING);
		sd_mutex_lock(&info_lock);
		info.nr_failed = 0;
		sd_mutex_unlock(&info_lock);
		fetch_all(er, set, true);
		wait_ms = min_t(int, wait_ms * 2, RETRY_MAX_MS);
	}
}

/* recover epoch: 0 when done or superseded, -EAGAIN to run it again */
static int run_epoch(uint32_t epoch)
{
	struct epoch_ring *er = group_ring_get();
	struct obj_set set = { 0 };
	uint64_t local_bit, nr_todo = 0, *missed = NULL;
	size_t nr_missed = 0;
	int ret = 0;

	if (!er)
		return -EAGAIN;
	if (er->epoch != epoch)
		goto out_put;
	if (er->local_idx < 0) { /* not a member of this epoch: nothing to hold */
		set_info(epoch, SD_RECOVERY_DONE);
		goto out_put;
	}
	set_info(epoch, SD_RECOVERY_RUNNING);
	sd_mutex_lock(&info_lock);
	info.nr_total = info.nr_done = info.nr_failed = info.nr_removed = 0;
	sd_mutex_unlock(&info_lock);
	for (int i = 0; i < er->ring.nr_nodes && !ret; i++) {
		ret = list_node(er, i, false, &set);
		if (!ret)
			ret = list_node(er, i, true, &set);
	}
	if (ret)
		goto out_free;
	merge(&set);
	nr_missed = learn_vdis(&set, &missed);
	local_bit = UINT64_C(1) << er->local_idx;
	for (size_t i = 0; i < set.nr; i++) {
		if (deleted_has(set.e[i].oid)) {
			/* a node that was down during the delete: its copy goes now */
			if (set.e[i].live & local_bit)
				remove_deleted(set.e[i].oid);
			set.e[i].oid = 0;
		} else if ((set.e[i].live & local_bit) || !is_mine(er, set.e[i].oid))
			set.e[i].oid = 0; /* nothing to do */
		else
			nr_todo++;
	}
	count(&info.nr_total, nr_todo);
	sd_info("recovery of epoch %" PRIu32 ": %" PRIu64 " object(s) to fetch", epoch, nr_todo);
	fetch_all(er, &set, false);
	retry_failed(er, &set);
	if (!superseded(epoch)) {
		sd_info("recovery of epoch %" PRIu32 " done: %" PRIu64 " fetched, %" PRIu64
			" failed",
			epoch, info.nr_done, info.nr_failed);
		set_info(epoch, SD_RECOVERY_WAITING);
		/* only with every object fetched (retry_failed) is anything removed */
		if (!info.nr_failed && clean_epoch(er, &set, missed, nr_missed))
			set_info(epoch, SD_RECOVERY_DONE);
	}
out_free:
	free(missed);
	free(set.e);
out_put:
	group_ring_put(er);
	return ret ? -EAGAIN : 0;
}

static void run_fn(struct work *w)
{
	uint32_t epoch;

	while (!sys.shutting_down) {
		epoch = __atomic_load_n(&want_epoch, __ATOMIC_ACQUIRE);
		if (run_epoch(epoch) == -EAGAIN && !superseded(epoch)) {
			sleep_ms(JOIN_SLEEP_MS);
			continue;
		}
		if (!superseded(epoch))
			break;
	}
}

static void run_done(struct work *w)
{
	run_queued = false;
	/* a kick that came after the run's last look */
	sd_mutex_lock(&info_lock);
	bool again = info.epoch != want_epoch && !sys.shutting_down;
	sd_mutex_unlock(&info_lock);
	if (again)
		recovery_kick();
}

void recovery_kick(void)
{
	if (__atomic_load_n(&is_joining, __ATOMIC_ACQUIRE) || !group_is_formatted())
		return;
	__atomic_store_n(&want_epoch, group_epoch(), __ATOMIC_RELEASE);
	if (run_queued)
		return;
	run_queued = true;
	run_work.fn = run_fn;
	run_work.done = run_done;
	wq_queue(recovery_wq, &run_work);
}

/* ---- joining ---- */

/*
 * Learn the cluster's state from a member (the oldest that is not this
 * node): 0 or -errno. check_only: only whether this node may take its
 * history (group_check_history), on the first answer; otherwise take it
 * (group_adopt), asking again while the member has not caught up.
 */
static int learn_state(struct sd_node_id *from, bool check_only)
{
	size_t len = JOIN_MAX_LOGS * sizeof(struct sd_epoch_log);
	struct sd_epoch_log *logs = malloc(len);
	struct cluster_state *cs = malloc(sizeof(*cs));
	int ret = -EAGAIN;

	if (!logs || !cs) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (int tries = 0; tries < JOIN_TRIES && ret == -EAGAIN && !sys.shutting_down; tries++) {
		struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
				     .opcode = SD_OP_STAT_CLUSTER,
				     .data_length = (uint32_t)len };
		struct sd_rsp rsp;
		int n;

		if (tries)
			sleep_ms(JOIN_SLEEP_MS);
		group_get_state(cs);
		*from = cs->nodes[cs->local_idx == 0 ? 1 : 0].nid;
		if (peer_request(from, &rq, NULL, logs, &rsp) || rsp.result != SD_RES_SUCCESS)
			continue;
		n = (int)(rsp.data_length / sizeof(*logs));
		__atomic_store_n(&is_member_waiting, rsp.cinfo.status == SD_STATUS_WAIT_FOR_JOIN,
				 __ATOMIC_RELEASE);
		member_epoch = rsp.cinfo.epoch;
		member_clean = rsp.cinfo.flags & SD_CINFO_CLEAN_STOP;
		ret = check_only ? group_check_history(&rsp, logs, n, true)
				 : group_adopt(&rsp, logs, n);
		/* it waits for the nodes of its last epoch, this one among them: for as long */
		if (ret == -EAGAIN && rsp.cinfo.status == SD_STATUS_WAIT_FOR_JOIN)
			tries = 0;
	}
out_free:
	free(cs);
	free(logs);
	return ret;
}

/* a join refused (ret: learn_state's): the reason, and the daemon stops */
static void join_refused(int ret)
{
	if (ret == -ESTALE)
		sd_emerg("refused to join: this node holds epochs that the running cluster "
			 "does not (see above), so its objects may be newer than the "
			 "cluster's; joining would replace them. Stop the running nodes and "
			 "start the nodes of the newest epoch first (sheep.log: 'epoch N'), "
			 "then the others");
	else if (ret == -EINVAL)
		sd_emerg("refused to join: this directory belongs to another cluster "
			 "(another format), the cluster is not formatted while this node is, "
			 "or it answered a state this node cannot use (see above)");
	else
		sd_emerg("cannot learn the state of the cluster: %s", strerror(-ret));
	sys.exit_status = 1;
	sheep_request_shutdown();
}

static void join_fn(struct work *w)
{
	struct sd_node_id from;
	uint64_t nr_stale = 0;
	bool keep;
	int ret;

	/* a history newer than the member's: refused before any object moves */
	ret = learn_state(&from, true);
	if (ret) {
		join_refused(ret);
		return;
	}
	/*
	 * The member waits for the nodes of the epoch it stopped at (the whole
	 * cluster restarts), this node stopped at that epoch too (the histories
	 * are one: checked above), and both stopped with a cluster shutdown
	 * (nothing cut, nothing served since): its copies are as new as any,
	 * and they stay in place. Otherwise they are set aside before any peer
	 * can reach this node on the cluster's epoch; after a crash or a power
	 * cut, recovery then makes each object's copies one again (a write cut
	 * by it may have reached some of them only).
	 */
	keep = __atomic_load_n(&is_member_waiting, __ATOMIC_ACQUIRE) &&
	       member_epoch == group_epoch() && member_clean && group_started_clean();
	if (keep)
		sd_info("the cluster restarts at epoch %" PRIu32 ", where this node stopped: its "
			"objects stay in place",
			member_epoch);
	else
		ret = sd_store->stale_all(&nr_stale);
	if (ret) {
		sd_emerg("cannot set the objects aside before joining: %s", sd_strerror(ret));
		sys.exit_status = 1;
		sheep_request_shutdown();
		return;
	}
	/* from here on: a member that waits for this node may serve (wait_check_fn) */
	set_info(0, SD_RECOVERY_JOINING);
	if (nr_stale)
		sd_info("%" PRIu64 " object(s) set aside as stale until recovered", nr_stale);
	count(&info.nr_stale, nr_stale);
	ret = learn_state(&from, false);
	if (ret) {
		join_refused(ret);
		return;
	}
	if (group_is_formatted()) {
		ret = vdi_sync_from(&from);
		if (ret != SD_RES_SUCCESS)
			sd_err("cannot learn the vdis from the cluster: %s", sd_strerror(ret));
		/* before any recovery: what was deleted meanwhile stays deleted */
		ret = deleted_sync_from(&from);
		if (ret != SD_RES_SUCCESS)
			sd_err("cannot learn the deleted vdis from the cluster: %s",
			       sd_strerror(ret));
	}
	/* not recovered until its own run says so: the others wait for it */
	set_info(group_epoch(), group_is_formatted() ? SD_RECOVERY_RUNNING : SD_RECOVERY_DONE);
}

/* ---- a node restarted alone, before it serves (group.c: is_waiting) ---- */

static struct work wait_work;
static bool wait_queued, wait_again; /* main thread */
static uint32_t wait_gen;	     /* main thread: the membership being checked */
static int wait_result;		     /* the check's, read in its done */

/*
 * Every other member has compared its history with this node's and found
 * it may take it (join_fn's first step): its recovery state is JOINING
 * only from then on; one whose own history is newer refuses and leaves.
 * STAT_RECOVERY, not STAT_CLUSTER: a joining node's cluster worker is busy
 * with the join, which waits for this node to serve.
 */
static void wait_check_fn(struct work *w)
{
	struct cluster_state *cs = malloc(sizeof(*cs));

	wait_result = -ENOMEM;
	if (!cs)
		return;
	group_get_state(cs);
	wait_result = 0;
	for (int i = 0; i < cs->nr_nodes && !wait_result; i++) {
		int tries = 0;

		if (i == cs->local_idx)
			continue;
		do {
			struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
					     .opcode = SD_OP_STAT_RECOVERY,
					     .data_length = sizeof(struct sd_recovery_info) };
			struct sd_recovery_info ri = { 0 };
			struct sd_rsp rsp;

			if (tries)
				sleep_ms(JOIN_SLEEP_MS);
			wait_result = -EAGAIN;
			if (!peer_request(&cs->nodes[i].nid, &rq, NULL, &ri, &rsp) &&
			    rsp.result == SD_RES_SUCCESS && ri.state == SD_RECOVERY_JOINING)
				wait_result = 0;
		} while (wait_result == -EAGAIN && ++tries < JOIN_TRIES && !sys.shutting_down &&
			 group_is_waiting());
	}
	free(cs);
}

static void wait_check_done(struct work *w)
{
	wait_queued = false;
	if (wait_again) { /* the members changed meanwhile: check the new ones */
		recovery_wait_check(wait_gen);
		return;
	}
	if (!wait_result)
		group_end_wait(wait_gen);
	else if (group_is_waiting())
		sd_err("the nodes that are back did not all start their join: %s; waiting for "
		       "the next membership change (or collie cluster recover force)",
		       strerror(-wait_result));
}

void recovery_wait_check(uint32_t gen)
{
	wait_gen = gen;
	if (wait_queued) {
		wait_again = true;
		return;
	}
	wait_again = false;
	wait_queued = true;
	wait_work.fn = wait_check_fn;
	wait_work.done = wait_check_done;
	wq_queue(recovery_wq, &wait_work);
}

/* the layer above's news that the join is done (request.c: run what waited) */
static void (*join_done_fn)(void);

void recovery_set_join_done(void (*fn)(void))
{
	join_done_fn = fn;
}

static void join_done(struct work *w)
{
	__atomic_store_n(&is_joining, false, __ATOMIC_RELEASE);
	if (join_done_fn)
		join_done_fn();
	recovery_kick();
}

void recovery_join(void)
{
	__atomic_store_n(&is_joining, true, __ATOMIC_RELEASE);
	join_work.fn = join_fn;
	join_work.done = join_done;
	wq_queue(cluster_wq, &join_work);
}

bool recovery_join_waits(void)
{
	return recovery_is_joining() && __atomic_load_n(&is_member_waiting, __ATOMIC_ACQUIRE);
}

bool recovery_is_joining(void)
{
	/* group's flag too: an evicted node is joining again from its eviction on */
	return __atomic_load_n(&is_joining, __ATOMIC_ACQUIRE) || group_is_joining();
}

/* ---- ops ---- */

int recovery_op_stat(struct request *req)
{
	uint32_t len = min_t(uint32_t, req->rq.data_length, sizeof(info));
	struct sd_recovery_info out;

	sd_mutex_lock(&info_lock);
	out = info;
	sd_mutex_unlock(&info_lock);
	/*
	 * No recovery ran since this daemon started, and none is queued (main
	 * thread: run_queued is ours): it holds what the current epoch gives
	 * it (a format, epoch 1, moves nothing), so that is the epoch it is
	 * done with, the one that cluster info shows.
	 */
	if (out.epoch == 0 && out.state == SD_RECOVERY_DONE && !run_queued)
		out.epoch = group_epoch();
	memcpy(req->data, &out, len);
	req->rp.data_length = len;
	return SD_RES_SUCCESS;
}

int recovery_op_fetch(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	int ret;

	if (!oid_is_valid(rq->obj.oid) ||
	    !sd_obj_range_valid(rq->obj.oid, rq->obj.offset, rq->data_length) ||
	    (rq->flags & SD_FLAG_CMD_WRITE))
		return SD_RES_INVALID_PARMS;
	if (rq->flags & SD_FLAG_CMD_STALE)
		ret = sd_store->read_stale(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	else
		ret = sd_store->read(rq->obj.oid, req->data, rq->data_length, rq->obj.offset);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}

int recovery_init(void)
{
	/* an inode that the replica layer fetched: the VDI table learns the VDI */
	replica_set_inode_fetched(vdi_inode_recovered);
	recovery_wq = wq_create("recovery", 1);
	return recovery_wq ? 0 : -ENOMEM;
}
