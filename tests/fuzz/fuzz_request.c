/*
 * The daemon's request path (sheep/request.c, sheep/ops.c): a client's byte
 * stream read by the connection's state machine (partial headers, payloads
 * consumed or refused, the data_length limit), each request checked by
 * sd_check_req_header, dispatched through the ops table, run by its real
 * handler and answered. request.c is compiled into this file to drive a
 * connection on a socketpair without a listening socket; sheep_env.c gives
 * the daemon's globals and runs queued works at once.
 *
 * The node is the only member of a formatted cluster at epoch 1 (see
 * sheep_env.c): ordered ops (NEW_VDI, LOCK_VDI, DEL_VDI, MAKE_FS...) are
 * delivered back at once and applied, object I/O goes through the gateway
 * to this node's store, peer ops check their epoch and reach the store.
 * vdi.c is compiled in too, to forget every VDI after each input (with the
 * objects): an input starts from an empty namespace.
 *
 * Input: the bytes a client sends. Checked: every whole request gets one
 * reply, in order, with its id and opcode, never more payload than asked.
 */
#include "../../sheep/request.c"
#include "../../sheep/vdi.c"
#include "fuzz_vdi.h"

#include <stdio.h>
#include <sys/ioctl.h>

#include "fuzz.h"

/* FUZZ_VERBOSE=1: print every reply (to read what an input does) */
static bool verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	fuzz_sheep_setup(true);
	return 0;
}

/* the requests the input holds, as the daemon must see them */
struct expect {
	uint32_t id;
	uint8_t opcode;
	uint32_t want; /* the most payload bytes the reply may carry */
};

static int parse_expected(const uint8_t *data, size_t size, struct expect *exp, int max)
{
	size_t off = 0;
	int n = 0;

	while (n < max && size - off >= sizeof(struct sd_req)) {
		struct sd_req hdr;

		memcpy(&hdr, data + off, sizeof(hdr));
		off += sizeof(hdr);
		exp[n].id = hdr.id;
		exp[n].opcode = hdr.opcode;
		exp[n].want = hdr.data_length;
		if (hdr.data_length > SD_MAX_DATA_LEN)
			return n + 1; /* answered, then the connection closes */
		if (hdr.flags & SD_FLAG_CMD_WRITE) {
			if (size - off < hdr.data_length)
				return n; /* a short payload: dropped with the connection */
			off += hdr.data_length;
		}
		n++;
	}
	return n;
}

#define MAX_EXPECT 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct expect exp[MAX_EXPECT];
	int nr_exp = parse_expected(data, size, exp, MAX_EXPECT), nr_rsp = 0, sv[2];
	/* a connection accepted from 127.0.0.1, set up as listen_handler does */
	struct sockaddr_storage ss = { .ss_family = AF_INET };
	struct client_info *ci;
	size_t off = 0, out_len = 0, out_cap = 1 << 16;
	uint8_t *out = malloc(out_cap);
	bool shut = false;
	int unread;

	((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!out || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		free(out);
		return 0;
	}
	fuzz_daemon_reset();
	ci = client_init(NULL, sv[0], &ss);
	FUZZ_ASSERT(ci);
	ci->refcnt++; /* ours: ci stays readable after it closes */
	for (int rounds = 0; rounds < 100000; rounds++) {
		ssize_t n;
		uint32_t ev;

		if (off < size) {
			n = write(sv[1], data + off, size - off);
			if (n > 0)
				off += n;
		}
		/*
		 * EOF once the daemon has read every byte, with replies maybe
		 * still queued: it half-closes, sends them, then closes
		 */
		if (off == size && !shut && !ci->dead && ioctl(sv[0], FIONREAD, &unread) == 0 &&
		    unread == 0) {
			shutdown(sv[1], SHUT_WR);
			shut = true;
		}
		/* what the event loop does once payload was freed: a waiter
		 * whose payload still does not fit stays waiting */
		if (ci->mem_wait)
			payload_resume();
		/* what epoll would report: only the events the connection asked for */
		ev = ci->events & (EPOLLIN | EPOLLOUT);
		if (!ci->dead && ev)
			client_handler(sv[0], ev, ci);
		for (;;) {
			if (out_len == out_cap) {
				uint8_t *nb = realloc(out, out_cap * 2);

				FUZZ_ASSERT(nb);
				out = nb;
				out_cap *= 2;
			}
			n = read(sv[1], out + out_len, out_cap - out_len);
			if (n <= 0)
				break;
			out_len += n;
		}
		if (ci->dead || (!ev && shut))
			break;
	}
	FUZZ_ASSERT(ci->dead);
	if (!ci->dead)
		request_client_close(ci);
	request_client_put(ci);
	close(sv[1]);

	/* the replies: one per whole request, in order (every work ran at once) */
	for (size_t r = 0; out_len - r >= sizeof(struct sd_rsp); nr_rsp++) {
		struct sd_rsp rsp;

		memcpy(&rsp, out + r, sizeof(rsp));
		if (verbose)
			fprintf(stderr, "reply id %u opcode 0x%02x: %s, %u bytes\n", rsp.id,
				rsp.opcode, sd_strerror(rsp.result), rsp.data_length);
		FUZZ_ASSERT(nr_rsp < nr_exp);
		FUZZ_ASSERT(rsp.id == exp[nr_rsp].id && rsp.opcode == exp[nr_rsp].opcode);
		FUZZ_ASSERT(rsp.data_length <= exp[nr_rsp].want);
		FUZZ_ASSERT(rsp.result == SD_RES_SUCCESS || !rsp.data_length);
		FUZZ_ASSERT(out_len - r - sizeof(rsp) >= rsp.data_length);
		r += sizeof(rsp) + rsp.data_length;
	}
	FUZZ_ASSERT(nr_rsp == nr_exp);
	free(out);
	fuzz_store_wipe();
	fuzz_forget_vdis();
	return 0;
}
