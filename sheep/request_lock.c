/*
 * The VDI locks of this node's sheepdog clients, on the main thread: an
 * ordered LOCK_VDI applied for one binds the lock to its connections
 * (client_lock.c), a RELEASE_VDI unbinds it; when the last of them
 * closes, the lock is released in the cluster's order as if the client
 * had asked; an operator who breaks it disconnects them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "util.h"
#include "internal_proto.h"
#include "list.h"
#include "client_lock.h"
#include "ops.h"
#include "ordered.h"
#include "request.h"

#define MAX_LOCK_CONNS 64

/*
 * An ordered op applied here for a client of this node: a lock it took is
 * bound to its connections (client_lock.c), one it released unbound; then
 * it is answered as any request is.
 */
void request_ordered_done(struct request *req)
{
	const struct sd_req *rq = &req->rq;

	if (request_client_addr(req) && !req->done && req->rp.result == SD_RES_SUCCESS) {
		if (rq->opcode == SD_OP_LOCK_VDI && rq->vdi.type != SD_LOCK_TYPE_SHARED) {
			uint64_t conns[MAX_LOCK_CONNS];
			char name[SD_MAX_VDI_LEN] = "";
			int n = request_conns_at(request_client_addr(req), conns, MAX_LOCK_CONNS);

			if (req->data && rq->data_length)
				memcpy(name, req->data,
				       min_t(uint32_t, rq->data_length, sizeof(name) - 1));
			client_lock_taken(req->rp.vdi.vdi_id, request_client_addr(req),
					  req->ord.owner.conn, name, conns, n);
		} else if (rq->opcode == SD_OP_RELEASE_VDI) {
			client_lock_dropped(rq->vdi.base_vdi_id);
		}
	}
	request_done(req);
}

/* the release that a gone client's lock gets (client_lock.c), as its own RELEASE_VDI */
struct gone_release {
	struct request req;
	char name[SD_MAX_VDI_LEN];
};

static void gone_release_done(struct request *req)
{
	struct gone_release *g = container_of(req, struct gone_release, req);

	if (req->rp.result != SD_RES_SUCCESS && req->rp.result != SD_RES_VDI_NOT_LOCKED)
		sd_warn("cannot release the lock of vdi %s: %s", g->name,
			sd_strerror(req->rp.result));
	free(g);
}

static void release_gone_client(uint32_t vid, const uint8_t addr[16], uint64_t token,
				const char *name)
{
	struct gone_release *g = calloc(1, sizeof(*g));

	if (!g) {
		sd_err("out of memory: vid %06" PRIx32 " stays locked", vid);
		return;
	}
	/* vid: the binding's, which followed the lock if a snapshot moved it (a lock on a
	   snapshot, taken by its tag, stays on the snapshot) */
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->req.rq.proto_ver = SD_PROTO_VER;
	g->req.rq.opcode = SD_OP_RELEASE_VDI;
	g->req.rq.flags = SD_FLAG_CMD_WRITE;
	g->req.rq.data_length = (uint32_t)strlen(g->name) + 1;
	g->req.rq.vdi.base_vdi_id = vid;
	g->req.data = g->name;
	g->req.op = get_sd_op(SD_OP_RELEASE_VDI);
	g->req.done = gone_release_done;
	memcpy(g->req.ord.owner.addr, addr, 16);
	g->req.ord.owner.conn = token;
	INIT_LIST_NODE(&g->req.node);
	ordered_submit(&g->req);
}

void request_lock_broken(uint32_t vid, const struct sd_lock_owner *owner)
{
	uint64_t conns[MAX_LOCK_CONNS];
	int n = client_lock_conns(vid, conns, MAX_LOCK_CONNS);

	if (n == 0)
		return; /* no client of this protocol here holds it (an NBD client's) */
	client_lock_dropped(vid);
	if (request_close_conns(conns, n))
		sd_warn("vid %06" PRIx32 ": an operator took the lock away: "
			"disconnecting its holder",
			vid);
}

void request_lock_init(void)
{
	client_lock_init(release_gone_client);
}
