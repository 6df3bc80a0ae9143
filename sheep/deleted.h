/*
 * The objects of deleted VDIs (deleted.c).
 */
#ifndef SHEEP_DELETED_H
#define SHEEP_DELETED_H

#include <stdbool.h>
#include <stdint.h>
#include "internal_proto.h"

struct request;

/*
 * deleted.c: the objects of deleted VDIs, which nothing may bring back.
 * A record per deleted VDI, kept in DIR/deleted on every node and learned
 * by a node that joins.
 */
/* read DIR/deleted, the records of this node: 0 or -errno */
int deleted_init(const char *dir);
/*
 * vid was deleted; the indexes set in shared (a bit per index) are still
 * read. For a vid recorded already, its kept indexes become those that
 * shared sets too (they only shrink). 0 or -errno.
 */
int deleted_add(uint32_t vid, const uint8_t *shared);
/* the indexes that vid's record keeps, into kept (MAX_DATA_OBJS bits): how many (0: none, or no record) */
uint32_t deleted_kept(uint32_t vid, uint8_t *kept);
/* is oid an object of a deleted VDI that no other VDI reads? */
bool deleted_has(uint64_t oid);
/* GET_DELETED: the records, as internal_proto.h says */
int deleted_op_get(struct request *req);
/* learn member nid's records (joining): SD_RES_* */
int deleted_sync_from(const struct sd_node_id *nid);

#endif
