/*
 * Cluster messages (sheep/ordered.c): what the cluster driver delivers from
 * another member, checked by ordered_deliver (magic, length, opcode) and
 * applied as a remote ordered op (NEW_VDI, LOCK_VDI, RELEASE_VDI, DEL_VDI,
 * MAKE_FS, SHUTDOWN): the namespace cache changes, no object is written.
 *
 * vdi.c is compiled into this file to forget every VDI after each input;
 * the rest of the daemon links as it is (sheep_env.c, a formatted node of
 * one member). Input: the message as the driver hands it over (the seeds
 * are the NOTIFY payloads of real local-driver logs).
 */
#include "../../sheep/vdi.c"
#include "fuzz_vdi.h"
#include "ordered.h"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sheep_setup(true);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact copy: a read past the message is a read past the buffer */
	uint8_t *msg = malloc(size ? size : 1);

	if (!msg)
		return 0;
	memcpy(msg, data, size);
	fuzz_daemon_reset();
	ordered_deliver(msg, size, 2);
	free(msg);
	fuzz_store_wipe();
	fuzz_forget_vdis();
	return 0;
}
