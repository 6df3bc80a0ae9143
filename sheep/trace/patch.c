/*
 * Changing code safely.
 *
 * The one primitive that writes text is trace_text_write(). It writes
 * through /proc/self/mem, which the kernel allows on read-only private
 * mappings (as for a debugger): the text is never writable. If that file
 * cannot be written (a hardened kernel), it falls back to mprotect()
 * RWX -> write -> R-X on the pages concerned, only while the world is
 * stopped (RWX, not RW: the code doing it may share the page).
 *
 * Sites change only with the world stopped: every other thread gets SIGUSR2
 * and parks in stw_handler() (async-signal-safe, futex based, no site) until
 * the controller bumps stw_gen again. A thread that does not park within
 * trace_stw_timeout_ms aborts the change before any byte moved. Parked
 * threads run cpuid, a serialising instruction, before they go back to the
 * code that may have changed under them; so does the controller.
 *
 * Kill switch: a site that does not hold the bytes expected of its state
 * stops the change; every site that jumps to its stub is put back to a
 * NOP and the caller marks the tracer broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "trace_priv.h"

uint8_t *trace_site_on;
unsigned trace_stw_timeout_ms = TRACE_STW_TIMEOUT_MS;

static int mem_fd = -1;
static pid_t mem_pid;		   /* the process mem_fd belongs to (fork!) */
static bool mem_refused;	   /* /proc/self/mem cannot be written here */
static unsigned text_write_fallbacks; /* /proc/self/mem refused a write */
static uint32_t stw_gen;	   /* odd while the world is stopped */
static uint32_t stw_parked;	   /* threads parked in this round */
static __thread uint32_t stw_acked; /* the round this thread parked for */

