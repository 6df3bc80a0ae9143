/*
 * collie vdi read / vdi write: VDI I/O exactly as QEMU's client does it.
 *
 * The VDI is resolved with GET_VDI_INFO and its whole inode read. Requests
 * are split at object boundaries and go out on one connection, a few at a
 * time (IO_NR_SLOTS) with distinct ids; replies are matched by id and may
 * come back in any order.
 *
 * Reads: data_vdi_id[idx] == 0 is a hole, zeros with no request; otherwise
 * READ_OBJ of oid(data_vdi_id[idx], idx). Output stays in order: a ring of
 * slots is written out from its head.
 *
 * Writes: data_vdi_id[idx] == 0 -> CREATE_AND_WRITE_OBJ of oid(vid, idx);
 * another vid -> the same with SD_FLAG_CMD_COW and cow_oid = oid(that, idx);
 * own vid -> WRITE_OBJ. Then one WRITE_OBJ of the changed slice of
 * data_vdi_id into the inode, also after a failure, for the objects whose
 * create succeeded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collie.h"
#include "vdi_io.h"

int vdi_io_open(struct vdi_io *io, const char *name, const char *snap)
{
	int ret;

	memset(io, 0, sizeof(*io));
	io->name = name;
	io->fd = -1;
	ret = vdi_check_name(name);
	if (ret)
		return ret;
	ret = vdi_lookup(name, snap, &io->vid);
	if (ret)
		return ret;
	io->inode = vdi_load_inode(io->vid, sizeof(*io->inode), &ret);
	if (!io->inode)
		return ret;
	io->shift = io->inode->block_size_shift;
	if (io->shift < SD_MIN_BLOCK_SIZE_SHIFT || io->shift > SD_MAX_BLOCK_SIZE_SHIFT) {
		collie_err("vdi '%s' has an unusable object size (block_size_shift %u)", name,
			   io->shift);
		return EXIT_FAIL;
	}
	return vdi_io_connect(io, name, io->shift);
}

int vdi_io_connect(struct vdi_io *io, const char *what, uint8_t shift)
{
	io->name = what;
	io->fd = -1;
	io->shift = shift;
	io->obj_size = UINT64_C(1) << io->shift;
	for (int i = 0; i < IO_NR_SLOTS; i++) {
		io->slots[i].buf = malloc(io->obj_size);
		if (!io->slots[i].buf) {
			collie_err("out of memory");
			return EXIT_SYSFAIL;
		}
	}
	io->fd = collie_connect(opts.addr, opts.port);
	return io->fd < 0 ? EXIT_SYSFAIL : EXIT_OK;
}

void vdi_io_close(struct vdi_io *io)
{
	if (io->fd >= 0)
		close(io->fd);
	for (int i = 0; i < IO_NR_SLOTS; i++)
		free(io->slots[i].buf);
	free(io->inode);
}

static int io_net_err(struct vdi_io *io, int err)
{
	collie_err("i/o on vdi '%s' failed: %s", io->name,
		   err == -ECONNRESET ? "connection closed by the daemon" : strerror(-err));
	return EXIT_SYSFAIL;
}

/*
 * Send one object request for slot s (s->len bytes at offset inside the
 * object); data is the payload of a write, NULL for a read.
 */
int vdi_io_send(struct vdi_io *io, struct io_slot *s, uint8_t opcode, uint16_t flags, uint64_t oid,
		uint64_t cow_oid, uint64_t offset, const void *data)
{
	struct sd_req hdr;
	int ret;

	collie_init_req(&hdr, opcode);
	hdr.flags = flags;
	hdr.id = s->id = io->next_id++;
	hdr.data_length = s->len;
	hdr.obj.oid = oid;
	hdr.obj.cow_oid = cow_oid;
	hdr.obj.copies = io->inode ? io->inode->nr_copies : 0;
	hdr.obj.offset = offset;
	ret = sd_write_full(io->fd, &hdr, sizeof(hdr));
	if (!ret && data)
		ret = sd_write_full(io->fd, data, s->len);
	if (ret)
		return io_net_err(io, ret);
	s->is_read = !data;
	s->busy = true;
	io->nr_busy++;
	return EXIT_OK;
}

