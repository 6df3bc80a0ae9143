/*
 * Unit tests of sheep/gateway.c through its API (gateway.h), on a ring of
 * four fake nodes, each holding its objects in memory: this node's copy is
 * its store and replica layer (stubs below), the others answer the peer
 * requests that the fan-out would send them. What is checked:
 *
 * - a write reaches every replica the ring names for the VDI's copies, and
 *   only them; a replica's failure fails it; too few nodes: SD_RES_HALT;
 * - a read tries this node's copy first, fails over to the next replica
 *   and then to any node; no copy anywhere: SD_RES_NO_OBJ;
 * - a node on another epoch is retried on the ring (one mismatch, then it
 *   answers), and an unreachable one fails the write with SD_RES_EIO once
 *   the retry time is over (time runs fast here: nanosleep is a stub);
 * - a replica on another count of copies (ALTER_COPY) is retried too, with
 *   the count looked up again once the table's generation moved, the pause
 *   cut short when it moves;
 * - the frozen rule: a snapshot's data and map refuse writes, its header
 *   does not, and the daemon's own I/O (attr NULL) is not refused;
 * - the discard policy: a write that zeroes map entries (whole, or the
 *   last bytes of one) removes the VDI's own objects they named, from
 *   every node, and nothing else; a removal reaches a node off the ring's
 *   replicas;
 * - a COW create copies the source object with the write applied;
 * - a read served from memory on the main thread only when this node's
 *   copy is the one to read.
 * The erasure-coded objects' tests (gateway_ec.c) are in test_gateway_ec.c,
 * on the same fake cluster (gateway_fake.h), in the same program.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal_proto.h"
#include "daemon.h"
#include "ec.h"
#include "gateway.h"
#include "group.h"
#include "peer_io.h"
#include "replica.h"
#include "vdi_table.h"
#include "store/store.h"
#include "gateway_fake.h"

/* ---- the fake cluster: each node's objects, in memory ---- */

struct fake_node nodes[NR_NODES];
struct epoch_ring ring = { .refcnt = 1, .epoch = 7 };
static int nr_live = NR_NODES; /* the ring is made of the first nr_live nodes */
static uint64_t fake_ns;       /* the clock the gateway's retries see */

struct fake_obj *find(int node, uint64_t oid)
{
	for (int i = 0; i < MAX_OBJS; i++)
		if (nodes[node].objs[i].data && nodes[node].objs[i].oid == oid)
			return &nodes[node].objs[i];
	return NULL;
}

static struct fake_obj *make(int node, uint64_t oid)
{
	struct fake_obj *o = find(node, oid);

	for (int i = 0; !o && i < MAX_OBJS; i++)
		if (!nodes[node].objs[i].data) {
			o = &nodes[node].objs[i];
			o->oid = oid;
			o->data = calloc(1, OBJ_SIZE);
		}
	ck_assert_ptr_nonnull(o);
	return o;
}

void drop(int node, uint64_t oid)
{
	struct fake_obj *o = find(node, oid);

	if (o) {
		free(o->data);
		o->data = NULL;
	}
}

static int node_of(const struct sd_node_id *nid)
{
	for (int i = 0; i < ring.ring.nr_nodes; i++)
		if (!memcmp(nid, &ring.ring.nodes[i].nid, sizeof(*nid)))
			return nid->port - 7000;
	ck_abort_msg("a request to a node not on the ring");
	return -1;
}

uint64_t bytes_read, bytes_written; /* every node's, this node's included */

