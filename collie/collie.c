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
	LOPT_VDI,
	LOPT_REPAIR,
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
};

#define SHORT_OPTIONS "a:p:c:s:rhw:n:"

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
	{ "vdi", no_argument, NULL, LOPT_VDI },
	{ "repair", no_argument, NULL, LOPT_REPAIR },
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
	{ NULL, 0, NULL, 0 },
};

static const struct {
	unsigned int bit;
	const char *usage;
	const char *help;
} option_help[] = {
	{ OPT_COPIES, "-c, --copies N", "number of replicas (1-31; default: the cluster's)" },
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
	{ OPT_FORMAT, "--format FMT", "graph (default), folded, chrome, csv or svg" },
	{ OPT_TITLE, "--title TEXT", "title of the svg flame graph" },
	{ OPT_WATCH, "-w, --watch SECONDS", "a report every SECONDS, over that interval" },
	{ OPT_COUNT, "-n, --count N", "stop after N reports (with -w)" },
	{ OPT_HIST, "--hist OP", "OP's latency distribution, with p50 and p99" },
	{ OPT_ALL, "--all", "every node of the cluster, in one table" },
	{ OPT_QUEUES, "--queues", "the work queues: threads, queued, running, done" },
	{ OPT_VDI, "--vdi", "the busiest VDIs through the node" },
	{ OPT_REPAIR, "--repair", "write the copy most nodes hold over the others" },
	{ OPT_FOLLOW, "--follow", "print records as they come, until interrupted" },
	{ OPT_SORT, "--sort KEY", "calls, total (default), self, avg or max" },
	{ OPT_TOP, "--top N", "only the first N functions" },
	{ OPT_CSV, "--csv", "function,calls,total_us,self_us,min_us,max_us,avg_us lines" },
};

/* the options seen on the line, as OPT_* bits, and the first one's spelling */
static unsigned int seen_opts;
static char seen_name[32][32]; /* by bit number */
static char cur_spelling[32];  /* the option being parsed: "-c" or "--copies" */

void collie_err(const char *fmt, ...)
{
	va_list ap;

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

static int bit_index(unsigned int bit)
{
	return __builtin_ctz(bit);
}

static void mark_seen(unsigned int bit)
{
	if (!(seen_opts & bit))
		snprintf(seen_name[bit_index(bit)], sizeof(seen_name[0]), "%s", cur_spelling);
	seen_opts |= bit;
}

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
		if (sd_parse_uint(arg, 1, SD_MAX_COPIES, &v))
			return collie_usage_err("invalid number of copies '%s' (1-%d)", arg,
						SD_MAX_COPIES);
		opts.copies = (uint8_t)v;
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
		opts.depth = (uint32_t)v;
		opts.has_depth = true;
		mark_seen(OPT_DEPTH);
		break;
	case LOPT_BUFFER_SIZE:
		if (sd_parse_size(arg, &v) || v == 0)
			return collie_usage_err("invalid size '%s'", arg);
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
	case LOPT_VDI:
		opts.vdi = true;
		mark_seen(OPT_VDI);
		break;
	case LOPT_REPAIR:
		opts.repair = true;
		mark_seen(OPT_REPAIR);
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
		}
	}
	while (optind < argc)
		words[(*nr_words)++] = argv[optind++];
	return EXIT_OK;
}

static int check_options(const struct subcommand *s)
{
	unsigned int bad = seen_opts & ~s->flags;

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
 * collie __complete [WORD...], for the bash completion
 * (script/bash-completion/collie): the words that may follow WORDs, one a
 * line, read from the tables above, so that completion never goes stale.
 * Options and their arguments among WORDs are skipped. After nothing: the
 * commands; after a command or a subcommand with subcommands: those; after
 * a subcommand: its options. Nothing when the next word is an option's
 * argument or an unknown word was met. Hidden: not in --help.
 */
static int print_completions(int argc, char **argv)
{
	const struct command *cmd = NULL;
	const struct subcommand *table = NULL, *s = NULL;
	bool dashdash = false;

	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];

		if (!dashdash && !strcmp(w, "--")) {
			dashdash = true;
			continue;
		}
		if (!dashdash && w[0] == '-' && w[1]) {
			if (takes_next_word(w) && ++i == argc)
				return EXIT_OK;
			continue;
		}
		if (s) /* a positional argument of the subcommand */
			continue;
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
