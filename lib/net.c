/* Sockets for sheep and collie. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "util.h"

int sd_set_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int sd_set_nodelay(int fd)
{
	int on = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) < 0)
		return -errno;
	return 0;
}

int sd_set_timeout(int fd, int timeout_ms)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

int sd_listen(const char *host, int port, int *fds, int max)
{
	struct addrinfo hints = { 0 }, *res, *ai;
	char pbuf[16];
	int nr = 0, err = 0, on = 1;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(pbuf, sizeof(pbuf), "%d", port);
	if (getaddrinfo(host && *host ? host : NULL, pbuf, &hints, &res))
		return -EADDRNOTAVAIL;
	for (ai = res; ai && nr < max; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
			err = -errno;
			close(fd);
			/* a family the host lacks is no reason to fail ... */
			if (err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT)
				continue;
			/* ... but a port taken on one address is: clients would miss us */
			while (nr > 0)
				close(fds[--nr]);
			break;
		}
		fds[nr++] = fd;
	}
	freeaddrinfo(res);
	return nr ? nr : (err ? err : -EADDRNOTAVAIL);
}

static int connect_one(const struct addrinfo *ai, int timeout_ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	int ret, soerr = 0;
	socklen_t sl = sizeof(soerr);
	struct pollfd pfd;

	if (fd < 0)
		return -errno;
	sd_set_nonblocking(fd);
	ret = connect(fd, ai->ai_addr, ai->ai_addrlen);
	if (ret < 0 && errno != EINPROGRESS) {
		ret = -errno;
		goto out_close;
	}
	if (ret < 0) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		do
			ret = poll(&pfd, 1, timeout_ms);
		while (ret < 0 && errno == EINTR);
		if (ret == 0) {
			ret = -ETIMEDOUT;
			goto out_close;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			ret = -soerr;
			goto out_close;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (ai->ai_family != AF_UNIX)
		sd_set_nodelay(fd);
	return fd;
out_close:
	close(fd);
	return ret;
}

int sd_connect(const char *host, int port, int timeout_ms)
{
	struct addrinfo hints = { 0 }, *res, *ai;
	char pbuf[16];
	int fd = -ECONNREFUSED;

	hints.ai_socktype = SOCK_STREAM;
	snprintf(pbuf, sizeof(pbuf), "%d", port);
	if (getaddrinfo(host, pbuf, &hints, &res))
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, timeout_ms);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

int sd_exec_req(int fd, struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen,
		struct sd_rsp *rsp)
{
	int ret;
	uint32_t len, extra;
	char sink[4096];

	ret = sd_write_full(fd, hdr, sizeof(*hdr));
	if (ret)
		return ret;
	if ((hdr->flags & SD_FLAG_CMD_WRITE) && wlen) {
		ret = sd_write_full(fd, data, wlen);
		if (ret)
			return ret;
	}
	ret = sd_read_full(fd, rsp, sizeof(*rsp));
	if (ret)
		return ret;
	len = min_t(uint32_t, rsp->data_length, rlen);
	if (len) {
		ret = sd_read_full(fd, data, len);
		if (ret)
			return ret;
	}
	for (extra = rsp->data_length - len; extra;) {
		uint32_t n = min_t(uint32_t, extra, sizeof(sink));
		ret = sd_read_full(fd, sink, n);
		if (ret)
			return ret;
		extra -= n;
	}
	return 0;
}

void sd_addr_to_str(const uint8_t addr[16], uint16_t port, char *buf, size_t len)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char a[INET6_ADDRSTRLEN];

	if (!memcmp(addr, v4mapped, 12)) {
		inet_ntop(AF_INET, addr + 12, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, port);
	} else {
		inet_ntop(AF_INET6, addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, port);
	}
}

int sd_peer_addr(int fd, uint8_t addr[16], uint16_t *port)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		return -errno;
	if (ss.ss_family == AF_INET6) {
		memcpy(addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
		if (port)
			*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		return 0;
	}
	if (ss.ss_family == AF_INET) {
		memcpy(addr, v4mapped, 12);
		memcpy(addr + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
		if (port)
			*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

void sd_peer_name(int fd, char *buf, size_t len)
{
	uint8_t addr[16];
	uint16_t port;

	if (sd_peer_addr(fd, addr, &port))
		snprintf(buf, len, "?");
	else
		sd_addr_to_str(addr, port, buf, len);
}

int sd_str_to_addr(const char *s, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, s, addr + 12) == 1) {
		addr[10] = addr[11] = 0xff;
		return 0;
	}
	if (inet_pton(AF_INET6, s, addr) == 1)
		return 0;
	return -EINVAL;
}

bool sd_addr_is_loopback(const uint8_t addr[16])
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t lo6[16] = { [15] = 1 };

	if (!memcmp(addr, v4mapped, sizeof(v4mapped)))
		return addr[12] == 127;
	return !memcmp(addr, lo6, sizeof(lo6));
}
