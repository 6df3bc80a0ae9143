/*
 * collie vdi backup / vdi restore: a snapshot, or what changed between two
 * snapshots of one VDI, as a stream (backup_format.h), and back.
 *
 * Backup reads the objects with the pipelined reader of vdi_io.c. A full
 * backup sends every non-zero sector run of every allocated object; an
 * incremental one reads, for each index whose data map entries differ
 * between FROM and TO, both objects (a hole reads as zeros) and sends the
 * sector runs that differ: DATA where TO has data, ZERO where TO has zeros.
 * Each range of an incremental stream carries the hash of the base
 * object's bytes (those inside FROM's size), so that a restore can tell
 * that it is applying the stream to the content it was taken from.
 *
 * Restore checks the whole stream before it writes anything: the stream
 * is read twice (stdin when it is a regular file, else a copy in an
 * unlinked file of $TMPDIR), first to verify every checksum, the order and
 * the end record and, for an incremental stream, the base objects' hashes,
 * then to write. A full stream makes a new VDI; an incremental one is
 * applied to the working VDI NAME, which must still be the base snapshot
 * (-s BASE) unchanged: the same data map (just snapshotted, or rolled back).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backup_format.h"
#include "collie.h"
#include "vdi_io.h"

#define SECTOR 512

/* ------------------------------------------------------------------ */
/* backup */

struct backup {
	struct vdi_io io;      /* on TO */
	struct sd_inode *from; /* NULL: a full backup */
	struct bk_writer w;
	uint64_t from_size;
	char *zeros; /* an object of zeros */
};

static int write_stdout_fn(void *arg, const void *buf, size_t len)
{
	return sd_write_full(STDOUT_FILENO, buf, len);
}

/* bytes of object idx inside a VDI of size bytes */
static uint32_t obj_len(uint64_t size, uint8_t shift, uint32_t idx)
{
	uint64_t start = (uint64_t)idx << shift;

	if (start >= size)
		return 0;
	return (uint32_t)min_t(uint64_t, UINT64_C(1) << shift, size - start);
}

/* a sector of data is rarely zero in its first word: a call to memcmp saved */
static bool is_zero(const char *p, size_t len, const char *zeros)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return !w && !memcmp(p, zeros, len);
}

/*
 * The runs of one object: with from == NULL (full), each run of non-zero
 * sectors is a DATA record; otherwise each run of sectors that differ from
 * from, DATA where to has data and ZERO where it has zeros.
 */
static int emit_object(struct backup *b, uint32_t idx, const char *from, const char *to,
		       uint32_t len, uint64_t base_hash)
{
	uint32_t start = 0;
	int cls = 0, ret; /* 0: nothing to send, BK_DATA, BK_ZERO */

	for (uint32_t off = 0; off <= len; off += SECTOR) {
		int c = 0;

		if (off < len) {
			bool zero = is_zero(to + off, SECTOR, b->zeros);

			if (!from)
				c = zero ? 0 : BK_DATA;
			else if (memcmp(from + off, to + off, SECTOR))
				c = zero ? BK_ZERO : BK_DATA;
		}
		if (c == cls)
			continue;
		if (cls == BK_DATA)
			ret = bk_writer_data(&b->w, idx, start, off - start, to + start, base_hash);
		else if (cls == BK_ZERO)
			ret = bk_writer_zero(&b->w, idx, start, off - start, base_hash);
		else
			ret = 0;
		if (ret) {
			if (ret != -EPIPE)
				collie_err("failed to write the backup: %s", strerror(-ret));
			return EXIT_SYSFAIL;
		}
		cls = c;
		start = off;
	}
	return EXIT_OK;
}

/* fill slot s with object idx of the VDI whose data map is map (zeros for a hole) */
static int read_obj(struct backup *b, struct io_slot *s, const uint32_t *map, uint32_t idx,
		    uint32_t len)
{
	s->idx = idx;
	s->len = len;
	s->ready = false;
	if (!map[idx] || !len) {
		memset(s->buf, 0, b->io.obj_size);
		s->ready = true;
		return EXIT_OK;
	}
	if (len < b->io.obj_size)
		memset(s->buf + len, 0, b->io.obj_size - len);
	return vdi_io_send(&b->io, s, SD_OP_READ_OBJ, 0, vid_to_data_oid(map[idx], idx), 0, 0,
			   NULL);
}

