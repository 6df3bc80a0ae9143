/*
 * Listeners and their connections' caps and timeouts, for every front-end
 * (see listen.h). Main thread only, no lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>

#include "event.h"
#include "fds.h"
#include "listen.h"
#include "logger.h"
#include "net.h"
#include "util.h"

/* accepts per wake-up: a flood of connections does not hold the loop */
#define ACCEPT_BATCH 64
/* a connection closed for room has been open this long at least (ticks: 1 to 2 s) */
#define EVICT_AGE 2

struct listener {
	const struct listen_ops *ops;
	struct listen_limits lim;
	int fds[8], nr_fds;
	int pause_fd;  /* timerfd of the descriptor pause */
	bool paused;   /* out of descriptors: not polled until pause_fd fires */
	bool at_limit; /* at the cap: not polled until a connection closes... */
	bool can_evict; /* ...or one may be closed for room (listen_ops.evictable) */
	bool polled;   /* what the listening sockets are registered for now */
	int nr_conns;
	struct list_head conns;
	/* failed accepts (out of descriptors...) since the last log line */
	uint64_t nr_failed, next_log_ns;
	/* one line a minute each, per listener: the cap reached, a timeout */
	struct sd_log_limit cap_log, turn_log, idle_log, evict_log;
	struct list_node link; /* in every listener */
};

static LIST_HEAD(listeners);
static uint64_t tick; /* seconds since the first listener opened */
static int tick_fd = -1;

uint64_t listen_tick(void)
{
	return tick;
}

int listener_nr_conns(const struct listener *l)
{
	return l->nr_conns;
}

int listen_fd_budget(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > 65536 + LISTEN_FD_RESERVE + FDS_STORE_CACHE_MAX)
		return 65536;
	/* a tiny limit: half of it */
	if (rl.rlim_cur <= 2 * LISTEN_FD_RESERVE)
		return (int)rl.rlim_cur / 2;
	return (int)(rl.rlim_cur - LISTEN_FD_RESERVE - fds_store_cache(rl.rlim_cur));
}

/* poll the listening sockets unless the pause or the cap keeps them off */
static void listener_poll(struct listener *l)
{
	bool on = !l->paused && (!l->at_limit || l->can_evict);

	if (on == l->polled)
		return;
	for (int i = 0; i < l->nr_fds; i++)
		ev_modify(l->fds[i], on ? EPOLLIN : 0);
	l->polled = on;
}

static void pause_end(int fd, uint32_t events, void *data)
{
	struct listener *l = data;
	uint64_t expirations;

	(void)!read(fd, &expirations, sizeof(expirations));
	l->paused = false;
	listener_poll(l);
}

/*
 * An accept failed for want of descriptors or memory (or for a reason
 * that would fail again at once): the pending client stays in the
 * backlog, so stop polling for LISTEN_PAUSE_MS rather than waking up for
 * it again and again (a busy loop at 100% CPU), and log it once per
 * LISTEN_LOG_S with the count.
 */
static void accept_failed(struct listener *l, int err)
{
	struct itimerspec its = { .it_value = { 0, LISTEN_PAUSE_MS * 1000000L } };
	uint64_t now = sd_now_ns();

	l->nr_failed++;
	if (now >= l->next_log_ns) {
		sd_err("%s: accept failed: %s; not accepting for %d ms at a time (%" PRIu64
		       " failed accepts in the last %d s)",
		       l->ops->name, strerror(err), LISTEN_PAUSE_MS, l->nr_failed, LISTEN_LOG_S);
		l->nr_failed = 0;
		l->next_log_ns = now + LISTEN_LOG_S * UINT64_C(1000000000);
	}
	l->paused = true;
	listener_poll(l);
	timerfd_settime(l->pause_fd, 0, &its, NULL);
}

/*
 * The oldest connection of only (NULL: of any listener) that its front-end
 * may close for room (listen_ops.evictable: nothing exchanged that a
 * client would miss) and that had EVICT_AGE ticks to do better; NULL if
 * none. A listener's connections are in the order they came.
 */
static struct listen_conn *find_victim(const struct listener *only)
{
	struct listen_conn *best = NULL;
	struct listener *l;

	list_for_each_entry(l, &listeners, link) {
		struct listen_conn *lc;

		if ((only && l != only) || !l->ops->evictable)
			continue;
		list_for_each_entry(lc, &l->conns, link) {
			if (tick - lc->opened < EVICT_AGE)
				break;
			if (l->ops->evictable(lc)) {
				if (!best || lc->opened < best->opened)
					best = lc;
				break;
			}
		}
	}
	return best;
}

/* close find_victim(only)'s for room (what: for the log); false when there is none */
static bool evict(const struct listener *only, const char *what)
{
	struct listen_conn *lc = find_victim(only);
	struct listener *l;

	if (!lc)
		return false;
	l = lc->l;
	if (SDOG_NOTICE <= sd_log_level)
		sd_log_write_limited(&l->evict_log, 60, SDOG_NOTICE, __func__, __LINE__,
				     "%s: closing its oldest connection that exchanged nothing yet, "
				     "for %s",
				     l->ops->name, what);
	l->ops->timeout(lc, what);
	return true;
}

