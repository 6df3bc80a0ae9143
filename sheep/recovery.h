/*
 * Objects to their places after an epoch change (recovery.c): one run per
 * epoch on the recovery thread. Main thread, but for the state's readers
 * and writers (any thread, under the state's lock).
 */
#ifndef SHEEP_RECOVERY_H
#define SHEEP_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "internal_proto.h"

/* start the recovery thread: 0 or -errno */
int recovery_init(void);
/* its queue (one thread): join.c's wait check runs there too */
struct work_queue;
struct work_queue *recovery_queue(void);
/* main thread: a new epoch began; bring its objects to this node */
void recovery_kick(void);
/*
 * main thread: this node lost objects of the current epoch (a disk failed):
 * a run of the epoch again fetches them from their other copies
 */
void recovery_rerun(void);
/* main thread: no run starts while held (a join is under way; join.c kicks it after) */
void recovery_hold(bool hold);
/* the state that STAT_RECOVERY reports (collie node recovery) */
void recovery_get_info(struct sd_recovery_info *out);
/* the state's epoch and SD_RECOVERY_* (join.c sets it while joining) */
void recovery_set_state(uint32_t epoch, uint32_t state);
/* n objects set aside as stale at a join */
void recovery_count_stale(uint64_t n);
/* --recovery-max-bandwidth's default, MB/s (0: unlimited) */
#define RECOVERY_DEFAULT_BW 0
void recovery_set_max_bandwidth(uint64_t mb_per_s);

#endif
