/*
 * sheep: options, start-up, the main loop, shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include "config.h"
#include "cluster/cluster.h"
#include "event.h"
#include "nbd.h"
#include "net.h"
#include "sheep_priv.h"
#include "store/store.h"
#ifdef HAVE_TRACE
#include "trace/trace.h"
#endif

#define DEFAULT_IO_THREADS 8
#define DEFAULT_HANG_THRESHOLD 30 /* seconds */

struct sheep_config sys = { .client_timeout = 30 };
struct work_queue *io_wq, *cluster_wq, *peer_wq, *fetch_wq, *trace_wq;

/* a node's vnodes; the ring of SD_MAX_NODES such nodes stays small */
#define MAX_VNODES 4096
static int nr_vnodes = SD_DEFAULT_VNODES;
static uint64_t hang_threshold = DEFAULT_HANG_THRESHOLD;
static const char *metrics_arg; /* --metrics, NULL: off */

enum { OPT_MAX_INFLIGHT = 0x100, OPT_RECOVERY_BW, OPT_HEARTBEAT, OPT_NBD_ALLOW };

/* --max-inflight-bytes (0: the default, from the worker count) */
static uint64_t max_inflight;

static const struct option long_options[] = {
	{ "port", required_argument, NULL, 'p' },
	{ "bind", required_argument, NULL, 'b' },
	{ "loglevel", required_argument, NULL, 'l' },
	{ "foreground", no_argument, NULL, 'f' },
	{ "cluster", required_argument, NULL, 'c' },
	{ "store", required_argument, NULL, 'S' },
	{ "zone", required_argument, NULL, 'z' },
	{ "threads", required_argument, NULL, 't' },
	{ "vnodes", required_argument, NULL, 'V' },
	{ "hang-threshold", required_argument, NULL, 'H' },
	{ "metrics", required_argument, NULL, 'M' },
	{ "nbd", optional_argument, NULL, 'N' },
	{ "max-inflight-bytes", required_argument, NULL, OPT_MAX_INFLIGHT },
	{ "recovery-max-bandwidth", required_argument, NULL, OPT_RECOVERY_BW },
	{ "heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT },
	{ "admin-allow", required_argument, NULL, 'A' },
	{ "nbd-allow", required_argument, NULL, OPT_NBD_ALLOW },
	{ "max-connections", required_argument, NULL, 'C' },
	{ "client-timeout", required_argument, NULL, 'T' },
	{ "idle-timeout", required_argument, NULL, 'I' },
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
		"  -z, --zone ZONE        failure zone of this node (default: derived from the address)\n"
		"  -t, --threads N        object I/O worker threads (default %d)\n"
		"  -V, --vnodes N         points of this node on the placement ring: its share\n"
		"                         of the objects; give twice the capacity twice the\n"
		"                         vnodes (1-%d, default %d)\n"
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
		"      --max-inflight-bytes SIZE  client payload held in memory at once; past\n"
		"                         it, connections that send more wait (default:\n"
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
		"      --max-connections N  accept at most N client connections at once; the\n"
		"                         next ones wait in the backlog (default: the\n"
		"                         descriptor limit less 256)\n"
		"      --client-timeout S close a connection whose request has not fully\n"
		"                         arrived S seconds after its first byte (default 30,\n"
		"                         0: never)\n"
		"      --idle-timeout S   close a connection idle for S seconds (default 0:\n"
		"                         never; QEMU and the peers keep idle connections)\n"
		"  -h, --help             print this help and exit\n"
		"  -v, --version          print the version and exit\n"
		"\n"
		"Without -f, sheep daemonizes and writes its pid to DIR/sheep.pid.\n"
		"SIGTERM or `collie cluster shutdown` stops it cleanly.\n",
		prog, SD_LISTEN_PORT, drivers, stores, DEFAULT_IO_THREADS, MAX_VNODES,
		SD_DEFAULT_VNODES, DEFAULT_HANG_THRESHOLD, NBD_DEFAULT_PORT, RECOVERY_DEFAULT_BW,
		CDRV_DEFAULT_HEARTBEAT_MS / 1000);
}

static volatile bool stop_requested;
static const char *store_name = "plain";

void sheep_request_shutdown(void)
{
	stop_requested = true;
	sys.shutting_down = true;
}

