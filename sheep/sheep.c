/*
 * sheep: options, start-up, the main loop, shutdown.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include "config.h"
#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "cluster/cluster.h"
#include "client_lock.h"
#include "startup.h"
#include "event.h"
#include "nbd.h"
#include "listen.h"
#include "net.h"
#include "access.h"
#include "daemon.h"
#include "deleted.h"
#include "group.h"
#include "join.h"
#include "listen.h"
#include "metrics.h"
#include "ops.h"
#include "ops_exec.h"
#include "ordered.h"
#include "payload.h"
#include "peer_io.h"
#include "recovery.h"
#include "request.h"
#include "stat.h"
#include "vdi.h"
#include "work.h"
#include "store/store.h"
#include "store/md.h"
#ifdef HAVE_TRACE
#include "trace/trace.h"
#endif

#define DEFAULT_IO_THREADS 8
#define DEFAULT_HANG_THRESHOLD 30 /* seconds */

/* what the options set: each module gets its part at init */
static struct {
	const char *dir;
	int port;
	const char *bind_addr;
	const char *nbd_addr; /* --nbd: NULL = every address */
	int nbd_port;	      /* 0: no NBD export */
	uint32_t zone;
} cfg;
static struct request_config req_cfg = { .client_timeout = 30 };
static int nbd_max_connections; /* --nbd-max-connections (0: derived) */

/* a node's vnodes; the ring of SD_MAX_NODES such nodes stays small */
#define MAX_VNODES SD_MAX_VNODES
static int nr_vnodes = SD_DEFAULT_VNODES;
static bool vnodes_given; /* --vnodes: it wins over the count collie node vnodes set saved */
static bool gateway_only; /* --gateway: serve clients, store nothing */
static bool io_given;	  /* --io-addr */
static uint64_t hang_threshold = DEFAULT_HANG_THRESHOLD;
static const char *metrics_arg; /* --metrics, NULL: off */

enum {
	OPT_MAX_INFLIGHT = 0x100,
	OPT_RECOVERY_BW,
	OPT_HEARTBEAT,
	OPT_NBD_ALLOW,
	OPT_NBD_MAX_CONN,
	OPT_DISK,
	OPT_IO_ADDR,
	OPT_BUSY_POLL
};

/* --busy-poll: microseconds the main thread polls before it sleeps (0: never) */
static unsigned int busy_poll_us;
#define MAX_BUSY_POLL_US 1000

/* --io-addr: where peers send this node's replica traffic (io_port 0: none) */
static uint8_t io_addr[4];
static uint16_t io_port;
static char io_host[INET_ADDRSTRLEN];

/* --io-addr's argument: IPV4 or IPV4:PORT (the port defaults to --port's). 0 or -1 */
static int parse_io_addr(const char *arg)
{
	const char *colon = strchr(arg, ':');
	uint64_t v = 0;

	if ((size_t)(colon ? colon - arg : (ptrdiff_t)strlen(arg)) >= sizeof(io_host))
		return -1;
	snprintf(io_host, sizeof(io_host), "%.*s", (int)(colon ? colon - arg : (ptrdiff_t)strlen(arg)),
		 arg);
	if (inet_pton(AF_INET, io_host, io_addr) != 1)
		return -1;
	if (colon && sd_parse_uint(colon + 1, 1, 65535, &v))
		return -1;
	io_port = (uint16_t)v; /* 0: --port's, set once the options are read */
	return 0;
}

/* --max-inflight-bytes (0: the default, from the worker count) */
static uint64_t max_inflight;

