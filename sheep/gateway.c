/*
 * Client object I/O: the gateway. Any sheep accepts a client's object
 * request and forwards it to the replica nodes that the ring of the current
 * epoch names for the oid (the local replica goes straight to the store).
 *
 * - Writes go to every replica at once (peer_fanout_work: the request goes
 *   to every remote replica together, from this thread, and the local copy
 *   is written while the sends wait on their sockets and while the nodes
 *   write theirs), and succeed only when every replica acknowledged. With
 *   fewer live nodes than copies a write fails with SD_RES_HALT:
 *   redundancy is never dropped silently.
 * - Reads go to one replica (the local one first) and fail over to the next,
 *   and finally to any node, since without recovery a replica of the new
 *   ring may not hold the object yet.
 * - A peer on another epoch, or an unreachable peer, makes the gateway retry
 *   on the newest ring until GW_RETRY_MS has passed since the last new
 *   epoch it saw (a stopped peer is evicted after the heartbeat timeout).
 * - A COW create reads the whole source object through the gateway, applies
 *   the write to it and sends the result as a plain create: the source's
 *   replicas need not be the new object's.
 * - A discard (a write that zeroes entries of a VDI's own data map) removes
 *   the objects it unmaps, so that a later create starts from zeros.
 *
 * Runs on io workers (client requests) and on the cluster worker (inodes of
 * ordered VDI operations); every request to a peer goes through peer_io.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inode.h"
#include "sheep_priv.h"
#include "store/store.h"

#define GW_RETRY_MS 10000
#define GW_RETRY_SLEEP_MS 50

struct gw_io {
	uint8_t opcode; /* SD_OP_*_PEER */
	uint64_t oid;
	void *buf;
	uint32_t len;
	uint64_t off;
	bool sync;
	int copies;
	/* a create whose payload is a whole COW object: the client's write in it */
	bool cow;
	uint32_t wr_off, wr_len;
};

