/*
 * The views of requests across nodes, from every node's events
 * (trace_cluster.c reads them): cat --all --format chrome (one Perfetto
 * file, a process per node, flow arrows from a gateway to each replica's
 * part and back), cat --all --format graph (each request's call graph,
 * node by node, a replica's part indented under the gateway's call that
 * sent it) and slow (the slowest requests, where their time went).
 *
 * Clocks: every timestamp is moved onto collie's CLOCK_MONOTONIC by the
 * offset measured for its node just before its events are read
 * (tnode_clock: the fastest of 8 round trips, error +/- half of it).
 *
 * Where the time of a request's part went (slow): queue, from the moment
 * the node had the request whole until a thread took it up; disk, the
 * calls of the store driver (plain_*, the outermost ones); network, the
 * calls that send to peers and wait for them (peer_fanout*, peer_request,
 * the outermost ones) less the disk time inside them (the gateway writes
 * its own copy meanwhile); other, the rest of the part.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define FLAG_GATEWAY 0x100 /* trace_req.h: TRACE_REQ_GATEWAY */
#define RESULT_PASSED 0xff /* TRACE_REQ_PASSED: handed to a worker */

/* a request's part: what one thread of one node did for it */
struct part {
	uint64_t id;
	int node;
	uint32_t tid;
	uint64_t begin, end; /* collie's clock */
	bool ended;
	uint32_t flags;
	uint32_t opcode;
	uint64_t oid, wait_ns;
	uint32_t result;
	char thread[20];
	/* slow: where its time went */
	uint64_t disk_ns, net_ns;
};

struct call {
	uint64_t req;
	int node;
	uint32_t tid;
	unsigned depth;
	uint64_t entry, dur; /* collie's clock; dur 0 for one that did not return */
	uint32_t name;
	bool open;
};

struct model {
	struct tnode *nodes;
	int nr_nodes;
	int cur; /* the node being read */
	struct part *parts;
	size_t nr_parts, cap_parts;
	struct call *calls;
	size_t nr_calls, cap_calls;
	char **names;
	size_t nr_names, cap_names;
	uint32_t *name_hash; /* open addressing, index + 1 */
	size_t hash_cap;
	/* the node being read: thread names by tid */
	struct {
		uint32_t tid;
		char name[20];
	} threads[256];
	int nr_threads;
	/* chrome: write as we go */
	bool chrome;
	bool first;
	uint64_t nr_events;
};

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 256;
	void *p;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	p = realloc(*v, n * size);
	if (!p)
		return false;
	*v = p;
	*cap = n;
	return true;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* the index of function name @s, added once: -1 when out of memory */
static int64_t intern(struct model *m, const char *s)
{
	size_t j;

	if ((m->nr_names + 1) * 2 > m->hash_cap) {
		size_t cap = m->hash_cap ? m->hash_cap * 2 : 1024;
		uint32_t *h = calloc(cap, sizeof(*h));

		if (!h)
			return -1;
		for (size_t i = 0; i < m->nr_names; i++) {
			for (j = hash_str(m->names[i]) & (cap - 1); h[j]; j = (j + 1) & (cap - 1))
				;
			h[j] = (uint32_t)i + 1;
		}
		free(m->name_hash);
		m->name_hash = h;
		m->hash_cap = cap;
	}
	for (j = hash_str(s) & (m->hash_cap - 1); m->name_hash[j]; j = (j + 1) & (m->hash_cap - 1))
		if (!strcmp(m->names[m->name_hash[j] - 1], s))
			return m->name_hash[j] - 1;
	if (!grow((void **)&m->names, &m->cap_names, m->nr_names + 1, sizeof(*m->names)))
		return -1;
	m->names[m->nr_names] = strdup(s);
	if (!m->names[m->nr_names])
		return -1;
	m->name_hash[j] = (uint32_t)++m->nr_names;
	return (int64_t)m->nr_names - 1;
}

/* node clock -> collie's */
static uint64_t to_local(const struct model *m, uint64_t ns)
{
	int64_t v = (int64_t)ns - m->nodes[m->cur].offset_ns;

	return v > 0 ? (uint64_t)v : 0;
}

