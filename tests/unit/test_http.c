/*
 * Unit tests of sheep/http.c: the head of an HTTP/1.x request, parsed with
 * fixed bounds: what real scrapers send, the grammar's errors (each with
 * its status), and answers that never change as more bytes arrive.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "util.h"

static int parse(const char *s, struct http_request *r)
{
	return http_parse_request(s, strlen(s), 4096, r);
}

START_TEST(test_good)
{
	struct http_request r;
	const char *prom = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:7001\r\nUser-Agent: "
			   "Prometheus/2.42.0\r\nAccept-Encoding: gzip\r\n\r\n";

	ck_assert_int_eq(parse(prom, &r), 0);
	ck_assert_str_eq(r.method, "GET");
	ck_assert_str_eq(r.target, "/metrics");
	ck_assert_int_eq(r.minor, 1);
	ck_assert_int_eq(r.nr_fields, 3);
	ck_assert_uint_eq(r.head_len, strlen(prom));
	/* HTTP/1.0, bare LFs, no field; empty lines before; a body after */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.0\n\n", &r), 0);
	ck_assert_int_eq(r.minor, 0);
	ck_assert_int_eq(parse("\r\n\nGET /x?a=b HTTP/1.1\r\n\r\n", &r), 0);
	ck_assert_str_eq(r.target, "/x?a=b");
	ck_assert_int_eq(parse("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", &r), 0);
	ck_assert_uint_eq(r.head_len, 38);
	/* a field with no value, tabs and obs-text in one */
	ck_assert_int_eq(parse("GET / HTTP/1.1\r\nX:\r\nY: \ta\xe9"
			       "b\t\r\n\r\n",
			       &r),
			 0);
}
END_TEST

static const struct {
	const char *req;
	int status;
} bad[] = {
	{ "GET /met\0rics HTTP/1.1\r\n\r\n", 400 }, /* strlen stops at the NUL: see test_nul */
	{ "GET  / HTTP/1.1\r\n\r\n", 400 },
	{ "GET / HTTP/1.1 \r\n\r\n", 400 },
	{ " GET / HTTP/1.1\r\n\r\n", 400 },
	{ "G(T / HTTP/1.1\r\n\r\n", 400 },
	{ "GET /\x7f HTTP/1.1\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\rX: y\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\r\n: x\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400 },
	{ "GET / HTTP/1.1\r\n\rX", 400 },
	{ "GET / HTTPS/1.1\r\n\r\n", 400 },
	{ "GET / HTTP/1.12\r\n\r\n", 400 },
	{ "GET / HTTP/2.0\r\n\r\n", 505 },
	{ "GET / HTTP/0.9\r\n\r\n", 505 },
	{ "PROPFINDPROPFIND1 / HTTP/1.1\r\n\r\n", 501 },
};

START_TEST(test_bad)
{
	struct http_request r;

	ck_assert_int_eq(parse(bad[_i].req, &r), _i == 0 ? HTTP_MORE : bad[_i].status);
}
END_TEST

START_TEST(test_nul)
{
	static const char req[] = "GET /met\0rics HTTP/1.1\r\n\r\n";
	struct http_request r;

	/* found at once, before the head ends */
	ck_assert_int_eq(http_parse_request(req, 9, 4096, &r), 400);
	ck_assert_int_eq(http_parse_request(req, sizeof(req) - 1, 4096, &r), 400);
	ck_assert_int_eq(http_parse_request("\0", 1, 4096, &r), 400);
}
END_TEST

START_TEST(test_bounds)
{
	char *big = malloc(8192);
	struct http_request r;

	ck_assert_ptr_nonnull(big);
	/* a target of 255 bytes is taken, 256 is 414 (as soon as its 256th byte is in) */
	memset(big, 'a', 8192);
	memcpy(big, "GET /", 5);
	memcpy(big + 255 + 4, " HTTP/1.0\n\n", 11);
	ck_assert_int_eq(http_parse_request(big, 255 + 4 + 11, 4096, &r), 0);
	ck_assert_uint_eq(strlen(r.target), 255);
	big[255 + 4] = 'a';
	memcpy(big + 256 + 4, " HTTP/1.0\n\n", 11);
	ck_assert_int_eq(http_parse_request(big, 256 + 4, 4096, &r), 414);
	/* a head that does not end within the bound: 431, however much more came */
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	memset(big + 19, 'b', 8192 - 19);
	ck_assert_int_eq(http_parse_request(big, 4095, 4096, &r), HTTP_MORE);
	ck_assert_int_eq(http_parse_request(big, 4096, 4096, &r), 431);
	ck_assert_int_eq(http_parse_request(big, 8192, 4096, &r), 431);
	free(big);
}
END_TEST

/* each prefix of a good request is "more", and each of a bad one "more" until its verdict */
START_TEST(test_prefixes)
{
	const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct http_request r;
	size_t n = strlen(req);

	for (size_t k = 0; k < n; k++)
		ck_assert_int_eq(http_parse_request(req, k, 4096, &r), HTTP_MORE);
	ck_assert_int_eq(http_parse_request(req, n, 4096, &r), 0);
	req = "GET / HTTP/1.1\r\nHost : x\r\n\r\n";
	n = strlen(req);
	for (size_t k = 0; k <= n; k++)
		ck_assert_int_eq(http_parse_request(req, k, 4096, &r), k <= 20 ? HTTP_MORE : 400);
	ck_assert_str_eq(http_reason(431), "Request Header Fields Too Large");
}
END_TEST

static Suite *http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("http");

	tcase_add_test(tc, test_good);
	tcase_add_loop_test(tc, test_bad, 0, ARRAY_SIZE(bad));
	tcase_add_test(tc, test_nul);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_prefixes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(http_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
