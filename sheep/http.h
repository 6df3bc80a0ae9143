/*
 * http.c: the head of an HTTP/1.x request (RFC 9112: the request line and
 * the header fields, up to the empty line), parsed with fixed bounds and no
 * allocation, for /metrics (metrics.c). Any thread; no state between calls.
 */
#ifndef SHEEP_HTTP_H
#define SHEEP_HTTP_H

#include <stddef.h>

#define HTTP_MAX_METHOD 15  /* longer: 501 (no method this server knows is longer) */
#define HTTP_MAX_TARGET 255 /* longer: 414 */
#define HTTP_MORE 1	    /* the head is not whole yet */

struct http_request {
	char method[HTTP_MAX_METHOD + 1];
	char target[HTTP_MAX_TARGET + 1];
	int minor;	 /* HTTP/1.minor */
	size_t head_len; /* bytes up to and with the empty line */
	int nr_fields;
};

/*
 * Parse the len bytes received so far (buf need not be NUL-terminated;
 * at most max are looked at). 0: the head is whole, *req filled;
 * HTTP_MORE: nothing wrong yet, the head goes on; otherwise the status of
 * the error, found as soon as the bytes show it:
 *   400 a NUL or another control byte, a bare CR, a malformed request line
 *       (one SP between its three parts) or header field (a token, a
 *       colon, a value of visible bytes, spaces and tabs; no folding);
 *   414 a target over HTTP_MAX_TARGET bytes;
 *   431 no empty line within max bytes;
 *   501 a method over HTTP_MAX_METHOD bytes;
 *   505 a version other than HTTP/1.x.
 * Lines end in CRLF or a bare LF; empty lines before the request line are
 * skipped. The same bytes always give the same answer, and a longer input
 * never turns an error into HTTP_MORE or 0.
 */
int http_parse_request(const char *buf, size_t len, size_t max, struct http_request *req);
/* the reason phrase of status */
const char *http_reason(int status);

#endif
