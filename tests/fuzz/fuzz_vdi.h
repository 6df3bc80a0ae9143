/*
 * For the harnesses that compile sheep/vdi.c in (include this after it):
 * forget every VDI of the table, so that one input's namespace does not
 * leak into the next.
 */
#ifndef FUZZ_VDI_H
#define FUZZ_VDI_H

static void fuzz_forget_vdis(void)
{
	for (int i = 0; i < VDI_HASH_SIZE; i++) {
		while (vdi_hash[i]) {
			struct vdi_state *s = vdi_hash[i];

			vdi_hash[i] = s->hnext;
			free(s);
		}
	}
	memset(vdi_bitmap, 0, SD_VDI_BITMAP_SIZE);
}

#endif
