/*
 * The store driver contract (sheep/store/store.h), one scenario run against
 * a driver by name, on an empty directory:
 *
 *   store-contract --list          the registered drivers, one a line
 *   store-contract --registry      the registry refuses incomplete drivers
 *   store-contract DRIVER DIR      the scenario; prints each failed check
 *
 * unit/store-contract.sh runs the scenario for every listed driver. Exit
 * status 0 when every check held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "internal_proto.h"
#include "logger.h"
#include "store/store.h"

static int nr_checks, nr_failed;

#define CHECK(cond, ...)                                   \
	do {                                               \
		nr_checks++;                               \
		if (!(cond)) {                             \
			nr_failed++;                       \
			printf("FAIL line %d: ", __LINE__); \
			printf(__VA_ARGS__);               \
			printf("\n");                      \
		}                                          \
	} while (0)

#define OID_A UINT64_C(0x00abcd0000000001)
#define OID_B UINT64_C(0x00abcd0000000002)
#define OID_C UINT64_C(0x00abcd0000000003)
#define OID_MISSING UINT64_C(0x00abcd00000000ff)

struct seen {
	uint64_t oids[16];
	int nr;
	int stop_after; /* return -E2BIG after this many (0: never) */
};

static int collect(uint64_t oid, void *arg)
{
	struct seen *s = arg;

	if (s->nr < 16)
		s->oids[s->nr] = oid;
	s->nr++;
	if (s->stop_after && s->nr >= s->stop_after)
		return -E2BIG;
	return 0;
}

static bool has(const struct seen *s, uint64_t oid)
{
	for (int i = 0; i < s->nr && i < 16; i++)
		if (s->oids[i] == oid)
			return true;
	return false;
}

static bool all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* one aligned durable write of 4 KiB of c at off (plain: O_DIRECT, a cached descriptor) */
static int write_page(const struct store_driver *d, uint64_t oid, char c, uint64_t off)
{
	char *p = aligned_alloc(4096, 4096);
	int ret;

	if (!p)
		return SD_RES_NO_MEM;
	memset(p, c, 4096);
	ret = d->write(oid, p, 4096, off, true);
	free(p);
	return ret;
}

/* the first byte of oid at off, or -1 when it cannot be read */
static int byte_at(const struct store_driver *d, uint64_t oid, uint64_t off)
{
	char b;

	return d->read(oid, &b, 1, off) == SD_RES_SUCCESS ? (unsigned char)b : -1;
}

/*
 * A durable write after the object's file was replaced lands in the object
 * that is there now, never in the one before, and a read reads that one
 * (a driver that keeps its files open must drop them): after a remove and
 * a create, after a stale_all and a create, after an init on another
 * directory; and for plain, after its file was unlinked behind the
 * driver's back. Each is read just before, so that a driver that caches
 * read descriptors has one to drop.
 */
