/*
 * Flame graphs from folded stacks (see flame.h).
 *
 * Three steps: parse the lines into a tree of frames merged by identical
 * prefix (each frame's value is the time of every stack that passes
 * through it), sort each frame's children by name, and draw the tree with
 * the root at the bottom. Every walk is iterative (parent, first child and
 * next sibling links), so a deep stack costs height, never C stack.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sheepdog_proto.h"
#include "flame.h"

#define PAD 10		 /* px left and right of the frames */
#define TOP 44		 /* px above the deepest frame: title, buttons */
#define BOTTOM 30	 /* px below the root: the details line */
#define FRAME_H 16	 /* px per level */
#define FONT_PX 12	 /* monospace */
#define CHAR_W 7.2	 /* px per character at FONT_PX (0.6 em) */
#define MIN_W 0.1	 /* px: narrower frames (and what they called) are not drawn */
#define NONE 0		 /* no node: node 0 is the root, never a child or sibling */
#define NOMEM UINT32_MAX /* tree_add() could not grow the tree */

struct node {
	const char *name;
	uint64_t value; /* ns in this frame and in what it called */
	uint64_t start; /* ns left of it, from the root's left edge */
	uint32_t parent, child, next;
	uint32_t last; /* the child found or added last: sorted input hits it */
	uint32_t depth;
	bool drawn;
};

struct tree {
	struct node *n;
	uint32_t nr, cap;
	unsigned int max_depth;
};

/* ---- parsing ---- */

/* bytes a valid UTF-8 sequence at s[0..len) takes, 0 if it is not valid */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > len)
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	/* U+FFFE and U+FFFF are not XML characters */
	if (n == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe)
		return 0;
	return n;
}

/*
 * Make a stack something XML takes: control characters and the bytes of
 * invalid UTF-8 become '?', in place.
 */
