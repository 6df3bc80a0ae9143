/*
 * Request ids and the graph tracer's request mode: which client requests
 * it records (trace_req.h says how the daemon uses them; hook.c records
 * the markers and keeps each thread's request).
 *
 * An id is 64 bits: a tag of the daemon that made it (24 random bits drawn
 * once, never 0) over a 40-bit count. A trace session only needs the ids
 * of the requests it saw to differ: two gateways share a tag with
 * probability n^2 / 2^25 for n of them. Printed as 16 hex digits.
 *
 * The choice is made once, at the gateway, and travels in the peer
 * requests (SD_REQ_TRACE_SAMPLED): one request in --sample N (a count over
 * the requests that pass --vdi), of --vdi's VDI only. It is read outside
 * the trace lock: a start or stop that changes the mode meanwhile makes a
 * request's choice follow the old or the new mode, either of which is
 * right for a request that arrived while it changed.
 */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "trace_priv.h"

static uint64_t req_tag;
static uint64_t req_count;
static uint64_t req_seen; /* requests that passed --vdi, for --sample */

static uint64_t tag(void)
{
	uint64_t t = __atomic_load_n(&req_tag, __ATOMIC_RELAXED), v = 0;

	if (t)
		return t;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)(uintptr_t)&v;
	v = (v & 0xffffff) ? (v & 0xffffff) : 1;
	/* a race between two first ids keeps one tag: the first stored */
	t = 0;
	if (!__atomic_compare_exchange_n(&req_tag, &t, v << 40, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return t;
	return v << 40;
}

uint64_t trace_req_new(bool has_vid, uint32_t vid, uint16_t *flags)
{
	uint64_t n = __atomic_add_fetch(&req_count, 1, __ATOMIC_RELAXED);

	*flags = 0;
	if (__atomic_load_n(&trace_hot.req_mode, __ATOMIC_ACQUIRE) &&
	    (!trace_hot.req_has_vid || (has_vid && vid == trace_hot.req_vid))) {
		uint64_t seen = __atomic_fetch_add(&req_seen, 1, __ATOMIC_RELAXED);

		if (trace_hot.req_sample <= 1 || seen % trace_hot.req_sample == 0)
			*flags = SD_REQ_TRACE_SAMPLED;
	}
	return tag() | (n & ((UINT64_C(1) << 40) - 1));
}

/* a new start of the request mode counts its --sample from its first request */
void trace_req_reset_count(void)
{
	__atomic_store_n(&req_seen, 0, __ATOMIC_RELAXED);
}
