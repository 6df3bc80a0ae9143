/*
 * The VDI locks that clients of the sheepdog protocol took through this
 * node, bound to their connections (client_lock.c). Main thread only;
 * the request files call it (request.c, request_lock.c, request_reply.c:
 * a connection's close), and it reports a client gone through the release
 * callback (request_lock.c broadcasts the release).
 */
#ifndef SHEEP_CLIENT_LOCK_H
#define SHEEP_CLIENT_LOCK_H

#include <stdbool.h>
#include <stdint.h>

/*
 * release(vid, addr, token, name): the client at addr that locked vid
 * (called name) with that token is gone
 */
void client_lock_init(void (*release)(uint32_t vid, const uint8_t addr[16], uint64_t token,
				      const char *name));
/*
 * A client at addr locked vid (called name) with token (the id of the
 * connection that asked): bind it to conns[nr], its open connections
 */
void client_lock_taken(uint32_t vid, const uint8_t addr[16], uint64_t token, const char *name,
		       const uint64_t *conns, int nr);
/*
 * the token of the lock that a client at addr holds on vid (0: none); a
 * RELEASE_VDI names its VDI by vid (base_vdi_id): the working VDI and its
 * snapshots share one name
 */
uint64_t client_lock_token(uint32_t vid, const uint8_t addr[16]);
/* connection conn from addr does I/O on vid: the lock is bound to it (cheap when none is) */
void client_lock_io(uint64_t conn, const uint8_t addr[16], uint32_t vid);
/* a snapshot moved the lock of from to to, the new working VDI: the binding follows */
void client_lock_moved(uint32_t from, uint32_t to);
/* the lock of vid went (its holder released it, or an operator took it away) */
void client_lock_dropped(uint32_t vid);
/* the connections vid's lock is bound to, into conns (up to max): how many */
int client_lock_conns(uint32_t vid, uint64_t *conns, int max);
/* connection conn closed: a lock bound to it alone is released */
void client_lock_closed(uint64_t conn);

#endif
