/*
 * The corosync driver: membership and total order from corosync's CPG
 * (closed process groups), messages sent CPG_TYPE_AGREED.
 *
 * CPG knows a process as (nodeid, pid); the daemon knows a node as its
 * struct sd_node. Every process of the group (group "sheepdog" or
 * `-c corosync:GROUP`) runs the same state machine on the same sequence of
 * CPG events, so each computes the same member list:
 *
 * - A process that holds the member list is "complete". The founders are
 *   complete at once: they joined an empty group together (their first
 *   confchg lists no process older than them) so the list is empty.
 * - Right after it joins the group, a process multicasts JOIN with its
 *   sd_node (and a FOUNDER flag). A founder's JOIN makes it a member where
 *   it is delivered. Any other JOIN makes the sender "pending".
 * - The master, the first (oldest) member, answers a pending joiner with
 *   ACCEPT: its member list, its pending list, and its view sequence
 *   number. The joiner becomes a member where ACCEPT is delivered: it
 *   starts delivering there, with the list carried. The view sequence
 *   number counts the events that change those lists (confchg, JOIN,
 *   ACCEPT, EVICT); an ACCEPT is valid only when none came between its
 *   sending and its delivery, so the carried lists are exact. The joiner,
 *   which is not complete, checks the same thing by counting those events
 *   from its own JOIN on. A void ACCEPT is sent again by the master; a
 *   new master (the old one left) answers the joiners still pending. The
 *   master keeps one ACCEPT in flight at a time.
 * - A process alone in the group (confchg with one member) knows the list
 *   is empty: a joiner in that case accepts itself.
 * - A confchg that removes a member is its leave, where it is delivered.
 *   CPG delivers the messages of a leaving process before its confchg.
 *
 * Liveness: CPG does not remove a stopped process. Every member multicasts
 * HEARTBEAT every COROSYNC_HEARTBEAT_MS; any message counts as a sign of
 * life, taken when it is delivered. The first member, in list order, that
 * is itself or has been heard from within the heartbeat timeout
 * (cdrv_heartbeat_timeout_ms, sheep --heartbeat-timeout) declares every
 * member silent for longer dead with EVICT(member), which all apply in
 * order as a leave. Before it looks, a member dispatches what corosync
 * queued for it, so a member that was stopped itself first reads what
 * happened meanwhile (possibly its own EVICT) and never evicts on stale
 * clocks. A member that finds itself evicted reports it (see cluster.h)
 * and stops delivering; the daemon then leaves (cpg_finalize) and joins
 * again as a new process of the group, with the same (nodeid, pid): the
 * others removed it when they applied its EVICT, so the confchg of its old
 * handle leaving finds nothing to remove, and its new JOIN is a join.
 *
 * Quorum: CPG itself does not enforce quorum, so a member cut off from the
 * majority keeps a working group of its own. libquorum (votequorum) does
 * the counting: its fd is in the main loop, and a notification that this
 * partition lost quorum calls events->quorum_lost() (the daemon stops:
 * see cluster.h). After a ring change corosync synchronises its services
 * in the order of their ids, CPG before votequorum, and the two talk to
 * this process on two connections: the confchg that reports a node down
 * comes first, while votequorum still counts the old ring. So before it
 * delivers such a leave, the driver waits (bounded) for the quorum
 * notification whose view no longer has that node; is_quorate() asks
 * votequorum there and then. join() waits, for a bounded time, until the
 * partition is quorate before it joins the group.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <corosync/cpg.h>
#include <corosync/quorum.h>

#include "cluster.h"
#include "event.h"
#include "logger.h"
#include "util.h"

#define COROSYNC_MAGIC 0x53444350U  /* "SDCP" */
#define COROSYNC_INIT_WAIT_MS 10000 /* for corosync to start */
#define COROSYNC_JOIN_WAIT_MS 15000 /* for the master's ACCEPT */
#define COROSYNC_HEARTBEAT_MS 500
#define COROSYNC_QUORUM_WAIT_MS 3000 /* for votequorum to count a new ring */
#define COROSYNC_MAX_VIEW 384	     /* corosync's PROCESSOR_COUNT_MAX */

enum cs_type {
	CS_JOIN = 1,
	CS_ACCEPT,
	CS_NOTIFY,
	CS_HEARTBEAT,
	CS_EVICT,
};