/* the next index to send from, or nr when none is left */
static uint32_t next_changed(const struct backup *b, uint32_t idx, uint32_t nr)
{
	const uint32_t *to = b->io.inode->data_vdi_id;

	for (; idx < nr; idx++) {
		uint32_t from = 0;

		if (!b->from) {
			if (to[idx])
				return idx;
			continue;
		}
		if (obj_len(b->from_size, b->io.shift, idx))
			from = b->from->data_vdi_id[idx];
		if (from != to[idx])
			return idx;
	}
	return nr;
}

/*
 * Walk the objects in order with up to IO_NR_SLOTS reads in flight: a job
 * is one slot (full) or two (FROM then TO), consumed from the ring's head.
 */
static int backup_objects(struct backup *b)
{
	struct vdi_io *io = &b->io;
	uint64_t size = io->inode->vdi_size;
	uint32_t nr = (uint32_t)((size + io->obj_size - 1) >> io->shift);
	unsigned int per = b->from ? 2 : 1, head = 0, queued = 0;
	uint32_t idx = next_changed(b, 0, nr);
	int ret;

	while (idx < nr || queued) {
		struct io_slot *s, *f, *t;
		int result;

		while (idx < nr && queued + per <= IO_NR_SLOTS) {
			unsigned int at = (head + queued) % IO_NR_SLOTS;
			uint32_t len = obj_len(size, io->shift, idx);

			if (b->from) {
				ret = read_obj(b, &io->slots[at], b->from->data_vdi_id, idx,
					       obj_len(b->from_size, io->shift, idx));
				at = (at + 1) % IO_NR_SLOTS;
				if (ret)
					return ret;
			}
			ret = read_obj(b, &io->slots[at], io->inode->data_vdi_id, idx, len);
			if (ret)
				return ret;
			io->slots[at].len = len; /* the range sent: TO's */
			queued += per;
			idx = next_changed(b, idx + 1, nr);
		}
		f = &io->slots[head];
		t = &io->slots[(head + per - 1) % IO_NR_SLOTS];
		if (f->ready && t->ready) {
			ret = emit_object(b, t->idx, b->from ? f->buf : NULL, t->buf, t->len,
					  b->from ? bk_hash(f->buf, f->len) : 0);
			if (ret)
				return ret;
			head = (head + per) % IO_NR_SLOTS;
			queued -= per;
			continue;
		}
		ret = vdi_io_recv(io, &s, &result);
		if (ret)
			return ret;
		if (result != SD_RES_SUCCESS) {
			collie_err("failed to read object %u of vdi '%s': %s", s->idx, io->name,
				   sd_strerror(result));
			return collie_exit_code(result);
		}
		s->ready = true;
	}
	return EXIT_OK;
}

/* -F FROM: an older snapshot of the same VDI, with the same object size */
static int load_from(struct backup *b, const char *name)
{
	const struct sd_inode *to = b->io.inode;
	uint32_t vid;
	int ret;

	ret = vdi_lookup(name, opts.from, &vid);
	if (ret)
		return ret;
	b->from = vdi_load_inode(vid, SD_INODE_SIZE, &ret);
	if (!b->from)
		return ret;
	if (!vdi_is_snapshot(b->from)) {
		collie_err("'%s' names the working vdi '%s', not a snapshot", opts.from, name);
		return EXIT_FAIL;
	}
	if (b->from->snap_id >= to->snap_id) {
		collie_err("snapshot '%s' is not older than snapshot '%s' of vdi '%s'", opts.from,
			   opts.snapshot, name);
		return EXIT_FAIL;
	}
	if (b->from->block_size_shift != to->block_size_shift) {
		collie_err("snapshots '%s' and '%s' have different object sizes", opts.from,
			   opts.snapshot);
		return EXIT_FAIL;
	}
	if (b->from->vdi_size > to->vdi_size) {
		collie_err("snapshot '%s' is larger than snapshot '%s'", opts.from, opts.snapshot);
		return EXIT_FAIL;
	}
	b->from_size = b->from->vdi_size;
	return EXIT_OK;
}

