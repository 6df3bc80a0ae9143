/*
 * Object I/O on the replicas of an object (gateway.c): what every front
 * end and the daemon's own code use to read and write objects, whichever
 * node holds their copies. Callers resolve the object's VDI once where the
 * request entered (its attributes, struct vdi_attr) and pass them; attr
 * NULL is the daemon's own I/O: the VDI's copies as the table knows them
 * (or the cluster's), and no client rule applies.
 *
 * Rules that hold for every caller, here and nowhere else:
 * - a write succeeds only when every replica acknowledged it; with fewer
 *   live nodes than copies it fails with SD_RES_HALT;
 * - a snapshot's data and data map are frozen (SD_RES_READONLY) when attr
 *   says the VDI is one;
 * - a write that zeroes entries of a VDI's own data map removes the
 *   objects they named (a discard), before it returns.
 *
 * The data objects of an erasure-coded VDI (its copy_policy names D:P)
 * are strips on D + P nodes (gateway_ec.c): the same calls, the same
 * rules, with D + P in place of the copies.
 *
 * Threads: any worker (the calls block on peers and disks), but for
 * gateway_read_cached, on the main thread. Results are SD_RES_*.
 */
#ifndef SHEEP_GATEWAY_H
#define SHEEP_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>

struct vdi_attr;

/* gateway_write's and gateway_create's flags */
#define GW_SYNC 0x1 /* durable on every replica before the answer */

int gateway_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, const struct vdi_attr *attr);
/*
 * Main thread, without blocking: true when this node's own copy (the
 * replica a read tries first) served the read from memory; false, with
 * nothing done, when the read must go to a worker (gateway_read).
 */
bool gateway_read_cached(uint64_t oid, void *buf, uint32_t len, uint64_t off,
			 const struct vdi_attr *attr);
int gateway_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, unsigned int flags,
		  const struct vdi_attr *attr);
/*
 * Create oid with len bytes of buf at off (zeros elsewhere); with cow_oid
 * (a data object of an ancestor, same index), from a copy of that object
 * with the write applied (SD_RES_BASE_VDI_READ when it cannot be read).
 */
int gateway_create(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len, uint64_t off,
		   unsigned int flags, const struct vdi_attr *attr);
int gateway_remove(uint64_t oid, const struct vdi_attr *attr);
/*
 * Flush here and on every other node of the ring, all at once: the VDI's
 * objects written without sync since its last flush (oid names the VDI),
 * not every other tenant's dirty pages.
 */
int gateway_flush(uint64_t oid);

#endif
