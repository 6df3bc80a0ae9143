/*
 * NBD's handshake and option haggling (sheep/nbd.c reading, sheep/nbd_opt.c
 * answering): a client's byte stream from its flags on, through the options
 * (EXPORT_NAME, INFO, GO, LIST, the meta contexts, the unsupported ones,
 * malformed data, oversized options) and, when an export is reached, its
 * requests. nbd.c and vdi.c are compiled into this file (fuzz_nbd.h): the
 * connection is driven on a socketpair without a listening socket.
 *
 * Input: the bytes the client sends after the server's greeting (seeds:
 * capture-nbd.sh, real qemu-img, qemu-io, nbdinfo and nbdcopy sessions).
 * Checked: each whole option gets its replies, in order, each naming it
 * and ending in an ACK or an error; nothing else is sent; in transmission,
 * what fuzz_nbd_check_transmission checks.
 */
#include "../../sheep/nbd.c"
#include "../../sheep/vdi.c"
#include "fuzz_nbd.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_nbd_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t out_len;
	uint8_t *out = fuzz_nbd_run(data, size, &out_len);
	struct nbd_hs hs = fuzz_nbd_check_handshake(data, size, out, out_len);

	if (hs.trans)
		fuzz_nbd_check_transmission(data + hs.in, size - hs.in, out + hs.out,
					    out_len - hs.out, &hs);
	free(out);
	return 0;
}
