/*
 * collie: command line parsing and dispatch.
 *
 * collie COMMAND SUBCOMMAND [ARGS] [OPTIONS]: options may stand anywhere on
 * the line (GNU getopt permutes them out). Every option is parsed against
 * the union of all options, then checked against what the chosen
 * subcommand accepts, so "-c" means the same thing everywhere.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "collie.h"
#include "ec.h"

struct collie_opts opts = {
	.addr = "localhost",
	.port = SD_LISTEN_PORT,
};

char collie_cmd_path[64];

static const struct command commands[] = {
	{ "cluster", "format, inspect and stop the cluster", cluster_cmds },
	{ "node", "list the nodes and their storage", node_cmds },
	{ "vdi", "create, list, read, write, snapshot and delete virtual disks", vdi_cmds },
	{ "debug", "drive the function tracer of a daemon", debug_cmds },
	{ NULL, NULL, NULL },
};

enum {
	LOPT_TRACER = 0x100,
	LOPT_FUNCTION,
	LOPT_DEPTH,
	LOPT_BUFFER_SIZE,
	LOPT_FORMAT,
	LOPT_VERSION,
	LOPT_TITLE,
	LOPT_HIST,
	LOPT_ALL,
	LOPT_QUEUES,
	LOPT_CACHES,
	LOPT_VDI,
	LOPT_REPAIR,
	LOPT_COMPRESS,
	LOPT_NOTRACE,
	LOPT_GRAPH_FUNCTION,
	LOPT_THRESHOLD,
	LOPT_THREAD,
	LOPT_SORT,
	LOPT_TOP,
	LOPT_CSV,
	LOPT_FOLLOW,
	LOPT_MAIN_ONLY,
	LOPT_WORKER_ONLY,
	LOPT_SAMPLE,
	LOPT_SLOWER_THAN,
	LOPT_OP,
	LOPT_REQUEST,
	LOPT_FORCE,
};

#define SHORT_OPTIONS "a:p:c:s:rhw:n:F:"

static const struct option long_options[] = {
	{ "address", required_argument, NULL, 'a' },
	{ "port", required_argument, NULL, 'p' },
	{ "copies", required_argument, NULL, 'c' },
	{ "snapshot", required_argument, NULL, 's' },
	{ "raw", no_argument, NULL, 'r' },
	{ "help", no_argument, NULL, 'h' },
	{ "tracer", required_argument, NULL, LOPT_TRACER },
	{ "function", required_argument, NULL, LOPT_FUNCTION },
	{ "depth", required_argument, NULL, LOPT_DEPTH },
	{ "buffer-size", required_argument, NULL, LOPT_BUFFER_SIZE },
	{ "format", required_argument, NULL, LOPT_FORMAT },
	{ "version", no_argument, NULL, LOPT_VERSION },
	{ "title", required_argument, NULL, LOPT_TITLE },
	{ "watch", required_argument, NULL, 'w' },
	{ "count", required_argument, NULL, 'n' },
	{ "hist", required_argument, NULL, LOPT_HIST },
	{ "all", no_argument, NULL, LOPT_ALL },
	{ "queues", no_argument, NULL, LOPT_QUEUES },
	{ "caches", no_argument, NULL, LOPT_CACHES },
	{ "vdi", no_argument, NULL, LOPT_VDI },
	{ "repair", no_argument, NULL, LOPT_REPAIR },
	{ "force", no_argument, NULL, LOPT_FORCE },
	{ "from", required_argument, NULL, 'F' },
	{ "compress", no_argument, NULL, LOPT_COMPRESS },
	{ "notrace", required_argument, NULL, LOPT_NOTRACE },
	{ "graph-function", required_argument, NULL, LOPT_GRAPH_FUNCTION },
	{ "threshold", required_argument, NULL, LOPT_THRESHOLD },
	{ "thread", required_argument, NULL, LOPT_THREAD },
	{ "sort", required_argument, NULL, LOPT_SORT },
	{ "top", required_argument, NULL, LOPT_TOP },
	{ "csv", no_argument, NULL, LOPT_CSV },
	{ "follow", no_argument, NULL, LOPT_FOLLOW },
	{ "main-only", required_argument, NULL, LOPT_MAIN_ONLY },
	{ "worker-only", required_argument, NULL, LOPT_WORKER_ONLY },
	{ "sample", required_argument, NULL, LOPT_SAMPLE },
	{ "slower-than", required_argument, NULL, LOPT_SLOWER_THAN },
	{ "op", required_argument, NULL, LOPT_OP },
	{ "request", required_argument, NULL, LOPT_REQUEST },
	{ NULL, 0, NULL, 0 },
};

static const struct {
	uint64_t bit;
	const char *usage;
	const char *help;
} option_help[] = {
	{ OPT_COPIES, "-c, --copies N|D:P",
	  "replicas (1-31; default: the cluster's), or D:P erasure code (vdi create)" },
	{ OPT_SNAPSHOT, "-s, --snapshot SNAP", "snapshot id (a number) or tag" },
	{ OPT_RAW, "-r, --raw", "raw output: no header, single spaces, sizes in bytes" },
	{ OPT_TRACER, "--tracer NAME", "graph (default), function, profile, loop or thread" },
	{ OPT_FUNCTION, "--function PATTERN", "trace only the functions matching (repeatable)" },
	{ OPT_NOTRACE, "--notrace PATTERN", "leave the functions matching out (repeatable)" },
	{ OPT_GRAPH_FUNCTION, "--graph-function FN", "graph: record only inside FN (repeatable)" },
	{ OPT_THRESHOLD, "--threshold TIME",
	  "graph: keep only calls of at least TIME (10us, 2ms)" },
	{ OPT_THREAD, "--thread KIND", "trace only main, io, peer, cluster, ... threads" },
	{ OPT_MAIN_ONLY, "--main-only FN", "thread: FN must run on the main thread" },
	{ OPT_WORKER_ONLY, "--worker-only FN", "thread: FN must not run on the main thread" },
	{ OPT_DEPTH, "--depth N", "maximum call depth recorded" },
	{ OPT_BUFFER_SIZE, "--buffer-size SIZE", "per-thread buffer size (K/M/G suffixes)" },
	{ OPT_FORMAT, "--format FMT", "graph (default), folded, chrome, csv, svg or events" },
	{ OPT_TITLE, "--title TEXT", "title of the svg flame graph" },
	{ OPT_WATCH, "-w, --watch SECONDS", "a report every SECONDS, over that interval" },
	{ OPT_COUNT, "-n, --count N", "stop after N reports (with -w)" },
	{ OPT_HIST, "--hist OP", "OP's latency distribution, with p50 and p99" },
	{ OPT_ALL, "--all", "every node of the cluster, in one table" },
	{ OPT_QUEUES, "--queues", "the work queues: threads, queued, running, done" },
	{ OPT_CACHES, "--caches", "the caches: size, held, in use, hit ratio, misses" },
	{ OPT_VDI, "--vdi", "the busiest VDIs through the node" },
	{ OPT_SAMPLE, "--sample N", "graph: record one client request in N, on every node" },
	{ OPT_SLOWER_THAN, "--slower-than TIME",
	  "graph: keep only requests slower than TIME (10ms)" },
	{ OPT_OP, "--op OP", "only requests of OP (write_obj, read_obj, nbd_write, ...)" },
	{ OPT_REQUEST, "--request ID", "that request's graph, node by node" },
	{ OPT_REPAIR, "--repair", "write the copy most nodes hold over the others" },
	{ OPT_FORCE, "--force", "even from a client still connected (it is disconnected)" },
	{ OPT_FROM, "-F, --from SNAP", "the older snapshot: back up what changed since it" },
	{ OPT_COMPRESS, "--compress", "compress the stream's data with zstd" },
	{ OPT_FOLLOW, "--follow", "print records as they come, until interrupted" },
	{ OPT_SORT, "--sort KEY", "calls, total (default), self, avg or max" },
	{ OPT_TOP, "--top N", "only the first N functions" },
	{ OPT_CSV, "--csv", "function,calls,total_us,self_us,min_us,max_us,avg_us lines" },
};

/* the options seen on the line, as OPT_* bits, and the first one's spelling */
static uint64_t seen_opts;
static char seen_name[64][32]; /* by bit number */
static char cur_spelling[32];  /* the option being parsed: "-c" or "--copies" */

