/*
 * collie debug trace, between its files: debug.c (one node: start, stop,
 * status, cat), trace_stat.c (the profile's views), trace_cluster.c (every
 * node at once: --all, the clocks, reading the nodes' events) and
 * trace_merge.c (the views of requests across nodes: cat --all, slow).
 */
#ifndef COLLIE_TRACE_H
#define COLLIE_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "collie.h"

#define TRACE_MAX_TRACERS 8

/* the daemon's status: the summary, then one entry per tracer it has */
struct trace_state {
	struct sd_trace_status st;
	struct sd_trace_tracer tracers[TRACE_MAX_TRACERS];
	int nr_tracers;
};

/* debug.c, on the node of opts.addr:opts.port */
/* TRACE_STATUS into @ts; the rsp's result (or -1 after a transport error) */
int trace_get_state(struct trace_state *ts);
/* start, stop: as the subcommands on one node; EXIT_* */
int trace_start_node(void);
int trace_stop_node(void);
const char *trace_state_str(uint32_t state);

/* trace_cluster.c */
/* one node of a cluster-wide view */
struct tnode {
	char host[64];
	int port;
	char label[80];	   /* "127.0.0.1:7000" */
	int64_t offset_ns; /* its tracer's clock minus collie's (CLOCK_MONOTONIC) */
	uint64_t err_ns;   /* the offset is right within +/- this */
};
/*
 * The nodes to look at: every member with --all, else the one of -a/-p.
 * EXIT_OK with *nodes (free it) and *nr, or an exit code after saying why.
 */
int tnodes_get(struct tnode **nodes, int *nr);
/* run @fn on node @n (opts.addr and opts.port point at it meanwhile) */
int tnode_run(const struct tnode *n, int (*fn)(void));
/*
 * Measure node @n's clock against ours: the fastest of several TRACE_CLOCK
 * round trips on one connection, its midpoint. EXIT_OK or an exit code.
 */
int tnode_clock(struct tnode *n);
/* --all of start, stop and status */
int trace_start_all(void);
int trace_stop_all(void);
int trace_status_all(void);

/* a line of a node's events (internal_proto.h: SD_TRACE_FMT_EVENTS), parsed */
struct tev {
	char kind; /* T Q D C O */
	uint32_t tid;
	unsigned depth;
	uint64_t ts;  /* ns of the node's clock: Q, D, C and O's entry */
	uint64_t dur; /* C */
	uint64_t id;  /* Q, D: the request; C, O: the call's request (0: none) */
	uint32_t flags;
	uint32_t opcode;
	uint64_t oid;
	uint64_t wait_ns;
	uint32_t result;
	const char *text; /* C, O: the function; T: the thread's name (in the line) */
};
/* parse one line (NUL-terminated, no newline): 0, or -1 for one that is none */
int tev_parse(char *line, struct tev *ev);
/* read node @n's events (the graph tracer's), each line to @fn: EXIT_OK or an exit code */
int tnode_events(const struct tnode *n, int (*fn)(const struct tev *ev, void *arg), void *arg);

/* trace_merge.c */
/* cat --all --format chrome|graph, slow */
int trace_cat_all(uint32_t fmt);
int trace_slow(int argc, char **argv);

#endif
