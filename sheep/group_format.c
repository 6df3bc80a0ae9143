/*
 * The cluster's format and its epoch history (group.h; the state they set
 * is group.c's, through group_priv.h).
 *
 * DIR/config holds the format (creation time, copies or D:P, object
 * size): read at start (group_init), written by a format (MAKE_FS) and by
 * ALTER_CLUSTER_COPY, and checked wherever it enters. A joining node
 * compares a member's epoch history with its own and adopts the member's
 * format, epoch and history (group_adopt). A clean stop (a cluster
 * shutdown) is marked in DIR/clean-stop for the next start
 * (group_started_clean).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "lock.h"
#include "ec.h"
#include "group_disk.h"
#include "group.h"
#include "group_priv.h"
#include "daemon.h"

static bool started_clean; /* set at start: see group_started_clean() */

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
	started_clean = !ret && c.ctime == group_cs.ctime && c.epoch == group_cs.epoch;
	/* gone for good before this node can serve anything */
	if (unlink(path) < 0 || gd_sync_dir()) {
		ret = -errno;
		sd_err("cannot remove %s: %s", path, strerror(-ret));
		started_clean = false;
		return ret;
	}
	if (started_clean)
		sd_info("stopped cleanly at epoch %" PRIu32 " by a cluster shutdown",
			group_cs.epoch);
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
	if (!group_is_cluster_stopping || !group_cs.formatted || daemon_exit_status() ||
	    (group_is_waiting() && !started_clean))
		return;
	c.ctime = group_cs.ctime;
	c.epoch = group_cs.epoch;
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
	group_cs.formatted = true;
	group_cs.ctime = cfg.ctime;
	group_cs.copies = cfg.copies;
	group_cs.copy_policy = cfg.copy_policy;
	group_cs.block_size_shift = cfg.block_size_shift;
	group_cs.epoch = gd_latest_epoch();
	sd_info("formatted cluster, copies %u, latest epoch %" PRIu32, group_cs.copies,
		group_cs.epoch);
	return take_clean_stop();
}

