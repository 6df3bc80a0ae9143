/*
 * collie debug trace on every node at once (--all): start, stop and status
 * of the cluster's tracers, the nodes' clocks against collie's, and the
 * reading of each node's events for the views of requests (trace_merge.c).
 *
 * start --all asks every member for its tracer's status first: a member
 * that cannot be reached, or whose daemon has no working tracer, stops it
 * before anything starts. Then it starts the same tracer with the same
 * options on each node in turn; if one refuses, it stops those it started
 * (the tracer named, the others untouched) and says which node refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

int tnodes_get(struct tnode **nodes, int *nr)
{
	struct sd_node *list = NULL;
	uint32_t n = 0, local;
	int ret;

	if (!opts.all) {
		*nodes = calloc(1, sizeof(**nodes));
		if (!*nodes) {
			collie_err("out of memory");
			return EXIT_SYSFAIL;
		}
		snprintf((*nodes)->host, sizeof((*nodes)->host), "%s", opts.addr);
		(*nodes)->port = opts.port;
		snprintf((*nodes)->label, sizeof((*nodes)->label),
			 strchr(opts.addr, ':') ? "[%s]:%d" : "%s:%d", opts.addr, opts.port);
		*nr = 1;
		return EXIT_OK;
	}
	ret = node_get_list(&list, &n, &local);
	if (ret)
		return ret;
	*nodes = calloc(n ? n : 1, sizeof(**nodes));
	if (!*nodes) {
		free(list);
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct tnode *t = &(*nodes)[i];

		collie_node_host(&list[i], t->host, sizeof(t->host));
		t->port = list[i].nid.port;
		snprintf(t->label, sizeof(t->label), strchr(t->host, ':') ? "[%s]:%d" : "%s:%d",
			 t->host, t->port);
	}
	free(list);
	*nr = (int)n;
	return EXIT_OK;
}

int tnode_run(const struct tnode *n, int (*fn)(void))
{
	const char *addr = opts.addr;
	int port = opts.port, ret;

	opts.addr = n->host;
	opts.port = n->port;
	ret = fn();
	opts.addr = addr;
	opts.port = port;
	return ret;
}

/* ---- start, stop, status --all ---- */

/* a member that does not answer a status this soon is missing for start --all */
#define CHECK_TIMEOUT_MS 5000

/* TRACE_STATUS of node @n within CHECK_TIMEOUT_MS: its result, or -1 */
static int node_state(const struct tnode *n, struct trace_state *ts)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	int fd = sd_connect(n->host, n->port, CHECK_TIMEOUT_MS), ret;

	memset(ts, 0, sizeof(*ts));
	if (fd < 0)
		return -1;
	collie_init_req(&hdr, SD_OP_TRACE_STATUS);
	hdr.data_length = sizeof(ts->st) + sizeof(ts->tracers);
	ret = sd_set_timeout(fd, CHECK_TIMEOUT_MS);
	if (!ret)
		ret = sd_exec_req(fd, &hdr, ts, 0, hdr.data_length, &rsp);
	close(fd);
	return ret ? -1 : (int)rsp.result;
}

/* the node answers and its tracer works: EXIT_OK, or an exit code after saying why */
static int check_node(const struct tnode *n)
{
	struct trace_state ts;
	int ret = node_state(n, &ts);

	if (ret < 0) {
		collie_err("failed to start the tracer on every node: %s does not answer (within "
			   "%d s); nothing was started",
			   n->label, CHECK_TIMEOUT_MS / 1000);
		return EXIT_SYSFAIL;
	}
	if (ret == SD_RES_NO_SUPPORT || ret == SD_RES_TRACE_BROKEN ||
	    ts.st.state == SD_TRACE_STATE_BROKEN) {
		collie_err("failed to start the tracer on every node: %s has no working tracer "
			   "(%s); nothing was started",
			   n->label, ret == SD_RES_SUCCESS ? "it disabled itself" : sd_strerror(ret));
		return EXIT_FAIL;
	}
	if (ret != SD_RES_SUCCESS) {
		collie_err("failed to start the tracer on every node: %s: %s", n->label,
			   sd_strerror(ret));
		return collie_exit_code(ret);
	}
	return EXIT_OK;
}

