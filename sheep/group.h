/*
 * Membership, epochs and the cluster state (group.c, group_format.c,
 * group_members.c).
 */
#ifndef SHEEP_GROUP_H
#define SHEEP_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "internal_proto.h"
#include "ring.h"

/* group.c: cluster state, epochs, membership */
struct cluster_state {
	bool formatted;
	uint64_t ctime;
	uint8_t copies;	     /* D + P when copy_policy names D:P */
	uint8_t copy_policy; /* the new VDIs' default: 0 replicated, else D:P (ec.h) */
	uint8_t block_size_shift;
	uint32_t epoch;
	int nr_nodes;
	struct sd_node nodes[SD_MAX_NODES];
	int local_idx;
	bool joining; /* learning the state of the cluster it joined */
};
/* the cluster state stored in dir (its config and epochs): 0 or -errno */
int group_init(const char *dir);
struct cluster_driver;
/*
 * Join the cluster through drv (initialised with option, NULL: the one it
 * was selected with; it reports to this module) as me: 0 or -errno
 */
int group_join(const struct cluster_driver *drv, const char *option, const struct sd_node *me);
/*
 * News that travels up from the membership, on the main thread: this node
 * joined a running cluster (it must learn its state), or the epoch changed
 * (objects move). Registered by main before the join; NULL: ignored.
 */
struct group_news {
	void (*joined)(void);
	void (*epoch_changed)(void);
	/* a member left (died, or evicted): before the epoch change */
	void (*node_left)(const struct sd_node_id *nid);
	/*
	 * and once the ring without it is published (before epoch_changed):
	 * what waits on it may give up, a retry finds the new ring
	 */
	void (*node_gone)(const struct sd_node_id *nid);
	/*
	 * This node, evicted, came back alone: it serves again with no join
	 * to learn from (joined is not called), after the epoch change; what
	 * waited for the join goes on.
	 */
	void (*serving)(void);
	/*
	 * This node, restarted alone, waits for the nodes of its newest epoch
	 * (group_is_waiting) and they are all members now: check that none
	 * holds a newer history, then group_end_wait(gen).
	 */
	void (*wait_covered)(uint32_t gen);
};
void group_set_news(const struct group_news *n);
/*
 * A message the cluster driver delivered (in the cluster's total order, on
 * the main thread), with the number of members at its delivery: what the
 * layer above registered with group_set_deliver takes it.
 */
typedef void (*group_deliver_fn)(const void *msg, size_t len, int nr_members);
void group_set_deliver(group_deliver_fn fn);
/*
 * Make the cluster formatted with copies (0: default), or erasure coding
 * when copy_policy names D:P (copies then 0 or D + P): the scheme of the
 * VDIs created without one; nr_storing: the members that store objects
 * (not gateways) when the format was delivered. 0, or -EEXIST (formatted
 * already), -EINVAL (copies, scheme or shift out of bounds), -ERANGE (more
 * copies or strips than nodes to store them), -errno of writing the epoch
 * log or the config.
 */
int group_format(uint64_t ctime, uint8_t copies, uint8_t copy_policy, uint8_t shift,
		 int nr_storing);
/*
 * ALTER_CLUSTER_COPY, in the cluster's order: the default copies of the
 * VDIs created without a count becomes copies (DIR/config too). 0, or
 * -EINVAL (the default is erasure coding, copies out of bounds), -ERANGE
 * (more copies than the nr_storing nodes that store objects), -ENOENT (not
 * formatted), -errno of writing the config.
 */
int group_set_copies(uint8_t copies, int nr_storing);
void group_get_state(struct cluster_state *out);
bool group_is_formatted(void);
/* true from this node's join into a running cluster until group_adopt() */
bool group_is_joining(void);
/*
 * True while this node, started alone on a formatted directory, waits for
 * the nodes of the newest epoch it stored (group_members.c, group_joined): it
 * serves no client and counts no epoch meanwhile.
 */
