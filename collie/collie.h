/*
 * collie: the admin command line of the sheepdog-style block store.
 *
 * One file per command group (cluster.c, node.c, vdi*.c, debug.c); the
 * option parser and the dispatcher in collie.c; connection, result and
 * formatting helpers shared by the groups in common.c.
 */
#ifndef COLLIE_H
#define COLLIE_H

#include <stdbool.h>
#include <stdint.h>

#include "internal_proto.h"
#include "net.h"
#include "proto_util.h"
#include "util.h"

/*
 * Exit codes: the only place they are defined. A server result becomes an
 * exit code through collie_exit_code() and nowhere else.
 */
#define EXIT_OK 0      /* success */
#define EXIT_FAIL 1    /* the operation failed (the daemon said no) */
#define EXIT_SYSFAIL 2 /* cannot connect, network or local I/O error */
#define EXIT_EXISTS 3  /* the VDI, snapshot tag or file system already exists */
#define EXIT_FULL 4    /* no space, no free vid */
#define EXIT_MISSING 5 /* no such VDI or snapshot */
#define EXIT_USAGE 64  /* bad command line */

#define COLLIE_CONNECT_TIMEOUT_MS 5000
#define COLLIE_IO_TIMEOUT_MS 120000

/* options of the whole command line, filled by the parser in collie.c */
#define COLLIE_MAX_FUNCTIONS 64

struct collie_opts {
	const char *addr;
	int port;
	bool raw;
	bool has_copies;
	uint8_t copies;
	const char *snapshot; /* -s: snapshot id or tag */
	const char *tracer;
	const char *functions[COLLIE_MAX_FUNCTIONS];
	int nr_functions;
	bool has_depth;
	uint32_t depth;
	bool has_buffer_size;
	uint64_t buffer_size;
	const char *format;
	const char *title; /* --title: of the svg picture */
	uint32_t watch; /* node stat -w: seconds, 0: once, since start */
	uint32_t count; /* node stat -n: reports, 0: no end */
	const char *hist;
	bool all;
	bool queues;
	bool vdi;
	bool repair; /* vdi check --repair */
	/* debug trace */
	const char *skip_pats[COLLIE_MAX_FUNCTIONS]; /* --notrace */
	int nr_skip_pats;
	const char *graph_functions[COLLIE_MAX_FUNCTIONS];
	int nr_graph_functions;
	bool has_threshold;
	uint64_t threshold_ns;
	const char *thread;
	const char *sort;
	bool has_top;
	uint32_t top;
	bool csv;
	bool follow;
	const char *main_only[COLLIE_MAX_FUNCTIONS];
	int nr_main_only;
	const char *worker_only[COLLIE_MAX_FUNCTIONS];
	int nr_worker_only;
};

extern struct collie_opts opts;

/* option bits: which options a subcommand accepts (-a, -p, -h always) */
#define OPT_COPIES (1U << 0)
#define OPT_SNAPSHOT (1U << 1)
#define OPT_RAW (1U << 2)
#define OPT_TRACER (1U << 3)
#define OPT_FUNCTION (1U << 4)
#define OPT_DEPTH (1U << 5)
#define OPT_BUFFER_SIZE (1U << 6)
#define OPT_FORMAT (1U << 7)
#define OPT_WATCH (1U << 8)
#define OPT_COUNT (1U << 9)
#define OPT_HIST (1U << 10)
#define OPT_ALL (1U << 11)
#define OPT_QUEUES (1U << 12)
#define OPT_VDI (1U << 13)
#define OPT_TITLE (1U << 14)
#define OPT_REPAIR (1U << 15)
/* debug trace (bits from 20 up) */
#define OPT_NOTRACE (1U << 20)
#define OPT_GRAPH_FUNCTION (1U << 21)
#define OPT_THRESHOLD (1U << 22)
#define OPT_THREAD (1U << 23)
#define OPT_SORT (1U << 24)
#define OPT_TOP (1U << 25)
#define OPT_CSV (1U << 26)
#define OPT_FOLLOW (1U << 27)
#define OPT_MAIN_ONLY (1U << 28)
#define OPT_WORKER_ONLY (1U << 29)

/*
 * A subcommand: handler gets the positional arguments after its own name.
 * A subcommand with a non-NULL sub table (debug trace) has no handler; the
 * next word selects from sub. Tables end with a zeroed entry.
 */
struct subcommand {
	const char *name;
	const char *args;   /* usage synopsis of the positional arguments */
	unsigned int flags; /* OPT_* accepted */
	const char *help;   /* one line */
	int (*fn)(int argc, char **argv);
	const struct subcommand *sub;
	int min_args;
	int max_args; /* -1: no limit */
	const char *example; /* shown by --help, NULL: none */
	const char *more;    /* printed after the options by --help, or NULL */
};

