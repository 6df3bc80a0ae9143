/*
 * Unit tests of sheep/peer_io.c's fan-out against fake peers on loopback
 * (a thread per connection, each peer with its own behaviour):
 * - the caller's work in short steps (peer_fanout_work, sliced) runs while
 *   a send is still pending: a peer that takes none of a large payload
 *   until the work is over gets it whole afterwards, and both nodes
 *   answer; a work of long steps waits until every node has its request;
 * - a peer that cuts its connection in the middle of the payload gets
 *   SD_RES_NETWORK, the other node its answer, and the work still runs to
 *   its end;
 * - a cached socket that the peer closed meanwhile is retried once on a
 *   new connection;
 * - peer_abort_all, called while a peer takes nothing, ends the fan-out at
 *   once with SD_RES_NETWORK for that peer;
 * - a node with an io address (sheep --io-addr) is connected there.
 * Each test runs in its own process (Check's fork mode): the connection
 * cache starts empty.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "internal_proto.h"
#include "net.h"
#include "peer_io.h"
#include "stat.h"

#define BIG (64U << 20) /* far more than two sockets' buffers hold */

enum peer_mode {
	PEER_OK,     /* read the request, check it, answer */
	PEER_HOLD,   /* read the header, take no payload until released */
	PEER_CUT,    /* read the header and half the payload, then close */
	PEER_SILENT, /* read the header, then take nothing more */
	PEER_ONCE,   /* as PEER_OK, then close the connection */
};

struct peer {
	int listen_fd;
	uint16_t port;
	enum peer_mode mode;
	pthread_t thread;
	struct sd_node_id nid;
	/* atomics */
	uint64_t got;	 /* payload bytes read, over every connection */
	int nr_conns;	 /* connections accepted */
	int nr_ok;	 /* requests answered with their payload intact */
	bool released;	 /* PEER_HOLD: take the payload now */
	int hold_ms;	 /* PEER_HOLD: or after this long (default 10 s) */
};

static struct peer peers[2];

/* ---- group.c's side: a member's io address (sheep --io-addr), for one nid ---- */
static struct sd_node_id io_from, io_to;
static bool io_set;

bool group_io_endpoint(const struct sd_node_id *nid, struct sd_node_id *to)
{
	if (!io_set || memcmp(nid, &io_from, sizeof(*nid)))
		return false;
	*to = io_to;
	return true;
}

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 12));
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

struct conn {
	struct peer *p;
	int fd;
};

/* read len bytes of payload, counting them and checking them against pattern */
static bool take(struct peer *p, int fd, uint64_t *off, uint64_t len, bool *intact)
{
	static __thread char buf[1 << 16];

	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);
		ssize_t r = read(fd, buf, n);

		if (r <= 0)
			return false;
		for (ssize_t i = 0; i < r; i++)
			if ((uint8_t)buf[i] != pattern(*off + (uint64_t)i))
				*intact = false;
		*off += (uint64_t)r;
		len -= (uint64_t)r;
		__atomic_fetch_add(&p->got, (uint64_t)r, __ATOMIC_RELAXED);
	}
	return true;
}

static void *peer_conn(void *arg)
{
	struct conn *cn = arg;
	struct peer *p = cn->p;
	int fd = cn->fd;
	struct sd_req rq;

	free(cn);
	while (!sd_read_full(fd, &rq, sizeof(rq))) {
		struct sd_rsp rsp = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = rq.opcode };
		uint64_t off = 0, len = (rq.flags & SD_FLAG_CMD_WRITE) ? rq.data_length : 0;
		bool intact = true;

		if (p->mode == PEER_SILENT) {
			/* past the fan-out's timeout: only a cut ends it sooner */
			sleep_ms(40000);
			break;
		}
		if (p->mode == PEER_HOLD)
			/* bounded: without a fan-out that works meanwhile, never released */
			for (int i = 0; i < (p->hold_ms ? p->hold_ms : 10000) / 10 &&
					!__atomic_load_n(&p->released, __ATOMIC_ACQUIRE);
			     i++)
				sleep_ms(10);
		if (p->mode == PEER_CUT) {
			take(p, fd, &off, len / 2, &intact);
			break;
		}
		if (!take(p, fd, &off, len, &intact))
			break;
		if (intact && off == len)
			__atomic_fetch_add(&p->nr_ok, 1, __ATOMIC_RELAXED);
		rsp.result = intact ? SD_RES_SUCCESS : SD_RES_EIO;
		if (sd_write_full(fd, &rsp, sizeof(rsp)) || p->mode == PEER_ONCE)
			break;
	}
	close(fd);
	return NULL;
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	int fd;

	while ((fd = accept(p->listen_fd, NULL, NULL)) >= 0) {
		struct conn *cn = malloc(sizeof(*cn));
		pthread_t t;

		__atomic_fetch_add(&p->nr_conns, 1, __ATOMIC_RELAXED);
		if (!cn) {
			close(fd);
			continue;
		}
		*cn = (struct conn){ p, fd };
		if (pthread_create(&t, NULL, peer_conn, cn)) {
			close(fd);
			free(cn);
		} else {
			pthread_detach(t);
		}
	}
	return NULL;
}