static void stale_descriptors(const struct store_driver *d, const char *dir)
{
	char other[4096];
	uint64_t nr;

	CHECK(d->create_and_write(OID_C, 0, "c", 1, 0, true) == SD_RES_SUCCESS, "create C");
	CHECK(write_page(d, OID_C, '1', 4096) == SD_RES_SUCCESS, "write C");
	CHECK(write_page(d, OID_C, '2', 4096) == SD_RES_SUCCESS, "write C again");
	CHECK(byte_at(d, OID_C, 4096) == '2', "a read sees the second write");
	CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C");
	CHECK(byte_at(d, OID_C, 4096) == -1, "a read of removed C fails");
	CHECK(write_page(d, OID_C, '3', 4096) == SD_RES_NO_OBJ, "a write of removed C fails");
	CHECK(d->create_and_write(OID_C, 0, "n", 1, 0, true) == SD_RES_SUCCESS, "create C anew");
	CHECK(write_page(d, OID_C, '4', 4096) == SD_RES_SUCCESS, "write new C");
	CHECK(byte_at(d, OID_C, 0) == 'n' && byte_at(d, OID_C, 4096) == '4',
	      "after a remove and a create the write lands in the new object (%d)",
	      byte_at(d, OID_C, 4096));

	if (!strcmp(d->name, "plain")) {
		snprintf(other, sizeof(other), "%s/obj/%016llx", dir, (unsigned long long)OID_C);
		CHECK(unlink(other) == 0, "unlink %s", other);
		CHECK(byte_at(d, OID_C, 4096) == -1,
		      "a read of an object unlinked behind the driver's back fails");
		CHECK(write_page(d, OID_C, '5', 4096) == SD_RES_NO_OBJ,
		      "a write of an object unlinked behind the driver's back fails");
		CHECK(!d->exist(OID_C), "unlinked C is gone");
		CHECK(d->create_and_write(OID_C, 0, "m", 1, 0, true) == SD_RES_SUCCESS,
		      "create C after the unlink");
		CHECK(write_page(d, OID_C, '6', 4096) == SD_RES_SUCCESS &&
			  byte_at(d, OID_C, 4096) == '6',
		      "the write after the unlink and a create lands in the new object");
	}

	/* set aside as stale, fetched again: the write goes to the live copy */
	CHECK(write_page(d, OID_C, '6', 4096) == SD_RES_SUCCESS, "write C before stale_all");
	CHECK(byte_at(d, OID_C, 4096) == '6', "read C before stale_all");
	CHECK(d->stale_all(&nr) == SD_RES_SUCCESS, "stale_all");
	CHECK(byte_at(d, OID_C, 4096) == -1, "a read of an object set aside as stale fails");
	CHECK(write_page(d, OID_C, '9', 4096) == SD_RES_NO_OBJ,
	      "a write of an object set aside as stale fails");
	CHECK(d->create_and_write(OID_C, 0, "l", 1, 0, true) == SD_RES_SUCCESS, "C live again");
	CHECK(write_page(d, OID_C, '7', 4096) == SD_RES_SUCCESS, "write live C");
	CHECK(byte_at(d, OID_C, 4096) == '7', "after stale_all the write lands in the live copy");
	{
		char b = 0;

		CHECK(d->read_stale(OID_C, &b, 1, 4096) == SD_RES_SUCCESS && b != '7',
		      "and not in the stale one");
	}
	CHECK(d->purge_stale() == SD_RES_SUCCESS, "purge_stale");

	/* another directory: its own objects */
	snprintf(other, sizeof(other), "%s/other", dir);
	CHECK(write_page(d, OID_C, '7', 4096) == SD_RES_SUCCESS, "write C before the init");
	CHECK(byte_at(d, OID_C, 4096) == '7', "read C before the init");
	CHECK(d->init(other) == SD_RES_SUCCESS, "init %s", other);
	CHECK(byte_at(d, OID_C, 4096) == -1,
	      "a read after an init elsewhere does not reach the first directory");
	CHECK(write_page(d, OID_C, '9', 4096) == SD_RES_NO_OBJ,
	      "a write after an init elsewhere does not reach the first directory");
	CHECK(d->create_and_write(OID_C, 0, "o", 1, 0, true) == SD_RES_SUCCESS, "create C there");
	CHECK(write_page(d, OID_C, '8', 4096) == SD_RES_SUCCESS, "write C there");
	CHECK(byte_at(d, OID_C, 4096) == '8', "after an init elsewhere the write lands there");
	CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C there");
	CHECK(d->init(dir) == SD_RES_SUCCESS, "init %s again", dir);
	CHECK(byte_at(d, OID_C, 4096) == '7', "the first directory's C kept its bytes (%d)",
	      byte_at(d, OID_C, 4096));
	CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C");
}

/*
 * read_cached, for a driver that has it: true only with the bytes that read
 * gives (zeros past the end included); never for an object that is not
 * there, set aside, or (plain) unlinked behind the driver's back. Plain
 * serves it from pages in memory through its cached descriptor or one it
 * opens from the dentry cache alone: an object just created (its name and
 * its buffered pages in memory) reads at once, counted as the fd cache's
 * miss, and the next read_cached hits.
 */
