/*
 * The tracer registry. A tracer is a const struct tracer_ops registered by
 * tracer_register() from an ELF constructor, in the slot of its id; one with
 * a missing callback or a taken id is refused (and said so on stderr: the
 * log is not open yet).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace_priv.h"

/* by id; read by the hooks' dispatch */
const struct tracer_ops *trace_tracers[TRACE_MAX_TRACERS];

/* the built-in tracers: referenced so that the linker keeps their objects */
extern const void *const tracer_link_graph;
extern const void *const tracer_link_function;
extern const void *const tracer_link_profile;
extern const void *const tracer_link_loop;
extern const void *const tracer_link_thread;
const void *const *const trace_builtin_tracers[] = { &tracer_link_graph, &tracer_link_function,
						     &tracer_link_profile, &tracer_link_loop,
						     &tracer_link_thread };

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
