/*
 * The VDI namespace ops and the start-up load of the VDI table (vdi.c,
 * vdi_del.c, vdi_lock.c).
 */
#ifndef SHEEP_VDI_H
#define SHEEP_VDI_H

#include <stdbool.h>
#include <stdint.h>
#include "internal_proto.h"

struct request;

/* vdi*.c: the VDI namespace ops (ordered) and the start-up load of the table */
int vdi_init(void);
int vdi_op_new(struct request *req);
int vdi_op_del(struct request *req);
int vdi_op_lock(struct request *req);
int vdi_op_release(struct request *req);
int vdi_op_get_info(struct request *req);
int vdi_op_read_vdis(struct request *req);
int vdi_op_get_locks(struct request *req);
int vdi_op_unlock(struct request *req);
/*
 * Release the locks that owner holds (whole_node: every lock taken through
 * owner->node, which left the cluster), in the cluster's order (the
 * cluster worker). How many.
 */
int vdi_release_owner(const struct sd_lock_owner *owner, bool whole_node);
/*
 * Main: what this node does, on the main thread, when an operator forces
 * away a lock one of its clients holds (broken: disconnect that client),
 * and when a snapshot moves such a lock from the working VDI it was on to
 * the new working VDI (moved: the client releases the new vid)
 */
void vdi_set_lock_hooks(void (*broken)(uint32_t vid, const struct sd_lock_owner *owner),
			void (*moved)(uint32_t from, uint32_t to));
/*
 * ALTER_COPY (internal_proto.h): process writes the header's copies (an io
 * worker); held and notify keep the answer until every node reread it
 */
int vdi_op_alter_copy(struct request *req);
bool vdi_op_alter_copy_held(const struct request *req);
void vdi_op_alter_copy_notify(struct request *req);
/* Main: what a VDI's new copies start here, on the main thread (recovery's rerun) */
void vdi_set_copies_hook(void (*changed)(void));
/* NOTIFY_VDI_HEADER: reread the header of req->rq.vdi.base_vdi_id into the table */
int vdi_op_header_changed(struct request *req);
/* does this successful client request change an inode header (NOTIFY_VDI_HEADER follows)? */
bool vdi_is_header_write(const struct sd_req *rq, uint32_t *vid);

#endif
