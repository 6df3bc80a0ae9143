/*
 * The control path: trace_init, the trace operations and shutdown.
 * Everything here runs under the trace lock: trace_init and trace_shutdown
 * on the daemon's main thread, the operations on the trace queue's one
 * worker (ops.c), so that rendering a large snapshot never stalls the main
 * thread. It logs through the logger without sites (lib/Makefile.am).
 *
 * START chooses the sites (fnmatch on their names, or "0x..." for a site
 * without a symbol), starts a new session (buffers are reset lazily by
 * their threads) and patches the chosen sites with the world stopped.
 * STOP puts NOPs back; the records stay readable until the next START.
 * READ at offset 0 renders a snapshot (generation + 1), later offsets serve
 * chunks of it.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "trace.h"
#include "trace_priv.h"

#define TRACE_MAX_PATTERNS 64

/*
 * The built-in tracers: referenced from here, the tracer's top (every
 * program that uses it calls trace_init or trace_handle_op), so that the
 * linker keeps their objects of the static library.
 */
extern const void *const tracer_link_graph;
extern const void *const tracer_link_function;
extern const void *const tracer_link_profile;
extern const void *const tracer_link_loop;
extern const void *const tracer_link_thread;
const void *const *const trace_builtin_tracers[] = { &tracer_link_graph, &tracer_link_function,
						     &tracer_link_profile, &tracer_link_loop,
						     &tracer_link_thread };

enum init_state { INIT_NONE, INIT_DONE, INIT_FAILED };

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static enum init_state init_state;
static int trace_state = SD_TRACE_STATE_OFF; /* ON while some tracer runs */
static int last_started = TRACER_GRAPH;

/* each tracer's state, by id */
static struct tracer_state {
	uint8_t *want; /* its sites (one byte per site), NULL when off */
	uint32_t nr_patched;
	uint64_t since;
	uint64_t buffer_size;
} tstate[TRACE_MAX_TRACERS];

extern char trace_thread_kind[TRACE_MAX_TRACERS][16];

