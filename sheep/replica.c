/*
 * This node's copy of an object: the writes and creates that the gateway
 * applies to it (locally, or through a peer op), the fetch of an object
 * that this node should hold and does not have yet, and the per-object
 * lock that orders the creates and fetches of an object with each other.
 *
 * Creation is atomic with respect to every other write of the object: the
 * first create of an object on a node makes it; a create that finds the
 * object there (two clients raced to allocate it, two gateways raced on the
 * replicas) applies as a write of its client's range only. A create's
 * payload initialises the object: the client's range over zeros, or for a
 * copy-on-write the whole source object with the client's range applied.
 * The source is frozen (a snapshot's), so every creator starts from the
 * same bytes, and whichever create comes first on a node, each node ends
 * with the initial bytes plus every create's range: the replicas agree.
 * (A create can find an object there for no race only if a discard left it
 * behind: the gateway removes the objects that a discard unmaps, so that a
 * later create starts from zeros.)
 *
 * Plain writes take no lock: a write finds the object (it was acknowledged
 * before a client could send a write to it), or it is missing here (the
 * epoch changed and recovery has not fetched it yet) and replica_write
 * fetches it whole first, under the object's lock, which recovery's
 * background fetch takes too: the object is fetched once and the write
 * lands on top of it (a data object's copy and the write are stored in
 * one durable create).
 *
 * A fetch asks the nodes in the replica iterator's order (the ring's
 * replicas first: they got every write since the epoch began), and only
 * when no node has a live copy, a stale one (a copy set aside at a rejoin
 * may lack writes, but it beats none). An inode fetched is news for the
 * VDI table above (replica_set_inode_fetched). A write's fetch goes ahead
 * of recovery's on the holder (FETCH_PEER_NOW): recovery fetches objects
 * by the hundred after an epoch change, and a client's write waited behind
 * them (tests/bench/epoch-change).
 *
 * The locks are striped: objects that share a stripe only wait for each
 * other's creates and fetches, never for their writes.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "internal_proto.h"
#include "ec.h"
#include "deleted.h"
#include "group.h"
#include "lock.h"
#include "peer_io.h"
#include "peer_iter.h"
#include "replica.h"
#include "vdi_table.h"
#include "store/store.h"

#define NR_OID_LOCKS 256

static pthread_mutex_t oid_locks[NR_OID_LOCKS] = { [0 ... NR_OID_LOCKS - 1] =
						       PTHREAD_MUTEX_INITIALIZER };
static void (*inode_fetched_fn)(uint32_t vid, const struct sd_inode_header *h);

pthread_mutex_t *replica_oid_lock(uint64_t oid)
{
	return &oid_locks[(oid ^ (oid >> 32)) % NR_OID_LOCKS];
}

void replica_set_inode_fetched(void (*fn)(uint32_t vid, const struct sd_inode_header *h))
{
	inode_fetched_fn = fn;
}

uint32_t replica_object_size(uint64_t oid)
{
	struct cluster_state *cs;
	uint8_t shift = 0;
	bool snapshot;
	int d, p;

	if (is_vdi_obj(oid))
		return SD_INODE_SIZE;
	if (vdi_lookup_attr(oid_to_vid(oid), &shift, &snapshot) != SD_RES_SUCCESS ||
	    shift < SD_MIN_BLOCK_SIZE_SHIFT || shift > SD_MAX_BLOCK_SIZE_SHIFT) {
		cs = malloc(sizeof(*cs));
		if (cs) {
			group_get_state(cs);
			shift = cs->block_size_shift;
			free(cs);
		}
	}
	if (shift < SD_MIN_BLOCK_SIZE_SHIFT || shift > SD_MAX_BLOCK_SIZE_SHIFT)
		shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	/* a strip of an erasure-coded object: 1 / D of it */
	if (ec_oid_strip(oid) >= 0 && ec_policy_to_dp(vdi_copy_policy(oid_to_vid(oid)), &d, &p))
		return ec_strip_len(UINT32_C(1) << shift, d);
	return UINT32_C(1) << shift;
}

/*
 * One node's copy of oid into buf[size]. now: a write waits on it
 * (FETCH_PEER_NOW, ahead of the holder's recovery fetches), else
 * recovery's FETCH_PEER. A holder too old to know FETCH_PEER_NOW answers
 * INVALID_PARMS: asked again the old way (a valid fetch is never refused
 * so by a sheep that knows it).
 */
