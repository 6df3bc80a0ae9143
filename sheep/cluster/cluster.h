/*
 * Cluster drivers: where membership and the total order of cluster
 * messages come from. A driver is a const ops struct registered by
 * cdrv_register_driver(); selected with `sheep -c NAME[:OPTION]`.
 *
 * Events. A driver delivers three kinds of events to the daemon through
 * the callbacks it was given at init (struct cdrv_events): a member joined
 * (joined), a member left (left) and a broadcast message (notified). The
 * contract, for every driver:
 *
 * - Thread. Events are reported on the main thread only: from inside
 *   join(), or from a handler the driver registered in the main event loop
 *   (ev_add). Never from a worker thread, never from a signal handler.
 * - One total order. All members deliver the events they see in the same
 *   sequence: if members A and B both deliver events x and y, both deliver
 *   x before y. There is no gap: from its own join until it leaves, a
 *   member delivers every event of that stretch of the sequence.
 * - Member list. `members` is the list after the event, nr entries, the
 *   same on every member for the same event, in join order (the oldest
 *   member first). A rejoining node is appended at the end. The arrays are
 *   owned by the driver and valid only during the call.
 * - Own join. join(myself) delivers joined(myself, members, nr)
 *   on this member before it returns 0: that is the first event this
 *   member sees, and `members` is then the complete list (myself last).
 *   Nothing that happened before is replayed. join() may deliver later
 *   events too before it returns.
 * - Leave. left(left, members, nr) is delivered once on every
 *   remaining member when a member leaves gracefully (leave()), dies, or
 *   is declared dead by the driver's liveness check; `members` no longer
 *   holds it. Messages that `left` broadcast before it was seen leaving
 *   are delivered before its leave event, on every member, or on none.
 * - Evicted. If the other members declare this member dead (it stopped
 *   answering for longer than the heartbeat timeout while it still runs),
 *   the driver calls left(myself, members, nr) with the list
 *   that the others now have, once, and then delivers nothing more: the
 *   daemon must stop serving, and leave() then init() and join() again
 *   (from the main loop, not from the handler) to come back as a new
 *   member.
 * - Heartbeat. Every driver declares a member that still holds its place
 *   but has been silent for cdrv_heartbeat_timeout_ms() (stopped with
 *   SIGSTOP, or its main thread hung) dead, within about one tick more:
 *   every member sees it leave, in the same order, as for a crash. A
 *   member that was itself stalled first reads what happened meanwhile
 *   (possibly its own eviction) and never evicts on stale clocks.
 *   Drivers call cdrv_tick() from their periodic tick; catch_up() is
 *   called by cdrv_catch_up() when that tick has not run for a while (the
 *   process was stopped): it delivers at once what is pending, so that
 *   the daemon learns of its own eviction before it serves a request.
 * - Messages. notify() returns before delivery; the sender itself gets
 *   its message through notified like everyone else, in the
 *   total order. `sender` is a member of the current list.
 * - Quorum. A driver that knows about partitions (is_quorate) calls
 *   quorum_lost() when the partition of this member loses
 *   quorum, and its is_quorate(), called from a join or leave handler,
 *   answers for the membership after that event even if the driver has
 *   not delivered the quorum change yet. Policy: a member without quorum
 *   must not keep a view that diverges from the majority's: the daemon
 *   counts no epoch for that membership change, applies nothing more and
 *   stops with a failure status; once the network is back an operator
 *   restarts it and it joins like any node. A member that starts in a
 *   partition without quorum stops the same way.
 * - The callbacks may call notify(). They must not call join() or leave().
 *
 * Callbacks:
 * - init(option, events): prepare, no member visible yet; events (kept by
 *   the driver until the next init) is where it reports. `option` is the text
 *   after ':' in `-c NAME:OPTION`; NULL means the option that was given
 *   to cdrv_find() with the name (cdrv_selected_option()), or the default.
 *   0 or -errno.
 * - join(myself): become a member, see "Own join". Blocks for a bounded
 *   time (the driver's join timeout). 0 or -errno (-ETIMEDOUT, ...).
 * - leave(): stop being a member; the others see left(). No
 *   event is reported on this member after leave() begins. 0 or -errno.
 * - notify(msg, len): broadcast, len at most CDRV_MAX_MSG_LEN. 0, -EMSGSIZE,
 *   -ENOTCONN (not a member) or another -errno.
 * - catch_up(): optional. Deliver now the events that are pending (see
 *   "Heartbeat"). Main thread only.
 * - is_quorate(): optional (NULL: always quorate). True when this member
 *   belongs to the partition that holds the quorum, for drivers that know
 *   about partitions; see "Quorum". Main thread only.
 *
 * Drivers:
 * - local[:DIR]: every sheep of one machine; DIR is shared by the members
 *   of one cluster (default /tmp/sheepdog-local). No external service. A
 *   killed member is seen leaving within about 0.3 s; a stopped (SIGSTOP)
 *   one after the heartbeat timeout (members stamp their liveness file).
 * - corosync[:GROUP]: CPG group GROUP (default "sheepdog"). A killed member
 *   leaves at once (corosync reports it); a member that stays silent for
 *   the heartbeat timeout (stopped, or its daemon hung) is declared dead
 *   by the oldest member that still speaks. is_quorate() asks votequorum; join()
 *   first waits up to 10 s for this partition to be quorate.
 * - zookeeper[:HOST:PORT[,HOST:PORT...][/PATH][,timeout=S]]: a ZooKeeper
 *   ensemble (default 127.0.0.1:2181, znode /sheepdog; zookeeper.c has the
 *   design). The session timeout is S, or the heartbeat timeout. A killed
 *   or stopped member leaves when the ensemble expires its session (a
 *   killed one too: the ensemble keeps a session for its client to come
 *   back); one whose main thread hangs for the heartbeat timeout removes
 *   itself. No is_quorate(): a member reads only what a quorum committed,
 *   so it cannot diverge; cut off from the quorum it delivers nothing, its
 *   notify()s wait, and after nearly the session timeout it evicts itself.
 *   Messages above ZK_MAX_MSG_LEN (1 MiB - 8 KiB) get -EMSGSIZE.
 */
