/*
 * The daemon's log: one line per event, "time level function:line message".
 * The level is checked before anything is formatted.
 */
#ifndef LOGGER_H
#define LOGGER_H

#include <stdbool.h>
#include <stdint.h>
#include "util.h"

enum sd_log_level {
	SDOG_EMERG = 0,
	SDOG_ALERT,
	SDOG_CRIT,
	SDOG_ERR,
	SDOG_WARNING,
	SDOG_NOTICE,
	SDOG_INFO,
	SDOG_DEBUG,
};

extern int sd_log_level;

/* Open the log file (NULL: stderr). 0 or -errno. */
int sd_log_init(const char *path, int level, const char *progname);
void sd_log_close(void);
/* level from a name ("info") or digit; -1 if unknown */
int sd_log_parse_level(const char *s);

void sd_log_write(int level, const char *func, int line, const char *fmt, ...) __printf(4, 5);

#define sd_log(level, fmt, ...)                                                       \
	do {                                                                          \
		if (unlikely((level) <= sd_log_level))                                \
			sd_log_write(level, __func__, __LINE__, fmt, ##__VA_ARGS__); \
	} while (0)

/*
 * A call site's rate limit: at most one line per interval, lock-free. The
 * next line that passes says how many were dropped since the last one.
 */
struct sd_log_limit {
	uint64_t next_ns;
	uint64_t nr_suppressed;
};

void sd_log_write_limited(struct sd_log_limit *rl, unsigned int interval_s, int level,
			  const char *func, int line, const char *fmt, ...) __printf(6, 7);

/* sd_log_ratelimited(SECONDS, LEVEL, fmt, ...): at most one line a SECONDS per call site */
#define sd_log_ratelimited(interval_s, level, fmt, ...)                                    \
	do {                                                                               \
		static struct sd_log_limit _rl;                                            \
		if (unlikely((level) <= sd_log_level))                                     \
			sd_log_write_limited(&_rl, interval_s, level, __func__, __LINE__, fmt, \
					     ##__VA_ARGS__);                               \
	} while (0)

#define sd_emerg(fmt, ...) sd_log(SDOG_EMERG, fmt, ##__VA_ARGS__)
#define sd_err(fmt, ...) sd_log(SDOG_ERR, fmt, ##__VA_ARGS__)
#define sd_warn(fmt, ...) sd_log(SDOG_WARNING, fmt, ##__VA_ARGS__)
#define sd_notice(fmt, ...) sd_log(SDOG_NOTICE, fmt, ##__VA_ARGS__)
#define sd_info(fmt, ...) sd_log(SDOG_INFO, fmt, ##__VA_ARGS__)
#define sd_debug(fmt, ...) sd_log(SDOG_DEBUG, fmt, ##__VA_ARGS__)

#endif
