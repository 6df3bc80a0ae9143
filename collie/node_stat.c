/*
 * collie node stat: the daemon's request statistics, like iostat.
 *
 * Every figure is a difference of two snapshots (STAT_READ) divided by the
 * time between them on the daemon's clock: without -w the first snapshot
 * is the daemon's start (all zeros), with -w it is the previous report's.
 *
 *   inflt      requests of the op dispatched and not yet answered, now
 *   op/s       completions per second
 *   MB/s       payload moved, both directions (MiB per second)
 *   svctm(us)  busy time per completion (iostat's svctm)
 *   await(us)  mean time from dispatch to reply: queue plus service
 *   %util      share of the interval with at least one of the op in flight
 *
 * --queues: per work queue its threads, works queued and running, works
 * done, the oldest queued work's wait, then the requests of the ops it runs
 * (in flight, op/s, await).
 *
 * --caches: per cache the daemon keeps (fd: the store's open object files)
 * its size in entries, the entries held and in use now, then over the
 * interval the hit ratio, hits, misses (each an open), evictions and
 * invalidations per second. A daemon from before the caches shows none.
 *
 * A request that never ends keeps its op busy: inflt 1, 0 op/s, 100% util.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collie.h"

#define SNAP_LEN (64 * 1024)
#define HIST_WIDTH 40
#define TOP_VDIS 10

struct snap {
	char buf[SNAP_LEN];
	const struct sd_stat_header *h;
	const struct sd_stat_op *total, *ops;
	const struct sd_stat_queue *queues;
	const struct sd_stat_vdi *vdis;
	const struct sd_stat_cache *caches;
};

/* one node to ask, and what it answered last */
struct target {
	char host[64];
	int port;
	char label[12]; /* the node column of --all */
	struct snap *prev, *cur;
};

static int fetch(struct target *t, struct snap *s)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	size_t need;

	collie_init_req(&hdr, SD_OP_STAT_READ);
	hdr.data_length = SNAP_LEN;
	if (collie_exec_at(t->host, t->port, &hdr, s->buf, 0, SNAP_LEN, &rsp))
		return EXIT_SYSFAIL;
	if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to get the statistics of %s:%d: %s", t->host, t->port,
			   sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
	s->h = (const void *)s->buf;
	if (rsp.data_length < sizeof(*s->h) || s->h->version != SD_STAT_VERSION ||
	    s->h->nr_ops > SD_STAT_MAX_OPS || s->h->nr_queues > SD_STAT_MAX_QUEUES ||
	    s->h->nr_vdis > SD_STAT_MAX_VDIS || s->h->nr_caches > SD_STAT_MAX_CACHES) {
		collie_err("unexpected statistics from %s:%d", t->host, t->port);
		return EXIT_FAIL;
	}
	need = sizeof(*s->h) + (1 + s->h->nr_ops) * sizeof(struct sd_stat_op) +
	       s->h->nr_queues * sizeof(struct sd_stat_queue) +
	       s->h->nr_vdis * sizeof(struct sd_stat_vdi) +
	       s->h->nr_caches * sizeof(struct sd_stat_cache);
	if (rsp.data_length < need) {
		collie_err("short statistics from %s:%d", t->host, t->port);
		return EXIT_FAIL;
	}
	s->total = (const void *)(s->h + 1);
	s->ops = s->total + 1;
	s->queues = (const void *)(s->ops + s->h->nr_ops);
	s->vdis = (const void *)(s->queues + s->h->nr_queues);
	s->caches = (const void *)(s->vdis + s->h->nr_vdis);
	return EXIT_OK;
}

/* the same op in the previous snapshot (by opcode), or NULL */
static const struct sd_stat_op *prev_op(const struct snap *prev, const struct sd_stat_op *op,
					bool is_total)
{
	if (!prev)
		return NULL;
	if (is_total)
		return prev->total;
	for (uint32_t i = 0; i < prev->h->nr_ops; i++)
		if (prev->ops[i].opcode == op->opcode && !strcmp(prev->ops[i].name, op->name))
			return &prev->ops[i];
	return NULL;
}

#define DELTA(cur, prev, f) ((cur)->f - ((prev) ? (prev)->f : 0))

/* seconds between the two snapshots (the first one: the daemon's start) */
static double interval(const struct target *t)
{
	uint64_t from = t->prev ? t->prev->h->now_ns : t->cur->h->now_ns - t->cur->h->uptime_ns;

	return (t->cur->h->now_ns - from) / 1e9;
}

