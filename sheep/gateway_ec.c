/*
 * The gateway's erasure-coded objects (gateway_ec.h): a data object of a
 * VDI whose copy_policy names D:P is D data strips and P parity strips
 * (lib/ec.c), strip i stored under its own oid (ec_strip_oid) on the i-th
 * node that the ring of the current epoch names for the object.
 *
 * - A read asks the data strips it needs (only the in-strip range the
 *   client's bytes cover) of the nodes that should hold them, all at once
 *   (the peer fan-out, each node its own request). A strip not found there
 *   (a strip stays where it was written until recovery moves it) is looked
 *   for on the other nodes in rounds of one fan-out each, the parity with
 *   it; a strip that no node serves is rebuilt from D others, the same
 *   range of each (gather).
 * - A write to part of an object whose strips are all at home goes in
 *   place: the in-strip window its bytes lie in is read of every strip,
 *   its parity encoded, and the window of the strips touched and of the
 *   parity written back (window_fn). Any other write reads the whole
 *   stripe (rebuilding as a read does), applies the client's bytes,
 *   encodes the parity and writes every strip whole to its node, all at
 *   once (CREATE_AND_WRITE_PEER: creates it, or overwrites it; this node's
 *   strip is written while the others travel). A write of the whole object
 *   skips the read. Writes of one object through this
 *   gateway are serialized by a per-object lock; two gateways writing the
 *   same object at once are not (a VDI has one writer: its lock). With
 *   fewer nodes than D + P a write fails (SD_RES_HALT), as a replicated
 *   one does with fewer nodes than copies.
 * - A write is not atomic across the strips: a crash or a failed strip
 *   write in the middle leaves some strips old and some new (a torn
 *   stripe), which a later rebuild from a mix would turn into wrong bytes.
 *   The write fails then, and the client's retry rewrites the stripe; the
 *   versioning that would detect a torn stripe after a crash is not built
 *   (man sheep.8).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "ec.h"
#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "gateway_ec.h"
#include "group.h"
#include "peer_io.h"
#include "replica.h"
#include "vdi_table.h"
#include "store/store.h"

#define EC_RETRY_MS 10000
#define EC_RETRY_SLEEP_MS 50
#define EC_NR_LOCKS 64

static pthread_mutex_t codec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ec_codec *codecs[SD_EC_MAX_DATA / 2 + 1][SD_EC_MAX_PARITY + 1];
static pthread_mutex_t obj_locks[EC_NR_LOCKS] = { [0 ... EC_NR_LOCKS - 1] =
							  PTHREAD_MUTEX_INITIALIZER };

/* the coding tables of D:P, made once and kept */
static const struct ec_codec *codec_get(int d, int p)
{
	struct ec_codec *c;

	pthread_mutex_lock(&codec_lock);
	c = codecs[d / 2][p];
	if (!c) {
		c = malloc(sizeof(*c));
		if (c && ec_codec_init(c, d, p)) {
			free(c);
			c = NULL;
		}
		codecs[d / 2][p] = c;
	}
	pthread_mutex_unlock(&codec_lock);
	return c;
}