static void read_cached(const struct store_driver *d, const char *dir)
{
	bool plain = !strcmp(d->name, "plain");
	char a[64], b[64], path[4096];
	uint64_t nr;

	if (!d->read_cached)
		return;
	CHECK(!d->read_cached(OID_C, a, 8, 0), "read_cached of a missing object");
	CHECK(d->create_and_write(OID_C, 0, "abc", 3, 10, true) == SD_RES_SUCCESS, "create C");
	if (plain && d->caches) {
		struct sd_stat_cache c0, c1;

		d->caches(&c0, 1);
		memset(a, 0x55, sizeof(a));
		CHECK(d->read_cached(OID_C, a, 8, 0) && all_zero(a, 8),
		      "plain: read_cached of an object just created, before any read");
		d->caches(&c1, 1);
		CHECK(c1.nr_misses == c0.nr_misses + 1 && c1.nr_hits == c0.nr_hits,
		      "plain: that read_cached opened the file (a miss)");
		CHECK(d->read_cached(OID_C, a, 8, 0), "plain: read_cached again");
		d->caches(&c0, 1);
		CHECK(c0.nr_hits == c1.nr_hits + 1 && c0.nr_misses == c1.nr_misses,
		      "plain: and that one hit");
	}
	CHECK(d->read(OID_C, b, 40, 0) == SD_RES_SUCCESS, "read C");
	memset(a, 0x55, sizeof(a));
	if (plain)
		CHECK(d->read_cached(OID_C, a, 40, 0), "plain: read_cached after a read");
	else
		d->read_cached(OID_C, a, 40, 0);
	CHECK(!memcmp(a, b, 40) || (!plain && a[0] == 0x55),
	      "read_cached gives what read gives, zeros past the end");
	CHECK(!d->read_cached(OID_C, a, 8, UINT64_MAX - 4), "read_cached at an offset past 2^63");
	CHECK(write_page(d, OID_C, 'w', 4096) == SD_RES_SUCCESS, "a durable write of C");
	if (d->read_cached(OID_C, a, 4, 4096))
		CHECK(!memcmp(a, "wwww", 4), "read_cached after a durable write sees it");
	CHECK(d->read(OID_C, a, 4, 4096) == SD_RES_SUCCESS && !memcmp(a, "wwww", 4),
	      "read after a durable write sees it");
	if (plain) {
		CHECK(d->read_cached(OID_C, a, 4, 4096) && !memcmp(a, "wwww", 4),
		      "plain: read_cached after the read of the written page");
		snprintf(path, sizeof(path), "%s/obj/%016llx", dir, (unsigned long long)OID_C);
		CHECK(unlink(path) == 0, "unlink %s", path);
		CHECK(!d->read_cached(OID_C, a, 4, 0), "read_cached of an object unlinked behind "
						       "the driver's back");
		CHECK(d->create_and_write(OID_C, 0, "x", 1, 0, true) == SD_RES_SUCCESS, "C again");
		CHECK(d->read(OID_C, a, 1, 0) == SD_RES_SUCCESS, "read C again");
	}
	CHECK(d->stale_all(&nr) == SD_RES_SUCCESS, "stale_all");
	CHECK(!d->read_cached(OID_C, a, 1, 0), "read_cached of an object set aside");
	CHECK(d->purge_stale() == SD_RES_SUCCESS, "purge_stale");
	CHECK(d->create_and_write(OID_C, 0, "y", 1, 0, true) == SD_RES_SUCCESS, "C live");
	CHECK(d->read(OID_C, a, 1, 0) == SD_RES_SUCCESS && a[0] == 'y', "read live C");
	CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C");
	CHECK(!d->read_cached(OID_C, a, 1, 0), "read_cached of a removed object");
}

/* the cache rows of d, n of them (-1: the callback broke the contract) */
static int cache_rows(const struct store_driver *d, struct sd_stat_cache *c)
{
	int n;

	memset(c, 0xa5, SD_STAT_MAX_CACHES * sizeof(*c));
	n = d->caches(c, SD_STAT_MAX_CACHES);
	CHECK(n >= 0 && n <= SD_STAT_MAX_CACHES, "caches: %d rows", n);
	if (n < 0 || n > SD_STAT_MAX_CACHES)
		return -1;
	for (int i = 0; i < n; i++) {
		CHECK(memchr(c[i].name, 0, sizeof(c[i].name)) && c[i].name[0], "cache %d: a name",
		      i);
		CHECK(c[i].nr_cached <= c[i].capacity && c[i].nr_in_use <= c[i].nr_cached,
		      "cache %s: in use %u <= held %u <= size %u", c[i].name, c[i].nr_in_use,
		      c[i].nr_cached, c[i].capacity);
	}
	CHECK(d->caches(c, 0) == 0, "caches with room for no row: 0");
	return n;
}

