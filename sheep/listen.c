/*
 * The listening sockets of the sheepdog protocol (clients and peers): each
 * connection accepted is handed to request.c. Accepting pauses, with the
 * next clients left in the backlog and nothing spinning, while the process
 * is out of descriptors (ACCEPT_PAUSE_MS at a time) and while request.c
 * holds as many connections as it may (until one closes).
 */
#include <errno.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include "event.h"
#include "net.h"
#include "sheep_priv.h"

#define ACCEPT_PAUSE_MS 100

static int listen_fds[8], nr_listen_fds;
static int accept_timer_fd = -1;
static bool accept_timer_armed; /* the descriptor pause */
static bool at_limit;		/* the connection limit */

static void accept_set(bool on)
{
	/* the descriptor pause and the connection limit each keep it off */
	if (on && (accept_timer_armed || at_limit))
		return;
	for (int i = 0; i < nr_listen_fds; i++)
		ev_modify(listen_fds[i], on ? EPOLLIN : 0);
}

static void accept_resume(int fd, uint32_t events, void *data)
{
	uint64_t expirations;

	(void)!read(fd, &expirations, sizeof(expirations));
	accept_timer_armed = false;
	accept_set(true);
}

/* request.c: a connection closed, below the limit again */
static void accept_room(void)
{
	at_limit = false;
	accept_set(true);
}

/*
 * Out of descriptors (or memory): the pending connection stays in the
 * backlog, so stop polling the listening sockets for ACCEPT_PAUSE_MS
 * instead of waking up for it again and again (a busy loop at 100% CPU).
 */
static void accept_pause(void)
{
	struct itimerspec its = { .it_value = { 0, ACCEPT_PAUSE_MS * 1000000L } };

	accept_set(false);
	accept_timer_armed = true;
	timerfd_settime(accept_timer_fd, 0, &its, NULL);
}

static void listen_handler(int listen_fd, uint32_t events, void *data)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		int fd = accept4(listen_fd, (struct sockaddr *)&ss, &sslen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		int ret;

		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			sd_log_ratelimited(60, SDOG_ERR,
					   "accept failed: %m; not accepting for %d ms",
					   ACCEPT_PAUSE_MS);
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				accept_pause();
			return;
		}
		sd_set_nodelay(fd);
		ret = request_accept(fd, &ss);
		if (ret < 0) {
			close(fd);
			continue;
		}
		if (ret > 0) {
			at_limit = true;
			accept_set(false);
			return;
		}
	}
}

int create_listen_port(const char *bind_addr, int port)
{
	int ret;

	/* made now: once descriptors run out, it could not be made */
	accept_timer_fd = ev_timer(accept_resume, NULL);
	if (accept_timer_fd < 0)
		return accept_timer_fd;
	ret = request_init(accept_room);
	if (ret)
		return ret;
	ret = ev_listen(bind_addr, port, listen_handler, NULL, listen_fds, ARRAY_SIZE(listen_fds));
	if (ret < 0)
		return ret;
	nr_listen_fds = ret;
	return 0;
}
