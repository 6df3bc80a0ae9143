/*
 * The VDI locks that clients of the sheepdog protocol took through this
 * node, bound to the connections that do the VDI's I/O (main thread only).
 *
 * QEMU locks a VDI on a short control connection and does its I/O on
 * another, which it opened before the lock and keeps open for as long as
 * the disk is open; a reopen opens a new I/O connection before it closes
 * the old one (PROTOCOL.md, "Connection model"). So a lock taken by a
 * client at address A is bound at first to every connection from A that
 * is open then and never spoke the internal protocol (the candidates:
 * QEMU's I/O connection is among them; sheep and collie are not), then, at
 * the first I/O on the VDI through one of them, to that one; a later
 * connection from A that does I/O on the VDI joins it (a reopen's). When
 * the last connection the lock is bound to closes, the client is gone: the
 * lock is released through the cluster's order, as the client's own
 * RELEASE_VDI would.
 *
 * The lock's owner, cluster-wide, is this node, A and a token: the id of
 * the connection that sent the LOCK_VDI. A RELEASE_VDI from A that names
 * the VDI (by vid: a snapshot has its name) is its owner's (QEMU sends it on yet another connection): the
 * front end gives it the binding's token.
 *
 * Every entry point is cheap when nothing is bound here: a count test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "list.h"
#include "logger.h"
#include "client_lock.h"

#define NR_BUCKETS 64

struct binding {
	struct list_node link; /* in its bucket */
	uint32_t vid;
	uint8_t addr[16];
	uint64_t token; /* the owner's (sd_lock_owner.conn) */
	char name[SD_MAX_VDI_LEN];
	bool narrowed; /* bound to connections that did I/O on the VDI */
	int nr_conns, cap_conns;
	uint64_t *conns;
};

static struct list_head buckets[NR_BUCKETS];
static int nr_bindings;
static void (*release_fn)(uint32_t vid, const uint8_t addr[16], uint64_t token, const char *name);

void client_lock_init(void (*release)(uint32_t vid, const uint8_t addr[16], uint64_t token,
				      const char *name))
{
	for (int i = 0; i < NR_BUCKETS; i++)
		INIT_LIST_HEAD(&buckets[i]);
	release_fn = release;
}

static struct binding *find(uint32_t vid)
{
	struct binding *b;

	list_for_each_entry(b, &buckets[vid % NR_BUCKETS], link)
		if (b->vid == vid)
			return b;
	return NULL;
}

static bool add_conn(struct binding *b, uint64_t conn)
{
	for (int i = 0; i < b->nr_conns; i++)
		if (b->conns[i] == conn)
			return true;
	if (b->nr_conns == b->cap_conns) {
		int cap = b->cap_conns ? b->cap_conns * 2 : 4;
		uint64_t *c = realloc(b->conns, cap * sizeof(*c));

		if (!c)
			return false;
		b->conns = c;
		b->cap_conns = cap;
	}
	b->conns[b->nr_conns++] = conn;
	return true;
}

static void drop(struct binding *b)
{
	list_del(&b->link);
	nr_bindings--;
	free(b->conns);
	free(b);
}

void client_lock_taken(uint32_t vid, const uint8_t addr[16], uint64_t token, const char *name,
		       const uint64_t *conns, int nr)
{
	struct binding *b = find(vid);

	if (b) /* its holder locked it again (a reopen through this node): bind anew */
		drop(b);
	b = calloc(1, sizeof(*b));
	if (!b) {
		sd_err("out of memory: the lock of vid %06x stays until unlocked", vid);
		return;
	}
	b->vid = vid;
	b->token = token;
	memcpy(b->addr, addr, 16);
	snprintf(b->name, sizeof(b->name), "%s", name);
	for (int i = 0; i < nr; i++)
		add_conn(b, conns[i]);
	INIT_LIST_NODE(&b->link);
	list_add_tail(&b->link, &buckets[vid % NR_BUCKETS]);
	nr_bindings++;
}

void client_lock_io(uint64_t conn, const uint8_t addr[16], uint32_t vid)
{
	struct binding *b;

	if (!nr_bindings)
		return;
	b = find(vid);
	if (!b || memcmp(b->addr, addr, 16))
		return;
	/*
	 * Narrowed to a candidate only (a tool on the client's host that reads
	 * the VDI, collie's check or backup, must not take the binding from
	 * the VM); once narrowed, a connection that does I/O joins (a reopen's)
	 */
	if (!b->narrowed) {
		int i;

		for (i = 0; i < b->nr_conns && b->conns[i] != conn; i++)
			;
		if (i == b->nr_conns)
			return;
		b->narrowed = true;
		b->conns[0] = conn;
		b->nr_conns = 1;
		return;
	}
	add_conn(b, conn);
}

uint64_t client_lock_token(uint32_t vid, const uint8_t addr[16])
{
	struct binding *b = nr_bindings ? find(vid) : NULL;

	return b && !memcmp(b->addr, addr, 16) ? b->token : 0;
}

void client_lock_moved(uint32_t from, uint32_t to)
{
	struct binding *b = nr_bindings ? find(from) : NULL;

	if (!b)
		return;
	if (find(to)) /* cannot be: to is new; keep the older binding */
		return;
	list_del(&b->link);
	b->vid = to;
	list_add_tail(&b->link, &buckets[to % NR_BUCKETS]);
}

void client_lock_dropped(uint32_t vid)
{
	struct binding *b = nr_bindings ? find(vid) : NULL;

	if (b)
		drop(b);
}

int client_lock_conns(uint32_t vid, uint64_t *conns, int max)
{
	struct binding *b = nr_bindings ? find(vid) : NULL;
	int n = 0;

	for (int i = 0; b && i < b->nr_conns && n < max; i++)
		conns[n++] = b->conns[i];
	return n;
}

void client_lock_closed(uint64_t conn)
{
	if (!nr_bindings)
		return;
	for (int k = 0; k < NR_BUCKETS; k++) {
		struct binding *b, *next;

		list_for_each_entry_safe(b, next, &buckets[k], link) {
			int i;

			for (i = 0; i < b->nr_conns && b->conns[i] != conn; i++)
				;
			if (i == b->nr_conns)
				continue;
			b->conns[i] = b->conns[--b->nr_conns];
			if (b->nr_conns)
				continue;
			sd_info("vid %06x: the client that locked it through this node is gone: "
				"releasing its lock",
				b->vid);
			if (release_fn)
				release_fn(b->vid, b->addr, b->token, b->name);
			drop(b);
		}
	}
}