static bool retryable(int ret)
{
	return ret == SD_RES_OLD_NODE_VER || ret == SD_RES_NEW_NODE_VER || ret == SD_RES_NETWORK;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int local_io(const struct gw_io *io)
{
	switch (io->opcode) {
	case SD_OP_READ_PEER:
		return sd_store->read(io->oid, io->buf, io->len, io->off);
	case SD_OP_WRITE_PEER:
		return replica_write(io->oid, io->buf, io->len, io->off, io->sync);
	case SD_OP_CREATE_AND_WRITE_PEER:
		if (io->cow)
			return replica_create_and_write(io->oid, io->buf, io->len, io->off,
							io->wr_off, io->wr_len, io->sync);
		return replica_create_and_write(io->oid, io->buf, io->len, io->off, io->off,
						io->len, io->sync);
	case SD_OP_REMOVE_PEER:
		return sd_store->remove(io->oid);
	default:
		return SD_RES_INVALID_PARMS;
	}
}

static void make_peer_req(struct sd_req *rq, const struct gw_io *io, uint32_t epoch)
{
	memset(rq, 0, sizeof(*rq));
	rq->proto_ver = SD_SHEEP_PROTO_VER;
	rq->opcode = io->opcode;
	rq->epoch = epoch;
	rq->data_length = io->opcode == SD_OP_REMOVE_PEER ? 0 : io->len;
	if (io->opcode == SD_OP_WRITE_PEER || io->opcode == SD_OP_CREATE_AND_WRITE_PEER)
		rq->flags = SD_FLAG_CMD_WRITE;
	if (!io->sync)
		rq->flags |= SD_FLAG_CMD_CACHE;
	rq->obj.oid = io->oid;
	rq->obj.copies = (uint8_t)io->copies;
	rq->obj.offset = io->off;
	if (io->cow) {
		rq->flags |= SD_FLAG_CMD_COW;
		rq->create.wr_offset = io->wr_off;
		rq->create.wr_length = io->wr_len;
	}
}

/* one request to one remote node */
static int remote_io(const struct epoch_ring *er, int node, const struct gw_io *io)
{
	struct peer_call c = { .nid = &er->ring.nodes[node].nid };
	struct sd_req rq;

	if (io->opcode == SD_OP_READ_PEER) {
		c.rdata = io->buf;
		c.rlen = io->len;
	}
	make_peer_req(&rq, io, er->epoch);
	peer_fanout(&rq, io->buf, &c, 1);
	return c.result;
}

/* read from one replica (this node's first), failing over; then from any node that has it */
static int read_once(const struct epoch_ring *er, const struct gw_io *io)
{
	struct peer_iter it;
	int node, ret = SD_RES_NO_OBJ;

	if (!peer_iter_init(&it, er, io->oid, io->copies, true, 0))
		return SD_RES_HALT;
	while ((node = peer_iter_next(&it)) >= 0) {
		int r = node == er->local_idx ? local_io(io) : remote_io(er, node, io);

		if (r == SD_RES_SUCCESS)
			return r;
		/* an epoch mismatch is worth a retry on a new ring */
		if (retryable(r) || ret == SD_RES_NO_OBJ)
			ret = r;
	}
	return ret;
}

/*
 * The local copy of a write, as the fan-out's work (peer_fanout_work). A
 * write without the sync flag goes in slices of LOCAL_SLICE, one whenever
 * the sockets to the remote replicas would block, so that the sends go on
 * between them (each slice is buffered, none flushed: a later flush makes
 * them durable with the rest). A durable write stays one write (the
 * store's O_DIRECT|O_DSYNC where aligned; several would each be a flush),
 * and so does a create (an object appears whole or not at all): it runs
 * once every remote replica has its request, while they write theirs.
 */
#define LOCAL_SLICE (512U << 10)

struct local_part {
	const struct gw_io *io;
	uint32_t done;
	int ret;
};

static bool sliced(const struct gw_io *io)
{
	return io->opcode == SD_OP_WRITE_PEER && !io->sync && io->len > LOCAL_SLICE;
}

static bool local_step(void *arg)
{
	struct local_part *l = arg;
	const struct gw_io *io = l->io;
	uint32_t n;

	if (!sliced(io)) {
		l->ret = local_io(io);
		return false;
	}
	n = min_t(uint32_t, io->len - l->done, LOCAL_SLICE);
	l->ret = replica_write(io->oid, (char *)io->buf + l->done, n, io->off + l->done, false);
	l->done += n;
	return l->ret == SD_RES_SUCCESS && l->done < io->len;
}

/*
 * Write to every replica at once: the request goes out to the remote ones
 * (all of them together), the local copy is written while the sockets
 * wait and while the nodes write theirs, and their answers are gathered.
 * A write takes as long as its slowest replica, not their sum.
 */
static int write_once(const struct epoch_ring *er, const struct gw_io *io)
{
	int idx[SD_MAX_NODES];
	int n = ring_map(&er->ring, io->oid, io->copies, idx);
	int ret = SD_RES_SUCCESS, nr = 0, r;
	struct peer_call calls[SD_MAX_COPIES];
	struct local_part l = { .io = io, .ret = SD_RES_SUCCESS };
	struct peer_work w = { local_step, &l, sliced(io) };
	bool local = false;
	struct sd_req rq;

	if (n < io->copies)
		return SD_RES_HALT;
	make_peer_req(&rq, io, er->epoch);
	for (int i = 0; i < n && nr < SD_MAX_COPIES; i++) {
		if (idx[i] == er->local_idx)
			local = true;
		else
			calls[nr++] = (struct peer_call){ .nid = &er->ring.nodes[idx[i]].nid };
	}
	peer_fanout_work(&rq, io->buf, calls, nr, local ? &w : NULL);
	if (l.ret != SD_RES_SUCCESS)
		ret = l.ret;
	for (int i = 0; i < nr; i++) {
		r = calls[i].result;
		/* removing what a replica does not have is no failure */
		if (io->opcode == SD_OP_REMOVE_PEER && r == SD_RES_NO_OBJ)
			r = SD_RES_SUCCESS;
		if (r != SD_RES_SUCCESS && !retryable(ret))
			ret = r;
	}
	return ret;
}

/* the copies of oid: the VDI's when copies is 0 or less, else the cluster's */
static int io_copies(uint64_t oid, int copies)
{
	if (copies <= 0)
		copies = vdi_copies(oid_to_vid(oid));
	return copies > 0 ? copies : group_copies();
}

static int do_io(struct gw_io *io)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)GW_RETRY_MS * 1000000;
	uint32_t last_epoch = 0;
	int ret;

	io->copies = io_copies(io->oid, io->copies);
	for (;;) {
		struct epoch_ring *er = group_ring_get();

		if (!er)
			return SD_RES_NO_MEM;
		if (io->opcode == SD_OP_READ_PEER)
			ret = read_once(er, io);
		else
			ret = write_once(er, io);
		/* a new epoch (a node left or came back): the wait starts again */
		if (last_epoch && er->epoch != last_epoch)
			deadline = sd_now_ns() + (uint64_t)GW_RETRY_MS * 1000000;
		last_epoch = er->epoch;
		group_ring_put(er);
		/* stopping: the peers' sockets are cut, retrying cannot help */
		if (!retryable(ret) || sd_now_ns() > deadline || sys.shutting_down)
			break;
		sleep_ms(GW_RETRY_SLEEP_MS);
	}
	if (ret != SD_RES_SUCCESS)
		sd_debug("%016" PRIx64 " op 0x%02x epoch %" PRIu32 ": %s", io->oid, io->opcode,
			 last_epoch, sd_strerror(ret));
	if (ret == SD_RES_NETWORK || ret == SD_RES_OLD_NODE_VER || ret == SD_RES_NEW_NODE_VER)
		ret = SD_RES_EIO; /* clients know nothing of peers */
	return ret;
}

