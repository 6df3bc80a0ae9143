/*
 * Cluster snapshot manifests: the text format of snapshot_manifest.h,
 * written and parsed. Hashes and the checksum are xxHash's (XXH3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sheepdog_proto.h"
#include "snapshot_manifest.h"
#include "xxh.h"

#define CS_SUM_LINE_LEN (sizeof("checksum ") - 1 + 16 + 1)

bool cs_tag_valid(const char *tag)
{
	size_t len = strlen(tag);

	if (!len || len > CS_TAG_MAX || tag[0] == '.')
		return false;
	for (const char *p = tag; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

void cs_hash(const void *buf, size_t len, uint8_t out[CS_HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out, c.digest, CS_HASH_LEN);
}

void cs_hash_hex(const uint8_t hash[CS_HASH_LEN], char *buf)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < CS_HASH_LEN; i++) {
		buf[2 * i] = hex[hash[i] >> 4];
		buf[2 * i + 1] = hex[hash[i] & 15];
	}
	buf[2 * CS_HASH_LEN] = '\0';
}

static bool plain_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("._~@:/+,-", c);
}

static void put_escaped(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (plain_char(*p))
			fputc(*p, f);
		else
			fprintf(f, "%%%02x", *p);
}

/* the index of vid among the VDIs before i, or -1 */
static int find_earlier(const struct cs_manifest *m, uint32_t i, uint32_t vid)
{
	for (uint32_t k = 0; vid && k < i; k++)
		if (m->vdis[k].vid == vid)
			return (int)k;
	return -1;
}

/*
 * v's chunk lines, all of them or (base) those that differ from base's
 * chunks inside v's size: "c" a chunk added or changed, "z" one that is
 * zeros in v. Printed to f unless NULL; returns how many.
 */
static uint64_t put_lines(FILE *f, const struct cs_vdi *v, const struct cs_vdi *base)
{
	uint64_t a = 0, b = 0, n = 0, na = 0;
	char hex[2 * CS_HASH_LEN + 1];

	while (base && na < base->nr_chunks && base->chunks[na].offset < v->size)
		na++;
	while (a < na || b < v->nr_chunks) {
		const struct cs_chunk *x = a < na ? &base->chunks[a] : NULL;
		const struct cs_chunk *y = b < v->nr_chunks ? &v->chunks[b] : NULL;

		if (x && (!y || x->offset < y->offset)) {
			if (f)
				fprintf(f, "z %" PRIu64 "\n", x->offset);
			a++;
			n++;
			continue;
		}
		if (x && x->offset == y->offset) {
			a++;
			if (!memcmp(x->hash, y->hash, CS_HASH_LEN)) {
				b++;
				continue;
			}
		}
		if (f) {
			cs_hash_hex(y->hash, hex);
			fprintf(f, "c %" PRIu64 " %s\n", y->offset, hex);
		}
		b++;
		n++;
	}
	return n;
}

char *cs_manifest_format(const struct cs_manifest *m, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	fprintf(f, "%s %d\ntag %s\ncreated %" PRIu64 "\nchunk-size %u\n", CS_MAGIC, CS_VERSION,
		m->tag, m->created, m->chunk_size);
	fprintf(f, "cluster copies=%u block-size-shift=%u ctime=%" PRIu64 "\n", m->copies,
		m->block_size_shift, m->ctime);
	for (uint32_t i = 0; i < m->nr_vdis; i++) {
		const struct cs_vdi *v = &m->vdis[i];
		int p = find_earlier(m, i, v->parent);
		const struct cs_vdi *base = p >= 0 ? &m->vdis[p] : NULL;

		fputs("vdi name=", f);
		put_escaped(f, v->name);
		fputs(" tag=", f);
		put_escaped(f, v->tag);
		fprintf(f,
			" vid=%x parent=%x snap-id=%u snapshot=%d size=%" PRIu64
			" copies=%u copy-policy=%u redundancy=%s block-size-shift=%u"
			" create-time=%" PRIu64 " snap-ctime=%" PRIu64 " vm-clock-nsec=%" PRIu64
			" vm-state-size=%" PRIu64 " delta=%d lines=%" PRIu64 "\n",
			v->vid, v->parent, v->snap_id, v->snapshot, v->size, v->copies,
			v->copy_policy, v->erasure ? "erasure" : "replicated", v->block_size_shift,
			v->create_time, v->snap_ctime, v->vm_clock_nsec, v->vm_state_size, !!base,
			put_lines(NULL, v, base));
		put_lines(f, v, base);
	}
	fprintf(f, "end vdis=%u\n", m->nr_vdis);
	fflush(f);
	fprintf(f, "checksum %016llx\n", (unsigned long long)XXH3_64bits(text, n));
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}

