/* Small helpers shared by sheep, collie and the tests. */
#ifndef UTIL_H
#define UTIL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))
#define round_up(x, y) ((((x) + (y) - 1) / (y)) * (y))
#define DIV_ROUND_UP(x, y) (((x) + (y) - 1) / (y))
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define __unused __attribute__((unused))

/* keep a function free of a trace site (see sheep/trace and TRACER-FACTS) */
#define notrace __attribute__((no_instrument_function, patchable_function_entry(0, 0)))

/*
 * Parse a size with an optional K/M/G/T suffix (powers of 1024, also
 * KB/MB/KiB/MiB...). Returns 0 and sets *out, or -EINVAL / -ERANGE.
 */
int sd_parse_size(const char *s, uint64_t *out);

/* Format a size for people: "1.0 GB", "10 MB", "512 B" */
void sd_size_to_str(uint64_t size, char *buf, size_t len);

/* Parse a decimal unsigned integer in [min, max]: 0 or -EINVAL/-ERANGE */
int sd_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* The one table of messages for SD_RES_* codes (public and internal). */
const char *sd_strerror(int result);

/*
 * Whole reads and writes on a blocking fd: retry on EINTR and short
 * transfers. Return 0, -errno, or -ECONNRESET on EOF.
 */
int sd_read_full(int fd, void *buf, size_t len);
int sd_write_full(int fd, const void *buf, size_t len);
/*
 * The buffers of iov[0..n) in one writev where the fd takes them (a
 * request's header and payload in one send, as a corked client sends
 * them), the rest after a short write. iov is consumed. 0 or -errno.
 */
struct iovec;
int sd_writev_full(int fd, struct iovec *iov, int n);

/* pread/pwrite whole ranges; pread zero-fills past EOF. 0 or -errno. */
int sd_pread_full(int fd, void *buf, size_t len, off_t off);
int sd_pwrite_full(int fd, const void *buf, size_t len, off_t off);

/* mkdir -p; 0 or -errno */
int sd_mkdir_p(const char *path, mode_t mode);

/* monotonic clock in ns */
uint64_t sd_now_ns(void);

#endif