static const char *thread_name(struct model *m, uint32_t tid)
{
	for (int i = 0; i < m->nr_threads; i++)
		if (m->threads[i].tid == tid)
			return m->threads[i].name;
	return "?";
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nr_names; i++)
		free(m->names[i]);
	free(m->names);
	free(m->name_hash);
	free(m->parts);
	free(m->calls);
	free(m->nodes);
}

/* ---- chrome, written as the events come ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void chrome_sep(struct model *m)
{
	printf(m->first ? "\n" : ",\n");
	m->first = false;
	m->nr_events++;
}

#define US(ns) (unsigned long long)((ns) / 1000), (unsigned long long)((ns) % 1000)

static void chrome_span(struct model *m, const char *name, const char *cat, uint64_t ts,
			uint64_t dur, uint32_t tid, uint64_t req)
{
	chrome_sep(m);
	printf("{\"name\":");
	json_str(name);
	printf(",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"pid\":%d,"
	       "\"tid\":%u",
	       cat, US(ts), US(dur), m->cur + 1, tid);
	if (req)
		printf(",\"args\":{\"request\":\"%016llx\"}", (unsigned long long)req);
	printf("}");
}

static void chrome_meta(struct model *m, const char *what, uint32_t tid, const char *name)
{
	chrome_sep(m);
	printf("{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":", what,
	       m->cur + 1, tid);
	json_str(name);
	printf("}}");
}

/* a flow event @ph ("s" or "f") of flow @id at @ts on node @node's thread @tid */
static void chrome_flow(struct model *m, const char *ph, uint64_t id, int node, uint32_t tid,
			uint64_t ts)
{
	chrome_sep(m);
	printf("{\"name\":\"peer request\",\"cat\":\"request\",\"ph\":\"%s\",\"id\":%llu,"
	       "\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%u%s}",
	       ph, (unsigned long long)id, US(ts), node + 1, tid,
	       *ph == 'f' ? ",\"bp\":\"e\"" : "");
}

/* ---- reading the events ---- */

static struct part *find_open_part(struct model *m, uint32_t tid, uint64_t id)
{
	for (size_t i = m->nr_parts; i-- > 0;) {
		struct part *p = &m->parts[i];

		if (p->node != m->cur)
			break;
		if (p->tid == tid && p->id == id && !p->ended)
			return p;
	}
	return NULL;
}

static int on_thread(struct model *m, const struct tev *ev)
{
	int i;

	for (i = 0; i < m->nr_threads && m->threads[i].tid != ev->tid; i++)
		;
	if (i == m->nr_threads && m->nr_threads < (int)ARRAY_SIZE(m->threads))
		m->nr_threads++;
	if (i < m->nr_threads) {
		m->threads[i].tid = ev->tid;
		snprintf(m->threads[i].name, sizeof(m->threads[i].name), "%s", ev->text);
	}
	if (m->chrome)
		chrome_meta(m, "thread_name", ev->tid, ev->text);
	return EXIT_OK;
}

static int on_event(const struct tev *ev, void *arg)
{
	struct model *m = arg;
	struct part *p;
	struct call *c;
	int64_t name;

	switch (ev->kind) {
	case 'T':
		return on_thread(m, ev);
	case 'Q':
		if (!grow((void **)&m->parts, &m->cap_parts, m->nr_parts + 1, sizeof(*p)))
			goto out_nomem;
		p = &m->parts[m->nr_parts++];
		memset(p, 0, sizeof(*p));
		*p = (struct part){ .id = ev->id,
				    .node = m->cur,
				    .tid = ev->tid,
				    .begin = to_local(m, ev->ts),
				    .flags = ev->flags,
				    .opcode = ev->opcode,
				    .oid = ev->oid,
				    .wait_ns = ev->wait_ns };
		snprintf(p->thread, sizeof(p->thread), "%s", thread_name(m, ev->tid));
		return EXIT_OK;
	case 'D':
		p = find_open_part(m, ev->tid, ev->id);
		if (!p)
			return EXIT_OK; /* its begin was overwritten */
		p->end = to_local(m, ev->ts);
		p->ended = true;
		p->result = ev->result;
		if (m->chrome && p->result != RESULT_PASSED) {
			char name[64];

			snprintf(name, sizeof(name), "request %016llx", (unsigned long long)p->id);
			chrome_span(m, name, "request", p->begin,
				    p->end > p->begin ? p->end - p->begin : 0, p->tid, p->id);
		}
		return EXIT_OK;
	case 'C':
	case 'O':
		if (m->chrome) {
			if (ev->kind == 'C')
				chrome_span(m, ev->text, "function", to_local(m, ev->ts), ev->dur,
					    ev->tid, ev->id);
			return EXIT_OK;
		}
		if (!ev->id)
			return EXIT_OK; /* no request's */
		name = intern(m, ev->text);
		if (name < 0 ||
		    !grow((void **)&m->calls, &m->cap_calls, m->nr_calls + 1, sizeof(*c)))
			goto out_nomem;
		c = &m->calls[m->nr_calls++];
		*c = (struct call){ .req = ev->id,
				    .node = m->cur,
				    .tid = ev->tid,
				    .depth = ev->depth,
				    .entry = to_local(m, ev->ts),
				    .dur = ev->dur,
				    .name = (uint32_t)name,
				    .open = ev->kind == 'O' };
		return EXIT_OK;
	}
	return EXIT_OK;
out_nomem:
	collie_err("out of memory");
	return EXIT_SYSFAIL;
}