static void listen_handler(int listen_fd, uint32_t events, void *data)
{
	struct listener *l = data;

	/* at the cap, only while a connection could make room (can_evict) */
	for (int i = 0; i < ACCEPT_BATCH && !l->paused && (!l->at_limit || l->can_evict); i++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		int fd;

		fd = accept4(listen_fd, (struct sockaddr *)&ss, &sslen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			/* out of descriptors: one from such a connection, any listener's */
			if ((errno == EMFILE || errno == ENFILE) && evict(NULL, "a descriptor"))
				continue;
			accept_failed(l, errno);
			return;
		}
		/* refused: closed at once, no slot taken */
		if (l->ops->admit && !l->ops->admit(fd)) {
			close(fd);
			continue;
		}
		/*
		 * At the cap (polled only when a connection could make room):
		 * room from one that exchanged nothing; if it went meanwhile,
		 * this one is closed and the others wait in the backlog
		 */
		if (l->at_limit && !evict(l, "room at its cap")) {
			close(fd);
			l->can_evict = false;
			listener_poll(l);
			return;
		}
		sd_set_nodelay(fd);
		if (l->ops->accept(l, fd, &ss) < 0) {
			close(fd);
			accept_failed(l, ENOMEM);
			return;
		}
	}
}

void listen_conn_add(struct listener *l, struct listen_conn *lc)
{
	lc->l = l;
	if (!l) {
		INIT_LIST_NODE(&lc->link);
		return;
	}
	lc->opened = tick;
	list_add_tail(&lc->link, &l->conns);
	if (++l->nr_conns < l->lim.max_conns)
		return;
	if (SDOG_WARNING <= sd_log_level)
		sd_log_write_limited(&l->cap_log, 60, SDOG_WARNING, __func__, __LINE__,
				     "%s: %d connections: not accepting more until one closes (%s)",
				     l->ops->name, l->nr_conns, l->lim.cap_option);
	l->at_limit = true;
	listener_poll(l);
}

void listen_conn_del(struct listen_conn *lc)
{
	struct listener *l = lc->l;

	if (!l)
		return;
	list_del(&lc->link);
	lc->l = NULL;
	l->nr_conns--;
	if (l->at_limit && l->nr_conns < l->lim.max_conns) {
		l->at_limit = false;
		listener_poll(l);
	}
}

/* once a second: close the connections whose client took too long */
static void listen_tick_handler(int fd, uint32_t events, void *data)
{
	struct listener *l;
	uint64_t expirations = 0;

	(void)!read(fd, &expirations, sizeof(expirations));
	tick += expirations ? expirations : 1;
	list_for_each_entry(l, &listeners, link) {
		struct listen_conn *lc, *next;

		list_for_each_entry_safe(lc, next, &l->conns, link) {
			uint64_t since = tick;
			enum listen_state st = l->ops->state(lc, &since);
			struct sd_log_limit *rl = &l->turn_log;
			const char *why = NULL;

			if (st == LISTEN_TURN && l->lim.turn_timeout &&
			    tick - since > (uint64_t)l->lim.turn_timeout) {
				why = l->lim.turn_what;
			} else if (st == LISTEN_IDLE && l->lim.idle_timeout &&
				   tick - since > (uint64_t)l->lim.idle_timeout) {
				why = l->lim.idle_what ? l->lim.idle_what
						       : "an idle connection (--idle-timeout)";
				rl = &l->idle_log;
			}
			if (!why)
				continue;
			if (SDOG_INFO <= sd_log_level)
				sd_log_write_limited(rl, 60, SDOG_INFO, __func__, __LINE__,
						     "%s: closing %s", l->ops->name, why);
			l->ops->timeout(lc, why);
		}
		/* at the cap: poll again once a connection may be closed for room */
		if (l->at_limit && !l->can_evict && find_victim(l)) {
			l->can_evict = true;
			listener_poll(l);
		}
	}
}

struct listener *listener_open(const struct listen_ops *ops, const struct listen_limits *lim,
			       const char *addr, int port)
{
	struct itimerspec one_s = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	struct listener *l = calloc(1, sizeof(*l));
	int ret;

	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l->ops = ops;
	l->lim = *lim;
	if (l->lim.max_conns < 1)
		l->lim.max_conns = 1;
	INIT_LIST_HEAD(&l->conns);
	/* made now: once descriptors run out, they could not be made */
	if (tick_fd < 0) {
		tick_fd = ev_timer(listen_tick_handler, NULL);
		if (tick_fd < 0) {
			ret = tick_fd;
			goto out_free;
		}
		timerfd_settime(tick_fd, 0, &one_s, NULL);
	}
	l->pause_fd = ev_timer(pause_end, l);
	if (l->pause_fd < 0) {
		ret = l->pause_fd;
		goto out_free;
	}
	ret = ev_listen(addr, port, listen_handler, l, l->fds, ARRAY_SIZE(l->fds));
	if (ret < 0)
		goto out_timer;
	l->nr_fds = ret;
	l->polled = true;
	list_add_tail(&l->link, &listeners);
	return l;
out_timer:
	ev_del(l->pause_fd);
	close(l->pause_fd);
out_free:
	free(l);
	errno = -ret;
	return NULL;
}