static void print_header(bool all)
{
	if (opts.raw)
		return;
	if (all)
		printf("%-5s ", "node");
	printf("%-22s %6s %9s %8s %10s %10s %6s\n", "op", "inflt", "op/s", "MB/s", "svctm(us)",
	       "await(us)", "%util");
}

static void print_row(const char *label, const struct sd_stat_op *op, const struct sd_stat_op *p,
		      double secs)
{
	uint64_t done = DELTA(op, p, nr_done), busy = DELTA(op, p, busy_ns);
	double ops = secs > 0 ? done / secs : 0;
	double mbs = secs > 0 ? DELTA(op, p, bytes) / secs / 1048576.0 : 0;
	double svctm = done ? busy / 1000.0 / done : 0;
	double await = done ? DELTA(op, p, await_ns) / 1000.0 / done : 0;
	double util = secs > 0 ? busy / 1e9 / secs * 100.0 : 0;

	if (util > 100.0)
		util = 100.0;
	if (opts.raw) {
		/* raw: the counts of the interval too, for scripts */
		printf("%s%s%s %llu %llu %llu %llu %.1f %.1f %.1f %.1f %.1f\n", label,
		       label[0] ? " " : "", op->name, (unsigned long long)op->nr_inflight,
		       (unsigned long long)done, (unsigned long long)DELTA(op, p, nr_errors),
		       (unsigned long long)DELTA(op, p, bytes), ops, mbs, svctm, await, util);
		return;
	}
	if (label[0])
		printf("%-5s ", label);
	printf("%-22s %6llu %9.1f %8.2f %10.1f %10.1f %6.1f\n", op->name,
	       (unsigned long long)op->nr_inflight, ops, mbs, svctm, await, util);
}

static void print_ops(const struct target *t, bool all)
{
	const struct snap *cur = t->cur, *prev = t->prev;
	double secs = interval(t);
	const char *label = all ? t->label : "";

	for (uint32_t i = 0; i < cur->h->nr_ops; i++) {
		const struct sd_stat_op *op = &cur->ops[i];

		/* the ops this daemon has ever seen */
		if (op->nr_done || op->nr_inflight)
			print_row(label, op, prev_op(prev, op, false), secs);
	}
	print_row(label, cur->total, prev_op(prev, cur->total, true), secs);
	if (!opts.raw && (cur->h->nr_hangs || cur->h->nr_hung))
		printf("%s%shangs: %llu since start, %u in flight longer than %llu s\n", label,
		       label[0] ? " " : "", (unsigned long long)cur->h->nr_hangs, cur->h->nr_hung,
		       (unsigned long long)(cur->h->hang_threshold_ns / 1000000000ULL));
}

static void print_queues(const struct target *t, bool all)
{
	const struct snap *cur = t->cur, *prev = t->prev;
	double secs = interval(t);

	for (uint32_t i = 0; i < cur->h->nr_queues; i++) {
		const struct sd_stat_queue *q = &cur->queues[i], *p = NULL;

		if (prev && i < prev->h->nr_queues && !strcmp(prev->queues[i].name, q->name))
			p = &prev->queues[i];
		uint64_t done = DELTA(q, p, nr_done), reqs = DELTA(q, p, nr_reqs);
		double rps = secs > 0 ? reqs / secs : 0;
		double await = reqs ? DELTA(q, p, await_ns) / 1000.0 / reqs : 0;

		if (opts.raw) {
			printf("%s%s%s %u %u %u %llu %llu %llu %llu %llu %llu %.1f\n",
			       all ? t->label : "", all ? " " : "", q->name, q->nr_threads,
			       q->nr_queued, q->nr_running, (unsigned long long)done,
			       (unsigned long long)(q->longest_wait_ns / 1000),
			       (unsigned long long)q->nr_inflight, (unsigned long long)reqs,
			       (unsigned long long)DELTA(q, p, nr_errors),
			       (unsigned long long)DELTA(q, p, bytes), await);
			continue;
		}
		if (all)
			printf("%-5s ", t->label);
		printf("%-10s %7u %7u %7u %10llu %10llu %6llu %9.1f %10.1f\n", q->name,
		       q->nr_threads, q->nr_queued, q->nr_running, (unsigned long long)done,
		       (unsigned long long)(q->longest_wait_ns / 1000),
		       (unsigned long long)q->nr_inflight, rps, await);
	}
}