/* node's side of a request: what a peer op would do */
static int serve(int node, const struct sd_req *rq, const void *wdata, void *rdata)
{
	struct fake_node *n = &nodes[node];
	struct fake_obj *o;

	n->nr_requests++;
	if (rq->opcode == SD_OP_READ_PEER)
		bytes_read += rq->data_length;
	else
		bytes_written += rq->data_length;
	if (n->fail)
		return n->fail;
	if (n->fail_read && rq->opcode == SD_OP_READ_PEER)
		return n->fail_read;
	if (n->old_epoch) {
		n->old_epoch--;
		return SD_RES_OLD_NODE_VER;
	}
	if (n->copies && rq->obj.copies != n->copies &&
	    (rq->opcode == SD_OP_WRITE_PEER || rq->opcode == SD_OP_CREATE_AND_WRITE_PEER))
		return SD_RES_COPIES_CHANGED;
	switch (rq->opcode) {
	case SD_OP_READ_PEER:
		o = find(node, rq->obj.oid);
		if (!o)
			return SD_RES_NO_OBJ;
		memcpy(rdata, o->data + rq->obj.offset, rq->data_length);
		return SD_RES_SUCCESS;
	case SD_OP_WRITE_PEER:
		o = find(node, rq->obj.oid);
		if (!o)
			return SD_RES_NO_OBJ;
		memcpy(o->data + rq->obj.offset, wdata, rq->data_length);
		return SD_RES_SUCCESS;
	case SD_OP_CREATE_AND_WRITE_PEER:
		o = make(node, rq->obj.oid);
		memcpy(o->data + rq->obj.offset, wdata, rq->data_length);
		return SD_RES_SUCCESS;
	case SD_OP_REMOVE_PEER:
		if (!find(node, rq->obj.oid))
			return SD_RES_NO_OBJ;
		drop(node, rq->obj.oid);
		return SD_RES_SUCCESS;
	case SD_OP_FLUSH_PEER:
		return SD_RES_SUCCESS;
	}
	return SD_RES_INVALID_PARMS;
}

/* ---- stand-ins: the ring, the fan-out, this node's replica and store ---- */

struct epoch_ring *group_ring_get(void)
{
	return &ring;
}

void group_ring_put(struct epoch_ring *er)
{
	(void)er;
}

/* the ring never changes here: a retry's wait for a newer one times out */
static int nr_epoch_waits;
static uint32_t waited_epoch;

bool group_wait_epoch(uint32_t epoch, int timeout_ms)
{
	(void)timeout_ms;
	nr_epoch_waits++;
	waited_epoch = epoch;
	return false;
}

uint8_t group_copies(void)
{
	return 3;
}

/* this node's table: the VDIs' count (0: unknown, the cluster's) and its generation */
static int table_copies;
static uint32_t table_gen = 1;
static int apply_after_sleeps; /* the table takes count 3 (generation 2) at that pause */

int vdi_copies(uint32_t vid)
{
	(void)vid;
	return table_copies;
}

int vdi_copies_at(uint32_t vid, uint32_t *gen)
{
	(void)vid;
	*gen = table_gen;
	return table_copies;
}

uint32_t vdi_copies_generation(void)
{
	return table_gen;
}

/* the gateway's waits for a new count: the fake clock runs the pause unless it moved */
static int nr_gen_waits;
static uint32_t waited_gen;

bool vdi_wait_copies_generation(uint32_t gen, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000L };

	nr_gen_waits++;
	waited_gen = gen;
	if (table_gen == gen)
		nanosleep(&ts, NULL); /* the table may take the new count in it */
	return table_gen != gen;
}

/* the VDIs here are replicated unless a test's attr names D:P (gateway_ec.c) */
static int nr_policy_lookups; /* the table asked for a VDI's scheme */

uint8_t vdi_copy_policy(uint32_t vid)
{
	(void)vid;
	__atomic_fetch_add(&nr_policy_lookups, 1, __ATOMIC_RELAXED);
	return 0;
}

int nr_attr_lookups; /* atomic */

int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot)
{
	(void)vid;
	__atomic_fetch_add(&nr_attr_lookups, 1, __ATOMIC_RELAXED);
	*shift = SHIFT; /* the erasure-coded path's object size: the fake nodes' */
	*is_snapshot = false;
	return SD_RES_NO_VDI;
}

int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp)
{
	(void)nid;
	(void)rq;
	(void)wdata;
	(void)rdata;
	(void)rsp;
	ck_abort_msg("peer_request: only the erasure-coded path sends one");
	return -EIO;
}

bool daemon_stopping(void)
{
	return false;
}

uint64_t sd_now_ns(void)
{
	return fake_ns;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
	(void)rem;
	fake_ns += (uint64_t)req->tv_sec * 1000000000 + (uint64_t)req->tv_nsec;
	if (apply_after_sleeps && --apply_after_sleeps == 0) {
		table_copies = 3;
		table_gen = 2;
	}
	return 0;
}