int group_format(uint64_t ctime, uint8_t copies, uint8_t copy_policy, uint8_t shift, int nr_storing)
{
	struct sheep_disk_config cfg = { .magic = CONFIG_MAGIC };
	int ret, d = 0, p = 0;

	sd_mutex_lock(&group_cs_lock);
	if (group_cs.formatted) {
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
	ret = gd_write_epoch_log(1, group_cs.nodes, group_cs.nr_nodes);
	if (!ret)
		ret = group_write_file("config", &cfg, sizeof(cfg));
	if (ret) {
		sd_err("cannot store the format: %s", strerror(-ret));
		goto out_unlock;
	}
	group_cs.formatted = true;
	group_cs.ctime = cfg.ctime;
	group_cs.copies = copies;
	group_cs.copy_policy = copy_policy;
	group_cs.block_size_shift = shift;
	group_cs.epoch = 1;
	group_rebuild_ring();
	if (copy_policy)
		sd_info("cluster formatted: erasure coded %d:%d, epoch 1", d, p);
	else
		sd_info("cluster formatted: %u copies, epoch 1", copies);
	ret = 0;
out_unlock:
	sd_mutex_unlock(&group_cs_lock);
	return ret;
}

/* gd_check_history against this node's state (caller holds group_cs_lock) */
static int check_history(uint32_t their_epoch, const struct sd_epoch_log *logs, int n, bool joining)
{
	if (!group_cs.formatted || group_cs.epoch == 0)
		return 0;
	return gd_check_history(group_cs.epoch, their_epoch, logs, n, joining);
}

int group_check_history(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n,
			bool joining)
{
	int ret = 0;

	sd_mutex_lock(&group_cs_lock);
	/* another cluster's or an unformatted one's: group_adopt says so */
	if ((rsp->cinfo.status == SD_STATUS_OK || rsp->cinfo.status == SD_STATUS_WAIT_FOR_JOIN) &&
	    group_cs.formatted && group_cs.ctime == rsp->cinfo.ctime)
		ret = gd_valid_logs(logs, n) ?: check_history(rsp->cinfo.epoch, logs, n, joining);
	sd_mutex_unlock(&group_cs_lock);
	return ret;
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

	sd_mutex_lock(&group_cs_lock);
	/* it waits for the nodes of its newest epoch: it serves, and answers, once they are back */
	if (rsp->cinfo.status == SD_STATUS_WAIT_FOR_JOIN) {
		ret = -EAGAIN;
		goto out_unlock;
	}
	if (rsp->cinfo.status != SD_STATUS_OK) {
		/* the cluster is not formatted (yet): nothing to learn */
		if (group_cs.formatted) {
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
	    !gd_same_nodes(logs[0].nodes, (int)logs[0].nr_nodes, group_cs.nodes,
			   group_cs.nr_nodes) ||
	    !group_weights_agree(&logs[0])) {
		ret = -EAGAIN;
		goto out_unlock;
	}
	if (group_cs.formatted && group_cs.ctime != rsp->cinfo.ctime) {
		ret = -EINVAL;
		goto out_unlock;
	}
	ret = check_history(rsp->cinfo.epoch, logs, n, true);
	if (ret)
		goto out_unlock;
	for (int i = 0; i < n && !ret; i++)
		ret = gd_write_epoch_log(logs[i].epoch, logs[i].nodes, (int)logs[i].nr_nodes);
	/* new here, or the default copies changed while this node was away (ALTER_CLUSTER_COPY) */
	if (!ret && (!group_cs.formatted || group_cs.copies != rsp->cinfo.copies)) {
		cfg.ctime = rsp->cinfo.ctime;
		cfg.copies = rsp->cinfo.copies;
		cfg.copy_policy = rsp->cinfo.copy_policy;
		cfg.block_size_shift = rsp->cinfo.block_size_shift;
		ret = group_write_file("config", &cfg, sizeof(cfg));
	}
	if (ret)
		goto out_unlock;
	group_cs.formatted = true;
	group_cs.ctime = rsp->cinfo.ctime;
	group_cs.copies = rsp->cinfo.copies;
	group_cs.copy_policy = rsp->cinfo.copy_policy;
	group_cs.block_size_shift = rsp->cinfo.block_size_shift;
	group_cs.epoch = rsp->cinfo.epoch;
	group_take_weights(&logs[0]);
	group_rebuild_ring();
	sd_info("joined the cluster at epoch %" PRIu32 ", %d nodes, copies %u", group_cs.epoch,
		group_cs.nr_nodes, group_cs.copies);
out_joined:
	__atomic_store_n(&group_cs.joining, false, __ATOMIC_RELEASE);
out_unlock:
	sd_mutex_unlock(&group_cs_lock);
	return ret;
}

int group_set_copies(uint8_t copies, int nr_storing)
{
	struct sheep_disk_config cfg = { .magic = CONFIG_MAGIC };
	int ret = 0;

	sd_mutex_lock(&group_cs_lock);
	if (!group_cs.formatted)
		ret = -ENOENT;
	else if (group_cs.copy_policy || copies < 1 || copies > SD_MAX_COPIES)
		ret = -EINVAL;
	else if (copies > nr_storing)
		ret = -ERANGE;
	if (ret || copies == group_cs.copies)
		goto out_unlock;
	cfg.ctime = group_cs.ctime;
	cfg.copies = copies;
	cfg.copy_policy = group_cs.copy_policy;
	cfg.block_size_shift = group_cs.block_size_shift;
	ret = group_write_file("config", &cfg, sizeof(cfg));
	if (ret) {
		sd_err("cannot store the new default copies: %s", strerror(-ret));
		goto out_unlock;
	}
	sd_info("the cluster's default copies: %u, %u before", copies, group_cs.copies);
	__atomic_store_n(&group_cs.copies, copies, __ATOMIC_RELEASE);
out_unlock:
	sd_mutex_unlock(&group_cs_lock);
	return ret;
}
