/*
 * What request.c (a connection's reading, dispatch, listeners) and
 * request_reply.c (a request's reply and end, a connection's close) share:
 * the connection. request_reply.c uses nothing of request.c (tests/unit/
 * layers.sh). Nothing outside these two includes this header.
 */
#ifndef SHEEP_REQUEST_PRIV_H
#define SHEEP_REQUEST_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal_proto.h"
#include "list.h"
#include "listen.h"
#include "payload.h"
#include "request.h"
#include "stat.h"

/* requests in flight on one connection before it stops reading more */
#define MAX_INFLIGHT 256
/*
 * Reply payload one connection may hold (the buffers of its reads in
 * flight and of its replies not sent yet) before it stops reading more
 * requests, whatever the bound: a client that pipelines reads and never
 * reads the replies pins this much (and one request more), not its whole
 * pipeline. Below it, its share of the pool (payload.h) may stop it first.
 */
#define MAX_REPLY_BYTES (UINT64_C(16) << 20)

struct client_info {
	int fd;
	uint64_t id; /* unique among this daemon's connections: what a lock is bound to */
	bool internal; /* it spoke the internal protocol: a sheep's or collie's, never QEMU's */
	uint32_t io_vid; /* the VDI of its last object request (client_lock_io) */
	int refcnt; /* the connection itself + every request not yet freed */
	int nr_inflight;
	bool dead;
	bool close_after_tx;
	bool rx_paused;
	bool mem_wait; /* rx_req waits for payload memory (a payload waiter) */
	struct payload_waiter mem_waiter;
	/*
	 * The payload its requests hold, in flight or replies not sent yet
	 * (payload.h: a connection whose replies are not read reaches its
	 * share and stops being read, alone)
	 */
	struct payload_share share;
	uint64_t reply_bytes; /* of it, read buffers (MAX_REPLY_BYTES) */
	uint32_t events;
	uint8_t addr[16]; /* the client's address, IPv6 or v4-mapped */

	struct sd_req hdr;
	uint32_t hdr_done;
	struct request *rx_req;
	uint32_t rx_done;

	struct list_head tx_queue;
	uint32_t tx_done;
	/*
	 * A worker may send a reply without payload itself (reply_early):
	 * tx_lock orders its sendmsg with request_flush_tx's and with the close of fd.
	 * What a worker's short send left of its reply is in tx_rest, sent by
	 * request_flush_tx before the queue. Under tx_lock: fd's close and dead (the
	 * main thread writes them), tx_rest, tx_rest_len and tx_queue's
	 * emptiness (for the worker's read; only the main thread changes it).
	 */
	pthread_mutex_t tx_lock;
	uint8_t tx_rest[sizeof(struct sd_rsp)];
	uint32_t tx_rest_len;
	bool tx_want_out; /* request_flush_tx left something to send: poll for EPOLLOUT */

	struct listen_conn lc; /* the listener's: its slot and its timeouts */
	struct list_node link; /* in all_clients: the lock bindings' connections */
	uint64_t rx_start;     /* listen_tick() when the request being read began */
	uint64_t last_active;  /* listen_tick() of the last byte read or reply sent */
	/* the statistics' entry of the VDI served last */
	struct stat_vdi_cache stat_vdi;
};

/*
 * request_reply.c, on the main thread: a free request, its statistics
 * tracked (NULL: no memory), and the end of one, which gives its payload
 * back and drops its connection's reference
 */
struct request *request_get(void);
void request_free(struct request *req);
/* a reference to ci dropped (free at the last) */
void request_client_put(struct client_info *ci);
/* close ci's socket and free what it holds; it stays until its last reference */
void request_client_close(struct client_info *ci);
/* the events ci is polled for, from its state */
void request_update_events(struct client_info *ci);
/* send queued replies until the socket is full; 0, or -1 if closed */
int request_flush_tx(struct client_info *ci);
#ifdef SD_TEST_HOOKS
/* SD_TEST_SHORT_REPLIES: a worker sends this much of its reply (0: all) */
extern size_t request_short_reply_len;
#endif

#endif
