/*
 * Joining a running cluster, and a node restarted alone that waits for the
 * nodes of its last epoch.
 *
 * A node that joins members that already run cannot count epochs by
 * itself: it sets its own objects aside as stale (it cannot know which of
 * them missed writes while it was away), asks a member for the cluster's
 * format and epoch history (STAT_CLUSTER) until that member's newest epoch
 * has the node list this node sees, takes them as its own, learns the VDI
 * namespace and the deleted VDIs, and only then serves clients (until
 * then join_in_progress()). It runs on the cluster worker, so ordered ops
 * delivered meanwhile wait and apply afterwards; recovery is held until it
 * is done, then kicked (recovery.c).
 *
 * A node restarted alone on a formatted directory (group.c: is_waiting)
 * serves once every member that came back has compared its own history
 * with this node's and accepted it (join_wait_check, on the recovery
 * thread, idle while nothing is served: a joining member's cluster worker
 * is busy with its join).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal_proto.h"
#include "logger.h"
#include "util.h"
#include "daemon.h"
#include "deleted.h"
#include "group.h"
#include "join.h"
#include "peer_io.h"
#include "recovery.h"
#include "vdi_sync.h"
#include "work.h"
#include "store/store.h"

#define JOIN_TRIES 300 /* x JOIN_SLEEP_MS: how long a join may take */
#define JOIN_SLEEP_MS 100
#define JOIN_MAX_LOGS 64 /* epoch history learned when joining */

static struct work_queue *join_wq; /* the cluster queue: the join runs in step with ordered ops */
static struct work_queue *wait_wq; /* join_wait_check's: recovery's, idle while waiting */
/* the layer above's news that the join is done (request.c: run what waited) */
static void (*join_done_fn)(void);

/* main thread only */
static struct work join_work;
static bool is_joining;	       /* atomic: clients wait until the join is done */
static bool is_member_waiting; /* atomic: its member waits (SD_STATUS_WAIT_FOR_JOIN) */
static uint32_t member_epoch;  /* join_fn's: the member's newest epoch, at the history check */
static bool member_clean;      /* and whether it stopped cleanly (SD_CINFO_CLEAN_STOP) */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

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
	for (int tries = 0; tries < JOIN_TRIES && ret == -EAGAIN && !daemon_stopping(); tries++) {
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
	daemon_stop(1);
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
		daemon_stop(1);
		return;
	}
	/* from here on: a member that waits for this node may serve (wait_check_fn) */
	recovery_set_state(0, SD_RECOVERY_JOINING);
	if (nr_stale)
		sd_info("%" PRIu64 " object(s) set aside as stale until recovered", nr_stale);
	recovery_count_stale(nr_stale);
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
	recovery_set_state(group_epoch(),
			   group_is_formatted() ? SD_RECOVERY_RUNNING : SD_RECOVERY_DONE);
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
		} while (wait_result == -EAGAIN && ++tries < JOIN_TRIES && !daemon_stopping() &&
			 group_is_waiting());
	}
	free(cs);
}

static void wait_check_done(struct work *w)
{
	wait_queued = false;
	if (wait_again) { /* the members changed meanwhile: check the new ones */
		join_wait_check(wait_gen);
		return;
	}
	if (!wait_result)
		group_end_wait(wait_gen);
	else if (group_is_waiting())
		sd_err("the nodes that are back did not all start their join: %s; waiting for "
		       "the next membership change (or collie cluster recover force)",
		       strerror(-wait_result));
}

void join_wait_check(uint32_t gen)
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
	wq_queue(wait_wq, &wait_work);
}

static void join_done(struct work *w)
{
	__atomic_store_n(&is_joining, false, __ATOMIC_RELEASE);
	recovery_hold(false);
	if (join_done_fn)
		join_done_fn();
	recovery_kick();
}

void join_start(void)
{
	__atomic_store_n(&is_joining, true, __ATOMIC_RELEASE);
	recovery_hold(true);
	join_work.fn = join_fn;
	join_work.done = join_done;
	wq_queue(join_wq, &join_work);
}

bool join_waits(void)
{
	return join_in_progress() && __atomic_load_n(&is_member_waiting, __ATOMIC_ACQUIRE);
}

bool join_in_progress(void)
{
	/* group's flag too: an evicted node is joining again from its eviction on */
	return __atomic_load_n(&is_joining, __ATOMIC_ACQUIRE) || group_is_joining();
}

void join_init(struct work_queue *cluster_q, struct work_queue *wait_q, void (*done)(void))
{
	join_wq = cluster_q;
	wait_wq = wait_q;
	join_done_fn = done;
}
