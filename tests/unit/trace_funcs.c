/*
 * Functions with trace sites for the tracer's unit tests. Each one is
 * noinline so that every call is a real call through its site, and the
 * recursive ones keep both calls out of tail position.
 */
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace_priv.h"
#include "trace_test.h"

#define TFN __attribute__((noinline, noclone))

long tfn_fib_calls;
long tfn_deep_max;

TFN int tfn_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

TFN int tfn_mid(int x)
{
	int r = tfn_leaf(x);

	r += tfn_leaf(r);
	__asm__ volatile("" : "+r"(r));
	return r;
}

TFN int tfn_top(int x)
{
	int r = tfn_mid(x);

	__asm__ volatile("" : "+r"(r));
	return r;
}

TFN long tfn_fib(int n)
{
	long a, b;

	__atomic_add_fetch(&tfn_fib_calls, 1, __ATOMIC_RELAXED);
	if (n < 2)
		return n;
	a = tfn_fib(n - 1);
	b = tfn_fib(n - 2);
	__asm__ volatile("" : "+r"(a), "+r"(b));
	return a + b;
}

TFN long tfn_deep(int n)
{
	long r;

	if (trace_shadow_depth() > tfn_deep_max)
		tfn_deep_max = trace_shadow_depth();
	if (n == 0)
		return 0;
	r = tfn_deep(n - 1);
	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

TFN double tfn_fp(double a, double b, float c, int i)
{
	return a * b + c + i;
}

TFN long double tfn_ld(long double a, long double b)
{
	return a / b;
}

TFN struct tfn_pair tfn_pair(long a, long b)
{
	struct tfn_pair p = { a * 3, b * 5 };

	__asm__ volatile("" ::: "memory");
	return p;
}

TFN struct tfn_big tfn_big(long seed)
{
	struct tfn_big b;

	for (int i = 0; i < 6; i++)
		b.v[i] = seed + i;
	__asm__ volatile("" ::: "memory");
	return b;
}

TFN long tfn_many(long a, long b, long c, long d, long e, long f, long g, long h)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

TFN long tfn_varargs(int n, ...)
{
	va_list ap;
	long sum = 0;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		sum += (long)va_arg(ap, double);
	va_end(ap);
	return sum;
}

TFN void *tfn_return_address(void)
{
	void *r = __builtin_return_address(0);

	__asm__ volatile("" ::: "memory");
	return r;
}

/* what trace_real_return() says of this call's return address; *raw: the slot itself */
TFN void *tfn_real_return(void **raw)
{
	/* the frame pointer this builtin forces: the return address is just above */
	uintptr_t *slot = (uintptr_t *)__builtin_frame_address(0) + 1;

	*raw = (void *)*slot;
	return (void *)trace_real_return(slot);
}

TFN unsigned tfn_depth_inside(void)
{
	unsigned d = trace_shadow_depth();

	__asm__ volatile("" ::: "memory");
	return d;
}

TFN void tfn_call(void (*fn)(void *), void *arg)
{
	fn(arg);
	__asm__ volatile("" ::: "memory");
}

static __thread jmp_buf tfn_env; /* one per thread: the workers use it too */

TFN static void tfn_jmp_inner(int x)
{
	tfn_leaf(x);
	if (x > 0)
		longjmp(tfn_env, x);
}

TFN int tfn_jmp_outer(int x)
{
	volatile int r = 0;

	if (setjmp(tfn_env) == 0)
		tfn_jmp_inner(x);
	else
		r = x;
	r += tfn_leaf(1);
	return r;
}

TFN int tfn_unused(int x)
{
	return x * 7;
}

/* event-loop handlers for the loop checker: one reads its byte and sleeps */
TFN void tfn_handler_slow(int fd, uint32_t events, void *data)
{
	struct timespec ts = { 0, 30 * 1000 * 1000 };
	char c;

	if (read(fd, &c, 1) == 1)
		nanosleep(&ts, NULL);
}

TFN void tfn_handler_fast(int fd, uint32_t events, void *data)
{
	char c;

	if (read(fd, &c, 1) == 1)
		__asm__ volatile("" ::: "memory");
}