bool group_is_waiting(void);
/*
 * True when this node's last stop was a cluster shutdown at its newest
 * epoch (DIR/clean-stop, removed as it starts): its copies hold every
 * write that was acknowledged, and none was cut since. group_stopped(), as
 * the daemon exits, writes the mark after a cluster shutdown.
 */
bool group_started_clean(void);
void group_stopped(void);
/* main thread: serve without the nodes still awaited: 0, or -EALREADY (not waiting) */
int group_force_start(void);
/* main thread: the members of wait_covered's gen hold no newer history: serve, if still so */
void group_end_wait(uint32_t gen);
/* see group_format.c: 0, -EAGAIN (retry) or -errno */
int group_adopt(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n);
/*
 * A member's answer to STAT_CLUSTER against this node's history (group_format.c:
 * check_history). joining: may this node take it, before it touches its
 * objects (-ESTALE: its own is newer or forked)? Otherwise, this node
 * waits (group_is_waiting): is the member's no newer (-ESTALE: it is, or
 * forked)? 0, or -EINVAL for logs that cannot be ones.
 */
int group_check_history(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n,
			bool joining);
uint8_t group_copies(void);
/* the new VDIs' default scheme: 0 (replicated, group_copies()) or D:P (ec.h) */
uint8_t group_copy_policy(void);
int group_nr_nodes(void);
/* the members started with --gateway (SD_NODE_GATEWAY): they store nothing */
int group_nr_gateways(void);
/* fill logs (up to max entries, newest first): returns how many */
int group_read_epoch_logs(struct sd_epoch_log *logs, int max);
uint32_t group_epoch(void);
/* addr is one of the current members' (or their --io-addr); *lo_member: a member is on loopback */
bool group_has_member_addr(const uint8_t addr[16], bool *lo_member);
/*
 * Where to send member nid's peer requests: its --io-addr (true, *to
 * filled), or nid itself (false: not a member, or no io address)
 */
bool group_io_endpoint(const struct sd_node_id *nid, struct sd_node_id *to);
/* this node's id */
const struct sd_node_id *group_self(void);
/*
 * Main thread (SET_VNODES): give the storing members e[n] names their new
 * vnodes, through the cluster's order; every node then counts one epoch
 * with them. 0 (broadcast, or nothing changes), -EINVAL (a count outside
 * 1..SD_MAX_VNODES, a node named twice), -ENOENT (not a member), -EPERM (a
 * gateway), -EAGAIN (not formatted), -EBUSY (joining or waiting), or the
 * driver's -errno.
 */
int group_set_vnodes(const struct sd_vnodes_entry *e, int n);
/*
 * After group_init: the vnodes that SET_VNODES gave this node before it
 * stopped (its next start announces them), 0 when none; with forget, the
 * saved count is removed (sheep --vnodes names one). -errno.
 */
int group_saved_vnodes(bool forget);
/* write DIR/name whole (a temporary file renamed into place): 0 or -errno */
int group_write_file(const char *name, const void *buf, size_t len);
/*
 * Main thread, before a client request is served: if the cluster driver's
 * tick has not run for a while (this process was stopped), deliver what it
 * has pending first, so that a node evicted meanwhile knows it (and is
 * joining again, group_is_joining) before it serves from a stale view.
 * now: a stat_clock() read just before (a fresh request's start).
 */
void group_catch_up(uint64_t now);
/* main thread: a cluster shutdown was delivered; no epoch is counted any more */
void group_cluster_stopping(void);
/* broadcast msg through the cluster driver: 0 or -errno */
int group_notify(const void *msg, size_t len);
/*
 * The placement ring of one epoch, shared by reference: it stays valid
 * until put, whatever membership does meanwhile.
 */
struct epoch_ring {
	int refcnt;
	uint32_t epoch;
	int local_idx; /* this node in ring.nodes, or -1 */
	struct sd_ring ring;
};
struct epoch_ring *group_ring_get(void);
void group_ring_put(struct epoch_ring *er);
/*
 * Any thread but main: wait until a ring newer than epoch is published, at
 * most timeout_ms; true if one is (woken as soon as it is)
 */
bool group_wait_epoch(uint32_t epoch, int timeout_ms);

#endif
