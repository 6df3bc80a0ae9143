/*
 * collie node: list, info, recovery, log level, vnodes, kill (stat in node_stat.c);
 * collie cluster reweight.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collie.h"
#include "logger.h"
#include "ring.h"

/* GET_NODE_LIST into a new array: EXIT_OK or an exit code */
int node_get_list(struct sd_node **nodes, uint32_t *nr, uint32_t *local_idx)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint32_t len = SD_MAX_NODES * sizeof(struct sd_node);
	int ret;

	*nodes = calloc(SD_MAX_NODES, sizeof(struct sd_node));
	if (!*nodes) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	collie_init_req(&hdr, SD_OP_GET_NODE_LIST);
	hdr.data_length = len;
	ret = collie_run("failed to get the node list", &hdr, *nodes, 0, len, &rsp);
	if (ret) {
		free(*nodes);
		*nodes = NULL;
		return ret;
	}
	*nr = min_t(uint32_t, rsp.node.nr_nodes,
		    min_t(uint32_t, rsp.data_length, len) / sizeof(struct sd_node));
	*local_idx = rsp.node.local_idx;
	return EXIT_OK;
}

/*
 * Ask node i (nodes[i]) for the len-byte answer of opcode into buf. EXIT_OK,
 * or an exit code once the failure is reported (what: what was asked).
 */
static int node_exec(const struct sd_node *node, uint32_t i, uint8_t opcode, void *buf,
		     uint32_t len, const char *what)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char host[64];

	memset(buf, 0, len);
	collie_node_host(node, host, sizeof(host));
	collie_init_req(&hdr, opcode);
	hdr.data_length = len;
	if (collie_exec_at(host, node->nid.port, &hdr, buf, 0, len, &rsp))
		return EXIT_SYSFAIL;
	if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to get the %s of node %u: %s", what, i,
			   sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
	return EXIT_OK;
}

static int node_list(int argc, char **argv)
{
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	char addr[64];
	int ret;

	bool any_io = false;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < nr; i++)
		any_io |= nodes[i].io_port != 0;
	if (!opts.raw)
		printf("  Id   Host:Port                V-Nodes   Zone%s\n",
		       any_io ? "   IO address (sheep --io-addr)" : "");
	for (uint32_t i = 0; i < nr; i++) {
		char io[32] = "";

		sd_addr_to_str(nodes[i].nid.addr, nodes[i].nid.port, addr, sizeof(addr));
		/* a column more when some node has an io address: "-" for one without */
		if (any_io && nodes[i].io_port)
			snprintf(io, sizeof(io), " %s%u.%u.%u.%u:%u", opts.raw ? "" : "  ",
				 nodes[i].io_addr[0], nodes[i].io_addr[1], nodes[i].io_addr[2],
				 nodes[i].io_addr[3], nodes[i].io_port);
		else if (any_io)
			snprintf(io, sizeof(io), " %s-", opts.raw ? "" : "  ");
		if (opts.raw)
			printf("%u %s %u %u%s\n", i, addr, nodes[i].nr_vnodes, nodes[i].zone, io);
		else if (nodes[i].flags & SD_NODE_GATEWAY) /* stores nothing */
			printf("%4u   %-24s %7s %6u%s\n", i, addr, "gateway", nodes[i].zone, io);
		else
			printf("%4u   %-24s %7u %6u%s\n", i, addr, nodes[i].nr_vnodes, nodes[i].zone,
			       io);
	}
	free(nodes);
	return EXIT_OK;
}

static void print_usage_line(const char *id, uint64_t size, uint64_t used, uint64_t avail,
			     uint64_t nr_objects)
{
	char s[32], u[32], a[32];
	unsigned int pct = size ? (unsigned int)(used * 100 / size) : 0;

	collie_fmt_size(size, s, sizeof(s));
	collie_fmt_size(used, u, sizeof(u));
	collie_fmt_size(avail, a, sizeof(a));
	if (opts.raw)
		printf("%s %s %s %s %u %llu\n", id, s, u, a, pct, (unsigned long long)nr_objects);
	else
		printf("%5s %10s %10s %10s %4u%% %9llu\n", id, s, u, a, pct,
		       (unsigned long long)nr_objects);
}