static const struct option long_options[] = {
	{ "port", required_argument, NULL, 'p' },
	{ "bind", required_argument, NULL, 'b' },
	{ "loglevel", required_argument, NULL, 'l' },
	{ "foreground", no_argument, NULL, 'f' },
	{ "cluster", required_argument, NULL, 'c' },
	{ "store", required_argument, NULL, 'S' },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "io-addr", required_argument, NULL, OPT_IO_ADDR },
	{ "zone", required_argument, NULL, 'z' },
	{ "threads", required_argument, NULL, 't' },
	{ "vnodes", required_argument, NULL, 'V' },
	{ "gateway", no_argument, NULL, 'g' },
	{ "hang-threshold", required_argument, NULL, 'H' },
	{ "metrics", required_argument, NULL, 'M' },
	{ "nbd", optional_argument, NULL, 'N' },
	{ "max-inflight-bytes", required_argument, NULL, OPT_MAX_INFLIGHT },
	{ "recovery-max-bandwidth", required_argument, NULL, OPT_RECOVERY_BW },
	{ "heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT },
	{ "admin-allow", required_argument, NULL, 'A' },
	{ "nbd-allow", required_argument, NULL, OPT_NBD_ALLOW },
	{ "max-connections", required_argument, NULL, 'C' },
	{ "nbd-max-connections", required_argument, NULL, OPT_NBD_MAX_CONN },
	{ "client-timeout", required_argument, NULL, 'T' },
	{ "idle-timeout", required_argument, NULL, 'I' },
	{ "busy-poll", required_argument, NULL, OPT_BUSY_POLL },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'v' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f, const char *prog)
{
	char drivers[128], stores[128];

	cdrv_names(drivers, sizeof(drivers));
	store_names(stores, sizeof(stores));
	fprintf(f,
		"Usage: %s [OPTION]... DIR\n"
		"Run a sheep daemon storing its objects, epochs and log in DIR.\n"
		"\n"
		"  -p, --port PORT        listen on PORT (default %d)\n"
		"  -b, --bind ADDR        listen on ADDR only (default: every address)\n"
		"  -l, --loglevel LEVEL   emerg..debug or 0..7 (default info)\n"
		"  -f, --foreground       stay in the foreground, log to DIR/sheep.log\n"
		"  -c, --cluster DRIVER   cluster driver: %s (default local)\n"
		"      --store DRIVER     store driver: %s (default plain)\n"
		"      --disk PATH[,WEIGHT]  keep objects on the disk mounted at PATH (an\n"
		"                         existing directory; objects in PATH/obj), spread\n"
		"                         over every --disk (repeatable, up to %d) by a ring\n"
		"                         weighted by size: WEIGHT vnodes (1-65535; default\n"
		"                         one per 256 MiB, at least 32). Without --disk the\n"
		"                         objects stay in DIR/obj. See collie node md\n"
		"  -z, --zone ZONE        failure zone of this node (default: derived from the address)\n"
		"  -t, --threads N        object I/O worker threads (default %d)\n"
		"  -V, --vnodes N         points of this node on the placement ring: its share\n"
		"                         of the objects; give twice the capacity twice the\n"
		"                         vnodes (1-%d, default %d; or the count that\n"
		"                         collie node vnodes set left in DIR)\n"
		"      --io-addr ADDR[:PORT]  peers send this node's replica traffic to the\n"
		"                         IPv4 ADDR and PORT (default --port's), where it\n"
		"                         listens too: a network of its own for I/O\n"
		"  -g, --gateway          a member that serves clients (sheepdog protocol,\n"
		"                         NBD) and stores nothing: it is on no placement\n"
		"                         ring and its peers hold every copy\n"
		"      --hang-threshold S a request in flight longer than S seconds is logged\n"
		"                         once, with its op, oid, client and worker, and counted\n"
		"                         in `collie node stat` (default %d, 0: off)\n"
		"      --metrics [ADDR:]PORT  serve the statistics in Prometheus' text format at\n"
		"                         http://ADDR:PORT/metrics (default ADDR 127.0.0.1; off\n"
		"                         unless given)\n"
		"      --nbd [ADDR:]PORT  serve every VDI over NBD on ADDR (default 127.0.0.1)\n"
		"                         and PORT (default %d): nbd://ADDR:PORT/NAME, and\n"
		"                         NAME@TAG or NAME@ID for a snapshot (read-only)\n"
		"      --nbd-allow CIDR   also serve NBD to clients in the network CIDR (ADDR\n"
		"                         or ADDR/BITS, repeatable); by default only to\n"
		"                         loopback, whatever ADDR --nbd binds\n"
		"      --max-inflight-bytes SIZE  payload held in memory at once (an eighth of\n"
		"                         it for admin ops); past a connection's share, it\n"
		"                         is not read until it frees some (default:\n"
		"                         (threads + 2) x 4 MiB)\n"
		"      --recovery-max-bandwidth MB  recovery fetches at most MB MB/s on this\n"
		"                         node (default %d, 0: unlimited)\n"
		"      --heartbeat-timeout S  a member silent for S seconds (stopped, hung) is\n"
		"                         evicted: a new epoch without it (default %d, 1-60,\n"
		"                         fractions allowed); an evicted node joins again\n"
		"      --admin-allow CIDR also accept admin ops (format, shutdown, vdi delete,\n"
		"                         trace, statistics, cluster state) from the network\n"
		"                         CIDR (ADDR or ADDR/BITS, repeatable); by default only\n"
		"                         from loopback and the cluster's members\n"
		"      --max-connections N  accept at most N connections at once on PORT; the\n"
		"                         next ones wait in the backlog (default: what the\n"
		"                         descriptor limit leaves, less 256, NBD's and 16)\n"
		"      --nbd-max-connections N  the same for NBD (default: a quarter of what\n"
		"                         the descriptor limit leaves, less 256)\n"
		"      --client-timeout S close a connection whose request (or NBD handshake\n"
		"                         message) has not fully arrived S seconds after its\n"
		"                         first byte (default 30, 0: never)\n"
		"      --idle-timeout S   close a connection idle for S seconds (default 0:\n"
		"                         never; QEMU and the peers keep idle connections)\n"
		"      --busy-poll US     after serving something, poll up to US microseconds\n"
		"                         (0-%d) for the next request before sleeping, while\n"
		"                         no work is on a worker: lower latency for one client\n"
		"                         at a time, for CPU (default 0: never)\n"
		"  -h, --help             print this help and exit\n"
		"  -v, --version          print the version and exit\n"
		"\n"
		"Without -f, sheep daemonizes and writes its pid to DIR/sheep.pid.\n"
		"SIGTERM or `collie cluster shutdown` stops it cleanly.\n",
		prog, SD_LISTEN_PORT, drivers, stores, MD_MAX_DISKS, DEFAULT_IO_THREADS, MAX_VNODES,
		SD_DEFAULT_VNODES, DEFAULT_HANG_THRESHOLD, NBD_DEFAULT_PORT, RECOVERY_DEFAULT_BW,
		CDRV_DEFAULT_HEARTBEAT_MS / 1000, MAX_BUSY_POLL_US);
}