int trace_init(void)
{
	int ret;

	pthread_mutex_lock(&trace_lock);
	if (init_state == INIT_DONE) {
		ret = 0;
		goto out_unlock;
	}
	ret = trace_patch_init();
	if (ret == 0)
		ret = trace_sites_init(trace_sites_prepare);
	if (ret < 0) {
		init_state = INIT_FAILED;
		trace_state = SD_TRACE_STATE_BROKEN;
		sd_err("tracer unavailable: %s", strerror(-ret));
		goto out_unlock;
	}
	trace_clock_calibrate();
	init_state = INIT_DONE;
out_unlock:
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

static void clear_words(uint32_t bits)
{
	for (size_t i = 0; i < trace_nr_site_words; i++) {
		uint32_t w = trace_site_words[i];

		if (w & (bits << 24))
			__atomic_store_n(&trace_site_words[i], w & ~(bits << 24), __ATOMIC_RELAXED);
	}
}

/* one tracer alone is served inline by the hooks (hook.c) */
static void set_fast(void)
{
	uint32_t fast = TRACE_FAST_NONE;

	if (trace_hot.active == TRACER_BIT(TRACER_GRAPH) && !trace_hot.graph_root)
		fast = trace_hot.graph_thresh ? TRACE_FAST_THRESH : TRACE_FAST_GRAPH;
	else if (trace_hot.active == TRACER_BIT(TRACER_PROFILE))
		fast = TRACE_FAST_PROFILE;
	__atomic_store_n(&trace_hot.fast, fast, __ATOMIC_RELEASE);
}

static void mark_broken(void)
{
	trace_state = SD_TRACE_STATE_BROKEN;
	__atomic_store_n(&trace_hot.fast, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
	for (unsigned id = 0; id < TRACE_MAX_TRACERS; id++) {
		free(tstate[id].want);
		tstate[id].want = NULL;
		tstate[id].nr_patched = 0;
	}
}

/* what a START asks for */
struct start_args {
	const char *tracer;
	const char *pats[TRACE_MAX_PATTERNS];
	size_t nr_pats;
	const char *skip[TRACE_MAX_PATTERNS]; /* notrace= */
	size_t nr_skip;
	const char *roots[TRACE_MAX_PATTERNS];
	size_t nr_roots;
	const char *thread;
	uint64_t thresh_ns;
	/* graph's request mode (req_mode: any of them given) */
	bool req_mode;
	uint32_t sample;
	bool has_vid;
	uint32_t vid;
	uint64_t slower_ns;
	const char *main_only[TRACE_MAX_PATTERNS]; /* thread checker */
	size_t nr_main_only;
	const char *worker_only[TRACE_MAX_PATTERNS];
	size_t nr_worker_only;
};

static int add_pat(const char **v, size_t *nr, const char *p)
{
	if (*nr == TRACE_MAX_PATTERNS)
		return SD_RES_INVALID_PARMS;
	v[(*nr)++] = p;
	return SD_RES_SUCCESS;
}

/* a number of @v, at most @max: 0, or -1 for anything else */
static int parse_num(const char *v, uint64_t max, uint64_t *out)
{
	char *end;

	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return errno || *end || *out > max ? -1 : 0;
}

/* the request mode's options: sample=N, vdi=VID, slower=NS */
static int parse_req_option(struct start_args *a, const char *s, const char *v)
{
	uint64_t n;

	if (!strncmp(s, "sample=", 7)) {
		if (parse_num(v, UINT32_MAX, &n) || !n)
			return SD_RES_INVALID_PARMS;
		a->sample = (uint32_t)n;
	} else if (!strncmp(s, "vdi=", 4)) {
		if (parse_num(v, SD_NR_VDIS - 1, &n))
			return SD_RES_INVALID_PARMS;
		a->vid = (uint32_t)n;
		a->has_vid = true;
	} else if (!strncmp(s, "slower=", 7)) {
		if (parse_num(v, UINT64_MAX, &n) || !n)
			return SD_RES_INVALID_PARMS;
		a->slower_ns = n;
	} else {
		return SD_RES_INVALID_PARMS;
	}
	a->req_mode = true;
	return SD_RES_SUCCESS;
}

/* option @s, whose '=' is at @eq */
static int parse_option(struct start_args *a, const char *s, const char *eq)
{
	const char *v = eq + 1;
	char *end;

	if (!strncmp(s, "notrace=", 8))
		return *v ? add_pat(a->skip, &a->nr_skip, v) : SD_RES_SUCCESS;
	if (!strncmp(s, "main=", 5))
		return *v ? add_pat(a->main_only, &a->nr_main_only, v) : SD_RES_INVALID_PARMS;
	if (!strncmp(s, "worker=", 7))
		return *v ? add_pat(a->worker_only, &a->nr_worker_only, v) : SD_RES_INVALID_PARMS;
	if (!strncmp(s, "graph-function=", 15))
		return *v ? add_pat(a->roots, &a->nr_roots, v) : SD_RES_INVALID_PARMS;
	if (!strncmp(s, "thread=", 7)) {
		if (!*v || strlen(v) >= sizeof(trace_thread_kind[0]))
			return SD_RES_INVALID_PARMS;
		a->thread = v;
		return SD_RES_SUCCESS;
	}
	if (!strncmp(s, "threshold=", 10)) {
		errno = 0;
		a->thresh_ns = strtoull(v, &end, 10);
		return errno || *end || !*v ? SD_RES_INVALID_PARMS : SD_RES_SUCCESS;
	}
	return parse_req_option(a, s, v);
}

/* Split the payload into tracer name, patterns and options. SD_RES_*. */
static int parse_start(const char *data, size_t len, struct start_args *a)
{
	size_t off = 0;

	memset(a, 0, sizeof(*a));
	a->tracer = "";
	if (!len)
		return SD_RES_SUCCESS;
	if (data[len - 1] != '\0')
		return SD_RES_INVALID_PARMS;
	a->tracer = data;
	off = strlen(data) + 1;
	while (off < len) {
		const char *s = data + off, *eq = strchr(s, '=');
		int ret = SD_RES_SUCCESS;

		if (eq)
			ret = parse_option(a, s, eq);
		else if (*s) /* an empty pattern selects nothing: ignore it */
			ret = add_pat(a->pats, &a->nr_pats, s);
		if (ret != SD_RES_SUCCESS)
			return ret;
		off += strlen(s) + 1;
	}
	return SD_RES_SUCCESS;
}

static bool name_matches(const char *name, const char *const *pats, size_t nr_pats)
{
	for (size_t p = 0; p < nr_pats; p++)
		if (!fnmatch(pats[p], name, 0))
			return true;
	return false;
}

static uint64_t pow2_records(uint64_t bytes)
{
	uint64_t n = 1;

	while (n * sizeof(struct trace_rec) < bytes)
		n <<= 1;
	return n;
}

/* whether a tracer hijacks returns (a stub), or is entry-only (a call will do) */
static uint8_t site_kind(unsigned id)
{
	return trace_tracer_by_id(id)->exit ? TRACE_SITE_STUB : TRACE_SITE_CALL;
}

/*
 * The state of each site (TRACE_SITE_*) for tracer @id wanting @want (NULL:
 * none) beside the tracers that run: a stub where any hijacking tracer wants
 * the site, a call where only entry-only ones do; where the graph tracer
 * in its request mode (@req_mode, for @id's start) is alone, the sample
 * form. Two tracers at a site share the stub and the general hook.
 */
static void union_want(uint8_t *u, unsigned id, const uint8_t *want, bool req_mode)
{
	bool graph_req = id == TRACER_GRAPH
			     ? req_mode
			     : __atomic_load_n(&trace_hot.req_mode, __ATOMIC_RELAXED) != 0;

	for (size_t i = 0; i < trace_nr_sites; i++) {
		bool hijack = false, sample = false;
		unsigned nr = 0;

		for (unsigned t = 0; t < TRACE_MAX_TRACERS; t++) {
			const uint8_t *w = t == id ? want : tstate[t].want;

			if (!w || !w[i])
				continue;
			nr++;
			hijack |= site_kind(t) == TRACE_SITE_STUB;
			sample |= t == TRACER_GRAPH && graph_req;
		}
		u[i] = !nr		   ? TRACE_SITE_NOP
		       : nr == 1 && sample ? TRACE_SITE_SAMPLE
		       : hijack		   ? TRACE_SITE_STUB
					   : TRACE_SITE_CALL;
	}
}

/*
 * Functions whose own time is mostly a wait for work, not work: the event
 * loop's round (its epoll_wait). The graph and profile tracers leave them
 * out unless a --function names one exactly, or they would top every
 * profile table and flame graph with the main thread's idle time.
 */
static const char *const idle_functions[] = { "ev_loop_once", NULL };

static bool is_idle(const struct start_args *a, const char *name)
{
	for (const char *const *f = idle_functions; *f; f++) {
		if (strcmp(name, *f))
			continue;
		for (size_t p = 0; p < a->nr_pats; p++)
			if (!strcmp(a->pats[p], name))
				return false;
		return true;
	}
	return false;
}

/*
 * The sites of @a for tracer @id: the patterns (none: every site) but
 * notrace (and the idle functions for graph and profile); graph's roots
 * are in too, and marked. *nr_want counts them. SD_RES_*.
 */
static int choose_sites(const struct start_args *a, unsigned id, uint8_t *want, uint8_t *root,
			size_t *nr_want)
{
	size_t nr_roots = 0;

	*nr_want = 0;
	for (size_t i = 0; i < trace_nr_sites; i++) {
		char buf[32];
		const char *name = trace_site_name(&trace_sites[i], 0, buf, sizeof(buf));

		if (name_matches(name, a->skip, a->nr_skip))
			continue;
		if ((id == TRACER_GRAPH || id == TRACER_PROFILE) && is_idle(a, name))
			continue;
		if (a->nr_main_only && name_matches(name, a->main_only, a->nr_main_only))
			root[i] |= 2;
		if (a->nr_worker_only && name_matches(name, a->worker_only, a->nr_worker_only))
			root[i] |= 4;
		if (a->nr_main_only || a->nr_worker_only) {
			/* the thread checker: the marked functions only */
			if (root[i]) {
				want[i] = 1;
				(*nr_want)++;
			}
			continue;
		}
		if (a->nr_roots && name_matches(name, a->roots, a->nr_roots)) {
			root[i] |= 1;
			nr_roots++;
		}
		if (root[i] || !a->nr_pats || name_matches(name, a->pats, a->nr_pats)) {
			want[i] = 1;
			(*nr_want)++;
		}
	}
	return !*nr_want || (a->nr_roots && !nr_roots) ? SD_RES_NO_MATCH : SD_RES_SUCCESS;
}

/* the profile index of each chosen site, in the site words and trace_prof_sites */
static int index_sites(const uint8_t *want, size_t nr_want)
{
	uint32_t *sites = calloc(nr_want ? nr_want : 1, sizeof(*sites));
	uint32_t n = 0;

	if (!sites)
		return -ENOMEM;
	for (size_t i = 0; i < trace_nr_sites; i++) {
		uint32_t *w = trace_site_word(trace_sites[i].addr);

		if (!want[i])
			continue;
		sites[n] = (uint32_t)i;
		__atomic_store_n(w, (*w & ~0x3fffffU) | n, __ATOMIC_RELAXED);
		n++;
	}
	free(trace_prof_sites);
	trace_prof_sites = sites;
	trace_nr_prof_sites = n;
	return 0;
}

static void set_words(unsigned id, const uint8_t *want, const uint8_t *root)
{
	for (size_t i = 0; i < trace_nr_sites; i++) {
		uint32_t *w = trace_site_word(trace_sites[i].addr);
		uint32_t v = *w;

		if (id == TRACER_GRAPH)
			v = root[i] & 1 ? v | TRACE_WORD_ROOT : v & ~TRACE_WORD_ROOT;
		if (id == TRACER_THREAD) {
			v &= ~(TRACE_WORD_MAIN_ONLY | TRACE_WORD_WORKER_ONLY);
			v |= (root[i] & 2 ? TRACE_WORD_MAIN_ONLY : 0) |
			     (root[i] & 4 ? TRACE_WORD_WORKER_ONLY : 0);
		}
		if (want[i])
			v |= TRACER_BIT(id) << 24;
		__atomic_store_n(w, v, __ATOMIC_RELAXED);
	}
}

/* the configuration of the tracer being started, in the hot struct */
static int apply_config(const struct tracer_ops *t, const struct start_args *a,
			const struct sd_req *req, size_t nr_want)
{
	uint64_t bsize = req->trace.buffer_size ? req->trace.buffer_size : TRACE_DEFAULT_BUFFER;
	struct trace_config c = {
		.nr_sites = nr_want,
		.thresh_ns = a->thresh_ns,
		.has_root = a->nr_roots > 0,
	};
	int ret;

	if (bsize < TRACE_MIN_BUFFER)
		bsize = TRACE_MIN_BUFFER;
	c.buffer_size = bsize;
	ret = t->start(&c);
	if (ret < 0)
		return ret;
	tbuf_reap();
	tstate[t->id].buffer_size = pow2_records(c.buffer_size) * sizeof(struct trace_rec);
	trace_hot.nr_records[t->id] = pow2_records(c.buffer_size);
	/* a ring of the default size grows on demand; one asked for does not */
	trace_hot.max_records[t->id] = trace_hot.nr_records[t->id];
	if (!req->trace.buffer_size && t->id != TRACER_PROFILE &&
	    pow2_records(TRACE_DEFAULT_MAX_BUFFER) > trace_hot.nr_records[t->id])
		trace_hot.max_records[t->id] = pow2_records(TRACE_DEFAULT_MAX_BUFFER);
	/* the loop checker watches the event loop: the main thread */
	snprintf(trace_thread_kind[t->id], sizeof(trace_thread_kind[0]), "%s",
		 a->thread		? a->thread
		 : t->id == TRACER_LOOP ? "main"
					: "");
	if (t->id == TRACER_GRAPH) {
		trace_hot.depth_limit = req->trace.depth ? req->trace.depth : TRACE_MAX_DEPTH;
		/* ns to ticks: ticks = ns * 2^32 / (ns per tick << 32) */
		trace_hot.graph_thresh =
		    a->thresh_ns
			? (uint64_t)(((unsigned __int128)a->thresh_ns << 32) / trace_clk_mult)
			: 0;
		if (a->thresh_ns && !trace_hot.graph_thresh)
			trace_hot.graph_thresh = 1;
		trace_hot.graph_root = a->nr_roots > 0;
		trace_hot.req_sample = a->sample ? a->sample : 1;
		trace_hot.req_vid = a->vid;
		trace_hot.req_has_vid = a->has_vid;
		trace_hot.req_slower =
		    a->slower_ns
			? (uint64_t)(((unsigned __int128)a->slower_ns << 32) / trace_clk_mult)
			: 0;
		trace_req_reset_count();
		/* before the sites take the sample form: the hooks read it */
		__atomic_store_n(&trace_hot.req_mode, a->req_mode, __ATOMIC_RELEASE);
	} else if (!tstate[TRACER_GRAPH].want) {
		trace_hot.depth_limit = TRACE_MAX_DEPTH; /* --depth is graph's */
	}
	return 0;
}

/*
 * Give back the buffers of tracer @id's older sessions that the new one
 * will not reuse (grown rings, tables of another size), before its threads
 * ask for new ones: its session is bumped, so once the world is stopped
 * no thread outside a hook will touch them again. 0 or -ETIMEDOUT.
 */
static int reclaim_buffers(unsigned id, bool keep_reusable)
{
	uint64_t freed = 0;
	int ret;

	__atomic_store_n(&trace_drop_mask, TRACER_BIT(id), __ATOMIC_RELEASE);
	trace_thread_drop_stale(); /* ours: the other threads' in the handler */
	ret = trace_stw_stop();
	if (ret == 0) {
		freed = tbuf_reclaim(id, keep_reusable);
		trace_stw_release();
	}
	__atomic_store_n(&trace_drop_mask, 0, __ATOMIC_RELEASE);
	if (freed)
		sd_debug("%llu bytes of trace buffers freed", (unsigned long long)freed);
	return ret;
}

/*
 * The threads of the process of kind @kind (NULL or "": all; trace.h:
 * "main", or the first word of a thread's name), from /proc. -errno if it
 * cannot be read.
 */
static int count_threads(const char *kind)
{
	DIR *d = opendir("/proc/self/task");
	size_t klen = kind ? strlen(kind) : 0;
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		if (!klen) {
			n++;
			continue;
		}
		if (!strcmp(kind, "main")) {
			n += atoi(de->d_name) == (int)getpid();
			continue;
		}
		if (atoi(de->d_name) == (int)getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		n += !strncmp(comm, kind, klen) && (comm[klen] == '\0' || comm[klen] == ' ');
	}
	closedir(d);
	return n;
}

/*
 * Whether the start of tracer @id with @a fits: some thread of its
 * --thread kind (SD_RES_TRACE_NO_THREAD), and its rings (the first size
 * of each, times the threads it may trace) within the total with what
 * the other tracers' rings hold (SD_RES_TRACE_TOO_BIG, the figures in
 * @rsp). Its own rings of an older session are given back or reused.
 */
static int check_memory(const struct sd_req *req, struct sd_rsp *rsp, const struct start_args *a,
			unsigned id)
{
	uint64_t bsize = req->trace.buffer_size ? req->trace.buffer_size : TRACE_DEFAULT_BUFFER;
	uint64_t held = 0, need;
	const char *kind = a->thread ? a->thread : id == TRACER_LOOP ? "main" : NULL;
	int nr = count_threads(kind);

	if (nr == 0)
		return SD_RES_TRACE_NO_THREAD;
	if (nr < 0)
		return SD_RES_SUCCESS; /* no /proc: the ring total still holds */
	if (bsize < TRACE_MIN_BUFFER)
		bsize = TRACE_MIN_BUFFER;
	for (unsigned t = 0; t < TRACE_MAX_TRACERS; t++)
		if (t != id)
			held += tbuf_held(t);
	need =
	    (uint64_t)nr * (sizeof(struct tbuf) + pow2_records(bsize) * sizeof(struct trace_rec));
	if (held + need <= trace_max_total)
		return SD_RES_SUCCESS;
	rsp->trace.total_length = held + need;
	rsp->trace.generation = (uint64_t)nr;
	return SD_RES_TRACE_TOO_BIG;
}

/*
 * Give back the rings of the stopped tracers other than @id (their records,
 * kept for reading, are dropped): a start that needs their room comes
 * first. True if some were.
 */
static bool free_stopped(unsigned id)
{
	bool any = false;

	for (unsigned t = 0; t < TRACE_MAX_TRACERS; t++) {
		if (t == id || tstate[t].want || !tbuf_held(t))
			continue;
		/* every ring of it is of an older session now: reclaim takes them */
		__atomic_add_fetch(&trace_hot.session[t], 1, __ATOMIC_RELEASE);
		if (reclaim_buffers(t, false) == 0)
			any = true;
		sd_info("the rings of the stopped %s tracer were freed for a start",
			trace_tracer_by_id(t)->name);
	}
	return any;
}

static int trace_start(const struct sd_req *req, struct sd_rsp *rsp, const char *data)
{
	const struct tracer_ops *tracer;
	struct start_args a;
	size_t nr_want = 0;
	uint8_t *want, *root = NULL, *u = NULL;
	unsigned id;
	int ret;

	if (trace_state == SD_TRACE_STATE_BROKEN)
		return SD_RES_TRACE_BROKEN;
	ret = parse_start(data, req->data_length, &a);
	if (ret != SD_RES_SUCCESS)
		return ret;
	tracer = trace_find_tracer(a.tracer);
	if (!tracer)
		return SD_RES_NO_TRACER;
	id = tracer->id;
	if (tstate[id].want)
		return SD_RES_TRACE_BUSY;
	if (id == TRACER_THREAD && !a.nr_main_only && !a.nr_worker_only) {
		for (const char *const *p = trace_thread_main_only; *p; p++)
			add_pat(a.main_only, &a.nr_main_only, *p);
		for (const char *const *p = trace_thread_worker_only; *p; p++)
			add_pat(a.worker_only, &a.nr_worker_only, *p);
	}
	if (req->trace.depth > TRACE_MAX_DEPTH || req->trace.buffer_size > TRACE_MAX_BUFFER ||
	    ((a.nr_main_only || a.nr_worker_only) && id != TRACER_THREAD) ||
	    (a.nr_roots && id != TRACER_GRAPH) || (a.req_mode && id != TRACER_GRAPH) ||
	    (a.thresh_ns && id != TRACER_GRAPH && id != TRACER_LOOP))
		return SD_RES_INVALID_PARMS;
	ret = check_memory(req, rsp, &a, id);
	/* the buffers they walk may go */
	trace_renderings_end();
	if (ret == SD_RES_TRACE_TOO_BIG && free_stopped(id))
		ret = check_memory(req, rsp, &a, id);
	if (ret != SD_RES_SUCCESS)
		return ret;

	want = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	root = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	u = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	if (!want || !root || !u) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	ret = choose_sites(&a, id, want, root, &nr_want);
	if (ret != SD_RES_SUCCESS)
		goto out_free;
	if (id == TRACER_PROFILE && index_sites(want, nr_want) < 0) {
		ret = SD_RES_NO_MEM;
		goto out_free;
	}
	ret = apply_config(tracer, &a, req, nr_want);
	if (ret < 0) {
		ret = trace_errno_to_res(ret);
		goto out_free;
	}
	set_words(id, want, root);
	__atomic_store_n(&trace_nr_nobuf[id], 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&trace_hot.session[id], 1, __ATOMIC_RELEASE);
	/* before the reclaim: frames of the older session no longer match it */
	if (id == TRACER_PROFILE)
		__atomic_store_n(&trace_hot.prof_key,
				 (uint64_t)TRACE_FRAME_PROFILE << 32 | trace_hot.session[id],
				 __ATOMIC_RELEASE);
	ret = reclaim_buffers(id, true);
	if (ret < 0) {
		clear_words(TRACER_BIT(id));
		tracer->stop();
		sd_err("cannot start tracing: %s", strerror(-ret));
		ret = trace_errno_to_res(ret);
		goto out_free;
	}
	/* off the fast path before a site of another tracer can be patched */
	__atomic_store_n(&trace_hot.fast, 0, __ATOMIC_RELEASE);
	__atomic_or_fetch(&trace_hot.active, TRACER_BIT(id), __ATOMIC_RELEASE);
	set_fast();
	union_want(u, id, want, a.req_mode);
	ret = trace_patch(u);
	if (ret < 0) {
		__atomic_and_fetch(&trace_hot.active, ~TRACER_BIT(id), __ATOMIC_RELEASE);
		set_fast();
		clear_words(TRACER_BIT(id));
		tracer->stop();
		if (ret == -EIO)
			mark_broken();
		sd_err("cannot start tracing: %s", strerror(-ret));
		ret = trace_errno_to_res(ret);
		goto out_free;
	}
	trace_state = SD_TRACE_STATE_ON;
	tstate[id].want = want;
	want = NULL;
	tstate[id].nr_patched = (uint32_t)nr_want;
	tstate[id].since = (uint64_t)time(NULL);
	last_started = (int)id;
	sd_info("tracing %zu of %zu functions with %s", nr_want, trace_nr_sites, tracer->name);
	ret = SD_RES_SUCCESS;
out_free:
	free(want);
	free(root);
	free(u);
	return ret;
}

/* Stop tracer @id (it runs). SD_RES_*. */
static int stop_one(unsigned id)
{
	uint8_t *u = calloc(trace_nr_sites ? trace_nr_sites : 1, 1);
	int ret;

	if (!u)
		return SD_RES_NO_MEM;
	union_want(u, id, NULL, false);
	/* the fast paths do not look at active: leave them first */
	__atomic_store_n(&trace_hot.fast, TRACE_FAST_NONE, __ATOMIC_RELEASE);
	__atomic_and_fetch(&trace_hot.active, ~TRACER_BIT(id), __ATOMIC_RELEASE);
	ret = trace_patch(u);
	free(u);
	if (ret == -ETIMEDOUT) {
		/* still tracing: the caller may retry */
		__atomic_or_fetch(&trace_hot.active, TRACER_BIT(id), __ATOMIC_RELEASE);
		set_fast();
		return SD_RES_TRACE_TIMEOUT;
	}
	trace_tracer_by_id(id)->stop();
	if (ret < 0) {
		mark_broken();
		return SD_RES_TRACE_BROKEN;
	}
	clear_words(TRACER_BIT(id));
	if (id == TRACER_GRAPH) {
		trace_hot.graph_thresh = 0;
		trace_hot.graph_root = 0;
		__atomic_store_n(&trace_hot.req_mode, 0, __ATOMIC_RELEASE);
		trace_hot.req_slower = 0;
	}
	set_fast();
	free(tstate[id].want);
	tstate[id].want = NULL;
	tstate[id].nr_patched = 0;
	sd_info("tracing stopped (%s)", trace_tracer_by_id(id)->name);
	return SD_RES_SUCCESS;
}

static bool any_on(void)
{
	for (unsigned id = 0; id < TRACE_MAX_TRACERS; id++)
		if (tstate[id].want)
			return true;
	return false;
}

static int trace_stop(const struct sd_req *req, const char *data)
{
	const struct tracer_ops *t = NULL;
	int ret = SD_RES_SUCCESS;

	if (trace_state == SD_TRACE_STATE_BROKEN)
		return SD_RES_TRACE_BROKEN;
	if (req->data_length) {
		if (data[req->data_length - 1] != '\0')
			return SD_RES_INVALID_PARMS;
		t = trace_find_tracer(data);
		if (!t)
			return SD_RES_NO_TRACER;
		if (!tstate[t->id].want)
			return SD_RES_TRACE_OFF;
		ret = stop_one(t->id);
	} else {
		if (trace_state != SD_TRACE_STATE_ON)
			return SD_RES_TRACE_BUSY;
		for (unsigned id = 0; id < TRACE_MAX_TRACERS && ret == SD_RES_SUCCESS; id++)
			if (tstate[id].want)
				ret = stop_one(id);
	}
	if (trace_state != SD_TRACE_STATE_BROKEN && !any_on())
		trace_state = SD_TRACE_STATE_OFF;
	return ret;
}

static uint32_t nr_patched_all(void)
{
	uint32_t n = 0;

	for (size_t i = 0; i < trace_nr_sites; i++)
		n += trace_site_on[i] != TRACE_SITE_NOP;
	return n;
}

static int trace_status(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	struct sd_trace_status st;
	const struct tracer_ops *t = trace_tracer_by_id((unsigned)last_started);
	size_t len = sizeof(st);
	uint32_t nr_bufs;

	if (req->data_length < sizeof(st))
		return SD_RES_INVALID_PARMS;
	memset(&st, 0, sizeof(st));
	if (t)
		strncpy(st.tracer, t->name, sizeof(st.tracer) - 1);
	st.state = (uint32_t)trace_state;
	st.nr_sites_patched = trace_site_on ? nr_patched_all() : 0;
	st.nr_sites_total = (uint32_t)trace_nr_sites;
	tbuf_counts((unsigned)last_started, &st.nr_threads, &st.nr_events, &st.nr_lost);
	st.nr_untraced = __atomic_load_n(&trace_nr_nobuf[last_started], __ATOMIC_RELAXED);
	st.buffer_size = tstate[last_started].buffer_size ? tstate[last_started].buffer_size
							  : TRACE_DEFAULT_BUFFER;
	st.depth = trace_hot.depth_limit;
	tbuf_memory(&st.mem_bytes, &nr_bufs);
	st.mem_max = trace_max_total;
	memcpy(data, &st, sizeof(st));
	for (unsigned id = 0; id < TRACE_MAX_TRACERS; id++) {
		const struct tracer_ops *o = trace_tracer_by_id(id);
		struct sd_trace_tracer tt;

		if (!o || len + sizeof(tt) > req->data_length)
			continue;
		memset(&tt, 0, sizeof(tt));
		strncpy(tt.name, o->name, sizeof(tt.name) - 1);
		tt.state = trace_state == SD_TRACE_STATE_BROKEN ? SD_TRACE_STATE_BROKEN
			   : tstate[id].want			? SD_TRACE_STATE_ON
								: SD_TRACE_STATE_OFF;
		tt.nr_sites_patched = tstate[id].nr_patched;
		tbuf_counts(id, &tt.nr_threads, &tt.nr_records, &tt.nr_lost);
		tt.nr_untraced = __atomic_load_n(&trace_nr_nobuf[id], __ATOMIC_RELAXED);
		tt.since = tstate[id].since;
		tt.buffer_size =
		    tstate[id].buffer_size ? tstate[id].buffer_size : TRACE_DEFAULT_BUFFER;
		memcpy((char *)data + len, &tt, sizeof(tt));
		len += sizeof(tt);
	}
	rsp->data_length = (uint32_t)len;
	return SD_RES_SUCCESS;
}

static int trace_read(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	int fmt = (int)req->trace.format;

	unsigned id = req->trace.tracer_flags	    ? req->trace.tracer_flags - 1
		      : fmt == SD_TRACE_FMT_PROFILE ? TRACER_PROFILE
						    : (unsigned)last_started;

	if (req->trace.format > SD_TRACE_FMT_EVENTS)
		return SD_RES_INVALID_PARMS;
	if (!trace_tracer_by_id(id))
		return SD_RES_NO_TRACER;
	return trace_read_op(req, rsp, data, id);
}

static int trace_follow_op(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	unsigned id =
	    req->trace.tracer_flags ? req->trace.tracer_flags - 1 : (unsigned)last_started;
	uint64_t handle;
	size_t len = 0;
	int ret;

	if (id == TRACER_PROFILE && !req->trace.tracer_flags)
		id = TRACER_GRAPH;
	if (!trace_tracer_by_id(id))
		return SD_RES_NO_TRACER;
	if (id != TRACER_GRAPH && id != TRACER_FUNCTION)
		return SD_RES_INVALID_PARMS;
	handle = req->trace.offset;
	ret = trace_follow(id, &handle, data, req->data_length, &len);
	if (ret < 0)
		return trace_errno_to_res(ret);
	rsp->data_length = (uint32_t)len;
	rsp->trace.generation = handle;
	return SD_RES_SUCCESS;
}

int trace_handle_op(const struct sd_req *req, struct sd_rsp *rsp, void *data)
{
	int ret;

	rsp->data_length = 0;
	if (req->data_length && !data)
		return SD_RES_INVALID_PARMS;
	pthread_mutex_lock(&trace_lock);
	if (init_state != INIT_DONE && req->opcode != SD_OP_TRACE_STATUS &&
	    req->opcode != SD_OP_TRACE_READ && req->opcode != SD_OP_TRACE_FOLLOW) {
		ret = init_state == INIT_FAILED ? SD_RES_TRACE_BROKEN : SD_RES_NO_SUPPORT;
		goto out_unlock;
	}
	/*
	 * START and STOP read their payload: without the WRITE flag the
	 * buffer was never filled from the wire (it may hold an earlier
	 * request's bytes), so parse nothing.
	 */
	if ((req->opcode == SD_OP_TRACE_START || req->opcode == SD_OP_TRACE_STOP) &&
	    req->data_length && !(req->flags & SD_FLAG_CMD_WRITE)) {
		ret = SD_RES_INVALID_PARMS;
		goto out_unlock;
	}
	switch (req->opcode) {
	case SD_OP_TRACE_START:
		ret = trace_start(req, rsp, data);
		break;
	case SD_OP_TRACE_STOP:
		ret = trace_stop(req, data);
		break;
	case SD_OP_TRACE_STATUS:
		ret = trace_status(req, rsp, data);
		break;
	case SD_OP_TRACE_READ:
		ret = trace_read(req, rsp, data);
		break;
	case SD_OP_TRACE_FOLLOW:
		ret = trace_follow_op(req, rsp, data);
		break;
	default:
		ret = SD_RES_INVALID_PARMS;
		break;
	}
out_unlock:
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

void trace_shutdown(void)
{
	pthread_mutex_lock(&trace_lock);
	if (init_state == INIT_DONE && trace_state == SD_TRACE_STATE_ON) {
		int ret = trace_patch_all_off();

		if (ret < 0)
			sd_err("cannot stop tracing at shutdown: %s", strerror(-ret));
		__atomic_store_n(&trace_hot.fast, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&trace_hot.active, 0, __ATOMIC_RELEASE);
		trace_state = SD_TRACE_STATE_OFF;
		for (unsigned id = 0; id < TRACE_MAX_TRACERS; id++) {
			free(tstate[id].want);
			tstate[id].want = NULL;
			tstate[id].nr_patched = 0;
		}
	}
	trace_renderings_end();
	pthread_mutex_unlock(&trace_lock);
}
