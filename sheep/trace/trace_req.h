/*
 * Request ids, as the daemon sees them: what its front-ends and workers
 * tell the tracer about the requests they serve (collie debug trace cat
 * --all, slow). Safe to include in any build: without the tracer
 * (--disable-trace) every call is an inline no-op and ids are 0.
 *
 * A gateway gives each client request a new id (trace_req_new, which also
 * decides whether the graph tracer's request mode records it); a replica
 * takes it from the peer request's header (sd_req_trace_id). The thread
 * that serves the request says so around its work (trace_req_begin and
 * trace_req_end, on the same thread, not nested), and peer_io.c stamps
 * the peer requests that the thread sends meanwhile (trace_req_current).
 * None of these takes a lock or makes a syscall but the clock's; a begin
 * pushes four 16-byte records into the thread's graph ring when the graph
 * tracer runs, an end two.
 */
#ifndef TRACE_REQ_H
#define TRACE_REQ_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "internal_proto.h"

/* flags of a request part besides the wire's SD_REQ_TRACE_*: this node is its gateway */
#define TRACE_REQ_GATEWAY 0x100
/* the result of a part that served nothing: it handed the request to a worker */
#define TRACE_REQ_PASSED 0xff

struct trace_req {
	uint64_t id;	 /* 0: none (nothing is recorded) */
	uint64_t oid;	 /* the object, 0: none */
	uint64_t queued; /* stat_clock() (the TSC) when it was queued, 0: unknown */
	uint16_t flags;	 /* SD_REQ_TRACE_* | TRACE_REQ_GATEWAY */
	uint8_t opcode;	 /* SD_OP_*, or an SD_STAT_NBD_* row for an NBD command */
};

#ifdef HAVE_TRACE
/*
 * A new id for a client request of VDI @vid (has_vid: it names one), and
 * in *flags whether the graph tracer's request mode records it
 * (SD_REQ_TRACE_SAMPLED): one in --sample N, of --vdi's VDI. Any thread.
 */
uint64_t trace_req_new(bool has_vid, uint32_t vid, uint16_t *flags);
/* the calling thread serves @r from now on (its id 0: none) */
void trace_req_begin(const struct trace_req *r);
/* ... and is done with it, with SD_RES_* @result */
void trace_req_end(int result);
/* the id of the request the calling thread serves (0: none) and its wire flags */
uint64_t trace_req_current(uint16_t *flags);
#else
static inline uint64_t trace_req_new(bool has_vid, uint32_t vid, uint16_t *flags)
{
	*flags = 0;
	return 0;
}
static inline void trace_req_begin(const struct trace_req *r)
{
}
static inline void trace_req_end(int result)
{
}
static inline uint64_t trace_req_current(uint16_t *flags)
{
	*flags = 0;
	return 0;
}
#endif

#endif
