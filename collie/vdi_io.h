/*
 * collie's pipelined VDI I/O (vdi_io.c), shared by vdi read / vdi write and
 * vdi backup / vdi restore: one connection, up to IO_NR_SLOTS object
 * requests in flight with distinct ids, replies matched by id.
 */
#ifndef VDI_IO_H
#define VDI_IO_H

#include "collie.h"

#define IO_NR_SLOTS 4

struct io_slot {
	bool busy;    /* request sent, reply not read */
	bool ready;   /* read: data in buf, not yet written out */
	bool is_read; /* the reply carries len bytes of data for buf */
	bool create;  /* a create: on success the object becomes the VDI's own */
	uint32_t id;
	uint32_t idx;
	uint32_t len;
	uint64_t off; /* offset in the VDI */
	char *buf;
};

struct vdi_io {
	const char *name;
	int fd;
	struct sd_inode *inode;
	uint32_t vid;
	uint8_t shift;
	uint64_t obj_size;
	uint32_t next_id;
	unsigned int nr_busy;
	struct io_slot slots[IO_NR_SLOTS];
};

struct write_state {
	uint64_t pos, end;
	bool eof;
	int err; /* the first failure: stop sending, drain, then report */
	uint32_t min_idx, max_idx;
	uint64_t acked; /* bytes the replicas acknowledged (for a progress bar) */
};

/* resolve NAME (snapshot SNAP, NULL: the working VDI), read its whole inode, connect */
int vdi_io_open(struct vdi_io *io, const char *name, const char *snap);
/*
 * The slots (objects of 1 << shift bytes) and the connection only, for
 * reads of any VDI's objects (io must be zeroed; io->inode stays NULL;
 * what names them in messages)
 */
int vdi_io_connect(struct vdi_io *io, const char *what, uint8_t shift);
void vdi_io_close(struct vdi_io *io);
/* send one object request for slot s (s->len bytes at offset); data: a write's payload */
int vdi_io_send(struct vdi_io *io, struct io_slot *s, uint8_t opcode, uint16_t flags, uint64_t oid,
		uint64_t cow_oid, uint64_t offset, const void *data);
/* read one reply: its slot and result; a read's payload lands in the slot's buffer */
int vdi_io_recv(struct vdi_io *io, struct io_slot **done, int *result);
/* a slot with no request in flight, or NULL */
struct io_slot *vdi_io_free_slot(struct vdi_io *io);
/*
 * Write slot s (s->idx, s->off: the offset in the VDI, s->len bytes of s->buf)
 * as QEMU does: a create (with COW from an ancestor's object) or a write
 */
int vdi_io_write_issue(struct vdi_io *io, struct io_slot *s);
/* account for a write's reply: the first failure in st->err, creations in the range */
void vdi_io_write_done(struct vdi_io *io, struct io_slot *s, int result, struct write_state *st);
/* write data_vdi_id[min_idx..max_idx] back into the inode (every slot must be free) */
int vdi_io_write_inode_slice(struct vdi_io *io, uint32_t min_idx, uint32_t max_idx);

#endif