int gateway_obj_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, int copies)
{
	struct gw_io io = { SD_OP_READ_PEER, oid, buf, len, off, true, copies };

	return do_io(&io);
}

int gateway_obj_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool create,
		      int copies)
{
	uint8_t op = create ? SD_OP_CREATE_AND_WRITE_PEER : SD_OP_WRITE_PEER;
	struct gw_io io = { op, oid, (void *)buf, len, off, true, copies };

	return do_io(&io);
}

int gateway_obj_remove(uint64_t oid, int copies)
{
	struct gw_io io = { SD_OP_REMOVE_PEER, oid, NULL, 0, 0, true, copies };

	return do_io(&io);
}

/*
 * Resolve once what a client's object request needs of its VDI (attr: the
 * object size, the copies, whether the data is frozen) and check the
 * request against it. A VDI that another node just created may not be
 * applied here yet: a write waits for it a little. A read of an object of
 * a VDI unknown here may be of any object size. SD_RES_*.
 */
static int check_object(const struct sd_req *rq, bool write, struct vdi_attr *attr)
{
	uint64_t oid = rq->obj.oid, size;
	int ret = vdi_get_attr(oid_to_vid(oid), attr);

	for (int i = 0; ret == SD_RES_NO_VDI && write && i < 100; i++) {
		sleep_ms(10);
		ret = vdi_get_attr(oid_to_vid(oid), attr);
	}
	if (ret && write)
		return ret;
	if (ret) {
		*attr = (struct vdi_attr){ .shift = SD_MAX_BLOCK_SIZE_SHIFT };
	} else if (!is_vdi_obj(oid) &&
		   (attr->shift < SD_MIN_BLOCK_SIZE_SHIFT || attr->shift > SD_MAX_BLOCK_SIZE_SHIFT)) {
		sd_err("vid %06" PRIx32 " has an unusable object size (shift %u)", oid_to_vid(oid),
		       attr->shift);
		return SD_RES_EIO;
	}
	size = is_vdi_obj(oid) ? SD_INODE_SIZE : (UINT64_C(1) << attr->shift);
	if (rq->obj.offset + rq->data_length > size)
		return SD_RES_INVALID_PARMS;
	/* no data object lies past the VDI's end (a size grows, never shrinks) */
	if (!ret && is_data_obj(oid) && ((uint64_t)oid_to_idx(oid) << attr->shift) >= attr->size)
		return SD_RES_INVALID_PARMS;
	/*
	 * a snapshot's data is frozen, and so is its inode's map (the header
	 * stays inode.c's to check): QEMU re-resolves on READONLY
	 */
	if (write && attr->snapshot &&
	    (!is_vdi_obj(oid) || rq->obj.offset + rq->data_length > SD_INODE_HEADER_SIZE))
		return SD_RES_READONLY;
	return SD_RES_SUCCESS;
}

