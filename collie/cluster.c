/*
 * collie cluster: format, info, shutdown.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collie.h"
#include "ec.h"

#define NR_EPOCH_LOGS 1024

static int cluster_format(int argc, char **argv)
{
	struct sd_req hdr;
	struct sd_rsp rsp;

	/* -c N or -c D:P: the scheme of the vdis created without one */
	collie_init_req(&hdr, SD_OP_MAKE_FS);
	hdr.cluster.ctime = (uint64_t)time(NULL);
	hdr.cluster.copies = opts.has_copies ? opts.copies : 0;
	hdr.cluster.copy_policy = opts.has_copies ? opts.copy_policy : 0;
	hdr.cluster.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	return collie_run("failed to format the cluster", &hdr, NULL, 0, 0, &rsp);
}

static const char *status_str(uint32_t status)
{
	switch (status) {
	case SD_STATUS_OK:
		return "running";
	case SD_STATUS_WAIT_FOR_FORMAT:
		return "not formatted";
	case SD_STATUS_SHUTDOWN:
		return "shutting down";
	case SD_STATUS_HALT:
		return "halted";
	case SD_STATUS_WAIT_FOR_JOIN:
		return "waiting for the other nodes of its last epoch to join "
		       "(collie cluster recover force: serve without them)";
	default:
		return "unknown";
	}
}

static const char *raw_status_str(uint32_t status)
{
	switch (status) {
	case SD_STATUS_OK:
		return "running";
	case SD_STATUS_SHUTDOWN:
		return "shutting-down";
	case SD_STATUS_HALT:
		return "halted";
	case SD_STATUS_WAIT_FOR_JOIN:
		return "waiting";
	default:
		return "unknown";
	}
}

static int cmp_epoch_desc(const void *a, const void *b)
{
	const struct sd_epoch_log *x = a, *y = b;

	return x->epoch < y->epoch ? 1 : (x->epoch > y->epoch ? -1 : 0);
}

static void print_epoch(const struct sd_epoch_log *log)
{
	char when[32], addr[64];
	uint32_t nr = min_t(uint32_t, log->nr_nodes, SD_MAX_NODES);

	if (opts.raw)
		printf("%u %llu ", log->epoch, (unsigned long long)collie_time_to_sec(log->ctime));
	else {
		collie_fmt_time(log->ctime, "%Y-%m-%d %H:%M:%S", when, sizeof(when));
		printf("%-19s %5u [", when, log->epoch);
	}
	for (uint32_t i = 0; i < nr; i++) {
		sd_addr_to_str(log->nodes[i].nid.addr, log->nodes[i].nid.port, addr, sizeof(addr));
		printf("%s%s", i ? (opts.raw ? "," : ", ") : "", addr);
	}
	printf(opts.raw ? "\n" : "]\n");
}

/*
 * A node that waits: "Waiting for: ADDR:PORT, ..." the nodes of its newest
 * epoch (logs[nr]) that are not members yet, as GET_NODE_LIST tells.
 */
static void print_awaited(const struct sd_epoch_log *logs, uint32_t nr)
{
	const struct sd_epoch_log *last = NULL;
	struct sd_node *nodes;
	uint32_t nr_nodes, local, n = 0;
	char addr[64];

	for (uint32_t i = 0; i < nr; i++)
		if (!last || logs[i].epoch > last->epoch)
			last = &logs[i];
	if (!last || node_get_list(&nodes, &nr_nodes, &local))
		return;
	for (uint32_t i = 0; i < min_t(uint32_t, last->nr_nodes, SD_MAX_NODES); i++) {
		bool member = false;

		for (uint32_t j = 0; j < nr_nodes && !member; j++)
			member = !memcmp(&last->nodes[i].nid, &nodes[j].nid, sizeof(nodes[j].nid));
		if (member)
			continue;
		sd_addr_to_str(last->nodes[i].nid.addr, last->nodes[i].nid.port, addr,
			       sizeof(addr));
		printf("%s%s", n++ ? ", " : "Waiting for: ", addr);
	}
	if (!n)
		printf("Waiting for: nobody; the nodes check each other's history");
	printf("\n");
	free(nodes);
}

/* the default scheme: "3", or "4:2" for erasure coding */
static void scheme_str(const struct sd_rsp *rsp, char *buf, size_t len)
{
	int d, p;

	if (rsp->cinfo.copy_policy && ec_policy_to_dp(rsp->cinfo.copy_policy, &d, &p))
		snprintf(buf, len, "%d:%d", d, p);
	else
		snprintf(buf, len, "%u", rsp->cinfo.copies);
}

static void print_info(const struct sd_rsp *rsp, struct sd_epoch_log *logs, uint32_t nr)
{
	char when[64], scheme[16];

	scheme_str(rsp, scheme, sizeof(scheme));
	if (opts.raw) {
		printf("%s\n", raw_status_str(rsp->cinfo.status));
		printf("%llu %s\n", (unsigned long long)collie_time_to_sec(rsp->cinfo.ctime),
		       scheme);
	} else {
		printf("Cluster status: %s\n", status_str(rsp->cinfo.status));
		if (rsp->cinfo.status == SD_STATUS_WAIT_FOR_JOIN)
			print_awaited(logs, nr);
		printf("\n");
		collie_fmt_time(rsp->cinfo.ctime, "%Y-%m-%d %H:%M:%S", when, sizeof(when));
		printf("Cluster created at %s\n", when);
		printf("Copies: %s%s\n\n", scheme,
		       rsp->cinfo.copy_policy ? " (erasure coded: new vdis' default)" : "");
		printf("%-19s %5s %s\n", "Time", "Epoch", "Nodes");
	}
	qsort(logs, nr, sizeof(*logs), cmp_epoch_desc);
	for (uint32_t i = 0; i < nr; i++)
		print_epoch(&logs[i]);
}

