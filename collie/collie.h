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
	uint8_t copies;	     /* with an erasure code (-c D:P): D + P */
	uint8_t copy_policy; /* 0, or -c D:P as the inode keeps it (ec.h) */
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
	bool caches;
	bool vdi;
	bool repair; /* vdi check --repair */
	bool force;  /* vdi unlock --force */
	const char *from; /* vdi backup -F: the older snapshot */
	bool compress;	  /* vdi backup --compress */
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
	/* debug trace's requests: start --sample, --vdi NAME, --slower-than; slow */
	bool has_sample;
	uint32_t sample;
	const char *vdi_name;
	bool has_slower;
	uint64_t slower_ns;
	const char *op;
	const char *request;
};

extern struct collie_opts opts;

/* option bits: which options a subcommand accepts (-a, -p, -h always) */
#define OPT_COPIES (UINT64_C(1) << 0)
#define OPT_SNAPSHOT (UINT64_C(1) << 1)
#define OPT_RAW (UINT64_C(1) << 2)
#define OPT_TRACER (UINT64_C(1) << 3)
#define OPT_FUNCTION (UINT64_C(1) << 4)
#define OPT_DEPTH (UINT64_C(1) << 5)
#define OPT_BUFFER_SIZE (UINT64_C(1) << 6)
#define OPT_FORMAT (UINT64_C(1) << 7)
#define OPT_WATCH (UINT64_C(1) << 8)
#define OPT_COUNT (UINT64_C(1) << 9)
#define OPT_HIST (UINT64_C(1) << 10)
#define OPT_ALL (UINT64_C(1) << 11)
#define OPT_QUEUES (UINT64_C(1) << 12)
#define OPT_VDI (UINT64_C(1) << 13)
#define OPT_TITLE (UINT64_C(1) << 14)
#define OPT_REPAIR (UINT64_C(1) << 15)
#define OPT_FROM (UINT64_C(1) << 16)
#define OPT_COMPRESS (UINT64_C(1) << 17)
/* debug trace's requests */
#define OPT_SAMPLE (UINT64_C(1) << 18)
#define OPT_SLOWER_THAN (UINT64_C(1) << 19)
#define OPT_OP (UINT64_C(1) << 30)
#define OPT_REQUEST (UINT64_C(1) << 31)
/* debug trace (bits from 20 up) */
#define OPT_NOTRACE (UINT64_C(1) << 20)
#define OPT_GRAPH_FUNCTION (UINT64_C(1) << 21)
#define OPT_THRESHOLD (UINT64_C(1) << 22)
#define OPT_THREAD (UINT64_C(1) << 23)
#define OPT_SORT (UINT64_C(1) << 24)
#define OPT_TOP (UINT64_C(1) << 25)
#define OPT_CSV (UINT64_C(1) << 26)
#define OPT_FOLLOW (UINT64_C(1) << 27)
#define OPT_MAIN_ONLY (UINT64_C(1) << 28)
#define OPT_WORKER_ONLY (UINT64_C(1) << 29)
#define OPT_FORCE (UINT64_C(1) << 32)
#define OPT_CACHES (UINT64_C(1) << 33)

/*
 * A subcommand: handler gets the positional arguments after its own name.
 * A subcommand with a non-NULL sub table (debug trace) has no handler; the
 * next word selects from sub. Tables end with a zeroed entry.
 */
