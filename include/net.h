/* Sockets: listen, connect, whole requests. */
#ifndef NET_H
#define NET_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "sheepdog_proto.h"

/*
 * Resolve host (NULL or "": every local address) and listen on port.
 * Returns the number of sockets put into fds (up to max), or -errno.
 */
int sd_listen(const char *host, int port, int *fds, int max);

/* Connect with a timeout in ms to host:port (tries every address). fd or -errno. */
int sd_connect(const char *host, int port, int timeout_ms);

int sd_set_nonblocking(int fd);
int sd_set_nodelay(int fd);
/* send/receive timeouts for a blocking socket, in ms */
int sd_set_timeout(int fd, int timeout_ms);

/*
 * Send one request and read its response on a blocking socket: the header,
 * then wlen payload bytes from data when SD_FLAG_CMD_WRITE is set; reads the
 * response header and min(rsp->data_length, rlen) bytes into data, discarding
 * any excess. rsp may alias hdr. Returns 0 (look at rsp->result) or -errno.
 */
int sd_exec_req(int fd, struct sd_req *hdr, void *data, uint32_t wlen, uint32_t rlen,
		struct sd_rsp *rsp);

/* Human form of a node address: "127.0.0.1:7000" */
void sd_addr_to_str(const uint8_t addr[16], uint16_t port, char *buf, size_t len);
/* the peer of a connected socket: its 16-byte (v4-mapped) address and port (if port); 0 or -errno */
int sd_peer_addr(int fd, uint8_t addr[16], uint16_t *port);
/* the peer of a connected socket in human form (sd_addr_to_str), "?" if unknown */
void sd_peer_name(int fd, char *buf, size_t len);
/* Fill a 16-byte address (v4-mapped for IPv4) from a string: 0 or -EINVAL */
int sd_str_to_addr(const char *s, uint8_t addr[16]);
/* a 16-byte address of loopback: ::1, or v4-mapped 127.0.0.0/8 */
bool sd_addr_is_loopback(const uint8_t addr[16]);

#endif
