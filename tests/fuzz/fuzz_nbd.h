/*
 * What the two NBD harnesses share (include it after sheep/nbd.c and
 * sheep/vdi.c, which they compile in): a connection driven on a socketpair
 * as the event loop would drive it, a namespace made afresh for each input,
 * and the checks of what the server answered.
 *
 * The namespace: alpha (16 MiB) with one snapshot (alpha@1, read-only) and
 * beta (8 MiB), in the single-node formatted cluster of sheep_env.c. Works
 * run at once on the caller's thread there, so every reply is queued in
 * the order of the requests. The connection is set up by nbd.c's own
 * conn_init, and the payload bound is small (FUZZ_NBD_PAYLOAD_MAX), so that
 * a request waiting for memory and its resumption are exercised too.
 */
#ifndef FUZZ_NBD_H
#define FUZZ_NBD_H

#include <stdio.h>
#include <sys/ioctl.h>

#include "fuzz.h"
#include "fuzz_vdi.h"
#include "ops.h"
#include "ordered.h"

#define FUZZ_NBD_ALPHA_SIZE (16U << 20)
/* the harness's --max-inflight-bytes */
#define FUZZ_NBD_PAYLOAD_MAX (1U << 20)

static bool nbd_verbose;

static void vdi_made(struct request *req)
{
	FUZZ_ASSERT(req->rp.result == SD_RES_SUCCESS);
}

/* NEW_VDI through the ordered ops, as a client's would go */
static void fuzz_nbd_new_vdi(const char *name, uint64_t size, uint32_t snapid)
{
	char names[SD_MAX_VDI_LEN] = { 0 };
	struct request req;

	memset(&req, 0, sizeof(req));
	snprintf(names, sizeof(names), "%s", name);
	req.rq.proto_ver = SD_PROTO_VER;
	req.rq.opcode = SD_OP_NEW_VDI;
	req.rq.flags = SD_FLAG_CMD_WRITE;
	req.rq.data_length = sizeof(names);
	req.rq.vdi.vdi_size = size;
	req.rq.vdi.snapid = snapid;
	req.data = names;
	req.op = get_sd_op(SD_OP_NEW_VDI);
	req.done = vdi_made;
	INIT_LIST_NODE(&req.node);
	ordered_submit(&req);
}

static void fuzz_nbd_init(void)
{
	nbd_verbose = getenv("FUZZ_VERBOSE") != NULL;
	fuzz_sheep_setup(true);
	nbd_wq = wq_create("nbd", 1);
	FUZZ_ASSERT(nbd_wq);
	/* small, so that two reads of 1 MiB in flight make the second wait */
	payload_set_max(FUZZ_NBD_PAYLOAD_MAX);
}

/*
 * Run one connection: the server greets, reads in (the client's bytes) and
 * answers; EOF once it has read everything and sent every reply. Returns
 * what it sent (*out_len bytes, to free).
 */