struct subcommand {
	const char *name;
	const char *args;   /* usage synopsis of the positional arguments */
	uint64_t flags; /* OPT_* accepted */
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
extern const struct subcommand node_md_cmds[];
extern const struct subcommand vdi_cmds[];
extern const struct subcommand debug_cmds[];
extern const struct subcommand cluster_snapshot_cmds[];

/* node.c: GET_NODE_LIST into a new array (free it): EXIT_OK or an exit code */
int node_get_list(struct sd_node **nodes, uint32_t *nr, uint32_t *local_idx);
/* node.c: collie cluster reweight (the vnodes from the nodes' sizes) */
int cluster_reweight(int argc, char **argv);
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

/*
 * A progress bar on stderr for long work, drawn only when stderr is a
 * terminal (never into a file or a pipe), redrawn at most 10 times a
 * second: "LABEL [#####.....]  52% 532 MB / 1.0 GB  45 MB/s  ETA 0:12".
 * total 0: unknown (the amount and the rate only); bytes: amounts are
 * sizes, otherwise counts (objects). Start, update with the amount done so
 * far as often as convenient (cheap when nothing is drawn), end once, on
 * success or failure (the last state and a newline, so that a message
 * after it starts on a line of its own).
 */
struct collie_progress {
	const char *label;
	uint64_t total, done;
	uint64_t start_ns, last_ns;
	unsigned int cols; /* the terminal's width, 0: unknown */
	bool on, drawn, bytes;
};
void collie_progress_start(struct collie_progress *p, const char *label, uint64_t total,
			   bool bytes);
void collie_progress_update(struct collie_progress *p, uint64_t done);
void collie_progress_end(struct collie_progress *p);
/* a message comes: end the bar's line, draw no more (collie_err calls it) */
void collie_progress_interrupt(void);

/* raw output of a name: whitespace and backslashes escaped with a backslash */
void collie_print_escaped(const char *s);

/* node address helpers */
void collie_node_host(const struct sd_node *n, char *buf, size_t len);

/* VDI helpers (vdi.c, vdi_list.c) */
int vdi_check_name(const char *name);
/*
 * Resolve NAME (and snapshot string SNAP, NULL = working VDI) to a vid with
 * GET_VDI_INFO. Returns EXIT_OK or an exit code after printing why.
 */
int vdi_lookup(const char *name, const char *snap, uint32_t *vid);
/* GET_VDI_INFO of name, snapid or tag: the result code (*vid on success), or -errno (printed) */
int vdi_get_info(const char *name, uint32_t snapid, const char *tag, uint32_t *vid);
/* whether a client holds vid's lock: EXIT_OK and *locked, or an exit code after saying why */
int vdi_is_locked(uint32_t vid, bool *locked);
/* READ_OBJ of the inode (len bytes: SD_INODE_HEADER_SIZE or SD_INODE_SIZE) */
int vdi_read_inode(uint32_t vid, struct sd_inode *inode, uint32_t len);
/* the same into a new inode (free it), or NULL and *ret an exit code after saying why */
struct sd_inode *vdi_load_inode(uint32_t vid, uint32_t len, int *ret);
/*
 * NEW_VDI (a create, a snapshot with snapshot = 1, a clone with base_vid):
 * the result code or -errno (printed); *new_vid on success when not NULL
 */
int vdi_new(const char *name, uint64_t size, uint32_t base_vid, uint8_t copies, uint8_t copy_policy,
	    uint8_t shift, uint32_t snapshot, uint32_t *new_vid);
/* vdi_new's failure as a message ("failed to WHAT vdi NAME: ...") and an exit code */
int vdi_new_err(const char *what, const char *name, int ret);
/* DEL_VDI of the working VDI NAME of id vid: EXIT_OK, or an exit code after saying why */
int vdi_del(const char *name, uint32_t vid);
/* WRITE_OBJ of len bytes of the inode at offset */
int vdi_write_inode(const struct sd_inode *inode, uint32_t offset, uint32_t len);
/* the names of the working VDIs, one a line (completion; errors go to stderr) */
void vdi_print_names(void);
/* a vid-sorted walk of every VDI in use; fn gets the full inode */
int vdi_for_each(void (*fn)(const struct sd_inode *inode, void *arg), void *arg);

/* debug trace helpers (debug.c) and views of the profile (trace_stat.c) */
struct trace_buf {
	char *data;
	uint64_t len, cap;
};
/* a whole rendering in format @fmt of tracer @tracer (SD_TRACER_*, 0: the last started) */
int trace_read_rendering(uint32_t fmt, uint32_t tracer, struct trace_buf *b);
/* the same, each chunk to @sink as it comes (EXIT_OK or an exit code) */
typedef int (*trace_sink_fn)(const char *data, size_t len, void *arg);
int trace_read_stream(uint32_t fmt, uint32_t tracer, trace_sink_fn sink, void *arg);
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
int vdi_backup(int argc, char **argv);
int vdi_restore(int argc, char **argv);
int vdi_rollback(int argc, char **argv);
int vdi_alter_copy(int argc, char **argv);
int cluster_alter_copy(int argc, char **argv);
int vdi_object(int argc, char **argv);

/*
 * Draw folded stacks (the daemon's "folded" trace) as an SVG flame graph
 * titled opts.title and write it to stdout (flame_cmd.c, drawing in
 * flame.c). Returns EXIT_OK or an exit code after saying why.
 */
int collie_write_flame(const char *folded, size_t len);

#endif