struct command {
	const char *name;
	const char *help;
	const struct subcommand *sub;
};

extern const struct subcommand cluster_cmds[];
extern const struct subcommand node_cmds[];
extern const struct subcommand vdi_cmds[];
extern const struct subcommand debug_cmds[];

/* node.c: GET_NODE_LIST into a new array (free it): EXIT_OK or an exit code */
int node_get_list(struct sd_node **nodes, uint32_t *nr, uint32_t *local_idx);
/* node_stat.c: collie node stat */
int node_stat(int argc, char **argv);

/* errors: one line to stderr, "collie: ..." */
void __printf(1, 2) collie_err(const char *fmt, ...);
/* a usage error: one line, the message and a hint naming the current command; EXIT_USAGE */
int __printf(1, 2) collie_usage_err(const char *fmt, ...);
/* the command words typed so far, for usage messages ("vdi create") */
extern char collie_cmd_path[64];

/* map a result code to an exit code (the only place this happens) */
int collie_exit_code(int result);

/*
 * Run one request on a new connection to opts.addr:opts.port. The version
 * byte is set from the opcode. Returns 0 and fills rsp (look at
 * rsp->result), or -errno after printing why.
 */
int collie_exec(struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen, struct sd_rsp *rsp);
/* the same against another node */
int collie_exec_at(const char *host, int port, struct sd_req *hdr, void *data, uint32_t wlen,
		   uint32_t rlen, struct sd_rsp *rsp);
/* a connection with the I/O timeout set: fd, or -errno after printing why */
int collie_connect(const char *host, int port);
/* fill the common header: opcode, version byte */
void collie_init_req(struct sd_req *hdr, uint8_t opcode);

/*
 * Run a request and turn a transport failure or a result other than
 * SD_RES_SUCCESS into a message ("collie: WHAT: reason") and an exit code.
 * Returns EXIT_OK or the exit code.
 */
int collie_run(const char *what, struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen,
	       struct sd_rsp *rsp);

/* write to stdout: EXIT_OK, or EXIT_SYSFAIL after saying why (quiet on EPIPE) */
int collie_write_stdout(const void *buf, size_t len);

/* time helpers: the daemon's time fields, whatever their unit, in seconds */
uint64_t collie_time_to_sec(uint64_t t);
void collie_fmt_time(uint64_t t, const char *fmt, char *buf, size_t len);

/* sizes: human ("1.0 GB") or, with -r, bytes */
void collie_fmt_size(uint64_t size, char *buf, size_t len);

/* node address helpers */
void collie_node_host(const struct sd_node *n, char *buf, size_t len);

/* VDI helpers (vdi.c, vdi_list.c) */
int vdi_check_name(const char *name);
/*
 * Resolve NAME (and snapshot string SNAP, NULL = working VDI) to a vid with
 * GET_VDI_INFO. Returns EXIT_OK or an exit code after printing why.
 */
int vdi_lookup(const char *name, const char *snap, uint32_t *vid);
/* READ_OBJ of the inode (len bytes: SD_INODE_HEADER_SIZE or SD_INODE_SIZE) */
int vdi_read_inode(uint32_t vid, struct sd_inode *inode, uint32_t len);
/* the same into a new inode (free it), or NULL and *ret an exit code after saying why */
struct sd_inode *vdi_load_inode(uint32_t vid, uint32_t len, int *ret);
/* WRITE_OBJ of len bytes of the inode at offset */
int vdi_write_inode(const struct sd_inode *inode, uint32_t offset, uint32_t len);
/* a vid-sorted walk of every VDI in use; fn gets the full inode */
int vdi_for_each(void (*fn)(const struct sd_inode *inode, void *arg), void *arg);

/* debug trace helpers (debug.c) and views of the profile (trace_stat.c) */
struct trace_buf {
	char *data;
	uint64_t len, cap;
};
/* a whole rendering in format @fmt of tracer @tracer (SD_TRACER_*, 0: the last started) */
int trace_read_rendering(uint32_t fmt, uint32_t tracer, struct trace_buf *b);
/* SD_TRACER_* of @name (NULL: 0), or -ENOENT */
int trace_tracer_id(const char *name, uint32_t *id);
int trace_stat(int argc, char **argv);
int trace_hist(int argc, char **argv);

/* vdi subcommands living outside vdi.c */
int vdi_read(int argc, char **argv);
int vdi_write(int argc, char **argv);
int vdi_list(int argc, char **argv);
int vdi_tree(int argc, char **argv);
int vdi_check(int argc, char **argv);

/*
 * Draw folded stacks (the daemon's "folded" trace) as an SVG flame graph
 * titled opts.title and write it to stdout (flame_cmd.c, drawing in
 * flame.c). Returns EXIT_OK or an exit code after saying why.
 */
int collie_write_flame(const char *folded, size_t len);

#endif