static void print_caches(const struct target *t, bool all)
{
	const struct snap *cur = t->cur, *prev = t->prev;
	double secs = interval(t);

	for (uint32_t i = 0; i < cur->h->nr_caches; i++) {
		const struct sd_stat_cache *c = &cur->caches[i], *p = NULL;

		if (prev && i < prev->h->nr_caches &&
		    !strncmp(prev->caches[i].name, c->name, sizeof(c->name)))
			p = &prev->caches[i];
		uint64_t hits = DELTA(c, p, nr_hits), misses = DELTA(c, p, nr_misses);
		uint64_t evict = DELTA(c, p, nr_evictions), inval = DELTA(c, p, nr_invalidations);

		if (opts.raw) {
			printf("%s%s%.*s %u %u %u %llu %llu %llu %llu\n", all ? t->label : "",
			       all ? " " : "", (int)sizeof(c->name), c->name, c->capacity,
			       c->nr_cached, c->nr_in_use, (unsigned long long)hits,
			       (unsigned long long)misses, (unsigned long long)evict,
			       (unsigned long long)inval);
			continue;
		}
		if (all)
			printf("%-5s ", t->label);
		printf("%-10.*s %7u %7u %7u %6.1f %10.1f %10.1f %10.1f %10.1f\n",
		       (int)sizeof(c->name), c->name, c->capacity, c->nr_cached, c->nr_in_use,
		       hits + misses ? 100.0 * hits / (hits + misses) : 0.0,
		       secs > 0 ? hits / secs : 0, secs > 0 ? misses / secs : 0,
		       secs > 0 ? evict / secs : 0, secs > 0 ? inval / secs : 0);
	}
}

static int cmp_vdi(const void *a, const void *b)
{
	const struct sd_stat_vdi *x = a, *y = b;
	uint64_t nx = x->nr_reads + x->nr_writes, ny = y->nr_reads + y->nr_writes;

	if (nx != ny)
		return nx < ny ? 1 : -1;
	return x->vid < y->vid ? -1 : x->vid > y->vid;
}

/* the names of the VDIs shown, read once per vid (a deleted one: none) */
#define NAME_CACHE 64
static struct {
	uint32_t vid;
	char name[SD_MAX_VDI_LEN + 16];
} name_cache[NAME_CACHE];
static unsigned int nr_names;

/* "alice", "alice@2" for a snapshot, or "" when the inode cannot be read */
static const char *vdi_name(uint32_t vid)
{
	static struct sd_inode_header h;
	unsigned int slot;

	for (unsigned int i = 0; i < min_t(unsigned int, nr_names, NAME_CACHE); i++)
		if (name_cache[i].vid == vid)
			return name_cache[i].name;
	slot = nr_names++ % NAME_CACHE;
	name_cache[slot].vid = vid;
	name_cache[slot].name[0] = '\0';
	memset(&h, 0, sizeof(h));
	if (vdi_read_inode(vid, (struct sd_inode *)&h, SD_INODE_HEADER_SIZE) == EXIT_OK &&
	    h.vdi_id == vid) {
		if (h.snap_ctime)
			snprintf(name_cache[slot].name, sizeof(name_cache[slot].name), "%.*s@%u",
				 SD_MAX_VDI_LEN, h.name, h.snap_id);
		else
			snprintf(name_cache[slot].name, sizeof(name_cache[slot].name), "%.*s",
				 SD_MAX_VDI_LEN, h.name);
	}
	return name_cache[slot].name;
}