static void sanitize(char *buf)
{
	unsigned char *s = (unsigned char *)buf;
	size_t len = strlen(buf);

	for (size_t i = 0; i < len;) {
		size_t n = 1;

		if (s[i] >= 0x80)
			n = utf8_len(s + i, len - i);
		if (n == 0 || s[i] < 0x20 || s[i] == 0x7f) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

/* the count at the end of a line: digits only, at most FLAME_MAX_COUNT */
static bool parse_count(const char *s, uint64_t *v)
{
	*v = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		*v = *v * 10 + (uint64_t)(*s - '0');
		if (*v > FLAME_MAX_COUNT)
			return false;
	}
	return true;
}

/* NUL-terminated stack "a;b;c": no empty frame, at most FLAME_MAX_DEPTH */
static bool valid_stack(const char *s)
{
	unsigned int depth = 1;

	if (!*s || *s == ';')
		return false;
	for (; *s; s++) {
		if (*s != ';')
			continue;
		if (s[1] == ';' || s[1] == '\0' || ++depth > FLAME_MAX_DEPTH)
			return false;
	}
	return true;
}

static uint32_t tree_add(struct tree *t, uint32_t parent, const char *name)
{
	struct node *n;

	if (t->nr == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;

		if (t->cap > UINT32_MAX / 4)
			return NOMEM;
		n = realloc(t->n, (size_t)cap * sizeof(*n));
		if (!n)
			return NOMEM;
		t->n = n;
		t->cap = cap;
	}
	n = &t->n[t->nr];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->parent = parent;
	if (t->nr) {
		n->depth = t->n[parent].depth + 1;
		n->next = t->n[parent].child;
		t->n[parent].child = t->nr;
		t->n[parent].last = t->nr;
	}
	return t->nr++;
}

/* the child of p called name, added if missing; NOMEM when out of memory */
static uint32_t tree_child(struct tree *t, uint32_t p, const char *name)
{
	uint32_t c = t->n[p].last;

	if (c != NONE && !strcmp(t->n[c].name, name))
		return c;
	for (c = t->n[p].child; c != NONE; c = t->n[c].next) {
		if (!strcmp(t->n[c].name, name)) {
			t->n[p].last = c;
			return c;
		}
	}
	return tree_add(t, p, name);
}

/* add one stack (NUL-terminated, split in place at ';') worth v ns */
static int tree_insert(struct tree *t, char *stack, uint64_t v)
{
	uint32_t cur = 0;

	t->n[0].value += v;
	for (char *f = stack, *end; f; f = end) {
		end = strchr(f, ';');
		if (end)
			*end++ = '\0';
		cur = tree_child(t, cur, f);
		if (cur == NOMEM)
			return -ENOMEM;
		t->n[cur].value += v;
		if (t->n[cur].depth > t->max_depth)
			t->max_depth = t->n[cur].depth;
	}
	return 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* one line, NUL-terminated, trailing blanks gone: used, skipped, or -ENOMEM */
static int parse_line(struct tree *t, char *line, struct flame_result *res)
{
	char *sp = strrchr(line, ' '), *tab = strrchr(line, '\t');
	uint64_t v;

	if (!*line || *line == '#')
		return 0;
	if (!sp || (tab && tab > sp))
		sp = tab;
	if (!sp || !parse_count(sp + 1, &v) || v > FLAME_MAX_COUNT - t->n[0].value)
		goto skip;
	while (sp > line && is_blank(sp[-1]))
		sp--;
	*sp = '\0';
	sanitize(line);
	if (!valid_stack(line))
		goto skip;
	res->nr_lines++;
	return tree_insert(t, line, v);
skip:
	res->nr_skipped++;
	return 0;
}

/* buf holds len bytes and one more for a NUL */
static int parse(struct tree *t, char *buf, size_t len, struct flame_result *res)
{
	char *p = buf, *end = buf + len;

	if (tree_add(t, 0, "all") == NOMEM)
		return -ENOMEM;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
		int ret;

		while (e > p && is_blank(e[-1]))
			e--;
		*e = '\0';
		ret = parse_line(t, p, res);
		if (ret)
			return ret;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static int cmp_name(const void *a, const void *b, void *arg)
{
	const struct node *n = arg;

	return strcmp(n[*(const uint32_t *)a].name, n[*(const uint32_t *)b].name);
}

/* every child list sorted by name, as a flame graph orders its levels */
static int tree_sort(struct tree *t)
{
	uint32_t *tmp = malloc(t->nr * sizeof(*tmp));

	if (!tmp)
		return -ENOMEM;
	for (uint32_t p = 0; p < t->nr; p++) {
		uint32_t nr = 0;

		for (uint32_t c = t->n[p].child; c != NONE; c = t->n[c].next)
			tmp[nr++] = c;
		if (nr < 2)
			continue;
		qsort_r(tmp, nr, sizeof(*tmp), cmp_name, t->n);
		t->n[p].child = tmp[0];
		for (uint32_t i = 0; i < nr; i++)
			t->n[tmp[i]].next = i + 1 < nr ? tmp[i + 1] : NONE;
	}
	free(tmp);
	return 0;
}

/* ---- drawing ---- */

void flame_fmt_time(uint64_t ns, char *buf, size_t len)
{
	/* the bounds: what would round up to "1000.00" takes the next unit */
	if (ns < 1000)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else if (ns < 999995)
		snprintf(buf, len, "%.2f us", (double)ns / 1e3);
	else if (ns < 999995000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
}

/* write s[0..len) with the five XML specials escaped */
static void put_xml(FILE *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (s[i]) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			fputc(s[i], out);
		}
	}
}

/*
 * The label of a frame w px wide: the name, or as many of its characters
 * (not bytes: names are valid UTF-8 by now) as fit followed by "..", or
 * nothing when not even three fit.
 */
static void put_label(FILE *out, const char *name, double w)
{
	long fit = (long)((w - 6) / CHAR_W);
	size_t nr_chars = 0, cut = 0, i;

	if (fit < 3)
		return;
	for (i = 0; name[i]; i++) {
		if (((unsigned char)name[i] & 0xc0) == 0x80)
			continue; /* a continuation byte */
		if (nr_chars == (size_t)fit - 2)
			cut = i;
		nr_chars++;
	}
	if (nr_chars <= (size_t)fit) {
		put_xml(out, name, i);
		return;
	}
	put_xml(out, name, cut);
	fputs("..", out);
}

/* a warm colour from the name: the same name always gets the same one */
static void put_colour(FILE *out, const char *name)
{
	uint64_t h = fnv_64a_buf(name, strlen(name), FNV1A_64_INIT);

	fprintf(out, "rgb(%u,%u,%u)", 205 + (unsigned)(h % 51), (unsigned)((h >> 16) % 231),
		(unsigned)((h >> 32) % 56));
}

static void draw_frame(FILE *out, const struct node *n, uint64_t total, double scale,
		       unsigned int height)
{
	double x = PAD + (double)n->start * scale, w = (double)n->value * scale;
	unsigned int y = height - BOTTOM - (n->depth + 1) * FRAME_H;
	char time[32];

	flame_fmt_time(n->value, time, sizeof(time));
	fputs("<g class=\"f\" data-n=\"", out);
	put_xml(out, n->name, strlen(n->name));
	fputs("\"><title>", out);
	put_xml(out, n->name, strlen(n->name));
	fprintf(out,
		" (%s, %.2f%%)</title><rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%u\" "
		"rx=\"2\" fill=\"",
		time, 100.0 * (double)n->value / (double)total, x, y, w, FRAME_H - 1);
	put_colour(out, n->name);
	fprintf(out, "\"/><text x=\"%.2f\" y=\"%u\">", x + 3, y + FRAME_H - 4);
	put_label(out, n->name, w);
	fputs("</text></g>\n", out);
}

/*
 * Pre-order walk without recursion: down to the first child, else to the
 * next sibling of the nearest frame that has one. A frame too narrow to
 * see is neither drawn nor descended into.
 */
static size_t draw_tree(FILE *out, struct tree *t, unsigned int width, unsigned int height)
{
	double scale = (double)(width - 2 * PAD) / (double)t->n[0].value;
	size_t nr_drawn = 0;
	uint32_t i = 0;

	for (;;) {
		struct node *n = &t->n[i];

		n->drawn = (double)n->value * scale >= MIN_W;
		if (n->drawn) {
			draw_frame(out, n, t->n[0].value, scale, height);
			nr_drawn++;
		}
		if (n->drawn && n->child != NONE) {
			t->n[n->child].start = n->start;
			i = n->child;
			continue;
		}
		while (i != 0 && t->n[i].next == NONE)
			i = t->n[i].parent;
		if (i == 0)
			return nr_drawn;
		t->n[t->n[i].next].start = t->n[i].start + t->n[i].value;
		i = t->n[i].next;
	}
}

/*
 * The page's behaviour: hover shows a frame's title on the details line,
 * a click zooms on a frame (its ancestors span the width, dimmed; its
 * subtree is scaled up; everything else hides), "Search" highlights the
 * frames matching a regular expression and shows their share of the total
 * (overlapping frames counted once).
 */
static const char script[] =
    "function fl_init(evt) {\n"
    "  var f = document.getElementById('frames'), gs = f.getElementsByTagName('g');\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i], r = g.getElementsByTagName('rect')[0];\n"
    "    g.ox = +r.getAttribute('x'); g.ow = +r.getAttribute('width');\n"
    "    g.oy = +r.getAttribute('y'); g.fill = r.getAttribute('fill');\n"
    "    fl.gs.push(g);\n"
    "  }\n"
    "  f.addEventListener('click', function (e) { var g = fl_frame(e.target);"
    " if (g) fl_zoom(g); });\n"
    "  f.addEventListener('mouseover', function (e) { var g = fl_frame(e.target);\n"
    "    if (g) fl_say('details', g.getElementsByTagName('title')[0].textContent); });\n"
    "  f.addEventListener('mouseout', function () { fl_say('details', ' '); });\n"
    "  document.getElementById('reset').addEventListener('click', fl_unzoom);\n"
    "  document.getElementById('search').addEventListener('click', fl_search);\n"
    "}\n"
    "function fl_frame(n) {\n"
    "  while (n && n.getAttribute && n.getAttribute('class') != 'f') n = n.parentNode;\n"
    "  return n && n.getAttribute ? n : null;\n"
    "}\n"
    "function fl_say(id, s) { document.getElementById(id).textContent = s; }\n"
    "function fl_place(g, x, w, dim) {\n"
    "  var r = g.getElementsByTagName('rect')[0], t = g.getElementsByTagName('text')[0];\n"
    "  var name = g.getAttribute('data-n'), fit = Math.floor((w - 6) / fl.cw);\n"
    "  r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));\n"
    "  t.setAttribute('x', (x + 3).toFixed(2));\n"
    "  t.textContent = fit < 3 ? '' : name.length <= fit ? name :"
    " name.substring(0, fit - 2) + '..';\n"
    "  g.style.display = ''; g.style.opacity = dim ? 0.6 : '';\n"
    "}\n"
    "function fl_zoom(z) {\n"
    "  var full = fl.w - 2 * fl.pad, s = full / z.ow, e = 0.001;\n"
    "  for (var i = 0; i < fl.gs.length; i++) {\n"
    "    var g = fl.gs[i];\n"
    "    if (g.oy <= z.oy && g.ox >= z.ox - e && g.ox + g.ow <= z.ox + z.ow + e)\n"
    "      fl_place(g, fl.pad + (g.ox - z.ox) * s, g.ow * s, false);\n"
    "    else if (g.oy > z.oy && g.ox <= z.ox + e && g.ox + g.ow >= z.ox + z.ow - e)\n"
    "      fl_place(g, fl.pad, full, true);\n"
    "    else\n"
    "      g.style.display = 'none';\n"
    "  }\n"
    "  document.getElementById('reset').style.display = '';\n"
    "}\n"
    "function fl_unzoom() {\n"
    "  for (var i = 0; i < fl.gs.length; i++)\n"
    "    fl_place(fl.gs[i], fl.gs[i].ox, fl.gs[i].ow, false);\n"
    "  document.getElementById('reset').style.display = 'none';\n"
    "}\n"
    "function fl_search() {\n"
    "  var re, s, iv = [], sum = 0, end = -1;\n"
    "  for (var i = 0; i < fl.gs.length; i++)\n"
    "    fl.gs[i].getElementsByTagName('rect')[0].setAttribute('fill', fl.gs[i].fill);\n"
    "  fl_say('matched', ' ');\n"
    "  if (fl.found) { fl.found = false; fl_say('search', 'Search'); return; }\n"
    "  s = prompt('Search for frames (a regular expression)', '');\n"
    "  if (!s) return;\n"
    "  try { re = new RegExp(s); } catch (err) { alert('bad expression: ' + err.message); return; "
    "}\n"
    "  for (var i = 0; i < fl.gs.length; i++) {\n"
    "    var g = fl.gs[i];\n"
    "    if (!re.test(g.getAttribute('data-n'))) continue;\n"
    "    g.getElementsByTagName('rect')[0].setAttribute('fill', 'rgb(225,0,225)');\n"
    "    iv.push([g.ox, g.ox + g.ow]);\n"
    "  }\n"
    "  iv.sort(function (a, b) { return a[0] - b[0]; });\n"
    "  for (var i = 0; i < iv.length; i++) {\n"
    "    var a = Math.max(iv[i][0], end);\n"
    "    if (iv[i][1] > a) sum += iv[i][1] - a;\n"
    "    end = Math.max(end, iv[i][1]);\n"
    "  }\n"
    "  fl.found = true; fl_say('search', 'Clear');\n"
    "  fl_say('matched', 'Matched: ' + (100 * sum / (fl.w - 2 * fl.pad)).toFixed(2) + '%');\n"
    "}\n";

static void draw_page(FILE *out, const struct tree *t, const char *title, unsigned int width,
		      unsigned int height)
{
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		"height=\"%u\" viewBox=\"0 0 %u %u\" onload=\"fl_init(evt)\">\n",
		width, height, width, height);
	fprintf(out, "<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
		     "<stop offset=\"0\" stop-color=\"#f7f7f7\"/>"
		     "<stop offset=\"1\" stop-color=\"#efe6c4\"/></linearGradient></defs>\n");
	fprintf(out,
		"<style type=\"text/css\">text { font-family: monospace; font-size: %upx; "
		"fill: #000; } #title { font-size: %upx; } #reset, #search { cursor: pointer; "
		"fill: #1a4a8a; } .f:hover rect { stroke: #000; stroke-width: 0.5; }</style>\n",
		FONT_PX, FONT_PX + 5);
	fprintf(out,
		"<script type=\"text/ecmascript\"><![CDATA[\n"
		"var fl = { w: %u, pad: %u, cw: %.2f, gs: [], found: false };\n%s]]></script>\n",
		width, PAD, CHAR_W, script);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"url(#bg)\"/>\n",
		width, height);
	fprintf(out, "<text id=\"title\" x=\"%u\" y=\"26\" text-anchor=\"middle\">", width / 2);
	put_xml(out, title, strlen(title));
	fputs("</text>\n", out);
	fprintf(out,
		"<text id=\"reset\" x=\"%u\" y=\"26\" style=\"display: none\">Reset zoom</text>\n"
		"<text id=\"search\" x=\"%u\" y=\"26\" text-anchor=\"end\">Search</text>\n"
		"<text id=\"details\" x=\"%u\" y=\"%u\"> </text>\n"
		"<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"> </text>\n",
		PAD, width - PAD, PAD, height - 10, width - PAD, height - 10);
	if (!t->n[0].value)
		fprintf(out, "<text x=\"%u\" y=\"%u\" text-anchor=\"middle\">no samples</text>\n",
			width / 2, TOP + FRAME_H);
}