void cs_manifest_free(struct cs_manifest *m)
{
	for (uint32_t i = 0; i < m->nr_vdis; i++)
		free(m->vdis[i].chunks);
	free(m->vdis);
	m->vdis = NULL;
	m->nr_vdis = 0;
}

/* the parser's position: the current line, NUL-terminated in a copy */
struct parser {
	const char *text, *end;
	char line[2048]; /* a vdi line with its name and tag escaped: < 1,800 */
	unsigned int lineno;
	char *err;
	size_t err_len;
};

static int __attribute__((format(printf, 2, 3))) perr(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(p->err, p->err_len, "line %u: ", p->lineno);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < p->err_len)
		vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* the next line into p->line: 0, or -EINVAL (none left, too long, a NUL in it) */
static int next_line(struct parser *p)
{
	const char *nl;
	size_t len;

	p->lineno++;
	if (p->text >= p->end)
		return perr(p, "unexpected end of the manifest");
	nl = memchr(p->text, '\n', (size_t)(p->end - p->text));
	if (!nl)
		return perr(p, "unterminated line");
	len = (size_t)(nl - p->text);
	if (len >= sizeof(p->line) || memchr(p->text, '\0', len))
		return perr(p, "malformed line");
	memcpy(p->line, p->text, len);
	p->line[len] = '\0';
	p->text = nl + 1;
	return 0;
}

/* a decimal number of the whole string s, at most max */
static int parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;

	if (!*s || strlen(s) > 20)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (x > max)
		return -EINVAL;
	*v = x;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int parse_hex32(const char *s, uint32_t *v)
{
	uint32_t x = 0;

	if (!*s || strlen(s) > 8)
		return -EINVAL;
	for (; *s; s++) {
		if (hexval(*s) < 0)
			return -EINVAL;
		x = x << 4 | (uint32_t)hexval(*s);
	}
	*v = x;
	return 0;
}

