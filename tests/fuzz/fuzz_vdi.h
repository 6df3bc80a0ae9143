/*
 * For the harnesses that compile sheep/vdi.c in (include this after it):
 * forget every VDI of the table, so that one input's namespace does not
 * leak into the next.
 */
#ifndef FUZZ_VDI_H
#define FUZZ_VDI_H

static void fuzz_forget_vdis(void)
{
	vdi_table_clear();
}

#endif
