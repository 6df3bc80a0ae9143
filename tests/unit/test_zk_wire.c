/*
 * Unit tests of sheep/cluster/zk_wire.c: the zookeeper driver's option
 * (`-c zookeeper:...`) and the records it keeps in znodes.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/zk_wire.h"

static int parse(const char *opt, struct zk_config *cfg)
{
	char err[256] = "";
	int ret = zk_parse_option(opt, cfg, err, sizeof(err));

	if (ret)
		ck_assert_msg(err[0], "no reason given for '%s'", opt);
	return ret;
}

START_TEST(test_option_defaults)
{
	struct zk_config cfg;

	ck_assert_int_eq(parse(NULL, &cfg), 0);
	ck_assert_str_eq(cfg.hosts, "127.0.0.1:2181");
	ck_assert_str_eq(cfg.base, "/sheepdog");
	ck_assert_uint_eq(cfg.timeout_ms, 0);
	ck_assert_int_eq(parse("", &cfg), 0);
	ck_assert_str_eq(cfg.hosts, "127.0.0.1:2181");
}
END_TEST

START_TEST(test_option_good)
{
	struct zk_config cfg;

	ck_assert_int_eq(parse("zk1:2181,zk2.example.org:2182,[::1]:2183", &cfg), 0);
	ck_assert_str_eq(cfg.hosts, "zk1:2181,zk2.example.org:2182,[::1]:2183");
	ck_assert_str_eq(cfg.base, "/sheepdog");
	ck_assert_int_eq(parse("10.0.0.1:2181,10.0.0.2:2181/rack-1/sd_a.b,timeout=30", &cfg), 0);
	ck_assert_str_eq(cfg.hosts, "10.0.0.1:2181,10.0.0.2:2181");
	ck_assert_str_eq(cfg.base, "/rack-1/sd_a.b");
	ck_assert_uint_eq(cfg.timeout_ms, 30000);
	ck_assert_int_eq(parse("h:1,timeout=1", &cfg), 0);
	ck_assert_uint_eq(cfg.timeout_ms, 1000);
	ck_assert_int_eq(parse("h:65535,timeout=600", &cfg), 0);
	ck_assert_uint_eq(cfg.timeout_ms, 600000);
	ck_assert_int_eq(parse("timeout=5,h:2181", &cfg), 0);
	ck_assert_str_eq(cfg.hosts, "h:2181");
}
END_TEST

START_TEST(test_option_bad)
{
	static const char *const bad[] = {
		"h",		     /* no port */
		"h:",		     /* empty port */
		":2181",	     /* no host */
		"h:0",		     /* port 0 */
		"h:65536",	     /* too big */
		"h:12a",	     /* not a number */
		"h:2181,",	     /* empty item at the end */
		"h:2181,,g:1",	     /* empty item */
		"h h:2181",	     /* space in a host */
		"[::1:2181",	     /* unclosed bracket */
		"[]:2181",	     /* empty v6 */
		"[::g]:2181",	     /* not hex */
		"h:2181/",	     /* empty path */
		"h:2181/a//b",	     /* empty component */
		"h:2181/a/../b",     /* .. */
		"h:2181/a/",	     /* trailing slash */
		"h:2181/a b",	     /* space */
		"h:2181/a,g:2181",   /* a server after the path */
		"h:2181,timeout=0",  /* out of range */
		"h:2181,timeout=601",
		"h:2181,timeout=",
		"h:2181,timeout=5s",
		"h:2181,timeout=5,timeout=6",
		"timeout=5",	     /* no server */
		"h:2181,tmeout=5",   /* unknown item: a bad server */
	};
	struct zk_config cfg;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], &cfg) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(test_option_long)
{
	struct zk_config cfg;
	char *opt = malloc(8192), path[512];
	size_t n = 0;

	/* more servers than fit */
	while (n < 4000)
		n += (size_t)snprintf(opt + n, 8192 - n, "%sserver%zu:2181", n ? "," : "", n);
	ck_assert_int_eq(parse(opt, &cfg), -EINVAL);
	/* a path one byte too long, and one that fits */
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	snprintf(opt, 8192, "h:1%.*s", ZK_MAX_BASE_LEN, path);
	ck_assert_int_eq(parse(opt, &cfg), -EINVAL);
	snprintf(opt, 8192, "h:1%.*s", ZK_MAX_BASE_LEN - 1, path);
	ck_assert_int_eq(parse(opt, &cfg), 0);
	ck_assert_uint_eq(strlen(cfg.base), ZK_MAX_BASE_LEN - 1);
	free(opt);
}
END_TEST