static int fetch_from(const struct sd_node_id *nid, uint64_t oid, int copies, bool stale, bool now,
		      void *buf, uint32_t size)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER,
			     .opcode = now ? SD_OP_FETCH_PEER_NOW : SD_OP_FETCH_PEER,
			     .flags = stale ? SD_FLAG_CMD_STALE : 0,
			     .data_length = size };
	struct sd_rsp rsp;

	rq.obj.oid = oid;
	/* the holder refuses it while it places the VDI with another count (peer.c) */
	rq.obj.copies = (uint8_t)(copies > 0 ? copies : 0);
	if (peer_request(nid, &rq, NULL, buf, &rsp))
		return SD_RES_EIO;
	if (now && rsp.result == SD_RES_INVALID_PARMS)
		return fetch_from(nid, oid, copies, stale, false, buf, size);
	if (rsp.result == SD_RES_SUCCESS && rsp.data_length != size)
		return SD_RES_EIO;
	return (int)rsp.result;
}

/*
 * The length of buf without its trailing zeros: what past the end of an
 * object reads as zeros need not be stored (an inode is mostly zeros).
 */
static uint32_t trimmed_len(const void *buf, uint32_t len)
{
	const uint8_t *p = buf;

	while (len >= 8 && !*(const uint64_t *)(p + len - 8) && !((uintptr_t)(p + len) & 7))
		len -= 8;
	while (len && !p[len - 1])
		len--;
	return len;
}

/*
 * Try the nodes in mask (a bit per ring node), in the replica iterator's
 * order. SD_RES_SUCCESS, SD_RES_NO_OBJ when every node answered that it
 * has none, or the last other failure.
 */
static int fetch_any(const struct epoch_ring *er, uint64_t oid, uint64_t mask, bool stale,
		     bool now, void *buf, uint32_t size)
{
	int copies = vdi_copies(oid_to_vid(oid)), ret = SD_RES_NO_OBJ, node;
	uint64_t skip = ~mask;
	struct peer_iter it;

	if (er->local_idx >= 0)
		skip |= UINT64_C(1) << er->local_idx;
	peer_iter_init(&it, er, oid, copies > 0 ? copies : group_copies(), false, skip);
	while ((node = peer_iter_next(&it)) >= 0) {
		int r = fetch_from(&er->ring.nodes[node].nid, oid, copies, stale, now, buf, size);

		if (r == SD_RES_SUCCESS)
			return r;
		if (r != SD_RES_NO_OBJ)
			ret = r;
	}
	return ret;
}

/*
 * A copy of oid into buf[size]: a live one from the nodes in live, else a
 * stale one from the nodes in stale or this node's own (now: for a write,
 * see fetch_from). SD_RES_NO_OBJ when there is none.
 */
static int fetch_copy(const struct epoch_ring *er, uint64_t oid, uint64_t live, uint64_t stale,
		      bool now, void *buf, uint32_t size)
{
	int ret = SD_RES_NO_OBJ;

	if (live)
		ret = fetch_any(er, oid, live, false, now, buf, size);
	if (ret == SD_RES_NO_OBJ && stale) {
		ret = fetch_any(er, oid, stale, true, now, buf, size);
		if (ret == SD_RES_NO_OBJ &&
		    sd_store->read_stale(oid, buf, size, 0) == SD_RES_SUCCESS)
			ret = SD_RES_SUCCESS;
		if (ret == SD_RES_SUCCESS)
			sd_warn("%016" PRIx64
				": no node has a live copy; recovered from a stale one",
				oid);
	}
	return ret;
}

/*
 * Store buf[size], oid's fetched bytes, as this node's copy. Its VDI may
 * have been deleted while it was fetched: the delete's own removal may have
 * passed already. Recorded before that removal, so either it sees this
 * copy or this check sees the record.
 */
static int store_fetched(uint64_t oid, const void *buf, uint32_t size, bool sync)
{
	int ret = sd_store->create_and_write(oid, 0, buf, trimmed_len(buf, size), 0, sync);

	if (ret == SD_RES_SUCCESS && deleted_has(oid)) {
		sd_store->remove(oid);
		ret = SD_RES_NO_OBJ;
	}
	return ret;
}