#ifndef CLUSTER_H
#define CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include "internal_proto.h"

/* cluster messages are small: bigger ones are refused with -EMSGSIZE */
#define CDRV_MAX_MSG_LEN (1024 * 1024)

/* what a driver reports, on the main thread (see "Events" above) */
struct cdrv_events {
	void (*joined)(const struct sd_node *joined, const struct sd_node *members, int nr);
	void (*left)(const struct sd_node *left, const struct sd_node *members, int nr);
	void (*notified)(const struct sd_node *sender, const void *msg, size_t len);
	void (*quorum_lost)(void);
};

struct cluster_driver {
	const char *name;
	int (*init)(const char *option, const struct cdrv_events *events);
	int (*join)(const struct sd_node *myself);
	int (*leave)(void);
	int (*notify)(const void *msg, size_t len);
	/* optional */
	bool (*is_quorate)(void);
	void (*catch_up)(void);
};

void cdrv_register(const struct cluster_driver *drv);
#define cdrv_register_driver(drv)                                                                  \
	static void __attribute__((constructor)) register_##drv(void)                              \
	{                                                                                          \
		cdrv_register(&drv);                                                               \
	}

/*
 * Look a driver up by "NAME" or "NAME:OPTION". A driver found becomes the
 * selected one, and OPTION is kept for cdrv_selected_option().
 */
const struct cluster_driver *cdrv_find(const char *arg);
/* the OPTION of the last successful cdrv_find(), or NULL */
const char *cdrv_selected_option(void);
/* the selected driver's is_quorate(); true without one */
bool cdrv_is_quorate(void);
/*
 * True when SIGTERM or SIGINT waits for this thread (the daemon blocks them
 * and reads them from its event loop): a driver that waits on the main
 * thread before that loop runs gives up then, with -EINTR.
 */
bool cdrv_stop_pending(void);
/*
 * The heartbeat timeout (sheep --heartbeat-timeout): a member silent for
 * longer is declared dead. Set before init().
 */
#define CDRV_DEFAULT_HEARTBEAT_MS 5000
#define CDRV_MIN_HEARTBEAT_MS 1000
#define CDRV_MAX_HEARTBEAT_MS 60000
void cdrv_set_heartbeat_timeout_ms(unsigned int ms);
unsigned int cdrv_heartbeat_timeout_ms(void);
/* drivers: their periodic tick ran (main thread) */
void cdrv_tick(void);
/*
 * Main thread: when the selected driver's tick has not run for more than
 * cdrv_stall_ms() (this process was stopped or starved), let it deliver
 * what is pending now (its catch_up()). now is a fresh stat_clock() (the
 * caller has one: a request's start), so this is a compare: cdrv_tick()
 * keeps the clock value past which the tick is late, converting
 * cdrv_stall_ms() with the ratio of stat_clock() to CLOCK_MONOTONIC
 * between two ticks.
 *
 * The stall: CDRV_STALL_MS, or a quarter of the heartbeat timeout when
 * that is less. The others may have heard this node last one beat before
 * its last tick (corosync beats every 500 ms), so with a 1 s timeout a stop
 * of ~500 ms can get it evicted: a check after 1 s would let it serve one
 * request on the view it had.
 */
#define CDRV_STALL_MS 1000
unsigned int cdrv_stall_ms(void);
extern uint64_t cdrv_late_at; /* UINT64_MAX: not known yet, or no catch_up() */
void cdrv_catch_up_late(uint64_t now);
static inline void cdrv_catch_up(uint64_t now)
{
	if (__builtin_expect(now > cdrv_late_at, 0))
		cdrv_catch_up_late(now);
}
/* "local, corosync": the names of the registered drivers */
void cdrv_names(char *buf, size_t len);

#endif
