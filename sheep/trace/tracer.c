/*
 * The tracer registry. A tracer is a const struct tracer_ops registered by
 * tracer_register() from an ELF constructor; one with a missing callback is
 * refused (and said so on stderr: the log is not open yet).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace_priv.h"

#define TRACE_MAX_TRACERS 8

static const struct tracer_ops *tracers[TRACE_MAX_TRACERS];

/* the built-in tracers: referenced so that the linker keeps their objects */
extern const void *const tracer_link_graph;
const void *const *const trace_builtin_tracers[] = { &tracer_link_graph };
static size_t nr_tracers;

int trace_register_tracer(const struct tracer_ops *ops)
{
	if (!ops || !ops->name || !*ops->name || !ops->entry || !ops->exit || !ops->start ||
	    !ops->stop || !ops->read) {
		fprintf(stderr, "trace: refusing incomplete tracer %s\n",
			ops && ops->name ? ops->name : "(null)");
		return -EINVAL;
	}
	if (strlen(ops->name) >= 32)
		return -EINVAL;
	if (trace_find_tracer(ops->name))
		return -EEXIST;
	if (nr_tracers == TRACE_MAX_TRACERS)
		return -ENOSPC;
	tracers[nr_tracers++] = ops;
	return 0;
}

const struct tracer_ops *trace_find_tracer(const char *name)
{
	if (!name || !*name)
		name = "graph";
	for (size_t i = 0; i < nr_tracers; i++)
		if (!strcmp(tracers[i]->name, name))
			return tracers[i];
	return NULL;
}
