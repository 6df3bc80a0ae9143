/*
 * The gateway's I/O on erasure-coded data objects (gateway_ec.c), called by
 * gateway.c for the data objects of a VDI whose copy_policy names D:P; the
 * caller checked the range against the object size (1 << shift). SD_RES_*.
 */
#ifndef SHEEP_GATEWAY_EC_H
#define SHEEP_GATEWAY_EC_H

#include <stdbool.h>
#include <stdint.h>

int gateway_ec_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, int d, int p,
		    uint8_t shift);
/* reads a whole object (the COW source of a create): gateway.c's, passed down */
typedef int (*gw_ec_read_fn)(uint64_t oid, void *buf, uint32_t len);
/*
 * Read-modify-write of the stripe under the object's lock. create: an
 * object that does not exist starts as zeros, or with cow_oid as a copy of
 * that object (read with read_src); without create, SD_RES_NO_OBJ.
 */
int gateway_ec_write(uint64_t oid, uint64_t cow_oid, gw_ec_read_fn read_src, const void *buf,
		     uint32_t len, uint64_t off, bool create, bool sync, int d, int p, uint8_t shift);
/*
 * Recovery: strip soid (ec_strip_oid) of an object of a VDI known here,
 * rebuilt from D other strips wherever they are, into buf (the object's
 * size over D bytes, *len). SD_RES_*: SD_RES_NO_OBJ when no strip exists.
 */
int gateway_ec_rebuild_strip(uint64_t soid, void *buf, uint32_t *len);

#endif
