/*
 * collie node: list, info, recovery.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

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

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (!opts.raw)
		printf("  Id   Host:Port                V-Nodes   Zone\n");
	for (uint32_t i = 0; i < nr; i++) {
		sd_addr_to_str(nodes[i].nid.addr, nodes[i].nid.port, addr, sizeof(addr));
		if (opts.raw)
			printf("%u %s %u %u\n", i, addr, nodes[i].nr_vnodes, nodes[i].zone);
		else
			printf("%4u   %-24s %7u %6u\n", i, addr, nodes[i].nr_vnodes, nodes[i].zone);
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

static int node_recovery(int argc, char **argv)
{
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	char addr[64];
	int ret, failed = EXIT_OK;

	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (!opts.raw)
		printf("  Id   Host:Port                Epoch  State      Fetched    Total   Failed"
		       "  Removed\n");
	for (uint32_t i = 0; i < nr; i++) {
		struct sd_recovery_info info;

		ret = node_exec(&nodes[i], i, SD_OP_STAT_RECOVERY, &info, sizeof(info),
				"recovery");
		if (ret) {
			failed = ret;
			continue;
		}
		sd_addr_to_str(nodes[i].nid.addr, nodes[i].nid.port, addr, sizeof(addr));
		if (opts.raw)
			printf("%u %s %u %s %llu %llu %llu %llu\n", i, addr, info.epoch,
			       recovery_state(info.state), (unsigned long long)info.nr_done,
			       (unsigned long long)info.nr_total,
			       (unsigned long long)info.nr_failed,
			       (unsigned long long)info.nr_removed);
		else
			printf("%4u   %-24s %5u  %-8s %9llu %8llu %8llu %8llu\n", i, addr,
			       info.epoch, recovery_state(info.state),
			       (unsigned long long)info.nr_done, (unsigned long long)info.nr_total,
			       (unsigned long long)info.nr_failed,
			       (unsigned long long)info.nr_removed);
	}
	free(nodes);
	return failed;
}

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
	"daemon's --hang-threshold a 'hangs:' line follows and its log names it.\n";

const struct subcommand node_cmds[] = {
	{ "list", "", OPT_RAW, "list the nodes of the cluster", node_list, NULL, 0, 0 },
	{ "info", "", OPT_RAW, "show each node's store: size (used + avail), used, avail", node_info, NULL, 0, 0 },
	{ "recovery", "", OPT_RAW, "show each node's recovery: epoch, state, objects fetched",
	  node_recovery, NULL, 0, 0 },
	{ "stat", "", OPT_RAW | OPT_WATCH | OPT_COUNT | OPT_HIST | OPT_ALL | OPT_QUEUES | OPT_VDI,
	  "request statistics like iostat: per op in flight, op/s, MB/s, latency, %util",
	  node_stat, NULL, 0, 0, NULL, node_stat_help },
	{ NULL },
};
