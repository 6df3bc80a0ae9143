/*
 * The group's files under DIR (group_disk.c), for group*.c: paths, whole
 * small files, the epoch logs and the comparison of two epoch histories.
 * Not for other layers: group.h's group_read_epoch_logs() and
 * group_write_file() are.
 */
#ifndef GROUP_DISK_H
#define GROUP_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal_proto.h"

/* DIR is dir from now on (group_init) */
void gd_init(const char *dir);
/* DIR/name into buf */
void gd_path(char *buf, size_t len, const char *name);
/* len bytes of path (all of them, or an error): 0 or -errno */
int gd_read_file(const char *path, void *buf, size_t len);
/* epoch's log with these nodes, written whole and durably: 0 or -errno */
int gd_write_epoch_log(uint32_t epoch, const struct sd_node *nodes, int nr);
/* 0, or -errno; -EINVAL for a file that is not epoch's log */
int gd_read_epoch_log(uint32_t epoch, struct sd_epoch_log *log);
/* the newest epoch with a log in DIR/epoch (0: none) */
uint32_t gd_latest_epoch(void);
/* fsync DIR: 0 or -errno */
int gd_sync_dir(void);
/*
 * The epochs of DIR/epoch up to latest, newest first, in a malloc'ed
 * array (*out): how many, or -errno.
 */
int gd_list_epochs(uint32_t latest, uint32_t **out);

/* The epoch histories, compared (group_disk.c's, pure but for the logs read): */
/* the index of nid in nodes[nr], or -1 */
int gd_find_node(const struct sd_node_id *nid, const struct sd_node *nodes, int nr);
/* the same nodes (address, port and zone) in any order */
bool gd_same_nodes(const struct sd_node *a, int nr_a, const struct sd_node *b, int nr_b);
/* the nodes that a[nr_a] and b[nr_b] share have the same vnodes in both */
bool gd_same_weights(const struct sd_node *a, int nr_a, const struct sd_node *b, int nr_b);
/* a member's epoch logs can be ones: 0 or -EINVAL */
int gd_valid_logs(const struct sd_epoch_log *logs, int n);
/* whether this node's history (newest own_epoch) and a member's can be one: 0 or -ESTALE */
int gd_check_history(uint32_t own_epoch, uint32_t their_epoch, const struct sd_epoch_log *logs,
		     int n, bool joining);

#endif
