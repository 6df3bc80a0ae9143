/*
 * /metrics: the request statistics in Prometheus' text exposition format
 * (version 0.0.4), served by a minimal HTTP/1.0-1.1 responder on the main
 * event loop, where the statistics are read anyway.
 *
 * One request per connection. Its head (request line and header fields)
 * is read into METRICS_MAX_REQ bytes and parsed by http.c as it arrives:
 * GET /metrics gets 200, another path 404, another method 405, a head that
 * breaks the grammar (a NUL byte included) 400, one that does not end
 * within the buffer 431 (414, 501, 505: see http.h). Then the write side
 * is shut and what the client still sends is read and dropped, up to
 * METRICS_LINGER_BYTES, until it closes: closing with unread bytes would
 * reset the connection and could destroy the answer before the client
 * read it.
 *
 * listen.c holds the listener: at most METRICS_MAX_CONNS connections (at
 * the cap, the oldest whose request is not whole yet, or that lingers,
 * makes room; with none, the next wait in the backlog); a client that
 * access.c refuses (not an admin address) is closed at once and takes no
 * slot; a request must arrive whole within METRICS_TIMEOUT_S of the
 * connection, and an answer or the lingering stops once nothing moved for
 * as long.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "event.h"
#include "http.h"
#include "listen.h"
#include "net.h"
#include "access.h"
#include "metrics.h"
#include "stat.h"
#include "group.h"
#include "recovery.h"
#include "store/store.h"
#include "work.h"

#define METRICS_MAX_REQ 4096
#define METRICS_SNAPSHOT_LEN (64 * 1024)
#define METRICS_TIMEOUT_S 10
#define METRICS_LINGER_BYTES (64 * 1024)

struct mconn {
	int fd; /* -1: free */
	struct listen_conn lc;
	uint64_t opened, last_active; /* listen_tick()s */
	char req[METRICS_MAX_REQ];
	size_t req_len;
	char *out; /* the whole response, once the request is read */
	size_t out_len, out_done;
	bool lingering; /* answered, write side shut: reading until the client closes */
	size_t drained;
};

static struct mconn conns[METRICS_MAX_CONNS];

/* a growing text buffer; on allocation failure it stays short and says so */
struct mbuf {
	char *p;
	size_t len, cap;
	bool failed;
};

static void __printf(2, 3) mb_printf(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0 || b->failed)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = max_t(size_t, b->cap * 2, b->len + (size_t)n + 4096);
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static void head(struct mbuf *b, const char *name, const char *type, const char *help)
{
	mb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool op_seen(const struct sd_stat_op *op)
{
	return op->nr_done || op->nr_inflight;
}

/* one counter or gauge per op that has seen requests */
static void per_op(struct mbuf *b, const struct sd_stat_op *ops, int nr, const char *name,
		   const char *type, const char *help, size_t field, double scale)
{
	head(b, name, type, help);
	for (int i = 0; i < nr; i++) {
		uint64_t v = *(const uint64_t *)((const char *)&ops[i] + field);

		if (!op_seen(&ops[i]))
			continue;
		if (scale == 1.0)
			mb_printf(b, "%s{op=\"%s\"} %" PRIu64 "\n", name, ops[i].name, v);
		else
			mb_printf(b, "%s{op=\"%s\"} %.9f\n", name, ops[i].name, (double)v * scale);
	}
}

static void histograms(struct mbuf *b, const struct sd_stat_op *ops, int nr)
{
	const char *name = "sheep_request_duration_seconds";

	head(b, name, "histogram",
	     "Time from dispatch to reply (queue and service), by operation.");
	for (int i = 0; i < nr; i++) {
		uint64_t cum = 0;

		if (!op_seen(&ops[i]))
			continue;
		/* bucket k holds up to 2^(k+1) us; the last one is only +Inf's */
		for (int k = 0; k < SD_STAT_NR_BUCKETS - 1; k++) {
			cum += ops[i].hist[k];
			mb_printf(b, "%s_bucket{op=\"%s\",le=\"%.9g\"} %" PRIu64 "\n", name,
				  ops[i].name, (double)(UINT64_C(2) << k) * 1e-6, cum);
		}
		mb_printf(b, "%s_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, ops[i].name,
			  ops[i].nr_done);
		mb_printf(b, "%s_sum{op=\"%s\"} %.9f\n", name, ops[i].name,
			  (double)ops[i].await_ns * 1e-9);
		mb_printf(b, "%s_count{op=\"%s\"} %" PRIu64 "\n", name, ops[i].name,
			  ops[i].nr_done);
	}
}

static void queues(struct mbuf *b, const struct sd_stat_queue *q, int nr)
{
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "sheep_workqueue_threads", "gauge", "Worker threads of the queue." },
		{ "sheep_workqueue_queued", "gauge", "Works waiting for a worker." },
		{ "sheep_workqueue_running", "gauge", "Works on a worker now." },
		{ "sheep_workqueue_done_total", "counter", "Works finished." },
		{ "sheep_workqueue_longest_wait_seconds", "gauge",
		  "How long the oldest waiting work has waited." },
	};

	for (size_t k = 0; k < ARRAY_SIZE(m); k++) {
		head(b, m[k].name, m[k].type, m[k].help);
		for (int i = 0; i < nr; i++) {
			mb_printf(b, "%s{queue=\"%s\"} ", m[k].name, q[i].name);
			switch (k) {
			case 0:
				mb_printf(b, "%u\n", q[i].nr_threads);
				break;
			case 1:
				mb_printf(b, "%u\n", q[i].nr_queued);
				break;
			case 2:
				mb_printf(b, "%u\n", q[i].nr_running);
				break;
			case 3:
				mb_printf(b, "%" PRIu64 "\n", q[i].nr_done);
				break;
			default:
				mb_printf(b, "%.9f\n", (double)q[i].longest_wait_ns * 1e-9);
			}
		}
	}
}

