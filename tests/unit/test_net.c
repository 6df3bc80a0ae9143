/*
 * Unit tests of lib/net.c: sd_listen, sd_connect and sd_exec_req against a
 * tiny server thread on 127.0.0.1, and the address helpers.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "util.h"

/* opcodes the test server understands */
#define T_SUM 0x03	/* reply result = sum of payload bytes */
#define T_SEND 0x02	/* reply with obj.offset bytes of pattern (i & 0xff) */
#define T_EOF 0x7e	/* close without a reply */
#define T_HALF 0x7d	/* half a response header, then close */
#define T_SILENT 0x7c	/* never reply */

struct server {
	int lfd;
	int port;
	pthread_t thread;
};

static void serve_conn(int fd)
{
	struct sd_req req;
	struct sd_rsp rsp;
	static char buf[1 << 20];

	while (sd_read_full(fd, &req, sizeof(req)) == 0) {
		uint32_t sum = 0;

		if (req.flags & SD_FLAG_CMD_WRITE) {
			if (req.data_length > sizeof(buf) ||
			    sd_read_full(fd, buf, req.data_length))
				break;
			for (uint32_t i = 0; i < req.data_length; i++)
				sum += (unsigned char)buf[i];
		}
		memset(&rsp, 0, sizeof(rsp));
		rsp.opcode = req.opcode;
		rsp.id = req.id;
		switch (req.opcode) {
		case T_SUM:
			rsp.result = sum;
			if (sd_write_full(fd, &rsp, sizeof(rsp)))
				return;
			break;
		case T_SEND:
			rsp.data_length = (uint32_t)req.obj.offset;
			for (uint32_t i = 0; i < rsp.data_length && i < sizeof(buf); i++)
				buf[i] = (char)(i & 0xff);
			if (sd_write_full(fd, &rsp, sizeof(rsp)) ||
			    sd_write_full(fd, buf, rsp.data_length))
				return;
			break;
		case T_HALF:
			(void)!sd_write_full(fd, &rsp, sizeof(rsp) / 2);
			return;
		case T_SILENT:
			/* wait for the client to give up */
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			return;
		case T_EOF:
		default:
			return;
		}
	}
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);

		if (fd < 0)
			return NULL;
		serve_conn(fd);
		close(fd);
	}
}

static struct server srv;

static void server_start(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fds[4];

	ck_assert_int_eq(sd_listen("127.0.0.1", 0, fds, 4), 1);
	srv.lfd = fds[0];
	ck_assert_int_eq(getsockname(srv.lfd, (struct sockaddr *)&sin, &sl), 0);
	srv.port = ntohs(sin.sin_port);
	ck_assert_int_gt(srv.port, 0);
	ck_assert_int_eq(pthread_create(&srv.thread, NULL, server_main, &srv), 0);
}

static int conn(void)
{
	int fd = sd_connect("127.0.0.1", srv.port, 2000);

	ck_assert_msg(fd >= 0, "sd_connect: %s", strerror(-fd));
	return fd;
}

static struct sd_req hdr(uint8_t op, uint16_t flags, uint32_t len)
{
	struct sd_req h;

	memset(&h, 0, sizeof(h));
	h.opcode = op;
	h.flags = flags;
	h.data_length = len;
	return h;
}

START_TEST(test_write_request)
{
	int fd = conn();
	char data[1000];
	struct sd_req h = hdr(T_SUM, SD_FLAG_CMD_WRITE, sizeof(data));
	struct sd_rsp rsp;

	memset(data, 2, sizeof(data));
	h.id = 77;
	ck_assert_int_eq(sd_exec_req(fd, &h, data, sizeof(data), 0, &rsp), 0);
	ck_assert_uint_eq(rsp.result, 2000);
	ck_assert_uint_eq(rsp.id, 77);
	/* the connection stays usable */
	ck_assert_int_eq(sd_exec_req(fd, &h, data, sizeof(data), 0, &rsp), 0);
	ck_assert_uint_eq(rsp.result, 2000);
	/* without the WRITE flag no payload goes out */
	h = hdr(T_SUM, 0, sizeof(data));
	ck_assert_int_eq(sd_exec_req(fd, &h, data, sizeof(data), 0, &rsp), 0);
	ck_assert_uint_eq(rsp.result, 0);
	close(fd);
}
END_TEST