/*
 * caches, for a driver that has them: rows that hold together (in use <=
 * held <= size), counters that never go back, nothing in use between
 * calls. Plain's "fd" row counts what its descriptor cache did: the first
 * read of an object misses, the second hits, a remove invalidates what was
 * held, and more objects than it holds evict (at least one per object past
 * its size) while it never holds more than its size.
 */
static void caches(const struct store_driver *d, const char *dir)
{
	struct sd_stat_cache a[SD_STAT_MAX_CACHES], b[SD_STAT_MAX_CACHES];
	struct rlimit rl;
	uint64_t oid, nr;
	char byte;
	int n;

	(void)dir;
	if (!d->caches)
		return;
	n = cache_rows(d, a);
	if (n < 0)
		return;
	CHECK(d->create_and_write(OID_C, 0, "c", 1, 0, true) == SD_RES_SUCCESS, "create C");
	CHECK(byte_at(d, OID_C, 0) == 'c' && byte_at(d, OID_C, 0) == 'c', "read C twice");
	CHECK(cache_rows(d, b) == n, "as many rows as before");
	for (int i = 0; i < n; i++) {
		CHECK(!strcmp(a[i].name, b[i].name), "row %d keeps its name", i);
		CHECK(b[i].nr_hits >= a[i].nr_hits && b[i].nr_misses >= a[i].nr_misses &&
			  b[i].nr_evictions >= a[i].nr_evictions &&
			  b[i].nr_invalidations >= a[i].nr_invalidations,
		      "cache %s: counters never go back", b[i].name);
		CHECK(b[i].nr_in_use == 0, "cache %s: nothing in use between calls", b[i].name);
	}
	if (strcmp(d->name, "plain") || n != 1 || strcmp(b[0].name, "fd")) {
		CHECK(strcmp(d->name, "plain"), "plain: one row, fd (%d rows)", n);
		CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C");
		return;
	}
	CHECK(b[0].capacity > 0, "fd: a size (%u)", b[0].capacity);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		CHECK(b[0].capacity <= rl.rlim_cur / 8 && b[0].capacity <= 2048,
		      "fd: at most an eighth of the descriptor limit (%u of %llu), 2048 at most",
		      b[0].capacity, (unsigned long long)rl.rlim_cur);
	CHECK(b[0].nr_misses == a[0].nr_misses + 1, "fd: the first read misses (%llu)",
	      (unsigned long long)(b[0].nr_misses - a[0].nr_misses));
	CHECK(b[0].nr_hits == a[0].nr_hits + 1, "fd: the second read hits (%llu)",
	      (unsigned long long)(b[0].nr_hits - a[0].nr_hits));
	CHECK(b[0].nr_cached >= 1, "fd: C's descriptor is held");
	CHECK(d->remove(OID_C) == SD_RES_SUCCESS, "remove C");
	cache_rows(d, a);
	CHECK(a[0].nr_invalidations == b[0].nr_invalidations + 1 &&
		  a[0].nr_cached == b[0].nr_cached - 1,
	      "fd: a remove invalidates the descriptor (%llu, held %u after %u)",
	      (unsigned long long)(a[0].nr_invalidations - b[0].nr_invalidations),
	      a[0].nr_cached, b[0].nr_cached);

	/* more objects than it holds: each miss past its size pushes one out */
	nr = a[0].capacity + 32;
	for (oid = OID_C; oid < OID_C + nr; oid++)
		if (d->create_and_write(oid, 0, "e", 1, 0, true) != SD_RES_SUCCESS ||
		    d->read(oid, &byte, 1, 0) != SD_RES_SUCCESS)
			break;
	CHECK(oid == OID_C + nr, "create and read %llu objects", (unsigned long long)nr);
	cache_rows(d, b);
	CHECK(b[0].nr_misses - a[0].nr_misses == nr, "fd: %llu misses for %llu objects",
	      (unsigned long long)(b[0].nr_misses - a[0].nr_misses), (unsigned long long)nr);
	CHECK(b[0].nr_evictions - a[0].nr_evictions >= nr - a[0].capacity,
	      "fd: %llu evictions, at least %llu",
	      (unsigned long long)(b[0].nr_evictions - a[0].nr_evictions),
	      (unsigned long long)(nr - a[0].capacity));
	CHECK(b[0].nr_cached <= b[0].capacity, "fd: never more held than its size");
	for (oid = OID_C; oid < OID_C + nr; oid++)
		d->remove(oid);
	cache_rows(d, a);
	CHECK(a[0].nr_cached == 0, "fd: nothing held after every object was removed (%u)",
	      a[0].nr_cached);
}