static void caches(struct mbuf *b, const struct sd_stat_cache *c, int nr)
{
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "sheep_cache_capacity", "gauge", "Entries the cache may hold." },
		{ "sheep_cache_entries", "gauge", "Entries the cache holds now." },
		{ "sheep_cache_in_use", "gauge", "Entries in use by a request now." },
		{ "sheep_cache_hits_total", "counter", "Lookups that found their entry." },
		{ "sheep_cache_misses_total", "counter", "Lookups that did not (an open each)." },
		{ "sheep_cache_evictions_total", "counter", "Entries pushed out to make room." },
		{ "sheep_cache_invalidations_total", "counter",
		  "Entries dropped because the object's file was removed, renamed or replaced." },
	};

	for (size_t k = 0; nr > 0 && k < ARRAY_SIZE(m); k++) {
		head(b, m[k].name, m[k].type, m[k].help);
		for (int i = 0; i < nr; i++) {
			const uint64_t v[] = { c[i].capacity,	     c[i].nr_cached,
					       c[i].nr_in_use,	     c[i].nr_hits,
					       c[i].nr_misses,	     c[i].nr_evictions,
					       c[i].nr_invalidations };

			mb_printf(b, "%s{cache=\"%s\"} %" PRIu64 "\n", m[k].name, c[i].name, v[k]);
		}
	}
}

static void vdis(struct mbuf *b, const struct sd_stat_vdi *v, int nr)
{
	head(b, "sheep_vdi_requests_total", "counter",
	     "Client object requests through this node, by VDI (vid 0: VDIs past the table).");
	for (int i = 0; i < nr; i++) {
		mb_printf(
		    b, "sheep_vdi_requests_total{vid=\"%06" PRIx32 "\",dir=\"read\"} %" PRIu64 "\n",
		    v[i].vid, v[i].nr_reads);
		mb_printf(b,
			  "sheep_vdi_requests_total{vid=\"%06" PRIx32 "\",dir=\"write\"} %" PRIu64
			  "\n",
			  v[i].vid, v[i].nr_writes);
	}
	head(b, "sheep_vdi_bytes_total", "counter", "Client object payload bytes, by VDI.");
	for (int i = 0; i < nr; i++)
		mb_printf(b, "sheep_vdi_bytes_total{vid=\"%06" PRIx32 "\"} %" PRIu64 "\n", v[i].vid,
			  v[i].bytes);
}

/*
 * The store's figures: a full walk of the objects (plain_stat), so never on
 * the main thread. A work on the metrics queue takes a sample every
 * STORE_SAMPLE_S seconds; /metrics shows the last one (none before the
 * first sample ends).
 */
#define STORE_SAMPLE_S 15

static struct work_queue *metrics_wq;
static struct {
	struct work work;
	struct store_stat st, taken; /* taken: the worker's, st: the published */
	int result;
	bool busy, have;
} sample;

static void sample_fn(struct work *w)
{
	memset(&sample.taken, 0, sizeof(sample.taken));
	sample.result = sd_store->stat(&sample.taken);
}

