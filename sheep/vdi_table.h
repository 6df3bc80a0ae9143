/*
 * The VDI table (vdi_table.c) as the namespace ops (vdi.c) and the join
 * sync (vdi_sync.c) use it: the state of each VDI, read and changed under
 * the table's lock, which the caller takes. The object path reads the
 * table through the functions at the end of this file, which take the
 * lock themselves.
 *
 * A state, once in the table, stays at the same address until
 * vdi_table_clear (tests and fuzzers only): a deleted VDI keeps its state,
 * nameless, as its vid keeps its bit. So a pointer found under the lock
 * may be kept across the caller's I/O done without it, and used again
 * under the lock; its fields may change meanwhile, the pointer may not.
 */
#ifndef SHEEP_VDI_TABLE_H
#define SHEEP_VDI_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "sheepdog_proto.h"

struct vdi_state {
	uint32_t vid;
	uint32_t snap_id;
	uint32_t parent;
	uint8_t nr_copies; /* 1..SD_MAX_COPIES */
	uint8_t shift;	   /* SD_MIN..SD_MAX_BLOCK_SIZE_SHIFT */
	uint8_t copy_policy; /* 0: replicated; else erasure-coded (ec.h), nr_copies D + P */
	bool snapshot;
	bool deleted;
	bool locked; /* not in the inode: learned from LOCK_VDI and at join */
	struct sd_lock_owner owner; /* who holds it, when locked */
	uint64_t size;
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	struct vdi_state *hnext;
};

/* the in-use bitmap: 0 or -ENOMEM; once, before anything else */
int vdi_table_init(void);
/* forget every VDI and every bit (tests and fuzzers, between cases) */
void vdi_table_clear(void);

void vdi_table_rdlock(void);
void vdi_table_wrlock(void);
void vdi_table_unlock(void);

/* caller holds the lock (read or write) */
struct vdi_state *vdi_table_lookup(uint32_t vid);
/*
 * A live VDI called name: with snapid, the one with that snap_id; with a
 * tag, the snapshot carrying it; otherwise the working (non-snapshot)
 * VDI. NULL and *res = SD_RES_NO_VDI or SD_RES_NO_TAG.
 */
struct vdi_state *vdi_table_find(const char *name, uint32_t snapid, const char *tag, int *res);
bool vdi_table_in_use(uint32_t vid);
/* the vid a new VDI called name gets (linear probing), 0 if none is free */
uint32_t vdi_table_free_vid(const char *name);
/* the first len bytes (at most SD_VDI_BITMAP_SIZE) of the in-use bitmap */
void vdi_table_copy_bitmap(void *buf, uint32_t len);
/* is vid one of s's ancestors (the VDIs whose objects s may share)? */
bool vdi_table_descends_from(const struct vdi_state *s, uint32_t vid);
/* call fn for every state until it returns non-zero, which is returned */
int vdi_table_for_each(int (*fn)(struct vdi_state *s, void *arg), void *arg);

/* caller holds the write lock */
/*
 * The state of vid, added (with its bit set) if the table does not know
 * it: from *spare when given (*spare becomes NULL; the caller allocated it
 * before its I/O so that publishing cannot fail), else allocated. NULL:
 * out of memory.
 */
struct vdi_state *vdi_table_get(uint32_t vid, struct vdi_state **spare);
/* take what the table keeps from an inode header, checked (copies, shift) */
void vdi_table_fill(struct vdi_state *s, const struct sd_inode_header *h);
/* the same for a changed header: the lock state stays */
void vdi_table_refill(struct vdi_state *s, const struct sd_inode_header *h);
/* vid is in use (a deleted VDI's too, or an unreadable inode's) */
void vdi_table_set_bit(uint32_t vid);

/*
 * The object path's reads of the table: each takes the lock itself (any
 * thread).
 */
/* what an object op needs to know about a live VDI, read at once */
struct vdi_attr {
	uint8_t shift;	   /* log2 of its object size */
	uint8_t nr_copies; /* 0: unknown */
	uint8_t copy_policy; /* 0: replicated; else D:P (ec.h) */
	bool snapshot;	   /* its data is frozen */
	uint64_t size;	   /* vdi_size */
	/*
	 * vdi_copies_generation() when the table filled it; 0: the caller's
	 * own count (the namespace ops' inode I/O), never looked up again
	 */
	uint32_t gen;
};
/* SD_RES_SUCCESS, or SD_RES_NO_VDI when vid is unknown or deleted */
int vdi_get_attr(uint32_t vid, struct vdi_attr *attr);
/* what an object op needs to know about a vid; SD_RES_NO_VDI if unknown */
int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot);
/* the VDI's copies, 0 if unknown */
int vdi_copies(uint32_t vid);
/* the same, and the generation that count belongs to (*gen) */
int vdi_copies_at(uint32_t vid, uint32_t *gen);
/*
 * Lock-free: a count bumped whenever a VDI's copies change in the table
 * (ALTER_COPY). A gateway that resolved a VDI's copies at generation g
 * and sees another one looks them up again (gateway.c).
 */
uint32_t vdi_copies_generation(void);
/*
 * Wait (a worker thread) until the generation is no longer gen, at most
 * timeout_ms: true when it moved. A gateway whose write a replica refused
 * (SD_RES_COPIES_CHANGED) retries as soon as its own node took the new
 * count, rather than after a fixed pause.
 */
bool vdi_wait_copies_generation(uint32_t gen, int timeout_ms);
/* the VDI's copy_policy: 0 when replicated or unknown, else its D:P (ec.h) */
uint8_t vdi_copy_policy(uint32_t vid);
/*
 * The live VDI called name (with snapid: that snapshot; with a tag, the
 * snapshot carrying it; otherwise the working VDI): SD_RES_SUCCESS and
 * *vid, SD_RES_NO_VDI or SD_RES_NO_TAG
 */
int vdi_find_vid(const char *name, uint32_t snapid, const char *tag, uint32_t *vid);
/* the first len bytes (at most SD_VDI_BITMAP_SIZE) of the in-use bitmap */
void vdi_copy_bitmap(void *buf, uint32_t len);
/* recovery stored the inode of vid here: know the VDI (it may be new here) */
struct sd_inode_header;
void vdi_inode_recovered(uint32_t vid, const struct sd_inode_header *h);

#endif