static void fill_header(struct backup *b, struct bk_header *h)
{
	const struct sd_inode *to = b->io.inode;

	memset(h, 0, sizeof(*h));
	h->flags = (b->from ? BK_F_INCREMENTAL : 0) | (opts.compress ? BK_F_ZSTD : 0);
	h->block_size_shift = to->block_size_shift;
	h->copies = to->nr_copies;
	h->copy_policy = to->copy_policy;
	h->vdi_size = to->vdi_size;
	h->to_vid = to->vdi_id;
	h->to_snap_id = to->snap_id;
	h->to_ctime = to->snap_ctime;
	h->created = (uint64_t)time(NULL);
	memcpy(h->name, to->name, BK_NAME_LEN - 1);
	memcpy(h->to_tag, to->tag, BK_NAME_LEN - 1);
	if (b->from) {
		h->from_size = b->from_size;
		h->from_vid = b->from->vdi_id;
		h->from_snap_id = b->from->snap_id;
		h->from_ctime = b->from->snap_ctime;
		memcpy(h->from_tag, b->from->tag, BK_NAME_LEN - 1);
	}
}

int vdi_backup(int argc, char **argv)
{
	const char *name = argv[0];
	struct backup b = { 0 };
	struct bk_header h;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (!opts.snapshot)
		return collie_usage_err("backup needs the snapshot to back up: -s SNAP");
	if (isatty(STDOUT_FILENO))
		return collie_usage_err("refusing to write a backup to a terminal");
	ret = vdi_io_open(&b.io, name, opts.snapshot);
	if (ret)
		goto out;
	if (!vdi_is_snapshot(b.io.inode)) {
		collie_err("'%s' names the working vdi '%s', not a snapshot", opts.snapshot, name);
		ret = EXIT_FAIL;
		goto out;
	}
	if (opts.from) {
		ret = load_from(&b, name);
		if (ret)
			goto out;
	}
	b.zeros = calloc(1, b.io.obj_size);
	if (!b.zeros) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	fill_header(&b, &h);
	ret = bk_writer_open(&b.w, &h, write_stdout_fn, NULL);
	if (!ret) {
		ret = backup_objects(&b);
		if (!ret && bk_writer_end(&b.w))
			ret = EXIT_SYSFAIL;
	} else {
		if (ret != -EPIPE)
			collie_err("failed to write the backup: %s", strerror(-ret));
		ret = EXIT_SYSFAIL;
	}
	bk_writer_close(&b.w);
out:
	vdi_io_close(&b.io);
	free(b.from);
	free(b.zeros);
	return ret;
}

/* ------------------------------------------------------------------ */
/* restore */

struct restore {
	int fd;	     /* the stream, seekable */
	off_t start; /* where it begins in fd */
	off_t end;   /* fd's size as pass 1 began */
	struct bk_reader r;
	struct vdi_io io;
	struct sd_inode *base; /* incremental: -s BASE */
	uint32_t base_vid;
	uint64_t obj_size; /* the stream's */
	char *buf;	   /* an object */
};

static ssize_t read_fd_fn(void *arg, void *buf, size_t len)
{
	struct restore *rs = arg;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(rs->fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* stdin if it can be read twice, else a copy of it in an unlinked temporary file */
static int open_stream(struct restore *rs)
{
	const char *dir = getenv("TMPDIR");
	struct stat st;
	char buf[65536];
	ssize_t n;

	rs->start = lseek(STDIN_FILENO, 0, SEEK_CUR);
	if (!fstat(STDIN_FILENO, &st) && S_ISREG(st.st_mode) && rs->start >= 0) {
		rs->fd = STDIN_FILENO;
		return EXIT_OK;
	}
	rs->start = 0;
	rs->fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR, 0600);
	if (rs->fd < 0) {
		collie_err("failed to make a temporary copy of the stream in %s: %s",
			   dir && *dir ? dir : "/tmp", strerror(errno));
		return EXIT_SYSFAIL;
	}
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || sd_write_full(rs->fd, buf, (size_t)n)) {
			collie_err("failed to copy the stream to a temporary file: %s",
				   strerror(errno));
			return EXIT_SYSFAIL;
		}
	}
	return EXIT_OK;
}