static int parse_hash(const char *s, uint8_t out[CS_HASH_LEN])
{
	if (strlen(s) != 2 * CS_HASH_LEN)
		return -EINVAL;
	for (int i = 0; i < CS_HASH_LEN; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* a percent-encoded value into out (cap bytes with its NUL) */
static int unescape(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	for (; *s; s++) {
		int c = (unsigned char)*s;

		if (c == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL;
			c = hi << 4 | lo;
			s += 2;
		} else if (!plain_char((unsigned char)c)) {
			return -EINVAL;
		}
		if (n + 1 >= cap)
			return -EINVAL;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return 0;
}

/* "WORD VALUE": the value after the expected word, or NULL */
static const char *after_word(const char *line, const char *word)
{
	size_t n = strlen(word);

	return !strncmp(line, word, n) && line[n] == ' ' ? line + n + 1 : NULL;
}

static int parse_head(struct parser *p, struct cs_manifest *m)
{
	const char *v;
	uint64_t x, y, z;
	char junk;

	if (next_line(p))
		return -EINVAL;
	v = after_word(p->line, CS_MAGIC);
	if (!v)
		return perr(p, "not a cluster snapshot manifest");
	if (parse_u64(v, UINT32_MAX, &x) || x != CS_VERSION)
		return perr(p, "manifest version %s (this collie reads %d)", v, CS_VERSION);
	if (next_line(p) || !(v = after_word(p->line, "tag")) || !cs_tag_valid(v))
		return perr(p, "expected 'tag TAG'");
	strcpy(m->tag, v);
	if (next_line(p) || !(v = after_word(p->line, "created")) ||
	    parse_u64(v, UINT64_MAX, &m->created))
		return perr(p, "expected 'created SECONDS'");
	if (next_line(p) || !(v = after_word(p->line, "chunk-size")) ||
	    parse_u64(v, CS_MAX_CHUNK, &x) || x < CS_MIN_CHUNK || (x & (x - 1)))
		return perr(p, "expected 'chunk-size BYTES' (a power of 2, 4 KiB to 16 MiB)");
	m->chunk_size = (uint32_t)x;
	if (next_line(p) ||
	    sscanf(p->line,
		   "cluster copies=%" SCNu64 " block-size-shift=%" SCNu64 " ctime=%" SCNu64 "%c",
		   &x, &y, &z, &junk) != 3 ||
	    x > SD_MAX_COPIES || y > SD_MAX_BLOCK_SIZE_SHIFT)
		return perr(p, "expected 'cluster copies=N block-size-shift=S ctime=SECONDS'");
	m->copies = (uint8_t)x;
	m->block_size_shift = (uint8_t)y;
	m->ctime = z;
	return 0;
}

enum {
	K_NAME,
	K_TAG,
	K_VID,
	K_PARENT,
	K_SNAP_ID,
	K_SNAPSHOT,
	K_SIZE,
	K_COPIES,
	K_COPY_POLICY,
	K_REDUNDANCY,
	K_SHIFT,
	K_CREATE_TIME,
	K_SNAP_CTIME,
	K_VM_CLOCK,
	K_VM_STATE,
	K_DELTA,
	K_LINES,
	NR_KEYS
};

static const char *const keys[NR_KEYS] = {
	"name",
	"tag",
	"vid",
	"parent",
	"snap-id",
	"snapshot",
	"size",
	"copies",
	"copy-policy",
	"redundancy",
	"block-size-shift",
	"create-time",
	"snap-ctime",
	"vm-clock-nsec",
	"vm-state-size",
	"delta",
	"lines",
};

/* one key=value of a vdi line */
static int vdi_field(struct cs_vdi *v, int k, const char *val)
{
	uint64_t x = 0;

	switch (k) {
	case K_NAME:
		return unescape(val, v->name, sizeof(v->name)) || !v->name[0] ? -EINVAL : 0;
	case K_TAG:
		return unescape(val, v->tag, sizeof(v->tag));
	case K_VID:
		return parse_hex32(val, &v->vid) || !v->vid || v->vid >= SD_NR_VDIS ? -EINVAL : 0;
	case K_PARENT:
		return parse_hex32(val, &v->parent) || v->parent >= SD_NR_VDIS ? -EINVAL : 0;
	case K_REDUNDANCY:
		if (strcmp(val, "replicated") && strcmp(val, "erasure"))
			return -EINVAL;
		v->erasure = !strcmp(val, "erasure");
		return 0;
	}
	if (parse_u64(val, UINT64_MAX, &x))
		return -EINVAL;
	switch (k) {
	case K_SNAP_ID:
		v->snap_id = (uint32_t)x;
		return x > UINT32_MAX ? -EINVAL : 0;
	case K_SNAPSHOT:
		v->snapshot = x;
		return x > 1 ? -EINVAL : 0;
	case K_SIZE:
		v->size = x;
		return 0;
	case K_COPIES:
		v->copies = (uint8_t)x;
		return x > SD_MAX_COPIES ? -EINVAL : 0;
	case K_COPY_POLICY:
		v->copy_policy = (uint8_t)x;
		return x > UINT8_MAX ? -EINVAL : 0;
	case K_SHIFT:
		v->block_size_shift = (uint8_t)x;
		return x < SD_MIN_BLOCK_SIZE_SHIFT || x > SD_MAX_BLOCK_SIZE_SHIFT ? -EINVAL : 0;
	case K_CREATE_TIME:
		v->create_time = x;
		return 0;
	case K_SNAP_CTIME:
		v->snap_ctime = x;
		return 0;
	case K_VM_CLOCK:
		v->vm_clock_nsec = x;
		return 0;
	case K_VM_STATE:
		v->vm_state_size = x;
		return 0;
	case K_DELTA:
		v->delta = x;
		return x > 1 ? -EINVAL : 0;
	default: /* K_LINES */
		v->nr_lines = x;
		return 0;
	}
}

/* "vdi key=value ...": every key once, no other */
static int parse_vdi_line(struct parser *p, struct cs_vdi *v)
{
	const char *rest = after_word(p->line, "vdi");
	bool seen[NR_KEYS] = { false };
	char *tok, *save = NULL;

	if (!rest)
		return perr(p, "expected a vdi line or 'end'");
	memset(v, 0, sizeof(*v));
	for (tok = strtok_r((char *)rest, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		int k;

		if (!eq)
			return perr(p, "malformed field '%.40s'", tok);
		*eq = '\0';
		for (k = 0; k < NR_KEYS && strcmp(tok, keys[k]); k++)
			;
		if (k == NR_KEYS || seen[k])
			return perr(p, "%s field '%.40s'", k == NR_KEYS ? "unknown" : "repeated",
				    tok);
		seen[k] = true;
		if (vdi_field(v, k, eq + 1))
			return perr(p, "bad value of %s", keys[k]);
	}
	for (int k = 0; k < NR_KEYS; k++)
		if (!seen[k])
			return perr(p, "no %s field", keys[k]);
	if (!v->size || v->size > (UINT64_C(1) << v->block_size_shift) * MAX_DATA_OBJS)
		return perr(p, "impossible vdi size %" PRIu64, v->size);
	if (v->parent == v->vid)
		return perr(p, "vdi %x is its own parent", v->vid);
	return 0;
}

/* one "c OFFSET HASH" or (delta) "z OFFSET" line into c; *zero for a z line */
static int parse_line(struct parser *p, bool delta, struct cs_chunk *c, bool *zero)
{
	const char *rest;
	char *sp = NULL;

	if (next_line(p))
		return -EINVAL;
	rest = after_word(p->line, "c");
	*zero = !rest && delta && (rest = after_word(p->line, "z"));
	if (rest && !*zero)
		sp = strchr(rest, ' ');
	if (!rest || (!*zero && !sp))
		return perr(p, "expected 'c OFFSET HASH'%s", delta ? " or 'z OFFSET'" : "");
	if (sp)
		*sp = '\0';
	if (parse_u64(rest, UINT64_MAX, &c->offset) || (sp && parse_hash(sp + 1, c->hash)))
		return perr(p, "expected 'c OFFSET HASH'%s", delta ? " or 'z OFFSET'" : "");
	return 0;
}

/*
 * The lines of v, then its whole chunk list: its lines alone, or (delta)
 * its parent's chunks inside v's size with the lines applied ("c" adds or
 * replaces, "z" removes one the parent has). Offsets increase, stay inside
 * the VDI and on chunk boundaries.
 */
static int parse_chunks(struct parser *p, struct cs_manifest *m, struct cs_vdi *v, uint64_t *total)
{
	int pi = find_earlier(m, (uint32_t)(v - m->vdis), v->parent);
	const struct cs_vdi *base = v->delta && pi >= 0 ? &m->vdis[pi] : NULL;
	uint64_t nb = 0, cap, a = 0, n = 0, last = 0;

	if (v->delta && !base)
		return perr(p, "delta against parent %x, not listed before it", v->parent);
	/* every line takes at least 4 bytes: the count cannot exceed what is left */
	if (v->nr_lines > (uint64_t)(p->end - p->text) / 4)
		return perr(p, "%" PRIu64 " lines announced, not that many", v->nr_lines);
	while (base && nb < base->nr_chunks && base->chunks[nb].offset < v->size)
		nb++;
	cap = nb + v->nr_lines;
	*total += cap;
	if (*total > CS_MAX_CHUNKS)
		return perr(p, "too many chunks in the manifest");
	v->chunks = calloc(cap ? cap : 1, sizeof(*v->chunks));
	if (!v->chunks)
		return -ENOMEM;
	for (uint64_t i = 0; i < v->nr_lines; i++) {
		struct cs_chunk c;
		bool zero;
		int ret = parse_line(p, v->delta, &c, &zero);

		if (ret)
			return ret;
		if (c.offset % m->chunk_size || c.offset >= v->size || (i && c.offset <= last))
			return perr(p, "chunk offset %" PRIu64 " out of place", c.offset);
		last = c.offset;
		while (a < nb && base->chunks[a].offset < c.offset)
			v->chunks[n++] = base->chunks[a++];
		if (zero && (a == nb || base->chunks[a].offset != c.offset))
			return perr(p, "chunk %" PRIu64 " zeroed, not in the parent", c.offset);
		if (a < nb && base->chunks[a].offset == c.offset)
			a++;
		if (!zero)
			v->chunks[n++] = c;
	}
	while (a < nb)
		v->chunks[n++] = base->chunks[a++];
	v->nr_chunks = n;
	return 0;
}

/* the last line is the checksum of everything before it */
static int check_sum(const char *text, size_t len, char *err, size_t err_len)
{
	char line[CS_SUM_LINE_LEN + 1];
	unsigned long long sum;
	char junk;

	if (len < CS_SUM_LINE_LEN || text[len - 1] != '\n' ||
	    (len > CS_SUM_LINE_LEN && text[len - CS_SUM_LINE_LEN - 1] != '\n')) {
		snprintf(err, err_len, "truncated manifest (no checksum line)");
		return -EINVAL;
	}
	memcpy(line, text + len - CS_SUM_LINE_LEN, CS_SUM_LINE_LEN);
	line[CS_SUM_LINE_LEN] = '\0';
	/* lower-case hex only: one spelling per checksum */
	for (int i = 9; i < 25; i++)
		if (hexval(line[i]) < 0)
			line[i] = 'x';
	if (sscanf(line, "checksum %16llx%c", &sum, &junk) != 2 || junk != '\n' ||
	    sum != XXH3_64bits(text, len - CS_SUM_LINE_LEN)) {
		snprintf(err, err_len, "damaged manifest (checksum mismatch)");
		return -EINVAL;
	}
	return 0;
}

int cs_manifest_parse(const char *text, size_t len, struct cs_manifest *m, char *err,
		      size_t err_len)
{
	struct parser p = { .text = text, .err = err, .err_len = err_len };
	uint64_t n, total = 0;
	uint32_t cap = 0;
	int ret;

	memset(m, 0, sizeof(*m));
	ret = check_sum(text, len, err, err_len);
	if (ret)
		return ret;
	p.end = text + len - CS_SUM_LINE_LEN;
	ret = parse_head(&p, m);
	while (!ret) {
		ret = next_line(&p);
		if (ret || !strncmp(p.line, "end ", 4))
			break;
		if (m->nr_vdis == cap) {
			struct cs_vdi *nv;

			if (cap >= SD_NR_VDIS)
				return perr(&p, "too many vdis");
			cap = cap ? 2 * cap : 16;
			nv = realloc(m->vdis, cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			m->vdis = nv;
		}
		ret = parse_vdi_line(&p, &m->vdis[m->nr_vdis]);
		if (ret)
			break;
		m->nr_vdis++;
		ret = parse_chunks(&p, m, &m->vdis[m->nr_vdis - 1], &total);
	}
	if (ret)
		return ret;
	if (strncmp(p.line, "end vdis=", 9) || parse_u64(p.line + 9, UINT32_MAX, &n) ||
	    n != m->nr_vdis)
		return perr(&p, "expected 'end vdis=%u'", m->nr_vdis);
	if (p.text != p.end)
		return perr(&p, "lines after the end line");
	return 0;
}