static bool is_sync(const struct sd_req *rq)
{
	return !(rq->flags & SD_FLAG_CMD_CACHE);
}

int gateway_read_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct gw_io io = { SD_OP_READ_PEER, rq->obj.oid, req->data, rq->data_length,
			    rq->obj.offset, true, 0 };
	struct vdi_attr attr;
	int ret = check_object(rq, false, &attr);

	if (ret)
		return ret;
	io.copies = attr.nr_copies;
	ret = do_io(&io);
	if (ret == SD_RES_SUCCESS)
		req->rp.data_length = rq->data_length;
	return ret;
}

/*
 * A small read that this node's copy serves from memory, on the main
 * thread (the op's try_inline: request.c calls it before it would queue
 * the read): the replica that read_once tries first is this node, and the
 * store has the bytes in its page cache (read_cached: a cached descriptor,
 * no wait for the disk). A worker's wake-up and the main thread's second
 * loop turn for the completion were about 23 us of a 4 KiB read's 57 at
 * queue depth 1 (the profile tracer: wq_queue_at 11 us, done_handler 12).
 * At most GW_INLINE_READ_MAX bytes: the copy holds the loop. True when it
 * answered (req->rp set); false, and the worker's read decides as always,
 * errors included.
 */
#define GW_INLINE_READ_MAX (64U << 10)

bool gateway_read_obj_inline(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct vdi_attr attr;
	struct epoch_ring *er;
	struct peer_iter it;
	bool done = false;

	if (!sd_store->read_cached || rq->data_length > GW_INLINE_READ_MAX ||
	    check_object(rq, false, &attr) != SD_RES_SUCCESS)
		return false;
	er = group_ring_get();
	if (!er)
		return false;
	if (peer_iter_init(&it, er, rq->obj.oid, io_copies(rq->obj.oid, attr.nr_copies), true, 0) &&
	    peer_iter_next(&it) == er->local_idx && er->local_idx >= 0 &&
	    sd_store->read_cached(rq->obj.oid, req->data, rq->data_length, rq->obj.offset)) {
		req->rp.data_length = rq->data_length;
		req->rp.result = SD_RES_SUCCESS;
		done = true;
	}
	group_ring_put(er);
	return done;
}

/*
 * A client's write to an inode's header changes only what QEMU's driver
 * changes (inode.c), checked against the header the replicas hold.
 */
static int check_inode_write(const struct sd_req *rq, const void *data, int copies)
{
	struct sd_inode_header *h;
	int ret;

	if (!is_vdi_obj(rq->obj.oid) || rq->obj.offset >= SD_INODE_HEADER_SIZE)
		return SD_RES_SUCCESS;
	h = malloc(sizeof(*h));
	if (!h)
		return SD_RES_NO_MEM;
	ret = gateway_obj_read(rq->obj.oid, h, SD_INODE_HEADER_SIZE, 0, copies);
	if (ret == SD_RES_SUCCESS)
		ret = inode_check_write(h, rq->obj.offset, data, rq->data_length);
	free(h);
	if (ret == SD_RES_INVALID_PARMS)
		sd_warn("refused a write of %" PRIu32 " bytes at %" PRIu64
			" to the header of vid %06" PRIx32 ": only QEMU's fields may change",
			rq->data_length, rq->obj.offset, oid_to_vid(rq->obj.oid));
	return ret;
}