static void signal_handler(int fd, uint32_t events, void *data)
{
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		sd_info("signal %u: shutting down", si.ssi_signo);
		sheep_request_shutdown();
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

static int daemonize(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -errno;
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -errno;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	return 0;
}

/* DIR/sheep.pid, locked for the daemon's life: one sheep per directory */
static int lock_pid_file(void)
{
	char path[4200], buf[32];
	int fd, n;

	snprintf(path, sizeof(path), "%s/sheep.pid", sys.dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -EBUSY;
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, n, 0) != n) {
		close(fd);
		return -EIO;
	}
	return fd; /* kept open: the lock lives as long as the process */
}

static int make_self_node(struct sd_node *node)
{
	const char *addr = sys.bind_addr && *sys.bind_addr ? sys.bind_addr : "127.0.0.1";

	memset(node, 0, sizeof(*node));
	if (sd_str_to_addr(addr, node->nid.addr))
		return -EINVAL;
	node->nid.port = (uint16_t)sys.port;
	node->zone = sys.zone;
	node->nr_vnodes = (uint16_t)nr_vnodes;
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

	sys.nbd_addr = "127.0.0.1";
	sys.nbd_port = NBD_DEFAULT_PORT;
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
		sys.nbd_addr = addr;
	} else {
		colon = strrchr(arg, ':');
		if (colon && strchr(arg, ':') != colon)
			colon = NULL; /* a bare IPv6 address */
		if ((size_t)(colon ? colon - arg : (long)strlen(arg)) >= sizeof(addr))
			return -1;
		snprintf(addr, sizeof(addr), "%.*s", colon ? (int)(colon - arg) : (int)strlen(arg),
			 arg);
		port = colon ? colon + 1 : NULL;
		sys.nbd_addr = addr;
	}
	if (port && *port) {
		if (sd_parse_uint(port, 1, 65535, &v))
			return -1;
		sys.nbd_port = (int)v;
	}
	return 0;
}

