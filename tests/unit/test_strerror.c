/* Unit tests of lib/strerror.c: the one table of result messages. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "util.h"

START_TEST(test_known_public)
{
	ck_assert_str_eq(sd_strerror(SD_RES_SUCCESS), "success");
	ck_assert_str_eq(sd_strerror(SD_RES_VDI_EXIST), "vdi exists already");
	ck_assert_str_eq(sd_strerror(SD_RES_NO_VDI), "no vdi found");
	ck_assert_str_eq(sd_strerror(SD_RES_INVALID_PARMS), "invalid parameters");
	ck_assert_str_eq(sd_strerror(SD_RES_WAIT_FOR_FORMAT), "cluster is not formatted");
	ck_assert_str_eq(sd_strerror(SD_RES_VDI_LOCKED), "vdi is locked");
}
END_TEST

START_TEST(test_every_code_has_message)
{
	/* every defined code, public 0x00-0x1a and internal 0x80-0x8b */
	for (int r = SD_RES_SUCCESS; r <= SD_RES_READONLY; r++) {
		const char *m = sd_strerror(r);

		ck_assert_ptr_ne(m, NULL);
		ck_assert_msg(strncmp(m, "unknown result code", 19) != 0, "no message for 0x%x",
			      r);
		ck_assert_msg(strlen(m) > 0 && strchr(m, '\n') == NULL, "bad message for 0x%x",
			      r);
	}
	for (int r = SD_RES_NO_SUPPORT; r <= SD_RES_BUFFER_SMALL; r++)
		ck_assert_msg(strncmp(sd_strerror(r), "unknown result code", 19) != 0,
			      "no message for 0x%x", r);
	/* the codes past 0x8b (unit/strerror-codes.sh checks every one in the tree) */
	ck_assert_str_eq(sd_strerror(SD_RES_NO_TRACER), "no such tracer");
	ck_assert_str_eq(sd_strerror(SD_RES_NETWORK), "cannot reach a peer node");
}
END_TEST

START_TEST(test_messages_distinct)
{
	/* only NOT_FORMATTED is an alias of WAIT_FOR_FORMAT */
	for (int a = 0; a <= SD_RES_INVALID_VERSION; a++) {
		for (int b = a + 1; b <= SD_RES_INVALID_VERSION; b++) {
			const char *ma = sd_strerror(a), *mb;

			if (a == SD_RES_WAIT_FOR_FORMAT && b == SD_RES_NOT_FORMATTED)
				continue;
			if (!strncmp(ma, "unknown result code", 19))
				continue;
			mb = sd_strerror(b);
			ck_assert_msg(strcmp(ma, mb) != 0, "0x%x and 0x%x share \"%s\"", a, b, ma);
		}
	}
}
END_TEST

START_TEST(test_unknown_codes)
{
	ck_assert_str_eq(sd_strerror(0x1b), "unknown result code 0x1b");
	ck_assert_str_eq(sd_strerror(0x7f), "unknown result code 0x7f");
	ck_assert_str_eq(sd_strerror(0xfe), "unknown result code 0xfe");
	ck_assert_str_eq(sd_strerror(0x12345678), "unknown result code 0x12345678");
	ck_assert_str_eq(sd_strerror(-1), "unknown result code 0xffffffff");
	ck_assert_str_eq(sd_strerror(-2147483647 - 1), "unknown result code 0x80000000");
}
END_TEST

static void *other_thread(void *arg)
{
	return (void *)sd_strerror(0x99);
}

START_TEST(test_unknown_per_thread)
{
	/* the buffer for unknown codes is per thread */
	pthread_t t;
	void *ret;
	const char *mine = sd_strerror(0x98);

	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_str_eq(mine, "unknown result code 0x98");
	ck_assert_ptr_ne(mine, ret);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("strerror");
	TCase *tc = tcase_create("table");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_known_public);
	tcase_add_test(tc, test_every_code_has_message);
	tcase_add_test(tc, test_messages_distinct);
	tcase_add_test(tc, test_unknown_codes);
	tcase_add_test(tc, test_unknown_per_thread);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