static void print_vdis(const struct target *t, bool all)
{
	const struct snap *cur = t->cur, *prev = t->prev;
	struct sd_stat_vdi v[SD_STAT_MAX_VDIS];
	uint32_t n = cur->h->nr_vdis;

	memcpy(v, cur->vdis, n * sizeof(v[0]));
	/* over the interval: subtract what the previous snapshot had */
	for (uint32_t i = 0; prev && i < n; i++)
		for (uint32_t j = 0; j < prev->h->nr_vdis; j++)
			if (prev->vdis[j].vid == v[i].vid) {
				v[i].nr_reads -= prev->vdis[j].nr_reads;
				v[i].nr_writes -= prev->vdis[j].nr_writes;
				v[i].bytes -= prev->vdis[j].bytes;
				v[i].await_ns -= prev->vdis[j].await_ns;
			}
	qsort(v, n, sizeof(v[0]), cmp_vdi);
	for (uint32_t i = 0; i < n && i < TOP_VDIS; i++) {
		uint64_t nr = v[i].nr_reads + v[i].nr_writes;
		double await = nr ? v[i].await_ns / 1000.0 / nr : 0;
		const char *name;
		char vid[16];

		if (!nr)
			continue;
		if (v[i].vid)
			snprintf(vid, sizeof(vid), "%06x", v[i].vid);
		else
			snprintf(vid, sizeof(vid), "other");
		name = v[i].vid ? vdi_name(v[i].vid) : "";
		if (opts.raw) {
			/* the name last, escaped: the columns before it stay as they were */
			printf("%s%s%s %llu %llu %llu %.1f ", all ? t->label : "", all ? " " : "",
			       vid, (unsigned long long)v[i].nr_reads,
			       (unsigned long long)v[i].nr_writes, (unsigned long long)v[i].bytes,
			       await);
			collie_print_escaped(*name ? name : "-");
			putchar('\n');
			continue;
		}
		if (all)
			printf("%-5s ", t->label);
		printf("%-20s %-6s %10llu %10llu %10.2f %10.1f\n",
		       *name	  ? name
		       : v[i].vid ? "(deleted)"
				  : "(no vdi)",
		       v[i].vid ? vid : "-", (unsigned long long)v[i].nr_reads,
		       (unsigned long long)v[i].nr_writes, v[i].bytes / 1048576.0, await);
	}
}

/* the op named name (its short name, any case, or "total") in s, or NULL */
static const struct sd_stat_op *find_op(const struct snap *s, const char *name)
{
	if (!strcasecmp(name, "total"))
		return s->total;
	for (uint32_t i = 0; i < s->h->nr_ops; i++)
		if (!strcasecmp(s->ops[i].name, name))
			return &s->ops[i];
	return NULL;
}

/* the upper end (us) of the bucket holding the p-th fraction of n completions */
static uint64_t percentile(const uint64_t *hist, uint64_t n, double p)
{
	uint64_t want = (uint64_t)(p * n + 0.999999), cum = 0;

	for (int k = 0; k < SD_STAT_NR_BUCKETS; k++) {
		cum += hist[k];
		if (cum >= want && cum)
			return (UINT64_C(2) << k) - 1;
	}
	return 0;
}

/* bcc funclatency's layout: "  low -> high : count |****|" */
static int print_hist(const struct target *t, bool all)
{
	const struct sd_stat_op *op = find_op(t->cur, opts.hist), *p;
	uint64_t hist[SD_STAT_NR_BUCKETS], max = 0, n = 0;
	int last = -1;

	if (!op) {
		collie_err("no op '%s' in the statistics (see 'collie node stat')", opts.hist);
		return EXIT_FAIL;
	}
	p = t->prev ? find_op(t->prev, opts.hist) : NULL;
	for (int k = 0; k < SD_STAT_NR_BUCKETS; k++) {
		hist[k] = op->hist[k] - (p ? p->hist[k] : 0);
		n += hist[k];
		max = max_t(uint64_t, max, hist[k]);
		if (hist[k])
			last = k;
	}
	if (all)
		printf("node %s:\n", t->label);
	if (opts.raw) {
		for (int k = 0; k <= last; k++)
			printf("%llu %llu %llu\n", k ? 1ULL << k : 0ULL,
			       (unsigned long long)((UINT64_C(2) << k) - 1),
			       (unsigned long long)hist[k]);
	} else {
		printf("     %-19s : count     distribution\n", "usecs");
		for (int k = 0; k <= last; k++) {
			char bar[HIST_WIDTH + 1];
			int stars = max ? (int)(hist[k] * HIST_WIDTH / max) : 0;

			memset(bar, '*', (size_t)stars);
			memset(bar + stars, ' ', (size_t)(HIST_WIDTH - stars));
			bar[HIST_WIDTH] = '\0';
			printf("%10llu -> %-10llu : %-8llu |%s|\n", k ? 1ULL << k : 0ULL,
			       (unsigned long long)((UINT64_C(2) << k) - 1),
			       (unsigned long long)hist[k], bar);
		}
	}
	printf("%s: %llu completions, p50 <= %llu us, p99 <= %llu us\n", op->name,
	       (unsigned long long)n, (unsigned long long)percentile(hist, n, 0.50),
	       (unsigned long long)percentile(hist, n, 0.99));
	return EXIT_OK;
}