static void sample_done(struct work *w)
{
	sample.busy = false;
	if (sample.result != SD_RES_SUCCESS)
		return;
	sample.st = sample.taken;
	sample.have = true;
}

static void sample_timer_handler(int fd, uint32_t events, void *data)
{
	uint64_t expirations;

	(void)!read(fd, &expirations, sizeof(expirations));
	if (sample.busy)
		return;
	sample.busy = true;
	sample.work.fn = sample_fn;
	sample.work.done = sample_done;
	wq_queue(metrics_wq, &sample.work);
}

static int start_sampler(void)
{
	struct itimerspec its = { .it_value = { 0, 1 }, .it_interval = { STORE_SAMPLE_S, 0 } };
	int fd, ret;

	metrics_wq = wq_create("metrics", 1);
	if (!metrics_wq)
		return -ENOMEM;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = ev_add(fd, EPOLLIN, sample_timer_handler, NULL);
	if (ret)
		close(fd);
	return ret;
}

static void gauge(struct mbuf *b, const char *name, const char *help, uint64_t v)
{
	head(b, name, "gauge", help);
	mb_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* the node's place in the cluster, its recovery and its store */
static void node_state(struct mbuf *b)
{
	struct sd_recovery_info ri;

	gauge(b, "sheep_cluster_epoch", "The cluster's epoch as this node sees it.", group_epoch());
	gauge(b, "sheep_cluster_nodes", "Members of the cluster as this node sees them.",
	      (uint64_t)max_t(int, group_nr_nodes(), 0));
	gauge(b, "sheep_cluster_copies",
	      "Copies of each object the cluster keeps (0: not formatted).", group_copies());
	recovery_get_info(&ri);
	gauge(b, "sheep_recovery_epoch", "The epoch being (or last) recovered.", ri.epoch);
	gauge(b, "sheep_recovery_running",
	      "1 while this node's recovery of the epoch is not done (joining, running, waiting).",
	      ri.state != SD_RECOVERY_DONE);
	gauge(b, "sheep_recovery_objects_to_fetch",
	      "Objects this node has to fetch for the epoch being recovered.", ri.nr_total);
	gauge(b, "sheep_recovery_objects_fetched", "Objects fetched so far for that epoch.",
	      ri.nr_done);
	gauge(b, "sheep_recovery_objects_failed",
	      "Objects no node could give at the last try (retried while the epoch lasts).",
	      ri.nr_failed);
	gauge(b, "sheep_objects_missing",
	      "Objects the current ring gives this node that it does not hold yet: each has "
	      "fewer live copies than the cluster's copies.",
	      ri.nr_total > ri.nr_done ? ri.nr_total - ri.nr_done : 0);
	if (!sample.have)
		return;
	gauge(b, "sheep_store_used_bytes", "Bytes the store's objects use.", sample.st.used);
	gauge(b, "sheep_store_free_bytes",
	      "Bytes the store may still use (free on its filesystem, for unprivileged users).",
	      sample.st.free);
	gauge(b, "sheep_store_size_bytes", "The store's size: used plus free.",
	      sample.st.used + sample.st.free);
	gauge(b, "sheep_store_objects", "Objects in the store.", sample.st.nr_objects);
}

/* the exposition of the current statistics: a malloc'd text, or NULL */
static char *render(size_t *len)
{
	char *snap = malloc(METRICS_SNAPSHOT_LEN);
	struct mbuf b = { 0 };
	const struct sd_stat_header *h = (const void *)snap;
	const struct sd_stat_op *total, *ops;
	const struct sd_stat_queue *q;
	const struct sd_stat_vdi *v;
	int nr;

	if (!snap)
		return NULL;
	if (stat_snapshot(snap, METRICS_SNAPSHOT_LEN, stat_clock()) < 0) {
		free(snap);
		return NULL;
	}
	total = (const void *)(h + 1);
	ops = total + 1;
	nr = (int)h->nr_ops;
	q = (const void *)(ops + nr);
	v = (const void *)(q + h->nr_queues);

	per_op(&b, ops, nr, "sheep_requests_total", "counter",
	       "Requests completed (errors included), by operation.",
	       offsetof(struct sd_stat_op, nr_done), 1.0);
	per_op(&b, ops, nr, "sheep_request_errors_total", "counter",
	       "Requests answered with an error, by operation.",
	       offsetof(struct sd_stat_op, nr_errors), 1.0);
	per_op(&b, ops, nr, "sheep_request_bytes_total", "counter",
	       "Payload bytes moved (both directions), by operation.",
	       offsetof(struct sd_stat_op, bytes), 1.0);
	per_op(&b, ops, nr, "sheep_requests_inflight", "gauge",
	       "Requests dispatched and not yet answered, by operation.",
	       offsetof(struct sd_stat_op, nr_inflight), 1.0);
	per_op(&b, ops, nr, "sheep_request_busy_seconds_total", "counter",
	       "Time with at least one request of the operation in flight.",
	       offsetof(struct sd_stat_op, busy_ns), 1e-9);
	histograms(&b, ops, nr);
	head(&b, "sheep_busy_seconds_total", "counter",
	     "Time with at least one request in flight (the utilisation's numerator).");
	mb_printf(&b, "sheep_busy_seconds_total %.9f\n", (double)total->busy_ns * 1e-9);
	head(&b, "sheep_request_hangs_total", "counter",
	     "Requests that stayed in flight longer than the hang threshold.");
	mb_printf(&b, "sheep_request_hangs_total %" PRIu64 "\n", h->nr_hangs);
	head(&b, "sheep_requests_hung", "gauge",
	     "Requests in flight longer than the hang threshold now.");
	mb_printf(&b, "sheep_requests_hung %u\n", h->nr_hung);
	head(&b, "sheep_hang_threshold_seconds", "gauge", "The hang threshold (0: off).");
	mb_printf(&b, "sheep_hang_threshold_seconds %.3f\n", (double)h->hang_threshold_ns * 1e-9);
	queues(&b, q, (int)h->nr_queues);
	vdis(&b, v, (int)h->nr_vdis);
	caches(&b, (const void *)(v + h->nr_vdis), (int)h->nr_caches);
	node_state(&b);
	free(snap);
	if (b.failed) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

static void conn_close(struct mconn *c)
{
	ev_del(c->fd);
	close(c->fd);
	listen_conn_del(&c->lc);
	free(c->out);
	c->out = NULL;
	c->fd = -1;
}

static void respond(struct mconn *c, int code, char *body, size_t body_len)
{
	struct mbuf b = { 0 };

	mb_printf(&b,
		  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		  "Connection: close\r\n\r\n",
		  code, http_reason(code),
		  code == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain",
		  body_len);
	if (!b.failed && body_len) {
		char *p = realloc(b.p, b.len + body_len);
		if (p) {
			memcpy(p + b.len, body, body_len);
			b.p = p;
			b.len += body_len;
		} else {
			b.failed = true;
		}
	}
	free(body);
	if (b.failed) {
		free(b.p);
		conn_close(c);
		return;
	}
	c->out = b.p;
	c->out_len = b.len;
	c->out_done = 0;
	ev_modify(c->fd, EPOLLOUT);
}

static void respond_text(struct mconn *c, int code)
{
	char *body = NULL;
	int n = asprintf(&body, "%d %s\n", code, http_reason(code));

	respond(c, code, n < 0 ? NULL : body, n < 0 ? 0 : (size_t)n);
}

/* the request's head is parsed: status is http_parse_request's verdict */
static void handle_request(struct mconn *c, int status, const struct http_request *hr)
{
	size_t len;
	char *body;

	if (status)
		return respond_text(c, status);
	if (strcmp(hr->method, "GET"))
		return respond_text(c, 405);
	if (strcmp(hr->target, "/metrics") && strncmp(hr->target, "/metrics?", 9))
		return respond_text(c, 404);
	body = render(&len);
	if (!body)
		return respond_text(c, 500);
	respond(c, 200, body, len);
}

/* answered: read and drop what the client still sends until it closes */
static void linger(struct mconn *c)
{
	char scratch[4096];

	for (;;) {
		ssize_t n = read(c->fd, scratch, sizeof(scratch));

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0 || (c->drained += (size_t)n) > METRICS_LINGER_BYTES)
			return conn_close(c);
		c->last_active = listen_tick();
	}
}

static void send_out(struct mconn *c)
{
	while (c->out_done < c->out_len) {
		ssize_t n = write(c->fd, c->out + c->out_done, c->out_len - c->out_done);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			return conn_close(c);
		c->out_done += (size_t)n;
		c->last_active = listen_tick();
	}
	free(c->out);
	c->out = NULL;
	c->lingering = true;
	shutdown(c->fd, SHUT_WR);
	ev_modify(c->fd, EPOLLIN);
	linger(c);
}

static void conn_handler(int fd, uint32_t events, void *data)
{
	struct mconn *c = data;
	struct http_request hr;
	int ret;

	if (c->out)
		return send_out(c);
	if (c->lingering)
		return linger(c);
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN))
		return conn_close(c);
	for (;;) {
		ssize_t n = read(fd, c->req + c->req_len, sizeof(c->req) - c->req_len);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) /* closed before its request was whole: nothing to answer */
			return conn_close(c);
		c->req_len += (size_t)n;
		c->last_active = listen_tick();
		ret = http_parse_request(c->req, c->req_len, sizeof(c->req), &hr);
		if (ret != HTTP_MORE)
			return handle_request(c, ret, &hr);
	}
}