#define CS_FOUNDER 1 /* JOIN: the sender knows the list (it is empty) */

/* where this driver reports (init) */
static const struct cdrv_events *events;

struct cs_id {
	uint32_t nodeid;
	uint32_t pid;
};

/* every message starts with this header; the payload follows */
struct cs_msg {
	uint32_t magic;
	uint16_t type;
	uint16_t flags;
	uint32_t len;	     /* payload bytes */
	uint32_t nr_members; /* ACCEPT */
	uint32_t nr_pending; /* ACCEPT */
	struct cs_id target; /* ACCEPT, EVICT */
	uint32_t pad;
	uint64_t vseq;	     /* ACCEPT: the master's view sequence when it sent */
	uint64_t req_vseq;   /* ACCEPT: the view sequence at the target's JOIN */
	struct sd_node node; /* JOIN: the sender's; ACCEPT: the target's */
};

/* ACCEPT payload: nr_members, then nr_pending of these */
struct cs_wire_member {
	struct cs_id id;
	uint64_t req_vseq; /* pending only */
	struct sd_node node;
};

struct cs_member {
	struct cs_id id;
	struct sd_node node;
	uint64_t req_vseq; /* pending: the view sequence at its JOIN */
	uint64_t heard_ns; /* member: when a message of it was last delivered */
	bool is_sent;	   /* pending: my ACCEPT is in flight; member: my EVICT is */
};

enum cs_state {
	CS_IDLE,      /* not in the group */
	CS_STARTING,  /* cpg_join done, waiting for the first confchg */
	CS_REQUESTED, /* my JOIN sent, not delivered yet */
	CS_WAITING,   /* my JOIN delivered, waiting for ACCEPT */
	CS_MEMBER,
	CS_EVICTED,
};

static cpg_handle_t cpg_handle;
static quorum_handle_t quorum_handle;
static bool has_quorum_service;
static bool quorate = true;
static struct cpg_name group;
static int cpg_fd = -1, quorum_fd = -1, beat_fd = -1;
static uint32_t quorum_view[COROSYNC_MAX_VIEW]; /* nodeids of the last notification */
static size_t nr_quorum_view;

static enum cs_state state;
static struct cs_id self_id;
static struct sd_node self_node;
static size_t nr_cpg; /* processes in the group at the last confchg */

static bool is_complete; /* members, pending and vseq are known */
static uint64_t vseq;
static struct cs_member members[SD_MAX_NODES], pending[SD_MAX_NODES];
static int nr_members, nr_pending;
static uint64_t my_req_events; /* CS_WAITING: view events since my JOIN */

static bool same_id(struct cs_id a, struct cs_id b)
{
	return a.nodeid == b.nodeid && a.pid == b.pid;
}

static int find(const struct cs_member *list, int nr, struct cs_id id)
{
	for (int i = 0; i < nr; i++)
		if (same_id(list[i].id, id))
			return i;
	return -1;
}

static void remove_at(struct cs_member *list, int *nr, int i)
{
	(*nr)--;
	memmove(&list[i], &list[i + 1], (*nr - i) * sizeof(list[0]));
}

static const struct sd_node *member_nodes(void)
{
	static struct sd_node nodes[SD_MAX_NODES];

	for (int i = 0; i < nr_members; i++)
		nodes[i] = members[i].node;
	return nodes;
}

/* multicast, agreed order; retries while corosync pushes back. 0 or -errno */
static int cs_send(struct cs_msg *hdr, const void *data, size_t len)
{
	struct iovec iov[2] = {
		{ .iov_base = hdr, .iov_len = sizeof(*hdr) },
		{ .iov_base = (void *)data, .iov_len = len },
	};
	uint64_t deadline = sd_now_ns() + UINT64_C(5000000000);
	cs_error_t err;

	hdr->magic = COROSYNC_MAGIC;
	hdr->len = (uint32_t)len;
	while ((err = cpg_mcast_joined(cpg_handle, CPG_TYPE_AGREED, iov, len ? 2 : 1)) ==
	       CS_ERR_TRY_AGAIN) {
		if (sd_now_ns() > deadline)
			break;
		usleep(1000);
	}
	if (err != CS_OK) {
		sd_err("cpg_mcast_joined: error %d", err);
		return err == CS_ERR_TRY_AGAIN ? -EAGAIN : -ECOMM;
	}
	return 0;
}

