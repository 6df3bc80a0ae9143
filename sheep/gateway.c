/*
 * Object I/O: the gateway. Any sheep accepts a client's object request
 * (the sheepdog protocol's object ops, obj_ops.c, and NBD, nbd_io.c, both
 * through gateway.h) and forwards it to the replica nodes that the ring of
 * the current epoch names for the oid (the local replica goes straight to
 * the store).
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
 * - A VDI's copies are fenced as the epoch is (ALTER_COPY changes them on
 *   every node in the cluster's order, one node after the other): a
 *   replica refuses a write that names another count than its table's
 *   (SD_RES_COPIES_CHANGED), and the gateway retries, looking its count up
 *   again whenever the table's generation of copies moved since it
 *   resolved it. So no write lands on the holders of the old count once a
 *   node of the new one may have fetched the object (peer.c refuses such a
 *   fetch from a node still on the old count).
 * - A COW create reads the whole source object through the gateway, applies
 *   the write to it and sends the result as a plain create: the source's
 *   replicas need not be the new object's.
 * - A discard (a write that zeroes entries of a VDI's own data map) removes
 *   the objects it unmaps, so that a later create starts from zeros.
 *
 * Runs on io and nbd workers (client requests) and on the cluster worker
 * (inodes of ordered VDI operations); every request to a peer goes
 * through peer_io.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "ec.h"
#include "gateway.h"
#include "gateway_ec.h"
#include "group.h"
#include "peer_io.h"
#include "peer_iter.h"
#include "replica.h"
#include "request.h"
#include "stat.h"
#include "vdi_table.h"
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
	uint32_t gen; /* the table's generation of copies (vdi_attr.gen; 0: the caller's own) */
	/* a create whose payload is a whole COW object: the client's write in it */
	bool cow;
	uint32_t wr_off, wr_len;
};

static bool retryable(int ret)
{
	return ret == SD_RES_OLD_NODE_VER || ret == SD_RES_NEW_NODE_VER || ret == SD_RES_NETWORK ||
	       ret == SD_RES_COPIES_CHANGED;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Before a retry. OLD_NODE_VER: a replica is on a newer epoch than this
 * node's ring, which this node is about to learn: wait until it is
 * published, woken at once (at most GW_RETRY_SLEEP_MS). A replica behind
 * (NEW_NODE_VER) or unreachable: a pause of 1 ms that doubles up to
 * GW_RETRY_SLEEP_MS. So an epoch change costs a client request about the
 * time the nodes take to agree on it, not rounds of a fixed pause.
 * COPIES_CHANGED with a count from the table at generation gen: the same
 * pause, cut short as this node takes a new count (it was the one behind).
 */
static void retry_wait(int ret, uint32_t epoch, uint32_t gen, int *pause_ms)
{
	if (ret == SD_RES_OLD_NODE_VER && group_wait_epoch(epoch, GW_RETRY_SLEEP_MS))
		return;
	if (ret == SD_RES_COPIES_CHANGED && gen) {
		if (vdi_wait_copies_generation(gen, *pause_ms))
			return;
	} else {
		sleep_ms(*pause_ms);
	}
	*pause_ms = min_t(int, *pause_ms * 2, GW_RETRY_SLEEP_MS);
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
		return replica_remove(io->oid);
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
	struct peer_call calls[SD_MAX_NODES];
	struct local_part l = { .io = io, .ret = SD_RES_SUCCESS };
	struct peer_work w = { local_step, &l, sliced(io) };
	bool local = false;
	struct sd_req rq;

	if (n < io->copies)
		return SD_RES_HALT;
	/*
	 * A removal goes to every node: a copy may live on one that the ring
	 * no longer names (recovery has not cleaned it yet), and a live copy
	 * left there would be fetched back.
	 */
	if (io->opcode == SD_OP_REMOVE_PEER)
		for (n = 0; n < er->ring.nr_nodes; n++)
			idx[n] = n;
	make_peer_req(&rq, io, er->epoch);
	for (int i = 0; i < n && nr < SD_MAX_NODES; i++) {
		if (idx[i] == er->local_idx)
			local = true;
		else
			calls[nr++] = (struct peer_call){ .nid = &er->ring.nodes[idx[i]].nid };
	}
	peer_fanout_work(&rq, io->buf, calls, nr, local ? &w : NULL);
	/* removing what a node does not have is no failure, here or there */
	if (io->opcode == SD_OP_REMOVE_PEER && l.ret == SD_RES_NO_OBJ)
		l.ret = SD_RES_SUCCESS;
	if (l.ret != SD_RES_SUCCESS)
		ret = l.ret;
	for (int i = 0; i < nr; i++) {
		r = calls[i].result;
		if (io->opcode == SD_OP_REMOVE_PEER && r == SD_RES_NO_OBJ)
			r = SD_RES_SUCCESS;
		if (r != SD_RES_SUCCESS && !retryable(ret))
			ret = r;
	}
	return ret;
}

/*
 * The copies of io's object: the caller's (attr), else the VDI's (the
 * table's, with their generation), else the cluster's. again: the table's
 * generation moved since io's count was resolved from it: the VDI's count
 * may have changed (ALTER_COPY), look it up again.
 */
static void io_copies(struct gw_io *io, bool again)
{
	int copies = io->copies;

	if (copies <= 0 || again)
		copies = vdi_copies_at(oid_to_vid(io->oid), &io->gen);
	if (copies > 0)
		io->copies = copies;
	else if (io->copies <= 0)
		io->copies = group_copies();
}

static int do_io(struct gw_io *io)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)GW_RETRY_MS * 1000000;
	uint32_t last_epoch = 0;
	int ret, pause_ms = 1;

	io_copies(io, false);
	for (;;) {
		struct epoch_ring *er;

		if (io->gen && io->gen != vdi_copies_generation())
			io_copies(io, true);
		er = group_ring_get();
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
		if (!retryable(ret) || sd_now_ns() > deadline || daemon_stopping())
			break;
		retry_wait(ret, last_epoch, io->gen, &pause_ms);
	}
	if (ret != SD_RES_SUCCESS)
		sd_debug("%016" PRIx64 " op 0x%02x epoch %" PRIu32 ": %s", io->oid, io->opcode,
			 last_epoch, sd_strerror(ret));
	if (retryable(ret))
		ret = SD_RES_EIO; /* clients know nothing of peers */
	return ret;
}