static void start_peer(struct peer *p, enum peer_mode mode)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int on = 1;

	memset(p, 0, sizeof(*p));
	p->mode = mode;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(p->listen_fd, 0);
	setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	ck_assert_int_eq(bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(p->listen_fd, 16), 0);
	ck_assert_int_eq(getsockname(p->listen_fd, (struct sockaddr *)&sa, &len), 0);
	p->port = ntohs(sa.sin_port);
	p->nid.addr[10] = 0xff;
	p->nid.addr[11] = 0xff;
	p->nid.addr[12] = 127;
	p->nid.addr[15] = 1;
	p->nid.port = p->port;
	ck_assert_int_eq(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static char *payload(uint32_t len)
{
	char *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (char)pattern(i);
	return buf;
}

static void make_write(struct sd_req *rq, uint32_t len)
{
	memset(rq, 0, sizeof(*rq));
	rq->proto_ver = SD_SHEEP_PROTO_VER;
	rq->opcode = SD_OP_WRITE_PEER;
	rq->flags = SD_FLAG_CMD_WRITE;
	rq->data_length = len;
	rq->obj.oid = 1;
}

/* the caller's work: NR_STEPS steps, each noting what peers[0] had taken by then */
#define NR_STEPS 4
struct fan_work {
	int steps;
	uint64_t got_at[NR_STEPS];
	void (*last)(void); /* run by the last step */
};

static bool work_step(void *arg)
{
	struct fan_work *w = arg;

	w->got_at[w->steps] = __atomic_load_n(&peers[0].got, __ATOMIC_RELAXED);
	if (++w->steps < NR_STEPS)
		return true;
	if (w->last)
		w->last();
	return false;
}

static void release_peer0(void)
{
	__atomic_store_n(&peers[0].released, true, __ATOMIC_RELEASE);
}

START_TEST(test_work_while_sends_pend)
{
	struct peer_call calls[2] = { { .nid = &peers[0].nid }, { .nid = &peers[1].nid } };
	struct fan_work w = { .last = release_peer0 };
	struct peer_work pw = { work_step, &w, true };
	char *buf = payload(BIG);
	struct sd_req rq;

	start_peer(&peers[0], PEER_HOLD);
	start_peer(&peers[1], PEER_OK);
	make_write(&rq, BIG);
	peer_fanout_work(&rq, buf, calls, 2, &pw);
	ck_assert_int_eq(w.steps, NR_STEPS);
	/* every step ran while peers[0] had none of the payload yet */
	for (int i = 0; i < NR_STEPS; i++)
		ck_assert_uint_eq(w.got_at[i], 0);
	/* and it got all of it once the work was over */
	ck_assert_int_eq(calls[0].result, SD_RES_SUCCESS);
	ck_assert_int_eq(calls[1].result, SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_ok, __ATOMIC_RELAXED), 1);
	ck_assert_int_eq(__atomic_load_n(&peers[1].nr_ok, __ATOMIC_RELAXED), 1);
	free(buf);
}
END_TEST

/* a work of long steps starts once every node has its request: the peer took it first */
START_TEST(test_long_steps_wait_for_sends)
{
	struct peer_call calls[2] = { { .nid = &peers[0].nid }, { .nid = &peers[1].nid } };
	struct fan_work w = { 0 };
	struct peer_work pw = { work_step, &w, false };
	char *buf = payload(BIG);
	struct sd_req rq;

	start_peer(&peers[0], PEER_HOLD);
	start_peer(&peers[1], PEER_OK);
	peers[0].hold_ms = 200; /* then it takes the payload by itself */
	make_write(&rq, BIG);
	peer_fanout_work(&rq, buf, calls, 2, &pw);
	ck_assert_int_eq(w.steps, NR_STEPS);
	/* the sockets hold far less than BIG: most of it was read before the work */
	ck_assert_uint_gt(w.got_at[0], BIG / 4);
	ck_assert_int_eq(calls[0].result, SD_RES_SUCCESS);
	ck_assert_int_eq(calls[1].result, SD_RES_SUCCESS);
	free(buf);
}
END_TEST

