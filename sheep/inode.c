/*
 * What a client may write into an inode: exactly what QEMU's sheepdog
 * driver writes (shared/PROTOCOL.md 9.4-9.12), nothing else.
 *
 * - The data object map (data_vdi_id[], everything from
 *   SD_INODE_HEADER_SIZE on): allocation, discard and snapshot delete.
 * - vdi_size, on a resize: growing only, up to MAX_DATA_OBJS objects.
 * - tag, vm_state_size and vm_clock_nsec of the working VDI: the snapshot
 *   path writes them just before NEW_VDI. A snapshot's are frozen (a tag
 *   changed there could name two snapshots).
 *
 * Every other header byte (name, times, copies, object size, ids, the
 * children) belongs to the daemon: a header write must carry it unchanged.
 * QEMU sends the whole header it read back, so it passes; a rename, a
 * change of copies or of object size is refused.
 */
#include <stddef.h>
#include <string.h>

#include "inode.h"

int inode_check_write(const struct sd_inode_header *stored, uint64_t off, const void *buf,
		      uint32_t len)
{
	struct sd_inode_header h, masked;
	uint32_t n;

	if (off >= SD_INODE_HEADER_SIZE)
		return SD_RES_SUCCESS;
	/* the header as it would be after the write */
	h = *stored;
	n = len < SD_INODE_HEADER_SIZE - off ? len : (uint32_t)(SD_INODE_HEADER_SIZE - off);
	memcpy((char *)&h + off, buf, n);

	/* outside the fields a client may change, not a byte may differ */
	masked = h;
	memcpy(masked.tag, stored->tag, sizeof(masked.tag));
	masked.vm_clock_nsec = stored->vm_clock_nsec;
	masked.vdi_size = stored->vdi_size;
	masked.vm_state_size = stored->vm_state_size;
	if (memcmp(&masked, stored, sizeof(masked)))
		return SD_RES_INVALID_PARMS;

	if (h.vdi_size != stored->vdi_size &&
	    (h.vdi_size < stored->vdi_size || stored->block_size_shift > SD_MAX_BLOCK_SIZE_SHIFT ||
	     h.vdi_size > ((uint64_t)MAX_DATA_OBJS << stored->block_size_shift)))
		return SD_RES_INVALID_PARMS;
	if (stored->snap_ctime &&
	    (memcmp(h.tag, stored->tag, sizeof(h.tag)) ||
	     h.vm_clock_nsec != stored->vm_clock_nsec || h.vm_state_size != stored->vm_state_size ||
	     h.vdi_size != stored->vdi_size))
		return SD_RES_INVALID_PARMS;
	if (!memchr(h.tag, '\0', sizeof(h.tag)))
		return SD_RES_INVALID_PARMS;
	return SD_RES_SUCCESS;
}