static int cluster_info(int argc, char **argv)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	struct sd_epoch_log *logs;
	uint32_t len = NR_EPOCH_LOGS * sizeof(*logs), nr;
	int ret;

	logs = calloc(NR_EPOCH_LOGS, sizeof(*logs));
	if (!logs) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	collie_init_req(&hdr, SD_OP_STAT_CLUSTER);
	hdr.data_length = len;
	if (collie_exec(&hdr, logs, 0, len, &rsp)) {
		ret = EXIT_SYSFAIL;
		goto out_free;
	}
	ret = EXIT_OK;
	if (rsp.result == SD_RES_WAIT_FOR_FORMAT || rsp.result == SD_RES_NOT_FORMATTED ||
	    (rsp.result == SD_RES_SUCCESS && rsp.cinfo.status == SD_STATUS_WAIT_FOR_FORMAT)) {
		printf(opts.raw ? "not-formatted\n" : "Cluster is not formatted\n");
		goto out_free;
	}
	if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to get the cluster status: %s", sd_strerror((int)rsp.result));
		ret = collie_exit_code((int)rsp.result);
		goto out_free;
	}
	nr = min_t(uint32_t, rsp.data_length, len) / sizeof(*logs);
	nr = min_t(uint32_t, nr, rsp.cinfo.nr_epochs ? rsp.cinfo.nr_epochs : nr);
	print_info(&rsp, logs, nr);
out_free:
	free(logs);
	return ret;
}

/* the daemon may go away before it answers: a closed connection is success */
static int cluster_shutdown(int argc, char **argv)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	int fd, ret;

	fd = collie_connect(opts.addr, opts.port);
	if (fd < 0)
		return EXIT_SYSFAIL;
	collie_init_req(&hdr, SD_OP_SHUTDOWN);
	ret = sd_exec_req(fd, &hdr, NULL, 0, 0, &rsp);
	close(fd);
	if (ret == -ECONNRESET)
		return EXIT_OK;
	if (ret) {
		collie_err("failed to shut down the cluster: %s", strerror(-ret));
		return EXIT_SYSFAIL;
	}
	if (rsp.result != SD_RES_SUCCESS && rsp.result != SD_RES_SHUTDOWN) {
		collie_err("failed to shut down the cluster: %s", sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
	return EXIT_OK;
}

/*
 * A node restarted alone waits for the nodes of its last epoch: serve
 * without them. The nodes that joined it wait too (their status says so)
 * and answer NOT_WAITING: the one that waits is asked through the list.
 */
static int cluster_recover(int argc, char **argv)
{
	struct sd_node *nodes;
	uint32_t nr, local;
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	if (strcmp(argv[0], "force")) {
		collie_err("usage: collie cluster recover force");
		return EXIT_USAGE;
	}
	collie_init_req(&hdr, SD_OP_FORCE_START);
	if (collie_exec(&hdr, NULL, 0, 0, &rsp))
		return EXIT_SYSFAIL;
	if (rsp.result == SD_RES_SUCCESS)
		return EXIT_OK;
	if (rsp.result != SD_RES_NOT_WAITING) {
		collie_err("failed to force the cluster to start: %s",
			   sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
	ret = node_get_list(&nodes, &nr, &local);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < nr; i++) {
		char host[64];

		if (i == local)
			continue;
		collie_node_host(&nodes[i], host, sizeof(host));
		collie_init_req(&hdr, SD_OP_FORCE_START);
		if (!collie_exec_at(host, nodes[i].nid.port, &hdr, NULL, 0, 0, &rsp) &&
		    rsp.result == SD_RES_SUCCESS) {
			free(nodes);
			return EXIT_OK;
		}
	}
	free(nodes);
	collie_err("failed to force the cluster to start: no node of the cluster waits for "
		   "other nodes");
	return collie_exit_code(SD_RES_NOT_WAITING);
}

const struct subcommand cluster_cmds[] = {
	{ "format", "", OPT_COPIES,
	  "format the cluster and set the new vdis' default: N copies, or D:P erasure coding",
	  cluster_format, NULL, 0, 0 },
	{ "info", "", OPT_RAW, "show the cluster status and its epoch history", cluster_info, NULL,
	  0, 0 },
	{ "shutdown", "", 0, "stop the daemons of the cluster", cluster_shutdown, NULL, 0, 0 },
	{ "recover", "force", 0,
	  "serve without the nodes that a restarted node still waits for (they are gone for good)",
	  cluster_recover, NULL, 1, 1 },
	{ "alter-copy", "", OPT_COPIES,
	  "give the cluster's default and every replicated vdi -c N copies; recovery moves them",
	  cluster_alter_copy, NULL, 0, 0, "  collie cluster alter-copy -c 3\n",
	  "The default of the vdis created without a count changes on every node at\n"
	  "once; then every replicated vdi and snapshot with another count gets N, one\n"
	  "after the other, as collie vdi alter-copy does (their clients go on).\n"
	  "Erasure-coded vdis keep their D:P. Refused on a cluster whose default is\n"
	  "erasure coding, and for more copies than nodes that store objects.\n" },
	{ "reweight", "", OPT_RAW,
	  "give every storing node vnodes in proportion to its store's size, in one epoch",
	  cluster_reweight, NULL, 0, 0 },
	{ "snapshot", "save|list|load|delete", 0,
	  "save the whole cluster into a directory, and load it back", NULL,
	  cluster_snapshot_cmds },
	{ NULL },
};