START_TEST(test_cut_mid_payload)
{
	struct peer_call calls[2] = { { .nid = &peers[0].nid }, { .nid = &peers[1].nid } };
	struct fan_work w = { 0 };
	struct peer_work pw = { work_step, &w, true };
	char *buf = payload(BIG);
	struct sd_req rq;

	start_peer(&peers[0], PEER_CUT);
	start_peer(&peers[1], PEER_OK);
	make_write(&rq, BIG);
	peer_fanout_work(&rq, buf, calls, 2, &pw);
	ck_assert_int_eq(w.steps, NR_STEPS);
	ck_assert_int_eq(calls[0].result, SD_RES_NETWORK);
	ck_assert_int_ne(calls[0].err, 0);
	ck_assert_int_eq(calls[1].result, SD_RES_SUCCESS);
	/* a fresh connection that failed is not retried */
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_conns, __ATOMIC_RELAXED), 1);
	ck_assert_int_eq(__atomic_load_n(&peers[1].nr_ok, __ATOMIC_RELAXED), 1);
	free(buf);
}
END_TEST

START_TEST(test_stale_cached_socket_retried)
{
	struct peer_call c = { .nid = &peers[0].nid };
	struct fan_work w = { 0 };
	struct peer_work pw = { work_step, &w, true };
	char *buf = payload(1 << 20);
	struct sd_req rq;

	start_peer(&peers[0], PEER_ONCE);
	make_write(&rq, 1 << 20);
	peer_fanout_work(&rq, buf, &c, 1, &pw);
	ck_assert_int_eq(c.result, SD_RES_SUCCESS);
	/* the peer closed that connection after its answer; the cache still has it */
	for (int i = 0; i < 100 && __atomic_load_n(&peers[0].nr_conns, __ATOMIC_RELAXED) < 1; i++)
		sleep_ms(10);
	sleep_ms(50);
	memset(&w, 0, sizeof(w));
	peer_fanout_work(&rq, buf, &c, 1, &pw);
	ck_assert_int_eq(w.steps, NR_STEPS);
	ck_assert_int_eq(c.result, SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_conns, __ATOMIC_RELAXED), 2);
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_ok, __ATOMIC_RELAXED), 2);
	free(buf);
}
END_TEST

/* a port of loopback where nothing listens (bound, then closed) */
static uint16_t dead_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* a node with an io address is connected there, not at its id */
START_TEST(test_io_endpoint)
{
	struct sd_node_id nid;
	struct peer_call c = { .nid = &nid };
	char *buf = payload(4096);
	struct sd_req rq;

	start_peer(&peers[0], PEER_OK);
	nid = peers[0].nid;
	nid.port = dead_port();
	make_write(&rq, 4096);
	peer_fanout(&rq, buf, &c, 1);
	ck_assert_int_eq(c.result, SD_RES_NETWORK);
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_conns, __ATOMIC_RELAXED), 0);
	io_from = nid;
	io_to = peers[0].nid;
	io_set = true;
	peer_fanout(&rq, buf, &c, 1);
	ck_assert_int_eq(c.result, SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&peers[0].nr_ok, __ATOMIC_RELAXED), 1);
	free(buf);
}
END_TEST

START_TEST(test_abort_during_work)
{
	struct peer_call c = { .nid = &peers[0].nid };
	struct fan_work w = { .last = peer_abort_all };
	struct peer_work pw = { work_step, &w, true };
	char *buf = payload(BIG);
	struct sd_req rq;
	uint64_t t0;

	start_peer(&peers[0], PEER_SILENT);
	make_write(&rq, BIG);
	t0 = sd_now_ns();
	peer_fanout_work(&rq, buf, &c, 1, &pw);
	ck_assert_int_eq(w.steps, NR_STEPS);
	ck_assert_int_eq(c.result, SD_RES_NETWORK);
	/* not the peers' timeout (30 s): the cut ended it */
	ck_assert_uint_lt(sd_now_ns() - t0, UINT64_C(20) * 1000000000);
	free(buf);
}
END_TEST

static Suite *peer_io_suite(void)
{
	Suite *s = suite_create("peer_io");
	TCase *tc = tcase_create("fanout");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_work_while_sends_pend);
	tcase_add_test(tc, test_long_steps_wait_for_sends);
	tcase_add_test(tc, test_cut_mid_payload);
	tcase_add_test(tc, test_stale_cached_socket_retried);
	tcase_add_test(tc, test_abort_during_work);
	tcase_add_test(tc, test_io_endpoint);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peer_io_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