static uint8_t *fuzz_nbd_run(const uint8_t *in, size_t size, size_t *out_len)
{
	struct nbd_conn *c;
	size_t off = 0, len = 0, cap = 1 << 16;
	uint8_t *out = malloc(cap);
	bool shut = false;
	int sv[2], unread;

	FUZZ_ASSERT(out);
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	fuzz_nbd_new_vdi("alpha", FUZZ_NBD_ALPHA_SIZE, 0);
	fuzz_nbd_new_vdi("alpha", FUZZ_NBD_ALPHA_SIZE, 1); /* alpha@1 is the old one */
	fuzz_nbd_new_vdi("beta", 8U << 20, 0);

	/* what listen_handler does for a connection it accepted */
	c = conn_init(NULL, sv[0]);
	FUZZ_ASSERT(c);
	c->refcnt++; /* ours: c stays readable after it closes */

	for (int rounds = 0; rounds < 100000; rounds++) {
		uint32_t ev;
		ssize_t n;

		if (off < size) {
			n = write(sv[1], in + off, size - off);
			if (n > 0)
				off += n;
		}
		/* EOF only once every byte is read and every reply sent */
		if (off == size && !shut && !c->dead && list_empty(&c->tx_queue) &&
		    c->state != NBD_ST_WAIT && ioctl(sv[0], FIONREAD, &unread) == 0 && !unread) {
			shutdown(sv[1], SHUT_WR);
			shut = true;
		}
		/* what the event loop does once payload was freed: a waiter
		 * whose payload still does not fit stays waiting */
		if (c->mem_wait)
			payload_resume();
		/* what epoll would report: only what the connection asked for */
		ev = c->events & (EPOLLIN | EPOLLOUT);
		if (!c->dead && ev)
			conn_handler(sv[0], ev, c);
		for (;;) {
			if (len == cap) {
				uint8_t *nb = realloc(out, cap * 2);

				FUZZ_ASSERT(nb);
				out = nb;
				cap *= 2;
			}
			n = read(sv[1], out + len, cap - len);
			if (n <= 0)
				break;
			len += n;
		}
		if (c->dead || (!ev && shut))
			break;
		if (nbd_verbose && rounds == 1000)
			fprintf(stderr, "1000 rounds: events %x, state %d, sent %zu/%zu, tx %s\n",
				c->events, c->state, off, size,
				list_empty(&c->tx_queue) ? "empty" : "queued");
	}
	FUZZ_ASSERT(c->dead);
	FUZZ_ASSERT(c->nr_inflight == 0);
	nbd_conn_put(c); /* the last reference: releases the VDI's lock */
	close(sv[1]);
	fuzz_store_wipe();
	fuzz_forget_vdis();
	*out_len = len;
	return out;
}

static uint64_t be64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* where the handshake left the two streams */
struct nbd_hs {
	bool trans; /* the transmission phase began */
	bool structured, meta;
	size_t in, out; /* offsets of its first request and first reply */
};

/*
 * The handshake: the greeting, then for each whole option the client sent
 * (in order, until the connection ends) its replies, each naming the
 * option, the last one an ACK or an error; EXPORT_NAME's reply is bare.
 */
static struct nbd_hs fuzz_nbd_check_handshake(const uint8_t *in, size_t in_len, const uint8_t *out,
					      size_t out_len)
{
	struct nbd_hs hs = { 0 };
	size_t ip = 4, op = 18;
	uint32_t flags;

	FUZZ_ASSERT(out_len >= 18 && be64_at(out) == NBD_MAGIC && be64_at(out + 8) == NBD_IHAVEOPT);
	if (in_len < 4)
		goto end;
	flags = nbd_get_be32(in);
	if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
		goto end;
	while (in_len - ip >= 16 && be64_at(in + ip) == NBD_IHAVEOPT) {
		uint32_t opt = nbd_get_be32(in + ip + 8), olen = nbd_get_be32(in + ip + 12);
		bool meta = false;
		uint32_t type;

		if (olen > NBD_MAX_OPT_LEN || in_len - ip - 16 < olen)
			break;
		ip += 16 + olen;
		if (opt == NBD_OPT_EXPORT_NAME) {
			size_t want = 10 + ((flags & NBD_FLAG_C_NO_ZEROES) ? 0 : 124);

			if (op == out_len)
				break; /* no such export: closed */
			FUZZ_ASSERT(out_len - op >= want);
			op += want;
			hs.trans = true;
			break;
		}
		do {
			uint32_t rlen;

			FUZZ_ASSERT(out_len - op >= 20);
			FUZZ_ASSERT(be64_at(out + op) == NBD_REP_MAGIC);
			FUZZ_ASSERT(nbd_get_be32(out + op + 8) == opt);
			type = nbd_get_be32(out + op + 12);
			rlen = nbd_get_be32(out + op + 16);
			FUZZ_ASSERT(out_len - op - 20 >= rlen);
			if (nbd_verbose)
				fprintf(stderr, "option %u: reply 0x%x, %u bytes\n", opt, type,
					rlen);
			if (type == NBD_REP_INFO)
				FUZZ_ASSERT(rlen >= 2);
			if (type == NBD_REP_META_CONTEXT) {
				FUZZ_ASSERT(rlen > 4);
				meta = true;
			}
			op += 20 + rlen;
		} while (type != NBD_REP_ACK && !(type & NBD_REP_ERR(0)));
		if (opt == NBD_OPT_STRUCTURED_REPLY && type == NBD_REP_ACK)
			hs.structured = true;
		/* a SET that succeeds selects what it answered, nothing else */
		if (opt == NBD_OPT_SET_META_CONTEXT && type == NBD_REP_ACK)
			hs.meta = meta;
		if (opt == NBD_OPT_ABORT)
			break;
		if (opt == NBD_OPT_GO && type == NBD_REP_ACK) {
			hs.trans = true;
			break;
		}
	}
end:
	hs.in = ip;
	hs.out = op;
	if (!hs.trans)
		FUZZ_ASSERT(op == out_len); /* nothing the options do not explain */
	return hs;
}

