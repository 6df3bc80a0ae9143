/*
 * collie: helpers shared by the command groups: one request per connection,
 * result codes to exit codes, time and size formatting, the progress bar.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "collie.h"

/*
 * The one mapping from a result code (SD_RES_*) or a transport failure
 * (negative errno) to an exit code.
 */
int collie_exit_code(int result)
{
	if (result < 0)
		return EXIT_SYSFAIL;
	switch (result) {
	case SD_RES_SUCCESS:
		return EXIT_OK;
	case SD_RES_VDI_EXIST:
	case SD_RES_ALREADY_FORMATTED:
		return EXIT_EXISTS;
	case SD_RES_FULL_VDI:
	case SD_RES_NO_SPACE:
		return EXIT_FULL;
	case SD_RES_NO_VDI:
	case SD_RES_NO_TAG:
	case SD_RES_NO_BASE_VDI:
	case SD_RES_NO_OBJ:
		return EXIT_MISSING;
	case SD_RES_EIO:
	case SD_RES_SYSTEM_ERROR:
		return EXIT_SYSFAIL;
	default:
		return EXIT_FAIL;
	}
}

static void fmt_hostport(const char *host, int port, char *buf, size_t len)
{
	if (strchr(host, ':'))
		snprintf(buf, len, "[%s]:%d", host, port);
	else
		snprintf(buf, len, "%s:%d", host, port);
}