static int send_simple(uint16_t type, uint16_t flags, struct cs_id target)
{
	struct cs_msg hdr = { .type = type, .flags = flags, .target = target };

	if (type == CS_JOIN)
		hdr.node = self_node;
	return cs_send(&hdr, NULL, 0);
}

static int send_accept(const struct cs_member *joiner)
{
	struct cs_wire_member *w = calloc(nr_members + nr_pending, sizeof(*w));
	struct cs_msg hdr = {
		.type = CS_ACCEPT,
		.nr_members = (uint32_t)nr_members,
		.target = joiner->id,
		.vseq = vseq,
		.req_vseq = joiner->req_vseq,
		.node = joiner->node,
	};
	int n = 0, ret;

	if (!w)
		return -ENOMEM;
	for (int i = 0; i < nr_members; i++, n++) {
		w[n].id = members[i].id;
		w[n].node = members[i].node;
	}
	for (int i = 0; i < nr_pending; i++) {
		if (same_id(pending[i].id, joiner->id))
			continue;
		w[n].id = pending[i].id;
		w[n].req_vseq = pending[i].req_vseq;
		w[n].node = pending[i].node;
		n++;
		hdr.nr_pending++;
	}
	ret = cs_send(&hdr, w, n * sizeof(*w));
	free(w);
	return ret;
}

static bool is_master(void)
{
	return state == CS_MEMBER && nr_members > 0 && same_id(members[0].id, self_id);
}

/*
 * The master answers the oldest pending joiner. One ACCEPT at a time: an
 * ACCEPT is itself a view event, so two in flight would void each other
 * for ever.
 */
static void master_duty(void)
{
	if (!is_master() || nr_pending == 0)
		return;
	for (int i = 0; i < nr_pending; i++)
		if (pending[i].is_sent)
			return;
	if (send_accept(&pending[0]) == 0)
		pending[0].is_sent = true;
}

static void add_member(struct cs_id id, const struct sd_node *node)
{
	if (nr_members >= SD_MAX_NODES) {
		sd_err("more than %d members: %u/%u ignored", SD_MAX_NODES, id.nodeid, id.pid);
		return;
	}
	members[nr_members].id = id;
	members[nr_members].node = *node;
	members[nr_members].heard_ns = sd_now_ns();
	members[nr_members].is_sent = false;
	nr_members++;
}

/* this process becomes a member: its own join is its first event */
static void become_member(void)
{
	state = CS_MEMBER;
	is_complete = true;
	for (int i = 0; i < nr_members; i++)
		members[i].heard_ns = sd_now_ns();
	sd_info("joined group %s as %u/%u, %d members", group.value, self_id.nodeid, self_id.pid,
		nr_members);
	events->joined(&self_node, member_nodes(), nr_members);
	master_duty();
}

/* nobody else in the group: the list is empty, accept myself */
static void accept_alone(void)
{
	is_complete = true;
	vseq = 0;
	nr_members = nr_pending = 0;
	add_member(self_id, &self_node);
	become_member();
}

/* a member is gone (confchg or EVICT): applied by every complete process */
static void remove_member(struct cs_id id, const char *why)
{
	int i = find(pending, nr_pending, id);
	struct sd_node node;

	if (i >= 0)
		remove_at(pending, &nr_pending, i);
	i = find(members, nr_members, id);
	if (i < 0)
		return;
	node = members[i].node;
	remove_at(members, &nr_members, i);
	if (same_id(id, self_id)) {
		sd_err("the other members declared this member dead");
		state = CS_EVICTED;
		is_complete = false;
		events->left(&self_node, member_nodes(), nr_members);
		return;
	}
	sd_info("member %u/%u left (%s), %d members", id.nodeid, id.pid, why, nr_members);
	if (state == CS_MEMBER)
		events->left(&node, member_nodes(), nr_members);
}

