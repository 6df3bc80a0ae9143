/*
 * The daemon's log: one line per event, "time level function:line message".
 * The level is checked before anything is formatted.
 */
#ifndef LOGGER_H
#define LOGGER_H

#include <stdbool.h>
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

#define sd_emerg(fmt, ...) sd_log(SDOG_EMERG, fmt, ##__VA_ARGS__)
#define sd_err(fmt, ...) sd_log(SDOG_ERR, fmt, ##__VA_ARGS__)
#define sd_warn(fmt, ...) sd_log(SDOG_WARNING, fmt, ##__VA_ARGS__)
#define sd_notice(fmt, ...) sd_log(SDOG_NOTICE, fmt, ##__VA_ARGS__)
#define sd_info(fmt, ...) sd_log(SDOG_INFO, fmt, ##__VA_ARGS__)
#define sd_debug(fmt, ...) sd_log(SDOG_DEBUG, fmt, ##__VA_ARGS__)

#endif
