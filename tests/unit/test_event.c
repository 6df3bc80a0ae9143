/* Unit tests of lib/event.c: registration and dispatch on pipes. */
#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/timerfd.h>

#include "event.h"
#include "util.h"

struct hit {
	int nr;
	int fd;
	uint32_t events;
	int del_fd; /* ev_del this fd from inside the handler (-1: none) */
	int drain;
};

static void handler(int fd, uint32_t events, void *data)
{
	struct hit *h = data;
	char buf[64];

	h->nr++;
	h->fd = fd;
	h->events = events;
	if (h->drain)
		(void)!read(fd, buf, sizeof(buf));
	if (h->del_fd >= 0)
		ev_del(h->del_fd);
}

static void setup(void)
{
	/* each test runs in its own forked process: a fresh loop each time */
	ck_assert_int_eq(ev_init(16), 0);
}

START_TEST(test_add_dispatch_del)
{
	int p[2];
	struct hit h = { .del_fd = -1, .drain = 1 };

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h), 0);
	/* nothing to read: no call */
	ck_assert_int_eq(ev_loop_once(0), 0);
	ck_assert_int_eq(h.nr, 0);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h.nr, 1);
	ck_assert_int_eq(h.fd, p[0]);
	ck_assert(h.events & EPOLLIN);
	/* drained: quiet again */
	ck_assert_int_eq(ev_loop_once(0), 0);
	ck_assert_int_eq(h.nr, 1);
	/* deleted: no more calls even with data pending */
	ev_del(p[0]);
	ck_assert_int_eq(write(p[1], "y", 1), 1);
	ck_assert_int_eq(ev_loop_once(50), 0);
	ck_assert_int_eq(h.nr, 1);
	/* and it can be added again */
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h), 0);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h.nr, 2);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_modify)
{
	int p[2];
	struct hit h = { .del_fd = -1 };

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ev_add(p[1], 0, handler, &h), 0);
	ck_assert_int_eq(ev_loop_once(0), 0);
	ck_assert_int_eq(h.nr, 0);
	ck_assert_int_eq(ev_modify(p[1], EPOLLOUT), 0);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h.nr, 1);
	ck_assert(h.events & EPOLLOUT);
	ck_assert_int_eq(ev_modify(p[0], EPOLLIN), -ENOENT);
	ev_del(p[1]);
	ck_assert_int_eq(ev_modify(p[1], EPOLLOUT), -ENOENT);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_hangup)
{
	int p[2];
	struct hit h = { .del_fd = -1 };

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h), 0);
	close(p[1]);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h.nr, 1);
	ck_assert(h.events & (EPOLLHUP | EPOLLIN));
	ev_del(p[0]);
	close(p[0]);
}
END_TEST

START_TEST(test_del_other_inside_handler)
{
	/* two ready fds; whichever runs first deletes the other: one call only */
	int a[2], b[2];
	struct hit ha = { .del_fd = -1 }, hb = { .del_fd = -1 };

	ck_assert_int_eq(pipe(a), 0);
	ck_assert_int_eq(pipe(b), 0);
	ha.del_fd = b[0];
	hb.del_fd = a[0];
	ck_assert_int_eq(ev_add(a[0], EPOLLIN, handler, &ha), 0);
	ck_assert_int_eq(ev_add(b[0], EPOLLIN, handler, &hb), 0);
	ck_assert_int_eq(write(a[1], "x", 1), 1);
	ck_assert_int_eq(write(b[1], "x", 1), 1);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(ha.nr + hb.nr, 1);
}
END_TEST

struct reuse {
	int victim;	/* fd to close and reuse from inside the handler */
	int pipe_w[2];
	int nr;
	struct hit *fresh;
};

static void reuse_handler(int fd, uint32_t events, void *data)
{
	struct reuse *r = data;
	int p[2];

	r->nr++;
	if (r->victim < 0)
		return;
	/* close the other ready fd and get the same number back at once */
	ev_del(r->victim);
	close(r->victim);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(p[0], r->victim);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, r->fresh), 0);
	r->victim = -1;
}

