/* The zookeeper driver's option and znode data (zk_wire.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk_wire.h"

#define reason(...) (snprintf(err, err_len, __VA_ARGS__), -EINVAL)

static bool is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

/* "HOST:PORT" or "[V6]:PORT", len bytes of s: 0 or -EINVAL */
static int check_server(const char *s, size_t len, char *err, size_t err_len)
{
	const char *colon = NULL, *end = s + len;
	unsigned long port = 0;

	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close || close == s + 1 || close + 1 >= end || close[1] != ':')
			return reason("bad server '%.*s': [IPv6]:PORT", (int)len, s);
		for (const char *p = s + 1; p < close; p++)
			if (!strchr("0123456789abcdefABCDEF:.", *p))
				return reason("bad IPv6 address in '%.*s'", (int)len, s);
		colon = close + 1;
	} else {
		for (const char *p = s; p < end; p++)
			if (*p == ':')
				colon = p;
		if (!colon || colon == s)
			return reason("bad server '%.*s': HOST:PORT", (int)len, s);
		for (const char *p = s; p < colon; p++)
			if (!is_host_char(*p))
				return reason("bad host name in '%.*s'", (int)len, s);
	}
	if (colon + 1 == end || end - colon > 6)
		return reason("bad port in '%.*s'", (int)len, s);
	for (const char *p = colon + 1; p < end; p++) {
		if (*p < '0' || *p > '9')
			return reason("bad port in '%.*s'", (int)len, s);
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port < 1 || port > 65535)
		return reason("port out of range in '%.*s'", (int)len, s);
	return 0;
}

/* "/a/b": components of [A-Za-z0-9-_.], not "." or ".."; 0 or -EINVAL */
static int check_base(const char *s, char *err, size_t err_len)
{
	size_t len = strlen(s);

	if (len < 2 || len >= ZK_MAX_BASE_LEN || s[len - 1] == '/')
		return reason("bad path '%s': /NAME[/NAME...], at most %d bytes", s,
			      ZK_MAX_BASE_LEN - 1);
	for (const char *p = s; *p; p++) {
		if (*p == '/') {
			size_t n = strcspn(p + 1, "/");

			if (n == 0 || (n == 1 && p[1] == '.') ||
			    (n == 2 && p[1] == '.' && p[2] == '.'))
				return reason("bad path '%s': an empty, '.' or '..' component", s);
		} else if (!is_host_char(*p)) {
			return reason("bad path '%s': only letters, digits and '-_.'", s);
		}
	}
	return 0;
}

static int parse_timeout(const char *s, size_t len, struct zk_config *cfg, char *err,
			 size_t err_len)
{
	unsigned long v = 0;

	if (len == 0 || len > 4)
		return reason("bad timeout '%.*s': seconds, %d-%d", (int)len, s, ZK_MIN_TIMEOUT_S,
			      ZK_MAX_TIMEOUT_S);
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return reason("bad timeout '%.*s': seconds, %d-%d", (int)len, s,
				      ZK_MIN_TIMEOUT_S, ZK_MAX_TIMEOUT_S);
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < ZK_MIN_TIMEOUT_S || v > ZK_MAX_TIMEOUT_S)
		return reason("timeout %lu s out of range %d-%d", v, ZK_MIN_TIMEOUT_S,
			      ZK_MAX_TIMEOUT_S);
	cfg->timeout_ms = (unsigned int)v * 1000;
	return 0;
}

