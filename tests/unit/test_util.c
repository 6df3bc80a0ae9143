/* Unit tests of lib/util.c: size and integer parsing, whole reads/writes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

struct size_case {
	const char *s;
	int ret;
	uint64_t val;
};

static const struct size_case size_cases[] = {
	{ "0", 0, 0 },
	{ "1", 0, 1 },
	{ "512", 0, 512 },
	{ "1B", 0, 1 },
	{ "1K", 0, 1024 },
	{ "1k", 0, 1024 },
	{ "1KB", 0, 1024 },
	{ "1KiB", 0, 1024 },
	{ "1kib", 0, 1024 },
	{ "10M", 0, 10ULL << 20 },
	{ "10MB", 0, 10ULL << 20 },
	{ "10MiB", 0, 10ULL << 20 },
	{ "1G", 0, 1ULL << 30 },
	{ "1GB", 0, 1ULL << 30 },
	{ "1GiB", 0, 1ULL << 30 },
	{ "4T", 0, 4ULL << 40 },
	{ "4TiB", 0, 4ULL << 40 },
	{ "16777215T", 0, 16777215ULL << 40 },
	{ "18446744073709551615", 0, UINT64_MAX },
	/* overflow */
	{ "16777216T", -ERANGE, 0 },
	{ "17179869184G", -ERANGE, 0 },
	{ "18446744073709551616", -ERANGE, 0 },
	{ "99999999999999999999999", -ERANGE, 0 },
	/* junk */
	{ "", -EINVAL, 0 },
	{ "K", -EINVAL, 0 },
	{ "12Q", -EINVAL, 0 },
	{ "-1", -EINVAL, 0 },
	{ "+1", -EINVAL, 0 },
	{ " 1", -EINVAL, 0 },
	{ "1 ", -EINVAL, 0 },
	{ "1 K", -EINVAL, 0 },
	{ "1.5G", -EINVAL, 0 },
	{ "0x10", -EINVAL, 0 },
	{ "1KK", -EINVAL, 0 },
	{ "1KBB", -EINVAL, 0 },
	{ "1BB", -EINVAL, 0 },
	{ "1iB", -EINVAL, 0 },
	{ "1Gx", -EINVAL, 0 },
	{ "abc", -EINVAL, 0 },
};

START_TEST(test_parse_size)
{
	const struct size_case *c = &size_cases[_i];
	uint64_t v = 0xdeadbeef;
	int ret = sd_parse_size(c->s, &v);

	ck_assert_msg(ret == c->ret, "sd_parse_size(\"%s\") returned %d, expected %d", c->s, ret,
		      c->ret);
	if (c->ret == 0)
		ck_assert_msg(v == c->val, "sd_parse_size(\"%s\") gave %llu, expected %llu", c->s,
			      (unsigned long long)v, (unsigned long long)c->val);
	else
		ck_assert_msg(v == 0xdeadbeef, "sd_parse_size(\"%s\") wrote *out on error", c->s);
}
END_TEST

START_TEST(test_parse_size_null)
{
	uint64_t v;

	ck_assert_int_eq(sd_parse_size(NULL, &v), -EINVAL);
}
END_TEST

struct uint_case {
	const char *s;
	uint64_t min, max;
	int ret;
	uint64_t val;
};

static const struct uint_case uint_cases[] = {
	{ "0", 0, 10, 0, 0 },
	{ "10", 0, 10, 0, 10 },
	{ "11", 0, 10, -ERANGE, 0 },
	{ "4", 5, 10, -ERANGE, 0 },
	{ "5", 5, 10, 0, 5 },
	{ "007", 0, 10, 0, 7 },
	{ "18446744073709551615", 0, UINT64_MAX, 0, UINT64_MAX },
	{ "18446744073709551616", 0, UINT64_MAX, -ERANGE, 0 },
	{ "", 0, 10, -EINVAL, 0 },
	{ "-1", 0, 10, -EINVAL, 0 },
	{ "+1", 0, 10, -EINVAL, 0 },
	{ " 1", 0, 10, -EINVAL, 0 },
	{ "\t1", 0, 10, -EINVAL, 0 },
	{ "\n1", 0, 10, -EINVAL, 0 },
	{ "1 ", 0, 10, -EINVAL, 0 },
	{ "1x", 0, 10, -EINVAL, 0 },
	{ "0x1", 0, 10, -EINVAL, 0 },
	{ "1K", 0, 10000, -EINVAL, 0 },
};