static int report(struct target *targets, int nr)
{
	bool all = opts.all;
	int ret = EXIT_OK;

	if (opts.hist) {
		for (int i = 0; i < nr; i++)
			if (targets[i].cur && print_hist(&targets[i], all))
				ret = EXIT_FAIL;
		return ret;
	}
	if (opts.queues && !opts.raw) {
		if (all)
			printf("%-5s ", "node");
		printf("%-10s %7s %7s %7s %10s %10s %6s %9s %10s\n", "queue", "threads", "queued",
		       "running", "done", "wait(us)", "inflt", "op/s", "await(us)");
	} else if (opts.caches && !opts.raw) {
		if (all)
			printf("%-5s ", "node");
		printf("%-10s %7s %7s %7s %6s %10s %10s %10s %10s\n", "cache", "size", "held",
		       "in use", "hit%", "hits/s", "misses/s", "evict/s", "inval/s");
	} else if (opts.vdi && !opts.raw) {
		if (all)
			printf("%-5s ", "node");
		printf("%-20s %-6s %10s %10s %10s %10s\n", "vdi", "vid", "reads", "writes", "MB",
		       "await(us)");
	} else if (!opts.queues && !opts.caches && !opts.vdi) {
		print_header(all);
	}
	for (int i = 0; i < nr; i++) {
		if (!targets[i].cur)
			continue;
		if (opts.queues)
			print_queues(&targets[i], all);
		else if (opts.caches)
			print_caches(&targets[i], all);
		else if (opts.vdi)
			print_vdis(&targets[i], all);
		else
			print_ops(&targets[i], all);
	}
	return ret;
}

/* take a snapshot of every target into its cur (the old cur becomes prev) */
static int fetch_all(struct target *targets, int nr)
{
	int ret = EXIT_OK;

	for (int i = 0; i < nr; i++) {
		struct snap *s = targets[i].prev;

		if (!s)
			s = malloc(sizeof(*s));
		if (!s) {
			collie_err("out of memory");
			return EXIT_SYSFAIL;
		}
		targets[i].prev = targets[i].cur;
		targets[i].cur = s;
		int r = fetch(&targets[i], s);
		if (r) {
			/* this node is left out of the report */
			free(s);
			targets[i].cur = NULL;
			ret = r;
		}
	}
	return ret;
}

static int make_targets(struct target **out, int *nr)
{
	struct sd_node *nodes;
	uint32_t n, local_idx;
	struct target *t;
	int ret;

	if (!opts.all) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return EXIT_SYSFAIL;
		snprintf(t->host, sizeof(t->host), "%s", opts.addr);
		t->port = opts.port;
		*out = t;
		*nr = 1;
		return EXIT_OK;
	}
	ret = node_get_list(&nodes, &n, &local_idx);
	if (ret)
		return ret;
	t = calloc(n ? n : 1, sizeof(*t));
	if (!t) {
		free(nodes);
		return EXIT_SYSFAIL;
	}
	for (uint32_t i = 0; i < n; i++) {
		collie_node_host(&nodes[i], t[i].host, sizeof(t[i].host));
		t[i].port = nodes[i].nid.port;
		snprintf(t[i].label, sizeof(t[i].label), "%u", i);
	}
	free(nodes);
	*out = t;
	*nr = (int)n;
	return EXIT_OK;
}

int node_stat(int argc, char **argv)
{
	struct target *targets;
	int nr, ret, failed;

	if (opts.count && !opts.watch)
		return collie_usage_err("-n needs -w");
	if (!!opts.hist + opts.queues + opts.caches + opts.vdi > 1)
		return collie_usage_err("--hist, --queues, --caches and --vdi go one at a time");
	if (opts.vdi_name)
		return collie_usage_err("--vdi takes no name here: it shows the busiest VDIs");
	ret = make_targets(&targets, &nr);
	if (ret)
		return ret;
	failed = fetch_all(targets, nr);
	if (!opts.watch) {
		/* since the daemon's start */
		ret = report(targets, nr);
	} else {
		for (uint32_t i = 0; !opts.count || i < opts.count; i++) {
			sleep(opts.watch);
			failed = fetch_all(targets, nr);
			if (i)
				printf("\n");
			ret = report(targets, nr);
			fflush(stdout);
		}
	}
	for (int i = 0; i < nr; i++) {
		free(targets[i].prev);
		free(targets[i].cur);
	}
	free(targets);
	return ret ? ret : failed;
}