/* the VDI's copies: attr's, else the table's, else the cluster's (io_copies) */
static int attr_copies(const struct vdi_attr *attr)
{
	return attr ? attr->nr_copies : 0;
}

/* and the generation attr's count belongs to (0: the caller's own count) */
static uint32_t attr_gen(const struct vdi_attr *attr)
{
	return attr ? attr->gen : 0;
}

/*
 * The scheme of a data object's VDI when it is erasure-coded (D, P and the
 * object size): true, else false (replicated; inodes and vmstate always
 * are). attr's when the table filled it (nr_copies set: its copy_policy,
 * 0 included, is the VDI's, and a replicated request takes no lock here),
 * else the table's: a VDI never mixes schemes.
 */
static bool ec_scheme(uint64_t oid, const struct vdi_attr *attr, int *d, int *p, uint8_t *shift)
{
	uint8_t policy;
	bool snapshot;

	if (!is_data_obj(oid) || ec_oid_strip(oid) >= 0)
		return false;
	policy = attr && attr->nr_copies ? attr->copy_policy : vdi_copy_policy(oid_to_vid(oid));
	if (!policy || !ec_policy_to_dp(policy, d, p))
		return false;
	/*
	 * attr's object size when the table filled it for a live VDI, else
	 * the table's: it knows a deleted VDI's too (whose objects its
	 * descendants still read), for which attr says only "any size"
	 */
	*shift = 0;
	if (attr && attr->nr_copies)
		*shift = attr->shift;
	else
		vdi_lookup_attr(oid_to_vid(oid), shift, &snapshot);
	if (*shift < SD_MIN_BLOCK_SIZE_SHIFT || *shift > SD_MAX_BLOCK_SIZE_SHIFT)
		*shift = attr && attr->shift ? attr->shift : SD_DEFAULT_BLOCK_SIZE_SHIFT;
	return true;
}

int gateway_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, const struct vdi_attr *attr)
{
	struct gw_io io = { SD_OP_READ_PEER, oid, buf, len, off, true, attr_copies(attr),
			    attr_gen(attr) };
	uint8_t shift;
	int d, p;

	if (ec_scheme(oid, attr, &d, &p, &shift))
		return gateway_ec_read(oid, buf, len, off, d, p, shift);
	return do_io(&io);
}

/*
 * A small read that this node's copy serves from memory, on the main
 * thread: the replica that read_once tries first is this node, and the
 * store has the bytes in its page cache (read_cached: a cached descriptor,
 * no wait for the disk). A worker's wake-up and the main thread's second
 * loop turn for the completion were about 23 us of a 4 KiB read's 57 at
 * queue depth 1 (the profile tracer: wq_queue_at 11 us, done_handler 12).
 * At most GW_INLINE_READ_MAX bytes: the copy holds the loop.
 */
#define GW_INLINE_READ_MAX (64U << 10)