static void cpu_serialise(void)
{
	uint32_t a = 0, b, c = 0, d;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

/* ---- writing text ---- */

static int text_write_mprotect(uintptr_t addr, const void *buf, size_t len)
{
	uintptr_t page = addr & ~4095UL;
	size_t span = round_up(addr + len - page, 4096);

	if (mprotect((void *)page, span, PROT_READ | PROT_WRITE | PROT_EXEC) < 0)
		return -errno;
	memcpy((void *)addr, buf, len);
	if (mprotect((void *)page, span, PROT_READ | PROT_EXEC) < 0)
		return -errno; /* cannot happen: it was R-X a moment ago */
	return 0;
}

/*
 * An fd of /proc/self/mem names the process that opened it: a child after
 * fork() must not write its parent's text. Reopened when the pid changed.
 */
static void mem_open(void)
{
	pid_t pid = getpid();

	if (mem_refused || (mem_fd >= 0 && mem_pid == pid))
		return;
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	mem_pid = pid;
	if (mem_fd < 0)
		mem_refused = true;
}

int trace_text_write(uintptr_t addr, const void *buf, size_t len)
{
	mem_open();
	if (mem_fd >= 0) {
		ssize_t n = pwrite(mem_fd, buf, len, (off_t)addr);

		if (n == (ssize_t)len)
			goto check;
		/* no logging here: the world may be stopped */
		text_write_fallbacks++;
		mem_refused = true;
		close(mem_fd);
		mem_fd = -1;
	}
	int ret = text_write_mprotect(addr, buf, len);

	if (ret < 0)
		return ret;
check:
	return memcmp((const void *)addr, buf, len) ? -EIO : 0;
}

bool trace_has_wx_mapping(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char perms[8];

		if (sscanf(line, "%*s %7s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x')
			found = true;
	}
	fclose(f);
	return found;
}

/* ---- the stubs, once at start-up ---- */

/*
 * What goes at @site - TRACE_STUB_SIZE: the function's stub (see entry.S),
 * then the site itself as NOP5.
 */
static void make_stub(uintptr_t site, uint8_t bytes[TRACE_STUB_SIZE + TRACE_INSN_SIZE])
{
	uintptr_t p = site - TRACE_STUB_SIZE;
	/* each rel32 counts from the end of its instruction, where the next starts */
	int32_t rel[3] = {
		(int32_t)((intptr_t)trace_entry_tramp - (intptr_t)(p + TRACE_STUB_CALL_RET)),
		(int32_t)((intptr_t)(site + TRACE_INSN_SIZE) - (intptr_t)(p + TRACE_STUB_BODY_RET)),
		(int32_t)((intptr_t)trace_return_tramp - (intptr_t)(p + TRACE_STUB_SIZE - 1)),
	};

	bytes[0] = 0xe8; /* call trace_entry_tramp */
	memcpy(bytes + 1, &rel[0], 4);
	bytes[TRACE_STUB_CALL_RET] = 0xe8; /* call site + 5 */
	memcpy(bytes + TRACE_STUB_CALL_RET + 1, &rel[1], 4);
	bytes[TRACE_STUB_BODY_RET] = 0xe9; /* jmp trace_return_tramp */
	memcpy(bytes + TRACE_STUB_BODY_RET + 1, &rel[2], 4);
	bytes[TRACE_STUB_SIZE - 1] = 0xcc; /* int3: never reached */
	memcpy(bytes + TRACE_STUB_SIZE, trace_nop5, TRACE_INSN_SIZE);
}

/*
 * Write every stub and turn every site into NOP5. A site already holding
 * both is fine (a second process image of the same text cannot exist, but a
 * re-run after a failed init can); anything else is an anomaly: nothing of
 * it is touched.
 */
static int sites_to_nop5(const struct trace_site *sites, size_t nr)
{
	uint8_t want[TRACE_STUB_SIZE + TRACE_INSN_SIZE];

	for (size_t i = 0; i < nr; i++) {
		const uint8_t *p = (const uint8_t *)sites[i].addr;

		make_stub(sites[i].addr, want);
		if (!memcmp(p - TRACE_STUB_SIZE, want, sizeof(want)))
			continue;
		for (int j = -TRACE_STUB_SIZE; j < TRACE_INSN_SIZE; j++)
			if (p[j] != 0x90) {
				sd_err("unexpected byte %02x at site %#lx%+d (not 16 + 5 NOPs)",
				       p[j], (unsigned long)sites[i].addr, j);
				return -EIO;
			}
	}
	for (size_t i = 0; i < nr; i++) {
		uintptr_t a = sites[i].addr;
		int ret;

		make_stub(a, want);
		ret = trace_text_write(a - TRACE_STUB_SIZE, want, sizeof(want));
		if (ret < 0) {
			sd_err("cannot write site %#lx: %s", (unsigned long)a, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int trace_sites_prepare(const struct trace_site *sites, size_t nr)
{
	int ret = sites_to_nop5(sites, nr);

	if (ret < 0)
		return ret;
	trace_site_on = calloc(nr ? nr : 1, 1);
	return trace_site_on ? 0 : -ENOMEM;
}

/* ---- stopping the world ---- */

static void stw_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	uint32_t g = __atomic_load_n(&stw_gen, __ATOMIC_ACQUIRE);

	/* a late signal of a finished round, or a second one for this round */
	if (!(g & 1) || stw_acked == g)
		goto out;
	stw_acked = g;
	/* before we count as parked: the controller frees what we drop */
	trace_thread_drop_stale();
	__atomic_fetch_add(&stw_parked, 1, __ATOMIC_SEQ_CST);
	futex(&stw_parked, FUTEX_WAKE_PRIVATE, 1, NULL);
	while (__atomic_load_n(&stw_gen, __ATOMIC_ACQUIRE) == g)
		futex(&stw_gen, FUTEX_WAIT_PRIVATE, g, NULL);
	cpu_serialise();
out:
	errno = saved_errno;
}

int trace_patch_init(void)
{
	struct sigaction sa;

	mem_open();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = stw_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		return -errno;
	return 0;
}

/*
 * While some threads are parked, the controller must not take a lock that
 * one of them may hold: no malloc, no stdio, no logging. Thread ids are read
 * with getdents64 into fixed space.
 */
#define STW_MAX_THREADS 4096

struct tid_set {
	pid_t tids[STW_MAX_THREADS];
	size_t nr;
};

static struct tid_set stw_set;

static bool tid_set_has(const struct tid_set *s, pid_t tid)
{
	for (size_t i = 0; i < s->nr; i++)
		if (s->tids[i] == tid)
			return true;
	return false;
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static pid_t parse_tid(const char *s)
{
	pid_t v = 0;

	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/* Signal every thread not signalled yet. Returns how many got it, or -errno. */
static int signal_new_threads(struct tid_set *s, pid_t self)
{
	char buf[4096] __attribute__((aligned(8)));
	pid_t pid = getpid();
	int fd, sent = 0;
	long n;

	fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + off);
			pid_t tid = parse_tid(de->d_name);

			off += de->d_reclen;
			if (tid <= 0 || tid == self || tid_set_has(s, tid))
				continue;
			if (s->nr == STW_MAX_THREADS) {
				close(fd);
				return -ENOSPC;
			}
			if (syscall(SYS_tgkill, pid, tid, SIGUSR2) < 0)
				continue; /* it exited meanwhile */
			s->tids[s->nr++] = tid;
			sent++;
		}
	}
	close(fd);
	return n < 0 ? -errno : sent;
}

/* signalled threads still alive: one that exited never parked */
static uint32_t nr_alive(const struct tid_set *s)
{
	pid_t pid = getpid();
	uint32_t n = 0;

	for (size_t i = 0; i < s->nr; i++)
		if (syscall(SYS_tgkill, pid, s->tids[i], 0) == 0)
			n++;
	return n;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait until every live signalled thread parked. 0 or -ETIMEDOUT. */
static int wait_parked(const struct tid_set *s, uint64_t deadline)
{
	const struct timespec slice = { 0, 10 * 1000 * 1000 };

	for (;;) {
		uint32_t parked = __atomic_load_n(&stw_parked, __ATOMIC_ACQUIRE);

		if (parked >= s->nr || parked >= nr_alive(s))
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		futex(&stw_parked, FUTEX_WAIT_PRIVATE, parked, &slice);
	}
}

int trace_stw_stop(void)
{
	struct tid_set *set = &stw_set;
	pid_t self = (pid_t)syscall(SYS_gettid);
	uint64_t deadline = now_ms() + trace_stw_timeout_ms;
	int ret;

	__atomic_store_n(&stw_parked, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&stw_gen, 1, __ATOMIC_SEQ_CST);
	set->nr = 0;
	/* a thread may be created while we wait: rescan until none is new */
	for (;;) {
		ret = signal_new_threads(set, self);
		if (ret <= 0)
			break;
		ret = wait_parked(set, deadline);
		if (ret < 0)
			break;
	}
	if (ret < 0) {
		trace_stw_release();
		return ret;
	}
	return 0;
}

void trace_stw_release(void)
{
	cpu_serialise();
	__atomic_add_fetch(&stw_gen, 1, __ATOMIC_SEQ_CST);
	futex(&stw_gen, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
}

/* ---- rewriting sites ---- */

/* a site turned on: a jmp to the function's stub, just before it (entry.S) */
static void make_jump(uintptr_t site, uint8_t insn[TRACE_INSN_SIZE])
{
	int32_t rel = -(int32_t)(TRACE_STUB_SIZE + TRACE_INSN_SIZE);

	insn[0] = 0xe9;
	memcpy(insn + 1, &rel, sizeof(rel));
}

/*
 * "call trace_func_tramp": an entry-only site, whose return is not
 * hijacked; "call trace_sample_tramp": the sample form (@tramp)
 */
static void make_call(uintptr_t site, void (*tramp)(void), uint8_t insn[TRACE_INSN_SIZE])
{
	int32_t rel = (int32_t)((intptr_t)tramp - (intptr_t)(site + TRACE_INSN_SIZE));

	insn[0] = 0xe8;
	memcpy(insn + 1, &rel, sizeof(rel));
}

/* the bytes of a site in state @state (TRACE_SITE_*) */
static const uint8_t *site_bytes(uintptr_t site, uint8_t state, uint8_t buf[TRACE_INSN_SIZE])
{
	if (state == TRACE_SITE_STUB)
		make_jump(site, buf);
	else if (state == TRACE_SITE_CALL)
		make_call(site, trace_func_tramp, buf);
	else if (state == TRACE_SITE_SAMPLE)
		make_call(site, trace_sample_tramp, buf);
	else
		return trace_nop5;
	return buf;
}

/* Put NOP5 on every site that holds our jump or a call; the world is stopped. */
static int all_off_locked(void)
{
	uint8_t jump[TRACE_INSN_SIZE], call[TRACE_INSN_SIZE], sample[TRACE_INSN_SIZE];
	int ret = 0;

	for (size_t i = 0; i < trace_nr_sites; i++) {
		uintptr_t a = trace_sites[i].addr;

		make_jump(a, jump);
		make_call(a, trace_func_tramp, call);
		make_call(a, trace_sample_tramp, sample);
		if (memcmp((void *)a, jump, TRACE_INSN_SIZE) &&
		    memcmp((void *)a, call, TRACE_INSN_SIZE) &&
		    memcmp((void *)a, sample, TRACE_INSN_SIZE))
			continue;
		if (trace_text_write(a, trace_nop5, TRACE_INSN_SIZE) < 0)
			ret = -EIO;
		else
			trace_site_on[i] = 0;
	}
	return ret;
}

static struct {
	uintptr_t addr;
	uint8_t bytes[TRACE_INSN_SIZE];
	bool write_failed;
} anomaly;

static void report_anomaly(void)
{
	const struct trace_site *s = trace_site_find(anomaly.addr);
	const uint8_t *p = anomaly.bytes;

	if (anomaly.write_failed)
		sd_err("cannot write site %#lx (%s)", (unsigned long)anomaly.addr,
		       s && s->name ? s->name : "?");
	else
		sd_err("anomaly at site %#lx (%s): %02x %02x %02x %02x %02x",
		       (unsigned long)anomaly.addr, s && s->name ? s->name : "?", p[0], p[1], p[2],
		       p[3], p[4]);
	sd_err("tracing disabled: every site is a NOP again");
}

/* one site to @state; -EIO if it does not hold what its state says */
static int patch_one(size_t i, uint8_t state)
{
	uintptr_t a = trace_sites[i].addr;
	uint8_t cur[TRACE_INSN_SIZE], next[TRACE_INSN_SIZE];
	const uint8_t *p = (const uint8_t *)a;

	anomaly.addr = a;
	memcpy(anomaly.bytes, p, TRACE_INSN_SIZE);
	anomaly.write_failed = false;
	if (memcmp(p, site_bytes(a, trace_site_on[i], cur), TRACE_INSN_SIZE))
		return -EIO;
	if (trace_text_write(a, site_bytes(a, state, next), TRACE_INSN_SIZE) < 0) {
		anomaly.write_failed = true;
		return -EIO;
	}
	trace_site_on[i] = state;
	return 0;
}

int trace_patch(const uint8_t *want)
{
	int ret = trace_stw_stop();

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < trace_nr_sites && !ret; i++)
		if (want[i] != trace_site_on[i])
			ret = patch_one(i, want[i]);
	if (ret < 0)
		all_off_locked();
	trace_stw_release();
	if (ret < 0)
		report_anomaly();
	if (text_write_fallbacks) {
		sd_warn("/proc/self/mem refused a text write: using mprotect from now on");
		text_write_fallbacks = 0;
	}
	return ret;
}

int trace_patch_all_off(void)
{
	int ret = trace_stw_stop();

	if (ret < 0)
		return ret;
	ret = all_off_locked();
	trace_stw_release();
	return ret;
}