static int io_discard(struct vdi_io *io, uint32_t len)
{
	char sink[4096];
	int ret;

	while (len) {
		uint32_t n = min_t(uint32_t, len, sizeof(sink));

		ret = sd_read_full(io->fd, sink, n);
		if (ret)
			return ret;
		len -= n;
	}
	return 0;
}

/*
 * Read one reply. Returns EXIT_OK with *done set to its slot and *result to
 * its result, or an exit code on a transport or protocol failure. A read
 * reply's payload lands in the slot's buffer (zero-filled when short).
 */
int vdi_io_recv(struct vdi_io *io, struct io_slot **done, int *result)
{
	struct sd_rsp rsp;
	struct io_slot *s = NULL;
	uint32_t len = 0;
	int ret;

	ret = sd_read_full(io->fd, &rsp, sizeof(rsp));
	if (ret)
		return io_net_err(io, ret);
	for (int i = 0; i < IO_NR_SLOTS; i++)
		if (io->slots[i].busy && io->slots[i].id == rsp.id)
			s = &io->slots[i];
	if (!s) {
		collie_err("i/o on vdi '%s' failed: reply with unknown id %u", io->name, rsp.id);
		return EXIT_SYSFAIL;
	}
	if (s->is_read && rsp.result == SD_RES_SUCCESS)
		len = min_t(uint32_t, rsp.data_length, s->len);
	ret = sd_read_full(io->fd, s->buf, len);
	if (!ret)
		ret = io_discard(io, rsp.data_length - len);
	if (ret)
		return io_net_err(io, ret);
	if (s->is_read && len < s->len)
		memset(s->buf + len, 0, s->len - len);
	s->busy = false;
	io->nr_busy--;
	*done = s;
	*result = (int)rsp.result;
	return EXIT_OK;
}

static int parse_range(int argc, char **argv, uint64_t *off, uint64_t *len, bool *has_len)
{
	*off = 0;
	*has_len = false;
	if (argc > 1 && sd_parse_size(argv[1], off))
		return collie_usage_err("invalid offset '%s'", argv[1]);
	if (argc > 2) {
		if (sd_parse_size(argv[2], len))
			return collie_usage_err("invalid length '%s'", argv[2]);
		*has_len = true;
	}
	return EXIT_OK;
}

static int check_range(struct vdi_io *io, uint64_t off, uint64_t len)
{
	char size[32];

	if (off <= io->inode->vdi_size && len <= io->inode->vdi_size - off)
		return EXIT_OK;
	sd_size_to_str(io->inode->vdi_size, size, sizeof(size));
	collie_err("range %llu+%llu is past the end of vdi '%s' (%llu bytes, %s)",
		   (unsigned long long)off, (unsigned long long)len, io->name,
		   (unsigned long long)io->inode->vdi_size, size);
	return EXIT_FAIL;
}

/* fill the next read slot from pos; a hole is ready at once */
static int read_issue(struct vdi_io *io, struct io_slot *s, uint64_t pos, uint64_t end)
{
	uint64_t in_obj = pos & (io->obj_size - 1);
	uint32_t owner;

	s->off = pos;
	s->idx = (uint32_t)(pos >> io->shift);
	s->len = (uint32_t)min_t(uint64_t, io->obj_size - in_obj, end - pos);
	s->create = false;
	s->ready = false;
	owner = io->inode->data_vdi_id[s->idx];
	if (!owner) {
		memset(s->buf, 0, s->len);
		s->ready = true;
		return EXIT_OK;
	}
	return vdi_io_send(io, s, SD_OP_READ_OBJ, 0, vid_to_data_oid(owner, s->idx), 0, in_obj,
			   NULL);
}