int trace_start_all(void)
{
	const char *tracer = opts.tracer;
	struct tnode *nodes;
	int nr, ret, i;

	ret = tnodes_get(&nodes, &nr);
	if (ret)
		return ret;
	for (i = 0; i < nr; i++) {
		ret = check_node(&nodes[i]);
		if (ret)
			goto out_free;
	}
	for (i = 0; i < nr; i++) {
		ret = tnode_run(&nodes[i], trace_start_node);
		if (ret)
			break;
	}
	if (ret) {
		collie_err("the tracer did not start on %s: stopping it on the %d node%s where it "
			   "started",
			   nodes[i].label, i, i == 1 ? "" : "s");
		/* only the tracer this start named: the others ran before it */
		opts.tracer = tracer ? tracer : "graph";
		for (int j = 0; j < i; j++)
			tnode_run(&nodes[j], trace_stop_node);
		opts.tracer = tracer;
	}
out_free:
	free(nodes);
	return ret;
}

int trace_stop_all(void)
{
	struct tnode *nodes;
	int nr, ret, worst = EXIT_OK, nr_off = 0;

	ret = tnodes_get(&nodes, &nr);
	if (ret)
		return ret;
	for (int i = 0; i < nr; i++) {
		struct trace_state ts;
		const char *addr = opts.addr;
		int port = opts.port;

		/* a node whose tracing is off already is no failure of --all */
		opts.addr = nodes[i].host;
		opts.port = nodes[i].port;
		ret = trace_get_state(&ts);
		opts.addr = addr;
		opts.port = port;
		if (ret == SD_RES_SUCCESS && ts.st.state == SD_TRACE_STATE_OFF && !opts.tracer) {
			nr_off++;
			continue;
		}
		ret = tnode_run(&nodes[i], trace_stop_node);
		if (ret) {
			collie_err("the tracer did not stop on %s", nodes[i].label);
			if (!worst)
				worst = ret;
		}
	}
	if (nr_off == nr && nr) {
		collie_err("failed to stop the tracer: tracing is off on every node");
		worst = EXIT_FAIL;
	}
	free(nodes);
	return worst;
}

int trace_status_all(void)
{
	struct tnode *nodes;
	int nr, ret, worst = EXIT_OK;

	ret = tnodes_get(&nodes, &nr);
	if (ret)
		return ret;
	if (!opts.raw)
		printf("%-22s %-6s %-8s %7s %12s %12s %10s\n", "NODE", "STATE", "TRACER", "THREADS",
		       "RECORDS", "LOST", "MEMORY");
	for (int i = 0; i < nr; i++) {
		struct trace_state ts;
		const char *addr = opts.addr;
		int port = opts.port;
		char mem[32];

		opts.addr = nodes[i].host;
		opts.port = nodes[i].port;
		ret = trace_get_state(&ts);
		opts.addr = addr;
		opts.port = port;
		if (ret != SD_RES_SUCCESS) {
			printf(opts.raw ? "%s unreachable\n" : "%-22s %s\n", nodes[i].label,
			       ret < 0 ? "unreachable" : sd_strerror(ret));
			worst = EXIT_FAIL;
			continue;
		}
		ts.st.tracer[sizeof(ts.st.tracer) - 1] = '\0';
		collie_fmt_size(ts.st.mem_bytes, mem, sizeof(mem));
		printf(opts.raw ? "%s %s %s %u %llu %llu %s\n"
				: "%-22s %-6s %-8s %7u %12llu %12llu %10s\n",
		       nodes[i].label, trace_state_str(ts.st.state),
		       ts.st.tracer[0] ? ts.st.tracer : "-", ts.st.nr_threads,
		       (unsigned long long)ts.st.nr_events, (unsigned long long)ts.st.nr_lost, mem);
	}
	free(nodes);
	return worst;
}

/* ---- clocks ---- */

#define CLOCK_PROBES 8

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int tnode_clock(struct tnode *n)
{
	uint64_t best = UINT64_MAX;
	int fd = collie_connect(n->host, n->port);

	if (fd < 0)
		return EXIT_SYSFAIL;
	for (int i = 0; i < CLOCK_PROBES; i++) {
		struct sd_req hdr;
		struct sd_rsp rsp;
		uint64_t t0, t1;
		int ret;

		collie_init_req(&hdr, SD_OP_TRACE_CLOCK);
		t0 = mono_ns();
		ret = sd_exec_req(fd, &hdr, NULL, 0, 0, &rsp);
		t1 = mono_ns();
		if (ret || rsp.result != SD_RES_SUCCESS) {
			close(fd);
			collie_err("failed to read the clock of %s: %s", n->label,
				   ret ? strerror(-ret) : sd_strerror((int)rsp.result));
			return ret ? EXIT_SYSFAIL : collie_exit_code((int)rsp.result);
		}
		if (t1 - t0 < best) {
			best = t1 - t0;
			/* it read its clock somewhere in [t0, t1]: the middle, +/- half */
			n->offset_ns = (int64_t)(rsp.trace.generation - (t0 + (t1 - t0) / 2));
			n->err_ns = (t1 - t0 + 1) / 2;
		}
	}
	close(fd);
	return EXIT_OK;
}