static void on_join(struct cs_id from, const struct cs_msg *hdr)
{
	if (!is_complete) {
		if (same_id(from, self_id)) {
			state = CS_WAITING;
			my_req_events = 0;
			if (nr_cpg == 1)
				accept_alone();
		} else if (state == CS_WAITING) {
			my_req_events++;
		}
		return;
	}
	vseq++;
	if (find(members, nr_members, from) >= 0 || find(pending, nr_pending, from) >= 0)
		return;
	if (hdr->flags & CS_FOUNDER) {
		add_member(from, &hdr->node);
		if (same_id(from, self_id))
			become_member();
		else if (state == CS_MEMBER)
			events->joined(&hdr->node, member_nodes(), nr_members);
	} else if (nr_pending < SD_MAX_NODES) {
		pending[nr_pending].id = from;
		pending[nr_pending].node = hdr->node;
		pending[nr_pending].req_vseq = vseq;
		pending[nr_pending].is_sent = false;
		nr_pending++;
	}
	master_duty();
}

/* the joiner's side of a valid ACCEPT: take the lists it carries */
static void accepted(const struct cs_msg *hdr, const struct cs_wire_member *w)
{
	nr_members = nr_pending = 0;
	for (uint32_t i = 0; i < hdr->nr_members; i++)
		add_member(w[i].id, &w[i].node);
	for (uint32_t i = 0; i < hdr->nr_pending && i < SD_MAX_NODES; i++) {
		const struct cs_wire_member *p = &w[hdr->nr_members + i];

		pending[nr_pending].id = p->id;
		pending[nr_pending].node = p->node;
		pending[nr_pending].req_vseq = p->req_vseq;
		pending[nr_pending].is_sent = false;
		nr_pending++;
	}
	add_member(self_id, &self_node);
	vseq = hdr->vseq + 1;
	become_member();
}

static void on_accept(const struct cs_msg *hdr, const void *payload)
{
	int i;

	if (!is_complete) {
		if (state != CS_WAITING)
			return;
		if (same_id(hdr->target, self_id) && hdr->vseq == hdr->req_vseq + my_req_events)
			accepted(hdr, payload);
		else
			my_req_events++;
		return;
	}
	i = find(pending, nr_pending, hdr->target);
	if (i >= 0 && hdr->vseq == vseq) {
		remove_at(pending, &nr_pending, i);
		add_member(hdr->target, &hdr->node);
		if (state == CS_MEMBER)
			events->joined(&hdr->node, member_nodes(), nr_members);
	} else if (i >= 0) {
		pending[i].is_sent = false; /* void: lists changed in flight */
	}
	vseq++;
	master_duty();
}

static void on_evict(const struct cs_msg *hdr)
{
	if (!is_complete) {
		if (state == CS_WAITING)
			my_req_events++;
		return;
	}
	vseq++;
	remove_member(hdr->target, "silent, evicted");
	master_duty();
}

static void corosync_deliver(cpg_handle_t handle, const struct cpg_name *name, uint32_t nodeid,
			     uint32_t pid, void *msg, size_t len)
{
	struct cs_id from = { nodeid, pid };
	struct cs_msg hdr;
	const uint8_t *payload = (const uint8_t *)msg + sizeof(hdr);
	int i;

	if (len < sizeof(hdr))
		return;
	memcpy(&hdr, msg, sizeof(hdr));
	if (hdr.magic != COROSYNC_MAGIC || hdr.len != len - sizeof(hdr))
		return;
	if (hdr.type == CS_ACCEPT &&
	    hdr.len != ((size_t)hdr.nr_members + hdr.nr_pending) * sizeof(struct cs_wire_member))
		return;
	i = is_complete ? find(members, nr_members, from) : -1;
	if (i >= 0)
		members[i].heard_ns = sd_now_ns();
	switch (hdr.type) {
	case CS_JOIN:
		on_join(from, &hdr);
		break;
	case CS_ACCEPT:
		on_accept(&hdr, payload);
		break;
	case CS_EVICT:
		on_evict(&hdr);
		break;
	case CS_NOTIFY:
		if (state == CS_MEMBER && i >= 0)
			events->notified(&members[i].node, payload, hdr.len);
		break;
	}
}

static bool in_quorum_view(uint32_t nodeid)
{
	for (size_t i = 0; i < nr_quorum_view; i++)
		if (quorum_view[i] == nodeid)
			return true;
	return false;
}

/*
 * CPG reports nodes down before votequorum has counted the ring without
 * them (see the top of this file): wait, for a bounded time, for the
 * quorum notification that no longer lists them, so that is_quorate()
 * answers for the membership after this change.
 */
