/*
 * Connections and the life of a request (request.c, request_reply.c): the
 * request a connection read, and what the op handlers fill.
 */
#ifndef SHEEP_REQUEST_H
#define SHEEP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "internal_proto.h"
#include "list.h"
#include "stat.h"
#include "work.h"

struct client_info;

/* what ordered.c keeps of an ordered op while it travels the cluster's order */
struct ordered_state {
	bool remote;	/* delivered from another node's broadcast: apply, write no object */
	int nr_members; /* cluster size when the op was delivered */
	int nr_storing; /* and how many of them store objects (not gateways) */
	uint64_t token; /* names the request in its broadcast */
	struct request *waiter; /* a client request answered once this one is applied */
	/*
	 * The client on whose behalf (LOCK_VDI, RELEASE_VDI): its front end
	 * fills addr and conn, ordered.c the node (the one it came through)
	 */
	struct sd_lock_owner owner;
	/* UNLOCK_VDI: the members at the op's place in the order (ordered.c's copy) */
	struct sd_node *members;
	/*
	 * What an op applied on the apply thread leaves to the main thread
	 * (a front end's state is the main thread's): ordered.c calls after
	 * there, on every node, before the request is answered or freed
	 */
	void (*after)(struct request *req);
	uint32_t after_vid[2];
	struct sd_lock_owner after_owner;
};

/* one request from the time its header arrives until its reply is sent */
struct request {
	/* first: new_request clears what follows, not this (it outlives reuse) */
	struct stat_track stat_track;
	struct sd_req rq;
	struct sd_rsp rp;
	void *data;	    /* payload in (writes) and out (reads) */
	uint32_t data_cap;  /* bytes allocated at data (>= rq.data_length); replies
			       never carry more than rq.data_length */
	uint32_t mem_held;  /* of data_cap, counted against --max-inflight-bytes */
	int mem_pool;	    /* the pool it is counted in (enum payload_pool, payload.h) */
	const struct sd_op_template *op;
	struct client_info *ci;
	struct work work;
	struct list_node node; /* in the client's reply queue, or ordered.c's pending list */
	union {
		uint64_t start;	      /* stat_clock() when whole and dispatched: its await starts */
		struct stat_req stat; /* in flight for the statistics (stat.c): begin is start */
	};
	struct ordered_state ord; /* ordered ops only */
	/* set for a request the daemon made itself (NBD's locks): called instead of a reply */
	void (*done)(struct request *req);
	bool replied; /* its worker sent the reply (request.c, reply_early) */
	/* the tracer's request id (trace/trace_req.h): made here, or a peer's */
	uint64_t trace_id;
	uint16_t trace_flags;
};
_Static_assert(offsetof(struct request, start) == offsetof(struct request, stat.begin),
	       "a request's start is its statistics' begin");

/* the limits of the connections (main, before request_listen) */
struct request_config {
	int max_connections; /* --max-connections: connections at once (> 0) */
	int client_timeout;  /* --client-timeout: s a request may take to arrive (0: none) */
	int idle_timeout;    /* --idle-timeout: s a connection may sit idle (0: forever) */
};
void request_configure(const struct request_config *cfg);
/*
 * Serve the sheepdog protocol (clients and peers) on bind_addr:port, with
 * request_configure's limits (listen.h): 0 or -errno.
 */
int request_listen(const char *bind_addr, int port);
/*
 * The same on the io address (sheep --io-addr), after request_listen: the
 * peers' replica traffic comes there. 0 or -errno.
 */
int request_listen_io(const char *addr, int port);
void request_done(struct request *req); /* from work done: reply and free */
/*
 * On the worker that ran req's op: send a reply without payload at once
 * when nothing is queued before it on its connection (see request.c)
 */
void request_reply_early(struct request *req);
/* the join is done: queue the client requests that waited for it */
void request_join_done(void);

/* the connections, for request_lock.c: */
/* the open connections of clients at addr (no sheep's, no collie's), into conns: how many */
int request_conns_at(const uint8_t addr[16], uint64_t *conns, int max);
/* the address of req's client (NULL: a request the daemon made) */
const uint8_t *request_client_addr(const struct request *req);
/* close the open connections among ids[n]: how many */
int request_close_conns(const uint64_t *ids, int n);

/* Its clients' locks (request_lock.c): */
/* before request_listen (main): a gone client's lock is released through the order */
void request_lock_init(void);
/* ordered.c's answer: request_done, once a client's lock is bound or unbound here */
void request_ordered_done(struct request *req);
/* an operator took vid's lock from owner, a client of this node: disconnect it */
struct sd_lock_owner;
void request_lock_broken(uint32_t vid, const struct sd_lock_owner *owner);

#endif