START_TEST(test_seq_of)
{
	ck_assert_int_eq(zk_seq_of("e-0000000000"), 0);
	ck_assert_int_eq(zk_seq_of("m-0000000042"), 42);
	ck_assert_int_eq(zk_seq_of("/a/b/e-2147483647"), 2147483647);
	ck_assert_int_eq(zk_seq_of("e-000000004"), -1);
	ck_assert_int_eq(zk_seq_of("e-00000000x4"), -1);
	ck_assert_int_eq(zk_seq_of(""), -1);
}
END_TEST

static void make_list(struct zk_member *list, int nr)
{
	memset(list, 0, sizeof(*list) * (size_t)nr);
	for (int i = 0; i < nr; i++) {
		list[i].id = (uint64_t)(100 + i);
		list[i].node.nid.port = (uint16_t)(7000 + i);
		list[i].node.nr_vnodes = 128;
	}
}

START_TEST(test_records)
{
	static struct zk_member list[SD_MAX_NODES], back[SD_MAX_NODES];
	static uint8_t buf[4096 + SD_MAX_NODES * sizeof(struct zk_member)];
	struct zk_decoded d;
	size_t n;

	make_list(list, SD_MAX_NODES);
	/* JOIN with a full list */
	n = zk_encode_rec(buf, sizeof(buf), ZK_REC_JOIN, 163, list, SD_MAX_NODES, NULL, 0);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(zk_decode_rec(buf, n, false, &d), 0);
	ck_assert_int_eq(d.type, ZK_REC_JOIN);
	ck_assert_uint_eq(d.id, 163);
	ck_assert_int_eq(d.nr, SD_MAX_NODES);
	zk_copy_list(back, &d);
	ck_assert_mem_eq(back, list, sizeof(list));
	ck_assert_int_eq(zk_find(back, d.nr, 163), SD_MAX_NODES - 1);
	ck_assert_int_eq(zk_find(back, d.nr, 99), -1);
	/* cut anywhere: refused */
	for (size_t cut = 0; cut < n; cut += 7)
		ck_assert_int_eq(zk_decode_rec(buf, cut, false, &d), -EINVAL);
	/* not a view, and a view is not an entry */
	ck_assert_int_eq(zk_decode_rec(buf, n, true, &d), -EINVAL);
	n = zk_encode_view(buf, sizeof(buf), list, 3);
	ck_assert_int_eq(zk_decode_rec(buf, n, true, &d), 0);
	ck_assert_int_eq(d.nr, 3);
	ck_assert_int_eq(zk_decode_rec(buf, n, false, &d), -EINVAL);
	/* a list holding one id twice */
	list[2].id = list[0].id;
	n = zk_encode_rec(buf, sizeof(buf), ZK_REC_LEAVE, 101, list, 3, NULL, 0);
	ck_assert_int_eq(zk_decode_rec(buf, n, false, &d), -EINVAL);
	/* NOTIFY: a message, no list */
	n = zk_encode_rec(buf, sizeof(buf), ZK_REC_NOTIFY, 7, NULL, 0, "hello", 5);
	ck_assert_int_eq(zk_decode_rec(buf, n, false, &d), 0);
	ck_assert_uint_eq(d.msg_len, 5);
	ck_assert_mem_eq(d.msg, "hello", 5);
	buf[0] ^= 1; /* the magic */
	ck_assert_int_eq(zk_decode_rec(buf, n, false, &d), -EINVAL);
	/* too big for the buffer, too many members, too long a message */
	ck_assert_uint_eq(zk_encode_rec(buf, 10, ZK_REC_NOTIFY, 7, NULL, 0, "hello", 5), 0);
	ck_assert_uint_eq(zk_encode_rec(buf, sizeof(buf), ZK_REC_JOIN, 7, list, SD_MAX_NODES + 1,
					NULL, 0),
			  0);
	ck_assert_uint_eq(
	    zk_encode_rec(buf, sizeof(buf), ZK_REC_NOTIFY, 7, NULL, 0, buf, ZK_MAX_MSG_LEN + 1), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("zk_wire");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nr_failed;

	tcase_add_test(tc, test_option_defaults);
	tcase_add_test(tc, test_option_good);
	tcase_add_test(tc, test_option_bad);
	tcase_add_test(tc, test_option_long);
	tcase_add_test(tc, test_seq_of);
	tcase_add_test(tc, test_records);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