int vdi_read(int argc, char **argv)
{
	struct vdi_io io;
	struct collie_progress progress = { .on = false };
	uint64_t off, len, pos, end, out = 0;
	unsigned int head = 0, nr = 0;
	bool has_len;
	int ret;

	ret = parse_range(argc, argv, &off, &len, &has_len);
	if (ret)
		return ret;
	ret = vdi_io_open(&io, argv[0], opts.snapshot);
	if (ret)
		goto out_close;
	if (!has_len)
		len = off <= io.inode->vdi_size ? io.inode->vdi_size - off : 0;
	ret = check_range(&io, off, len);
	if (ret)
		goto out_close;
	collie_progress_start(&progress, "vdi read", len, true);
	for (pos = off, end = off + len; pos < end || nr;) {
		struct io_slot *s;
		int result;

		while (pos < end && nr < IO_NR_SLOTS) {
			s = &io.slots[(head + nr) % IO_NR_SLOTS];
			ret = read_issue(&io, s, pos, end);
			if (ret)
				goto out_close;
			pos += s->len;
			nr++;
		}
		s = &io.slots[head];
		if (s->ready) {
			ret = collie_write_stdout(s->buf, s->len);
			if (ret)
				goto out_close;
			out += s->len;
			collie_progress_update(&progress, out);
			head = (head + 1) % IO_NR_SLOTS;
			nr--;
			continue;
		}
		ret = vdi_io_recv(&io, &s, &result);
		if (ret)
			goto out_close;
		if (result != SD_RES_SUCCESS) {
			collie_err("failed to read vdi '%s' at offset %llu: %s", io.name,
				   (unsigned long long)s->off, sd_strerror(result));
			ret = collie_exit_code(result);
			goto out_close;
		}
		s->ready = true;
	}
	ret = EXIT_OK;
out_close:
	collie_progress_end(&progress);
	vdi_io_close(&io);
	return ret;
}

/* read up to len bytes from fd, stopping only at end of input: count or -errno */
static ssize_t read_upto(int fd, char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);

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

int vdi_io_write_issue(struct vdi_io *io, struct io_slot *s)
{
	uint32_t owner = io->inode->data_vdi_id[s->idx];
	uint64_t oid = vid_to_data_oid(io->vid, s->idx);
	uint64_t in_obj = s->off & (io->obj_size - 1);
	uint64_t cow_oid = 0;
	uint16_t flags = SD_FLAG_CMD_WRITE;

	s->create = owner != io->vid;
	if (!s->create)
		return vdi_io_send(io, s, SD_OP_WRITE_OBJ, flags, oid, 0, in_obj, s->buf);
	if (owner) {
		flags |= SD_FLAG_CMD_COW;
		cow_oid = vid_to_data_oid(owner, s->idx);
	}
	return vdi_io_send(io, s, SD_OP_CREATE_AND_WRITE_OBJ, flags, oid, cow_oid, in_obj, s->buf);
}

struct io_slot *vdi_io_free_slot(struct vdi_io *io)
{
	for (int i = 0; i < IO_NR_SLOTS; i++)
		if (!io->slots[i].busy)
			return &io->slots[i];
	return NULL;
}

/* the input, if it is a regular file, must fit: say so before writing */
static int check_input_size(struct vdi_io *io, uint64_t off)
{
	struct stat st;
	off_t cur = lseek(STDIN_FILENO, 0, SEEK_CUR);

	if (fstat(STDIN_FILENO, &st) || !S_ISREG(st.st_mode) || cur < 0 || st.st_size < cur)
		return EXIT_OK;
	return check_range(io, off, (uint64_t)(st.st_size - cur));
}

/* is there more input? used when the VDI's end is reached without a LEN */
static int check_input_end(struct vdi_io *io)
{
	char c;
	ssize_t n = read_upto(STDIN_FILENO, &c, 1);

	if (n < 0) {
		collie_err("failed to read stdin: %s", strerror((int)-n));
		return EXIT_SYSFAIL;
	}
	if (n == 0)
		return EXIT_OK;
	collie_err("input goes past the end of vdi '%s' (%llu bytes)", io->name,
		   (unsigned long long)io->inode->vdi_size);
	return EXIT_FAIL;
}

/* the changed slice of data_vdi_id back into the inode, on the I/O connection */
int vdi_io_write_inode_slice(struct vdi_io *io, uint32_t min_idx, uint32_t max_idx)
{
	struct io_slot *s = vdi_io_free_slot(io), *done;
	uint64_t offset;
	int ret, result;

	if (!s) { /* the callers drain every slot first */
		collie_err("internal error: no free I/O slot to update the inode of vdi '%s'",
			   io->name);
		return EXIT_SYSFAIL;
	}
	s->len = 4 * (max_idx - min_idx + 1);
	s->create = false;
	offset = SD_INODE_HEADER_SIZE + 4 * (uint64_t)min_idx;
	ret = vdi_io_send(io, s, SD_OP_WRITE_OBJ, SD_FLAG_CMD_WRITE, vid_to_vdi_oid(io->vid), 0,
			  offset, &io->inode->data_vdi_id[min_idx]);
	if (!ret)
		ret = vdi_io_recv(io, &done, &result);
	if (!ret && result != SD_RES_SUCCESS) {
		collie_err("failed to update the inode of vdi '%s': %s", io->name,
			   sd_strerror(result));
		ret = collie_exit_code(result);
	}
	return ret;
}