START_TEST(test_parse_uint)
{
	const struct uint_case *c = &uint_cases[_i];
	uint64_t v = 0xdeadbeef;
	int ret = sd_parse_uint(c->s, c->min, c->max, &v);

	ck_assert_msg(ret == c->ret, "sd_parse_uint(\"%s\", %llu, %llu) returned %d, expected %d",
		      c->s, (unsigned long long)c->min, (unsigned long long)c->max, ret, c->ret);
	if (c->ret == 0)
		ck_assert_msg(v == c->val, "sd_parse_uint(\"%s\") gave %llu", c->s,
			      (unsigned long long)v);
}
END_TEST

struct str_case {
	uint64_t size;
	const char *str;
};

static const struct str_case str_cases[] = {
	{ 0, "0 B" },
	{ 1, "1 B" },
	{ 512, "512 B" },
	{ 1023, "1023 B" },
	{ 1024, "1.0 KB" },
	{ 1536, "1.5 KB" },
	{ 10240, "10 KB" },
	{ 1ULL << 20, "1.0 MB" },
	{ 10ULL << 20, "10 MB" },
	{ 100ULL << 20, "100 MB" },
	{ 1ULL << 30, "1.0 GB" },
	{ 4ULL << 40, "4.0 TB" },
	{ 1ULL << 50, "1.0 PB" },
	{ 2048ULL << 50, "2048 PB" },
};

START_TEST(test_size_to_str)
{
	char buf[32];

	sd_size_to_str(str_cases[_i].size, buf, sizeof(buf));
	ck_assert_str_eq(buf, str_cases[_i].str);
}
END_TEST

START_TEST(test_size_to_str_truncates)
{
	char buf[4];

	memset(buf, 'x', sizeof(buf));
	sd_size_to_str(1ULL << 30, buf, sizeof(buf));
	ck_assert_msg(memchr(buf, '\0', sizeof(buf)) != NULL, "not NUL-terminated");
	ck_assert_str_eq(buf, "1.0");
}
END_TEST

START_TEST(test_round_trip)
{
	/* what collie prints for a created VDI parses back to the same size */
	static const char *in[] = { "1G", "10M", "4T", "512" };

	for (size_t i = 0; i < ARRAY_SIZE(in); i++) {
		uint64_t v;
		char buf[32];

		ck_assert_int_eq(sd_parse_size(in[i], &v), 0);
		sd_size_to_str(v, buf, sizeof(buf));
		ck_assert_msg(strlen(buf) > 0, "empty string for %s", in[i]);
	}
}
END_TEST

START_TEST(test_read_write_full_pipe)
{
	int p[2];
	char out[100000], in[100000];
	pid_t pid;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + 3);
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		/* dribble: many short writes */
		for (size_t off = 0; off < sizeof(out); off += 977) {
			size_t n = sizeof(out) - off < 977 ? sizeof(out) - off : 977;
			if (sd_write_full(p[1], out + off, n))
				_exit(1);
		}
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(sd_read_full(p[0], in, sizeof(in)), 0);
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	/* the writer is gone: EOF is -ECONNRESET */
	ck_assert_int_eq(sd_read_full(p[0], in, 1), -ECONNRESET);
	close(p[0]);
}
END_TEST

/* three buffers through a pipe smaller than they are: writev's short writes resume mid-buffer */
START_TEST(test_writev_full_pipe)
{
	static char out[3][70001], in[sizeof(out)];
	struct iovec iov[4];
	int p[2], status;
	pid_t pid;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i / sizeof(out[0])][i % sizeof(out[0])] = (char)(i * 13 + 5);
	for (int i = 0; i < 3; i++)
		iov[i] = (struct iovec){ out[i], sizeof(out[i]) };
	iov[3] = (struct iovec){ NULL, 0 }; /* an empty one at the end is no write */
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		_exit(sd_writev_full(p[1], iov, 4) ? 1 : 0);
	}
	close(p[1]);
	ck_assert_int_eq(sd_read_full(p[0], in, sizeof(in)), 0);
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	ck_assert_int_eq(sd_read_full(p[0], in, 1), -ECONNRESET);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(sd_writev_full(-1, iov, 1), -EBADF);
	ck_assert_int_eq(sd_writev_full(-1, iov, 0), 0);
}
END_TEST

