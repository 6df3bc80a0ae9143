/*
 * Requests to other sheep (peer_io.c).
 */
#ifndef SHEEP_PEER_IO_H
#define SHEEP_PEER_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "internal_proto.h"
#include "group.h"

/*
 * peer_io.c: requests to other sheep over cached connections. One node's
 * part of a request sent to several at once: the caller fills nid (and,
 * for an answer with a payload, rdata and rlen: the most it may carry);
 * the fan-out fills rsp and result: rsp.result, or SD_RES_NETWORK when the
 * node could not be reached or its connection failed (err: the -errno).
 */
struct peer_call {
	const struct sd_node_id *nid;
	void *rdata;
	uint32_t rlen;
	/*
	 * Optional: this node's own request and payload, in place of the
	 * fan-out's (a different strip of an object to each node); NULL: the
	 * fan-out's rq and wdata.
	 */
	const struct sd_req *rq;
	const void *wdata;
	struct sd_rsp rsp;
	int result;
	int err;
	/* private to peer_io.c */
	int fd, state;
	bool reused, retried;
	size_t done;
	uint64_t last_ns;
};
/*
 * The caller's own part of a fan-out, done on its thread while the nodes
 * work: step does a step of it and returns true while there is more.
 * sliced: the steps are short, run them while sends are still pending
 * (otherwise the first step waits until every node has its request).
 */
struct peer_work {
	bool (*step)(void *arg);
	void *arg;
	bool sliced;
};
/*
 * Send rq (and wdata when rq has SD_FLAG_CMD_WRITE) to the nodes of
 * calls[nr] at once, and gather their answers, doing work (if not NULL)
 * meanwhile. Returns once every node answered (or failed) and the work is
 * done. Never fails as a whole: each call has its result.
 */
void peer_fanout_work(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr,
		      const struct peer_work *work);
void peer_fanout(const struct sd_req *rq, const void *wdata, struct peer_call *calls, int nr);
/*
 * One request to nid: wdata is sent when rq has SD_FLAG_CMD_WRITE,
 * otherwise up to rq->data_length bytes of answer land in rdata. 0 (see
 * rsp->result) or -errno.
 */
int peer_request(const struct sd_node_id *nid, const struct sd_req *rq, const void *wdata,
		 void *rdata, struct sd_rsp *rsp);
/* stopping: cut the sockets in use, refuse new ones (workers return at once) */
void peer_abort_all(void);
/* cut the sockets that workers hold to nid (it left): they return at once */
void peer_abort_node(const struct sd_node_id *nid);

#endif