/* a new connection on fd, counted by l (NULL: not counted): NULL if none is free */
static struct mconn *mconn_open(struct listener *l, int fd)
{
	struct mconn *c = NULL;

	for (int i = 0; i < METRICS_MAX_CONNS && !c; i++)
		if (conns[i].fd < 0)
			c = &conns[i];
	if (!c)
		return NULL;
	c->req_len = 0;
	c->out = NULL;
	c->lingering = false;
	c->drained = 0;
	c->opened = c->last_active = listen_tick();
	if (ev_add(fd, EPOLLIN, conn_handler, c))
		return NULL;
	c->fd = fd;
	listen_conn_add(l, &c->lc);
	return c;
}

static bool mconn_admit(int fd)
{
	return access_conn_ok(ACCESS_METRICS, fd); /* loopback, members, --admin-allow */
}

static int mconn_accept(struct listener *l, int fd, const struct sockaddr_storage *ss)
{
	return mconn_open(l, fd) ? 0 : -ENOMEM;
}

/* the request is the client's turn from the connection on; then, time without progress */
static enum listen_state mconn_state(struct listen_conn *lc, uint64_t *since)
{
	struct mconn *c = container_of(lc, struct mconn, lc);

	if (!c->out && !c->lingering) {
		*since = c->opened;
		return LISTEN_TURN;
	}
	*since = c->last_active;
	return LISTEN_IDLE;
}