int zk_parse_option(const char *option, struct zk_config *cfg, char *err, size_t err_len)
{
	size_t n = 0;
	bool has_base = false, has_timeout = false;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->base, sizeof(cfg->base), "%s", ZK_DEFAULT_BASE);
	if (!option || !*option) {
		snprintf(cfg->hosts, sizeof(cfg->hosts), "%s", ZK_DEFAULT_HOSTS);
		return 0;
	}
	for (const char *p = option; *p;) {
		size_t len = strcspn(p, ",");
		const char *slash = memchr(p, '/', len);
		int ret;

		if (len == 0)
			return reason("empty item in '%s'", option);
		if (has_base && strncmp(p, "timeout=", 8))
			return reason("'%.*s' after the path: the path follows the last server",
				      (int)len, p);
		if (!strncmp(p, "timeout=", 8)) {
			if (has_timeout)
				return reason("timeout given twice");
			has_timeout = true;
			ret = parse_timeout(p + 8, len - 8, cfg, err, err_len);
		} else {
			size_t server_len = slash ? (size_t)(slash - p) : len;

			ret = check_server(p, server_len, err, err_len);
			if (!ret && n + server_len + 2 > sizeof(cfg->hosts))
				ret = reason("too many servers (at most %d bytes)",
					     ZK_MAX_HOSTS_LEN - 1);
			if (!ret) {
				n += (size_t)snprintf(cfg->hosts + n, sizeof(cfg->hosts) - n,
						      "%s%.*s", n ? "," : "", (int)server_len, p);
			}
			if (!ret && slash) {
				if (len - server_len >= ZK_MAX_BASE_LEN)
					return reason("path too long (at most %d bytes)",
						      ZK_MAX_BASE_LEN - 1);
				snprintf(cfg->base, sizeof(cfg->base), "%.*s",
					 (int)(len - server_len), slash);
				has_base = true;
				ret = check_base(cfg->base, err, err_len);
			}
		}
		if (ret)
			return ret;
		p += len;
		if (*p == ',' && !*++p)
			return reason("empty item at the end of '%s'", option);
	}
	if (!n)
		return reason("no server in '%s'", option);
	return 0;
}

int64_t zk_seq_of(const char *name)
{
	size_t len = strlen(name);
	int64_t v = 0;

	if (len < 10)
		return -1;
	for (size_t i = len - 10; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

int zk_find(const struct zk_member *list, int nr, uint64_t id)
{
	for (int i = 0; i < nr; i++)
		if (list[i].id == id)
			return i;
	return -1;
}

size_t zk_encode_rec(void *buf, size_t len, uint16_t type, uint64_t id,
		     const struct zk_member *list, int nr, const void *msg, size_t msg_len)
{
	struct zk_rec rec = {
		.magic = ZK_MAGIC,
		.type = type,
		.nr = (uint16_t)nr,
		.len = (uint32_t)msg_len,
		.id = id,
	};
	size_t list_len = (size_t)nr * sizeof(*list), total = sizeof(rec) + list_len + msg_len;
	uint8_t *p = buf;

	if (nr < 0 || nr > SD_MAX_NODES || msg_len > ZK_MAX_MSG_LEN || total > len)
		return 0;
	memcpy(p, &rec, sizeof(rec));
	if (list_len)
		memcpy(p + sizeof(rec), list, list_len);
	if (msg_len)
		memcpy(p + sizeof(rec) + list_len, msg, msg_len);
	return total;
}

int zk_decode_rec(const void *buf, size_t len, bool is_view, struct zk_decoded *out)
{
	const uint8_t *p = buf;
	struct zk_rec rec;
	size_t list_len;

	if (len < sizeof(rec))
		return -EINVAL;
	memcpy(&rec, p, sizeof(rec));
	if (rec.magic != ZK_MAGIC || rec.pad || rec.nr > SD_MAX_NODES || rec.len > ZK_MAX_MSG_LEN)
		return -EINVAL;
	if (is_view ? rec.type != 0 || rec.id != 0 || rec.len != 0
		    : rec.type < ZK_REC_JOIN || rec.type > ZK_REC_NOTIFY)
		return -EINVAL;
	/* a NOTIFY carries no list, a JOIN or LEAVE no message */
	if ((rec.type == ZK_REC_NOTIFY && rec.nr) || (rec.type != ZK_REC_NOTIFY && rec.len))
		return -EINVAL;
	list_len = (size_t)rec.nr * sizeof(struct zk_member);
	if (len != sizeof(rec) + list_len + rec.len)
		return -EINVAL;
	out->type = rec.type;
	out->id = rec.id;
	out->nr = rec.nr;
	out->list = (const struct zk_member *)(p + sizeof(rec));
	out->msg = p + sizeof(rec) + list_len;
	out->msg_len = rec.len;
	for (int i = 0; i < out->nr; i++) {
		uint64_t id, other;

		memcpy(&id, p + sizeof(rec) + (size_t)i * sizeof(struct zk_member), sizeof(id));
		for (int j = 0; j < i; j++) {
			memcpy(&other, p + sizeof(rec) + (size_t)j * sizeof(struct zk_member),
			       sizeof(other));
			if (other == id)
				return -EINVAL;
		}
	}
	return 0;
}

void zk_copy_list(struct zk_member *dst, const struct zk_decoded *d)
{
	if (d->nr)
		memcpy(dst, d->list, (size_t)d->nr * sizeof(*dst));
}