int collie_connect(const char *host, int port)
{
	char hp[300];
	int fd, ret;

	fd = sd_connect(host, port, COLLIE_CONNECT_TIMEOUT_MS);
	if (fd < 0) {
		fmt_hostport(host, port, hp, sizeof(hp));
		collie_err("failed to connect to %s: %s", hp,
			   fd == -EHOSTUNREACH ? "cannot resolve the address" : strerror(-fd));
		return fd;
	}
	ret = sd_set_timeout(fd, COLLIE_IO_TIMEOUT_MS);
	if (ret) {
		collie_err("failed to set a socket timeout: %s", strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}

void collie_init_req(struct sd_req *hdr, uint8_t opcode)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->opcode = opcode;
	hdr->proto_ver = sd_is_internal_op(opcode) ? SD_SHEEP_PROTO_VER : SD_PROTO_VER;
}

int collie_exec_at(const char *host, int port, struct sd_req *hdr, void *data, uint32_t wlen,
		   uint32_t rlen, struct sd_rsp *rsp)
{
	char hp[300];
	int fd, ret;

	fd = collie_connect(host, port);
	if (fd < 0)
		return fd;
	ret = sd_exec_req(fd, hdr, data, wlen, rlen, rsp);
	close(fd);
	if (ret) {
		fmt_hostport(host, port, hp, sizeof(hp));
		collie_err("failed to talk to %s: %s", hp,
			   ret == -ECONNRESET ? "connection closed by the daemon" : strerror(-ret));
	}
	return ret;
}

int collie_exec(struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen, struct sd_rsp *rsp)
{
	return collie_exec_at(opts.addr, opts.port, hdr, data, wlen, rlen, rsp);
}

int collie_run(const char *what, struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen,
	       struct sd_rsp *rsp)
{
	int ret = collie_exec(hdr, data, wlen, rlen, rsp);

	if (ret)
		return EXIT_SYSFAIL;
	if (rsp->result != SD_RES_SUCCESS) {
		collie_err("%s: %s", what, sd_strerror((int)rsp->result));
		return collie_exit_code((int)rsp->result);
	}
	return EXIT_OK;
}

/*
 * The daemon's time fields come in one of three units: seconds, sheepdog's
 * seconds << 32 | nanoseconds, or nanoseconds. Seconds fit in 32 bits; the
 * shifted form has a plausible date (after 2001) in its high word; the rest
 * is nanoseconds.
 */
uint64_t collie_time_to_sec(uint64_t t)
{
	if (t <= UINT32_MAX)
		return t;
	if ((t >> 32) >= 1000000000ULL)
		return t >> 32;
	return t / 1000000000ULL;
}

void collie_fmt_time(uint64_t t, const char *fmt, char *buf, size_t len)
{
	time_t sec = (time_t)collie_time_to_sec(t);
	struct tm tm;

	if (!localtime_r(&sec, &tm) || !strftime(buf, len, fmt, &tm))
		snprintf(buf, len, "%llu", (unsigned long long)sec);
}

void collie_fmt_size(uint64_t size, char *buf, size_t len)
{
	if (opts.raw)
		snprintf(buf, len, "%llu", (unsigned long long)size);
	else
		sd_size_to_str(size, buf, len);
}

void collie_node_host(const struct sd_node *n, char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t zero[16];

	if (!memcmp(n->nid.addr, zero, 16)) {
		snprintf(buf, len, "%s", opts.addr);
		return;
	}
	if (!memcmp(n->nid.addr, v4mapped, 12)) {
		if (n->nid.addr[12] == 0 && n->nid.addr[13] == 0 && n->nid.addr[14] == 0 &&
		    n->nid.addr[15] == 0)
			snprintf(buf, len, "%s", opts.addr);
		else
			inet_ntop(AF_INET, n->nid.addr + 12, buf, (socklen_t)len);
		return;
	}
	inet_ntop(AF_INET6, n->nid.addr, buf, (socklen_t)len);
}

int collie_write_stdout(const void *buf, size_t len)
{
	int ret = sd_write_full(STDOUT_FILENO, buf, len);

	if (!ret)
		return EXIT_OK;
	/* the reader went away (collie vdi read ... | head): nothing to say */
	if (ret != -EPIPE)
		collie_err("failed to write to stdout: %s", strerror(-ret));
	return EXIT_SYSFAIL;
}

void collie_print_escaped(const char *s)
{
	for (; *s; s++) {
		if (isspace((unsigned char)*s) || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

/* ------------------------------------------------------------------ */
/* progress */

/* the bar being drawn, if any: an error message ends its line first */
static struct collie_progress *progress_active;

static uint64_t progress_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* "12 MB", or "1234" objects */
static void progress_amount(const struct collie_progress *p, uint64_t v, char *buf, size_t len)
{
	if (p->bytes)
		sd_size_to_str(v, buf, len);
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void progress_draw(struct collie_progress *p, uint64_t now)
{
	char line[256], done[32], total[32], rate[32] = "", eta[32] = "", bar[64];
	double sec = (double)(now - p->start_ns) / 1e9;
	unsigned int width = 30, fill, pct;
	int n;

	progress_amount(p, p->done, done, sizeof(done));
	if (sec > 0.2 && p->done) {
		double per_s = (double)p->done / sec;

		progress_amount(p, (uint64_t)per_s, rate, sizeof(rate));
		snprintf(rate + strlen(rate), sizeof(rate) - strlen(rate), "/s");
		if (p->total > p->done) {
			uint64_t left = (uint64_t)((double)(p->total - p->done) / per_s);

			snprintf(eta, sizeof(eta), "ETA %llu:%02llu",
				 (unsigned long long)(left / 60), (unsigned long long)(left % 60));
		}
	}
	if (p->total) {
		uint64_t d = min_t(uint64_t, p->done, p->total);

		pct = (unsigned int)(d * 100 / p->total);
		fill = (unsigned int)(d * width / p->total);
		memset(bar, '#', fill);
		memset(bar + fill, '.', width - fill);
		bar[width] = '\0';
		progress_amount(p, p->total, total, sizeof(total));
		n = snprintf(line, sizeof(line), "%s [%s] %3u%% %s / %s  %s  %s", p->label, bar,
			     pct, done, total, rate, eta);
	} else {
		n = snprintf(line, sizeof(line), "%s %s  %s", p->label, done, rate);
	}
	if (n < 0)
		return;
	/* no wider than the terminal: a wrapped line could not be redrawn */
	if (p->cols && (unsigned int)n >= p->cols)
		line[p->cols - 1] = '\0';
	fprintf(stderr, "\r%s\033[K", line);
	fflush(stderr);
	p->last_ns = now;
	p->drawn = true;
}

void collie_progress_start(struct collie_progress *p, const char *label, uint64_t total, bool bytes)
{
	struct winsize ws;

	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->label = label;
	p->total = total;
	p->bytes = bytes;
	p->start_ns = progress_clock_ns();
	if (p->on && !ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) && ws.ws_col)
		p->cols = ws.ws_col;
	if (p->on)
		progress_active = p;
}

void collie_progress_update(struct collie_progress *p, uint64_t done)
{
	uint64_t now;

	p->done = done;
	if (!p->on)
		return;
	now = progress_clock_ns();
	if (!p->drawn || now - p->last_ns >= 100000000ULL)
		progress_draw(p, now);
}

void collie_progress_end(struct collie_progress *p)
{
	if (progress_active == p)
		progress_active = NULL;
	if (!p->on)
		return;
	progress_draw(p, progress_clock_ns());
	fputc('\n', stderr);
	p->on = false;
}

void collie_progress_interrupt(void)
{
	struct collie_progress *p = progress_active;

	if (!p)
		return;
	/* the bar shows how far the work got, the message goes below it */
	if (p->drawn) {
		progress_draw(p, progress_clock_ns());
		fputc('\n', stderr);
	}
	p->on = false;
	progress_active = NULL;
}
