/*
 * payload.c: the payload memory of every front-end (the sheepdog
 * protocol's connections and NBD's), main thread only.
 *
 * One bound, --max-inflight-bytes (payload_set_max), split into two pools:
 * the client pool, for the VDI protocol's requests and NBD's commands, and
 * a reserve of PAYLOAD_RESERVE_DIV-th of the bound for the admin ops and the
 * ops members send each other that are counted (a node list, the
 * statistics, the tracer's, a joining node's): client payload never makes
 * those wait. Peer object I/O and recovery's fetches are not counted (a
 * gateway holds its client's payload while it waits on its peers: a peer
 * that waited for it would deadlock them).
 *
 * Fair shares: each connection's holding in a pool is its payload_share.
 * A request of n bytes (its buffer's, counted whole) is admitted when its
 * pool holds nothing (one holder always goes through, however large), or
 * when it fits and, after it, the pool's free payload is at least what the
 * connection holds: no connection ever holds more than it leaves to the
 * others. However many connections hold payload they do not free (a client
 * that pipelines reads and never reads the replies), the pool is never
 * all taken, and a connection that holds nothing, asking for at most half
 * of what the last admitted one holds, is admitted (a 4 KiB read past
 * connections that hold 4 MiB replies).
 *
 * A request that is not admitted waits, its header read, with its
 * connection out of the poll set (TCP then holds that client back, and
 * only it): the caller parks a waiter with payload_wait. The event loop
 * offers each waiter, in order, the payload freed since (payload_put):
 * resume returns false, with nothing changed, when its request is still
 * not admitted, and the next waiter is tried (a connection held back by
 * its own share does not hold back the others).
 */
#ifndef SHEEP_PAYLOAD_H
#define SHEEP_PAYLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "list.h"

#define PAYLOAD_RESERVE_DIV 8

enum payload_pool {
	PAYLOAD_NONE = -1, /* not counted */
	PAYLOAD_CLIENT,
	PAYLOAD_RESERVE,
	PAYLOAD_NR_POOLS,
};

/* what one connection holds, per pool (zeroed with the connection) */
struct payload_share {
	uint64_t held[PAYLOAD_NR_POOLS];
};

struct payload_waiter {
	struct list_node node;
	bool (*resume)(struct payload_waiter *w);
};

int payload_init(void);
void payload_set_max(uint64_t bytes);
/* a pool's size and what it holds now */
uint64_t payload_pool_size(enum payload_pool pool);
uint64_t payload_pool_held(enum payload_pool pool);
/*
 * A buffer of at least len bytes (*cap of them, all counted against pool
 * and s; from a cache of free buffers, page-aligned): 0, -ENOMEM, or
 * -EAGAIN when it is not admitted (nothing allocated).
 */
int payload_get(struct payload_share *s, enum payload_pool pool, uint32_t len, void **buf,
		uint32_t *cap);
void payload_put(struct payload_share *s, enum payload_pool pool, void *buf, uint32_t cap);
void payload_wait(struct payload_waiter *w);
/* offer the waiters what was freed, now (the event loop does it after a payload_put) */
void payload_resume(void);
/* the same buffers, not counted */
void *payload_buf_get(uint32_t len, uint32_t *cap);
void payload_buf_put(void *p, uint32_t cap);

/*
 * A request's payload (rq.data_length bytes), counted against req->mem_pool
 * (PAYLOAD_NONE: not counted) and s, its connection's share, and then a
 * read's buffer (its reply's) also in *reply_bytes, its connection's:
 * payload_req_alloc gives 0, -ENOMEM, or -EAGAIN (not admitted: see
 * payload_wait). payload_req_free gives it back; payload_req_none leaves
 * the request an empty buffer (handlers may memcpy 0 bytes).
 * payload_req_pool: the pool of request rq from a client at addr.
 */
struct request;
struct sd_req;
int payload_req_pool(const struct sd_req *rq, const uint8_t addr[16]);
int payload_req_alloc(struct request *req, struct payload_share *s, uint64_t *reply_bytes);
void payload_req_free(struct request *req, struct payload_share *s, uint64_t *reply_bytes);
void payload_req_none(struct request *req);

#endif