static bool retryable(int ret)
{
	return ret == SD_RES_OLD_NODE_VER || ret == SD_RES_NEW_NODE_VER || ret == SD_RES_NETWORK;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void strip_req(struct sd_req *rq, const struct epoch_ring *er, uint8_t opcode,
		      uint64_t soid, uint32_t len, uint64_t off, bool sync)
{
	memset(rq, 0, sizeof(*rq));
	rq->proto_ver = SD_SHEEP_PROTO_VER;
	rq->opcode = opcode;
	rq->epoch = er->epoch;
	rq->data_length = len;
	rq->obj.oid = soid;
	rq->obj.offset = off;
	if (opcode != SD_OP_READ_PEER)
		rq->flags = SD_FLAG_CMD_WRITE;
	if (!sync)
		rq->flags |= SD_FLAG_CMD_CACHE;
}

/* this node's part of a strip I/O: the store itself */
static int local_strip_io(uint8_t opcode, uint64_t soid, void *buf, uint32_t len, uint64_t off,
			  bool sync)
{
	if (opcode == SD_OP_READ_PEER)
		return sd_store->read(soid, buf, len, off);
	if (opcode == SD_OP_WRITE_PEER)
		return replica_write(soid, buf, len, off, sync);
	return replica_create_and_write(soid, buf, len, off, off, len, sync);
}

/* one strip I/O: a strip, the ring node that it goes to or comes from, the result */
struct strip_io {
	int node;
	uint64_t soid;
	void *buf;
	int ret;
};

struct local_part {
	struct strip_io *io;
	uint8_t opcode;
	uint32_t len;
	uint64_t off;
	bool sync;
};

static bool local_step(void *arg)
{
	struct local_part *l = arg;

	l->io->ret = local_strip_io(l->opcode, l->io->soid, l->io->buf, l->len, l->off, l->sync);
	return false;
}

/*
 * The strip I/Os of ios[nr] (each on its own node) at once: every remote
 * one a request of the fan-out, this node's done while they travel.
 */
static void strips_at_once(const struct epoch_ring *er, uint8_t opcode, struct strip_io *ios,
			   int nr, uint32_t len, uint64_t off, bool sync)
{
	struct sd_req rqs[SD_EC_MAX_STRIPS];
	struct peer_call calls[SD_EC_MAX_STRIPS];
	struct strip_io *remote[SD_EC_MAX_STRIPS];
	struct local_part l = { NULL, opcode, len, off, sync };
	struct peer_work w = { local_step, &l, false };
	int nr_calls = 0;

	for (int i = 0; i < nr; i++) {
		if (ios[i].node == er->local_idx) {
			l.io = &ios[i];
			continue;
		}
		strip_req(&rqs[nr_calls], er, opcode, ios[i].soid, len, off, sync);
		calls[nr_calls] = (struct peer_call){ .nid = &er->ring.nodes[ios[i].node].nid,
						      .rq = &rqs[nr_calls],
						      .wdata = ios[i].buf };
		if (opcode == SD_OP_READ_PEER) {
			calls[nr_calls].rdata = ios[i].buf;
			calls[nr_calls].rlen = len;
		}
		remote[nr_calls++] = &ios[i];
	}
	peer_fanout_work(nr_calls ? &rqs[0] : &(struct sd_req){ 0 }, NULL, calls, nr_calls,
			 l.io ? &w : NULL);
	for (int i = 0; i < nr_calls; i++) {
		remote[i]->ret = calls[i].result;
		if (opcode == SD_OP_READ_PEER && calls[i].result == SD_RES_SUCCESS &&
		    calls[i].rsp.data_length != len)
			remote[i]->ret = SD_RES_EIO;
	}
}

struct stripe {
	const struct ec_codec *c;
	uint8_t *s[SD_EC_MAX_STRIPS]; /* each len bytes: the strips' range [off, off + len) */
	bool have[SD_EC_MAX_STRIPS];
	uint32_t len;
	uint64_t off;
};

/*
 * The node of round k of strip i's search, an index into the object's
 * ring order ord[nr] (ring_map over every node): its home i, then i - 1,
 * i + 1, i - 2, i + 2 ... A node that leaves moves the strips after it one
 * place back in that order, a node that joins one place on, so a strip
 * that recovery has not moved yet is found in the first round after the
 * home's (a leave) or the second (a join); -1 when round k names no node.
 */
static int search_node(const int *ord, int nr, int i, int k)
{
	int pos = i + (k & 1 ? -(k + 1) / 2 : k / 2);

	return pos >= 0 && pos < nr ? ord[pos] : -1;
}

/*
 * Fill the strips in want (a bit per strip) of st. First every wanted
 * strip from its home, all at once. A wanted strip not found there was
 * moved by an epoch change that recovery has not caught up with, or is
 * lost: then every strip not had yet, parity and all, is searched for in
 * rounds, each one fan-out in which a node is asked for one strip at most
 * (wanted strips first, then parity), until the wanted strips are had or
 * D strips to rebuild them from. A round costs one round trip whatever
 * the number of strips: a 2:2 read after a node left takes 3 (test_gateway),
 * asked one node after another it took 7.
 */
static int gather(const struct epoch_ring *er, uint64_t oid, struct stripe *st, uint32_t want)
{
	int d = st->c->d, n = d + st->c->p, nr_nodes = er->ring.nr_nodes, ord[SD_MAX_NODES];
	int nr = ring_map(&er->ring, oid, nr_nodes, ord), ret = SD_RES_SUCCESS, nr_have = 0;
	int round[SD_EC_MAX_STRIPS], k_max = 2 * max_t(int, n, nr) + 1;
	uint32_t missing = want;

	memset(st->have, 0, sizeof(st->have));
	for (int i = 0; i < n; i++)
		round[i] = (want & (1U << i)) ? 0 : -1; /* -1: not looked for (yet) */
	while (missing && nr_have < d) {
		struct strip_io ios[SD_EC_MAX_STRIPS];
		bool busy[SD_MAX_NODES] = { false };
		int nr_ios = 0;

		/* the wanted strips take their nodes first, then the others */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n; i++) {
				bool wanted = want & (1U << i);
				int node = -1;

				if (wanted != (pass == 0) || st->have[i] || round[i] < 0)
					continue;
				while (round[i] < k_max &&
				       (node = search_node(ord, nr, i, round[i])) < 0)
					round[i]++;
				if (node < 0 || busy[node])
					continue; /* nowhere left, or its next node is taken */
				busy[node] = true;
				round[i]++;
				ios[nr_ios++] = (struct strip_io){ node, ec_strip_oid(oid, i), st->s[i] };
			}
		if (!nr_ios)
			break;
		strips_at_once(er, SD_OP_READ_PEER, ios, nr_ios, st->len, st->off, true);
		for (int k = 0; k < nr_ios; k++) {
			int i = ec_oid_strip(ios[k].soid), r = ios[k].ret;

			if (r == SD_RES_SUCCESS) {
				st->have[i] = true;
				nr_have++;
				missing &= ~(1U << i);
			} else if (r != SD_RES_NO_OBJ && (ret == SD_RES_SUCCESS || retryable(r))) {
				ret = r;
			}
		}
		/* a wanted strip is still missing: every strip is worth a look */
		for (int i = 0; i < n; i++)
			if (round[i] < 0)
				round[i] = 0;
	}
	if (!missing)
		return SD_RES_SUCCESS;
	if (nr_have >= d)
		return ec_reconstruct(st->c, st->len, st->s, st->have, want) ? SD_RES_NO_MEM
									     : SD_RES_SUCCESS;
	/* no strip anywhere: the object does not exist */
	if (!nr_have && ret == SD_RES_SUCCESS)
		return SD_RES_NO_OBJ;
	if (ret == SD_RES_SUCCESS) {
		sd_err("%016" PRIx64 ": %d strip(s) of %d found, %d needed", oid, nr_have, n, d);
		ret = SD_RES_EIO;
	}
	return ret;
}

