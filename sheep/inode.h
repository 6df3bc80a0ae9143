/*
 * Inode rules that do not depend on the daemon's state (inode.c): kept
 * apart from the modules that keep state, so that unit tests build them alone.
 */
#ifndef SHEEP_INODE_H
#define SHEEP_INODE_H

#include <stdint.h>

#include "sheepdog_proto.h"

/*
 * May a client write len bytes of buf at offset off of the inode whose
 * stored header is stored? Only what QEMU's driver changes may change (see
 * inode.c). SD_RES_SUCCESS or SD_RES_INVALID_PARMS.
 */
int inode_check_write(const struct sd_inode_header *stored, uint64_t off, const void *buf,
		      uint32_t len);

#endif