bool gateway_read_cached(uint64_t oid, void *buf, uint32_t len, uint64_t off,
			 const struct vdi_attr *attr)
{
	struct gw_io io = { .oid = oid, .copies = attr_copies(attr) };
	struct epoch_ring *er;
	struct peer_iter it;
	bool done = false;
	uint8_t shift;
	int d, p;

	if (!sd_store->read_cached || len > GW_INLINE_READ_MAX ||
	    ec_scheme(oid, attr, &d, &p, &shift))
		return false;
	io_copies(&io, false);
	er = group_ring_get();
	if (!er)
		return false;
	if (peer_iter_init(&it, er, oid, io.copies, true, 0) &&
	    peer_iter_next(&it) == er->local_idx && er->local_idx >= 0 &&
	    sd_store->read_cached(oid, buf, len, off))
		done = true;
	group_ring_put(er);
	return done;
}

/*
 * A snapshot's data is frozen, and so is its inode's map (the header
 * stays writable: QEMU and collie change a snapshot's tag): a write the
 * caller makes for a client, with the VDI's attributes, is refused.
 */
static bool frozen(uint64_t oid, uint64_t off, uint32_t len, const struct vdi_attr *attr)
{
	return attr && attr->snapshot && (!is_vdi_obj(oid) || off + len > SD_INODE_HEADER_SIZE);
}

/*
 * The discard policy, for every caller: a write that zeroes entries of a
 * VDI's own data map (QEMU's discard, PROTOCOL.md 9.6; NBD's TRIM), whatever
 * its length (a whole entry or the last bytes of one), leaves the data
 * objects to the writer, and an object that stays behind would break the
 * next write to it: the map says unallocated, so the client creates the
 * object, and a create that finds the object applies as a write of the
 * client's range only (it cannot tell a create after a discard from a
 * second client's racing create, which must not zero the first one's
 * data), leaving the discarded bytes around the new ones. So the objects
 * that such a write unmaps, and that are the VDI's own (not a snapshot's,
 * which another VDI reads), are removed once the map is written, before
 * the writer's answer: from every node (gateway_remove), and recovery
 * never brings back a copy that was away meanwhile (recovery.c).
 */

/* the entries [*first, *first + *nr) that a map write of [off, off + len) touches: any? */
static bool touched_entries(uint64_t off, uint32_t len, uint32_t *first, uint32_t *nr)
{
	uint64_t end = off + len, a, b;

	if (end <= SD_INODE_HEADER_SIZE || off >= SD_INODE_HEADER_SIZE + 4ULL * MAX_DATA_OBJS)
		return false;
	a = (max_t(uint64_t, off, SD_INODE_HEADER_SIZE) - SD_INODE_HEADER_SIZE) / 4;
	b = (min_t(uint64_t, end, SD_INODE_HEADER_SIZE + 4ULL * MAX_DATA_OBJS) -
	     SD_INODE_HEADER_SIZE + 3) / 4;
	*first = (uint32_t)a;
	*nr = (uint32_t)(b - a);
	return true;
}

/* entry i's value once the write is applied over old (its value before) */
static uint32_t entry_after(uint32_t i, uint32_t old, uint64_t off, const void *data, uint32_t len)
{
	uint64_t at = SD_INODE_HEADER_SIZE + 4ULL * i;
	uint8_t e[4];

	memcpy(e, &old, 4);
	for (int k = 0; k < 4; k++)
		if (at + k >= off && at + k < off + len)
			e[k] = ((const uint8_t *)data)[at + k - off];
	memcpy(&old, e, 4);
	return old;
}

/*
 * Before the write: the entries that it touches, as they were, when it
 * may zero one (a touched entry whose written bytes are all zeros); NULL
 * when it cannot (the common case costs no read).
 */
static uint32_t *map_before_discard(uint64_t oid, uint64_t off, const void *data, uint32_t len,
				    const struct vdi_attr *attr, uint32_t *first, uint32_t *nr)
{
	bool zeroes = false;
	uint32_t *old;

	if (!is_vdi_obj(oid) || (attr && attr->snapshot) || !touched_entries(off, len, first, nr))
		return NULL;
	/* over an entry of zeros, what the write puts there stays zero: its bytes are */
	for (uint32_t i = *first; i < *first + *nr && !zeroes; i++)
		zeroes = entry_after(i, 0, off, data, len) == 0;
	if (!zeroes)
		return NULL;
	old = malloc(*nr * 4);
	if (!old)
		return NULL;
	if (gateway_read(oid, old, *nr * 4, SD_INODE_HEADER_SIZE + 4ULL * *first, attr) !=
	    SD_RES_SUCCESS) {
		free(old);
		return NULL;
	}
	return old;
}

/* after the write: remove the VDI's own objects whose entries it zeroed */
static void remove_discarded(uint64_t oid, uint64_t off, const void *data, uint32_t len,
			     const uint32_t *old, uint32_t first, uint32_t nr,
			     const struct vdi_attr *attr)
{
	uint32_t vid = oid_to_vid(oid);

	for (uint32_t i = 0; i < nr; i++) {
		int ret;

		if (old[i] != vid || entry_after(first + i, old[i], off, data, len))
			continue;
		ret = gateway_remove(vid_to_data_oid(vid, first + i), attr);
		if (ret != SD_RES_SUCCESS)
			sd_warn("%016" PRIx64 ": discarded, but not removed: %s",
				vid_to_data_oid(vid, first + i), sd_strerror(ret));
	}
}

