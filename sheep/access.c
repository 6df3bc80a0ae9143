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
 * minute with the number refused meanwhile.
 *
 * The other listeners are checked per connection, when it is accepted:
 * - /metrics (--metrics) is an admin view: the admin rule above;
 * - NBD (--nbd) serves every VDI, read and write, with no authentication
 *   of its own: loopback, and the networks given by `--nbd-allow CIDR`. A
 *   member is not implied (members are sheep, not NBD clients); an
 *   operator who binds NBD to a public address says who may use it.
 * A refused connection is closed (/metrics answers its request 403) and logged
 * like a refused request, once per client, service and minute.
 *
 * Everything here runs on the main thread (dispatch, accept), so the
 * tables need no lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "net.h"
#include "access.h"
#include "group.h"
#include "ops.h"

#define MAX_ALLOW 32

struct allow_net {
	uint8_t addr[16];
	unsigned prefix; /* bits of addr that must match, 0-128 */
};

static struct allow_net allow[MAX_ALLOW], nbd_allow[MAX_ALLOW];
static int nr_allow, nr_nbd_allow;

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

static int allow_add(struct allow_net *list, int *nr, const char *cidr)
{
	char host[64];
	const char *slash = strchr(cidr, '/');
	size_t len = slash ? (size_t)(slash - cidr) : strlen(cidr);
	struct allow_net n;
	uint64_t bits;
	bool v4;

	if (*nr == MAX_ALLOW || len == 0 || len >= sizeof(host))
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
	list[(*nr)++] = n;
	return 0;
}

int access_allow_add(const char *cidr)
{
	return allow_add(allow, &nr_allow, cidr);
}

int access_nbd_allow_add(const char *cidr)
{
	return allow_add(nbd_allow, &nr_nbd_allow, cidr);
}

int access_nbd_nr_allow(void)
{
	return nr_nbd_allow;
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

static bool allowed_net(const struct allow_net *list, int nr, const uint8_t addr[16])
{
	for (int i = 0; i < nr; i++)
		if (prefix_match(addr, list[i].addr, list[i].prefix))
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
	if (c == ACCESS_ADMIN && allowed_net(allow, nr_allow, addr))
		return SD_RES_SUCCESS;
	return SD_RES_ACCESS_DENIED;
}

/* the refusal log: one line per client address (and service) per minute */
#define LOG_SLOTS 64
#define LOG_PERIOD_S 60

struct refusal_slot {
	uint8_t addr[16];
	int kind; /* what was refused: 0 an op, else enum access_service + 1 */
	bool used;
	time_t last;	/* when a line was last written for this address */
	uint64_t quiet; /* refusals since, not logged */
};

static struct refusal_slot slots[LOG_SLOTS];
static uint64_t nr_refused, nr_conns_refused;

uint64_t access_nr_refused(void)
{
	return nr_refused;
}

uint64_t access_nr_conns_refused(void)
{
	return nr_conns_refused;
}

/*
 * The slot of (addr, kind) when a line is due now, NULL while its minute
 * runs (the refusal is counted in it).
 */
static struct refusal_slot *log_due(const uint8_t addr[16], int kind, uint64_t *quiet)
{
	struct timespec ts;
	struct refusal_slot *s = NULL, *oldest = &slots[0];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (int i = 0; i < LOG_SLOTS; i++) {
		if (slots[i].used && slots[i].kind == kind && !memcmp(slots[i].addr, addr, 16)) {
			s = &slots[i];
			break;
		}
		if (!slots[i].used || (oldest->used && slots[i].last < oldest->last))
			oldest = &slots[i];
	}
	if (s && ts.tv_sec - s->last < LOG_PERIOD_S) {
		s->quiet++;
		return NULL;
	}
	if (!s) {
		/* a new address takes a free slot or the one logged longest ago */
		s = oldest;
		memcpy(s->addr, addr, 16);
		s->kind = kind;
		s->used = true;
		s->quiet = 0;
	}
	*quiet = s->quiet;
	s->last = ts.tv_sec;
	s->quiet = 0;
	return s;
}

static void addr_str(const uint8_t addr[16], char *who, size_t len)
{
	sd_addr_to_str(addr, 0, who, len);
	/* the port is meaningless here: drop ":0" */
	who[strlen(who) - 2] = '\0';
}

void access_log_refusal(const struct sd_op_template *op, const uint8_t addr[16])
{
	char who[INET6_ADDRSTRLEN + 8];
	uint64_t quiet;

	nr_refused++;
	if (!log_due(addr, 0, &quiet))
		return;
	addr_str(addr, who, sizeof(who));
	if (quiet)
		sd_warn("refused %s from %s: %s (and %" PRIu64 " more from it in the last minute)",
			op->name, who,
			access_class_of(op) == ACCESS_MEMBER ? "not a cluster member"
							     : "not allowed to administer",
			quiet);
	else
		sd_warn("refused %s from %s: %s", op->name, who,
			access_class_of(op) == ACCESS_MEMBER
			    ? "not a cluster member"
			    : "not allowed to administer (see sheep --admin-allow)");
}

bool access_conn_ok(enum access_service svc, int fd)
{
	static const char *const names[] = {
		[ACCESS_NBD] = "an NBD", [ACCESS_METRICS] = "a /metrics"
	};
	static const char *const why[] = {
		[ACCESS_NBD] = "not loopback nor in an --nbd-allow network",
		[ACCESS_METRICS] = "not allowed to administer (see sheep --admin-allow)",
	};
	uint8_t addr[16];
	char who[INET6_ADDRSTRLEN + 8] = "an unknown address";
	bool ok = false, lo_member, known = sd_peer_addr(fd, addr, NULL) == 0;
	uint64_t quiet;

	if (known) {
		if (sd_addr_is_loopback(addr))
			return true;
		if (svc == ACCESS_NBD)
			ok = allowed_net(nbd_allow, nr_nbd_allow, addr);
		else
			ok = group_has_member_addr(addr, &lo_member) ||
			     allowed_net(allow, nr_allow, addr);
	}
	if (ok)
		return true;
	nr_conns_refused++;
	if (!known)
		memset(addr, 0, sizeof(addr));
	if (!log_due(addr, svc + 1, &quiet))
		return false;
	if (known)
		addr_str(addr, who, sizeof(who));
	if (quiet)
		sd_warn("refused %s connection from %s: %s (and %" PRIu64
			" more from it in the last minute)",
			names[svc], who, why[svc], quiet);
	else
		sd_warn("refused %s connection from %s: %s", names[svc], who, why[svc]);
	return false;
}