void collie_err(const char *fmt, ...)
{
	va_list ap;

	collie_progress_interrupt();
	fputs("collie: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int collie_usage_err(const char *fmt, ...)
{
	va_list ap;

	fputs("collie: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	/* the hint stays on the same line: an error is one line on stderr */
	fprintf(stderr, " (see 'collie%s%s --help')\n", collie_cmd_path[0] ? " " : "",
		collie_cmd_path);
	return EXIT_USAGE;
}

static void print_version(void)
{
	printf("collie version %s\n", PACKAGE_VERSION);
}

static void print_main_usage(void)
{
	printf("Usage: collie COMMAND SUBCOMMAND [ARGS] [OPTIONS]\n\n");
	printf("Commands:\n");
	for (const struct command *c = commands; c->name; c++)
		printf("  %-10s %s\n", c->name, c->help);
	printf("\nCommon options (anywhere on the line):\n");
	printf("  %-22s %s\n", "-a, --address HOST", "daemon to talk to (default: localhost)");
	printf("  %-22s %s\n", "-p, --port PORT", "its port (default: 7000)");
	printf("  %-22s %s\n", "-h, --help", "show help (also after a command or subcommand)");
	printf("  %-22s %s\n", "--version", "show the version");
	printf("\nExit status: 0 success, 1 failure, 2 system failure (connection, I/O),\n"
	       "3 already exists, 4 full, 5 no such VDI or snapshot, 64 usage error.\n");
	printf("See collie(8) for details.\n");
}

static void print_table_usage(const char *path, const struct subcommand *table)
{
	printf("Usage: collie %s SUBCOMMAND [ARGS] [OPTIONS]\n\nSubcommands:\n", path);
	for (const struct subcommand *s = table; s->name; s++) {
		char syn[96];

		snprintf(syn, sizeof(syn), "%s%s%s", s->name, s->args[0] ? " " : "", s->args);
		printf("  %-30s %s\n", syn, s->help);
	}
	printf("\nRun 'collie %s SUBCOMMAND --help' for the options of one subcommand.\n", path);
}

static void print_sub_usage(const char *path, const struct subcommand *s)
{
	printf("Usage: collie %s%s%s [OPTIONS]\n\n%s\n\nOptions:\n", path, s->args[0] ? " " : "",
	       s->args, s->help);
	for (size_t i = 0; i < ARRAY_SIZE(option_help); i++)
		if (s->flags & option_help[i].bit)
			printf("  %-22s %s\n", option_help[i].usage, option_help[i].help);
	printf("  %-22s %s\n", "-a, --address HOST", "daemon to talk to (default: localhost)");
	printf("  %-22s %s\n", "-p, --port PORT", "its port (default: 7000)");
	printf("  %-22s %s\n", "-h, --help", "show this help");
	if (s->more)
		printf("\n%s", s->more);
	if (s->example)
		printf("\nExample:\n%s", s->example);
}

static int bit_index(uint64_t bit)
{
	return __builtin_ctzll(bit);
}

/* -c D:P: an erasure code, as the inode keeps it; 0 or -1 (not one) */
static int parse_ec(const char *arg)
{
	const char *colon = strchr(arg, ':');
	char d_str[8];
	uint64_t d, p;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(d_str))
		return -1;
	memcpy(d_str, arg, (size_t)(colon - arg));
	d_str[colon - arg] = '\0';
	if (sd_parse_uint(d_str, 2, SD_EC_MAX_DATA, &d) ||
	    sd_parse_uint(colon + 1, 1, SD_EC_MAX_PARITY, &p) || !ec_params_valid((int)d, (int)p))
		return -1;
	opts.copies = (uint8_t)(d + p);
	opts.copy_policy = ec_dp_to_policy((int)d, (int)p);
	return 0;
}

static void mark_seen(uint64_t bit)
{
	if (!(seen_opts & bit))
		snprintf(seen_name[bit_index(bit)], sizeof(seen_name[0]), "%s", cur_spelling);
	seen_opts |= bit;
}

static int parse_request_option(int c, const char *arg);

/* "10us", "2ms", "1s", "500ns"; a bare number is us (as ftrace's tracing_thresh) */
static int parse_time_ns(const char *arg, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 }, { "", 1000 }
	};
	char *end;
	uint64_t v;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (!strcmp(end, units[i].suffix)) {
			if (v > UINT64_MAX / units[i].mult)
				return -EINVAL;
			*ns = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}

static int add_pattern(const char **v, int *nr, const char *arg, const char *what)
{
	if (!*arg)
		return collie_usage_err("empty %s pattern", what);
	if (*nr == COLLIE_MAX_FUNCTIONS)
		return collie_usage_err("too many %s patterns (max %d)", what,
					COLLIE_MAX_FUNCTIONS);
	v[(*nr)++] = arg;
	return EXIT_OK;
}

/* the options of debug trace beyond start's first four */
static int parse_trace_option(int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case LOPT_NOTRACE:
		mark_seen(OPT_NOTRACE);
		return add_pattern(opts.skip_pats, &opts.nr_skip_pats, arg, "--notrace");
	case LOPT_GRAPH_FUNCTION:
		mark_seen(OPT_GRAPH_FUNCTION);
		return add_pattern(opts.graph_functions, &opts.nr_graph_functions, arg,
				   "--graph-function");
	case LOPT_THRESHOLD:
		if (parse_time_ns(arg, &opts.threshold_ns) || !opts.threshold_ns)
			return collie_usage_err("invalid time '%s' (say 10us, 2ms or 1s)", arg);
		opts.has_threshold = true;
		mark_seen(OPT_THRESHOLD);
		break;
	case LOPT_THREAD:
		if (!*arg || strlen(arg) >= 16 || strchr(arg, ' '))
			return collie_usage_err("invalid thread kind '%s'", arg);
		opts.thread = arg;
		mark_seen(OPT_THREAD);
		break;
	case LOPT_SORT:
		opts.sort = arg;
		mark_seen(OPT_SORT);
		break;
	case LOPT_TOP:
		if (sd_parse_uint(arg, 1, UINT32_MAX, &v))
			return collie_usage_err("invalid number '%s'", arg);
		opts.top = (uint32_t)v;
		opts.has_top = true;
		mark_seen(OPT_TOP);
		break;
	case LOPT_CSV:
		opts.csv = true;
		mark_seen(OPT_CSV);
		break;
	case LOPT_FOLLOW:
		opts.follow = true;
		mark_seen(OPT_FOLLOW);
		break;
	case LOPT_MAIN_ONLY:
		mark_seen(OPT_MAIN_ONLY);
		return add_pattern(opts.main_only, &opts.nr_main_only, arg, "--main-only");
	case LOPT_WORKER_ONLY:
		mark_seen(OPT_WORKER_ONLY);
		return add_pattern(opts.worker_only, &opts.nr_worker_only, arg, "--worker-only");
	default:
		return parse_request_option(c, arg);
	}
	return EXIT_OK;
}