/*
 * A discard, as QEMU sends it: a write of zeros over entries of the VDI's
 * own data map, the data objects left alone (PROTOCOL.md 9.6). An object
 * that stays behind would break the next write to it: the map says
 * unallocated, so the client creates the object, and a create that finds
 * the object applies as a write of the client's range only (it cannot
 * tell a create after a discard from a second client's racing create,
 * which must not zero the first one's data), leaving the discarded bytes
 * around the new ones. So the objects that such a write unmaps, and that
 * are the VDI's own (not a snapshot's, which another VDI reads), are
 * removed once the map is written, before the client's answer.
 *
 * Before the write: the entries that it zeroes, as they were. NULL when it
 * zeroes none (the common case costs no read); *first: the first entry.
 */
static uint32_t *map_before_discard(const struct sd_req *rq, const void *data,
				    const struct vdi_attr *attr, uint32_t *first, uint32_t *nr)
{
	uint64_t off = rq->obj.offset, end = off + rq->data_length, a, b;
	bool zeroes = false;
	uint32_t *old, e;

	if (!is_vdi_obj(rq->obj.oid) || attr->snapshot || end <= SD_INODE_HEADER_SIZE)
		return NULL;
	/* the whole entries that the write covers: [a, b) */
	a = (max_t(uint64_t, off, SD_INODE_HEADER_SIZE) - SD_INODE_HEADER_SIZE + 3) / 4;
	b = (end - SD_INODE_HEADER_SIZE) / 4;
	for (uint64_t i = a; i < b && !zeroes; i++) {
		memcpy(&e, (const char *)data + (SD_INODE_HEADER_SIZE + i * 4 - off), 4);
		zeroes = !e;
	}
	if (!zeroes)
		return NULL;
	old = malloc((b - a) * 4);
	if (!old)
		return NULL;
	if (gateway_obj_read(rq->obj.oid, old, (uint32_t)(b - a) * 4, SD_INODE_HEADER_SIZE + a * 4,
			     attr->nr_copies) != SD_RES_SUCCESS) {
		free(old);
		return NULL;
	}
	*first = (uint32_t)a;
	*nr = (uint32_t)(b - a);
	return old;
}

/* after the write: remove the VDI's own objects whose entries it zeroed */
static void remove_discarded(const struct sd_req *rq, const void *data, const uint32_t *old,
			     uint32_t first, uint32_t nr, int copies)
{
	uint32_t vid = oid_to_vid(rq->obj.oid), e;

	for (uint32_t i = 0; i < nr; i++) {
		uint64_t at = SD_INODE_HEADER_SIZE + (uint64_t)(first + i) * 4 - rq->obj.offset;
		int ret;

		memcpy(&e, (const char *)data + at, 4);
		if (e || old[i] != vid)
			continue;
		ret = gateway_obj_remove(vid_to_data_oid(vid, first + i), copies);
		if (ret != SD_RES_SUCCESS)
			sd_warn("%016" PRIx64 ": discarded, but not removed: %s",
				vid_to_data_oid(vid, first + i), sd_strerror(ret));
	}
}

int gateway_write_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	struct gw_io io = { SD_OP_WRITE_PEER, rq->obj.oid, req->data, rq->data_length,
			    rq->obj.offset, is_sync(rq), 0 };
	struct vdi_attr attr;
	uint32_t *old, first = 0, nr = 0;
	int ret = check_object(rq, true, &attr);

	if (ret)
		return ret;
	io.copies = attr.nr_copies;
	ret = check_inode_write(rq, req->data, attr.nr_copies);
	if (ret)
		return ret;
	old = map_before_discard(rq, req->data, &attr, &first, &nr);
	/* a header write: request.c broadcasts NOTIFY_VDI_HEADER before the reply */
	ret = do_io(&io);
	if (old && ret == SD_RES_SUCCESS)
		remove_discarded(rq, req->data, old, first, nr, attr.nr_copies);
	free(old);
	return ret;
}