static volatile bool stop_requested;
static struct work_queue *recovery_notify_queue;
static const char *store_name = "plain";

/*
 * A disk failed (md.c, any thread): the current epoch's recovery runs again
 * on the main thread, and fetches what lived there from the other copies.
 */
static struct work disk_lost_work;
static bool disk_lost_queued; /* atomic */

static void disk_lost_fn(struct work *w)
{
	(void)w;
}

static void disk_lost_done(struct work *w)
{
	(void)w;
	__atomic_store_n(&disk_lost_queued, false, __ATOMIC_RELEASE);
	recovery_rerun();
}

static void disk_lost(void)
{
	if (__atomic_exchange_n(&disk_lost_queued, true, __ATOMIC_ACQ_REL))
		return; /* the run it queues lists this node's objects after this loss too */
	disk_lost_work.fn = disk_lost_fn;
	disk_lost_work.done = disk_lost_done;
	wq_queue(recovery_notify_queue, &disk_lost_work);
}

static void release_node_locks(const struct sd_lock_owner *owner)
{
	vdi_release_owner(owner, true);
}

/* an operator took a lock from one of this node's clients: the front end disconnects it */
static void lock_broken(uint32_t vid, const struct sd_lock_owner *owner)
{
	request_lock_broken(vid, owner);
	nbd_lock_broken(vid, owner);
}

