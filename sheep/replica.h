/*
 * This node's copy of an object (replica.c).
 */
#ifndef SHEEP_REPLICA_H
#define SHEEP_REPLICA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "group.h"

/*
 * replica.c: this node's copy of an object. The lock of oid (shared by
 * several objects) orders its creates and its fetch.
 */
pthread_mutex_t *replica_oid_lock(uint64_t oid);
/* make durable on this node what a VDI (oid names it; 0: every VDI) wrote without sync */
int replica_flush(uint64_t oid);
/*
 * Create oid from the len bytes of buf at off (zeros elsewhere), or, when
 * it exists here already, write only the client's range [wr_off, wr_off +
 * wr_len), which lies inside the payload's. SD_RES_*.
 */
int replica_create_and_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off,
			     uint64_t wr_off, uint32_t wr_len, bool sync);
/*
 * Write to oid here; when this node should hold it but does not yet (the
 * epoch changed, recovery has not fetched it), fetch it first, under its
 * lock across the fetch and the write. SD_RES_*.
 */
int replica_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync);
/*
 * Fetch oid whole and store it here, the caller holding its lock, unless
 * it is here already: from the live copies of the nodes in live (a bit per
 * node of er), or only when no node has a live copy, a stale copy of the
 * nodes in stale, or this node's own. Never an object of a deleted VDI.
 * SD_RES_SUCCESS, SD_RES_NO_OBJ when nobody has it, or another SD_RES_*.
 */
int replica_fetch(const struct epoch_ring *er, uint64_t oid, uint64_t live, uint64_t stale,
		  bool sync);
/*
 * Remove oid here, under its lock: a fetch of it (recovery's, or a write's)
 * is done before or starts after. SD_RES_SUCCESS, or SD_RES_NO_OBJ.
 */
int replica_remove(uint64_t oid);
/* the size of oid's object: the inode's, or its VDI's (the cluster's when unknown) */
uint32_t replica_object_size(uint64_t oid);
/* news for the layer above: an inode fetched (the VDI may be new here); NULL: none */
struct sd_inode_header;
void replica_set_inode_fetched(void (*fn)(uint32_t vid, const struct sd_inode_header *h));

#endif