static int node_info(int argc, char **argv)
{
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	uint64_t tot_size = 0, tot_used = 0, tot_avail = 0, tot_objs = 0;
	int ret, failed = EXIT_OK;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (!opts.raw)
		printf("%5s %10s %10s %10s %5s %9s\n", "Id", "Size", "Used", "Avail", "Use%",
		       "Objects");
	for (uint32_t i = 0; i < nr; i++) {
		struct sd_node_info info;
		char id[16];

		ret = node_exec(&nodes[i], i, SD_OP_STAT_SHEEP, &info, sizeof(info), "status");
		if (ret) {
			failed = ret;
			continue;
		}
		snprintf(id, sizeof(id), "%u", i);
		/*
		 * The store's size: what it holds plus what it may still use.
		 * The filesystem's size (store_size) also counts what other
		 * programs keep there, which this node could never use.
		 */
		info.store_size = info.store_used + info.store_free;
		print_usage_line(id, info.store_size, info.store_used, info.store_free,
				 info.nr_objects);
		tot_size += info.store_size;
		tot_used += info.store_used;
		tot_avail += info.store_free;
		tot_objs += info.nr_objects;
	}
	if (nr)
		print_usage_line(opts.raw ? "total" : "Total", tot_size, tot_used, tot_avail,
				 tot_objs);
	free(nodes);
	return failed;
}

static const char *recovery_state(uint32_t state)
{
	switch (state) {
	case SD_RECOVERY_DONE:
		return "done";
	case SD_RECOVERY_RUNNING:
		return "running";
	case SD_RECOVERY_JOINING:
		return "joining";
	case SD_RECOVERY_WAITING:
		return "waiting";
	default:
		return "unknown";
	}
}

/* a node's recovery, as it answered */
struct recovery_row {
	struct sd_recovery_info info;
	bool answered; /* false: the failure was said on stderr */
};

/* every node's recovery into rows[] */
static int recovery_fetch(const struct sd_node *nodes, uint32_t nr, struct recovery_row *rows)
{
	int ret, failed = EXIT_OK;

	for (uint32_t i = 0; i < nr; i++) {
		ret = node_exec(&nodes[i], i, SD_OP_STAT_RECOVERY, &rows[i].info,
				sizeof(rows[i].info), "recovery");
		rows[i].answered = !ret;
		if (ret)
			failed = ret;
	}
	return failed;
}

static void recovery_print(const struct sd_node *nodes, uint32_t nr,
			   const struct recovery_row *rows)
{
	char addr[64];

	if (!opts.raw)
		printf("  Id   Host:Port                Epoch  State      Fetched    Total   Failed"
		       "  Removed\n");
	for (uint32_t i = 0; i < nr; i++) {
		const struct sd_recovery_info *info = &rows[i].info;

		if (!rows[i].answered)
			continue;
		sd_addr_to_str(nodes[i].nid.addr, nodes[i].nid.port, addr, sizeof(addr));
		if (opts.raw)
			printf("%u %s %u %s %llu %llu %llu %llu\n", i, addr, info->epoch,
			       recovery_state(info->state), (unsigned long long)info->nr_done,
			       (unsigned long long)info->nr_total,
			       (unsigned long long)info->nr_failed,
			       (unsigned long long)info->nr_removed);
		else
			printf(
			    "%4u   %-24s %5u  %-8s %9llu %8llu %8llu %8llu\n", i, addr, info->epoch,
			    recovery_state(info->state), (unsigned long long)info->nr_done,
			    (unsigned long long)info->nr_total, (unsigned long long)info->nr_failed,
			    (unsigned long long)info->nr_removed);
	}
}

/* done: every node answered, on one epoch, with its recovery done */
static bool recovery_done(const struct recovery_row *rows, uint32_t nr, uint64_t *fetched,
			  uint64_t *total)
{
	bool done = true;

	*fetched = *total = 0;
	for (uint32_t i = 0; i < nr; i++) {
		*fetched += rows[i].info.nr_done;
		*total += rows[i].info.nr_total;
		if (!rows[i].answered || rows[i].info.state != SD_RECOVERY_DONE ||
		    rows[i].info.epoch != rows[0].info.epoch)
			done = false;
	}
	return done;
}

/*
 * -w SECONDS: check every SECONDS until every node's recovery is done,
 * with a progress bar (objects fetched, all nodes) on a terminal; -n N
 * checks at most. EXIT_OK once done, EXIT_FAIL when N checks did not see it.
 */