int gateway_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, unsigned int flags,
		  const struct vdi_attr *attr)
{
	struct gw_io io = { SD_OP_WRITE_PEER, oid, (void *)buf, len, off, flags & GW_SYNC,
			    attr_copies(attr), attr_gen(attr) };
	uint32_t *old, first = 0, nr = 0;
	uint8_t shift;
	int ret, d, p;

	if (frozen(oid, off, len, attr))
		return SD_RES_READONLY;
	if (ec_scheme(oid, attr, &d, &p, &shift))
		return gateway_ec_write(oid, 0, NULL, buf, len, off, false, flags & GW_SYNC, d, p,
					shift);
	old = map_before_discard(oid, off, buf, len, attr, &first, &nr);
	ret = do_io(&io);
	if (old && ret == SD_RES_SUCCESS)
		remove_discarded(oid, off, buf, len, old, first, nr, attr);
	free(old);
	return ret;
}

/* COW: the whole source object with the write applied, as one plain create */
static int create_cow(uint64_t oid, uint64_t cow_oid, const void *data, uint32_t len, uint64_t off,
		      bool sync, const struct vdi_attr *attr)
{
	uint32_t size = UINT32_C(1) << (attr ? attr->shift : SD_DEFAULT_BLOCK_SIZE_SHIFT);
	void *buf;
	int ret;

	if (off + len > size)
		return SD_RES_INVALID_PARMS;
	buf = malloc(size);
	if (!buf)
		return SD_RES_NO_MEM;
	ret = gateway_read(cow_oid, buf, size, 0, NULL);
	if (ret == SD_RES_SUCCESS) {
		struct gw_io io = { .opcode = SD_OP_CREATE_AND_WRITE_PEER,
				    .oid = oid,
				    .buf = buf,
				    .len = size,
				    .sync = sync,
				    .copies = attr_copies(attr),
				    .gen = attr_gen(attr),
				    .cow = true,
				    .wr_off = (uint32_t)off,
				    .wr_len = len };
		memcpy((char *)buf + off, data, len);
		ret = do_io(&io);
	} else {
		ret = SD_RES_BASE_VDI_READ;
	}
	free(buf);
	return ret;
}

/* an erasure-coded create's COW source, whichever scheme its VDI has */
static int read_cow_source(uint64_t oid, void *buf, uint32_t len)
{
	return gateway_read(oid, buf, len, 0, NULL);
}

int gateway_create(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len, uint64_t off,
		   unsigned int flags, const struct vdi_attr *attr)
{
	struct gw_io io = { SD_OP_CREATE_AND_WRITE_PEER,
			    oid,
			    (void *)buf,
			    len,
			    off,
			    flags & GW_SYNC,
			    attr_copies(attr),
			    attr_gen(attr) };
	uint8_t shift;
	int d, p;

	if (frozen(oid, off, len, attr))
		return SD_RES_READONLY;
	if (ec_scheme(oid, attr, &d, &p, &shift))
		return gateway_ec_write(oid, cow_oid, read_cow_source, buf, len, off, true,
					flags & GW_SYNC, d, p, shift);
	if (cow_oid)
		return create_cow(oid, cow_oid, buf, len, off, flags & GW_SYNC, attr);
	return do_io(&io);
}

/* an erasure-coded object: each of its strips, from every node */
int gateway_remove(uint64_t oid, const struct vdi_attr *attr)
{
	struct gw_io io = { SD_OP_REMOVE_PEER, oid, NULL, 0, 0, true, attr_copies(attr),
			    attr_gen(attr) };
	uint8_t shift;
	int d, p, ret = SD_RES_SUCCESS;

	if (!ec_scheme(oid, attr, &d, &p, &shift))
		return do_io(&io);
	for (int i = 0; i < d + p; i++) {
		struct gw_io s = io;
		int r;

		s.oid = ec_strip_oid(oid, i);
		s.copies = d + p;
		r = do_io(&s);
		if (r != SD_RES_SUCCESS && r != SD_RES_NO_OBJ)
			ret = r;
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

int gateway_flush(uint64_t oid)
{
	struct epoch_ring *er = group_ring_get();
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = SD_OP_FLUSH_PEER };
	struct peer_call calls[SD_MAX_NODES];
	struct flush_part fl = { .oid = oid };
	struct peer_work w = { flush_step, &fl, false };
	int ret, nr = 0;

	if (!er)
		return replica_flush(oid);
	rq.epoch = er->epoch;
	rq.obj.oid = oid;
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
