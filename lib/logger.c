/*
 * The log. Writes are one write(2) of a whole line to an O_APPEND fd, so
 * lines of different threads never interleave and no lock is needed.
 */
#include <errno.h>
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

void sd_log_write(int level, const char *func, int line, const char *fmt, ...)
{
	char buf[1024];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int saved_errno = errno;
	size_t n;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = strftime(buf, sizeof(buf), "%b %d %H:%M:%S", &tm);
	n += snprintf(buf + n, sizeof(buf) - n, ".%06ld %s %s %s:%d ", (long)tv.tv_usec,
		      log_prog, level_names[level & 7], func, line);
	if (n < sizeof(buf)) {
		va_start(ap, fmt);
		int m = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += (size_t)m;
	}
	if (n >= sizeof(buf) - 1)
		n = sizeof(buf) - 2;
	if (buf[n - 1] != '\n')
		buf[n++] = '\n';
	(void)!write(log_fd, buf, n);
	errno = saved_errno;
}
