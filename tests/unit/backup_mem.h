/*
 * A backup stream in memory, for the tests of collie/backup_format.c (the
 * unit tests and the fuzz harness): the reader's read, skip and pread
 * callbacks over it. A writer appends to data (cap bytes allocated).
 */
#ifndef TESTS_BACKUP_MEM_H
#define TESTS_BACKUP_MEM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

struct mem {
	uint8_t *data;
	size_t len, cap, pos;
};

static inline ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct mem *m = arg;
	size_t n = len < m->len - m->pos ? len : m->len - m->pos;

	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static inline int mem_skip(void *arg, size_t len)
{
	struct mem *m = arg;

	if (m->len - m->pos < len)
		return -EINVAL;
	m->pos += len;
	return 0;
}

static inline ssize_t mem_pread(void *arg, void *buf, size_t len, uint64_t off)
{
	struct mem *m = arg;
	size_t n = off >= m->len ? 0 : len < m->len - off ? len : m->len - off;

	memcpy(buf, m->data + off, n);
	return (ssize_t)n;
}

#endif
