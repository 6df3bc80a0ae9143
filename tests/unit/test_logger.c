/* Unit tests of lib/logger.c: level parsing, filtering and the line format. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logger.h"

static char path[64];

static void setup(void)
{
	int fd;

	strcpy(path, "/tmp/sd-log-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void teardown(void)
{
	sd_log_close();
	unlink(path);
}

static size_t slurp(char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, len - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
	return (size_t)n;
}

START_TEST(test_parse_level)
{
	ck_assert_int_eq(sd_log_parse_level("debug"), SDOG_DEBUG);
	ck_assert_int_eq(sd_log_parse_level("DEBUG"), SDOG_DEBUG);
	ck_assert_int_eq(sd_log_parse_level("info"), SDOG_INFO);
	ck_assert_int_eq(sd_log_parse_level("notice"), SDOG_NOTICE);
	ck_assert_int_eq(sd_log_parse_level("warn"), SDOG_WARNING);
	ck_assert_int_eq(sd_log_parse_level("warning"), SDOG_WARNING);
	ck_assert_int_eq(sd_log_parse_level("error"), SDOG_ERR);
	ck_assert_int_eq(sd_log_parse_level("err"), SDOG_ERR);
	ck_assert_int_eq(sd_log_parse_level("emerg"), SDOG_EMERG);
	ck_assert_int_eq(sd_log_parse_level("0"), 0);
	ck_assert_int_eq(sd_log_parse_level("7"), 7);
	ck_assert_int_eq(sd_log_parse_level("8"), -1);
	ck_assert_int_eq(sd_log_parse_level("77"), -1);
	ck_assert_int_eq(sd_log_parse_level(""), -1);
	ck_assert_int_eq(sd_log_parse_level("verbose"), -1);
}
END_TEST

START_TEST(test_line_format)
{
	char buf[4096];
	regex_t re;

	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	sd_info("hello %d", 42);
	slurp(buf, sizeof(buf));
	ck_assert_int_eq(regcomp(&re,
				 "^[A-Z][a-z][a-z] [ 0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\\."
				 "[0-9]{6} unit info test_line_format(_fn)?:[0-9]+ hello 42\n$",
				 REG_EXTENDED),
			 0);
	ck_assert_msg(regexec(&re, buf, 0, NULL, 0) == 0, "bad line: %s", buf);
	regfree(&re);
}
END_TEST

START_TEST(test_level_filter)
{
	char buf[4096];

	ck_assert_int_eq(sd_log_init(path, SDOG_NOTICE, "unit"), 0);
	sd_debug("not shown");
	sd_info("not shown");
	sd_notice("shown 1");
	sd_err("shown 2");
	slurp(buf, sizeof(buf));
	ck_assert_ptr_eq(strstr(buf, "not shown"), NULL);
	ck_assert_ptr_ne(strstr(buf, "notice test_level_filter"), NULL);
	ck_assert_ptr_ne(strstr(buf, "error test_level_filter"), NULL);
	ck_assert_ptr_ne(strstr(buf, "shown 2\n"), NULL);
}
END_TEST

static int nr_evaluated;

static int count_eval(void)
{
	return ++nr_evaluated;
}

START_TEST(test_level_checked_before_formatting)
{
	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	sd_debug("%d", count_eval());
	ck_assert_int_eq(nr_evaluated, 0);
	sd_info("%d", count_eval());
	ck_assert_int_eq(nr_evaluated, 1);
}
END_TEST

START_TEST(test_one_line_and_newline)
{
	char buf[8192], big[3000];
	size_t n;

	ck_assert_int_eq(sd_log_init(path, SDOG_DEBUG, "unit"), 0);
	sd_info("ends with newline\n");
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sd_info("%s", big);
	sd_info("after");
	n = slurp(buf, sizeof(buf));
	/* exactly three lines: no doubled newline, the long one truncated */
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	ck_assert_int_eq(lines, 3);
	ck_assert_int_eq(buf[n - 1], '\n');
	ck_assert_ptr_ne(strstr(buf, "after\n"), NULL);
	for (char *l = buf; *l; l = strchr(l, '\n') + 1)
		ck_assert_int_le(strchr(l, '\n') - l, 1023);
}
END_TEST

START_TEST(test_errno_kept)
{
	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	errno = EIO;
	sd_info("x");
	ck_assert_int_eq(errno, EIO);
}
END_TEST