static void stripe_free(struct stripe *st)
{
	for (int i = 0; i < SD_EC_MAX_STRIPS; i++)
		free(st->s[i]);
}

static int stripe_alloc(struct stripe *st, const struct ec_codec *c, uint32_t len, uint64_t off)
{
	memset(st, 0, sizeof(*st));
	st->c = c;
	st->len = len;
	st->off = off;
	for (int i = 0; i < c->d + c->p; i++) {
		st->s[i] = malloc(len ? len : 1);
		if (!st->s[i]) {
			stripe_free(st);
			return SD_RES_NO_MEM;
		}
	}
	return SD_RES_SUCCESS;
}

/* run fn on the newest ring, again on an epoch mismatch until EC_RETRY_MS pass */
static int with_ring(int (*fn)(const struct epoch_ring *er, void *arg), void *arg)
{
	uint64_t deadline = sd_now_ns() + (uint64_t)EC_RETRY_MS * 1000000;
	uint32_t last_epoch = 0;
	int ret, pause_ms = 1;

	for (;;) {
		struct epoch_ring *er = group_ring_get();

		if (!er)
			return SD_RES_NO_MEM;
		ret = fn(er, arg);
		if (last_epoch && er->epoch != last_epoch)
			deadline = sd_now_ns() + (uint64_t)EC_RETRY_MS * 1000000;
		last_epoch = er->epoch;
		group_ring_put(er);
		if (!retryable(ret) || sd_now_ns() > deadline || daemon_stopping())
			break;
		/* as gateway.c's retries: a newer ring is waited for, other failures pause */
		if (ret == SD_RES_OLD_NODE_VER && group_wait_epoch(last_epoch, EC_RETRY_SLEEP_MS))
			continue;
		sleep_ms(pause_ms);
		pause_ms = min_t(int, pause_ms * 2, EC_RETRY_SLEEP_MS);
	}
	if (retryable(ret))
		ret = SD_RES_EIO; /* clients know nothing of peers */
	return ret;
}

