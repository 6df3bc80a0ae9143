/*
 * Recovery: every object in its place after an epoch change (a node that
 * joins a running cluster learns its state first: join.c, which holds the
 * runs until it is done).
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

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "proto_util.h"
#include "lock.h"
#include "deleted.h"
#include "ec.h"
#include "gateway.h"
#include "gateway_ec.h"
#include "group.h"
#include "peer_io.h"
#include "recovery.h"
#include "recovery_plan.h"
#include "replica.h"
#include "request.h"
#include "daemon.h"
#include "stat.h"
#include "vdi_sync.h"
#include "vdi_table.h"
#include "work.h"
#include "store/store.h"

#define RUN_RETRY_MS 100 /* a run that could not list a node tries again after this */
#define LIST_TRIES 50	 /* epoch mismatches tolerated when listing a node */
#define NR_FETCHERS 2	  /* objects fetched at once by a recovery run */
#define RETRY_MIN_MS 1000 /* failed objects are fetched again after this, */
#define RETRY_MAX_MS 8000 /* doubled up to this */

static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sd_recovery_info info; /* under info_lock */
static struct work_queue *recovery_wq;

/* main thread only */
static bool run_queued;
static bool rerun; /* a run of the same epoch once the queued one is done */
static uint32_t want_epoch; /* written on the main thread, read by the run */
static struct work run_work;
static bool is_held; /* atomic: a join is under way, no run starts (recovery_hold) */

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

void recovery_set_state(uint32_t epoch, uint32_t state)
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
	return daemon_stopping() || __atomic_load_n(&want_epoch, __ATOMIC_ACQUIRE) != epoch;
}

/* ---- the background run ---- */

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
		return stale ? sd_store->for_each_stale(recovery_add_oid, set)
			     : sd_store->for_each(recovery_add_oid, set);
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
				ret = recovery_add_oid(oids[i], set);
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
		sleep_ms(RUN_RETRY_MS);
	}
	free(oids);
	return ret;
}

