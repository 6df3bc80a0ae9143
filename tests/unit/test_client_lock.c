/*
 * Unit tests of sheep/client_lock.c: a lock bound to a client's
 * connections. It is released (the release callback) when the last of the
 * connections it is bound to closes, not before; the first candidate that
 * does I/O on the VDI narrows it (the control connection of QEMU's lock
 * closes at once; its I/O connection stays); a connection that was no
 * candidate (a tool on the same host reading the VDI) does not take it
 * over, but joins it once narrowed (a reopen's new I/O connection); a
 * client at another address changes nothing; a lock released or taken away
 * is forgotten; its token is found by name and address only.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_lock.h"
#include "logger.h"

static const uint8_t qemu_host[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 7 };
static const uint8_t other_host[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 8 };

static int nr_released;
static uint32_t released_vid;
static uint64_t released_token;
static char released_name[64];

static void on_release(uint32_t vid, const uint8_t addr[16], uint64_t token, const char *name)
{
	ck_assert(!memcmp(addr, qemu_host, 16));
	nr_released++;
	released_vid = vid;
	released_token = token;
	snprintf(released_name, sizeof(released_name), "%s", name);
}

static void setup(void)
{
	nr_released = 0;
	released_vid = 0;
	client_lock_init(on_release);
}

/* QEMU: I/O connection 10 opened first, the lock on control connection 11 */
static void qemu_locks(uint32_t vid)
{
	const uint64_t conns[] = { 10, 11 };

	client_lock_taken(vid, qemu_host, 11, "vm1", conns, 2);
}

START_TEST(test_released_when_the_client_is_gone)
{
	qemu_locks(0x42);
	client_lock_closed(11); /* the control connection */
	ck_assert_int_eq(nr_released, 0);
	client_lock_io(10, qemu_host, 0x42);
	client_lock_closed(10);
	ck_assert_int_eq(nr_released, 1);
	ck_assert_uint_eq(released_vid, 0x42);
	ck_assert_uint_eq(released_token, 11);
	ck_assert_str_eq(released_name, "vm1");
	/* forgotten: a later close of an unrelated connection releases nothing */
	client_lock_closed(10);
	ck_assert_int_eq(nr_released, 1);
}
END_TEST

START_TEST(test_not_narrowed_by_a_stranger)
{
	const uint64_t conns[] = { 0 };

	qemu_locks(0x42);
	client_lock_closed(11);
	/* collie on the same host reads the VDI on connection 20, then exits */
	client_lock_io(20, qemu_host, 0x42);
	client_lock_closed(20);
	ck_assert_int_eq(nr_released, 0);
	/* another host's client changes nothing either */
	client_lock_io(10, other_host, 0x42);
	ck_assert_int_eq(client_lock_conns(0x42, (uint64_t *)conns, 1), 1);
	/* QEMU's I/O connection goes: so does the lock */
	client_lock_closed(10);
	ck_assert_int_eq(nr_released, 1);
}
END_TEST

START_TEST(test_reopen_takes_over)
{
	uint64_t conns[4];

	qemu_locks(0x42);
	client_lock_closed(11);
	client_lock_io(10, qemu_host, 0x42);
	/* a reopen: new I/O connection 12 does I/O, then the old one closes */
	client_lock_io(12, qemu_host, 0x42);
	ck_assert_int_eq(client_lock_conns(0x42, conns, 4), 2);
	client_lock_closed(10);
	ck_assert_int_eq(nr_released, 0);
	client_lock_closed(12);
	ck_assert_int_eq(nr_released, 1);
}
END_TEST

START_TEST(test_dropped_and_token)
{
	qemu_locks(0x42);
	ck_assert_uint_eq(client_lock_token(0x42, qemu_host), 11);
	ck_assert_uint_eq(client_lock_token(0x42, other_host), 0);
	ck_assert_uint_eq(client_lock_token(0x43, qemu_host), 0);
	/* a snapshot of the same name, locked too: each release finds its own */
	qemu_locks(0x43);
	ck_assert_uint_eq(client_lock_token(0x43, qemu_host), 11);
	client_lock_dropped(0x43);
	/* a snapshot moved the lock to the new working VDI 0x44: its release finds it */
	client_lock_moved(0x42, 0x44);
	ck_assert_uint_eq(client_lock_token(0x42, qemu_host), 0);
	ck_assert_uint_eq(client_lock_token(0x44, qemu_host), 11);
	client_lock_moved(0x44, 0x42);
	/* released by its holder (or taken away): nothing left to release */
	client_lock_dropped(0x42);
	ck_assert_uint_eq(client_lock_token(0x42, qemu_host), 0);
	client_lock_closed(10);
	client_lock_closed(11);
	ck_assert_int_eq(nr_released, 0);
}
END_TEST

START_TEST(test_many_locks)
{
	/* 200 VMs of one host, each with its own connections: each goes alone */
	for (uint32_t v = 1; v <= 200; v++) {
		const uint64_t conns[] = { 1000 + v };

		client_lock_taken(v, qemu_host, 5000 + v, "vm", conns, 1);
	}
	for (uint32_t v = 1; v <= 200; v++)
		client_lock_io(1000 + v, qemu_host, v);
	client_lock_closed(1000 + 77);
	ck_assert_int_eq(nr_released, 1);
	ck_assert_uint_eq(released_vid, 77);
	ck_assert_uint_eq(released_token, 5077);
	for (uint32_t v = 1; v <= 200; v++)
		client_lock_closed(1000 + v);
	ck_assert_int_eq(nr_released, 200);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_lock");
	TCase *tc = tcase_create("bindings");
	SRunner *sr;
	int nr_failed;

	sd_log_init("/dev/null", SDOG_ERR, "test"); /* the releases are logged at info */
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_released_when_the_client_is_gone);
	tcase_add_test(tc, test_not_narrowed_by_a_stranger);
	tcase_add_test(tc, test_reopen_takes_over);
	tcase_add_test(tc, test_dropped_and_token);
	tcase_add_test(tc, test_many_locks);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