/* ---- events ---- */

/* the next space-separated field of *s (NULL at the end) */
static char *field(char **s)
{
	char *p = *s, *start;

	while (*p == ' ')
		p++;
	if (!*p)
		return NULL;
	start = p;
	while (*p && *p != ' ')
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return start;
}

static int num(char **s, int base, uint64_t *v)
{
	char *f = field(s), *end;

	if (!f)
		return -1;
	errno = 0;
	*v = strtoull(f, &end, base);
	return errno || *end ? -1 : 0;
}

int tev_parse(char *line, struct tev *ev)
{
	uint64_t v[7];
	char *s = line + 1;

	memset(ev, 0, sizeof(*ev));
	if (line[0] == '\0' || line[1] != ' ')
		return -1;
	ev->kind = line[0];
	if (num(&s, 10, &v[0]) || v[0] > UINT32_MAX)
		return -1;
	ev->tid = (uint32_t)v[0];
	switch (ev->kind) {
	case 'T':
		while (*s == ' ')
			s++;
		ev->text = s;
		return 0;
	case 'Q': /* ts id flags opcode oid wait */
		if (num(&s, 10, &ev->ts) || num(&s, 16, &ev->id) || num(&s, 16, &v[1]) ||
		    num(&s, 16, &v[2]) || num(&s, 16, &ev->oid) || num(&s, 10, &ev->wait_ns) ||
		    v[1] > UINT32_MAX || v[2] > 0xff)
			return -1;
		ev->flags = (uint32_t)v[1];
		ev->opcode = (uint32_t)v[2];
		return field(&s) ? -1 : 0;
	case 'D': /* ts id result */
		if (num(&s, 10, &ev->ts) || num(&s, 16, &ev->id) || num(&s, 16, &v[1]) ||
		    v[1] > 0xff)
			return -1;
		ev->result = (uint32_t)v[1];
		return field(&s) ? -1 : 0;
	case 'C': /* depth entry dur id name */
	case 'O': /* depth entry id name */
		if (num(&s, 10, &v[1]) || v[1] > 1023 || num(&s, 10, &ev->ts) ||
		    (ev->kind == 'C' && num(&s, 10, &ev->dur)) || num(&s, 16, &ev->id))
			return -1;
		ev->depth = (unsigned)v[1];
		ev->text = field(&s);
		return ev->text && !field(&s) ? 0 : -1;
	default:
		return -1;
	}
}

struct ev_reader {
	int (*fn)(const struct tev *ev, void *arg);
	void *arg;
	char *line; /* a line cut by the end of a chunk */
	size_t len, cap;
	uint64_t nr_bad;
};

static int ev_line(struct ev_reader *r, char *line)
{
	struct tev ev;

	if (line[0] == '#' || line[0] == '\0')
		return EXIT_OK;
	if (tev_parse(line, &ev)) {
		r->nr_bad++;
		return EXIT_OK;
	}
	return r->fn(&ev, r->arg);
}

/* whole lines of a chunk to the parser; the cut one waits for the next chunk */
static int ev_sink(const char *data, size_t len, void *arg)
{
	struct ev_reader *r = arg;

	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		int ret;

		if (r->len + n + 1 > r->cap) {
			size_t cap = (r->len + n + 1) * 2;
			char *p = realloc(r->line, cap);

			if (!p) {
				collie_err("out of memory");
				return EXIT_SYSFAIL;
			}
			r->line = p;
			r->cap = cap;
		}
		memcpy(r->line + r->len, data, n);
		r->len += n;
		if (!nl)
			return EXIT_OK;
		r->line[r->len] = '\0';
		r->len = 0;
		ret = ev_line(r, r->line);
		if (ret)
			return ret;
		data += n + 1;
		len -= n + 1;
	}
	return EXIT_OK;
}

static struct ev_reader *cur_reader;

static int read_events(void)
{
	return trace_read_stream(SD_TRACE_FMT_EVENTS, SD_TRACER_GRAPH, ev_sink, cur_reader);
}

int tnode_events(const struct tnode *n, int (*fn)(const struct tev *ev, void *arg), void *arg)
{
	struct ev_reader r = { .fn = fn, .arg = arg };
	int ret;

	cur_reader = &r;
	ret = tnode_run(n, read_events);
	if (!ret && r.len) {
		r.line[r.len] = '\0';
		ret = ev_line(&r, r.line);
	}
	if (r.nr_bad)
		collie_err("%s: %llu lines of its trace were not understood", n->label,
			   (unsigned long long)r.nr_bad);
	free(r.line);
	cur_reader = NULL;
	return ret;
}
