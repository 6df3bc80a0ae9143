/*
 * collie's command line: the option parser (parse_options, parse_one and
 * their number checks), the walk down the command tables with --help
 * (dispatch, which never runs a handler then) and the completion lister.
 *
 * Input: the words of argv after "collie", separated by NUL bytes (at most
 * 64). collie.c is compiled into this file (its main renamed) to reach its
 * static functions; the other collie sources link as they are, their
 * handlers unreachable from here.
 */
#define main collie_main
#include "../../collie/collie.c"
#undef main

#include "fuzz.h"

#define MAX_WORDS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* usage and errors go nowhere; sanitizers and libFuzzer write to fd 2 */
	FILE *null = fopen("/dev/null", "w");

	if (null) {
		stdout = null;
		stderr = null;
	}
	return 0;
}

static void reset(void)
{
	memset(&opts, 0, sizeof(opts));
	opts.addr = "localhost";
	opts.port = SD_LISTEN_PORT;
	seen_opts = 0;
	memset(seen_name, 0, sizeof(seen_name));
	cur_spelling[0] = '\0';
	collie_cmd_path[0] = '\0';
	optind = 0; /* glibc: start a new scan, forget the last one */
	optarg = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *argv[MAX_WORDS + 2], *words[MAX_WORDS + 2];
	int argc = 0, nr_words = 0;
	bool help = false, version = false;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[argc++] = "collie";
	for (size_t off = 0; off <= size && argc <= MAX_WORDS; off += strlen(buf + off) + 1)
		argv[argc++] = buf + off;
	argv[argc] = NULL;

	reset();
	if (parse_options(argc, argv, words, &nr_words, &help, &version) == EXIT_OK) {
		FUZZ_ASSERT(nr_words < argc);
		FUZZ_ASSERT(opts.nr_functions <= COLLIE_MAX_FUNCTIONS);
		FUZZ_ASSERT(opts.port >= 1 && opts.port <= 65535);
		FUZZ_ASSERT(!opts.has_copies || (opts.copies >= 1 && opts.copies <= SD_MAX_COPIES));
		FUZZ_ASSERT(!opts.has_buffer_size || opts.buffer_size);
		/* help: usage only, no handler talks to a daemon */
		dispatch(nr_words, words, true);
	}
	reset();
	print_completions(argc - 1, argv + 1);
	free(buf);
	return 0;
}
