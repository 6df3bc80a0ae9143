/*
 * What the namespace ops' files share (vdi.h is their public face):
 *   vdi.c       the start-up load, NEW_VDI (create, snapshot, clone), the
 *               copies and header changes, READ_VDIS, the helpers below
 *   vdi_del.c   DEL_VDI and the objects no live VDI reads any more
 *   vdi_lock.c  the locks: LOCK_VDI, GET_VDI_INFO, RELEASE_VDI,
 *               UNLOCK_VDI, the release of those a client or node left,
 *               GET_VDI_LOCKS
 * vdi_del.c and vdi_lock.c use vdi.c, never each other, and vdi.c uses
 * neither (tests/unit/layers.sh). Nothing outside sheep/vdi*.c includes
 * this header.
 */
#ifndef SHEEP_VDI_PRIV_H
#define SHEEP_VDI_PRIV_H

#include <stdint.h>

#include "internal_proto.h"
#include "request.h"

/* the gateway's view of a VDI the daemon itself reads and writes: its copies */
#define COPIES(n) (&(struct vdi_attr){ .nr_copies = (uint8_t)(n) })

/*
 * Payload of VDI requests: name[256] and optionally tag[256]. Checks that
 * both are NUL-terminated in their fields; name must be non-empty. SD_RES_*.
 */
int vdi_parse_names(struct request *req, const char **name, const char **tag);
/* vid's inode header through the gateway, on copies copies: SD_RES_* */
int vdi_read_header(uint32_t vid, struct sd_inode_header *h, int copies);
int vdi_write_header(uint32_t vid, const struct sd_inode_header *h, int copies);
/*
 * After the op, on the main thread of every node: fn (vdi_lock_broken, or
 * a snapshot's move of the lock) with vid, vid2 and owner (ord.after)
 */
void vdi_after_lock(struct request *req, void (*fn)(struct request *), uint32_t vid, uint32_t vid2,
		    const struct sd_lock_owner *owner);
/* ord.after: the lock of ord.after_vid[0] was taken from its holder (vdi_set_lock_hooks) */
void vdi_lock_broken(struct request *req);

#endif
