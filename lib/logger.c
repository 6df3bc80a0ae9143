/*
 * The log. Writes are one write(2) of a whole line to an O_APPEND fd, so
 * lines of different threads never interleave and no lock is needed.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

#include "logger.h"

int sd_log_level = SDOG_INFO;
static int log_fd = STDERR_FILENO;
static const char *log_prog = "sheep";

static const char *const level_names[] = {
	"emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
};

int sd_log_parse_level(const char *s)
{
	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (!strcasecmp(s, level_names[i]))
			return (int)i;
	if (!strcasecmp(s, "warning"))
		return SDOG_WARNING;
	if (!strcasecmp(s, "err"))
		return SDOG_ERR;
	return -1;
}

int sd_log_init(const char *path, int level, const char *progname)
{
	sd_log_level = level;
	if (progname)
		log_prog = progname;
	if (!path) {
		log_fd = STDERR_FILENO;
		return 0;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	log_fd = fd;
	return 0;
}

void sd_log_close(void)
{
	if (log_fd > STDERR_FILENO)
		close(log_fd);
	log_fd = STDERR_FILENO;
}

/*
 * Copy the message into dst, escaped so that no client string (a VDI name,
 * a tag) can forge or break a line: control bytes become \n, \r, \t or \xNN
 * and a backslash is doubled. Stops before a character that would not fit.
 */
static size_t escape_message(char *dst, size_t room, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (; *src; src++) {
		unsigned char c = (unsigned char)*src;
		char esc[4];
		size_t len = 2;

		esc[0] = '\\';
		if (c == '\n')
			esc[1] = 'n';
		else if (c == '\r')
			esc[1] = 'r';
		else if (c == '\t')
			esc[1] = 't';
		else if (c == '\\')
			esc[1] = '\\';
		else if (c < 0x20 || c == 0x7f) {
			esc[1] = 'x';
			esc[2] = hex[c >> 4];
			esc[3] = hex[c & 15];
			len = 4;
		} else {
			esc[0] = (char)c;
			len = 1;
		}
		if (n + len > room)
			break;
		memcpy(dst + n, esc, len);
		n += len;
	}
	return n;
}

static void log_vwrite(int level, const char *func, int line, uint64_t suppressed,
		       unsigned int interval_s, const char *fmt, va_list ap)
{
	char buf[1024], msg[1024];
	struct timeval tv;
	struct tm tm;
	int saved_errno = errno, m;
	size_t n;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = strftime(buf, sizeof(buf), "%b %d %H:%M:%S", &tm);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%06ld %s %s %s:%d ", (long)tv.tv_usec,
			      log_prog, level_names[level & 7], func, line);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (m < 0)
		m = 0;
	if ((size_t)m >= sizeof(msg))
		m = sizeof(msg) - 1;
	/* a message may end with its own newline: the line gets exactly one */
	if (m > 0 && msg[m - 1] == '\n')
		msg[--m] = '\0';
	if (n < sizeof(buf) - 1)
		n += escape_message(buf + n, sizeof(buf) - 1 - n, msg);
	if (suppressed && n < sizeof(buf) - 1) {
		m = snprintf(buf + n, sizeof(buf) - 1 - n,
			     " (%" PRIu64 " more like it in the last %u s, not logged)", suppressed,
			     interval_s);
		if (m > 0)
			n = min_t(size_t, n + (size_t)m, sizeof(buf) - 1);
	}
	if (n > sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	buf[n++] = '\n';
	(void)!write(log_fd, buf, n);
	errno = saved_errno;
}

void sd_log_write(int level, const char *func, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(level, func, line, 0, 0, fmt, ap);
	va_end(ap);
}

static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sd_log_write_limited(struct sd_log_limit *rl, unsigned int interval_s, int level,
			  const char *func, int line, const char *fmt, ...)
{
	uint64_t now = coarse_now_ns(), next = __atomic_load_n(&rl->next_ns, __ATOMIC_RELAXED);
	uint64_t suppressed;
	va_list ap;

	/* one caller per interval wins the slot; the others only count */
	if (now < next || !__atomic_compare_exchange_n(&rl->next_ns, &next,
						       now + (uint64_t)interval_s * 1000000000u,
						       false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&rl->nr_suppressed, 1, __ATOMIC_RELAXED);
		return;
	}
	suppressed = __atomic_exchange_n(&rl->nr_suppressed, 0, __ATOMIC_RELAXED);
	va_start(ap, fmt);
	log_vwrite(level, func, line, suppressed, interval_s, fmt, ap);
	va_end(ap);
}
