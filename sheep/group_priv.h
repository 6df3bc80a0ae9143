/*
 * What the group's files share (group.h is their public face):
 *   group.c          the state under group_cs_lock, the weights, the ring
 *                    of the current epoch, a membership change applied
 *   group_format.c   DIR/config, the clean stop, a member's history
 *                    checked and adopted
 *   group_members.c  the cluster driver's events, the start-time wait,
 *                    quorum, eviction, SET_VNODES delivered
 * group_format.c and group_members.c use group.c, never each other, and
 * group.c uses neither (tests/unit/layers.sh). Nothing outside sheep/group*.c
 * includes this header.
 */
#ifndef SHEEP_GROUP_PRIV_H
#define SHEEP_GROUP_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal_proto.h"
#include "group.h"

/* DIR/config: the format */
#define CONFIG_MAGIC UINT64_C(0x53444f47434f4e46) /* "SDOGCONF" */

struct sheep_disk_config {
	uint64_t magic;
	uint64_t ctime;
	uint8_t copies;
	uint8_t block_size_shift;
	uint8_t copy_policy; /* 0 in a config older than erasure-coded formats */
	uint8_t pad[5];
};

/*
 * group.c: the state, changed on the main thread (the format and the
 * adoption of a member's history on the cluster worker, both under the
 * lock); readers on other threads take group_cs_lock.
 */
extern struct cluster_state group_cs;
extern pthread_mutex_t group_cs_lock;
/* this node, as it joins (group_join) */
extern struct sd_node group_self_node;
/* main thread: a cluster shutdown was delivered (group_cluster_stopping) */
extern bool group_is_cluster_stopping;

/* caller holds group_cs_lock: a new ring for the current members and epoch */
void group_rebuild_ring(void);
/*
 * Main thread: the members are members[nr] now, and a new epoch begins
 * when the cluster is formatted and the list differs (see group.c). True
 * when one began.
 */
bool group_update_members(const struct sd_node *members, int nr);
/* this node waits for the nodes of its newest epoch (on), or serves (group_is_waiting) */
void group_set_waiting(bool on);

/*
 * The weights SET_VNODES set (group.c). set and forget: caller holds
 * group_cs_lock; with_weights takes it.
 */
void group_set_weight(const struct sd_node_id *nid, uint16_t nr_vnodes, bool ordered);
void group_forget_weight(const struct sd_node_id *nid);
/* main thread: members[nr] with the weights, in a buffer valid until the next call */
const struct sd_node *group_with_weights(const struct sd_node *members, int nr);
/* group_cs_lock held, joining: what a member's newest epoch says of the weights */
bool group_weights_agree(const struct sd_epoch_log *newest);
void group_take_weights(const struct sd_epoch_log *newest);

#endif