/* read the next piece of stdin into s and send it; sets st->eof at the end */
static int write_next(struct vdi_io *io, struct io_slot *s, struct write_state *st)
{
	uint64_t in_obj = st->pos & (io->obj_size - 1);
	uint64_t want = min_t(uint64_t, io->obj_size - in_obj, st->end - st->pos);
	ssize_t n;

	n = read_upto(STDIN_FILENO, s->buf, want);
	if (n < 0) {
		collie_err("failed to read stdin: %s", strerror((int)-n));
		return EXIT_SYSFAIL;
	}
	if ((uint64_t)n < want)
		st->eof = true;
	if (n == 0)
		return EXIT_OK;
	s->off = st->pos;
	s->idx = (uint32_t)(st->pos >> io->shift);
	s->len = (uint32_t)n;
	st->pos += (uint64_t)n;
	return vdi_io_write_issue(io, s);
}

void vdi_io_write_done(struct vdi_io *io, struct io_slot *s, int result, struct write_state *st)
{
	if (result == SD_RES_SUCCESS)
		st->acked += s->len;
	if (result != SD_RES_SUCCESS) {
		if (!st->err) {
			collie_err("failed to write vdi '%s' at offset %llu: %s", io->name,
				   (unsigned long long)s->off, sd_strerror(result));
			st->err = collie_exit_code(result);
		}
		return;
	}
	if (!s->create)
		return;
	io->inode->data_vdi_id[s->idx] = io->vid;
	st->min_idx = min_t(uint32_t, st->min_idx, s->idx);
	st->max_idx = max_t(uint32_t, st->max_idx, s->idx);
}

/* what vdi write will send, if known: LEN, or what a regular file holds */
static uint64_t write_total(const struct vdi_io *io, uint64_t off, uint64_t len, bool has_len)
{
	struct stat st;
	off_t cur;

	if (has_len)
		return len;
	cur = lseek(STDIN_FILENO, 0, SEEK_CUR);
	if (fstat(STDIN_FILENO, &st) || !S_ISREG(st.st_mode) || cur < 0 || st.st_size < cur)
		return 0;
	return min_t(uint64_t, (uint64_t)(st.st_size - cur), io->inode->vdi_size - off);
}

int vdi_write(int argc, char **argv)
{
	struct vdi_io io;
	struct write_state st = { .min_idx = UINT32_MAX };
	struct collie_progress progress = { .on = false };
	struct io_slot *s;
	uint64_t off, len;
	bool has_len;
	int ret, result;

	ret = parse_range(argc, argv, &off, &len, &has_len);
	if (ret)
		return ret;
	ret = vdi_io_open(&io, argv[0], NULL);
	if (ret)
		goto out_close;
	if (has_len)
		ret = check_range(&io, off, len);
	else
		ret = check_input_size(&io, off) ?: check_range(&io, off, 0);
	if (ret)
		goto out_close;
	st.pos = off;
	st.end = has_len ? off + len : io.inode->vdi_size;
	collie_progress_start(&progress, "vdi write", write_total(&io, off, len, has_len), true);
	for (;;) {
		while (!st.err && !st.eof && st.pos < st.end && (s = vdi_io_free_slot(&io))) {
			st.err = write_next(&io, s, &st);
		}
		if (!io.nr_busy)
			break;
		ret = vdi_io_recv(&io, &s, &result);
		if (ret)
			goto out_close; /* the connection is gone: the inode can't be updated */
		vdi_io_write_done(&io, s, result, &st);
		collie_progress_update(&progress, st.acked);
	}
	if (!st.err && !has_len && !st.eof && st.pos == st.end)
		st.err = check_input_end(&io);
	ret = st.err;
	if (st.min_idx <= st.max_idx) {
		int r = vdi_io_write_inode_slice(&io, st.min_idx, st.max_idx);

		ret = ret ?: r;
	}
out_close:
	collie_progress_end(&progress);
	vdi_io_close(&io);
	return ret;
}
