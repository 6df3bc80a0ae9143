/*
 * The table of operations (ops.c): one entry per opcode.
 */
#ifndef SHEEP_OPS_H
#define SHEEP_OPS_H

#include <stdbool.h>
#include <stdint.h>

struct request;

enum op_type {
	OP_MAIN,    /* runs on the main thread: cheap, never blocks */
	OP_IO,      /* object I/O on the io queue */
	OP_CLUSTER, /* state reads, serialised on the cluster queue */
	OP_ORDERED, /* state changes: broadcast through the cluster driver, applied
		       in the driver's total order on every node's cluster queue */
	OP_PEER,    /* sheep-to-sheep object I/O on the peer queue */
	OP_FETCH,   /* recovery's object reads, on their own queue: never wait on a peer */
	OP_TRACE,   /* the tracer's control ops, serialised on the trace queue: a
		       snapshot's rendering may take long, never on the main thread */
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
	/*
	 * Optional, OP_IO: answer on the main thread, at once and without
	 * blocking, when it can; true when it did (req->rp set), false to
	 * queue the request for process as always
	 */
	bool (*try_inline)(struct request *req);
	/*
	 * Optional: the reply of a request that process has done waits for
	 * more work that the op starts afterwards (a client's inode header
	 * write: every node's VDI table learns it first). reply_held, on any
	 * thread and without side effects: does req's? finish, on the main
	 * thread, starts that work, which answers req once done.
	 */
	bool (*reply_held)(const struct request *req);
	void (*finish)(struct request *req);
	/* queued ahead of the op's queue's other work (wq_queue_urgent): a client waits on it */
	bool urgent;
};

/* by opcode, its entry of the table; NULL: no such op */
const struct sd_op_template *get_sd_op(uint8_t opcode);
/* give every opcode its statistics slot (after stat_init) */
void ops_register_stats(void);

/* what the op table needs from main */
struct ops_config {
	/* what STAT_SHEEP reports of this node's NBD export: nbd_port 0 for none */
	const char *nbd_addr;
	int nbd_port;
};
void ops_init(const struct ops_config *cfg);

#endif