struct read_ctx {
	uint64_t oid;
	struct stripe st;
	uint32_t want;
};

static int read_fn(const struct epoch_ring *er, void *arg)
{
	struct read_ctx *r = arg;

	return gather(er, r->oid, &r->st, r->want);
}

static uint32_t obj_len(uint8_t shift)
{
	return UINT32_C(1) << shift;
}

/*
 * The strips that the object's bytes [off, off + len) lie in (a bit per
 * strip of sl bytes), and the in-strip window [*lo, *hi) that each one's
 * part of them lies in.
 */
static uint32_t strip_window(uint64_t off, uint32_t len, uint32_t sl, uint32_t *lo, uint32_t *hi)
{
	uint32_t want = 0;

	*lo = UINT32_MAX;
	*hi = 0;
	for (uint64_t k = off / sl; len && k <= (off + len - 1) / sl; k++) {
		uint64_t a = max_t(uint64_t, off, k * sl) - k * sl;
		uint64_t b = min_t(uint64_t, off + len, (k + 1) * sl) - k * sl;

		*lo = min_t(uint32_t, *lo, (uint32_t)a);
		*hi = max_t(uint32_t, *hi, (uint32_t)b);
		want |= 1U << k;
	}
	return want;
}

/*
 * The object's bytes [off, off + len) between buf and the stripe st, whose
 * strips hold each one's window [st->off, st->off + st->len): into the
 * stripe (a write) or out of it (a read).
 */
static void stripe_copy(struct stripe *st, uint32_t sl, void *buf, uint32_t len, uint64_t off,
			bool into)
{
	for (uint64_t k = off / sl; len && k <= (off + len - 1) / sl; k++) {
		uint64_t a = max_t(uint64_t, off, k * sl);
		uint64_t b = min_t(uint64_t, off + len, (k + 1) * sl);
		uint8_t *in_strip = st->s[k] + (a - k * sl - st->off);
		char *in_buf = (char *)buf + (a - off);

		if (into)
			memcpy(in_strip, in_buf, b - a);
		else
			memcpy(in_buf, in_strip, b - a);
	}
}

int gateway_ec_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, int d, int p,
		    uint8_t shift)
{
	const struct ec_codec *c = codec_get(d, p);
	uint32_t sl = ec_strip_len(obj_len(shift), d), lo, hi;
	struct read_ctx r = { .oid = oid };
	int ret;

	if (!c || !sl)
		return SD_RES_NO_MEM;
	if (!len)
		return SD_RES_SUCCESS;
	if (off + len > obj_len(shift))
		return SD_RES_INVALID_PARMS;
	r.want = strip_window(off, len, sl, &lo, &hi);
	ret = stripe_alloc(&r.st, c, hi - lo, lo);
	if (ret)
		return ret;
	ret = with_ring(read_fn, &r);
	if (ret == SD_RES_SUCCESS)
		stripe_copy(&r.st, sl, buf, len, off, false);
	stripe_free(&r.st);
	return ret;
}

struct write_ctx {
	uint64_t oid;
	struct stripe *st;
	bool sync;
};

/* every strip whole to the node that the ring names for it, all at once */
static int write_fn(const struct epoch_ring *er, void *arg)
{
	struct write_ctx *w = arg;
	int n = w->st->c->d + w->st->c->p, idx[SD_MAX_NODES], ret = SD_RES_SUCCESS;
	struct strip_io ios[SD_EC_MAX_STRIPS];

	if (ring_map(&er->ring, w->oid, n, idx) < n)
		return SD_RES_HALT;
	for (int i = 0; i < n; i++)
		ios[i] = (struct strip_io){ idx[i], ec_strip_oid(w->oid, i), w->st->s[i] };
	strips_at_once(er, SD_OP_CREATE_AND_WRITE_PEER, ios, n, w->st->len, 0, w->sync);
	for (int i = 0; i < n; i++)
		if (ios[i].ret != SD_RES_SUCCESS && (ret == SD_RES_SUCCESS || retryable(ios[i].ret)))
			ret = ios[i].ret;
	return ret;
}