static int recovery_wait(struct sd_node **nodes, uint32_t *nr, struct recovery_row **rows)
{
	struct collie_progress progress;
	uint64_t fetched, total;
	uint32_t local_idx;
	int ret = EXIT_OK;

	collie_progress_start(&progress, "recovery", 0, false);
	for (uint32_t n = 1;; n++) {
		bool done = recovery_done(*rows, *nr, &fetched, &total);

		progress.total = total;
		collie_progress_update(&progress, fetched);
		if (done)
			break;
		if (opts.count && n >= opts.count) {
			collie_progress_end(&progress);
			collie_err("recovery not done after %u checks", n);
			return EXIT_FAIL;
		}
		sleep(opts.watch);
		/* the membership may have changed meanwhile */
		free(*nodes);
		free(*rows);
		*rows = NULL;
		ret = node_get_list(nodes, nr, &local_idx);
		if (ret)
			break;
		*rows = calloc(*nr ? *nr : 1, sizeof(**rows));
		if (!*rows) {
			collie_err("out of memory");
			ret = EXIT_SYSFAIL;
			break;
		}
		recovery_fetch(*nodes, *nr, *rows);
	}
	collie_progress_end(&progress);
	return ret;
}

static int node_recovery(int argc, char **argv)
{
	struct sd_node *nodes;
	struct recovery_row *rows;
	uint32_t nr, local_idx;
	int ret, failed;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	rows = calloc(nr ? nr : 1, sizeof(*rows));
	if (!rows) {
		free(nodes);
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	failed = recovery_fetch(nodes, nr, rows);
	if (opts.watch) {
		failed = recovery_wait(&nodes, &nr, &rows);
		if (failed == EXIT_OK)
			failed = recovery_fetch(nodes, nr, rows);
	}
	if (rows)
		recovery_print(nodes, nr, rows);
	free(rows);
	free(nodes);
	return failed;
}

static const char node_recovery_help[] =
    "With -w SECONDS: wait until every node has recovered (one epoch, state\n"
    "done), checking every SECONDS, with a progress bar of the objects fetched\n"
    "on a terminal; then print the table. -n N: give up after N checks (exit 1).\n";

static const char *const log_level_names[] = {
	"emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
};

/* node log level [LEVEL]: the level of the node collie talks to, set first with LEVEL */
static int node_log_level(int argc, char **argv)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint32_t level = 0;
	int lv, ret;

	collie_init_req(&hdr, SD_OP_LOG_LEVEL);
	hdr.data_length = sizeof(level);
	if (argc) {
		lv = sd_log_parse_level(argv[0]);
		if (lv < 0)
			return collie_usage_err(
			    "invalid log level '%s' (emerg, alert, crit, error, "
			    "warn, notice, info, debug, or 0-7)",
			    argv[0]);
		level = (uint32_t)lv;
		hdr.flags |= SD_FLAG_CMD_WRITE;
	}
	ret = collie_run(argc ? "failed to set the log level" : "failed to get the log level", &hdr,
			 &level, argc ? sizeof(level) : 0, sizeof(level), &rsp);
	if (ret)
		return ret;
	if (rsp.data_length < sizeof(level) || level >= ARRAY_SIZE(log_level_names)) {
		collie_err("the daemon answered no log level");
		return EXIT_FAIL;
	}
	printf("%s\n", log_level_names[level]);
	return EXIT_OK;
}

/* node kill ID: node ID stops cleanly and leaves; the others recover without it */
static int node_kill(int argc, char **argv)
{
	struct sd_node *nodes;
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint32_t nr, local_idx;
	uint64_t id;
	char host[64], addr[64];
	int ret;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (sd_parse_uint(argv[0], 0, nr ? nr - 1 : 0, &id) || !nr) {
		ret = collie_usage_err("no node '%s' (the cluster has %u: ids 0-%u, see 'collie "
				       "node list')",
				       argv[0], nr, nr ? nr - 1 : 0);
		goto out_free;
	}
	collie_node_host(&nodes[id], host, sizeof(host));
	sd_addr_to_str(nodes[id].nid.addr, nodes[id].nid.port, addr, sizeof(addr));
	collie_init_req(&hdr, SD_OP_KILL_NODE);
	if (collie_exec_at(host, nodes[id].nid.port, &hdr, NULL, 0, 0, &rsp)) {
		ret = EXIT_SYSFAIL;
		goto out_free;
	}
	if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to stop node %u (%s): %s", (unsigned int)id, addr,
			   sd_strerror((int)rsp.result));
		ret = collie_exit_code((int)rsp.result);
		goto out_free;
	}
	printf("node %u (%s) is leaving; the others recover its objects "
	       "(collie node recovery -w 1)\n",
	       (unsigned int)id, addr);
	ret = EXIT_OK;
out_free:
	free(nodes);
	return ret;
}

