/*
 * The harnesses' shared entry points. Every harness defines
 * LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize); the same
 * source links either with libFuzzer (configure --enable-fuzz, clang) or
 * with driver.c, a plain main that feeds it files (make check, any cc).
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* a harness found a broken invariant: report it the way a sanitizer would */
#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fuzz_fail(__FILE__, __LINE__, #cond);                                      \
	} while (0)
void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

/* sheep_env.c: a daemon's environment without its main (sheep.c) */
/* a private directory for the daemon's state, made once: its path */
const char *fuzz_sheep_dir(void);
/*
 * the daemon's directory, the log (to /dev/null), the plain store, group and vdi state;
 * formatted: the only member of a formatted cluster (copies 1) at epoch 1,
 * through a cluster driver that delivers every message back at once
 */
void fuzz_sheep_setup(bool formatted);
/* remove every object file the store holds (after an input wrote some) */
void fuzz_store_wipe(void);
/* serve again after an input that asked the daemon to stop */
void fuzz_daemon_reset(void);

#endif
