/*
 * The function tracer, as the daemon sees it.
 *
 * Every function of sheep and lib/ carries a patchable entry site and 16
 * bytes of padding before it (-fpatchable-function-entry=21,16).
 * trace_init() turns every site into one 5-byte NOP and writes a stub into
 * the padding; tracing rewrites chosen sites into a jump to their stub,
 * which calls the entry trampoline, while every other thread is parked,
 * and back again on stop.
 * The wire format of the four trace operations is in internal_proto.h.
 */
#ifndef TRACE_H
#define TRACE_H

#include "internal_proto.h"

/*
 * Read the site section, turn every site into a 5-byte NOP, load the symbol
 * table of /proc/self/exe, calibrate the clock and install the SIGUSR2
 * handler. Must run before any other thread of the process exists (it
 * refuses with -EBUSY otherwise). Returns 0 or a negative errno; on failure
 * the daemon keeps running and the trace operations answer
 * SD_RES_NO_SUPPORT or SD_RES_TRACE_BROKEN. Calling it again is a no-op.
 */
int trace_init(void);

/*
 * Handle SD_OP_TRACE_START/STOP/STATUS/READ. @data holds req->data_length
 * bytes: the payload of START, the output space of STATUS and READ. Sets
 * rsp->data_length and rsp->trace.* and returns an SD_RES_* code. Never
 * exits or crashes on bad input. Runs on the trace queue's worker, off the
 * main thread (any one thread at a time is fine: the trace lock serialises
 * callers; START and STOP stop every other thread, the main one included).
 */
int trace_handle_op(const struct sd_req *req, struct sd_rsp *rsp, void *data);

/*
 * The tracer's clock now: ns on CLOCK_MONOTONIC's scale, the time base of
 * every trace timestamp. Any thread, no lock (TRACE_CLOCK).
 */
uint64_t trace_clock_ns(void);

/*
 * Stop tracing if it runs and put the NOPs back. Called once at shutdown;
 * other threads may still run: a thread inside a traced function still
 * returns through the return trampoline, which stays valid.
 */
void trace_shutdown(void);

#endif