START_TEST(test_reused_fd_not_dispatched_stale)
{
	/*
	 * The stale event of a deleted fd must not reach the handler of a new
	 * registration that got the same fd number in the same round.
	 */
	int a[2], b[2];
	struct hit fresh = { .del_fd = -1 };
	struct reuse ra = { .fresh = &fresh }, rb = { .fresh = &fresh };

	ck_assert_int_eq(pipe(a), 0);
	ck_assert_int_eq(pipe(b), 0);
	ra.victim = b[0];
	rb.victim = a[0];
	ck_assert_int_eq(ev_add(a[0], EPOLLIN, reuse_handler, &ra), 0);
	ck_assert_int_eq(ev_add(b[0], EPOLLIN, reuse_handler, &rb), 0);
	ck_assert_int_eq(write(a[1], "x", 1), 1);
	ck_assert_int_eq(write(b[1], "x", 1), 1);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(ra.nr + rb.nr, 1);
	ck_assert_int_eq(fresh.nr, 0);
}
END_TEST

START_TEST(test_many_fds)
{
	/* more fds than the initial slot table and than max_events per round */
	enum { N = 100 };
	int p[N][2];
	struct hit h[N];
	int total = 0;

	memset(h, 0, sizeof(h));
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(pipe(p[i]), 0);
		h[i].del_fd = -1;
		h[i].drain = 1;
		ck_assert_int_eq(ev_add(p[i][0], EPOLLIN, handler, &h[i]), 0);
		ck_assert_int_eq(write(p[i][1], "x", 1), 1);
	}
	for (int round = 0; round < 20 && total < N; round++) {
		ck_assert_int_eq(ev_loop_once(100), 0);
		total = 0;
		for (int i = 0; i < N; i++)
			total += h[i].nr;
	}
	for (int i = 0; i < N; i++)
		ck_assert_msg(h[i].nr == 1, "fd %d dispatched %d times", p[i][0], h[i].nr);
}
END_TEST

START_TEST(test_add_twice_keeps_first)
{
	/*
	 * Adding an fd that is already registered fails; the failed call
	 * must leave the existing registration working.
	 */
	int p[2];
	struct hit h1 = { .del_fd = -1, .drain = 1 }, h2 = { .del_fd = -1, .drain = 1 };

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h1), 0);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h2), -EEXIST);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_msg(h1.nr == 1, "the first handler was lost after a failed ev_add (%d calls)",
		      h1.nr);
	ck_assert_int_eq(h2.nr, 0);
}
END_TEST

START_TEST(test_add_bad_fd)
{
	struct hit h = { .del_fd = -1 };

	/* a negative fd must be refused, not index the slot table */
	ck_assert_int_eq(ev_add(-1, EPOLLIN, handler, &h), -EBADF);
	ck_assert_int_eq(ev_add(1000, EPOLLIN, handler, &h), -EBADF);
	ev_del(-1);
	ev_del(12345);
}
END_TEST

START_TEST(test_add_regular_file)
{
	/* epoll refuses regular files: the error is returned, no slot kept */
	char path[] = "/tmp/sd-ev-XXXXXX";
	int fd = mkstemp(path);
	struct hit h = { .del_fd = -1 };

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ev_add(fd, EPOLLIN, handler, &h), -EPERM);
	ck_assert_int_eq(ev_modify(fd, EPOLLIN), -ENOENT);
	close(fd);
}
END_TEST

START_TEST(test_timer)
{
	/* not armed: quiet; armed for 10 ms: one call, then quiet once drained */
	struct hit h = { .del_fd = -1, .drain = 1 };
	struct itimerspec its = { .it_value = { 0, 10 * 1000000L } };
	int fd = ev_timer(handler, &h);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ev_loop_once(50), 0);
	ck_assert_int_eq(h.nr, 0);
	ck_assert_int_eq(timerfd_settime(fd, 0, &its, NULL), 0);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h.nr, 1);
	ck_assert_int_eq(h.fd, fd);
	ck_assert_int_eq(ev_loop_once(50), 0);
	ck_assert_int_eq(h.nr, 1);
	ev_del(fd);
	close(fd);
}
END_TEST