START_TEST(test_read_request)
{
	int fd = conn();
	static char buf[300000];
	struct sd_req h = hdr(T_SEND, 0, sizeof(buf));
	struct sd_rsp rsp;

	h.obj.offset = sizeof(buf);
	ck_assert_int_eq(sd_exec_req(fd, &h, buf, 0, sizeof(buf), &rsp), 0);
	ck_assert_uint_eq(rsp.data_length, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		ck_assert_int_eq((unsigned char)buf[i], i & 0xff);
	close(fd);
}
END_TEST

START_TEST(test_read_excess_discarded)
{
	/* the server sends more than asked: the excess is drained, the stream stays in sync */
	int fd = conn();
	char buf[200];
	struct sd_req h = hdr(T_SEND, 0, 100);
	struct sd_rsp rsp;

	memset(buf, 0xee, sizeof(buf));
	h.obj.offset = 10000 + 7;
	ck_assert_int_eq(sd_exec_req(fd, &h, buf, 0, 100, &rsp), 0);
	ck_assert_uint_eq(rsp.data_length, 10007);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq((unsigned char)buf[i], i);
	ck_assert_int_eq((unsigned char)buf[100], 0xee);
	h = hdr(T_SUM, SD_FLAG_CMD_WRITE, 3);
	ck_assert_int_eq(sd_exec_req(fd, &h, "\1\2\3", 3, 0, &rsp), 0);
	ck_assert_uint_eq(rsp.result, 6);
	close(fd);
}
END_TEST

START_TEST(test_rsp_aliases_hdr)
{
	int fd = conn();
	char buf[64];
	struct sd_req h = hdr(T_SUM, SD_FLAG_CMD_WRITE, 4);

	h.id = 5;
	ck_assert_int_eq(sd_exec_req(fd, &h, "\1\1\1\1", 4, 0, (struct sd_rsp *)&h), 0);
	ck_assert_uint_eq(((struct sd_rsp *)&h)->result, 4);
	ck_assert_uint_eq(((struct sd_rsp *)&h)->id, 5);
	h = hdr(T_SEND, 0, 10);
	h.obj.offset = 10;
	ck_assert_int_eq(sd_exec_req(fd, &h, buf, 0, sizeof(buf), (struct sd_rsp *)&h), 0);
	ck_assert_uint_eq(((struct sd_rsp *)&h)->data_length, 10);
	ck_assert_int_eq(buf[9], 9);
	close(fd);
}
END_TEST

START_TEST(test_eof)
{
	int fd = conn();
	struct sd_req h = hdr(T_EOF, 0, 0);
	struct sd_rsp rsp;

	ck_assert_int_eq(sd_exec_req(fd, &h, NULL, 0, 0, &rsp), -ECONNRESET);
	close(fd);
	fd = conn();
	h = hdr(T_HALF, 0, 0);
	ck_assert_int_eq(sd_exec_req(fd, &h, NULL, 0, 0, &rsp), -ECONNRESET);
	close(fd);
}
END_TEST

START_TEST(test_timeout)
{
	int fd = conn();
	struct sd_req h = hdr(T_SILENT, 0, 0);
	struct sd_rsp rsp;
	uint64_t t0 = sd_now_ns();
	int ret;

	ck_assert_int_eq(sd_set_timeout(fd, 200), 0);
	ret = sd_exec_req(fd, &h, NULL, 0, 0, &rsp);
	ck_assert_msg(ret == -EAGAIN || ret == -EWOULDBLOCK, "got %d", ret);
	ck_assert_uint_lt(sd_now_ns() - t0, 2000000000ULL);
	close(fd);
}
END_TEST

START_TEST(test_connect_refused)
{
	int fds[4], port, fd;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	/* a port that was just free */
	ck_assert_int_eq(sd_listen("127.0.0.1", 0, fds, 4), 1);
	getsockname(fds[0], (struct sockaddr *)&sin, &sl);
	port = ntohs(sin.sin_port);
	close(fds[0]);
	fd = sd_connect("127.0.0.1", port, 1000);
	ck_assert_int_eq(fd, -ECONNREFUSED);
	ck_assert_int_lt(sd_connect("no-such-host.invalid", port, 1000), 0);
}
END_TEST

START_TEST(test_listen_busy)
{
	int fds[4];

	ck_assert_int_eq(sd_listen("127.0.0.1", srv.port, fds, 4), -EADDRINUSE);
	ck_assert_int_lt(sd_listen("256.1.1.1", 0, fds, 4), 0);
}
END_TEST

START_TEST(test_listen_any_port_taken)
{
	/*
	 * NULL host binds every address (:: with V6ONLY, and 0.0.0.0). When
	 * the port is taken on one of them the daemon cannot serve everyone:
	 * EADDRINUSE is a conflict, not "an address the host lacks", so
	 * sd_listen must fail instead of quietly listening on the rest.
	 */
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), fds[4], n, v6;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	v6 = socket(AF_INET6, SOCK_STREAM, 0);
	if (v6 < 0) {
		close(fd);
		return; /* no IPv6 here: nothing else to listen on */
	}
	close(v6);
	n = sd_listen(NULL, ntohs(sin.sin_port), fds, 4);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(fd);
	ck_assert_msg(n == -EADDRINUSE,
		      "sd_listen(NULL, port taken on 0.0.0.0) returned %d: it listens on IPv6 only "
		      "and IPv4 clients get 'connection refused'", n);
}
END_TEST