int nr_fanouts; /* rounds of requests sent at once */

void peer_fanout_work(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr,
		      const struct peer_work *work)
{
	nr_fanouts++;
	for (int i = 0; i < nr; i++) {
		int node = node_of(calls[i].nid);

		const struct sd_req *crq = calls[i].rq ? calls[i].rq : rq;
		const void *cw = calls[i].rq ? calls[i].wdata : wdata;

		calls[i].result = serve(node, crq, cw, calls[i].rdata);
		calls[i].rsp.data_length = crq->data_length;
		calls[i].rsp.result = calls[i].result;
	}
	while (work && work->step(work->arg))
		;
}

void peer_fanout(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr)
{
	peer_fanout_work(rq, wdata, calls, nr, NULL);
}

/* this node is node 0 */
static int local(uint8_t opcode, uint64_t oid, const void *buf, uint32_t len, uint64_t off)
{
	struct sd_req rq = { .opcode = opcode, .data_length = len };

	rq.obj.oid = oid;
	rq.obj.offset = off;
	return serve(0, &rq, buf, (void *)buf);
}

int replica_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	(void)sync;
	return local(SD_OP_WRITE_PEER, oid, buf, len, off);
}

int replica_create_and_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off,
			     uint64_t wr_off, uint32_t wr_len, bool sync)
{
	(void)wr_off;
	(void)wr_len;
	(void)sync;
	return local(SD_OP_CREATE_AND_WRITE_PEER, oid, buf, len, off);
}

int replica_remove(uint64_t oid)
{
	return local(SD_OP_REMOVE_PEER, oid, NULL, 0, 0);
}

int replica_flush(uint64_t oid)
{
	(void)oid;
	return SD_RES_SUCCESS;
}

static int store_read(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	return local(SD_OP_READ_PEER, oid, buf, len, off);
}

static int nr_cached_reads;

static bool store_read_cached(uint64_t oid, void *buf, uint32_t len, uint64_t off)
{
	nr_cached_reads++;
	return store_read(oid, buf, len, off) == SD_RES_SUCCESS;
}

static const struct store_driver fake_store = {
	.name = "fake",
	.read = store_read,
	.read_cached = store_read_cached,
};
const struct store_driver *sd_store = &fake_store;

/* ---- helpers ---- */

/* the ring of the first live nodes (a join or a leave: the objects stay where they are) */
void ring_of(int live)
{
	struct sd_node n[NR_NODES];

	memset(n, 0, sizeof(n));
	for (int i = 0; i < NR_NODES; i++) {
		n[i].nid.addr[15] = 1;
		n[i].nid.port = (uint16_t)(7000 + i);
		n[i].nr_vnodes = 64;
		n[i].zone = (uint32_t)i;
	}
	nr_live = live;
	ring_free(&ring.ring);
	ck_assert_int_eq(ring_build(&ring.ring, n, nr_live), 0);
	ring.local_idx = ring_find_node(&ring.ring, &n[0].nid);
}

static void setup(void)
{
	for (int i = 0; i < NR_NODES; i++) {
		for (int j = 0; j < MAX_OBJS; j++)
			free(nodes[i].objs[j].data);
		memset(&nodes[i], 0, sizeof(nodes[i]));
	}
	ring_of(nr_live);
	nr_cached_reads = 0;
	table_copies = 0;
	table_gen = 1;
	apply_after_sleeps = 0;
}

static void teardown(void)
{
	nr_live = NR_NODES;
}

/* the nodes (0..3) that the ring names for oid's copies */
static int replicas(uint64_t oid, int copies, int *out)
{
	int idx[SD_MAX_NODES], n = ring_map(&ring.ring, oid, copies, idx);

	for (int i = 0; i < n; i++)
		out[i] = ring.ring.nodes[idx[i]].nid.port - 7000;
	return n;
}

bool holds(int node, uint64_t oid)
{
	return find(node, oid) != NULL;
}

static const struct vdi_attr working = { .shift = SHIFT, .nr_copies = 3 };
static const struct vdi_attr snapshot = { .shift = SHIFT, .nr_copies = 3, .snapshot = true };