static void quorum_catch_up(const struct cpg_address *left, size_t nr_left)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)COROSYNC_QUORUM_WAIT_MS * 1000000;
	struct pollfd pfd = { .fd = quorum_fd, .events = POLLIN };
	int nr_waits = 0;

	while (has_quorum_service) {
		bool is_stale = false;
		uint64_t now = sd_now_ns();

		for (size_t i = 0; i < nr_left && !is_stale; i++)
			is_stale =
			    left[i].reason == CPG_REASON_NODEDOWN && in_quorum_view(left[i].nodeid);
		if (!is_stale)
			return;
		if (!nr_waits++)
			sd_debug("a node is down: waiting for votequorum to count the new ring");
		if (now >= deadline) {
			sd_warn("votequorum did not count the new ring within %d ms",
				COROSYNC_QUORUM_WAIT_MS);
			return;
		}
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) < 0 && errno != EINTR)
			return;
		if (quorum_dispatch(quorum_handle, CS_DISPATCH_ALL) != CS_OK)
			return;
	}
}

static void corosync_confchg(cpg_handle_t handle, const struct cpg_name *name,
			     const struct cpg_address *list, size_t nr_list,
			     const struct cpg_address *left, size_t nr_left,
			     const struct cpg_address *joined, size_t nr_joined)
{
	nr_cpg = nr_list;
	sd_debug("confchg: %zu in group, %zu left, %zu joined; state %d", nr_list, nr_left,
		 nr_joined, state);
	if (state == CS_STARTING) {
		/* my first confchg: founders joined an empty group together */
		bool founder = nr_list == nr_joined;

		if (founder) {
			is_complete = true;
			vseq = 0;
			nr_members = nr_pending = 0;
		}
		state = CS_REQUESTED;
		if (send_simple(CS_JOIN, founder ? CS_FOUNDER : 0, self_id))
			state = CS_IDLE;
		return;
	}
	if (!is_complete) {
		if (state == CS_WAITING) {
			my_req_events++;
			if (nr_list == 1)
				accept_alone();
		}
		return;
	}
	vseq++;
	if (state == CS_MEMBER && nr_left)
		quorum_catch_up(left, nr_left);
	for (size_t i = 0; i < nr_left; i++) {
		struct cs_id id = { left[i].nodeid, left[i].pid };

		remove_member(id, left[i].reason == CPG_REASON_LEAVE ? "left" : "gone");
	}
	master_duty();
}

static cpg_callbacks_t cpg_callbacks = {
	.cpg_deliver_fn = corosync_deliver,
	.cpg_confchg_fn = corosync_confchg,
};

static void corosync_dispatch(int fd, uint32_t events, void *data)
{
	cs_error_t err = cpg_dispatch(cpg_handle, CS_DISPATCH_ALL);

	if (err != CS_OK && err != CS_ERR_TRY_AGAIN) {
		sd_err("cpg_dispatch: error %d, corosync is gone", err);
		ev_del(fd);
	}
}

/* every COROSYNC_HEARTBEAT_MS: speak, and look for silent members */
static void corosync_beat(int fd, uint32_t events, void *data)
{
	uint64_t expirations, now, bound = (uint64_t)cdrv_heartbeat_timeout_ms() * 1000000;
	int first_alive = -1;

	if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		return;
	cdrv_tick();
	corosync_dispatch(cpg_fd, EPOLLIN, NULL);
	if (state != CS_MEMBER)
		return;
	send_simple(CS_HEARTBEAT, 0, self_id);
	now = sd_now_ns();
	for (int i = 0; i < nr_members && first_alive < 0; i++)
		if (same_id(members[i].id, self_id) || now - members[i].heard_ns < bound)
			first_alive = i;
	if (first_alive < 0 || !same_id(members[first_alive].id, self_id))
		return;
	for (int i = 0; i < nr_members; i++) {
		struct cs_member *m = &members[i];

		if (same_id(m->id, self_id) || m->is_sent || now - m->heard_ns < bound)
			continue;
		sd_warn("member %u/%u silent for %" PRIu64 " ms: evicting", m->id.nodeid, m->id.pid,
			(now - m->heard_ns) / 1000000);
		if (send_simple(CS_EVICT, 0, m->id) == 0)
			m->is_sent = true;
	}
}

/* take votequorum's answer: true when this partition has just lost quorum */
static bool set_quorate(bool is_quorate)
{
	bool lost = quorate && !is_quorate;

	if (quorate != is_quorate)
		sd_notice("quorum %s", is_quorate ? "gained" : "lost");
	quorate = is_quorate;
	return lost;
}