/* (re)start reading the stream at its header */
static int stream_rewind(struct restore *rs)
{
	int ret;

	bk_reader_close(&rs->r);
	if (lseek(rs->fd, rs->start, SEEK_SET) < 0) {
		collie_err("failed to rewind the stream: %s", strerror(errno));
		return EXIT_SYSFAIL;
	}
	ret = bk_reader_open(&rs->r, read_fd_fn, rs);
	if (ret) {
		collie_err("refusing the backup stream: %s", rs->r.err);
		return ret == -EIO ? EXIT_SYSFAIL : EXIT_FAIL;
	}
	return EXIT_OK;
}

/* a record's failure as a message and an exit code */
static int stream_err(struct restore *rs, int ret)
{
	collie_err("refusing the backup stream: %s", rs->r.err);
	return ret == -EIO ? EXIT_SYSFAIL : EXIT_FAIL;
}

/* hash of base object idx inside the stream's base size, as the backup took it */
static int base_hash(struct restore *rs, uint32_t idx, uint64_t *hash)
{
	const struct bk_header *h = &rs->r.hdr;
	uint32_t len = obj_len(h->from_size, h->block_size_shift, idx);
	uint32_t owner = len ? rs->base->data_vdi_id[idx] : 0;
	struct sd_req hdr;
	struct sd_rsp rsp;
	char what[80];
	int ret;

	memset(rs->buf, 0, len);
	if (owner) {
		collie_init_req(&hdr, SD_OP_READ_OBJ);
		hdr.data_length = len;
		hdr.obj.oid = vid_to_data_oid(owner, idx);
		snprintf(what, sizeof(what), "failed to read object %u of the base", idx);
		ret = collie_run(what, &hdr, rs->buf, 0, len, &rsp);
		if (ret)
			return ret;
	}
	*hash = bk_hash(rs->buf, len);
	return EXIT_OK;
}

/*
 * Pass 1 of a stream without compression reads no payload in order: it
 * walks the records, skipping their data, and checks their sums in batches
 * on two threads (the daemon is idle meanwhile), each reading its records'
 * data with pread through a buffer that stays in the cache. A full restore
 * pays for one more read of the stream than a write of the same VDI, and
 * this halves it.
 */
#define VERIFY_BATCH 64
#define VERIFY_CHUNK (256 * 1024)

struct verify_part {
	struct restore *rs;
	const struct bk_record *recs;
	int nr, first; /* records first, first + 2, ... */
	char *chunk;
	int ret, bad; /* the first failure, at recs[bad] */
	char err[160];
};

