/* What every harness links, with libFuzzer or with driver.c. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

void fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "fuzz: %s:%d: invariant broken: %s\n", file, line, what);
	abort();
}
