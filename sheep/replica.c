/*
 * This node's copy of an object: what a create from the gateway (local, or
 * through a peer request) does to it, and the per-object lock that orders
 * the creates of an object with each other and with recovery's fetch of it.
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
 *
 * Plain writes take no lock: a write finds the object (it was acknowledged
 * before a client could send a write to it), or it is missing here and
 * recovery_write fetches it under the same lock first.
 *
 * The locks are striped: objects that share a stripe only wait for each
 * other's creates, never for their writes.
 */
#include <inttypes.h>

#include "sheep_priv.h"
#include "store/store.h"

#define NR_OID_LOCKS 256

static pthread_mutex_t oid_locks[NR_OID_LOCKS] = { [0 ... NR_OID_LOCKS - 1] =
						       PTHREAD_MUTEX_INITIALIZER };

pthread_mutex_t *replica_oid_lock(uint64_t oid)
{
	return &oid_locks[(oid ^ (oid >> 32)) % NR_OID_LOCKS];
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

/* what a flush makes durable on this node: a VDI's writes (oid names the VDI), or everything */
int replica_flush(uint64_t oid)
{
	uint32_t vid = oid_to_vid(oid);

	return vid ? sd_store->flush_vdi(vid) : sd_store->flush();
}
