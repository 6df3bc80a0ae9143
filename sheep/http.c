/*
 * The head of an HTTP/1.x request, byte by byte (see http.h): one pass over
 * what has arrived, a state per part of the grammar, the first byte that
 * breaks it decides the error. Re-run from the start on each call: a head
 * is at most a few KiB.
 */
#include <string.h>

#include "http.h"

enum hstate {
	H_LEAD, /* empty lines before the request line */
	H_METHOD,
	H_TARGET,
	H_VERSION, /* "HTTP/1.x", then the line's end */
	H_FIELD,   /* a line begins: a field's name, or the empty line */
	H_NAME,
	H_VALUE,
	H_CR,	  /* a CR ended a line: LF must follow, then after_cr */
	H_END_CR, /* the CR of the empty line: LF ends the head */
};

/* tchar (RFC 9110 5.6.2) */
static int is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* a field value's byte: visible, obs-text, SP or HTAB */
static int is_value(unsigned char c)
{
	return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

/* the version's bytes: "HTTP/" DIGIT "." DIGIT; 0 good so far, else the error */
static int version_byte(struct http_request *req, size_t i, unsigned char c)
{
	static const char prefix[] = "HTTP/";

	if (i < 5)
		return c == (unsigned char)prefix[i] ? 0 : 400;
	if (i == 5)
		return c == '1' ? 0 : (c >= '0' && c <= '9') ? 505 : 400;
	if (i == 6)
		return c == '.' ? 0 : 400;
	if (i == 7 && c >= '0' && c <= '9') {
		req->minor = c - '0';
		return 0;
	}
	return 400;
}

/* where a parse stands */
struct hparse {
	enum hstate st, after_cr;
	size_t n; /* bytes of the current part */
	struct http_request *req;
};

#define H_DONE (-1) /* the head ended */

/* c ends a line: go to next (through H_CR for a CR); 400 for a byte that cannot */
static int line_end(struct hparse *p, unsigned char c, enum hstate next)
{
	if (c == '\r') {
		p->after_cr = next;
		p->st = H_CR;
	} else if (c == '\n') {
		p->st = next;
	} else {
		return 400;
	}
	return 0;
}

/* a byte of the request line (or of the empty lines before it): 0 or the error */
static int line_byte(struct hparse *p, unsigned char c)
{
	struct http_request *req = p->req;

	switch (p->st) {
	case H_LEAD:
		if (!line_end(p, c, H_LEAD))
			return 0;
		/* the method's first byte */
		p->st = H_METHOD;
		/* fall through */
	case H_METHOD:
		if (c == ' ' && p->n) {
			p->st = H_TARGET;
			p->n = 0;
			return 0;
		}
		if (!is_tchar(c))
			return 400;
		if (p->n == HTTP_MAX_METHOD)
			return 501;
		req->method[p->n++] = (char)c;
		return 0;
	case H_TARGET:
		if (c == ' ' && p->n) {
			p->st = H_VERSION;
			p->n = 0;
			return 0;
		}
		if (c <= 0x20 || c >= 0x7f)
			return 400;
		if (p->n == HTTP_MAX_TARGET)
			return 414;
		req->target[p->n++] = (char)c;
		return 0;
	default: /* H_VERSION */
		if (p->n < 8)
			return version_byte(req, p->n++, c);
		return line_end(p, c, H_FIELD);
	}
}

/* a byte of the header fields: 0, H_DONE at the empty line's end, or the error */
static int field_byte(struct hparse *p, unsigned char c)
{
	switch (p->st) {
	case H_FIELD:
		if (c == '\r') {
			p->st = H_END_CR;
			return 0;
		}
		if (c == '\n')
			return H_DONE;
		if (!is_tchar(c)) /* a space or tab: obsolete folding; or a bad name */
			return 400;
		p->st = H_NAME;
		return 0;
	case H_NAME:
		if (c == ':') {
			p->st = H_VALUE;
			p->req->nr_fields++;
			return 0;
		}
		return is_tchar(c) ? 0 : 400; /* a space before the colon too */
	case H_VALUE:
		if (!line_end(p, c, H_FIELD))
			return 0;
		return is_value(c) ? 0 : 400;
	case H_CR:
		if (c != '\n')
			return 400; /* a bare CR */
		p->st = p->after_cr;
		return 0;
	default: /* H_END_CR */
		return c == '\n' ? H_DONE : 400;
	}
}

int http_parse_request(const char *buf, size_t len, size_t max, struct http_request *req)
{
	struct hparse p = { .st = H_LEAD, .req = req };

	memset(req, 0, sizeof(*req));
	if (len > max)
		len = max;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		int ret;

		if (c == '\0')
			return 400;
		/* the request line (H_LEAD to H_VERSION), then the fields; H_CR is field_byte's */
		if (p.st <= H_VERSION)
			ret = line_byte(&p, c);
		else
			ret = field_byte(&p, c);
		if (ret == H_DONE) {
			req->head_len = i + 1;
			return 0;
		}
		if (ret)
			return ret;
	}
	return len == max ? 431 : HTTP_MORE;
}

const char *http_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Error";
}
