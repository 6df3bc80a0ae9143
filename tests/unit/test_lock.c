/*
 * Unit tests of sheep/lock.h: a lock call that fails aborts the daemon
 * (with a log line) instead of going on with a corrupted lock; one that
 * succeeds costs nothing more.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "lock.h"

START_TEST(test_ok_paths)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	sd_rw_rdlock(&rw);
	sd_rw_rdlock(&rw); /* readers share */
	sd_rw_unlock(&rw);
	sd_rw_unlock(&rw);
	sd_rw_wrlock(&rw);
	sd_rw_unlock(&rw);
	sd_mutex_lock(&m);
	sd_mutex_unlock(&m);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), 0);
	ck_assert_int_eq(pthread_mutex_trylock(&m), 0);
}
END_TEST

/* the wedge of issue 8: a read lock taken under the thread's own write lock */
START_TEST(test_rdlock_under_wrlock_aborts)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	sd_rw_wrlock(&rw);
	sd_rw_rdlock(&rw); /* EDEADLK */
}
END_TEST

START_TEST(test_wrlock_twice_aborts)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	sd_rw_wrlock(&rw);
	sd_rw_wrlock(&rw); /* EDEADLK */
}
END_TEST

START_TEST(test_errorcheck_mutex_aborts)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&m, &a);
	sd_mutex_unlock(&m); /* EPERM: not held */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("checked");
	SRunner *sr;
	int failed;

	sd_log_init(NULL, SDOG_EMERG, "test_lock");
	tcase_add_test(tc, test_ok_paths);
	tcase_add_test_raise_signal(tc, test_rdlock_under_wrlock_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_wrlock_twice_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_errorcheck_mutex_aborts, SIGABRT);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
