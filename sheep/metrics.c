/*
 * /metrics: the request statistics in Prometheus' text exposition format
 * (version 0.0.4), served by a minimal HTTP/1.0-1.1 responder on the main
 * event loop, where the statistics are read anyway.
 *
 * One request per connection: read up to METRICS_MAX_REQ bytes of header,
 * answer GET /metrics with 200, another path with 404, another method with
 * 405, a header that does not fit with 431, then close. At most
 * METRICS_MAX_CONNS connections are open; a new one past that closes the
 * oldest, so a client that never sends its request holds nothing for long.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "event.h"
#include "net.h"
#include "sheep_priv.h"

#define METRICS_MAX_REQ 4096
#define METRICS_MAX_CONNS 16
#define METRICS_SNAPSHOT_LEN (64 * 1024)

struct mconn {
	int fd; /* -1: free */
	uint64_t opened_ns;
	char req[METRICS_MAX_REQ];
	size_t req_len;
	char *out; /* the whole response, once the request is read */
	size_t out_len, out_done;
	bool denied; /* not an admin's address: answered 403 (access.c) */
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
	free(c->out);
	c->out = NULL;
	c->fd = -1;
}

static void respond(struct mconn *c, int code, const char *reason, char *body, size_t body_len)
{
	struct mbuf b = { 0 };

	mb_printf(&b,
		  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		  "Connection: close\r\n\r\n",
		  code, reason,
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

static void respond_text(struct mconn *c, int code, const char *reason)
{
	char *body = NULL;
	int n = asprintf(&body, "%d %s\n", code, reason);

	respond(c, code, reason, n < 0 ? NULL : body, n < 0 ? 0 : (size_t)n);
}

/* the request line is "METHOD SP TARGET SP HTTP/1.x" */
static void handle_request(struct mconn *c)
{
	char method[8], target[256], version[16];
	size_t len;
	char *body;

	c->req[c->req_len] = '\0';
	if (c->denied) /* an admin view: loopback, members, --admin-allow */
		return respond_text(c, 403, "Forbidden");
	if (sscanf(c->req, "%7s %255s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7))
		return respond_text(c, 400, "Bad Request");
	if (strcmp(method, "GET"))
		return respond_text(c, 405, "Method Not Allowed");
	if (strcmp(target, "/metrics") && strncmp(target, "/metrics?", 9))
		return respond_text(c, 404, "Not Found");
	body = render(&len);
	if (!body)
		return respond_text(c, 500, "Internal Server Error");
	respond(c, 200, "OK", body, len);
}

static void conn_handler(int fd, uint32_t events, void *data)
{
	struct mconn *c = data;
	ssize_t n;

	if (c->out) {
		while (c->out_done < c->out_len) {
			n = write(fd, c->out + c->out_done, c->out_len - c->out_done);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n <= 0)
				break;
			c->out_done += (size_t)n;
		}
		return conn_close(c);
	}
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN))
		return conn_close(c);
	for (;;) {
		if (c->req_len == sizeof(c->req) - 1)
			return respond_text(c, 431, "Request Header Fields Too Large");
		n = read(fd, c->req + c->req_len, sizeof(c->req) - 1 - c->req_len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			return conn_close(c);
		c->req_len += (size_t)n;
		c->req[c->req_len] = '\0';
		if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
			return handle_request(c);
	}
}

static void listen_handler(int listen_fd, uint32_t events, void *data)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct mconn *c = NULL;

		if (fd < 0)
			return;
		for (int i = 0; i < METRICS_MAX_CONNS; i++) {
			if (conns[i].fd < 0) {
				c = &conns[i];
				break;
			}
			if (!c || conns[i].opened_ns < c->opened_ns)
				c = &conns[i];
		}
		if (c->fd >= 0)
			conn_close(c); /* the oldest makes room */
		c->fd = fd;
		c->opened_ns = sd_now_ns();
		c->req_len = 0;
		c->out = NULL;
		c->denied = !access_conn_ok(ACCESS_METRICS, fd);
		if (ev_add(fd, EPOLLIN, conn_handler, c)) {
			close(fd);
			c->fd = -1;
		}
	}
}

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
	char addr[64];
	int port, fds[8], nr;

	if (metrics_parse(arg, addr, sizeof(addr), &port))
		return -EINVAL;
	for (int i = 0; i < METRICS_MAX_CONNS; i++)
		conns[i].fd = -1;
	nr = ev_listen(addr, port, listen_handler, NULL, fds, ARRAY_SIZE(fds));
	if (nr < 0)
		return nr;
	sd_info("metrics on http://%s:%d/metrics", addr, port);
	return 0;
}