static ssize_t pread_fd_fn(void *arg, void *buf, size_t len, uint64_t off)
{
	struct restore *rs = arg;
	ssize_t n;

	do
		n = pread(rs->fd, buf, len, rs->start + (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static int skip_fd_fn(void *arg, size_t len)
{
	struct restore *rs = arg;
	off_t at = lseek(rs->fd, 0, SEEK_CUR);

	if (at < 0)
		return -errno;
	if (at > rs->end || (uint64_t)(rs->end - at) < len)
		return -EINVAL;
	return lseek(rs->fd, (off_t)len, SEEK_CUR) < 0 ? -errno : 0;
}

static void *verify_part_fn(void *arg)
{
	struct verify_part *p = arg;

	p->ret = 0;
	for (int i = p->first; i < p->nr; i += 2) {
		p->ret = bk_record_verify(&p->recs[i], pread_fd_fn, p->rs, p->chunk, VERIFY_CHUNK,
					  p->err, sizeof(p->err));
		if (p->ret) {
			p->bad = i;
			break;
		}
	}
	return NULL;
}

/* the sums of recs[0..nr): EXIT_OK, or the first failure's exit code (said) */
static int verify_batch(struct restore *rs, const struct bk_record *recs, int nr, char *chunks[2])
{
	struct verify_part part[2];
	struct verify_part *bad = NULL;
	pthread_t helper;
	bool threaded;

	for (int i = 0; i < 2; i++)
		part[i] = (struct verify_part){
			.rs = rs, .recs = recs, .nr = nr, .first = i, .chunk = chunks[i]
		};
	threaded = nr > 1 && !pthread_create(&helper, NULL, verify_part_fn, &part[1]);
	verify_part_fn(&part[0]);
	if (threaded)
		pthread_join(helper, NULL);
	else
		verify_part_fn(&part[1]);
	for (int i = 0; i < 2; i++)
		if (part[i].ret && (!bad || part[i].bad < bad->bad))
			bad = &part[i];
	if (!bad)
		return EXIT_OK;
	collie_err("refusing the backup stream: %s", bad->err);
	return bad->ret == -EIO ? EXIT_SYSFAIL : EXIT_FAIL;
}

/* pass 1: every record checked; an incremental stream's base objects hashed */
static int verify_stream(struct restore *rs)
{
	bool incr = rs->r.hdr.flags & BK_F_INCREMENTAL;
	uint32_t last_idx = UINT32_MAX;
	struct bk_record rec, *batch = NULL;
	char *chunks[2] = { NULL, NULL };
	int nr = 0, ret, vret;
	uint64_t hash = 0;
	struct stat st;

	if (!fstat(rs->fd, &st) && S_ISREG(st.st_mode) &&
	    !bk_reader_skip_payloads(&rs->r, skip_fd_fn)) {
		rs->end = st.st_size;
		batch = malloc(VERIFY_BATCH * sizeof(*batch));
		chunks[0] = malloc(VERIFY_CHUNK);
		chunks[1] = malloc(VERIFY_CHUNK);
		if (!batch || !chunks[0] || !chunks[1]) {
			collie_err("out of memory");
			ret = EXIT_SYSFAIL;
			goto out;
		}
	}
	while ((ret = bk_reader_next(&rs->r, &rec, rs->buf, rs->obj_size)) == 1) {
		if (rec.unchecked) {
			batch[nr++] = rec;
			if (nr == VERIFY_BATCH) {
				ret = verify_batch(rs, batch, nr, chunks);
				nr = 0;
				if (ret)
					goto out;
			}
		}
		if (!incr)
			continue;
		if (rec.idx == last_idx) {
			if (rec.value == hash)
				continue;
			/* a damaged record says so first, this one included */
			ret = nr ? verify_batch(rs, batch, nr, chunks) : EXIT_OK;
			if (!ret) {
				collie_err("refusing the backup stream: record %u names another "
					   "base object than the records before it",
					   rec.seq);
				ret = EXIT_FAIL;
			}
			goto out;
		}
		/* rs->buf is free again: the reader is done with the record's payload */
		ret = base_hash(rs, rec.idx, &hash);
		if (ret)
			goto out;
		if (hash != rec.value) {
			ret = nr ? verify_batch(rs, batch, nr, chunks) : EXIT_OK;
			if (!ret) {
				collie_err("refusing the backup stream: it was taken from another "
					   "base (object %u of snapshot '%s' differs from the "
					   "stream's base)",
					   rec.idx, opts.snapshot);
				ret = EXIT_FAIL;
			}
			goto out;
		}
		last_idx = rec.idx;
	}
	/* the records before the end, or before a failure: an earlier damage is the one said */
	vret = nr ? verify_batch(rs, batch, nr, chunks) : EXIT_OK;
	if (vret)
		ret = vret;
	else
		ret = ret ? stream_err(rs, ret) : EXIT_OK;
out:
	free(batch);
	free(chunks[0]);
	free(chunks[1]);
	return ret;
}

static bool busy_on(const struct vdi_io *io, uint32_t idx)
{
	for (int i = 0; i < IO_NR_SLOTS; i++)
		if (io->slots[i].busy && io->slots[i].idx == idx)
			return true;
	return false;
}

/*
 * Place record rec (its payload in s->buf) into the VDI: 0 when nothing is
 * to be sent (zeros over a hole, an object released), else the write is
 * issued. A whole object of zeros is released (its entry set to 0).
 */
static int apply_record(struct restore *rs, struct io_slot *s, const struct bk_record *rec,
			struct write_state *st)
{
	struct vdi_io *io = &rs->io;
	uint32_t *entry = &io->inode->data_vdi_id[rec->idx];
	int ret, result;
	struct io_slot *done;

	s->idx = rec->idx;
	s->off = ((uint64_t)rec->idx << io->shift) + rec->offset;
	s->len = rec->length;
	if (rec->type == BK_ZERO) {
		if (!*entry)
			return EXIT_OK;
		if (!rec->offset &&
		    rec->length == obj_len(io->inode->vdi_size, io->shift, rec->idx)) {
			*entry = 0;
			st->min_idx = min_t(uint32_t, st->min_idx, rec->idx);
			st->max_idx = max_t(uint32_t, st->max_idx, rec->idx);
			return EXIT_OK;
		}
		memset(s->buf, 0, rec->length);
	}
	/* a create waits for an earlier one of the same object */
	while (*entry != io->vid && busy_on(io, rec->idx)) {
		ret = vdi_io_recv(io, &done, &result);
		if (ret)
			return ret;
		vdi_io_write_done(io, done, result, st);
	}
	return vdi_io_write_issue(io, s);
}

/* pass 2: every record into the VDI, then the changed part of its data map */
static int apply_stream(struct restore *rs)
{
	struct write_state st = { .min_idx = UINT32_MAX };
	struct vdi_io *io = &rs->io;
	struct bk_record rec;
	struct io_slot *s;
	bool end = false;
	int ret, result;

	for (;;) {
		while (!st.err && !end && (s = vdi_io_free_slot(io))) {
			ret = bk_reader_next(&rs->r, &rec, s->buf, io->obj_size);
			if (ret <= 0) {
				end = true;
				if (ret < 0) /* the file changed since it was checked */
					st.err = stream_err(rs, ret);
				break;
			}
			st.err = apply_record(rs, s, &rec, &st);
		}
		if (!io->nr_busy)
			break;
		ret = vdi_io_recv(io, &s, &result);
		if (ret)
			return ret; /* the connection is gone: the inode can't be updated */
		vdi_io_write_done(io, s, result, &st);
	}
	ret = st.err;
	if (st.min_idx <= st.max_idx) {
		int r = vdi_io_write_inode_slice(io, st.min_idx, st.max_idx);

		ret = ret ?: r;
	}
	return ret;
}

/*
 * An incremental stream's target: snapshot -s BASE of NAME with the
 * stream's object size and base size, and the working VDI still that
 * snapshot's content (the same data map, no smaller), locked by no client.
 */
static int check_base(struct restore *rs, const char *name)
{
	const struct bk_header *h = &rs->r.hdr;
	const struct sd_inode *cur = rs->io.inode;
	bool locked;
	int ret;

	ret = vdi_lookup(name, opts.snapshot, &rs->base_vid);
	if (ret)
		return ret;
	rs->base = vdi_load_inode(rs->base_vid, SD_INODE_SIZE, &ret);
	if (!rs->base)
		return ret;
	if (!vdi_is_snapshot(rs->base)) {
		collie_err("'%s' names the working vdi '%s', not a snapshot", opts.snapshot, name);
		return EXIT_FAIL;
	}
	if (rs->base->block_size_shift != h->block_size_shift) {
		collie_err("refusing the backup stream: its objects are of %llu bytes, those of "
			   "vdi '%s' of %llu",
			   (unsigned long long)rs->obj_size, name,
			   (unsigned long long)(UINT64_C(1) << rs->base->block_size_shift));
		return EXIT_FAIL;
	}
	if (rs->base->vdi_size != h->from_size) {
		collie_err("refusing the backup stream: it was taken from a base of %llu bytes, "
			   "snapshot '%s' of vdi '%s' has %llu",
			   (unsigned long long)h->from_size, opts.snapshot, name,
			   (unsigned long long)rs->base->vdi_size);
		return EXIT_FAIL;
	}
	if (cur->vdi_size < rs->base->vdi_size ||
	    memcmp(cur->data_vdi_id, rs->base->data_vdi_id, sizeof(cur->data_vdi_id))) {
		collie_err("vdi '%s' has changed since snapshot '%s': roll it back first "
			   "(collie vdi rollback %s -s %s)",
			   name, opts.snapshot, name, opts.snapshot);
		return EXIT_FAIL;
	}
	ret = vdi_is_locked(rs->io.vid, &locked);
	if (!ret && locked) {
		collie_err("vdi '%s' is locked by a client: restore it once the client is gone",
			   name);
		ret = EXIT_FAIL;
	}
	return ret;
}

/* an incremental stream: checks, the whole stream verified, then applied */
static int restore_incremental(struct restore *rs, const char *name)
{
	const struct bk_header *h = &rs->r.hdr;
	int ret;

	if (!opts.snapshot)
		return collie_usage_err("an incremental backup (from snapshot '%s', id %u) is "
					"applied on its base: name it with -s BASE",
					h->from_tag, h->from_snap_id);
	ret = vdi_io_open(&rs->io, name, NULL);
	if (!ret)
		ret = check_base(rs, name);
	if (!ret)
		ret = verify_stream(rs);
	if (!ret)
		ret = stream_rewind(rs);
	if (ret)
		return ret;
	if (h->vdi_size > rs->io.inode->vdi_size) {
		rs->io.inode->vdi_size = h->vdi_size;
		ret = vdi_write_inode(rs->io.inode, offsetof(struct sd_inode, vdi_size),
				      sizeof(rs->io.inode->vdi_size));
		if (ret)
			return ret;
	}
	return apply_stream(rs);
}

/* a full stream: verified, then a new VDI made from it (deleted again on failure) */
static int restore_full(struct restore *rs, const char *name)
{
	const struct bk_header *h = &rs->r.hdr;
	uint32_t vid;
	int ret;

	if (opts.snapshot)
		return collie_usage_err("a full backup makes a new vdi: no -s");
	ret = vdi_get_info(name, 0, "", &vid);
	if (ret < 0)
		return EXIT_SYSFAIL;
	if (ret == SD_RES_SUCCESS) {
		collie_err("vdi '%s' already exists (a full backup makes a new vdi)", name);
		return EXIT_EXISTS;
	}
	ret = verify_stream(rs);
	if (!ret)
		ret = stream_rewind(rs);
	if (ret)
		return ret;
	ret = vdi_new(name, h->vdi_size, 0, opts.has_copies ? opts.copies : 0,
		      opts.has_copies ? opts.copy_policy : 0, h->block_size_shift, 0, &vid);
	if (ret)
		return vdi_new_err("restore", name, ret);
	ret = vdi_io_open(&rs->io, name, NULL);
	if (!ret)
		ret = apply_stream(rs);
	if (ret && vdi_del(name, vid))
		collie_err("the partly restored vdi '%s' is left: delete it", name);
	return ret;
}

int vdi_restore(int argc, char **argv)
{
	const char *name = argv[0];
	struct restore rs = { .fd = -1 };
	int ret;

	memset(&rs.io, 0, sizeof(rs.io));
	rs.io.fd = -1;
	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (isatty(STDIN_FILENO))
		return collie_usage_err("the backup stream comes on stdin: redirect it");
	ret = open_stream(&rs);
	if (!ret)
		ret = stream_rewind(&rs);
	if (ret)
		goto out;
	rs.obj_size = rs.r.obj_size;
	rs.buf = malloc(rs.obj_size);
	if (!rs.buf) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
		goto out;
	}
	if (rs.r.hdr.flags & BK_F_INCREMENTAL)
		ret = restore_incremental(&rs, name);
	else
		ret = restore_full(&rs, name);
out:
	bk_reader_close(&rs.r);
	vdi_io_close(&rs.io);
	if (rs.fd > STDIN_FILENO)
		close(rs.fd);
	free(rs.base);
	free(rs.buf);
	return ret;
}
