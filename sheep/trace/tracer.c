/*
 * The tracer registry. A tracer is a const struct tracer_ops registered by
 * tracer_register() from an ELF constructor, in the slot of its id; one with
 * a missing callback or a taken id is refused (and said so on stderr: the
 * log is not open yet). With the tracers by id, the state that the hooks
 * read at every call (trace_hot), written by the control path. Both sit
 * below the hooks and the buffers, which read them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace_priv.h"

/* by id; read by the hooks' dispatch */
const struct tracer_ops *trace_tracers[TRACE_MAX_TRACERS];

struct trace_hot trace_hot = {
	.depth_limit = TRACE_MAX_DEPTH,
	.nr_records = { [0 ... TRACE_MAX_TRACERS - 1] =
			    TRACE_DEFAULT_BUFFER / sizeof(struct trace_rec) },
};

int trace_register_tracer(const struct tracer_ops *ops)
{
	if (!ops || !ops->name || !*ops->name || !ops->entry || !ops->start || !ops->stop ||
	    !ops->read || ops->id >= TRACE_MAX_TRACERS) {
		fprintf(stderr, "trace: refusing incomplete tracer %s\n",
			ops && ops->name ? ops->name : "(null)");
		return -EINVAL;
	}
	if (strlen(ops->name) >= 32)
		return -EINVAL;
	if (trace_find_tracer(ops->name))
		return -EEXIST;
	if (trace_tracers[ops->id])
		return -ENOSPC;
	trace_tracers[ops->id] = ops;
	return 0;
}

const struct tracer_ops *trace_find_tracer(const char *name)
{
	if (!name || !*name)
		name = "graph";
	for (size_t i = 0; i < TRACE_MAX_TRACERS; i++)
		if (trace_tracers[i] && !strcmp(trace_tracers[i]->name, name))
			return trace_tracers[i];
	return NULL;
}

const struct tracer_ops *trace_tracer_by_id(unsigned id)
{
	return id < TRACE_MAX_TRACERS ? trace_tracers[id] : NULL;
}
