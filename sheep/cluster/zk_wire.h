/*
 * The zookeeper driver's data: its option, and what it stores in znodes.
 * No ZooKeeper client here, so the fuzz harness and the unit tests use it
 * alone. Every function is pure: it reads its arguments, fills its
 * outputs, and touches nothing else. The layout of the znodes and why
 * they order what they order: zookeeper.c.
 *
 * Every record is native-endian, like the corosync driver's messages:
 * the members of one cluster run one build on one architecture.
 */
#ifndef ZK_WIRE_H
#define ZK_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal_proto.h"

#define ZK_MAGIC 0x315a4453U	    /* "SDZ1" */
#define ZK_DEFAULT_HOSTS "127.0.0.1:2181"
#define ZK_DEFAULT_BASE "/sheepdog"
#define ZK_MAX_HOSTS_LEN 1024
#define ZK_MAX_BASE_LEN 200
#define ZK_MIN_TIMEOUT_S 1
#define ZK_MAX_TIMEOUT_S 600
/*
 * A queue entry is one znode, and a ZooKeeper server refuses a request
 * larger than its jute.maxbuffer (1 MiB - 1 by default): a message above
 * this is refused with -EMSGSIZE (the daemon's are under 1 KiB)
 */
#define ZK_MAX_MSG_LEN (1024 * 1024 - 8192)

/* sheep -c zookeeper:OPTION, parsed */
struct zk_config {
	char hosts[ZK_MAX_HOSTS_LEN]; /* HOST:PORT[,HOST:PORT...] for zookeeper_init */
	char base[ZK_MAX_BASE_LEN];   /* the cluster's znode: /sheepdog, or /PATH */
	unsigned int timeout_ms;      /* the session timeout; 0: the heartbeat timeout */
};

/*
 * "HOST:PORT[,HOST:PORT...][/PATH][,timeout=S]" (NULL or "": the defaults).
 * A HOST is a name or an IPv4 address, or [IPv6]; PORT 1-65535; /PATH
 * (after the last server) names the cluster's znode, letters, digits and
 * "-_." in components, so that several clusters share one ensemble. 0, or
 * -EINVAL with a one-line reason in err.
 */
int zk_parse_option(const char *option, struct zk_config *cfg, char *err, size_t err_len);

/* the sequence number at the end of a sequential znode's name, or -1 */
int64_t zk_seq_of(const char *name);

enum zk_rec_type {
	ZK_REC_JOIN = 1, /* id joined; the list after it follows */
	ZK_REC_LEAVE,	 /* id left; the list after it follows */
	ZK_REC_NOTIFY,	 /* a message of id follows */
};

/* a member in a list: its id is the sequence number of its member znode */
struct zk_member {
	uint64_t id;
	struct sd_node node;
};

/* a queue entry: the header, nr members (JOIN, LEAVE), then len bytes (NOTIFY) */
struct zk_rec {
	uint32_t magic;
	uint16_t type;
	uint16_t nr;
	uint32_t len;
	uint32_t pad;
	uint64_t id;
};

/* the data of BASE/view: the header (type 0, id 0), then nr members */

/* the data of a member znode */
#define ZK_MEMBER_JOINED 1 /* progress is known: the member's JOIN has committed */
struct zk_member_data {
	uint32_t magic;
	uint32_t flags;
	uint64_t progress; /* the member delivered every entry up to this sequence */
	struct sd_node node;
};

/*
 * Encode into buf (len bytes): the bytes written, or 0 when it does not
 * fit. A list is at most SD_MAX_NODES members.
 */
size_t zk_encode_rec(void *buf, size_t len, uint16_t type, uint64_t id,
		     const struct zk_member *list, int nr, const void *msg, size_t msg_len);
static inline size_t zk_encode_view(void *buf, size_t len, const struct zk_member *list, int nr)
{
	return zk_encode_rec(buf, len, 0, 0, list, nr, NULL, 0);
}

/*
 * Decode what a znode held: 0 and the parts (pointers into buf), or
 * -EINVAL for anything malformed: a bad magic, type or length, more than
 * SD_MAX_NODES members, a list that holds one id twice. is_view: buf is
 * BASE/view's (type 0, no message).
 */
struct zk_decoded {
	uint16_t type;
	uint64_t id;
	int nr;
	const struct zk_member *list; /* unaligned in buf: copy before use */
	const void *msg;
	size_t msg_len;
};
int zk_decode_rec(const void *buf, size_t len, bool is_view, struct zk_decoded *out);
/* copy a decoded list out (nr entries) */
void zk_copy_list(struct zk_member *dst, const struct zk_decoded *d);

/* the index of id in list, or -1 */
int zk_find(const struct zk_member *list, int nr, uint64_t id);

#endif