/* not an SD_RES_*: a strip is not at its home, the window write gives way to the stripe's */
#define EC_WHOLE_STRIPE (-1)

struct window_ctx {
	uint64_t oid;
	struct stripe *st; /* each strip's window */
	uint32_t sl;
	const void *buf;
	uint32_t len;
	uint64_t off;
	bool sync;
	bool written; /* a write of strips was sent: a failure may leave them disagreeing */
};

/* the first failure of ios[nr], an epoch mismatch before others; none: SD_RES_SUCCESS */
static int ios_result(const struct strip_io *ios, int nr)
{
	int ret = SD_RES_SUCCESS;

	for (int i = 0; i < nr; i++)
		if (ios[i].ret != SD_RES_SUCCESS && (ret == SD_RES_SUCCESS || retryable(ios[i].ret)))
			ret = ios[i].ret;
	return ret;
}

/*
 * A write to part of an existing object, in place: the in-strip window
 * that the client's bytes lie in is read of every strip, the bytes are
 * applied, the window's parity encoded, and the window of the strips the
 * bytes touched and of the parity written back (WRITE_PEER: into the
 * strip that is there). A 4 KiB write to 4:2 moves 36 KiB, not the 10 MiB
 * of the whole stripe's read and write. Every strip, parity included, is
 * read first. A strip that does not answer from its home (the object does
 * not exist, recovery has not moved a strip, one is lost, its disk failed)
 * is EC_WHOLE_STRIPE, for the whole stripe's path to find, rebuild or
 * create: any failure but one worth a retry (an epoch mismatch, a node
 * not reached), in the reads or the writes. A retry reads the window
 * again: the strips written meanwhile hold the client's bytes, which it
 * applies once more.
 */
static int window_fn(const struct epoch_ring *er, void *arg)
{
	struct window_ctx *w = arg;
	struct stripe *st = w->st;
	int d = st->c->d, n = d + st->c->p, idx[SD_MAX_NODES], nr_ios = 0, ret;
	uint32_t k0 = (uint32_t)(w->off / w->sl), k1 = (uint32_t)((w->off + w->len - 1) / w->sl);
	struct strip_io ios[SD_EC_MAX_STRIPS];

	if (ring_map(&er->ring, w->oid, n, idx) < n)
		return SD_RES_HALT;
	for (int i = 0; i < n; i++)
		ios[i] = (struct strip_io){ idx[i], ec_strip_oid(w->oid, i), st->s[i] };
	strips_at_once(er, SD_OP_READ_PEER, ios, n, st->len, st->off, true);
	ret = ios_result(ios, n);
	if (ret)
		return retryable(ret) ? ret : EC_WHOLE_STRIPE;
	stripe_copy(st, w->sl, (void *)w->buf, w->len, w->off, true);
	ec_encode(st->c, st->len, st->s, st->s + d);
	for (uint32_t k = k0; k <= k1; k++)
		ios[nr_ios++] = (struct strip_io){ idx[k], ec_strip_oid(w->oid, (int)k), st->s[k] };
	for (int i = d; i < n; i++)
		ios[nr_ios++] = (struct strip_io){ idx[i], ec_strip_oid(w->oid, i), st->s[i] };
	w->written = true;
	strips_at_once(er, SD_OP_WRITE_PEER, ios, nr_ios, st->len, st->off, w->sync);
	ret = ios_result(ios, nr_ios);
	return ret && !retryable(ret) ? EC_WHOLE_STRIPE : ret;
}

/* the write of part of an object through its window: EC_WHOLE_STRIPE when it cannot be */
static int write_window(uint64_t oid, const struct ec_codec *c, uint32_t sl, const void *buf,
			uint32_t len, uint64_t off, bool sync)
{
	struct stripe st;
	struct window_ctx w = { oid, &st, sl, buf, len, off, sync, false };
	uint32_t lo, hi;
	int ret;

	strip_window(off, len, sl, &lo, &hi);
	ret = stripe_alloc(&st, c, hi - lo, lo);
	if (ret)
		return ret;
	ret = with_ring(window_fn, &w);
	stripe_free(&st);
	if (ret != SD_RES_SUCCESS && ret != EC_WHOLE_STRIPE && w.written)
		sd_err("%016" PRIx64 ": write in place failed (%s): its strips may disagree", oid,
		       sd_strerror(ret));
	return ret;
}