/* daemon_stop()'s handler: the main loop ends at its next turn */
static void stop_loop(void)
{
	stop_requested = true;
}

static void signal_handler(int fd, uint32_t events, void *data)
{
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		sd_info("signal %u: shutting down", si.ssi_signo);
		daemon_stop(0);
	}
}

/* SIGTERM and SIGINT come through a signalfd; every thread inherits the mask */
static int init_signals(void)
{
	sigset_t mask;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	return ev_add(fd, EPOLLIN, signal_handler, NULL);
}

static int make_self_node(struct sd_node *node)
{
	const char *addr = cfg.bind_addr && *cfg.bind_addr ? cfg.bind_addr : "127.0.0.1";

	memset(node, 0, sizeof(*node));
	if (sd_str_to_addr(addr, node->nid.addr))
		return -EINVAL;
	node->nid.port = (uint16_t)cfg.port;
	node->zone = cfg.zone;
	node->nr_vnodes = gateway_only ? 0 : (uint16_t)nr_vnodes;
	node->flags = gateway_only ? SD_NODE_GATEWAY : 0;
	if (io_given) {
		memcpy(node->io_addr, io_addr, sizeof(io_addr));
		node->io_port = io_port ? io_port : (uint16_t)cfg.port;
	}
	return 0;
}

/*
 * --nbd's argument: PORT, ADDR, ADDR:PORT, [IPV6]:PORT or nothing. The
 * address is kept in a static buffer. 0 or -1.
 */
static int parse_nbd(const char *arg)
{
	static char addr[256];
	const char *colon, *port = NULL;
	uint64_t v;

	cfg.nbd_addr = "127.0.0.1";
	cfg.nbd_port = NBD_DEFAULT_PORT;
	if (!arg || !*arg)
		return 0;
	if (arg[strspn(arg, "0123456789")] == '\0') {
		port = arg;
	} else if (arg[0] == '[') {
		colon = strchr(arg, ']');
		if (!colon || (colon[1] && colon[1] != ':') || (size_t)(colon - arg) > sizeof(addr))
			return -1;
		snprintf(addr, sizeof(addr), "%.*s", (int)(colon - arg - 1), arg + 1);
		port = colon[1] ? colon + 2 : NULL;
		cfg.nbd_addr = addr;
	} else {
		colon = strrchr(arg, ':');
		if (colon && strchr(arg, ':') != colon)
			colon = NULL; /* a bare IPv6 address */
		if ((size_t)(colon ? colon - arg : (long)strlen(arg)) >= sizeof(addr))
			return -1;
		snprintf(addr, sizeof(addr), "%.*s", colon ? (int)(colon - arg) : (int)strlen(arg),
			 arg);
		port = colon ? colon + 1 : NULL;
		cfg.nbd_addr = addr;
	}
	if (port && *port) {
		if (sd_parse_uint(port, 1, 65535, &v))
			return -1;
		cfg.nbd_port = (int)v;
	}
	return 0;
}

