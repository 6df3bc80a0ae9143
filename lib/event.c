/*
 * The event loop: epoll behind a few functions. Handlers are kept in a
 * small table indexed by fd; ev_del() inside a handler is safe because a
 * dispatch looks the fd up again before calling.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/timerfd.h>

#include "event.h"
#include "net.h"
#include "util.h"

struct ev_slot {
	ev_handler_fn handler;
	void *data;
	uint64_t gen;
};

static int epfd = -1;
/* ev_set_busy_poll: how long to poll before sleeping, and whether now */
static unsigned int poll_us;
static bool (*poll_ok)(void);
static bool last_busy; /* the last round dispatched something */
static int nr_events;
static struct epoll_event *events;
static struct ev_slot *slots;
static int nr_slots;
static uint64_t next_gen = 1;

int ev_init(int max_events)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	nr_events = max_events;
	events = calloc(max_events, sizeof(*events));
	if (!events)
		return -ENOMEM;
	return 0;
}

static int grow_slots(int fd)
{
	if (fd < nr_slots)
		return 0;
	int n = nr_slots ? nr_slots : 64;
	while (n <= fd)
		n *= 2;
	struct ev_slot *s = realloc(slots, n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(s + nr_slots, 0, (n - nr_slots) * sizeof(*s));
	slots = s;
	nr_slots = n;
	return 0;
}

int ev_add(int fd, uint32_t ev, ev_handler_fn handler, void *data)
{
	struct epoll_event e = { 0 };
	int ret;

	if (fd < 0)
		return -EBADF;
	ret = grow_slots(fd);
	if (ret)
		return ret;
	if (slots[fd].handler)
		return -EEXIST; /* keep the registered handler */
	slots[fd].handler = handler;
	slots[fd].data = data;
	slots[fd].gen = next_gen++;
	e.events = ev;
	e.data.u64 = ((uint64_t)slots[fd].gen << 32) | (uint32_t)fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		slots[fd].handler = NULL;
		return -errno;
	}
	return 0;
}

int ev_modify(int fd, uint32_t ev)
{
	struct epoll_event e = { 0 };

	if (fd >= nr_slots || !slots[fd].handler)
		return -ENOENT;
	e.events = ev;
	e.data.u64 = ((uint64_t)slots[fd].gen << 32) | (uint32_t)fd;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e) < 0)
		return -errno;
	return 0;
}

void ev_del(int fd)
{
	if (fd < 0 || fd >= nr_slots || !slots[fd].handler)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	slots[fd].handler = NULL;
	slots[fd].data = NULL;
}

void ev_set_busy_poll(unsigned int us, bool (*ok)(void))
{
	poll_us = us;
	poll_ok = ok;
}

int ev_loop_once(int timeout)
{
	int n = 0;

	/*
	 * Busy: the next event (a client's next request) is likely to come
	 * soon. Polling for it keeps this thread on its CPU, where waking it
	 * from sleep costs a reschedule, and on a VM an interrupt to a halted
	 * vCPU (tens of microseconds here).
	 */
	if (poll_us && last_busy && timeout && (!poll_ok || poll_ok())) {
		uint64_t until = sd_now_ns() + (uint64_t)poll_us * 1000;

		do
			n = epoll_wait(epfd, events, nr_events, 0);
		while (n == 0 && sd_now_ns() < until);
	}
	if (n == 0)
		n = epoll_wait(epfd, events, nr_events, timeout);
	last_busy = n > 0;
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)events[i].data.u64;
		uint32_t gen = (uint32_t)(events[i].data.u64 >> 32);

		/* skip events of an fd deleted (or reused) earlier in this round */
		if (fd >= nr_slots || !slots[fd].handler || (uint32_t)slots[fd].gen != gen)
			continue;
		slots[fd].handler(fd, events[i].events, slots[fd].data);
	}
	return 0;
}

int ev_timer(ev_handler_fn handler, void *data)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = ev_add(fd, EPOLLIN, handler, data);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int ev_listen(const char *host, int port, ev_handler_fn handler, void *data, int *fds, int max)
{
	int nr = sd_listen(host, port, fds, max);

	for (int i = 0; i < nr; i++) {
		int ret;

		sd_set_nonblocking(fds[i]);
		ret = ev_add(fds[i], EPOLLIN, handler, data);
		if (ret)
			return ret;
	}
	return nr;
}