/* every node's clock, then its events into @m */
static int model_load(struct model *m)
{
	int ret = tnodes_get(&m->nodes, &m->nr_nodes);

	for (int i = 0; !ret && i < m->nr_nodes; i++)
		ret = tnode_clock(&m->nodes[i]);
	for (int i = 0; !ret && i < m->nr_nodes; i++) {
		m->cur = i;
		m->nr_threads = 0;
		if (m->chrome) {
			char name[100];

			snprintf(name, sizeof(name), "sheep %s", m->nodes[i].label);
			chrome_meta(m, "process_name", 0, name);
		}
		ret = tnode_events(&m->nodes[i], on_event, m);
	}
	return ret;
}

/* ---- requests: their parts side by side ---- */

static int cmp_part(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if ((x->flags & FLAG_GATEWAY) != (y->flags & FLAG_GATEWAY))
		return x->flags & FLAG_GATEWAY ? -1 : 1;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_call(const void *a, const void *b)
{
	const struct call *x = a, *y = b;

	if (x->req != y->req)
		return x->req < y->req ? -1 : 1;
	if (x->node != y->node)
		return x->node - y->node;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	return (int)x->depth - (int)y->depth;
}

/* the calls of part @p: [*first, *first + *n) of the sorted calls */
static void part_calls(const struct model *m, const struct part *p, size_t *first, size_t *n)
{
	size_t lo = 0, hi = m->nr_calls;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct call *c = &m->calls[mid];

		if (c->req < p->id ||
		    (c->req == p->id &&
		     (c->node < p->node || (c->node == p->node && c->tid < p->tid))))
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = lo;
	for (hi = lo; hi < m->nr_calls && m->calls[hi].req == p->id &&
		      m->calls[hi].node == p->node && m->calls[hi].tid == p->tid;
	     hi++)
		;
	/* another part of the same request on this thread (a retry) is its own */
	while (lo < hi && m->calls[lo].entry + 1000 < p->begin)
		lo++;
	while (hi > lo && p->ended && m->calls[hi - 1].entry > p->end + 1000)
		hi--;
	*first = lo;
	*n = hi - lo;
}

static bool name_is(const struct model *m, const struct call *c, const char *pat)
{
	return !fnmatch(pat, m->names[c->name], 0);
}

static bool is_disk(const struct model *m, const struct call *c)
{
	return name_is(m, c, "plain_*");
}

static bool is_net(const struct model *m, const struct call *c)
{
	return name_is(m, c, "peer_fanout*") || name_is(m, c, "peer_request");
}

/* the disk and network time of part @p (see the top of this file) */
static void part_times(const struct model *m, struct part *p)
{
	size_t first, n;
	uint64_t disk_end = 0, net_end = 0, net_disk = 0;

	part_calls(m, p, &first, &n);
	p->disk_ns = p->net_ns = 0;
	for (size_t i = first; i < first + n; i++) {
		const struct call *c = &m->calls[i];
		uint64_t end = c->entry + c->dur;

		if (c->open)
			continue;
		if (is_disk(m, c) && c->entry >= disk_end) { /* outermost: not inside the last */
			p->disk_ns += c->dur;
			disk_end = end;
			if (c->entry < net_end)
				net_disk += c->dur;
		}
		if (is_net(m, c) && c->entry >= net_end) {
			p->net_ns += c->dur;
			net_end = end;
		}
	}
	p->net_ns = p->net_ns > net_disk ? p->net_ns - net_disk : 0;
}

/* ---- graph ---- */

struct gstack {
	uint64_t end;
	unsigned indent;
	const struct call *c;
};

static void graph_line(const struct model *m, const struct part *p, const char *dur,
		       unsigned indent, const char *text, const char *name, const char *tail)
{
	char label[120];

	snprintf(label, sizeof(label), "%s %s-%u", m->nodes[p->node].label, p->thread, p->tid);
	printf(" %34s | %13s | %*s%s%s%s\n", label, dur, (int)(2 * indent), "", text, name, tail);
}

static void fmt_us(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%llu.%03llu us", US(ns));
}

static void graph_part(const struct model *m, const struct part *p, unsigned indent,
		       const struct part *subs, size_t nr_subs);

/* the parts of @subs that @c (of the gateway) sent: the replicas' that began inside it */
static void graph_subs(const struct model *m, const struct call *c, unsigned indent,
		       const struct part *subs, size_t nr_subs, bool *done)
{
	for (size_t i = 0; i < nr_subs; i++) {
		const struct part *s = &subs[i];
		uint64_t slack = m->nodes[s->node].err_ns + 1000;

		if (done[i] || s->begin + slack < c->entry || s->begin > c->entry + c->dur + slack)
			continue;
		done[i] = true;
		graph_part(m, s, indent, NULL, 0);
	}
}

/*
 * Part @p's calls as a graph at @indent; the replicas' parts @subs go under
 * the call that sent them: the innermost peer_fanout* or peer_request call
 * around their begin (or at the end of the part if none is)
 */
static void graph_part(const struct model *m, const struct part *p, unsigned indent,
		       const struct part *subs, size_t nr_subs)
{
	struct gstack st[SD_TRACE_MAX_DEPTH + 2];
	unsigned nr = 0, base = UINT32_MAX;
	bool done[SD_MAX_NODES * 4] = { false };
	char text[200], us[32] = "", wait[32];
	size_t first, n;

	nr_subs = min_t(size_t, nr_subs, ARRAY_SIZE(done));
	part_calls(m, p, &first, &n);
	fmt_us(wait, sizeof(wait), p->wait_ns);
	snprintf(text, sizeof(text), "%s part of request %016llx on %s, queued %s",
		 p->flags & FLAG_GATEWAY ? "the gateway's" : "a replica's",
		 (unsigned long long)p->id, m->nodes[p->node].label, wait);
	if (p->ended)
		fmt_us(us, sizeof(us), p->end - p->begin);
	graph_line(m, p, us, indent, "# ", text, "");
	for (size_t i = first; i < first + n; i++)
		base = min_t(unsigned, base, m->calls[i].depth);
	for (size_t i = first; i < first + n; i++) {
		const struct call *c = &m->calls[i];
		const struct call *next = i + 1 < first + n ? c + 1 : NULL;
		unsigned ind = indent + 1 + (c->depth - base);
		bool leaf = !next || next->entry >= c->entry + c->dur || c->open;
		bool sends = nr_subs && is_net(m, c);

		while (nr && st[nr - 1].end <= c->entry) {
			nr--;
			fmt_us(us, sizeof(us), st[nr].c->dur);
			graph_line(m, p, us, st[nr].indent, "} /* ", m->names[st[nr].c->name],
				   " */");
		}
		fmt_us(us, sizeof(us), c->dur);
		if (leaf && !sends) {
			graph_line(m, p, c->open ? "" : us, ind, "", m->names[c->name],
				   c->open ? "() /* did not return */" : "();");
			continue;
		}
		graph_line(m, p, "", ind, "", m->names[c->name], "() {");
		if (sends)
			graph_subs(m, c, ind + 1, subs, nr_subs, done);
		if (leaf) {
			graph_line(m, p, us, ind, "} /* ", m->names[c->name], " */");
			continue;
		}
		if (nr < ARRAY_SIZE(st))
			st[nr++] = (struct gstack){ c->entry + c->dur, ind, c };
	}
	while (nr) {
		nr--;
		fmt_us(us, sizeof(us), st[nr].c->dur);
		graph_line(m, p, us, st[nr].indent, "} /* ", m->names[st[nr].c->name], " */");
	}
	/* replicas' parts that no traced call of the gateway was around */
	for (size_t i = 0; i < nr_subs; i++)
		if (!done[i])
			graph_part(m, &subs[i], indent + 1, NULL, 0);
}

/* "write_obj", or "op 0x82" for an opcode without a name here */
static const char *op_label(uint32_t opcode, char *buf, size_t len)
{
	const char *name = sd_op_name((uint8_t)opcode);

	if (strcmp(name, "op"))
		return name;
	snprintf(buf, len, "op 0x%02x", opcode);
	return buf;
}

/*
 * The parts of request [@from, @to) of the sorted parts (the gateway's
 * first, by begin): each gateway part (the main thread's attempt that
 * passed it to a worker, the worker's), the replicas' under the worker's
 */
static void graph_request(const struct model *m, size_t from, size_t to)
{
	const struct part *gw = &m->parts[from], *main = NULL;
	char lat[32] = "unknown", op[16];
	size_t nr_gw = 0;

	for (size_t i = from; i < to && (m->parts[i].flags & FLAG_GATEWAY); i++, nr_gw++)
		if (m->parts[i].result != RESULT_PASSED && m->parts[i].ended)
			main = &m->parts[i];
	if (main)
		fmt_us(lat, sizeof(lat), main->wait_ns + main->end - main->begin);
	printf("#\n# request %016llx %s oid %016llx vdi %06llx: %s%s\n#\n",
	       (unsigned long long)gw->id, op_label(gw->opcode, op, sizeof(op)),
	       (unsigned long long)gw->oid, (unsigned long long)((gw->oid >> 32) & 0xffffff), lat,
	       nr_gw ? "" : " (its gateway's part was not read)");
	for (size_t i = from; i < from + nr_gw; i++)
		graph_part(m, &m->parts[i], 0, &m->parts[i] == main ? gw + nr_gw : NULL,
			   &m->parts[i] == main ? to - from - nr_gw : 0);
	if (!main)
		for (size_t i = from + nr_gw; i < to; i++)
			graph_part(m, &m->parts[i], 0, NULL, 0);
}

/* ---- slow ---- */

struct slow {
	size_t from, to; /* its parts */
	uint64_t latency;
};

static int cmp_slow(const void *a, const void *b)
{
	const struct slow *x = a, *y = b;

	return x->latency > y->latency ? -1 : x->latency < y->latency;
}

static void fmt_ms(char *buf, size_t len, uint64_t ns)
{
	snprintf(buf, len, "%llu.%03llu ms", (unsigned long long)(ns / 1000000),
		 (unsigned long long)(ns / 1000 % 1000));
}

/* the top-level calls of part @p with their times, the longest first, into @buf */
static void top_calls(const struct model *m, const struct part *p, char *buf, size_t len)
{
	size_t first, n, used = 0;
	unsigned base = UINT32_MAX;
	const struct call *best[3] = { NULL };

	part_calls(m, p, &first, &n);
	for (size_t i = first; i < first + n; i++)
		base = min_t(unsigned, base, m->calls[i].depth);
	for (size_t i = first; i < first + n; i++) {
		const struct call *c = &m->calls[i];

		if (c->depth != base)
			continue;
		for (int k = 0; k < 3; k++) {
			if (!best[k] || c->dur > best[k]->dur) {
				memmove(best + k + 1, best + k, (2 - k) * sizeof(best[0]));
				best[k] = c;
				break;
			}
		}
	}
	buf[0] = '\0';
	for (int k = 0; k < 3 && best[k]; k++) {
		char t[32];

		fmt_ms(t, sizeof(t), best[k]->dur);
		used += (size_t)snprintf(buf + used, len - used, "%s%s %s", k ? ", " : "",
					 m->names[best[k]->name], t);
		if (used >= len)
			break;
	}
	if (!buf[0])
		snprintf(buf, len, "(no function traced)");
}

static void slow_part(const struct model *m, struct part *p)
{
	char q[32], net[32], disk[32], other[32], top[256];
	uint64_t total = p->ended ? p->end - p->begin : 0;
	uint64_t rest = total > p->disk_ns + p->net_ns ? total - p->disk_ns - p->net_ns : 0;

	fmt_ms(q, sizeof(q), p->wait_ns);
	fmt_ms(net, sizeof(net), p->net_ns);
	fmt_ms(disk, sizeof(disk), p->disk_ns);
	fmt_ms(other, sizeof(other), rest);
	top_calls(m, p, top, sizeof(top));
	printf("    %-22s %-8s %-12s queue %-12s network %-12s disk %-12s other %-12s %s\n",
	       m->nodes[p->node].label, p->flags & FLAG_GATEWAY ? "gateway" : "replica", p->thread,
	       q, net, disk, other, top);
}

static int slow_print(struct model *m, struct slow *v, size_t nr)
{
	uint32_t top = opts.has_top ? opts.top : 10;

	if (!nr) {
		printf("no request of the session%s%s was traced at its gateway\n",
		       opts.op ? " with op " : "", opts.op ? opts.op : "");
		return EXIT_OK;
	}
	qsort(v, nr, sizeof(*v), cmp_slow);
	printf("%-16s  %-22s %13s  %-6s  %-16s  %s\n", "REQUEST", "OP", "LATENCY", "VDI", "OBJECT",
	       "PARTS");
	for (size_t i = 0; i < nr && i < top; i++) {
		struct part *gw = &m->parts[v[i].from];
		char lat[32], op[16];

		fmt_ms(lat, sizeof(lat), v[i].latency);
		printf("%016llx  %-22s %13s  %06llx  %016llx  %zu\n", (unsigned long long)gw->id,
		       op_label(gw->opcode, op, sizeof(op)), lat,
		       (unsigned long long)((gw->oid >> 32) & 0xffffff),
		       (unsigned long long)gw->oid, v[i].to - v[i].from);
		for (size_t k = v[i].from; k < v[i].to; k++)
			if (m->parts[k].result != RESULT_PASSED)
				slow_part(m, &m->parts[k]);
	}
	return EXIT_OK;
}

/* the requests of @m whose gateway part was read, with their latency */
static int requests(struct model *m, struct slow **out, size_t *nr_out)
{
	struct slow *v = calloc(m->nr_parts ? m->nr_parts : 1, sizeof(*v));
	size_t nr = 0;
	char op[16];

	if (!v) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	for (size_t i = 0; i < m->nr_parts;) {
		size_t j = i;
		struct part *gw = NULL;

		for (; j < m->nr_parts && m->parts[j].id == m->parts[i].id; j++) {
			part_times(m, &m->parts[j]);
			/* the gateway's worker part (not the main thread's attempt) */
			if ((m->parts[j].flags & FLAG_GATEWAY) && m->parts[j].ended &&
			    m->parts[j].result != RESULT_PASSED)
				gw = &m->parts[j];
		}
		if (gw && (!opts.op || !strcmp(opts.op, op_label(gw->opcode, op, sizeof(op))))) {
			v[nr].from = i;
			v[nr].to = j;
			v[nr].latency = gw->wait_ns + gw->end - gw->begin;
			nr++;
		}
		i = j;
	}
	*out = v;
	*nr_out = nr;
	return EXIT_OK;
}

static int model_analyze(struct model *m)
{
	if (m->nr_parts)
		qsort(m->parts, m->nr_parts, sizeof(*m->parts), cmp_part);
	if (m->nr_calls)
		qsort(m->calls, m->nr_calls, sizeof(*m->calls), cmp_call);
	return EXIT_OK;
}

/* ---- the commands ---- */

static void chrome_trailer(const struct model *m)
{
	printf("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock_sync\":");
	json_str("each node's trace clock (ns, CLOCK_MONOTONIC's scale) read over TRACE_CLOCK just "
		 "before its events: offset = its reading minus the midpoint of collie's send and "
		 "receive, on the fastest of 8 round trips; error +/- half that round trip (older "
		 "records also carry the drift of the node's clock calibration since)");
	printf(",\"nodes\":[");
	for (int i = 0; i < m->nr_nodes; i++) {
		printf("%s{\"pid\":%d,\"node\":", i ? "," : "", i + 1);
		json_str(m->nodes[i].label);
		printf(",\"offset_ns\":%lld,\"error_ns\":%llu}", (long long)m->nodes[i].offset_ns,
		       (unsigned long long)m->nodes[i].err_ns);
	}
	printf("]}}\n");
}

/* flows: from the gateway's part to each replica's part at its begin, and back at its end */
static void chrome_flows(struct model *m)
{
	uint64_t flow = 1;

	qsort(m->parts, m->nr_parts, sizeof(*m->parts), cmp_part);
	for (size_t i = 0; i < m->nr_parts;) {
		const struct part *gw = NULL;
		size_t j = i;

		for (; j < m->nr_parts && m->parts[j].id == m->parts[i].id; j++)
			if ((m->parts[j].flags & FLAG_GATEWAY) && m->parts[j].ended &&
			    m->parts[j].result != RESULT_PASSED)
				gw = &m->parts[j];
		for (size_t k = i; gw && k < j; k++) {
			const struct part *r = &m->parts[k];
			uint64_t lo = gw->begin, hi = gw->end > gw->begin ? gw->end - 1 : gw->begin;
			uint64_t s, e;

			if (r->flags & FLAG_GATEWAY || !r->ended)
				continue;
			/* inside both slices whatever the clocks' error */
			s = r->begin < lo ? lo : r->begin > hi ? hi : r->begin;
			e = r->end > r->begin ? r->end - 1 : r->begin;
			m->cur = gw->node;
			chrome_flow(m, "s", flow, gw->node, gw->tid, s);
			chrome_flow(m, "f", flow++, r->node, r->tid, r->begin);
			chrome_flow(m, "s", flow, r->node, r->tid, e);
			chrome_flow(m, "f", flow++, gw->node, gw->tid,
				    e < lo   ? lo
				    : e > hi ? hi
					     : e);
		}
		i = j;
	}
}

int trace_cat_all(uint32_t fmt)
{
	struct model m = { .first = true };
	struct slow *v = NULL;
	size_t nr = 0;
	int ret;

	if (fmt != SD_TRACE_FMT_CHROME && fmt != SD_TRACE_FMT_GRAPH)
		return collie_usage_err("--all merges the nodes in the chrome and graph formats");
	m.chrome = fmt == SD_TRACE_FMT_CHROME;
	if (m.chrome)
		printf("{\"traceEvents\":[");
	ret = model_load(&m);
	if (m.chrome) {
		if (!ret) {
			chrome_flows(&m);
			chrome_trailer(&m);
		}
	} else if (!ret) {
		model_analyze(&m);
		ret = requests(&m, &v, &nr);
		for (size_t i = 0; !ret && i < nr; i++)
			graph_request(&m, v[i].from, v[i].to);
	}
	if (!ret && (fflush(stdout) || ferror(stdout))) {
		collie_err("failed to write the trace: %s", strerror(errno));
		ret = EXIT_SYSFAIL;
	}
	free(v);
	model_free(&m);
	return ret;
}

int trace_slow(int argc, char **argv)
{
	struct model m = { .first = true };
	struct slow *v = NULL;
	uint64_t id = 0;
	size_t nr = 0;
	int ret;

	if (opts.request) {
		char *end;

		errno = 0;
		id = strtoull(opts.request, &end, 16);
		if (errno || *end || !id)
			return collie_usage_err("invalid request id '%s' (16 hex digits)",
						opts.request);
	}
	ret = model_load(&m);
	if (!ret)
		ret = model_analyze(&m);
	if (!ret)
		ret = requests(&m, &v, &nr);
	if (!ret && opts.request) {
		size_t i;

		for (i = 0; i < m.nr_parts && m.parts[i].id != id; i++)
			;
		if (i == m.nr_parts) {
			collie_err("no part of request %016llx was traced on %s",
				   (unsigned long long)id,
				   opts.all ? "any node" : "this node (--all: every node)");
			ret = EXIT_MISSING;
		} else {
			size_t j = i;

			while (j < m.nr_parts && m.parts[j].id == id)
				j++;
			graph_request(&m, i, j);
		}
	} else if (!ret) {
		ret = slow_print(&m, v, nr);
	}
	free(v);
	model_free(&m);
	return ret;
}