START_TEST(test_read_full_bad_fd)
{
	char c;

	ck_assert_int_eq(sd_read_full(-1, &c, 1), -EBADF);
	ck_assert_int_eq(sd_write_full(-1, &c, 1), -EBADF);
	ck_assert_int_eq(sd_read_full(-1, &c, 0), 0);
}
END_TEST

static int tmpfile_fd(char *path)
{
	strcpy(path, "/tmp/sd-test-XXXXXX");
	return mkstemp(path);
}

START_TEST(test_pread_pwrite_full)
{
	char path[64], buf[8192], zero[4096] = { 0 };
	int fd = tmpfile_fd(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	memset(buf, 0xab, sizeof(buf));
	ck_assert_int_eq(sd_pwrite_full(fd, buf, 4096, 4096), 0);
	/* the hole before the write reads as zeros */
	memset(buf, 1, sizeof(buf));
	ck_assert_int_eq(sd_pread_full(fd, buf, 4096, 0), 0);
	ck_assert_int_eq(memcmp(buf, zero, 4096), 0);
	/* a read straddling EOF is zero-filled past it */
	memset(buf, 1, sizeof(buf));
	ck_assert_int_eq(sd_pread_full(fd, buf, 8192, 4096), 0);
	for (int i = 0; i < 4096; i++)
		ck_assert_int_eq((unsigned char)buf[i], 0xab);
	ck_assert_int_eq(memcmp(buf + 4096, zero, 4096), 0);
	/* wholly past EOF */
	memset(buf, 1, sizeof(buf));
	ck_assert_int_eq(sd_pread_full(fd, buf, 100, 1 << 20), 0);
	ck_assert_int_eq(memcmp(buf, zero, 100), 0);
	close(fd);
	ck_assert_int_eq(sd_pread_full(fd, buf, 10, 0), -EBADF);
	ck_assert_int_eq(sd_pwrite_full(fd, buf, 10, 0), -EBADF);
}
END_TEST

START_TEST(test_mkdir_p)
{
	char base[] = "/tmp/sd-mkdir-XXXXXX", path[256];
	struct stat st;

	ck_assert_ptr_ne(mkdtemp(base), NULL);
	snprintf(path, sizeof(path), "%s/a/b/c", base);
	ck_assert_int_eq(sd_mkdir_p(path, 0755), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* again: it exists, fine */
	ck_assert_int_eq(sd_mkdir_p(path, 0755), 0);
	/* trailing slash */
	snprintf(path, sizeof(path), "%s/a/d/", base);
	ck_assert_int_eq(sd_mkdir_p(path, 0755), 0);
	/* a file in the way */
	snprintf(path, sizeof(path), "%s/f", base);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	snprintf(path, sizeof(path), "%s/f/x", base);
	ck_assert_int_eq(sd_mkdir_p(path, 0755), -ENOTDIR);
	ck_assert_int_eq(sd_mkdir_p("", 0755), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "rm -rf %s", base);
	ck_assert_int_eq(system(path), 0);
}
END_TEST

START_TEST(test_now_ns)
{
	uint64_t a = sd_now_ns(), b;

	usleep(2000);
	b = sd_now_ns();
	ck_assert_msg(b > a && b - a >= 2000000ULL && b - a < 2000000000ULL, "clock went %llu",
		      (unsigned long long)(b - a));
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("parse");

	tcase_add_loop_test(tc, test_parse_size, 0, ARRAY_SIZE(size_cases));
	tcase_add_test(tc, test_parse_size_null);
	tcase_add_loop_test(tc, test_parse_uint, 0, ARRAY_SIZE(uint_cases));
	tcase_add_loop_test(tc, test_size_to_str, 0, ARRAY_SIZE(str_cases));
	tcase_add_test(tc, test_size_to_str_truncates);
	tcase_add_test(tc, test_round_trip);
	suite_add_tcase(s, tc);

	tc = tcase_create("io");
	tcase_add_test(tc, test_read_write_full_pipe);
	tcase_add_test(tc, test_writev_full_pipe);
	tcase_add_test(tc, test_read_full_bad_fd);
	tcase_add_test(tc, test_pread_pwrite_full);
	tcase_add_test(tc, test_mkdir_p);
	tcase_add_test(tc, test_now_ns);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(util_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