static int fetch_object(const struct epoch_ring *er, uint64_t oid, uint64_t live, uint64_t stale,
			bool sync, bool now)
{
	uint32_t size = replica_object_size(oid);
	int ret;
	void *buf;

	if (sd_store->exist(oid))
		return SD_RES_SUCCESS;
	/* its VDI was deleted: any copy left somewhere is garbage */
	if (deleted_has(oid))
		return SD_RES_NO_OBJ;
	buf = malloc(size);
	if (!buf)
		return SD_RES_NO_MEM;
	ret = fetch_copy(er, oid, live, stale, now, buf, size);
	if (ret == SD_RES_SUCCESS)
		ret = store_fetched(oid, buf, size, sync);
	/* a node that restarted alone may not have known this VDI */
	if (ret == SD_RES_SUCCESS && is_vdi_obj(oid) && inode_fetched_fn)
		inode_fetched_fn(oid_to_vid(oid), buf);
	free(buf);
	return ret;
}

int replica_fetch(const struct epoch_ring *er, uint64_t oid, uint64_t live, uint64_t stale,
		  bool sync)
{
	return fetch_object(er, oid, live, stale, sync, false);
}

/*
 * A write to a data object missing here (caller holds its lock): the
 * fetched copy with the write applied, stored at once (one durable write
 * of the object, not the copy's and then the write's: an epoch change's
 * first writes to moved objects wait for it).
 */
static int fetch_and_write(const struct epoch_ring *er, uint64_t oid, const void *wbuf,
			   uint32_t len, uint64_t off)
{
	uint32_t size = replica_object_size(oid);
	int ret;
	char *buf;

	if (deleted_has(oid))
		return SD_RES_NO_OBJ;
	if (off > size || len > size - off)
		return SD_RES_INVALID_PARMS;
	buf = malloc(size);
	if (!buf)
		return SD_RES_NO_MEM;
	ret = fetch_copy(er, oid, ~UINT64_C(0), ~UINT64_C(0), true, buf, size);
	if (ret == SD_RES_SUCCESS) {
		memcpy(buf + off, wbuf, len);
		/* durable whatever the write's flag: it holds the copy's acknowledged bytes */
		ret = store_fetched(oid, buf, size, true);
	}
	free(buf);
	return ret;
}

int replica_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, bool sync)
{
	pthread_mutex_t *lock = replica_oid_lock(oid);
	struct epoch_ring *er;
	int ret;

	/* the common case costs nothing more: the object is here */
	ret = sd_store->write(oid, buf, len, off, sync);
	if (ret != SD_RES_NO_OBJ)
		return ret;
	er = group_ring_get();
	if (!er)
		return SD_RES_NO_MEM;
	pthread_mutex_lock(lock);
	if (sd_store->exist(oid)) {
		/* fetched meanwhile (recovery, another write) */
		ret = sd_store->write(oid, buf, len, off, sync);
	} else if (is_vdi_obj(oid)) {
		/* an inode: fetched as it is, news for the VDI table, then written */
		ret = fetch_object(er, oid, ~UINT64_C(0), ~UINT64_C(0), true, true);
		if (ret == SD_RES_SUCCESS)
			ret = sd_store->write(oid, buf, len, off, sync);
	} else {
		ret = fetch_and_write(er, oid, buf, len, off);
	}
	pthread_mutex_unlock(lock);
	group_ring_put(er);
	return ret;
}

int replica_create_and_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off,
			     uint64_t wr_off, uint32_t wr_len, bool sync)
{
	pthread_mutex_t *lock = replica_oid_lock(oid);
	const char *wr_buf;
	int ret;

	if (wr_off < off || wr_off + wr_len > off + len)
		return SD_RES_INVALID_PARMS;
	wr_buf = (const char *)buf + (wr_off - off);
	pthread_mutex_lock(lock);
	if (sd_store->exist(oid))
		ret = sd_store->write(oid, wr_buf, wr_len, wr_off, sync);
	else
		ret = sd_store->create_and_write(oid, 0, buf, len, off, sync);
	pthread_mutex_unlock(lock);
	return ret;
}

int replica_remove(uint64_t oid)
{
	pthread_mutex_t *lock = replica_oid_lock(oid);
	int ret;

	pthread_mutex_lock(lock);
	ret = sd_store->remove(oid);
	pthread_mutex_unlock(lock);
	return ret;
}

/* what a flush makes durable on this node: a VDI's writes (oid names the VDI), or everything */
int replica_flush(uint64_t oid)
{
	uint32_t vid = oid_to_vid(oid);

	return vid ? sd_store->flush_vdi(vid) : sd_store->flush();
}