/* one request the server must answer */
struct nbd_expect {
	uint16_t type;
	uint64_t cookie, offset;
	uint32_t length;
};

/*
 * The next request of the client's stream at *ip, as the server takes it:
 * 1 one to answer, 2 one to answer and then the last (the server stops
 * reading), 0 the end with no answer (EOF, a short request, DISC), -1 a
 * protocol error the server drops the connection for at once (its replies
 * not sent yet are lost with it).
 */
static int fuzz_nbd_next(const uint8_t *in, size_t in_len, size_t *ip, struct nbd_expect *e)
{
	if (in_len - *ip < 28)
		return 0;
	if (nbd_get_be32(in + *ip) != NBD_REQUEST_MAGIC)
		return -1;
	e->type = nbd_get_be16(in + *ip + 6);
	e->cookie = be64_at(in + *ip + 8);
	e->offset = be64_at(in + *ip + 16);
	e->length = nbd_get_be32(in + *ip + 24);
	*ip += 28;
	if (nbd_verbose)
		fprintf(stderr, "request %u cookie %" PRIu64 " at %" PRIu64 " length %u\n", e->type,
			e->cookie, e->offset, e->length);
	switch (e->type) {
	case NBD_CMD_DISC:
		return 0;
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		/* a write's payload is not skipped: closed; a read gets EINVAL */
		if (e->length > NBD_MAX_PAYLOAD && e->type == NBD_CMD_WRITE)
			return -1;
		if (e->type == NBD_CMD_WRITE) {
			if (in_len - *ip < e->length)
				return 0; /* a short payload: no reply */
			*ip += e->length;
		}
		return 1;
	case NBD_CMD_FLUSH:
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
	case NBD_CMD_BLOCK_STATUS:
		return 1;
	}
	return 2; /* unknown: answered, then closed */
}

/*
 * The transmission phase: one reply per whole request, in order (the works
 * ran at once), with its cookie, never data it was not asked for: a read's
 * data chunks and holes cover exactly the range asked, inside it. When the
 * stream ends in a protocol error, the replies may stop anywhere.
 */