/*
 * SET_VNODES e[n] through the node collie talks to, then wait (up to
 * 10 s) until its node list shows them: every node counts the epoch at the
 * same place of the order. EXIT_OK or an exit code, said why.
 */
static int vnodes_apply(const struct sd_vnodes_entry *e, uint32_t n)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	collie_init_req(&hdr, SD_OP_SET_VNODES);
	hdr.flags |= SD_FLAG_CMD_WRITE;
	hdr.data_length = n * (uint32_t)sizeof(*e);
	ret = collie_run("failed to set the vnodes", &hdr, (void *)e, hdr.data_length, 0, &rsp);
	if (ret)
		return ret;
	for (int tries = 0; tries < 100; tries++) {
		struct sd_node *nodes;
		uint32_t nr, local_idx, nr_done = 0;

		ret = node_get_list(&nodes, &nr, &local_idx);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < nr; j++)
				nr_done += !memcmp(&nodes[j].nid, &e[i].nid, sizeof(e[i].nid)) &&
					   nodes[j].nr_vnodes == e[i].nr_vnodes;
		free(nodes);
		if (nr_done == n)
			return EXIT_OK;
		usleep(100000);
	}
	collie_err("the new vnodes were sent, but the node list does not show them after 10 s "
		   "(a node left meanwhile?): see collie node list and sheep.log");
	return EXIT_FAIL;
}

/* node vnodes set N: the weight of the node collie talks to */
static int node_vnodes_set(int argc, char **argv)
{
	struct sd_vnodes_entry e = { 0 };
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	uint64_t v;
	char addr[64];
	int ret;

	if (sd_parse_uint(argv[0], 1, SD_MAX_VNODES, &v))
		return collie_usage_err("invalid vnode count '%s' (1-%d)", argv[0], SD_MAX_VNODES);
	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (local_idx >= nr) {
		collie_err("the node collie talks to is not in its own node list (joining?)");
		ret = EXIT_FAIL;
		goto out;
	}
	sd_addr_to_str(nodes[local_idx].nid.addr, nodes[local_idx].nid.port, addr, sizeof(addr));
	if (nodes[local_idx].flags & SD_NODE_GATEWAY) {
		collie_err("node %u (%s) is a gateway (sheep --gateway): it stores nothing and has "
			   "no vnodes",
			   local_idx, addr);
		ret = EXIT_FAIL;
		goto out;
	}
	if (nodes[local_idx].nr_vnodes == v) {
		printf("node %u (%s) has %u vnodes already: nothing changes\n", local_idx, addr,
		       (unsigned int)v);
		ret = EXIT_OK;
		goto out;
	}
	e.nid = nodes[local_idx].nid;
	e.nr_vnodes = (uint32_t)v;
	ret = vnodes_apply(&e, 1);
	if (!ret)
		printf("node %u (%s): vnodes %u -> %u, a new epoch; its objects move (collie node "
		       "recovery -w 1)\n",
		       local_idx, addr, nodes[local_idx].nr_vnodes, (unsigned int)v);
out:
	free(nodes);
	return ret;
}

/*
 * cluster reweight: every storing node's vnodes from the size of the
 * filesystems that hold its objects (its disks'): SD_DEFAULT_VNODES for a
 * node of the mean size, in proportion otherwise. One epoch for all.
 */
int cluster_reweight(int argc, char **argv)
{
	struct sd_vnodes_entry *e = NULL;
	struct sd_node *nodes;
	uint64_t *size = NULL;
	double total = 0;
	uint32_t nr, local_idx, nr_storing = 0, n = 0;
	int ret;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	size = calloc(nr ? nr : 1, sizeof(*size));
	e = calloc(nr ? nr : 1, sizeof(*e));
	if (!size || !e) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	for (uint32_t i = 0; i < nr; i++) {
		struct sd_node_info info;

		if (nodes[i].flags & SD_NODE_GATEWAY)
			continue;
		ret = node_exec(&nodes[i], i, SD_OP_STAT_SHEEP, &info, sizeof(info), "status");
		if (ret)
			goto out; /* every size or none: the weights are relative */
		size[i] = info.store_size;
		total += (double)size[i];
		nr_storing++;
	}
	if (!nr_storing || total <= 0) {
		collie_err("no node stores objects, or none has any space");
		ret = EXIT_FAIL;
		goto out;
	}
	if (!opts.raw)
		printf("  Id   Host:Port                      Size   V-Nodes\n");
	for (uint32_t i = 0; i < nr; i++) {
		double want = SD_DEFAULT_VNODES * (double)size[i] * nr_storing / total;
		uint32_t v = want < 1 ? 1 : want > SD_MAX_VNODES ? SD_MAX_VNODES : (uint32_t)(want + 0.5);
		char addr[64], sz[32];

		if (nodes[i].flags & SD_NODE_GATEWAY)
			continue;
		sd_addr_to_str(nodes[i].nid.addr, nodes[i].nid.port, addr, sizeof(addr));
		collie_fmt_size(size[i], sz, sizeof(sz));
		if (opts.raw)
			printf("%u %s %llu %u %u\n", i, addr, (unsigned long long)size[i],
			       nodes[i].nr_vnodes, v);
		else
			printf("%4u   %-24s %10s   %u -> %u\n", i, addr, sz, nodes[i].nr_vnodes, v);
		if (v != nodes[i].nr_vnodes) {
			e[n].nid = nodes[i].nid;
			e[n++].nr_vnodes = v;
		}
	}
	if (!n) {
		printf("the vnodes match the nodes' sizes already: nothing changes\n");
		ret = EXIT_OK;
		goto out;
	}
	ret = vnodes_apply(e, n);
	if (!ret)
		printf("%u node(s) reweighted in one epoch; the objects move (collie node recovery "
		       "-w 1)\n",
		       n);
out:
	free(e);
	free(size);
	free(nodes);
	return ret;
}

