/*
 * /metrics' HTTP side: sheep/http.c's request parser and sheep/metrics.c's
 * connections (compiled into this file, driven on a socketpair without a
 * listening socket, as listen.c would hand them over).
 *
 * Input: the bytes a client sends. Checked, for the parser: a verdict is
 * final (the input's prefixes are "more" until one of them gives the
 * verdict that the whole input gives); a whole head ends with an empty
 * line, holds no NUL, and parses alone to the same head; "more" means no
 * NUL and no end yet within the bound. For the connection: exactly one
 * answer when the head was whole or broken (its status the parser's, or
 * 200/404/405/500 for a whole one), its Content-Length the length of the
 * body that follows, then the end of the stream; no answer when the
 * client stopped before its head was whole.
 */
#include "../../sheep/metrics.c"

#include <stdio.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sheep_setup(true);
	for (int i = 0; i < METRICS_MAX_CONNS; i++)
		conns[i].fd = -1;
	return 0;
}

static void check_parser(const uint8_t *data, size_t size, int *verdict, struct http_request *hr)
{
	const char *buf = (const char *)data;
	size_t bound = size < METRICS_MAX_REQ ? size : METRICS_MAX_REQ;
	struct http_request h2;
	int ret = http_parse_request(buf, size, METRICS_MAX_REQ, hr), r2;

	FUZZ_ASSERT(ret == 0 || ret == HTTP_MORE || ret == 400 || ret == 414 || ret == 431 ||
		    ret == 501 || ret == 505);
	/* a shorter prefix says "more" or the same */
	for (size_t cut = 0; cut < 3 && size; cut++) {
		size_t k = cut == 0 ? size - 1 : cut == 1 ? size / 2 : size / 3;

		r2 = http_parse_request(buf, k, METRICS_MAX_REQ, &h2);
		FUZZ_ASSERT(r2 == HTTP_MORE || r2 == ret);
	}
	if (ret == HTTP_MORE) {
		FUZZ_ASSERT(size < METRICS_MAX_REQ);
		FUZZ_ASSERT(!memchr(buf, 0, size));
	}
	if (ret == 431)
		FUZZ_ASSERT(!memchr(buf, 0, bound));
	if (ret == 0) {
		FUZZ_ASSERT(hr->head_len >= 2 && hr->head_len <= bound);
		FUZZ_ASSERT(buf[hr->head_len - 1] == '\n');
		FUZZ_ASSERT(!memchr(buf, 0, hr->head_len));
		FUZZ_ASSERT(hr->method[0] && hr->target[0] && hr->minor >= 0 && hr->minor <= 9);
		FUZZ_ASSERT(!strchr(hr->target, ' ') && strlen(hr->target) <= HTTP_MAX_TARGET);
		/* the head alone is the same head */
		r2 = http_parse_request(buf, hr->head_len, METRICS_MAX_REQ, &h2);
		FUZZ_ASSERT(r2 == 0 && h2.head_len == hr->head_len);
		FUZZ_ASSERT(!strcmp(h2.method, hr->method) && !strcmp(h2.target, hr->target));
	}
	*verdict = ret;
}

/* drive one connection with the input; what the server sent (*out_len bytes, to free) */
static char *run_conn(const uint8_t *data, size_t size, size_t *out_len)
{
	size_t off = 0, len = 0, cap = 1 << 16;
	char *out = malloc(cap);
	struct mconn *c;
	bool shut = false;
	int sv[2];

	FUZZ_ASSERT(out);
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	c = mconn_open(NULL, sv[0]);
	FUZZ_ASSERT(c);
	for (int rounds = 0; rounds < 100000 && c->fd >= 0; rounds++) {
		ssize_t n;

		if (off < size) {
			n = send(sv[1], data + off, size - off, MSG_NOSIGNAL);
			if (n > 0)
				off += (size_t)n;
		}
		if (off == size && !shut) {
			shutdown(sv[1], SHUT_WR);
			shut = true;
		}
		/* what epoll would report: the server waits for one or the other */
		conn_handler(sv[0], c->out ? EPOLLOUT : EPOLLIN, c);
		for (;;) {
			if (len == cap) {
				char *nb = realloc(out, cap * 2);

				FUZZ_ASSERT(nb);
				out = nb;
				cap *= 2;
			}
			n = read(sv[1], out + len, cap - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
	}
	FUZZ_ASSERT(c->fd < 0); /* the server closed: the client's EOF or a full linger */
	close(sv[1]);
	*out_len = len;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request hr;
	size_t out_len, hlen, body_len;
	char *out, *end;
	int verdict, status;

	check_parser(data, size, &verdict, &hr);
	out = run_conn(data, size, &out_len);
	if (verdict == HTTP_MORE) { /* the client stopped first */
		FUZZ_ASSERT(out_len == 0);
		free(out);
		return 0;
	}
	/* one answer: its status line, its head, then Content-Length bytes */
	FUZZ_ASSERT(out_len > 12 && !memcmp(out, "HTTP/1.1 ", 9));
	status = atoi(out + 9);
	if (verdict)
		FUZZ_ASSERT(status == verdict);
	else
		FUZZ_ASSERT(status == 200 || status == 404 || status == 405 || status == 500);
	end = memmem(out, out_len, "\r\n\r\n", 4);
	FUZZ_ASSERT(end);
	hlen = (size_t)(end - out) + 4;
	{
		char *cl = memmem(out, hlen, "\r\nContent-Length: ", 18);

		FUZZ_ASSERT(cl);
		body_len = strtoul(cl + 18, NULL, 10);
	}
	FUZZ_ASSERT(out_len == hlen + body_len);
	free(out);
	return 0;
}