int flame_render(const char *text, size_t len, const struct flame_opts *opts, FILE *out,
		 struct flame_result *res)
{
	struct flame_result dummy;
	struct tree t = { 0 };
	unsigned int width = opts && opts->width ? opts->width : FLAME_DEFAULT_WIDTH, height;
	const char *title = opts && opts->title ? opts->title : "Flame Graph";
	char *buf;
	int ret;

	if (!res)
		res = &dummy;
	memset(res, 0, sizeof(*res));
	if (width < 200 || width > 100000)
		return -EINVAL;
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	if (len) /* text may be NULL when len is 0 */
		memcpy(buf, text, len);
	buf[len] = '\0';
	ret = parse(&t, buf, len, res);
	if (!ret)
		ret = tree_sort(&t);
	if (ret)
		goto out_free;
	res->nr_frames = t.nr;
	res->max_depth = t.max_depth;
	res->total = t.n[0].value;
	height = TOP + (t.max_depth + 1) * FRAME_H + BOTTOM;
	draw_page(out, &t, title, width, height);
	fputs("<g id=\"frames\">\n", out);
	if (t.n[0].value)
		res->nr_drawn = draw_tree(out, &t, width, height);
	fputs("</g>\n</svg>\n", out);
	if (fflush(out) == EOF || ferror(out))
		ret = -EIO;
out_free:
	free(t.n);
	free(buf);
	return ret;
}