static void corosync_quorum_notify(quorum_handle_t handle, uint32_t is_quorate, uint64_t ring_seq,
				   uint32_t nr_view, uint32_t *view)
{
	sd_debug("quorum notification: %squorate, %u nodes in view", is_quorate ? "" : "not ",
		 nr_view);
	nr_quorum_view = nr_view < COROSYNC_MAX_VIEW ? nr_view : COROSYNC_MAX_VIEW;
	memcpy(quorum_view, view, nr_quorum_view * sizeof(*view));
	if (set_quorate(is_quorate != 0) && state == CS_MEMBER)
		events->quorum_lost();
}

/* votequorum's answer now: the notification may still be on its way */
static bool corosync_is_quorate(void)
{
	int q;

	if (has_quorum_service && quorum_getquorate(quorum_handle, &q) == CS_OK)
		set_quorate(q != 0);
	return quorate;
}

/* at start-up the ring may still be forming: give quorum a moment */
static int wait_quorate(void)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)COROSYNC_INIT_WAIT_MS * 1000000;

	if (corosync_is_quorate())
		return 0;
	sd_info("waiting up to %d ms for this partition to be quorate", COROSYNC_INIT_WAIT_MS);
	while (!corosync_is_quorate() && sd_now_ns() < deadline) {
		if (cdrv_stop_pending())
			return -EINTR;
		usleep(100000);
	}
	return 0;
}

static void corosync_quorum_dispatch(int fd, uint32_t events, void *data)
{
	if (quorum_dispatch(quorum_handle, CS_DISPATCH_ALL) != CS_OK) {
		sd_err("quorum service gone");
		ev_del(fd);
	}
}

static quorum_callbacks_t quorum_callbacks = {
	.quorum_notify_fn = corosync_quorum_notify,
};

static void init_quorum(void)
{
	uint32_t type;
	int q = 1;

	if (quorum_initialize(&quorum_handle, &quorum_callbacks, &type) != CS_OK) {
		sd_warn("no quorum service in corosync: every partition is quorate");
		return;
	}
	if (quorum_getquorate(quorum_handle, &q) != CS_OK ||
	    quorum_trackstart(quorum_handle, CS_TRACK_CHANGES) != CS_OK ||
	    quorum_fd_get(quorum_handle, &quorum_fd) != CS_OK) {
		sd_warn("quorum service unusable: every partition is quorate");
		quorum_finalize(quorum_handle);
		return;
	}
	has_quorum_service = true;
	quorate = q != 0;
	/* the current view, sent when tracking starts */
	quorum_dispatch(quorum_handle, CS_DISPATCH_ALL);
}

static int corosync_init(const char *option, const struct cdrv_events *ev)
{
	events = ev;
	uint64_t deadline = sd_now_ns() + (uint64_t)COROSYNC_INIT_WAIT_MS * 1000000;
	unsigned int nodeid, nr_tries = 0;
	cs_error_t err;

	if (!option)
		option = cdrv_selected_option();
	if (!option)
		option = "sheepdog";
	if (strlen(option) >= CPG_MAX_NAME_LENGTH)
		return -ENAMETOOLONG;
	group.length = (uint32_t)strlen(option) + 1;
	snprintf(group.value, sizeof(group.value), "%s", option);
	while ((err = cpg_initialize(&cpg_handle, &cpg_callbacks)) == CS_ERR_LIBRARY ||
	       err == CS_ERR_TRY_AGAIN) {
		if (sd_now_ns() > deadline)
			break;
		if (cdrv_stop_pending())
			return -EINTR;
		if (!nr_tries++)
			sd_info("corosync not reachable yet: retrying for up to %d ms",
				COROSYNC_INIT_WAIT_MS);
		usleep(100000);
	}
	if (err != CS_OK) {
		sd_err("cannot reach corosync (cpg_initialize: error %d)", err);
		return -ECONNREFUSED;
	}
	if (cpg_fd_get(cpg_handle, &cpg_fd) != CS_OK ||
	    cpg_local_get(cpg_handle, &nodeid) != CS_OK) {
		cpg_finalize(cpg_handle);
		return -EIO;
	}
	self_id.nodeid = nodeid;
	self_id.pid = (uint32_t)getpid();
	init_quorum();
	sd_info("corosync node %u, group %s, %squorate", nodeid, group.value,
		quorate ? "" : "not ");
	return 0;
}