/* debug trace's options about requests */
static int parse_request_option(int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case LOPT_SAMPLE:
		if (sd_parse_uint(arg, 1, UINT32_MAX, &v))
			return collie_usage_err(
			    "invalid sampling '%s' (one request in N: 1 or more)", arg);
		opts.sample = (uint32_t)v;
		opts.has_sample = true;
		mark_seen(OPT_SAMPLE);
		break;
	case LOPT_SLOWER_THAN:
		if (parse_time_ns(arg, &opts.slower_ns) || !opts.slower_ns)
			return collie_usage_err("invalid time '%s' (a number and ns, us, ms or s)",
						arg);
		opts.has_slower = true;
		mark_seen(OPT_SLOWER_THAN);
		break;
	case LOPT_OP:
		if (!*arg)
			return collie_usage_err("empty op name");
		opts.op = arg;
		mark_seen(OPT_OP);
		break;
	case LOPT_REQUEST:
		opts.request = arg;
		mark_seen(OPT_REQUEST);
		break;
	}
	return EXIT_OK;
}

static int parse_one(int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'a':
		if (!*arg)
			return collie_usage_err("empty address");
		opts.addr = arg;
		break;
	case 'p':
		if (sd_parse_uint(arg, 1, 65535, &v))
			return collie_usage_err("invalid port '%s'", arg);
		opts.port = (int)v;
		break;
	case 'c':
		if (strchr(arg, ':')) {
			if (parse_ec(arg))
				return collie_usage_err("invalid erasure code '%s' (D:P: D 2, 4, 8 "
							"or 16 data strips, P 1-15 parity strips)",
							arg);
		} else if (sd_parse_uint(arg, 1, SD_MAX_COPIES, &v)) {
			return collie_usage_err("invalid number of copies '%s' (1-%d)",
						arg, SD_MAX_COPIES);
		} else {
			opts.copies = (uint8_t)v;
			opts.copy_policy = 0;
		}
		opts.has_copies = true;
		mark_seen(OPT_COPIES);
		break;
	case 's':
		opts.snapshot = arg;
		mark_seen(OPT_SNAPSHOT);
		break;
	case 'r':
		opts.raw = true;
		mark_seen(OPT_RAW);
		break;
	case LOPT_TRACER:
		if (strlen(arg) >= sizeof(((struct sd_trace_status *)0)->tracer))
			return collie_usage_err("tracer name too long '%s'", arg);
		opts.tracer = arg;
		mark_seen(OPT_TRACER);
		break;
	case LOPT_FUNCTION:
		if (!*arg)
			return collie_usage_err("empty function pattern");
		if (opts.nr_functions == COLLIE_MAX_FUNCTIONS)
			return collie_usage_err("too many --function patterns (max %d)",
						COLLIE_MAX_FUNCTIONS);
		opts.functions[opts.nr_functions++] = arg;
		mark_seen(OPT_FUNCTION);
		break;
	case LOPT_DEPTH:
		if (sd_parse_uint(arg, 1, UINT32_MAX, &v))
			return collie_usage_err("invalid depth '%s'", arg);
		if (v > SD_TRACE_MAX_DEPTH)
			return collie_usage_err("--depth %s is over the tracer's limit of %d calls "
						"(its shadow stack per thread)",
						arg, SD_TRACE_MAX_DEPTH);
		opts.depth = (uint32_t)v;
		opts.has_depth = true;
		mark_seen(OPT_DEPTH);
		break;
	case LOPT_BUFFER_SIZE:
		if (sd_parse_size(arg, &v) || v == 0)
			return collie_usage_err("invalid size '%s'", arg);
		if (v > SD_TRACE_MAX_BUFFER)
			return collie_usage_err("--buffer-size %s is over the tracer's limit of "
						"%llu MiB per thread (and %llu MiB for every "
						"thread's ring together)",
						arg, SD_TRACE_MAX_BUFFER >> 20,
						SD_TRACE_MAX_TOTAL >> 20);
		opts.buffer_size = v;
		opts.has_buffer_size = true;
		mark_seen(OPT_BUFFER_SIZE);
		break;
	case LOPT_FORMAT:
		opts.format = arg;
		mark_seen(OPT_FORMAT);
		break;
	case LOPT_TITLE:
		opts.title = arg;
		mark_seen(OPT_TITLE);
		break;
	case 'w':
		if (sd_parse_uint(arg, 1, 86400, &v))
			return collie_usage_err("invalid interval '%s' (1-86400 s)", arg);
		opts.watch = (uint32_t)v;
		mark_seen(OPT_WATCH);
		break;
	case 'n':
		if (sd_parse_uint(arg, 1, UINT32_MAX, &v))
			return collie_usage_err("invalid count '%s'", arg);
		opts.count = (uint32_t)v;
		mark_seen(OPT_COUNT);
		break;
	case LOPT_HIST:
		if (!*arg)
			return collie_usage_err("empty op name");
		opts.hist = arg;
		mark_seen(OPT_HIST);
		break;
	case LOPT_ALL:
		opts.all = true;
		mark_seen(OPT_ALL);
		break;
	case LOPT_QUEUES:
		opts.queues = true;
		mark_seen(OPT_QUEUES);
		break;
	case LOPT_CACHES:
		opts.caches = true;
		mark_seen(OPT_CACHES);
		break;
	case LOPT_VDI:
		opts.vdi = true;
		mark_seen(OPT_VDI);
		break;
	case LOPT_REPAIR:
		opts.repair = true;
		mark_seen(OPT_REPAIR);
		break;
	case LOPT_FORCE:
		opts.force = true;
		mark_seen(OPT_FORCE);
		break;
	case 'F':
		opts.from = arg;
		mark_seen(OPT_FROM);
		break;
	case LOPT_COMPRESS:
		opts.compress = true;
		mark_seen(OPT_COMPRESS);
		break;
	default:
		return parse_trace_option(c, arg);
	}
	return EXIT_OK;
}

