/*
 * listen.c: the daemon's listening sockets and the connections they
 * accepted, for every front-end (the sheepdog port, NBD, /metrics). Main
 * thread only.
 *
 * A listener accepts up to its connection cap. At the cap, a new
 * connection takes the place of the oldest one that exchanged nothing yet
 * (listen_ops.evictable; open for a second at least); when there is none,
 * the listener stops polling its sockets until one of its connections
 * closes or becomes such: the next clients wait in the kernel's backlog,
 * nothing spins. A connection that its admit callback refuses (access
 * control) is closed at once and takes no slot. When the process is out of
 * descriptors (EMFILE, ENFILE), the oldest connection of any listener that
 * exchanged nothing yet gives its descriptor; when there is none (or out
 * of memory), the listener stops accepting for LISTEN_PAUSE_MS at a time,
 * the pending clients left in the backlog, and logs it at most once per
 * LISTEN_LOG_S with the number of accepts that failed.
 *
 * Once a second every connection is asked its state (listen_ops.state): a
 * connection whose client's turn (a request, a handshake message, an HTTP
 * request: partly read, or awaited) began more than turn_timeout seconds
 * ago, or idle for more than idle_timeout seconds, is closed through the
 * listener's timeout callback. 0: that timeout is off.
 */
#ifndef SHEEP_LISTEN_H
#define SHEEP_LISTEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "list.h"

#define LISTEN_PAUSE_MS 100
#define LISTEN_LOG_S 10

struct listener;

/* a connection's link to its listener, inside the front-end's connection */
struct listen_conn {
	struct list_node link;
	struct listener *l; /* NULL: not counted (a fuzz harness's connection) */
	uint64_t opened;    /* listen_tick() when it was added */
};

enum listen_state {
	LISTEN_IDLE, /* nothing in flight, nothing partly read; since: its last activity */
	LISTEN_TURN, /* the client's turn: a message partly read or awaited; since: its start */
	LISTEN_BUSY, /* the daemon's turn (requests in flight, replies to send): no timeout */
};

struct listen_ops {
	const char *name; /* for log lines: "sheepdog", "nbd", "metrics" */
	/* optional: may the client of fd connect? false: fd is closed at once (it logs) */
	bool (*admit)(int fd);
	/*
	 * Set up a connection on fd (non-blocking) from ss and listen_conn_add
	 * it: 0, or -errno (the listener closes fd).
	 */
	int (*accept)(struct listener *l, int fd, const struct sockaddr_storage *ss);
	/* where lc stands, and since which listen_tick() */
	enum listen_state (*state)(struct listen_conn *lc, uint64_t *since);
	/* close lc's connection, whose client took too long, or for room (why: for the log) */
	void (*timeout)(struct listen_conn *lc, const char *why);
	/*
	 * Optional: may lc be closed to make room for a new connection? When
	 * it exchanged nothing its client would miss (an NBD handshake not
	 * done, an HTTP request not whole or already answered).
	 */
	bool (*evictable)(struct listen_conn *lc);
};

struct listen_limits {
	int max_conns;		/* the connection cap (> 0) */
	const char *cap_option; /* for the log: the option that sets it */
	int turn_timeout;	/* s a client's turn may take (0: no limit) */
	int idle_timeout;	/* s a connection may stay idle (0: no limit) */
	/* for the log: "closing TURN_WHAT" ("a request that did not arrive in time") */
	const char *turn_what;
	/* for the log: "closing IDLE_WHAT" (NULL: "an idle connection (--idle-timeout)") */
	const char *idle_what;
};

/*
 * Listen on addr:port (NULL or "": every address) for ops, with lim
 * (copied): the listener, or NULL with errno set.
 */
struct listener *listener_open(const struct listen_ops *ops, const struct listen_limits *lim,
			       const char *addr, int port);
/* a connection accepted by l (ops->accept): counted, and looked at once a second */
void listen_conn_add(struct listener *l, struct listen_conn *lc);
/* lc's connection closed: its slot is free (no-op for a connection never added) */
void listen_conn_del(struct listen_conn *lc);
/* seconds since the first listener opened (the time base of since) */
uint64_t listen_tick(void);
int listener_nr_conns(const struct listener *l);
/*
 * The descriptors a connection cap may use without starving the rest of
 * the process (fds.h): the descriptor limit less LISTEN_FD_RESERVE (the
 * peers' connections, the log, the store's opens past its cache) and the
 * store's cache of open files, at most 65536.
 */
#define LISTEN_FD_RESERVE 256
int listen_fd_budget(void);

#endif
