/*
 * NBD's transmission phase (sheep/nbd.c's request parser and replies,
 * sheep/nbd_io.c's mapping onto the VDI's objects): request headers (magic,
 * flags, type, cookie, offset, length), write payloads, sizes at and over
 * the limits, ranges past the end, disconnects, block status, with simple
 * or structured replies, on a writable VDI or a read-only snapshot.
 *
 * Input: a mode byte, then the bytes a client sends after its handshake
 * (seeds: capture-nbd.sh's real sessions, cut after the handshake). The
 * mode picks the handshake the harness makes first: bit 0 structured
 * replies, bit 1 the base:allocation meta context (with bit 0), bit 2 the
 * read-only snapshot alpha@1 instead of alpha (16 MiB).
 * Checked: the handshake reaches transmission; then one reply per whole
 * request, in order, with its cookie, a read's data exactly its range
 * (fuzz_nbd_check_transmission), nothing more.
 */
#include "../../sheep/nbd.c"
#include "../../sheep/vdi.c"
#include "fuzz_nbd.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_nbd_init();
	return 0;
}

static uint8_t *put_opt(uint8_t *p, uint32_t opt, const void *data, uint32_t len)
{
	uint64_t magic = htobe64(NBD_IHAVEOPT);
	uint32_t v = htobe32(opt);

	memcpy(p, &magic, 8);
	memcpy(p + 8, &v, 4);
	v = htobe32(len);
	memcpy(p + 12, &v, 4);
	if (len)
		memcpy(p + 16, data, len);
	return p + 16 + len;
}

/* GO's data, or SET_META_CONTEXT's with the one query */
static uint32_t export_data(uint8_t *p, const char *name, const char *query)
{
	uint32_t nlen = strlen(name), v = htobe32(nlen), len = 0;

	memcpy(p, &v, 4);
	memcpy(p + 4, name, nlen);
	len = 4 + nlen;
	if (query) {
		v = htobe32(1);
		memcpy(p + len, &v, 4);
		v = htobe32(strlen(query));
		memcpy(p + len + 4, &v, 4);
		memcpy(p + len + 8, query, strlen(query));
		len += 8 + strlen(query);
	} else {
		memset(p + len, 0, 2); /* no information request */
		len += 2;
	}
	return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode = size ? data[0] : 0, opt[128], *in = malloc(512 + size), *p = in;
	const char *name = (mode & 4) ? "alpha@1" : "alpha";
	uint32_t flags = htobe32(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES), len;
	size_t out_len;
	uint8_t *out;
	struct nbd_hs hs;

	FUZZ_ASSERT(in);
	memcpy(p, &flags, 4);
	p += 4;
	if (mode & 1) {
		p = put_opt(p, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
		if (mode & 2) {
			len = export_data(opt, name, NBD_META_BASE_ALLOCATION);
			p = put_opt(p, NBD_OPT_SET_META_CONTEXT, opt, len);
		}
	}
	len = export_data(opt, name, NULL);
	p = put_opt(p, NBD_OPT_GO, opt, len);
	if (size > 1)
		memcpy(p, data + 1, size - 1);
	p += size > 1 ? size - 1 : 0;

	out = fuzz_nbd_run(in, p - in, &out_len);
	hs = fuzz_nbd_check_handshake(in, p - in, out, out_len);
	FUZZ_ASSERT(hs.trans);
	FUZZ_ASSERT(hs.structured == !!(mode & 1) && hs.meta == ((mode & 3) == 3));
	fuzz_nbd_check_transmission(in + hs.in, (p - in) - hs.in, out + hs.out, out_len - hs.out,
				    &hs);
	free(out);
	free(in);
	return 0;
}