/*
 * Parse every option; the words that are not options go to words[] in
 * order (getopt's "-" mode, so POSIXLY_CORRECT cannot stop us at the first
 * word, and "--" ends the options). Returns EXIT_OK or an exit code.
 */
static int parse_options(int argc, char **argv, char **words, int *nr_words, bool *help,
			 bool *version)
{
	int c, longidx, ret;

	opterr = 0;
	*nr_words = 0;
	for (bool mid_cluster = false;;) {
		int prev = optind;

		/* "-1" is a (bad) number for the subcommand to reject, not an option */
		if (!mid_cluster && optind > 0 && optind < argc && argv[optind][0] == '-' &&
		    argv[optind][1] >= '0' && argv[optind][1] <= '9') {
			words[(*nr_words)++] = argv[optind++];
			continue;
		}
		longidx = -1;
		c = getopt_long(argc, argv, "-:" SHORT_OPTIONS, long_options, &longidx);
		if (c == -1)
			break;
		mid_cluster = optind == prev;
		switch (c) {
		case 1:
			words[(*nr_words)++] = optarg;
			break;
		case 'h':
			*help = true;
			break;
		case LOPT_VERSION:
			*version = true;
			break;
		case '?':
			if (optopt)
				return collie_usage_err("unknown option '-%c'", optopt);
			return collie_usage_err("unknown option '%s'", argv[optind - 1]);
		case ':':
			return collie_usage_err("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (longidx >= 0)
				snprintf(cur_spelling, sizeof(cur_spelling), "--%s",
					 long_options[longidx].name);
			else
				snprintf(cur_spelling, sizeof(cur_spelling), "-%c", c);
			ret = parse_one(c, optarg);
			if (ret)
				return ret;
			/*
			 * --vdi takes a VDI's name where it chooses one (debug
			 * trace start --vdi NAME) and none where it is a view
			 * (node stat --vdi): the next word, if not an option
			 */
			if (c == LOPT_VDI && optind < argc && argv[optind][0] != '-')
				opts.vdi_name = argv[optind++];
		}
	}
	while (optind < argc)
		words[(*nr_words)++] = argv[optind++];
	return EXIT_OK;
}

static int check_options(const struct subcommand *s)
{
	uint64_t bad = seen_opts & ~s->flags;

	if (!bad)
		return EXIT_OK;
	return collie_usage_err("option '%s' is not valid for 'collie %s'",
				seen_name[bit_index(bad & -bad)], collie_cmd_path);
}

static const struct subcommand *find_sub(const struct subcommand *table, const char *name)
{
	for (const struct subcommand *s = table; s->name; s++)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

static void path_append(const char *word)
{
	size_t len = strlen(collie_cmd_path);

	snprintf(collie_cmd_path + len, sizeof(collie_cmd_path) - len, "%s%s", len ? " " : "",
		 word);
}

/* walk argv's positional words down the command tables and run the handler */
static int dispatch(int argc, char **argv, bool help)
{
	const struct command *cmd;
	const struct subcommand *table, *s = NULL;
	int nr_args;

	if (argc == 0) {
		if (help) {
			print_main_usage();
			return EXIT_OK;
		}
		return collie_usage_err("missing command");
	}
	for (cmd = commands; cmd->name; cmd++)
		if (!strcmp(cmd->name, argv[0]))
			break;
	if (!cmd->name)
		return collie_usage_err("unknown command '%s'", argv[0]);
	path_append(cmd->name);
	argc--;
	argv++;

	for (table = cmd->sub;;) {
		if (argc == 0) {
			if (help) {
				print_table_usage(collie_cmd_path, table);
				return EXIT_OK;
			}
			return collie_usage_err("missing subcommand");
		}
		s = find_sub(table, argv[0]);
		if (!s)
			return collie_usage_err("unknown subcommand '%s'", argv[0]);
		path_append(s->name);
		argc--;
		argv++;
		if (!s->sub)
			break;
		table = s->sub;
	}

	if (help) {
		print_sub_usage(collie_cmd_path, s);
		return EXIT_OK;
	}
	nr_args = argc;
	if (nr_args < s->min_args)
		return collie_usage_err("missing argument: %s", s->args);
	if (s->max_args >= 0 && nr_args > s->max_args)
		return collie_usage_err("too many arguments");
	if (check_options(s))
		return EXIT_USAGE;
	return s->fn(argc, argv);
}

/* true when WORD is an option whose argument is the next word ("--port", "-p") */
static bool takes_next_word(const char *word)
{
	const char *p;

	if (word[1] != '-')
		return word[1] && !word[2] && (p = strchr(SHORT_OPTIONS, word[1])) && p[1] == ':';
	for (const struct option *o = long_options; o->name; o++)
		if (!strcmp(word + 2, o->name))
			return o->has_arg == required_argument;
	return false;
}

/* the long and short spellings of an option_help usage ("-c, --copies N") */
static void print_option_names(const char *usage)
{
	for (const char *p = usage; *p == '-';) {
		size_t n = strcspn(p, ", ");

		printf("%.*s\n", (int)n, p);
		p += n;
		p += strspn(p, ", ");
	}
}

/*
 * The values an option takes, for completion: the same words its help
 * names (tests/functional/325 checks that they agree).
 */
static const struct {
	const char *name;
	const char *const values[20];
} option_values[] = {
	{ "tracer", { "graph", "function", "profile", "loop", "thread" } },
	{ "format", { "graph", "folded", "chrome", "csv", "svg", "events" } },
	{ "sort", { "calls", "total", "self", "avg", "max" } },
	{ "thread", { "main", "io", "peer", "cluster", "fetch", "trace", "nbd", "recovery" } },
	{ "op",
	  { "read_obj", "write_obj", "create_and_write_obj", "flush_vdi", "read_peer", "write_peer",
	    "create_and_write_peer", "remove_peer", "flush_peer", "nbd_read", "nbd_write",
	    "nbd_flush", "nbd_trim", "nbd_write_zeroes", "nbd_block_status" } },
};

/* the values of option WORD ("--format", "-s"), one a line */
static void print_option_values(const char *word)
{
	if (word[0] != '-' || word[1] != '-')
		return;
	for (size_t i = 0; i < ARRAY_SIZE(option_values); i++)
		if (!strcmp(word + 2, option_values[i].name))
			for (int k = 0; option_values[i].values[k]; k++)
				printf("%s\n", option_values[i].values[k]);
}

/* -a/-p among the words: completion asks that daemon for VDI names */
static void complete_connection_option(const char *w, const char *next)
{
	uint64_t v;

	if (!strncmp(w, "--address=", 10))
		opts.addr = w + 10;
	else if (!strncmp(w, "--port=", 7) && !sd_parse_uint(w + 7, 1, 65535, &v))
		opts.port = (int)v;
	else if (!next)
		return;
	else if (!strcmp(w, "-a") || !strcmp(w, "--address"))
		opts.addr = next;
	else if ((!strcmp(w, "-p") || !strcmp(w, "--port")) && !sd_parse_uint(next, 1, 65535, &v))
		opts.port = (int)v;
}

/* the synopsis word of positional argument POS (0: the first) of s, brackets skipped */
static const char *arg_name(const struct subcommand *s, int pos)
{
	const char *p = s->args;

	for (int i = 0; i < pos && *p; i++) {
		p += strcspn(p, " ");
		p += strspn(p, " ");
	}
	return p + strspn(p, "[");
}

/*
 * The values positional argument POS of s takes, one a line: the names of
 * the existing VDIs for NAME and SRC (vdi create's NAME is a new one), the
 * log levels for LEVEL.
 */
static void print_arg_values(const struct subcommand *s, int pos)
{
	static const char *const levels[] = { "emerg", "alert",	 "crit", "error",
					      "warn",  "notice", "info", "debug" };
	const char *p = arg_name(s, pos);

	if ((!strncmp(p, "NAME", 4) && strcmp(s->name, "create")) || !strncmp(p, "SRC ", 4))
		vdi_print_names();
	else if (!strncmp(p, "LEVEL", 5))
		for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
			printf("%s\n", levels[i]);
}

/*
 * collie __complete [WORD...], for the bash completion
 * (script/bash-completion/collie): the words that may follow WORDs, one a
 * line, read from the tables above, so that completion never goes stale.
 * Options and their arguments among WORDs are skipped. After nothing: the
 * commands; after a command or a subcommand with subcommands: those; after
 * a subcommand: its options, and the names of the VDIs (asked of the
 * daemon that -a/-p on the line name) where its next argument is one.
 * When the next word is an option's argument: the values it takes, if it
 * has a list. Nothing after an unknown word. Hidden: not in --help.
 */
static int print_completions(int argc, char **argv)
{
	const struct command *cmd = NULL;
	const struct subcommand *table = NULL, *s = NULL;
	bool dashdash = false;
	int nr_pos = 0;

	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];

		if (!dashdash && !strcmp(w, "--")) {
			dashdash = true;
			continue;
		}
		if (!dashdash && w[0] == '-' && w[1]) {
			complete_connection_option(w, i + 1 < argc ? argv[i + 1] : NULL);
			if (takes_next_word(w) && ++i == argc) {
				print_option_values(w);
				return EXIT_OK;
			}
			continue;
		}
		if (s) { /* a positional argument of the subcommand */
			nr_pos++;
			continue;
		}
		if (!cmd) {
			for (cmd = commands; cmd->name && strcmp(cmd->name, w); cmd++)
				;
			if (!cmd->name)
				return EXIT_OK;
			table = cmd->sub;
			continue;
		}
		s = find_sub(table, w);
		if (!s)
			return EXIT_OK;
		if (s->sub) {
			table = s->sub;
			s = NULL;
		}
	}
	if (!cmd) {
		for (cmd = commands; cmd->name; cmd++)
			printf("%s\n", cmd->name);
		printf("-a\n--address\n-p\n--port\n-h\n--help\n--version\n");
	} else if (!s) {
		for (s = table; s->name; s++)
			printf("%s\n", s->name);
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(option_help); i++)
			if (s->flags & option_help[i].bit)
				print_option_names(option_help[i].usage);
		printf("-a\n--address\n-p\n--port\n-h\n--help\n");
		print_arg_values(s, nr_pos);
	}
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	bool help = false, version = false;
	char **words = calloc((size_t)argc + 1, sizeof(char *));
	int nr_words, ret;

	/* a daemon that hangs up must give an error, not kill us */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && !strcmp(argv[1], "__complete")) {
		free(words);
		return print_completions(argc - 2, argv + 2);
	}
	if (!words) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	ret = parse_options(argc, argv, words, &nr_words, &help, &version);
	if (ret)
		goto out_free;
	if (version) {
		print_version();
		goto out_free;
	}
	ret = dispatch(nr_words, words, help);
	if (fflush(stdout) == EOF && ret == EXIT_OK) {
		collie_err("failed to write to stdout: %s", strerror(errno));
		ret = EXIT_SYSFAIL;
	}
out_free:
	free(words);
	return ret;
}