/* the stripe an object starts from when it does not exist: zeros, or its COW source */
static int fresh_stripe(struct stripe *st, uint64_t cow_oid, uint32_t size, gw_ec_read_fn read_src)
{
	uint32_t sl = st->len;
	char *whole;
	int ret;

	if (!cow_oid) {
		for (int i = 0; i < st->c->d; i++)
			memset(st->s[i], 0, sl);
		return SD_RES_SUCCESS;
	}
	whole = malloc(size);
	if (!whole)
		return SD_RES_NO_MEM;
	ret = read_src(cow_oid, whole, size);
	for (int i = 0; ret == SD_RES_SUCCESS && i < st->c->d; i++)
		memcpy(st->s[i], whole + (size_t)i * sl, sl);
	free(whole);
	return ret == SD_RES_SUCCESS ? ret : SD_RES_BASE_VDI_READ;
}

int gateway_ec_write(uint64_t oid, uint64_t cow_oid, gw_ec_read_fn read_src, const void *buf,
		     uint32_t len, uint64_t off, bool create, bool sync, int d, int p, uint8_t shift)
{
	const struct ec_codec *c = codec_get(d, p);
	uint32_t size = obj_len(shift), sl = ec_strip_len(size, d);
	pthread_mutex_t *lock = &obj_locks[(oid ^ (oid >> 32)) % EC_NR_LOCKS];
	struct read_ctx r = { .oid = oid, .want = (1U << d) - 1 };
	struct write_ctx w = { .oid = oid, .st = &r.st, .sync = sync };
	int ret;

	if (!c || !sl)
		return SD_RES_NO_MEM;
	if (off + len > size)
		return SD_RES_INVALID_PARMS;
	if (!len)
		return SD_RES_SUCCESS;
	pthread_mutex_lock(lock);
	/* part of the object, not a COW's first write: in place, if every strip is home */
	if (!cow_oid && len < size) {
		ret = write_window(oid, c, sl, buf, len, off, sync);
		if (ret != EC_WHOLE_STRIPE)
			goto out_unlock;
	}
	ret = stripe_alloc(&r.st, c, sl, 0);
	if (ret)
		goto out_unlock;
	/* the whole object written: nothing of the old stripe survives, no read */
	if (off == 0 && len == size && !cow_oid)
		ret = SD_RES_SUCCESS;
	else
		ret = with_ring(read_fn, &r);
	if (ret == SD_RES_NO_OBJ && create)
		ret = fresh_stripe(&r.st, cow_oid, size, read_src);
	if (ret == SD_RES_SUCCESS) {
		stripe_copy(&r.st, sl, (void *)buf, len, off, true);
		ec_encode(c, sl, r.st.s, r.st.s + d);
		ret = with_ring(write_fn, &w);
		if (ret)
			sd_err("%016" PRIx64 ": stripe write failed (%s): its strips may disagree",
			       oid, sd_strerror(ret));
	}
	stripe_free(&r.st);
out_unlock:
	pthread_mutex_unlock(lock);
	return ret;
}

int gateway_ec_rebuild_strip(uint64_t soid, void *buf, uint32_t *len)
{
	uint64_t oid = ec_base_oid(soid);
	int i = ec_oid_strip(soid), d, p;
	const struct ec_codec *c;
	struct read_ctx r = { .oid = oid };
	uint8_t shift;
	bool snapshot;
	int ret;

	if (i < 0 || !ec_policy_to_dp(vdi_copy_policy(oid_to_vid(oid)), &d, &p) || i >= d + p)
		return SD_RES_INVALID_PARMS;
	if (vdi_lookup_attr(oid_to_vid(oid), &shift, &snapshot) != SD_RES_SUCCESS)
		return SD_RES_NO_VDI;
	c = codec_get(d, p);
	*len = ec_strip_len(obj_len(shift), d);
	if (!c || !*len)
		return SD_RES_NO_MEM;
	ret = stripe_alloc(&r.st, c, *len, 0);
	if (ret)
		return ret;
	r.want = 1U << i;
	ret = with_ring(read_fn, &r);
	if (ret == SD_RES_SUCCESS)
		memcpy(buf, r.st.s[i], *len);
	stripe_free(&r.st);
	return ret;
}