/* a data object of vid 0x42 that this node (node 0) holds a copy of, or not */
static uint64_t data_oid(bool here)
{
	for (uint32_t idx = 0; idx < 1000; idx++) {
		uint64_t oid = vid_to_data_oid(0x42, idx);
		int r[SD_MAX_COPIES], n = replicas(oid, 3, r), mine = 0;

		for (int i = 0; i < n; i++)
			mine |= r[i] == 0;
		if (mine == here)
			return oid;
	}
	ck_abort_msg("no such object");
	return 0;
}

/* ---- tests ---- */

/*
 * ALTER_COPY, 2 copies to 3 (peer.c refuses a write that names another
 * count than the replica's table). The replicas have the new count, this
 * node's table not yet: the write is refused, retried, and once the table
 * has it (its generation moved) goes to the 3 replicas of the new count.
 * A table already on the new count when the write starts: no refusal. The
 * daemon's own I/O with its own count (gen 0) is never looked up again.
 */
START_TEST(test_copies_changed_retried)
{
	const struct vdi_attr two = { .shift = SHIFT, .nr_copies = 2, .gen = 1 };
	const struct vdi_attr own = { .shift = SHIFT, .nr_copies = 2 };
	uint64_t oid = data_oid(false), oid2 = vid_to_data_oid(0x42, 500);
	int r[SD_MAX_COPIES], n = replicas(oid, 3, r), nr = 0;
	char buf[8] = "copies";

	ck_assert_int_eq(n, 3);
	for (int i = 0; i < NR_NODES; i++)
		nodes[i].copies = 3;
	table_copies = 2;
	apply_after_sleeps = 1;
	nr_gen_waits = 0;
	fake_ns = 0;
	ck_assert_int_eq(gateway_create(oid, 0, buf, sizeof(buf), 0, GW_SYNC, &two),
			 SD_RES_SUCCESS);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(holds(r[i], oid), "replica %d of the new count", r[i]);
	for (int i = 0; i < NR_NODES; i++)
		nr += nodes[i].nr_requests;
	ck_assert_int_gt(nr, 3); /* the refused round, then the one of 3 */
	/* the refusal waited for this node's table, at the count's generation, one pause */
	ck_assert_int_eq(nr_gen_waits, 1);
	ck_assert_uint_eq(waited_gen, 1);
	ck_assert_uint_le(fake_ns, UINT64_C(1000000));
	/* the table moved before the write: the new count at once */
	for (int i = 0; i < NR_NODES; i++)
		nodes[i].nr_requests = 0;
	ck_assert_int_eq(gateway_write(oid, buf, sizeof(buf), 0, 0, &two), SD_RES_SUCCESS);
	nr = 0;
	for (int i = 0; i < NR_NODES; i++)
		nr += nodes[i].nr_requests;
	ck_assert_int_eq(nr, r[0] == 0 || r[1] == 0 || r[2] == 0 ? 2 : 3);
	/* the caller's own count is the caller's: refused to the end, never changed */
	fake_ns = 0;
	nr_gen_waits = 0;
	ck_assert_int_eq(gateway_create(oid2, 0, buf, sizeof(buf), 0, GW_SYNC, &own),
			 SD_RES_EIO);
	ck_assert_uint_ge(fake_ns, UINT64_C(10) * 1000000000);
	ck_assert_int_eq(nr_gen_waits, 0); /* plain pauses: no table to wait for */
}
END_TEST