static void fuzz_nbd_check_transmission(const uint8_t *in, size_t in_len, const uint8_t *out,
					size_t out_len, const struct nbd_hs *hs)
{
	size_t ip = 0, op = 0;
	struct nbd_expect e;
	bool cut = false;
	int ret;

	while ((ret = fuzz_nbd_next(in, in_len, &ip, &e)) > 0)
		;
	cut = ret < 0;
	ip = 0;
/* n more bytes of output, or (cut short by a drop) the end of the check */
#define NEED(n)                                                                                    \
	do {                                                                                       \
		if (out_len - op < (n)) {                                                          \
			FUZZ_ASSERT(cut);                                                          \
			return;                                                                    \
		}                                                                                  \
	} while (0)
	while ((ret = fuzz_nbd_next(in, in_len, &ip, &e)) > 0) {
		bool done = false, error = false;
		uint64_t covered = 0;

		NEED(16);
		if (nbd_get_be32(out + op) == NBD_SIMPLE_REPLY_MAGIC) {
			uint32_t err = nbd_get_be32(out + op + 4);

			FUZZ_ASSERT(be64_at(out + op + 8) == e.cookie);
			/* structured replies carry every read's data, every error */
			FUZZ_ASSERT(!hs->structured || (!err && e.type != NBD_CMD_READ &&
							e.type != NBD_CMD_BLOCK_STATUS));
			FUZZ_ASSERT(e.type != NBD_CMD_BLOCK_STATUS || err);
			op += 16;
			if (e.type == NBD_CMD_READ && !err) {
				NEED(e.length);
				op += e.length;
			}
			if (ret == 2)
				break;
			continue;
		}
		FUZZ_ASSERT(hs->structured);
		while (!done) {
			uint16_t flags, type;
			uint32_t clen;
			uint64_t coff;

			NEED(20);
			FUZZ_ASSERT(nbd_get_be32(out + op) == NBD_STRUCTURED_REPLY_MAGIC);
			flags = nbd_get_be16(out + op + 4);
			type = nbd_get_be16(out + op + 6);
			FUZZ_ASSERT(be64_at(out + op + 8) == e.cookie);
			clen = nbd_get_be32(out + op + 16);
			op += 20;
			NEED(clen);
			done = flags & NBD_REPLY_FLAG_DONE;
			if (nbd_verbose)
				fprintf(stderr, "  chunk type %u flags %u, %u bytes\n", type, flags,
					clen);
			switch (type) {
			case NBD_REPLY_TYPE_NONE:
				FUZZ_ASSERT(clen == 0 && done);
				break;
			case NBD_REPLY_TYPE_ERROR:
				FUZZ_ASSERT(clen >= 6 && nbd_get_be32(out + op));
				FUZZ_ASSERT(nbd_get_be16(out + op + 4) <= clen - 6);
				error = true;
				break;
			case NBD_REPLY_TYPE_OFFSET_DATA:
			case NBD_REPLY_TYPE_OFFSET_HOLE:
				FUZZ_ASSERT(e.type == NBD_CMD_READ);
				FUZZ_ASSERT(clen >=
					    (type == NBD_REPLY_TYPE_OFFSET_HOLE ? 12u : 8u));
				coff = be64_at(out + op);
				if (type == NBD_REPLY_TYPE_OFFSET_HOLE) {
					FUZZ_ASSERT(clen == 12);
					covered += nbd_get_be32(out + op + 8);
					/* in order, no gap, no overlap (this server's runs) */
					FUZZ_ASSERT(coff + nbd_get_be32(out + op + 8) ==
						    e.offset + covered);
				} else {
					covered += clen - 8;
					FUZZ_ASSERT(coff + (clen - 8) == e.offset + covered);
				}
				FUZZ_ASSERT(covered <= e.length);
				break;
			case NBD_REPLY_TYPE_BLOCK_STATUS:
				FUZZ_ASSERT(e.type == NBD_CMD_BLOCK_STATUS && hs->meta);
				FUZZ_ASSERT(clen >= 12 && (clen - 4) % 8 == 0);
				FUZZ_ASSERT(nbd_get_be32(out + op) == NBD_META_ID_ALLOCATION);
				break;
			default:
				FUZZ_ASSERT(!"an unknown chunk type");
			}
			op += clen;
		}
		if (e.type == NBD_CMD_READ && !error)
			FUZZ_ASSERT(covered == e.length);
		if (ret == 2)
			break;
	}
#undef NEED
	FUZZ_ASSERT(op == out_len); /* no reply to a request never sent */
}

#endif
