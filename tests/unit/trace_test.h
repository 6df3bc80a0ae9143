/*
 * Instrumented functions for the tracer's unit tests (trace_funcs.c, built
 * with sites) and helpers shared by test_trace*.c.
 */
#ifndef TRACE_TEST_H
#define TRACE_TEST_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal_proto.h"

struct tfn_pair {
	long a;
	long b;
};

struct tfn_big {
	long v[6];
};

extern long tfn_fib_calls;
extern long tfn_deep_max;

int tfn_leaf(int x);
int tfn_mid(int x);
int tfn_top(int x);
long tfn_fib(int n);
long tfn_deep(int n);
double tfn_fp(double a, double b, float c, int i);
long double tfn_ld(long double a, long double b);
struct tfn_pair tfn_pair(long a, long b);
struct tfn_big tfn_big(long seed);
long tfn_many(long a, long b, long c, long d, long e, long f, long g, long h);
long tfn_varargs(int n, ...);
void *tfn_return_address(void);
void *tfn_real_return(void **raw);
unsigned tfn_depth_inside(void);
void tfn_call(void (*fn)(void *), void *arg);
int tfn_jmp_outer(int x);
int tfn_unused(int x);
void tfn_handler_slow(int fd, uint32_t events, void *data);
void tfn_handler_fast(int fd, uint32_t events, void *data);

/* test helpers (not instrumented decisions: they live in the tests) */
int tt_op(uint8_t opcode, struct sd_req *req, void *data, uint32_t len, struct sd_rsp *rsp);
int tt_start(const char *tracer, const char *const *pats, uint32_t depth, uint64_t bsize);
int tt_stop(void);
int tt_status(struct sd_trace_status *st);
/* the whole rendering in @fmt, malloc'd and NUL-terminated (NULL on error) */
char *tt_read(int fmt);
/* the same from tracer @tracer (SD_TRACER_*, 0: the last started) */
char *tt_read_tracer(int fmt, uint32_t tracer);
/* stop one tracer by name */
int tt_stop_tracer(const char *name);
/* lines of @text containing @needle */
int tt_count(const char *text, const char *needle);
/* CSV lines (graph's SD_TRACE_FMT_CSV) whose function column is @fn */
int tt_csv_calls(const char *csv, const char *fn);
/* the same, and their durations summed into *@ns (if not NULL) */
int tt_csv_sum(const char *csv, const char *fn, uint64_t *ns);

struct trace_site;
struct Suite;
/* the site of function @fn, NULL if it has none */
const struct trace_site *tt_site_of(void *fn);
/* the site holds the 5-byte NOP */
bool tt_site_is_nop(const struct trace_site *s);
/* the site jumps to its stub, whose first instruction calls the trampoline */
bool tt_site_is_call(const struct trace_site *s);
/* sites for which tt_site_is_call() holds */
size_t tt_nr_sites_calling(void);
/* trace_init(), then run @s: the exit status of a test program */
int tt_run_suite(struct Suite *s);

#endif