START_TEST(test_init_bad_path)
{
	ck_assert_int_eq(sd_log_init("/nonexistent-dir/x/sheep.log", SDOG_INFO, "unit"), -ENOENT);
	ck_assert_int_eq(sd_log_init(NULL, SDOG_INFO, "unit"), 0);
}
END_TEST

/* a forged line in a client's string stays inside the one line logged */
START_TEST(test_client_string_escaped)
{
	char buf[4096];
	const char *evil = "evil\nNov 23 00:00:00 sheep emerg fake log line\r\x1b[2J\\x0a\t\x7f";

	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	sd_info("vdi '%s' created", evil);
	sd_info("next");
	slurp(buf, sizeof(buf));
	ck_assert_ptr_ne(strstr(buf, "vdi 'evil\\nNov 23 00:00:00 sheep emerg fake log line"
				     "\\r\\x1b[2J\\\\x0a\\t\\x7f' created\n"),
			 NULL);
	/* two lines, and the second starts with a time, not the forged text */
	ck_assert_ptr_eq(strstr(buf, "\nNov 23 00:00:00 sheep emerg"), NULL);
	ck_assert_int_eq(strchr(strchr(buf, '\n') + 1, '\n')[1], '\0');
}
END_TEST

/* escaping never overruns the line: a message of newlines is cut, one line */
START_TEST(test_escaped_long_message)
{
	char buf[8192], nl[1500];
	size_t n;
	int lines = 0;

	memset(nl, '\n', sizeof(nl) - 1);
	nl[sizeof(nl) - 1] = '\0';
	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	sd_info("%s", nl);
	n = slurp(buf, sizeof(buf));
	for (size_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	ck_assert_int_eq(lines, 1);
	ck_assert_int_le(n, 1024);
	ck_assert_int_eq(buf[n - 1], '\n');
	ck_assert_int_eq(buf[n - 2], 'n');
	ck_assert_int_eq(buf[n - 3], '\\');
}
END_TEST

static void log_flood(int times)
{
	for (int i = 0; i < times; i++)
		sd_log_ratelimited(60, SDOG_WARNING, "garbage from client %d", i);
}

/* a flood at one call site: one line, then the next says how many were dropped */
START_TEST(test_ratelimited)
{
	char buf[4096];
	struct sd_log_limit rl = { 0, 0 };

	ck_assert_int_eq(sd_log_init(path, SDOG_INFO, "unit"), 0);
	log_flood(1000);
	slurp(buf, sizeof(buf));
	ck_assert_ptr_ne(strstr(buf, "garbage from client 0\n"), NULL);
	ck_assert_ptr_eq(strstr(buf, "client 1"), NULL);

	/* the same limiter once its interval passed: the count rides along */
	for (int i = 0; i < 5; i++)
		sd_log_write_limited(&rl, 60, SDOG_WARNING, "f", 1, "event %d", i);
	rl.next_ns = 0; /* as if the interval were over */
	sd_log_write_limited(&rl, 60, SDOG_WARNING, "f", 1, "event %d", 5);
	slurp(buf, sizeof(buf));
	ck_assert_ptr_ne(strstr(buf, "event 0\n"), NULL);
	ck_assert_ptr_eq(strstr(buf, "event 1"), NULL);
	ck_assert_ptr_ne(strstr(buf, "event 5 (4 more like it in the last 60 s, not logged)\n"),
			 NULL);
	ck_assert_int_eq(rl.nr_suppressed, 0);
}
END_TEST

/* below the level, a rate-limited site neither logs nor counts */
START_TEST(test_ratelimited_level)
{
	char buf[256];

	ck_assert_int_eq(sd_log_init(path, SDOG_ERR, "unit"), 0);
	log_flood(10);
	ck_assert_int_eq(slurp(buf, sizeof(buf)), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("logger");
	TCase *tc = tcase_create("log");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_parse_level);
	tcase_add_test(tc, test_line_format);
	tcase_add_test(tc, test_level_filter);
	tcase_add_test(tc, test_level_checked_before_formatting);
	tcase_add_test(tc, test_one_line_and_newline);
	tcase_add_test(tc, test_errno_kept);
	tcase_add_test(tc, test_init_bad_path);
	tcase_add_test(tc, test_client_string_escaped);
	tcase_add_test(tc, test_escaped_long_message);
	tcase_add_test(tc, test_ratelimited);
	tcase_add_test(tc, test_ratelimited_level);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