/* COW: the whole source object with the write applied, as one plain create */
static int create_cow(const struct sd_req *rq, void *data, const struct vdi_attr *attr)
{
	uint32_t size = UINT32_C(1) << attr->shift;
	void *buf;
	int ret;

	buf = malloc(size);
	if (!buf)
		return SD_RES_NO_MEM;
	ret = gateway_obj_read(rq->obj.cow_oid, buf, size, 0, 0);
	if (ret == SD_RES_SUCCESS) {
		struct gw_io io = { .opcode = SD_OP_CREATE_AND_WRITE_PEER,
				    .oid = rq->obj.oid,
				    .buf = buf,
				    .len = size,
				    .sync = is_sync(rq),
				    .copies = attr->nr_copies,
				    .cow = true,
				    .wr_off = (uint32_t)rq->obj.offset,
				    .wr_len = rq->data_length };
		memcpy((char *)buf + rq->obj.offset, data, rq->data_length);
		ret = do_io(&io);
	} else {
		ret = SD_RES_BASE_VDI_READ;
	}
	free(buf);
	return ret;
}

int gateway_create_and_write_obj(struct request *req)
{
	const struct sd_req *rq = &req->rq;
	bool cow = rq->flags & SD_FLAG_CMD_COW;
	struct vdi_attr attr;
	int ret;

	/* inodes are made by NEW_VDI only */
	if (is_vdi_obj(rq->obj.oid))
		return SD_RES_INVALID_PARMS;
	/* a COW source is the same data object of another VDI */
	if (cow && (!is_data_obj(rq->obj.oid) || !is_data_obj(rq->obj.cow_oid) ||
		    oid_to_idx(rq->obj.cow_oid) != oid_to_idx(rq->obj.oid)))
		return SD_RES_INVALID_PARMS;
	ret = check_object(rq, true, &attr);
	if (ret)
		return ret;
	if (cow) {
		ret = create_cow(rq, req->data, &attr);
	} else {
		struct gw_io io = { SD_OP_CREATE_AND_WRITE_PEER, rq->obj.oid, req->data,
				    rq->data_length, rq->obj.offset, is_sync(rq),
				    attr.nr_copies };
		ret = do_io(&io);
	}
	return ret;
}

struct flush_part {
	uint64_t oid;
	int ret;
};

static bool flush_step(void *arg)
{
	struct flush_part *fl = arg;

	fl->ret = replica_flush(fl->oid);
	return false;
}

/*
 * Flush here and on every other node of the ring, all at once: the VDI's
 * objects written without sync since its last flush (the oid names the
 * VDI), not every other tenant's dirty pages.
 */
int gateway_flush_vdi(struct request *req)
{
	struct epoch_ring *er = group_ring_get();
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = SD_OP_FLUSH_PEER };
	struct peer_call calls[SD_MAX_NODES];
	struct flush_part fl = { .oid = req->rq.obj.oid };
	struct peer_work w = { flush_step, &fl, false };
	int ret, nr = 0;

	if (!er)
		return replica_flush(req->rq.obj.oid);
	rq.epoch = er->epoch;
	rq.obj.oid = req->rq.obj.oid;
	for (int i = 0; i < er->ring.nr_nodes; i++)
		if (i != er->local_idx)
			calls[nr++] = (struct peer_call){ .nid = &er->ring.nodes[i].nid };
	peer_fanout_work(&rq, NULL, calls, nr, &w);
	ret = fl.ret;
	for (int i = 0; i < nr; i++) {
		int r = calls[i].result;

		/* a dead node has nothing left to flush; one on another epoch neither */
		if (r != SD_RES_SUCCESS && ret == SD_RES_SUCCESS && r != SD_RES_NETWORK &&
		    r != SD_RES_OLD_NODE_VER && r != SD_RES_NEW_NODE_VER)
			ret = r;
	}
	group_ring_put(er);
	return ret;
}
