/*
 * The sheepdog protocol's object ops (obj_ops.c): the handlers of
 * READ_OBJ, WRITE_OBJ, CREATE_AND_WRITE_OBJ and FLUSH_VDI in the op table,
 * on io workers; obj_op_read_inline on the main thread (the op's
 * try_inline). SD_RES_*.
 */
#ifndef SHEEP_OBJ_OPS_H
#define SHEEP_OBJ_OPS_H

#include <stdbool.h>

struct request;

int obj_op_read(struct request *req);
bool obj_op_read_inline(struct request *req);
int obj_op_write(struct request *req);
int obj_op_create_and_write(struct request *req);
int obj_op_flush(struct request *req);
/* a client's inode header write: its reply waits for NOTIFY_VDI_HEADER (ops.h: reply_held) */
bool obj_op_header_written(const struct request *req);
void obj_op_notify_header(struct request *req);

#endif