/* the header of an inode of a VDI unknown here, read from its replicas, into the table */
static bool learn_vdi(uint64_t oid, struct sd_inode_header *h)
{
	struct vdi_attr cluster = { .nr_copies = group_copies() };

	if (gateway_read(oid, h, SD_INODE_HEADER_SIZE, 0, &cluster) != SD_RES_SUCCESS)
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
			sleep_ms(RUN_RETRY_MS);
		}
	}
	learn_missed_vdis(missed, nr_missed);
	set->nr = 0;
	if (list_node(er, er->local_idx, false, set))
		return false;
	for (size_t i = 0; i < set->nr && !superseded(er->epoch); i++) {
		uint64_t oid = set->e[i].oid;

		if (recovery_keeps(er, oid))
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
 * A data object that no node holds live, of a live VDI whose map no longer
 * names it: a discard removed its live copies (gateway.c) while this copy
 * was away (on a node that was down, now a stale copy). It stays gone. A
 * map that cannot be read says nothing: the copy is fetched as before.
 */
static bool discarded(uint64_t oid)
{
	uint32_t vid = oid_to_vid(oid), idx = oid_to_idx(oid), entry;
	struct vdi_attr attr;

	if (!is_data_obj(oid) || vdi_get_attr(vid, &attr) != SD_RES_SUCCESS)
		return false;
	if (gateway_read(vid_to_vdi_oid(vid), &entry, sizeof(entry),
			 SD_INODE_HEADER_SIZE + (uint64_t)idx * sizeof(entry), &attr) != SD_RES_SUCCESS)
		return false;
	return entry != vid;
}

/* a strip of an erasure-coded object, rebuilt and stored here (its lock held) */
static int rebuild_strip(uint64_t oid)
{
	uint32_t len = replica_object_size(oid);
	void *buf = malloc(len);
	int ret;

	if (!buf)
		return SD_RES_NO_MEM;
	ret = gateway_ec_rebuild_strip(oid, buf, &len);
	if (ret == SD_RES_SUCCESS)
		ret = sd_store->create_and_write(oid, 0, buf, len, 0, false);
	if (ret == SD_RES_SUCCESS)
		sd_info("%016" PRIx64 ": strip rebuilt from the other strips", oid);
	free(buf);
	return ret;
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
		if (!e->live && discarded(e->oid)) {
			sd_info("%016" PRIx64 " was discarded while its copy was away: not recovered",
				e->oid);
			count(&info.nr_done, 1);
			e->oid = 0;
			continue;
		}
		sd_mutex_lock(oid_lock(e->oid));
		had = sd_store->exist(e->oid);
		/* not synced one by one: fetch_all syncs them all at the end */
		r = replica_fetch(job->er, e->oid, e->live, e->stale, false);
		/* a strip that no node has: rebuilt from the object's other strips */
		if (r == SD_RES_NO_OBJ && ec_oid_strip(e->oid) >= 0 && !deleted_has(e->oid))
			r = rebuild_strip(e->oid);
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
		recovery_set_state(er->epoch, SD_RECOVERY_WAITING);
		sd_info("recovery of epoch %" PRIu32 ": %" PRIu64
			" object(s) failed; retrying in %d ms",
			er->epoch, nr_failed, wait_ms);
		for (int slept = 0; slept < wait_ms && !superseded(er->epoch);
		     slept += RUN_RETRY_MS)
			sleep_ms(RUN_RETRY_MS);
		if (superseded(er->epoch))
			return;
		recovery_set_state(er->epoch, SD_RECOVERY_RUNNING);
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
	uint64_t nr_todo = 0, *missed = NULL;
	size_t nr_missed = 0;
	int ret = 0;

	if (!er)
		return -EAGAIN;
	if (er->epoch != epoch)
		goto out_put;
	if (er->local_idx < 0) { /* not a member of this epoch: nothing to hold */
		recovery_set_state(epoch, SD_RECOVERY_DONE);
		goto out_put;
	}
	recovery_set_state(epoch, SD_RECOVERY_RUNNING);
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
	recovery_merge(&set);
	nr_missed = learn_vdis(&set, &missed);
	if (recovery_add_strips(&set)) {
		ret = -ENOMEM;
		goto out_free;
	}
	nr_todo = recovery_plan(er, &set, remove_deleted);
	count(&info.nr_total, nr_todo);
	sd_info("recovery of epoch %" PRIu32 ": %" PRIu64 " object(s) to fetch", epoch, nr_todo);
	fetch_all(er, &set, false);
	retry_failed(er, &set);
	if (!superseded(epoch)) {
		sd_info("recovery of epoch %" PRIu32 " done: %" PRIu64 " fetched, %" PRIu64
			" failed",
			epoch, info.nr_done, info.nr_failed);
		recovery_set_state(epoch, SD_RECOVERY_WAITING);
		/* only with every object fetched (retry_failed) is anything removed */
		if (!info.nr_failed && clean_epoch(er, &set, missed, nr_missed))
			recovery_set_state(epoch, SD_RECOVERY_DONE);
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

	while (!daemon_stopping()) {
		epoch = __atomic_load_n(&want_epoch, __ATOMIC_ACQUIRE);
		if (run_epoch(epoch) == -EAGAIN && !superseded(epoch)) {
			sleep_ms(RUN_RETRY_MS);
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
	bool again = (info.epoch != want_epoch || rerun) && !daemon_stopping();
	sd_mutex_unlock(&info_lock);
	rerun = false;
	if (again)
		recovery_kick();
}

void recovery_hold(bool hold)
{
	__atomic_store_n(&is_held, hold, __ATOMIC_RELEASE);
}

void recovery_count_stale(uint64_t n)
{
	count(&info.nr_stale, n);
}

void recovery_get_info(struct sd_recovery_info *out)
{
	sd_mutex_lock(&info_lock);
	*out = info;
	sd_mutex_unlock(&info_lock);
	/*
	 * No recovery ran since this daemon started, and none is queued (main
	 * thread: run_queued is ours): it holds what the current epoch gives
	 * it (a format, epoch 1, moves nothing), so that is the epoch it is
	 * done with, the one that cluster info shows.
	 */
	if (out->epoch == 0 && out->state == SD_RECOVERY_DONE && !run_queued)
		out->epoch = group_epoch();
}

void recovery_kick(void)
{
	if (__atomic_load_n(&is_held, __ATOMIC_ACQUIRE) || !group_is_formatted())
		return;
	__atomic_store_n(&want_epoch, group_epoch(), __ATOMIC_RELEASE);
	if (run_queued)
		return;
	run_queued = true;
	run_work.fn = run_fn;
	run_work.done = run_done;
	wq_queue(recovery_wq, &run_work);
}

void recovery_rerun(void)
{
	if (run_queued)
		rerun = true; /* that run may have listed this node before the loss */
	else
		recovery_kick();
}

struct work_queue *recovery_queue(void)
{
	return recovery_wq;
}

int recovery_init(void)
{
	/* an inode that the replica layer fetched: the VDI table learns the VDI */
	replica_set_inode_fetched(vdi_inode_recovered);
	recovery_wq = wq_create("recovery", 1);
	return recovery_wq ? 0 : -ENOMEM;
}