START_TEST(test_listen_any)
{
	/* NULL host: every local address (v4 and, when present, v6) */
	int fds[4], n = sd_listen(NULL, 0, fds, 4);

	ck_assert_int_ge(n, 1);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}
END_TEST

START_TEST(test_socket_options)
{
	int fd = conn(), on = 0;
	socklen_t sl = sizeof(on);

	ck_assert_int_eq(sd_set_nodelay(fd), 0);
	ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &on, &sl), 0);
	ck_assert_int_ne(on, 0);
	ck_assert_int_eq(sd_set_nonblocking(fd), 0);
	close(fd);
	ck_assert_int_eq(sd_set_nonblocking(fd), -EBADF);
	ck_assert_int_eq(sd_set_nodelay(fd), -EBADF);
	ck_assert_int_eq(sd_set_timeout(fd, 10), -EBADF);
}
END_TEST

START_TEST(test_addr_strings)
{
	uint8_t a[16];
	char buf[64];

	ck_assert_int_eq(sd_str_to_addr("127.0.0.1", a), 0);
	ck_assert_uint_eq(a[10], 0xff);
	ck_assert_uint_eq(a[11], 0xff);
	ck_assert_uint_eq(a[12], 127);
	ck_assert_uint_eq(a[15], 1);
	sd_addr_to_str(a, 7000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "127.0.0.1:7000");
	ck_assert_int_eq(sd_str_to_addr("::1", a), 0);
	sd_addr_to_str(a, 7001, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[::1]:7001");
	ck_assert_int_eq(sd_str_to_addr("fe80::1:2", a), 0);
	sd_addr_to_str(a, 65535, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[fe80::1:2]:65535");
	ck_assert_int_eq(sd_str_to_addr("localhost", a), -EINVAL);
	ck_assert_int_eq(sd_str_to_addr("1.2.3", a), -EINVAL);
	ck_assert_int_eq(sd_str_to_addr("", a), -EINVAL);
	/* small buffers truncate, never overflow */
	ck_assert_int_eq(sd_str_to_addr("10.20.30.40", a), 0);
	memset(buf, 'x', sizeof(buf));
	sd_addr_to_str(a, 7000, buf, 8);
	ck_assert_str_eq(buf, "10.20.3");
}
END_TEST

/* the peer of an accepted loopback connection is the client's address and port */
START_TEST(test_peer_name)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), s, sp[2];
	uint8_t addr[16];
	uint16_t port;
	char want[64], got[64];

	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	s = accept(l, NULL, NULL);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(getsockname(c, (struct sockaddr *)&a, &len), 0);
	snprintf(want, sizeof(want), "127.0.0.1:%u", ntohs(a.sin_port));
	sd_peer_name(s, got, sizeof(got));
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(sd_peer_addr(s, addr, &port), 0);
	ck_assert_int_eq(port, ntohs(a.sin_port));
	ck_assert(sd_addr_is_loopback(addr));
	memset(addr, 0, sizeof(addr));
	ck_assert_int_eq(sd_peer_addr(s, addr, NULL), 0); /* no port wanted */
	ck_assert(sd_addr_is_loopback(addr));
	/* no peer (a listening socket), not IP (a socket pair), no socket */
	ck_assert_int_eq(sd_peer_addr(l, addr, &port), -ENOTCONN);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	ck_assert_int_eq(sd_peer_addr(sp[0], addr, &port), -EAFNOSUPPORT);
	sd_peer_name(sp[0], got, sizeof(got));
	ck_assert_str_eq(got, "?");
	ck_assert_int_eq(sd_peer_addr(-1, addr, &port), -EBADF);
	close(sp[0]);
	close(sp[1]);
	close(s);
	close(c);
	close(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("net");
	SRunner *sr;
	int failed;

	tcase_add_unchecked_fixture(tc, server_start, NULL);
	tcase_add_test(tc, test_write_request);
	tcase_add_test(tc, test_read_request);
	tcase_add_test(tc, test_read_excess_discarded);
	tcase_add_test(tc, test_rsp_aliases_hdr);
	tcase_add_test(tc, test_eof);
	tcase_add_test(tc, test_timeout);
	tcase_add_test(tc, test_connect_refused);
	tcase_add_test(tc, test_listen_busy);
	tcase_add_test(tc, test_listen_any);
	tcase_add_test(tc, test_listen_any_port_taken);
	tcase_add_test(tc, test_socket_options);
	tcase_add_test(tc, test_addr_strings);
	tcase_add_test(tc, test_peer_name);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	/* the server thread lives in this process: no fork per test */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