static int parse_args(int argc, char **argv, int *loglevel, bool *foreground,
		      const char **driver, int *threads)
{
	int ch, lv;
	uint64_t v;

	while ((ch = getopt_long(argc, argv, "p:b:l:fc:z:t:V:gH:M:hv", long_options, NULL)) != -1) {
		switch (ch) {
		case 'N': {
			const char *arg = optarg;

			/* `--nbd SPEC DIR`: a separate argument that is not DIR */
			if (!arg && optind < argc - 1 && argv[optind][0] != '-')
				arg = argv[optind++];
			if (parse_nbd(arg)) {
				fprintf(stderr, "sheep: invalid --nbd '%s' ([ADDR:]PORT)\n", arg);
				return -1;
			}
			break;
		}
		case 'A':
			if (access_allow_add(optarg)) {
				fprintf(stderr,
					"sheep: invalid --admin-allow '%s' (ADDR or ADDR/BITS, at "
					"most 32)\n",
					optarg);
				return -1;
			}
			break;
		case OPT_DISK:
			if (md_config_disk(optarg)) {
				fprintf(stderr,
					"sheep: invalid --disk '%s' (PATH or PATH,WEIGHT: a path of at "
					"most %d bytes, WEIGHT 1-65535, at most %d disks)\n",
					optarg, SD_MD_PATH_LEN - 1, MD_MAX_DISKS);
				return -1;
			}
			break;
		case OPT_IO_ADDR:
			if (parse_io_addr(optarg)) {
				fprintf(stderr,
					"sheep: invalid --io-addr '%s' (an IPv4 address, or "
					"ADDR:PORT with PORT 1-65535)\n",
					optarg);
				return -1;
			}
			io_given = true;
			break;
		case OPT_NBD_ALLOW:
			if (access_nbd_allow_add(optarg)) {
				fprintf(stderr,
					"sheep: invalid --nbd-allow '%s' (ADDR or ADDR/BITS, at "
					"most 32)\n",
					optarg);
				return -1;
			}
			break;
		case 'C':
		case OPT_NBD_MAX_CONN:
			if (sd_parse_uint(optarg, 1, 1000000, &v)) {
				fprintf(stderr, "sheep: invalid --%smax-connections '%s' (1-1000000)\n",
					ch == 'C' ? "" : "nbd-", optarg);
				return -1;
			}
			*(ch == 'C' ? &req_cfg.max_connections : &nbd_max_connections) = (int)v;
			break;
		case 'T':
		case 'I':
			if (sd_parse_uint(optarg, 0, 86400, &v)) {
				fprintf(stderr, "sheep: invalid timeout '%s' (0-86400 s)\n", optarg);
				return -1;
			}
			*(ch == 'T' ? &req_cfg.client_timeout : &req_cfg.idle_timeout) = (int)v;
			break;
		case 'p':
			if (sd_parse_uint(optarg, 1, 65535, &v)) {
				fprintf(stderr, "sheep: invalid port '%s'\n", optarg);
				return -1;
			}
			cfg.port = (int)v;
			break;
		case 'b':
			cfg.bind_addr = optarg;
			break;
		case 'l':
			lv = sd_log_parse_level(optarg);
			if (lv < 0) {
				fprintf(stderr, "sheep: invalid log level '%s'\n", optarg);
				return -1;
			}
			*loglevel = lv;
			break;
		case 'f':
			*foreground = true;
			break;
		case 'c':
			*driver = optarg;
			break;
		case 'S':
			store_name = optarg;
			break;
		case 'z':
			if (sd_parse_uint(optarg, 0, UINT32_MAX, &v)) {
				fprintf(stderr, "sheep: invalid zone '%s'\n", optarg);
				return -1;
			}
			cfg.zone = (uint32_t)v;
			break;
		case 't':
			if (sd_parse_uint(optarg, 1, 256, &v)) {
				fprintf(stderr, "sheep: invalid thread count '%s' (1-256)\n", optarg);
				return -1;
			}
			*threads = (int)v;
			break;
		case 'V':
			if (sd_parse_uint(optarg, 1, MAX_VNODES, &v)) {
				fprintf(stderr, "sheep: invalid vnode count '%s' (1-%d)\n", optarg,
					MAX_VNODES);
				return -1;
			}
			nr_vnodes = (int)v;
			vnodes_given = true;
			break;
		case 'g':
			gateway_only = true;
			break;
		case 'H':
			if (sd_parse_uint(optarg, 0, 86400, &v)) {
				fprintf(stderr, "sheep: invalid hang threshold '%s' (0-86400 s)\n",
					optarg);
				return -1;
			}
			hang_threshold = v;
			break;
		case 'M':
			if (metrics_parse(optarg, NULL, 0, NULL)) {
				fprintf(stderr,
					"sheep: invalid metrics address '%s' ([ADDR:]PORT)\n",
					optarg);
				return -1;
			}
			metrics_arg = optarg;
			break;
		case OPT_MAX_INFLIGHT:
			if (sd_parse_size(optarg, &v) || v < 4096 || v > (UINT64_C(1) << 40)) {
				fprintf(stderr,
					"sheep: invalid --max-inflight-bytes '%s' (4K-1T)\n",
					optarg);
				return -1;
			}
			max_inflight = v;
			break;
		case OPT_RECOVERY_BW:
			if (sd_parse_uint(optarg, 0, 1000000, &v)) {
				fprintf(stderr,
					"sheep: invalid --recovery-max-bandwidth '%s' (0-1000000 MB/s)\n",
					optarg);
				return -1;
			}
			recovery_set_max_bandwidth(v);
			break;
		case OPT_BUSY_POLL:
			if (sd_parse_uint(optarg, 0, MAX_BUSY_POLL_US, &v)) {
				fprintf(stderr,
					"sheep: invalid --busy-poll '%s' (0-%d microseconds)\n",
					optarg, MAX_BUSY_POLL_US);
				return -1;
			}
			busy_poll_us = (unsigned int)v;
			break;
		case OPT_HEARTBEAT: {
			char *end;
			double sec = strtod(optarg, &end);

			if (end == optarg || *end || !(sec * 1000 >= CDRV_MIN_HEARTBEAT_MS) ||
			    !(sec * 1000 <= CDRV_MAX_HEARTBEAT_MS)) {
				fprintf(stderr,
					"sheep: invalid --heartbeat-timeout '%s' (1-60 seconds)\n",
					optarg);
				return -1;
			}
			cdrv_set_heartbeat_timeout_ms((unsigned int)(sec * 1000 + 0.5));
			break;
		}
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		case 'v':
			printf("sheep %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			fprintf(stderr, "Try '%s --help' for more information.\n", argv[0]);
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "sheep: %s\nTry '%s --help' for more information.\n",
			optind >= argc ? "missing DIR" : "too many arguments", argv[0]);
		return -1;
	}
	cfg.dir = argv[optind];
	return 0;
}

/*
 * The connection caps share the descriptors the limit leaves
 * (listen_fd_budget): /metrics takes METRICS_MAX_CONNS, NBD a quarter of
 * the budget, the sheepdog port (clients and peers) the rest. A cap given
 * is kept; one past the budget is warned about (descriptors may then run
 * out, and accepting pauses: listen.h).
 */
static void set_connection_caps(void)
{
	int budget = listen_fd_budget(), rest = budget;

	if (metrics_arg)
		rest -= METRICS_MAX_CONNS;
	if (cfg.nbd_port && !nbd_max_connections)
		nbd_max_connections = max_t(int, rest / 4, 1);
	if (cfg.nbd_port)
		rest -= nbd_max_connections;
	if (!req_cfg.max_connections)
		req_cfg.max_connections = max_t(int, rest, 1);
	if (rest < req_cfg.max_connections)
		sd_warn("the connection caps (--max-connections %d, --nbd-max-connections %d) "
			"pass the %d descriptors the limit leaves (ulimit -n less %d)",
			req_cfg.max_connections, cfg.nbd_port ? nbd_max_connections : 0, budget,
			LISTEN_FD_RESERVE);
}

int main(int argc, char **argv)
{
	int loglevel = SDOG_INFO, threads = DEFAULT_IO_THREADS, ret, pid_fd, holder;
	bool foreground = false;
	const char *driver_name = "local";
	const struct cluster_driver *driver;
	struct sd_node self;
	char log_path[4200];

	cfg.port = SD_LISTEN_PORT;
	if (parse_args(argc, argv, &loglevel, &foreground, &driver_name, &threads))
		return 64;
	driver = cdrv_find(driver_name);
	if (!driver) {
		char names[128];
		cdrv_names(names, sizeof(names));
		fprintf(stderr, "sheep: unknown cluster driver '%s' (have: %s)\n", driver_name,
			names);
		return 64;
	}
	if (!store_find(store_name)) {
		char names[128];

		store_names(names, sizeof(names));
		fprintf(stderr, "sheep: unknown store driver '%s' (have: %s)\n", store_name, names);
		return 64;
	}
	ret = sd_mkdir_p(cfg.dir, 0755);
	if (ret) {
		fprintf(stderr, "sheep: cannot create %s: %s\n", cfg.dir, strerror(-ret));
		return 1;
	}
	char *abs = realpath(cfg.dir, NULL);
	if (abs)
		cfg.dir = abs;
	if (io_given && gateway_only) {
		fprintf(stderr, "sheep: --io-addr on a gateway: it stores nothing, no peer sends "
				"it replica traffic\n");
		return 64;
	}
	if (make_self_node(&self)) {
		fprintf(stderr, "sheep: cannot use '%s' as a node address\n", cfg.bind_addr);
		return 64;
	}
	/* before the log: a second sheep writes nothing into the first one's */
	pid_fd = startup_lock_dir(cfg.dir, &holder);
	if (pid_fd == -EBUSY) {
		fprintf(stderr, "sheep: %s: another sheep (pid %d) runs on this directory\n",
			cfg.dir, holder);
		return 1;
	}
	if (pid_fd < 0) {
		fprintf(stderr, "sheep: cannot lock %s/sheep.pid: %s\n", cfg.dir,
			strerror(-pid_fd));
		return 1;
	}
	snprintf(log_path, sizeof(log_path), "%s/sheep.log", cfg.dir);
	ret = sd_log_init(log_path, loglevel, "sheep");
	if (ret) {
		fprintf(stderr, "sheep: cannot open %s: %s\n", log_path, strerror(-ret));
		return 1;
	}
	/* the parent exits with the daemon's verdict: 0 once it serves */
	if (!foreground && (ret = startup_fork()))
		return startup_fail("cannot daemonize: %s", strerror(-ret));
	ret = startup_write_pid(pid_fd);
	if (ret)
		return startup_fail("cannot write %s/sheep.pid: %s", cfg.dir, strerror(-ret));
	sd_info("sheep %s starting on port %d, dir %s", PACKAGE_VERSION, cfg.port, cfg.dir);

	/* the tracer's sites become NOPs before any other thread exists */
#ifdef HAVE_TRACE
	ret = trace_init();
	if (ret)
		sd_err("tracer unavailable: %s", strerror(-ret));
#endif
	if (ev_init(4096) || init_signals() || wq_init())
		return startup_fail("cannot set up the event loop: %m");
	/* counting starts before any worker exists */
	ret = stat_init(hang_threshold * 1000000000ULL);
	if (!ret)
		ret = stat_start_hang_timer();
	if (ret)
		return startup_fail("cannot start the statistics: %s", strerror(-ret));
	ops_register_stats();
	daemon_set_stop_handler(stop_loop);
	if (store_init(store_name, cfg.dir))
		return startup_fail("cannot open the %s store in %s", store_name, cfg.dir);
	stat_set_caches(sd_store->caches);
	/* news that travels up: the lower layer calls what the upper one registered */
	group_set_news(&(struct group_news){ .joined = join_start,
					     .epoch_changed = recovery_kick,
					     .node_left = ordered_node_left,
					     .node_gone = peer_abort_node,
					     .serving = request_join_done,
					     .wait_covered = join_wait_check });
	group_set_deliver(ordered_deliver);
	ret = group_init(cfg.dir);
	if (ret)
		return startup_fail("cannot read the cluster state in %s: %s", cfg.dir,
				    strerror(-ret));
	/* collie node vnodes set's weight lasts until --vnodes names another */
	ret = gateway_only ? 0 : group_saved_vnodes(vnodes_given);
	if (ret < 0)
		return startup_fail("cannot read the saved vnodes in %s: %s", cfg.dir,
				    strerror(-ret));
	if (ret > 0) {
		self.nr_vnodes = (uint16_t)ret;
		sd_info("vnodes %d, as collie node vnodes set left them", ret);
	}
	ret = deleted_init(cfg.dir);
	if (ret)
		return startup_fail("cannot read the deleted vdis in %s: %s", cfg.dir,
				    strerror(-ret));
	ret = vdi_init();
	if (ret)
		return startup_fail("cannot load the vdis: %s", strerror(-ret));
	payload_set_max(max_inflight ? max_inflight
					      : (uint64_t)(threads + 2) * SD_DATA_OBJ_SIZE);
	ops_init(&(struct ops_config){ .nbd_addr = cfg.nbd_addr, .nbd_port = cfg.nbd_port });
	ret = ops_exec_init(
	    threads, &(struct ops_answer){ .done = request_done, .early = request_reply_early });
	if (!ret) {
		ordered_init(ops_queue(OP_ORDERED), get_sd_op, request_ordered_done);
		ordered_set_node_left(release_node_locks);
		vdi_set_lock_hooks(lock_broken, client_lock_moved);
		/* a VDI's copies changed (ALTER_COPY): the epoch's recovery moves its objects */
		vdi_set_copies_hook(recovery_rerun);
		ret = recovery_init();
		recovery_notify_queue = ops_queue(OP_CLUSTER);
		md_set_lost(disk_lost);
		if (!ret)
			join_init(ops_queue(OP_CLUSTER), recovery_queue(), request_join_done);
	}
	if (ret)
		return startup_fail("cannot start worker threads");
	set_connection_caps();
	request_configure(&req_cfg);
	request_lock_init();
	ret = request_listen(cfg.bind_addr, cfg.port);
	if (ret)
		return startup_fail("cannot listen on port %d: %s", cfg.port, strerror(-ret));
	if (io_given) {
		ret = request_listen_io(io_host, self.io_port);
		if (ret)
			return startup_fail("cannot listen on the io address %s:%u: %s", io_host,
					    self.io_port, strerror(-ret));
		sd_info("replica traffic from the peers comes to %s:%u", io_host, self.io_port);
	}
	if (metrics_arg) {
		ret = metrics_start(metrics_arg);
		if (ret)
			return startup_fail("cannot serve metrics on %s: %s", metrics_arg,
					    strerror(-ret));
	}
	if (cfg.nbd_port) {
		struct nbd_config nbd_cfg = { .addr = cfg.nbd_addr,
					      .port = cfg.nbd_port,
					      .nr_threads = threads,
					      .max_conns = nbd_max_connections,
					      .client_timeout = req_cfg.client_timeout,
					      .idle_timeout = req_cfg.idle_timeout };

		ret = nbd_init(&nbd_cfg);
		if (ret)
			return startup_fail("cannot serve nbd on %s port %d: %s", cfg.nbd_addr,
					    cfg.nbd_port, strerror(-ret));
		if (!access_nbd_nr_allow() && strcmp(cfg.nbd_addr, "127.0.0.1") &&
		    strcmp(cfg.nbd_addr, "::1"))
			sd_warn("nbd: bound to %s, but without --nbd-allow only loopback clients "
				"are served",
				*cfg.nbd_addr ? cfg.nbd_addr : "every address");
	}
	ret = group_join(driver, cdrv_selected_option(), &self);
	if (ret == -EINTR && cdrv_stop_pending()) {
		/* SIGTERM while the driver waited for its service or its group */
		sd_info("signal while joining: stopped");
		sd_log_close();
		return 0;
	}
	if (ret)
		return startup_fail("cannot join the cluster with driver %s: %s", driver->name,
				    strerror(-ret));
	if (!stop_requested)
		sd_info("ready");
	snprintf(log_path, sizeof(log_path), "serving on port %d", cfg.port);
	startup_ready(log_path);

	/* only while no work is on a worker: a poll then would take its CPU */
	ev_set_busy_poll(busy_poll_us, wq_idle);
	while (!stop_requested)
		ev_loop_once(1000);

	sd_info("shutting down");
	startup_stopping();
	/* workers blocked on a peer (stopped, or stopping too) return now */
	peer_abort_all();
	driver->leave();
#ifdef HAVE_TRACE
	trace_shutdown();
#endif
	wq_shutdown_all();
	sd_store->flush();
	group_stopped();
	sd_info("stopped");
	sd_log_close();
	return daemon_exit_status();
}