static void scenario(const struct store_driver *d, const char *dir)
{
	char buf[64], big[4096];
	struct seen s;
	struct store_stat st;
	uint64_t nr;
	int ret;

	CHECK(d->init(dir) == SD_RES_SUCCESS, "init %s", dir);

	/* nothing there */
	CHECK(!d->exist(OID_A), "exist on an empty store");
	CHECK(d->read(OID_A, buf, 8, 0) == SD_RES_NO_OBJ, "read of a missing object");
	CHECK(d->write(OID_A, "x", 1, 0, true) == SD_RES_NO_OBJ, "write of a missing object");
	CHECK(d->remove(OID_A) == SD_RES_NO_OBJ, "remove of a missing object");
	memset(&s, 0, sizeof(s));
	CHECK(d->for_each(collect, &s) == 0 && s.nr == 0, "for_each on an empty store: %d", s.nr);

	/* create: the payload over zeros; past the end reads as zeros */
	CHECK(d->create_and_write(OID_A, 0, "abc", 3, 10, true) == SD_RES_SUCCESS, "create");
	CHECK(d->exist(OID_A), "exist after create");
	memset(buf, 0x55, sizeof(buf));
	CHECK(d->read(OID_A, buf, 32, 0) == SD_RES_SUCCESS, "read after create");
	CHECK(all_zero(buf, 10) && !memcmp(buf + 10, "abc", 3) && all_zero(buf + 13, 19),
	      "created bytes: zeros, abc at 10, zeros past the end");

	/* write: in place */
	CHECK(d->write(OID_A, "XY", 2, 11, false) == SD_RES_SUCCESS, "write");
	CHECK(d->flush_vdi(oid_to_vid(OID_A)) == SD_RES_SUCCESS, "flush of the object's vdi");
	CHECK(d->flush_vdi(oid_to_vid(OID_A) + 1) == SD_RES_SUCCESS,
	      "flush of a vdi that wrote nothing");
	CHECK(d->flush() == SD_RES_SUCCESS, "flush");
	CHECK(d->read(OID_A, buf, 4, 10) == SD_RES_SUCCESS && !memcmp(buf, "aXY", 3) &&
		  buf[3] == 0,
	      "read after write");

	/* a create of an existing object applies as a write */
	CHECK(d->create_and_write(OID_A, 0, "Z", 1, 20, true) == SD_RES_SUCCESS,
	      "create of an existing object");
	CHECK(d->read(OID_A, buf, 21, 0) == SD_RES_SUCCESS && !memcmp(buf + 10, "aXY", 3) &&
		  buf[20] == 'Z',
	      "an existing object keeps its bytes under a second create");

	/* copy-on-write: the source whole, then the payload */
	CHECK(d->create_and_write(OID_B, OID_A, "Q", 1, 0, true) == SD_RES_SUCCESS, "cow create");
	CHECK(d->read(OID_B, buf, 21, 0) == SD_RES_SUCCESS && buf[0] == 'Q' &&
		  !memcmp(buf + 10, "aXY", 3) && buf[20] == 'Z',
	      "cow copy holds the source and the write");
	CHECK(d->read(OID_A, buf, 1, 0) == SD_RES_SUCCESS && buf[0] == 0,
	      "cow leaves the source alone");
	ret = d->create_and_write(OID_MISSING, OID_MISSING + 1, "Q", 1, 0, true);
	CHECK(ret != SD_RES_SUCCESS && !d->exist(OID_MISSING),
	      "cow from a missing source fails and leaves nothing: %s", sd_strerror(ret));

	/* iteration: every object once; a callback's -errno stops it and comes back */
	memset(&s, 0, sizeof(s));
	CHECK(d->for_each(collect, &s) == 0 && s.nr == 2 && has(&s, OID_A) && has(&s, OID_B),
	      "for_each lists both objects (%d)", s.nr);
	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	CHECK(d->for_each(collect, &s) == -E2BIG && s.nr == 1,
	      "for_each stops at the callback's -errno and returns it");

	/* stat */
	memset(&st, 0, sizeof(st));
	CHECK(d->stat(&st) == SD_RES_SUCCESS && st.nr_objects == 2 && st.used > 0 &&
		  st.size >= st.free && st.size > 0,
	      "stat: %llu objects, %llu used", (unsigned long long)st.nr_objects,
	      (unsigned long long)st.used);

	/*
	 * durable writes, page-aligned (plain sends them to the disk directly,
	 * O_DIRECT) and not: each reads back, and the bytes around it stay
	 */
	{
		char *al = aligned_alloc(4096, 3 * 4096), *rd = malloc(5 * 4096);

		CHECK(al && rd, "buffers");
		if (al && rd) {
			memset(al, 'D', 2 * 4096);
			CHECK(d->create_and_write(OID_MISSING, 0, "s", 1, 0, true) == SD_RES_SUCCESS,
			      "create for the durable writes");
			CHECK(d->write(OID_MISSING, al, 2 * 4096, 4096, true) == SD_RES_SUCCESS,
			      "an aligned durable write");
			memset(al + 1, 'U', 4096);
			CHECK(d->write(OID_MISSING, al + 1, 4096, 3 * 4096 + 1, true) ==
				      SD_RES_SUCCESS,
			      "an unaligned durable write");
			CHECK(d->read(OID_MISSING, rd, 5 * 4096, 0) == SD_RES_SUCCESS, "read back");
			CHECK(rd[0] == 's' && all_zero(rd + 1, 4095), "before: untouched");
			CHECK(rd[4096] == 'D' && rd[3 * 4096 - 1] == 'D' && rd[3 * 4096] == 0,
			      "the aligned write");
			CHECK(rd[3 * 4096 + 1] == 'U' && rd[4 * 4096] == 'U' && all_zero(rd + 4 * 4096 + 1, 4095),
			      "the unaligned write, and after it");
			CHECK(d->remove(OID_MISSING) == SD_RES_SUCCESS, "remove");
			/* an aligned durable create (plain: O_DIRECT) at an offset */
			memset(al, 'C', 2 * 4096);
			CHECK(d->create_and_write(OID_MISSING, 0, al, 2 * 4096, 4096, true) ==
				  SD_RES_SUCCESS,
			      "an aligned durable create");
			CHECK(d->read(OID_MISSING, rd, 3 * 4096, 0) == SD_RES_SUCCESS &&
				  all_zero(rd, 4096) && rd[4096] == 'C' && rd[3 * 4096 - 1] == 'C',
			      "it reads back, zeros before it");
			/* the same create again finds the object: a write of its range */
			memset(al, 'E', 4096);
			CHECK(d->create_and_write(OID_MISSING, 0, al, 4096, 2 * 4096, true) ==
				  SD_RES_SUCCESS,
			      "an aligned durable create of an existing object");
			CHECK(d->read(OID_MISSING, rd, 3 * 4096, 0) == SD_RES_SUCCESS &&
				  rd[4096] == 'C' && rd[2 * 4096 - 1] == 'C' &&
				  rd[2 * 4096] == 'E' && rd[3 * 4096 - 1] == 'E',
			      "it wrote its range only");
			CHECK(d->remove(OID_MISSING) == SD_RES_SUCCESS, "remove");
		}
		free(al);
		free(rd);
	}

	/* reopen: what was stored stays */
	CHECK(d->init(dir) == SD_RES_SUCCESS, "init again");
	CHECK(d->read(OID_B, buf, 1, 0) == SD_RES_SUCCESS && buf[0] == 'Q',
	      "an object survives a reopen");

	/* stale copies: set aside, not read or listed, readable as stale */
	memset(big, 'b', sizeof(big));
	CHECK(d->write(OID_B, big, sizeof(big), 0, true) == SD_RES_SUCCESS, "a larger write");
	nr = 0;
	CHECK(d->stale_all(&nr) == SD_RES_SUCCESS && nr == 2, "stale_all sets aside 2: %llu",
	      (unsigned long long)nr);
	CHECK(!d->exist(OID_A) && d->read(OID_A, buf, 1, 0) == SD_RES_NO_OBJ,
	      "a stale object is not live");
	memset(&s, 0, sizeof(s));
	CHECK(d->for_each(collect, &s) == 0 && s.nr == 0, "for_each skips stale copies");
	memset(&s, 0, sizeof(s));
	CHECK(d->for_each_stale(collect, &s) == 0 && s.nr == 2 && has(&s, OID_A),
	      "for_each_stale lists them");
	CHECK(d->read_stale(OID_B, big, sizeof(big), 0) == SD_RES_SUCCESS && big[4095] == 'b',
	      "read_stale");
	CHECK(d->read_stale(OID_MISSING, buf, 1, 0) == SD_RES_NO_OBJ,
	      "read_stale of what has no stale copy");
	/* a live copy again (recovery fetched it), the stale one still there */
	CHECK(d->create_and_write(OID_A, 0, "L", 1, 0, true) == SD_RES_SUCCESS &&
		  d->exist(OID_A),
	      "a live copy next to a stale one");
	CHECK(d->purge_stale() == SD_RES_SUCCESS, "purge_stale");
	memset(&s, 0, sizeof(s));
	CHECK(d->for_each_stale(collect, &s) == 0 && s.nr == 0, "nothing stale after purge");
	CHECK(d->read(OID_A, buf, 1, 0) == SD_RES_SUCCESS && buf[0] == 'L',
	      "purge leaves live copies");
	CHECK(d->remove(OID_A) == SD_RES_SUCCESS && !d->exist(OID_A), "remove");

	stale_descriptors(d, dir);
	read_cached(d, dir);
	caches(d, dir);
}

