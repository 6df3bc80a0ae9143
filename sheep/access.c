/*
 * Who may run which operation, by the source address of the connection.
 *
 * Three classes:
 * - public: the VDI protocol a hypervisor speaks (object I/O, VDI create,
 *   lock, lookup, list): open to every client, as sheepdog's was;
 * - admin: what changes or reveals the cluster (format, shutdown, VDI
 *   delete, trace, statistics, cluster and node state): loopback, the
 *   cluster's members, and the networks given by `--admin-allow CIDR`;
 * - member: what only a sheep sends another (peer object I/O, recovery's
 *   fetches, the lock and deletion state a joining node learns, header
 *   notifications): the members of the current node list, and loopback
 *   when a member itself is on loopback (a cluster on one host).
 *
 * A refusal is SD_RES_ACCESS_DENIED, logged once per client address per
 * minute with the number refused meanwhile. Everything here runs on the
 * main thread (dispatch), so the tables need no lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include "net.h"
#include "sheep_priv.h"

#define MAX_ALLOW 32

struct allow_net {
	uint8_t addr[16];
	unsigned prefix; /* bits of addr that must match, 0-128 */
};

static struct allow_net allow[MAX_ALLOW];
static int nr_allow;

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, bytes))
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));

	return (a[bytes] & mask) == (b[bytes] & mask);
}

int access_allow_add(const char *cidr)
{
	char host[64];
	const char *slash = strchr(cidr, '/');
	size_t len = slash ? (size_t)(slash - cidr) : strlen(cidr);
	struct allow_net n;
	uint64_t bits;
	bool v4;

	if (nr_allow == MAX_ALLOW || len == 0 || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, cidr, len);
	host[len] = '\0';
	if (sd_str_to_addr(host, n.addr))
		return -EINVAL;
	v4 = !memcmp(n.addr, v4mapped, sizeof(v4mapped)) && !strchr(host, ':');
	if (!slash)
		bits = v4 ? 32 : 128;
	else if (sd_parse_uint(slash + 1, 0, v4 ? 32 : 128, &bits))
		return -EINVAL;
	n.prefix = (unsigned)bits + (v4 ? 96 : 0);
	allow[nr_allow++] = n;
	return 0;
}

enum access_class access_class_of(const struct sd_op_template *op)
{
	if (op->type == OP_PEER || op->type == OP_FETCH)
		return ACCESS_MEMBER;
	switch (op->opcode) {
	case SD_OP_NOTIFY_VDI_HEADER:
	case SD_OP_GET_VDI_LOCKS:
	case SD_OP_GET_DELETED:
		return ACCESS_MEMBER;
	case SD_OP_DEL_VDI:
		return ACCESS_ADMIN;
	}
	return op->opcode >= 0x80 ? ACCESS_ADMIN : ACCESS_PUBLIC;
}

static bool allowed_admin_net(const uint8_t addr[16])
{
	for (int i = 0; i < nr_allow; i++)
		if (prefix_match(addr, allow[i].addr, allow[i].prefix))
			return true;
	return false;
}

int access_check(const struct sd_op_template *op, const uint8_t addr[16])
{
	enum access_class c = access_class_of(op);
	bool lo_member;

	if (c == ACCESS_PUBLIC)
		return SD_RES_SUCCESS;
	if (group_has_member_addr(addr, &lo_member))
		return SD_RES_SUCCESS;
	if (sd_addr_is_loopback(addr) && (c == ACCESS_ADMIN || lo_member))
		return SD_RES_SUCCESS;
	if (c == ACCESS_ADMIN && allowed_admin_net(addr))
		return SD_RES_SUCCESS;
	return SD_RES_ACCESS_DENIED;
}

/* the refusal log: one line per client address per minute */
#define LOG_SLOTS 64
#define LOG_PERIOD_S 60

struct refusal_slot {
	uint8_t addr[16];
	bool used;
	time_t last;	/* when a line was last written for this address */
	uint64_t quiet; /* refusals since, not logged */
};

static struct refusal_slot slots[LOG_SLOTS];
static uint64_t nr_refused;

uint64_t access_nr_refused(void)
{
	return nr_refused;
}

void access_log_refusal(const struct sd_op_template *op, const uint8_t addr[16])
{
	struct timespec ts;
	struct refusal_slot *s = NULL, *oldest = &slots[0];
	char who[INET6_ADDRSTRLEN + 8];

	nr_refused++;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (int i = 0; i < LOG_SLOTS; i++) {
		if (slots[i].used && !memcmp(slots[i].addr, addr, 16)) {
			s = &slots[i];
			break;
		}
		if (!slots[i].used || (oldest->used && slots[i].last < oldest->last))
			oldest = &slots[i];
	}
	if (s && ts.tv_sec - s->last < LOG_PERIOD_S) {
		s->quiet++;
		return;
	}
	if (!s) {
		/* a new address takes a free slot or the one logged longest ago */
		s = oldest;
		memcpy(s->addr, addr, 16);
		s->used = true;
		s->quiet = 0;
	}
	sd_addr_to_str(addr, 0, who, sizeof(who));
	/* the port is meaningless here: drop ":0" */
	who[strlen(who) - 2] = '\0';
	if (s->quiet)
		sd_warn("refused %s from %s: %s (and %" PRIu64 " more from it in the last minute)",
			op->name, who,
			access_class_of(op) == ACCESS_MEMBER ? "not a cluster member"
							     : "not allowed to administer",
			s->quiet);
	else
		sd_warn("refused %s from %s: %s", op->name, who,
			access_class_of(op) == ACCESS_MEMBER
			    ? "not a cluster member"
			    : "not allowed to administer (see sheep --admin-allow)");
	s->last = ts.tv_sec;
	s->quiet = 0;
}
