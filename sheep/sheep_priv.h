/* The daemon's internals shared between its files. */
#ifndef SHEEP_PRIV_H
#define SHEEP_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal_proto.h"
#include "list.h"
#include "logger.h"
#include "util.h"
#include "work.h"

struct client_info;

/* one request from the time its header arrives until its reply is sent */
struct request {
	struct sd_req rq;
	struct sd_rsp rp;
	void *data;	    /* payload in (writes) and out (reads) */
	uint32_t data_cap;  /* bytes allocated at data (>= rq.data_length); replies
			       never carry more than rq.data_length */
	const struct sd_op_template *op;
	struct client_info *ci;
	struct work work;
	struct list_node node; /* in the client's reply queue */
	uint64_t start_ns;
};

enum op_type {
	OP_MAIN,    /* runs on the main thread: cheap, never blocks */
	OP_IO,      /* object I/O on the io queue */
	OP_CLUSTER, /* state changes, serialised on the cluster queue */
};

/*
 * One entry per opcode. process_work runs on a worker of the op's queue
 * (or on the main thread for OP_MAIN) and returns SD_RES_*; it fills
 * req->rp and req->rp.data_length. force: allowed before format.
 */
struct sd_op_template {
	const char *name;
	uint8_t opcode;
	enum op_type type;
	bool force;
	int (*process)(struct request *req);
};

/* ops.c */
const struct sd_op_template *get_sd_op(uint8_t opcode);

/* request.c */
int create_listen_port(const char *bind_addr, int port);
void request_done(struct request *req); /* from work done: reply and free */
void queue_request(struct request *req);

/* state of the whole daemon (sheep.c) */
struct sheep_config {
	const char *dir;
	const char *obj_dir;
	int port;
	const char *bind_addr;
	uint32_t zone;
	bool shutting_down;
};
extern struct sheep_config sys;
extern struct work_queue *io_wq, *cluster_wq;
void sheep_request_shutdown(void);

/* group.c: cluster state, epochs, membership */
struct cluster_state {
	bool formatted;
	uint64_t ctime;
	uint8_t copies;
	uint8_t block_size_shift;
	uint32_t epoch;
	int nr_nodes;
	struct sd_node nodes[SD_MAX_NODES];
	int local_idx;
};
int group_init(void);
struct cluster_driver;
/* join the cluster through drv as me: 0 or -errno */
int group_join(const struct cluster_driver *drv, const struct sd_node *me);
/* 0 or -errno: make the cluster formatted with copies (0: default) */
int group_format(uint64_t ctime, uint8_t copies, uint8_t shift);
void group_get_state(struct cluster_state *out);
bool group_is_formatted(void);
uint8_t group_copies(void);
int group_nr_nodes(void);
/* fill logs (up to max entries, newest first): returns how many */
int group_read_epoch_logs(struct sd_epoch_log *logs, int max);

/* vdi.c: the VDI namespace */
int vdi_init(void);
int vdi_op_new(struct request *req);
int vdi_op_del(struct request *req);
int vdi_op_lock(struct request *req);
int vdi_op_release(struct request *req);
int vdi_op_get_info(struct request *req);
int vdi_op_read_vdis(struct request *req);
/* what an object op needs to know about a vid; SD_RES_NO_VDI if unknown */
int vdi_lookup_attr(uint32_t vid, uint8_t *shift, bool *is_snapshot);
/* the header of an inode changed on disk: refresh the cached state */
void vdi_header_updated(uint32_t vid);
/* remove every VDI's state (after format) */
void vdi_reset(void);

/* gateway.c: client object I/O */
int gateway_read_obj(struct request *req);
int gateway_write_obj(struct request *req);
int gateway_create_and_write_obj(struct request *req);
int gateway_flush_vdi(struct request *req);

#endif
