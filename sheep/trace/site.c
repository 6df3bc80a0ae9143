/*
 * The site table, and the site words (one per site, which tracers want it:
 * the hooks read them).
 *
 * GCC's -fpatchable-function-entry=21,16 leaves sixteen one-byte NOPs just
 * before every function and five at its entry, and lists the address of the
 * first NOP in __patchable_function_entries. The daemon is PIE: the section
 * is writable data that the loader relocates (R_X86_64_RELATIVE), so it
 * holds run-time addresses and the text carries no relocation. The table
 * (one site per function: its entry) is built once at start-up, sorted,
 * named from the symbol table and then mapped read-only: every later lookup
 * is a lock-free binary search.
 *
 * Five one-byte NOPs are five instructions: a thread could be stopped between
 * them and a rewritten site would then run from its middle. So trace_init()
 * turns each into the one 5-byte NOP before any other thread exists; from
 * then on a site is one instruction in either state. The sixteen bytes
 * before it become the function's stub (entry.S) at the same time, once
 * for the life of the process: no thread runs them until a site jumps
 * there, and a thread may return into one long after tracing stopped.
 * Writing them is patch.c's (trace_sites_prepare, which trace_init hands
 * to trace_sites_init): this file writes no text.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "logger.h"
#include "trace_priv.h"

/* defined by the linker when some object has the section; weak otherwise */
extern const uintptr_t __start___patchable_function_entries[] __attribute__((weak));
extern const uintptr_t __stop___patchable_function_entries[] __attribute__((weak));

const uint8_t trace_nop5[TRACE_INSN_SIZE] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

const struct trace_site *trace_sites;
size_t trace_nr_sites;
uintptr_t trace_site_base;

uint32_t *trace_site_words;
uintptr_t trace_site_words_bias;
size_t trace_nr_site_words;

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = ((const struct trace_site *)a)->addr;
	uintptr_t y = ((const struct trace_site *)b)->addr;

	return x < y ? -1 : x > y;
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int trace_sites_init(int (*prepare)(const struct trace_site *sites, size_t nr))
{
	const uintptr_t *start = __start___patchable_function_entries;
	const uintptr_t *stop = __stop___patchable_function_entries;
	struct trace_site *sites;
	size_t nr = 0, len;
	int ret, nr_threads;

	if (trace_sites)
		return 0;
	nr_threads = count_threads();
	if (nr_threads != 1) {
		sd_err("trace_init needs a single-threaded process (%d threads)", nr_threads);
		return nr_threads < 0 ? nr_threads : -EBUSY;
	}
	if (!start || !stop || stop <= start) {
		sd_info("no trace sites in this program");
		start = stop = NULL;
	}

	len = round_up(((size_t)(stop - start) + 1) * sizeof(*sites), 4096);
	sites = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sites == MAP_FAILED)
		return -ENOMEM;
	/* each entry is the first of the NOPs before the function */
	for (const uintptr_t *p = start; p && p < stop; p++)
		if (*p)
			sites[nr++].addr = *p + TRACE_STUB_SIZE;
	qsort(sites, nr, sizeof(*sites), cmp_addr);
	/* a function listed twice (comdat, inline copies) is one site */
	if (nr) {
		size_t j = 1;

		for (size_t i = 1; i < nr; i++)
			if (sites[i].addr != sites[j - 1].addr)
				sites[j++] = sites[i];
		nr = j;
	}

	ret = prepare(sites, nr);
	if (ret < 0)
		goto out_unmap;
	ret = trace_symbols_load(sites, nr);
	if (ret < 0)
		sd_warn("no symbols for trace sites: %s", strerror(-ret));

	trace_nr_site_words = nr ? (sites[nr - 1].addr >> 4) - (sites[0].addr >> 4) + 1 : 1;
	trace_site_words = calloc(trace_nr_site_words, sizeof(*trace_site_words));
	if (!trace_site_words) {
		ret = -ENOMEM;
		goto out_unmap;
	}
	if (mprotect(sites, len, PROT_READ) < 0)
		sd_warn("site table stays writable: %m");
	trace_site_base = nr ? sites[0].addr : 0;
	trace_site_words_bias =
	    (uintptr_t)trace_site_words - (trace_site_base >> 4) * sizeof(*trace_site_words);
	trace_nr_sites = nr;
	trace_sites = sites;
	sd_info("%zu trace sites", nr);
	return 0;

out_unmap:
	munmap(sites, len);
	return ret;
}

const struct trace_site *trace_site_find(uintptr_t addr)
{
	size_t lo = 0, hi = trace_nr_sites;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (trace_sites[mid].addr == addr)
			return &trace_sites[mid];
		if (trace_sites[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const char *trace_site_name(const struct trace_site *s, uintptr_t addr, char *buf, size_t len)
{
	if (s && s->name)
		return s->name;
	snprintf(buf, len, "%#lx", (unsigned long)(s ? s->addr : addr));
	return buf;
}
