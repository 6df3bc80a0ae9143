/*
 * A joining node learns the namespace from a member (vdi_sync.c).
 */
#ifndef SHEEP_VDI_SYNC_H
#define SHEEP_VDI_SYNC_H

#include "internal_proto.h"

/* vdi_sync.c: learn the namespace from a member (a node that joined): SD_RES_* */
int vdi_sync_from(const struct sd_node_id *nid);

#endif