/* dispatch until this process is a member, or the time is up */
static int wait_joined(void)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)COROSYNC_JOIN_WAIT_MS * 1000000;
	struct pollfd pfd = { .fd = cpg_fd, .events = POLLIN };

	while (state != CS_MEMBER) {
		if (state == CS_IDLE || state == CS_EVICTED)
			return -ECOMM;
		if (sd_now_ns() > deadline)
			return -ETIMEDOUT;
		if (cdrv_stop_pending())
			return -EINTR;
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			return -errno;
		if (cpg_dispatch(cpg_handle, CS_DISPATCH_ALL) != CS_OK)
			return -ECOMM;
	}
	return 0;
}

static int corosync_join(const struct sd_node *myself)
{
	struct itimerspec its = {
		.it_interval = { 0, COROSYNC_HEARTBEAT_MS * 1000000L },
		.it_value = { 0, COROSYNC_HEARTBEAT_MS * 1000000L },
	};
	uint64_t deadline;
	cs_error_t err;
	int ret;

	if (state != CS_IDLE)
		return -EINVAL;
	ret = wait_quorate();
	if (ret)
		return ret;
	deadline = sd_now_ns() + (uint64_t)COROSYNC_INIT_WAIT_MS * 1000000;
	self_node = *myself;
	is_complete = false;
	nr_members = nr_pending = 0;
	state = CS_STARTING;
	while ((err = cpg_join(cpg_handle, &group)) == CS_ERR_TRY_AGAIN && sd_now_ns() < deadline &&
	       !cdrv_stop_pending())
		usleep(100000);
	if (err != CS_OK) {
		state = CS_IDLE;
		sd_err("cannot join group %s (cpg_join: error %d)", group.value, err);
		return -ECOMM;
	}
	ret = wait_joined();
	if (ret) {
		if (ret != -EINTR)
			sd_err("no answer to this member's join in group %s: %s", group.value,
			       strerror(-ret));
		goto out_leave;
	}
	beat_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (beat_fd < 0 || timerfd_settime(beat_fd, 0, &its, NULL) < 0) {
		ret = -errno;
		goto out_leave;
	}
	ret = ev_add(cpg_fd, EPOLLIN, corosync_dispatch, NULL);
	if (!ret)
		ret = ev_add(beat_fd, EPOLLIN, corosync_beat, NULL);
	if (!ret && has_quorum_service)
		ret = ev_add(quorum_fd, EPOLLIN, corosync_quorum_dispatch, NULL);
	if (ret)
		goto out_leave;
	return 0;
out_leave:
	ev_del(cpg_fd);
	ev_del(beat_fd);
	if (beat_fd >= 0)
		close(beat_fd);
	beat_fd = -1;
	cpg_leave(cpg_handle, &group);
	state = CS_IDLE;
	return ret;
}

static int corosync_leave(void)
{
	if (state == CS_IDLE)
		return 0;
	state = CS_IDLE;
	is_complete = false;
	ev_del(cpg_fd);
	ev_del(beat_fd);
	ev_del(quorum_fd);
	if (beat_fd >= 0)
		close(beat_fd);
	beat_fd = -1;
	cpg_leave(cpg_handle, &group);
	cpg_finalize(cpg_handle);
	if (has_quorum_service)
		quorum_finalize(quorum_handle);
	has_quorum_service = false;
	return 0;
}

static void corosync_catch_up(void)
{
	if (state == CS_MEMBER)
		corosync_dispatch(cpg_fd, EPOLLIN, NULL);
}

static int corosync_notify(const void *msg, size_t len)
{
	struct cs_msg hdr = { .type = CS_NOTIFY };

	if (state != CS_MEMBER)
		return -ENOTCONN;
	if (len > CDRV_MAX_MSG_LEN)
		return -EMSGSIZE;
	return cs_send(&hdr, msg, len);
}

static const struct cluster_driver cdrv_corosync = {
	.name = "corosync",
	.init = corosync_init,
	.join = corosync_join,
	.leave = corosync_leave,
	.notify = corosync_notify,
	.is_quorate = corosync_is_quorate,
	.catch_up = corosync_catch_up,
};

cdrv_register_driver(cdrv_corosync);
