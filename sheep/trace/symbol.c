/*
 * Function names for the sites.
 *
 * libelf reads the symbol table of /proc/self/exe once (.symtab, or
 * .dynsym in a stripped binary). Symbol values are link-time addresses; the
 * load bias of the main program (dl_iterate_phdr's first object) turns them
 * into run-time ones. Each site is named after the function that contains
 * it; a site without one is printed as its address.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logger.h"
#include "trace_priv.h"

struct sym {
	uintptr_t start;
	uintptr_t end;
	const char *name;
};

static int first_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1; /* the main program comes first */
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The function symbols of one symbol table section, biased. gcc 12's
 * -fanalyzer loses each name once stored into syms[n] (a heap array at a
 * computed index) and reports it leaked: a false positive, silenced for
 * this function only (script/analyze).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
static int read_syms(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, uintptr_t bias, struct sym **out,
		     size_t *nr_out)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t nr, n = 0;
	struct sym *syms;

	if (!data || !sh->sh_entsize)
		return -EINVAL;
	nr = sh->sh_size / sh->sh_entsize;
	syms = calloc(nr ? nr : 1, sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		GElf_Sym s;
		const char *name;

		if (!gelf_getsym(data, (int)i, &s))
			continue;
		if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		name = strdup(name);
		if (!name)
			break;
		syms[n].start = bias + s.st_value;
		syms[n].end = syms[n].start + (s.st_size ? s.st_size : 1);
		syms[n].name = name;
		n++;
	}
	qsort(syms, n, sizeof(*syms), cmp_sym);
	*out = syms;
	*nr_out = n;
	return 0;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic pop
#endif

/* the symbol containing @addr (the last one starting at or before it) */
static const struct sym *sym_find(const struct sym *syms, size_t nr, uintptr_t addr)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= syms[lo - 1].end)
		return NULL;
	return &syms[lo - 1];
}

/*
 * The symbols stay for the life of the process: the sites point to their
 * names (and a reachable table keeps leak checkers quiet).
 */
static struct sym *all_syms;
static size_t nr_all_syms;

int trace_symbols_load(struct trace_site *sites, size_t nr_sites)
{
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	GElf_Shdr sh, use_sh;
	struct sym *syms = NULL;
	size_t nr_syms = 0;
	uintptr_t bias = 0;
	Elf *elf;
	int fd, ret;

	if (all_syms)
		return 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	dl_iterate_phdr(first_phdr, &bias);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		ret = -EINVAL;
		goto out_close;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
	}
	scn = symtab ? symtab : dynsym;
	if (!scn || !gelf_getshdr(scn, &use_sh)) {
		ret = -ENOENT;
		goto out_end;
	}
	ret = read_syms(elf, scn, &use_sh, bias, &syms, &nr_syms);
	if (ret < 0)
		goto out_end;
	for (size_t i = 0; i < nr_sites; i++) {
		const struct sym *s = sym_find(syms, nr_syms, sites[i].addr);

		sites[i].name = s ? s->name : NULL;
	}
	all_syms = syms;
	nr_all_syms = nr_syms;
	ret = 0;
out_end:
	elf_end(elf);
out_close:
	close(fd);
	return ret;
}

const char *trace_symbol_name(uintptr_t addr)
{
	const struct sym *s = all_syms ? sym_find(all_syms, nr_all_syms, addr) : NULL;

	return s ? s->name : NULL;
}

int trace_symbol_range(const char *name, uintptr_t *start, uintptr_t *end)
{
	for (size_t i = 0; i < nr_all_syms; i++)
		if (!strcmp(all_syms[i].name, name)) {
			*start = all_syms[i].start;
			*end = all_syms[i].end;
			return 0;
		}
	return -ENOENT;
}