static const struct subcommand node_vnodes_cmds[] = {
	{ "set", "N", 0,
	  "give the node collie talks to N vnodes (1-4096): its share of the objects, one epoch",
	  node_vnodes_set, NULL, 1, 1, "  collie node vnodes set 256 -p 7001\n" },
	{ NULL },
};

static const struct subcommand node_log_cmds[] = {
	{ "level", "[LEVEL]", 0, "show the log level of the node collie talks to, or set it (live)",
	  node_log_level, NULL, 0, 1, "  collie node log level debug -p 7001\n" },
	{ NULL },
};

static const char node_stat_help[] =
	"Columns, per op and for the TOTAL row (since the daemon's start, or over\n"
	"each -w interval):\n"
	"  inflt      requests dispatched and not yet answered, now\n"
	"  op/s       completions per second (errors included)\n"
	"  MB/s       payload moved, both directions (MiB/s)\n"
	"  svctm(us)  busy time per completion (iostat's svctm)\n"
	"  await(us)  mean time from dispatch to reply, queue wait included;\n"
	"             await well above svctm: requests queue\n"
	"  %util      share of the time with at least one of the op in flight\n"
	"\n"
	"Example: a write that never completes shows at once as\n"
	"  write           1       0.0     0.00        0.0        0.0  100.0\n"
	"(one in flight, no completion, busy the whole interval); past the\n"
	"daemon's --hang-threshold a 'hangs:' line follows and its log names it.\n"
	"\n"
	"--caches: per cache (fd: the store's open object files) its size, the\n"
	"entries held and in use now, the hit ratio over the interval and hits,\n"
	"misses, evictions and invalidations per second. Misses that stay high\n"
	"with evictions: more objects are busy than the cache holds (it takes an\n"
	"eighth of the descriptor limit, LimitNOFILE, at most 2048).\n";

const struct subcommand node_cmds[] = {
	{ "list", "", OPT_RAW, "list the nodes of the cluster", node_list, NULL, 0, 0 },
	{ "info", "", OPT_RAW, "show each node's store: size (used + avail), used, avail",
	  node_info, NULL, 0, 0 },
	{ "recovery", "", OPT_RAW | OPT_WATCH | OPT_COUNT,
	  "show each node's recovery: epoch, state, objects fetched", node_recovery, NULL, 0, 0,
	  NULL, node_recovery_help },
	{ "log", "level", 0, "the log level of a node", NULL, node_log_cmds },
	{ "vnodes", "set", 0, "the weight of a node on the placement ring", NULL,
	  node_vnodes_cmds },
	{ "md", "info|plug|unplug", 0, "the disks of a node (sheep --disk): show, add, remove",
	  NULL, node_md_cmds },
	{ "kill", "ID", 0, "stop node ID cleanly: it leaves, the others recover its objects",
	  node_kill, NULL, 1, 1 },
	{ "stat", "",
	  OPT_RAW | OPT_WATCH | OPT_COUNT | OPT_HIST | OPT_ALL | OPT_QUEUES | OPT_CACHES | OPT_VDI,
	  "request statistics like iostat: per op in flight, op/s, MB/s, latency, %util", node_stat,
	  NULL, 0, 0, NULL, node_stat_help },
	{ NULL },
};