static void mconn_timeout(struct listen_conn *lc, const char *why)
{
	conn_close(container_of(lc, struct mconn, lc));
}

/* at the cap, or out of descriptors: one whose request is not whole, or answered, makes room */
static bool mconn_evictable(struct listen_conn *lc)
{
	struct mconn *c = container_of(lc, struct mconn, lc);

	return !c->out;
}

static const struct listen_ops metrics_listen_ops = {
	.name = "metrics",
	.admit = mconn_admit,
	.accept = mconn_accept,
	.state = mconn_state,
	.timeout = mconn_timeout,
	.evictable = mconn_evictable,
};

int metrics_parse(const char *arg, char *addr, size_t addr_len, int *port)
{
	const char *colon = strrchr(arg, ':'), *p = colon ? colon + 1 : arg;
	uint64_t v;
	size_t hlen = colon ? (size_t)(colon - arg) : 0;

	if (sd_parse_uint(p, 1, 65535, &v))
		return -EINVAL;
	if (colon && hlen == 0)
		return -EINVAL;
	/* [v6addr]:port */
	if (hlen >= 2 && arg[0] == '[' && arg[hlen - 1] == ']') {
		arg++;
		hlen -= 2;
	}
	if (hlen >= 64)
		return -EINVAL;
	if (addr) {
		if (!hlen)
			snprintf(addr, addr_len, "127.0.0.1");
		else
			snprintf(addr, addr_len, "%.*s", (int)hlen, arg);
	}
	if (port)
		*port = (int)v;
	return 0;
}

int metrics_start(const char *arg)
{
	struct listen_limits lim = {
		.max_conns = METRICS_MAX_CONNS,
		.cap_option = "the /metrics cap",
		.turn_timeout = METRICS_TIMEOUT_S,
		.idle_timeout = METRICS_TIMEOUT_S,
		.turn_what = "a /metrics request that did not arrive in time",
		.idle_what = "a /metrics connection that stopped moving",
	};
	char addr[64];
	int port, ret;

	if (metrics_parse(arg, addr, sizeof(addr), &port))
		return -EINVAL;
	for (int i = 0; i < METRICS_MAX_CONNS; i++)
		conns[i].fd = -1;
	ret = start_sampler();
	if (ret < 0)
		return ret;
	if (!listener_open(&metrics_listen_ops, &lim, addr, port))
		return -errno;
	sd_info("metrics on http://%s:%d/metrics", addr, port);
	return 0;
}