START_TEST(test_write_every_replica)
{
	uint64_t oid = data_oid(false);
	int r[SD_MAX_COPIES], n = replicas(oid, 3, r);
	char buf[512];

	memset(buf, 'w', sizeof(buf));
	ck_assert_int_eq(gateway_create(oid, 0, buf, sizeof(buf), 4096, GW_SYNC, &working),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(n, 3);
	for (int node = 0; node < NR_NODES; node++) {
		bool named = node == r[0] || node == r[1] || node == r[2];

		ck_assert_msg(holds(node, oid) == named, "node %d", node);
		if (named)
			ck_assert(!memcmp(find(node, oid)->data + 4096, buf, sizeof(buf)));
	}
	/* a write on top, then a replica that fails fails the write */
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(gateway_write(oid, buf, sizeof(buf), 0, 0, &working), SD_RES_SUCCESS);
	for (int i = 0; i < n; i++)
		ck_assert(!memcmp(find(r[i], oid)->data, buf, sizeof(buf)));
	nodes[r[1]].fail = SD_RES_NO_SPACE;
	ck_assert_int_eq(gateway_write(oid, buf, sizeof(buf), 0, 0, &working), SD_RES_NO_SPACE);
}
END_TEST

/*
 * A request whose attributes the table filled (nr_copies set) carries its
 * VDI's scheme: a replicated one's I/O asks the table nothing more (a lock
 * per request on the I/O path); the daemon's own I/O (attr NULL) asks.
 */
START_TEST(test_scheme_from_attr)
{
	uint64_t oid = data_oid(false);
	char buf[16];

	__atomic_store_n(&nr_policy_lookups, 0, __ATOMIC_RELAXED);
	ck_assert_int_eq(gateway_create(oid, 0, "abc", 3, 0, GW_SYNC, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_write(oid, "xyz", 3, 0, GW_SYNC, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_read(oid, buf, 3, 0, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_policy_lookups, __ATOMIC_RELAXED), 0);
	ck_assert_int_eq(gateway_read(oid, buf, 3, 0, NULL), SD_RES_SUCCESS);
	ck_assert_int_eq(__atomic_load_n(&nr_policy_lookups, __ATOMIC_RELAXED), 1);
	ck_assert_int_eq(memcmp(buf, "xyz", 3), 0);
}
END_TEST

START_TEST(test_write_too_few_nodes)
{
	char buf[16] = "abc";

	nr_live = 2;
	setup();
	ck_assert_int_eq(
	    gateway_create(vid_to_data_oid(0x42, 1), 0, buf, sizeof(buf), 0, 0, &working),
	    SD_RES_HALT);
	for (int node = 0; node < NR_NODES; node++)
		ck_assert_int_eq(nodes[node].nr_requests, 0);
}
END_TEST

START_TEST(test_read_local_first_then_fail_over)
{
	uint64_t oid = data_oid(true);
	int r[SD_MAX_COPIES];
	char buf[16] = "0123456789", out[16];

	replicas(oid, 3, r);
	ck_assert_int_eq(gateway_create(oid, 0, buf, sizeof(buf), 0, 0, &working), SD_RES_SUCCESS);
	for (int i = 0; i < NR_NODES; i++)
		nodes[i].nr_requests = 0;
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), 0, &working), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, buf, sizeof(buf)));
	/* only this node's copy was read */
	for (int i = 1; i < NR_NODES; i++)
		ck_assert_int_eq(nodes[i].nr_requests, 0);
	/* this node lost its copy: another replica answers */
	drop(0, oid);
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), 0, &working), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, buf, sizeof(buf)));
	/* no replica has it, but a node off the ring's replicas does (a new ring) */
	for (int i = 0; i < 3; i++)
		drop(r[i], oid);
	for (int node = 0; node < NR_NODES; node++)
		if (node != r[0] && node != r[1] && node != r[2])
			memcpy(make(node, oid)->data, buf, sizeof(buf));
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), 0, &working), SD_RES_SUCCESS);
	ck_assert(!memcmp(out, buf, sizeof(buf)));
	/* nobody */
	for (int node = 0; node < NR_NODES; node++)
		drop(node, oid);
	ck_assert_int_eq(gateway_read(oid, out, sizeof(out), 0, &working), SD_RES_NO_OBJ);
}
END_TEST

