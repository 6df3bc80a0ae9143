/*
 * A tiny epoll event loop, run by the daemon's main thread only.
 */
#ifndef EVENT_H
#define EVENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

typedef void (*ev_handler_fn)(int fd, uint32_t events, void *data);

/* 0 or -errno */
int ev_init(int max_events);
/* register fd for events (EPOLLIN, EPOLLOUT...): 0 or -errno */
int ev_add(int fd, uint32_t events, ev_handler_fn handler, void *data);
int ev_modify(int fd, uint32_t events);
/* unregister; safe to call from inside a handler for any fd */
void ev_del(int fd);
/*
 * Listen on host:port (sd_listen) and poll each socket for EPOLLIN with
 * handler: the number of sockets put into fds (up to max), or -errno.
 */
int ev_listen(const char *host, int port, ev_handler_fn handler, void *data, int *fds, int max);
/*
 * A timer polled with handler (a CLOCK_MONOTONIC timerfd, non-blocking,
 * not armed: timerfd_settime arms it; the handler reads its count): the
 * fd, or -errno.
 */
int ev_timer(ev_handler_fn handler, void *data);
/* one round: wait up to timeout ms and dispatch; 0 or -errno */
int ev_loop_once(int timeout);
/*
 * After a round that dispatched events, the next round first polls for up
 * to us microseconds without sleeping, when ok (if any) says so at that
 * moment. 0 (the default): never.
 */
void ev_set_busy_poll(unsigned int us, bool (*ok)(void));

#endif