/* a driver that lacks a callback the core calls: refused */
static int nop_init(const char *dir)
{
	return 0;
}

static void registry(void)
{
	const struct store_driver *plain = store_find("plain");
	struct store_driver broken;
	char names[256];

	CHECK(plain != NULL, "plain is registered");
	if (!plain)
		return;
	broken = *plain;
	broken.name = "broken-stale";
	broken.read_stale = NULL;
	CHECK(store_register(&broken) == -EINVAL, "a driver without read_stale is refused");
	broken.read_stale = plain->read_stale;
	broken.purge_stale = NULL;
	CHECK(store_register(&broken) == -EINVAL, "a driver without purge_stale is refused");
	broken.purge_stale = plain->purge_stale;
	broken.init = nop_init;
	broken.stat = NULL;
	CHECK(store_register(&broken) == -EINVAL, "a driver without stat is refused");
	broken.stat = plain->stat;
	broken.flush_vdi = NULL;
	CHECK(store_register(&broken) == -EINVAL, "a driver without flush_vdi is refused");
	CHECK(store_find("broken-stale") == NULL, "a refused driver cannot be chosen");
	CHECK(store_init("broken-stale", "/nonexistent") == -ENOENT,
	      "store_init of a refused driver: -ENOENT");
	broken = *plain;
	CHECK(store_register(&broken) == -EEXIST, "a second driver named plain is refused");
	store_names(names, sizeof(names));
	CHECK(!strcmp(names, "plain") || strstr(names, "plain") != NULL, "names: %s", names);
	CHECK(strstr(names, "broken") == NULL, "names list no refused driver: %s", names);
}

int main(int argc, char **argv)
{
	sd_log_init(NULL, getenv("STORE_DEBUG") ? SDOG_DEBUG : SDOG_EMERG, "store-contract");
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		char names[256], *save, *n;

		store_names(names, sizeof(names));
		for (n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save))
			printf("%s\n", n);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--registry")) {
		registry();
	} else if (argc == 3) {
		const struct store_driver *d = store_find(argv[1]);

		if (!d) {
			printf("FAIL: no store driver %s\n", argv[1]);
			return 1;
		}
		scenario(d, argv[2]);
	} else {
		fprintf(stderr, "usage: store-contract --list | --registry | DRIVER DIR\n");
		return 2;
	}
	printf("%s: %d checks, %d failed\n", argc == 3 ? argv[1] : "registry", nr_checks,
	       nr_failed);
	return nr_failed ? 1 : 0;
}