START_TEST(test_epoch_mismatch_retried)
{
	uint64_t oid = data_oid(false);
	int r[SD_MAX_COPIES];
	char buf[8] = "retry";

	replicas(oid, 3, r);
	nodes[r[0]].old_epoch = 1;
	nr_epoch_waits = 0;
	ck_assert_int_eq(gateway_create(oid, 0, buf, sizeof(buf), 0, 0, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(nodes[r[0]].nr_requests, 2);
	ck_assert(holds(r[0], oid));
	/* a replica on a newer epoch: the retry waited for this node's newer ring */
	ck_assert_int_eq(nr_epoch_waits, 1);
	ck_assert_uint_eq(waited_epoch, ring.epoch);
	/* a node that never answers: the client gets EIO once the retries give up */
	nodes[r[1]].fail = SD_RES_NETWORK;
	fake_ns = 0;
	ck_assert_int_eq(gateway_write(oid, buf, sizeof(buf), 0, 0, &working), SD_RES_EIO);
	ck_assert_uint_ge(fake_ns, UINT64_C(10) * 1000000000);
	ck_assert_int_gt(nodes[r[1]].nr_requests, 10);
	/* unreachable is no epoch news: pauses only */
	ck_assert_int_eq(nr_epoch_waits, 1);
}
END_TEST

START_TEST(test_frozen_snapshot)
{
	uint64_t oid = data_oid(false), inode = vid_to_vdi_oid(0x42);
	struct sd_inode_header h = { .nr_copies = 3 };
	uint32_t entry = 0x42;

	ck_assert_int_eq(gateway_create(oid, 0, "a", 1, 0, 0, &snapshot), SD_RES_READONLY);
	ck_assert_int_eq(gateway_write(oid, "a", 1, 0, 0, &snapshot), SD_RES_READONLY);
	for (int node = 0; node < NR_NODES; node++)
		ck_assert_int_eq(nodes[node].nr_requests, 0);
	/* the inode: its map is frozen, its header (a tag) is not */
	ck_assert_int_eq(gateway_create(inode, 0, &h, sizeof(h), 0, 0, NULL), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_write(inode, &entry, 4, SD_INODE_HEADER_SIZE, 0, &snapshot),
			 SD_RES_READONLY);
	ck_assert_int_eq(gateway_write(inode, "tag", 3, 0, 0, &snapshot), SD_RES_SUCCESS);
	/* the daemon's own I/O is never refused */
	ck_assert_int_eq(gateway_write(inode, &entry, 4, SD_INODE_HEADER_SIZE, 0, NULL),
			 SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_discard_removes_own_objects)
{
	uint64_t inode = vid_to_vdi_oid(0x42);
	uint32_t map[4] = { 0x42, 0x42, 0x17, 0x42 }, zeros[3] = { 0 }, entry;
	int r[SD_MAX_COPIES];

	ck_assert_int_eq(
	    gateway_create(inode, 0, map, sizeof(map), SD_INODE_HEADER_SIZE, 0, &working),
	    SD_RES_SUCCESS);
	for (uint32_t idx = 0; idx < 4; idx++) {
		uint32_t vid = map[idx];

		ck_assert_int_eq(
		    gateway_create(vid_to_data_oid(vid, idx), 0, "d", 1, 0, 0, &working),
		    SD_RES_SUCCESS);
	}
	/* entries 0..2 zeroed: 0 and 1 are the VDI's own, 2 an ancestor's (0x17) */
	ck_assert_int_eq(
	    gateway_write(inode, zeros, sizeof(zeros), SD_INODE_HEADER_SIZE, 0, &working),
	    SD_RES_SUCCESS);
	for (uint32_t idx = 0; idx < 4; idx++) {
		uint64_t oid = vid_to_data_oid(map[idx], idx);
		bool gone = idx < 2;
		int n = replicas(oid, 3, r);

		for (int i = 0; i < n; i++)
			ck_assert_msg(holds(r[i], oid) == !gone, "object %u on node %d", idx, r[i]);
	}
	/* an entry zeroed by a write of three of its bytes only (0x42's are the first) */
	ck_assert_int_eq(gateway_write(inode, zeros, 3, SD_INODE_HEADER_SIZE + 4 * 3, 0,
				       &working),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_read(inode, &entry, 4, SD_INODE_HEADER_SIZE + 4 * 3, &working),
			 SD_RES_SUCCESS);
	ck_assert_uint_eq(entry, 0);
	for (int node = 0; node < NR_NODES; node++)
		ck_assert(!holds(node, vid_to_data_oid(0x42, 3)));
	/* a header write discards nothing */
	ck_assert_int_eq(gateway_create(vid_to_data_oid(0x42, 3), 0, "d", 1, 0, 0, &working),
			 SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_write(inode, "name", 4, 0, 0, &working), SD_RES_SUCCESS);
	replicas(vid_to_data_oid(0x42, 3), 3, r);
	ck_assert(holds(r[0], vid_to_data_oid(0x42, 3)));
}
END_TEST

START_TEST(test_cow_create)
{
	uint64_t src = vid_to_data_oid(0x17, 5), dst = vid_to_data_oid(0x42, 5);
	uint8_t *pattern = malloc(OBJ_SIZE), out[16];
	int r[SD_MAX_COPIES];

	for (uint32_t i = 0; i < OBJ_SIZE; i++)
		pattern[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(gateway_create(src, 0, pattern, OBJ_SIZE, 0, 0, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_create(dst, src, "NEW", 3, 100, GW_SYNC, &working),
			 SD_RES_SUCCESS);
	replicas(dst, 3, r);
	for (int i = 0; i < 3; i++) {
		const uint8_t *d = find(r[i], dst)->data;

		ck_assert(!memcmp(d, pattern, 100));
		ck_assert(!memcmp(d + 100, "NEW", 3));
		ck_assert(!memcmp(d + 103, pattern + 103, OBJ_SIZE - 103));
	}
	/* a source nobody can read */
	ck_assert_int_eq(gateway_create(vid_to_data_oid(0x42, 6), vid_to_data_oid(0x17, 6), "x", 1,
					0, 0, &working),
			 SD_RES_BASE_VDI_READ);
	/* the range must lie in the object */
	ck_assert_int_eq(gateway_create(dst, src, out, sizeof(out), OBJ_SIZE - 8, 0, &working),
			 SD_RES_INVALID_PARMS);
	free(pattern);
}
END_TEST

START_TEST(test_read_cached_local_only)
{
	uint64_t mine = data_oid(true), theirs = data_oid(false);
	char out[8];

	ck_assert_int_eq(gateway_create(mine, 0, "mine", 4, 0, 0, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_create(theirs, 0, "theirs", 6, 0, 0, &working), SD_RES_SUCCESS);
	ck_assert(gateway_read_cached(mine, out, 4, 0, &working));
	ck_assert(!memcmp(out, "mine", 4));
	ck_assert_int_eq(nr_cached_reads, 1);
	/* not this node's to read first: not even tried */
	ck_assert(!gateway_read_cached(theirs, out, 6, 0, &working));
	ck_assert_int_eq(nr_cached_reads, 1);
	/* too large for the main thread */
	ck_assert(!gateway_read_cached(mine, NULL, 1U << 20, 0, &working));
}
END_TEST

START_TEST(test_remove_missing_is_no_failure)
{
	uint64_t oid = data_oid(false);

	ck_assert_int_eq(gateway_remove(oid, &working), SD_RES_SUCCESS);
	ck_assert_int_eq(gateway_create(oid, 0, "r", 1, 0, 0, &working), SD_RES_SUCCESS);
	/* a copy on a node that the ring no longer names (not cleaned yet) goes too */
	memcpy(make(0, oid)->data, "r", 1);
	ck_assert_int_eq(gateway_remove(oid, &working), SD_RES_SUCCESS);
	for (int node = 0; node < NR_NODES; node++)
		ck_assert(!holds(node, oid));
	ck_assert_int_eq(gateway_flush(oid), SD_RES_SUCCESS);
}
END_TEST


int main(void)
{
	Suite *s = suite_create("gateway");
	TCase *tc = tcase_create("io");
	SRunner *sr;
	int nr_failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_write_every_replica);
	tcase_add_test(tc, test_copies_changed_retried);
	tcase_add_test(tc, test_scheme_from_attr);
	tcase_add_test(tc, test_write_too_few_nodes);
	tcase_add_test(tc, test_read_local_first_then_fail_over);
	tcase_add_test(tc, test_epoch_mismatch_retried);
	tcase_add_test(tc, test_frozen_snapshot);
	tcase_add_test(tc, test_discard_removes_own_objects);
	tcase_add_test(tc, test_cow_create);
	tcase_add_test(tc, test_read_cached_local_only);
	tcase_add_test(tc, test_remove_missing_is_no_failure);
	gateway_ec_tests(tc); /* test_gateway_ec.c */
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