static int parse_args(int argc, char **argv, int *loglevel, bool *foreground,
		      const char **driver, int *threads)
{
	int ch, lv;
	uint64_t v;

	while ((ch = getopt_long(argc, argv, "p:b:l:fc:z:t:V:H:M:hv", long_options, NULL)) != -1) {
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
			if (sd_parse_uint(optarg, 1, 1000000, &v)) {
				fprintf(stderr, "sheep: invalid --max-connections '%s'\n", optarg);
				return -1;
			}
			sys.max_connections = (int)v;
			break;
		case 'T':
		case 'I':
			if (sd_parse_uint(optarg, 0, 86400, &v)) {
				fprintf(stderr, "sheep: invalid timeout '%s' (0-86400 s)\n", optarg);
				return -1;
			}
			*(ch == 'T' ? &sys.client_timeout : &sys.idle_timeout) = (int)v;
			break;
		case 'p':
			if (sd_parse_uint(optarg, 1, 65535, &v)) {
				fprintf(stderr, "sheep: invalid port '%s'\n", optarg);
				return -1;
			}
			sys.port = (int)v;
			break;
		case 'b':
			sys.bind_addr = optarg;
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
			sys.zone = (uint32_t)v;
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
	sys.dir = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	int loglevel = SDOG_INFO, threads = DEFAULT_IO_THREADS, ret;
	bool foreground = false;
	const char *driver_name = "local";
	const struct cluster_driver *driver;
	struct sd_node self;
	char log_path[4200];

	sys.port = SD_LISTEN_PORT;
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
	ret = sd_mkdir_p(sys.dir, 0755);
	if (ret) {
		fprintf(stderr, "sheep: cannot create %s: %s\n", sys.dir, strerror(-ret));
		return 1;
	}
	char *abs = realpath(sys.dir, NULL);
	if (abs)
		sys.dir = abs;
	if (make_self_node(&self)) {
		fprintf(stderr, "sheep: cannot use '%s' as a node address\n", sys.bind_addr);
		return 64;
	}
	snprintf(log_path, sizeof(log_path), "%s/sheep.log", sys.dir);
	ret = sd_log_init(log_path, loglevel, "sheep");
	if (ret) {
		fprintf(stderr, "sheep: cannot open %s: %s\n", log_path, strerror(-ret));
		return 1;
	}
	if (!foreground && daemonize()) {
		fprintf(stderr, "sheep: cannot daemonize: %m\n");
		return 1;
	}
	ret = lock_pid_file();
	if (ret < 0) {
		sd_err("cannot lock %s/sheep.pid: %s", sys.dir,
		       ret == -EBUSY ? "another sheep runs on this directory" : strerror(-ret));
		if (foreground)
			fprintf(stderr, "sheep: %s: another sheep runs on this directory?\n",
				sys.dir);
		return 1;
	}
	sd_info("sheep %s starting on port %d, dir %s", PACKAGE_VERSION, sys.port, sys.dir);

	/* the tracer's sites become NOPs before any other thread exists */
#ifdef HAVE_TRACE
	ret = trace_init();
	if (ret)
		sd_err("tracer unavailable: %s", strerror(-ret));
#endif
	if (ev_init(4096) || init_signals() || wq_init()) {
		sd_emerg("cannot set up the event loop: %m");
		return 1;
	}
	/* counting starts before any worker exists */
	ret = stat_init(hang_threshold * 1000000000ULL);
	if (!ret)
		ret = stat_start_hang_timer();
	if (ret) {
		sd_emerg("cannot start the statistics: %s", strerror(-ret));
		return 1;
	}
	ops_register_stats();
	if (store_init(store_name, sys.dir)) {
		sd_emerg("cannot open the %s store in %s", store_name, sys.dir);
		return 1;
	}
	/* news that travels up: the lower layer calls what the upper one registered */
	group_set_news(&(struct group_news){ .joined = recovery_join,
					     .epoch_changed = recovery_kick,
					     .node_left = peer_abort_node,
					     .serving = request_join_done,
					     .wait_covered = recovery_wait_check });
	group_set_deliver(ordered_deliver);
	recovery_set_join_done(request_join_done);
	ordered_set_done(request_done);
	ret = group_init();
	if (ret) {
		sd_emerg("cannot read the cluster state in %s: %s", sys.dir, strerror(-ret));
		return 1;
	}
	ret = deleted_init();
	if (ret) {
		sd_emerg("cannot read the deleted vdis in %s: %s", sys.dir, strerror(-ret));
		return 1;
	}
	ret = vdi_init();
	if (ret) {
		sd_emerg("cannot load the vdis: %s", strerror(-ret));
		return 1;
	}
	payload_set_max(max_inflight ? max_inflight
					      : (uint64_t)(threads + 2) * SD_DATA_OBJ_SIZE);
	io_wq = wq_create("io", threads);
	cluster_wq = wq_create("cluster", 1);
	peer_wq = wq_create("peer", threads);
	fetch_wq = wq_create("fetch", 2);
	trace_wq = wq_create("trace", 1);
	if (!io_wq || !cluster_wq || !peer_wq || !fetch_wq || !trace_wq || recovery_init()) {
		sd_emerg("cannot start worker threads");
		return 1;
	}
	ret = create_listen_port(sys.bind_addr, sys.port);
	if (ret) {
		sd_emerg("cannot listen on port %d: %s", sys.port, strerror(-ret));
		if (foreground)
			fprintf(stderr, "sheep: cannot listen on port %d: %s\n", sys.port,
				strerror(-ret));
		return 1;
	}
	if (metrics_arg) {
		ret = metrics_start(metrics_arg);
		if (ret) {
			sd_emerg("cannot serve metrics on %s: %s", metrics_arg, strerror(-ret));
			if (foreground)
				fprintf(stderr, "sheep: cannot serve metrics on %s: %s\n",
					metrics_arg, strerror(-ret));
			return 1;
		}
	}
	if (sys.nbd_port) {
		ret = nbd_init(sys.nbd_addr, sys.nbd_port, threads);
		if (ret) {
			sd_emerg("cannot serve nbd on %s port %d: %s", sys.nbd_addr, sys.nbd_port,
				 strerror(-ret));
			if (foreground)
				fprintf(stderr, "sheep: cannot serve nbd on %s port %d: %s\n",
					sys.nbd_addr, sys.nbd_port, strerror(-ret));
			return 1;
		}
		if (!access_nbd_nr_allow() && strcmp(sys.nbd_addr, "127.0.0.1") &&
		    strcmp(sys.nbd_addr, "::1"))
			sd_warn("nbd: bound to %s, but without --nbd-allow only loopback clients "
				"are served",
				*sys.nbd_addr ? sys.nbd_addr : "every address");
	}
	ret = driver->init(cdrv_selected_option());
	if (!ret)
		ret = group_join(driver, &self);
	if (ret == -EINTR && cdrv_stop_pending()) {
		/* SIGTERM while the driver waited for its service or its group */
		sd_info("signal while joining: stopped");
		sd_log_close();
		return 0;
	}
	if (ret) {
		sd_emerg("cannot join the cluster with driver %s: %s", driver->name,
			 strerror(-ret));
		return 1;
	}
	if (!stop_requested)
		sd_info("ready");

	while (!stop_requested)
		ev_loop_once(1000);

	sd_info("shutting down");
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
	return sys.exit_status;
}