static int ok_calls;
static bool ok_answer;

static bool poll_ok(void)
{
	ok_calls++;
	return ok_answer;
}

static uint64_t ms_since(uint64_t t0)
{
	return (sd_now_ns() - t0) / 1000000;
}

/* one round that dispatches something: the next one counts as busy */
static void busy_round(int fd, struct hit *h)
{
	int nr = h->nr;

	ck_assert_int_eq(write(fd, "x", 1), 1);
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(h->nr, nr + 1);
}

START_TEST(test_busy_poll)
{
	struct hit h = { .del_fd = -1, .drain = 1 }, th = { .del_fd = -1, .drain = 1 };
	struct itimerspec its = { .it_value = { 0, 20 * 1000000L } };
	int p[2], tfd, calls;
	uint64_t t0;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ev_add(p[0], EPOLLIN, handler, &h), 0);
	ev_set_busy_poll(300000, poll_ok); /* 300 ms: longer than any wait below */

	/* a first round is not after a busy one: ok is not asked */
	busy_round(p[1], &h);
	ck_assert_int_eq(ok_calls, 0);

	/* after a busy round, polled while ok says so: the poll's 300 ms pass first */
	ok_answer = true;
	t0 = sd_now_ns();
	ck_assert_int_eq(ev_loop_once(10), 0);
	ck_assert_uint_ge(ms_since(t0), 300);
	ck_assert_int_eq(ok_calls, 1);
	/* that round found nothing: the next is not polled, ok not asked */
	ck_assert_int_eq(ev_loop_once(10), 0);
	ck_assert_int_eq(ok_calls, 1);

	/* ok says no: a plain wait of 10 ms */
	busy_round(p[1], &h);
	ok_answer = false;
	calls = ok_calls;
	t0 = sd_now_ns();
	ck_assert_int_eq(ev_loop_once(10), 0);
	ck_assert_uint_lt(ms_since(t0), 250);
	ck_assert_int_eq(ok_calls, calls + 1);

	/* an event that comes while it polls is dispatched then, not after the poll */
	tfd = ev_timer(handler, &th);
	ck_assert_int_ge(tfd, 0);
	busy_round(p[1], &h);
	ok_answer = true;
	ck_assert_int_eq(timerfd_settime(tfd, 0, &its, NULL), 0);
	t0 = sd_now_ns();
	ck_assert_int_eq(ev_loop_once(1000), 0);
	ck_assert_int_eq(th.nr, 1);
	ck_assert_uint_lt(ms_since(t0), 250);

	/* a round with timeout 0 never polls */
	calls = ok_calls;
	ck_assert_int_eq(ev_loop_once(0), 0);
	ck_assert_int_eq(ok_calls, calls);

	/* off again: never asked */
	ev_set_busy_poll(0, poll_ok);
	busy_round(p[1], &h);
	calls = ok_calls;
	ck_assert_int_eq(ev_loop_once(10), 0);
	ck_assert_int_eq(ok_calls, calls);
	ev_del(tfd);
	close(tfd);
	close(p[0]);
	close(p[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("event");
	TCase *tc = tcase_create("loop");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_add_dispatch_del);
	tcase_add_test(tc, test_modify);
	tcase_add_test(tc, test_hangup);
	tcase_add_test(tc, test_del_other_inside_handler);
	tcase_add_test(tc, test_reused_fd_not_dispatched_stale);
	tcase_add_test(tc, test_many_fds);
	tcase_add_test(tc, test_add_twice_keeps_first);
	tcase_add_test(tc, test_add_bad_fd);
	tcase_add_test(tc, test_add_regular_file);
	tcase_add_test(tc, test_timer);
	tcase_add_test(tc, test_busy_poll);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
