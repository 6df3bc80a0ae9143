/*
 * A plain main for the harnesses: runs LLVMFuzzerTestOneInput once per
 * file named on the command line (a directory: each regular file in it,
 * sorted), the way libFuzzer replays a corpus, without needing clang.
 * make check runs every harness over its seed corpus with it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int nr_inputs;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap ? cap * 2 : 4096);

			if (!nb) {
				fclose(f);
				free(buf);
				return -1;
			}
			buf = nb;
			cap = cap ? cap * 2 : 4096;
		}
		n = fread(buf + len, 1, cap - len, f);
		if (!n)
			break;
		len += n;
	}
	fclose(f);
	/* an exact-size copy, so that ASan sees a read past the input */
	uint8_t *in = malloc(len ? len : 1);

	if (!in) {
		free(buf);
		return -1;
	}
	memcpy(in, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(in, len);
	free(in);
	nr_inputs++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **names = NULL;
	int nr = 0, ret = 0;

	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		char **nn;

		if (de->d_name[0] == '.')
			continue;
		nn = realloc(names, (nr + 1) * sizeof(*names));
		if (!nn) {
			ret = -1;
			break;
		}
		names = nn;
		names[nr] = malloc(strlen(path) + strlen(de->d_name) + 2);
		if (!names[nr]) {
			ret = -1;
			break;
		}
		sprintf(names[nr++], "%s/%s", path, de->d_name);
	}
	closedir(d);
	qsort(names, nr, sizeof(*names), cmp_names);
	for (int i = 0; i < nr; i++) {
		if (!ret)
			ret = run_file(names[i]);
		free(names[i]);
	}
	free(names);
	return ret;
}

int main(int argc, char **argv)
{
	int ret = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc && !ret; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 2;
		}
		ret = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
	}
	if (ret)
		return 2;
	/* fd 1 itself: a harness may point stdout elsewhere */
	dprintf(1, "%s: %d inputs, no crash\n", argv[0], nr_inputs);
	return 0;
}
