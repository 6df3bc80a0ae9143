/*
 * Unit tests of collie/flame.c: folded stacks in, SVG flame graph out.
 * The frames are read back from the SVG text (name, x, y, width, label)
 * and checked against what the input says they must be.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "util.h"

#define FULL_W (FLAME_DEFAULT_WIDTH - 20.0) /* the root's width: 10 px each side */

struct frame {
	char name[8192];
	double x, y, w;
	char label[256];
	char title[8300];
	char fill[32];
};

struct svg {
	char *text;
	size_t len;
	struct flame_result res;
	int ret;
	struct frame *f;
	size_t nr;
};

/* copy the text between s and the first occurrence of end, NUL-terminated */
static const char *copy_until(char *dst, size_t cap, const char *s, const char *end)
{
	const char *e = strstr(s, end);
	size_t n;

	ck_assert_ptr_nonnull(e);
	n = (size_t)(e - s);
	ck_assert_uint_lt(n, cap);
	memcpy(dst, s, n);
	dst[n] = '\0';
	return e + strlen(end);
}

/* every frame group of the SVG, in document order */
static void read_frames(struct svg *g)
{
	static const char open[] = "<g class=\"f\" data-n=\"";
	const char *p = g->text;

	g->nr = 0;
	for (const char *q = p; (q = strstr(q, open)); q++)
		g->nr++;
	g->f = calloc(g->nr + 1, sizeof(*g->f));
	ck_assert_ptr_nonnull(g->f);
	for (size_t i = 0; i < g->nr; i++) {
		struct frame *f = &g->f[i];

		p = strstr(p, open) + strlen(open);
		p = copy_until(f->name, sizeof(f->name), p, "\"><title>");
		p = copy_until(f->title, sizeof(f->title), p, "</title><rect ");
		ck_assert_int_eq(
		    sscanf(p, "x=\"%lf\" y=\"%lf\" width=\"%lf\"", &f->x, &f->y, &f->w), 3);
		p = strstr(p, "fill=\"") + strlen("fill=\"");
		p = copy_until(f->fill, sizeof(f->fill), p, "\"");
		p = strstr(p, "<text ");
		p = strchr(p, '>') + 1;
		p = copy_until(f->label, sizeof(f->label), p, "</text></g>");
	}
}

static void render_opts(struct svg *g, const char *in, size_t len, const struct flame_opts *o)
{
	FILE *out = open_memstream(&g->text, &g->len);

	ck_assert_ptr_nonnull(out);
	g->ret = flame_render(in, len, o, out, &g->res);
	ck_assert_int_eq(fclose(out), 0);
	if (!g->ret)
		read_frames(g);
}

static void render(struct svg *g, const char *in)
{
	render_opts(g, in, strlen(in), NULL);
	ck_assert_int_eq(g->ret, 0);
}

static void svg_free(struct svg *g)
{
	free(g->text);
	free(g->f);
}

/* the one frame called name at level y (any level: y < 0) */
static const struct frame *find(const struct svg *g, const char *name)
{
	const struct frame *found = NULL;

	for (size_t i = 0; i < g->nr; i++) {
		if (strcmp(g->f[i].name, name))
			continue;
		ck_assert_msg(!found, "two frames called %s", name);
		found = &g->f[i];
	}
	ck_assert_msg(found, "no frame called %s", name);
	return found;
}

static void assert_near(double got, double want, const char *what)
{
	ck_assert_msg(got > want - 0.011 && got < want + 0.011, "%s: %.3f, expected %.3f", what,
		      got, want);
}

START_TEST(test_widths)
{
	/* unsorted on purpose; main;a;b twice: merged */
	static const char in[] = "main;d 600\n"
				 "main;a;c 100\n"
				 "main;a;b 200\n"
				 "main;a;b 100\n"
				 "other 1000\n";
	struct svg g = { 0 };
	const struct frame *all, *main_, *a, *b, *c, *d, *other;

	render(&g, in);
	ck_assert_uint_eq(g.res.nr_lines, 5);
	ck_assert_uint_eq(g.res.nr_skipped, 0);
	ck_assert_uint_eq(g.res.total, 2000);
	ck_assert_uint_eq(g.res.nr_frames, 7); /* all main other a d b c */
	ck_assert_uint_eq(g.res.nr_drawn, 7);
	ck_assert_uint_eq(g.res.max_depth, 3);
	ck_assert_uint_eq(g.nr, 7);
	all = find(&g, "all");
	main_ = find(&g, "main");
	a = find(&g, "a");
	b = find(&g, "b");
	c = find(&g, "c");
	d = find(&g, "d");
	other = find(&g, "other");
	/* the root is the widest, spans the width, and sits at the bottom */
	for (size_t i = 0; i < g.nr; i++) {
		ck_assert(g.f[i].w <= all->w);
		ck_assert(g.f[i].y <= all->y);
	}
	assert_near(all->x, 10, "all x");
	assert_near(all->w, FULL_W, "all width");
	/* widths proportional to the counts */
	assert_near(main_->w, FULL_W * 1000 / 2000, "main");
	assert_near(other->w, FULL_W * 1000 / 2000, "other");
	assert_near(a->w, FULL_W * 400 / 2000, "a");
	assert_near(b->w, FULL_W * 300 / 2000, "b");
	assert_near(c->w, FULL_W * 100 / 2000, "c");
	assert_near(d->w, FULL_W * 600 / 2000, "d");
	/* sorted by name per level, children from their parent's left edge */
	assert_near(main_->x, all->x, "main x");
	assert_near(other->x, main_->x + main_->w, "other x");
	assert_near(a->x, main_->x, "a x");
	assert_near(d->x, a->x + a->w, "d x");
	assert_near(b->x, a->x, "b x");
	assert_near(c->x, b->x + b->w, "c x");
	/* one level per depth, 16 px apart */
	assert_near(main_->y, all->y - 16, "main y");
	assert_near(b->y, all->y - 48, "b y");
	/* hover titles: name, time with its unit, share */
	ck_assert_str_eq(all->title, "all (2.00 us, 100.00%)");
	ck_assert_str_eq(b->title, "b (300 ns, 15.00%)");
	ck_assert_str_eq(main_->label, "main");
	/* self-contained: script inline, no link out */
	ck_assert_ptr_nonnull(strstr(g.text, "<![CDATA["));
	ck_assert_ptr_null(strstr(g.text, "href"));
	ck_assert_ptr_null(strstr(g.text, "no samples"));
	svg_free(&g);
}
END_TEST

START_TEST(test_same_input_same_output)
{
	static const char a[] = "x;y 5\nx 7\n", b[] = "x;y 5\r\nx 7",
			  c[] = "# unit: ns\nx 7\n\nx;y 5";
	struct svg ga = { 0 }, gb = { 0 }, gc = { 0 };

	render(&ga, a);
	render(&gb, b);
	render(&gc, c);
	ck_assert_uint_eq(ga.len, gb.len);
	ck_assert_int_eq(memcmp(ga.text, gb.text, ga.len), 0);
	ck_assert_uint_eq(ga.len, gc.len);
	ck_assert_int_eq(memcmp(ga.text, gc.text, ga.len), 0);
	ck_assert_uint_eq(gc.res.nr_skipped, 0);
	svg_free(&ga);
	svg_free(&gb);
	svg_free(&gc);
}
END_TEST

START_TEST(test_escaping)
{
	static const char in[] = "main;x<&>\"'y 10\n";
	struct svg g = { 0 };
	struct flame_opts o = { .title = "a <b> & \"c\"" };
	const struct frame *f;

	render_opts(&g, in, strlen(in), &o);
	ck_assert_int_eq(g.ret, 0);
	f = find(&g, "x&lt;&amp;&gt;&quot;&#39;y");
	ck_assert_str_eq(f->title, "x&lt;&amp;&gt;&quot;&#39;y (10 ns, 100.00%)");
	ck_assert_ptr_null(strstr(g.text, "x<&"));
	ck_assert_ptr_nonnull(strstr(g.text, ">a &lt;b&gt; &amp; &quot;c&quot;</text>"));
	svg_free(&g);
}
END_TEST

START_TEST(test_bad_bytes)
{
	/* a control character and bytes that are no UTF-8 become '?'; UTF-8 stays */
	static const char in[] = "caf\xc3\xa9;a\x01z\xff 10\n";
	struct svg g = { 0 };

	render(&g, in);
	find(&g, "caf\xc3\xa9");
	find(&g, "a?z?");
	svg_free(&g);
}
END_TEST

START_TEST(test_empty)
{
	static const char *const inputs[] = { "", "\n", "# only a comment\n", "junk\n" };
	struct svg g = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(inputs); i++) {
		memset(&g, 0, sizeof(g));
		render(&g, inputs[i]);
		ck_assert_uint_eq(g.res.total, 0);
		ck_assert_uint_eq(g.res.nr_frames, 1);
		ck_assert_uint_eq(g.nr, 0);
		ck_assert_ptr_nonnull(strstr(g.text, ">no samples</text>"));
		ck_assert_ptr_nonnull(strstr(g.text, "<svg "));
		ck_assert_str_eq(g.text + g.len - 7, "</svg>\n");
		svg_free(&g);
	}
	/* no text at all */
	memset(&g, 0, sizeof(g));
	render_opts(&g, NULL, 0, NULL);
	ck_assert_int_eq(g.ret, 0);
	ck_assert_ptr_nonnull(strstr(g.text, ">no samples</text>"));
	svg_free(&g);
}
END_TEST

START_TEST(test_malformed)
{
	static const char in[] = "no_count\n"
				 "a;b -5\n"
				 "a;b 99999999999999999999\n"
				 "a;b 4611686018427387905\n" /* FLAME_MAX_COUNT + 1 */
				 "a;b 12x\n"
				 "a;b 1.5\n"
				 "a;;b 3\n"
				 ";a 3\n"
				 "a; 3\n"
				 " 5\n"
				 "5\n"
				 "a;b 40\n"
				 "a;b\t2\n";
	struct svg g = { 0 };

	render(&g, in);
	ck_assert_uint_eq(g.res.nr_skipped, 11);
	ck_assert_uint_eq(g.res.nr_lines, 2);
	ck_assert_uint_eq(g.res.total, 42);
	ck_assert_uint_eq(g.nr, 3);
	svg_free(&g);
}
END_TEST

START_TEST(test_total_overflow)
{
	static const char in[] = "a 4611686018427387904\nb 4611686018427387904\nc 1\n";
	struct svg g = { 0 };

	render(&g, in);
	ck_assert_uint_eq(g.res.total, FLAME_MAX_COUNT);
	ck_assert_uint_eq(g.res.nr_skipped, 2); /* the total would pass the maximum */
	ck_assert_str_eq(find(&g, "a")->title, "a (4611686018.43 s, 100.00%)");
	svg_free(&g);
}
END_TEST

/* "f0;f1;...;f<n-1> 1000" */
static char *deep_stack(unsigned int n, size_t name_len)
{
	size_t cap = (size_t)n * (name_len + 12) + 32, len = 0;
	char *s = malloc(cap);

	ck_assert_ptr_nonnull(s);
	for (unsigned int i = 0; i < n; i++) {
		len += (size_t)snprintf(s + len, cap - len, "%sf%u", i ? ";" : "", i);
		for (size_t k = 0; k < name_len; k++)
			s[len++] = 'x';
	}
	snprintf(s + len, cap - len, " 1000\n");
	return s;
}

START_TEST(test_deep)
{
	char *in = deep_stack(512, 0), *too_deep = deep_stack(FLAME_MAX_DEPTH + 1, 0);
	char *long_names = deep_stack(64, 5000);
	struct svg g = { 0 };

	render(&g, in);
	ck_assert_uint_eq(g.res.max_depth, 512);
	ck_assert_uint_eq(g.res.nr_frames, 513);
	ck_assert_uint_eq(g.nr, 513);
	for (size_t i = 0; i < g.nr; i++)
		assert_near(g.f[i].w, FULL_W, g.f[i].name);
	assert_near(find(&g, "all")->y - find(&g, "f511")->y, 512 * 16, "height");
	svg_free(&g);

	memset(&g, 0, sizeof(g));
	render(&g, too_deep);
	ck_assert_uint_eq(g.res.nr_skipped, 1);
	ck_assert_uint_eq(g.nr, 0);
	svg_free(&g);

	/* names longer than any label: cut to the width, nothing overflows */
	memset(&g, 0, sizeof(g));
	render(&g, long_names);
	ck_assert_uint_eq(g.nr, 65);
	for (size_t i = 1; i < g.nr; i++) {
		size_t n = strlen(g.f[i].label);

		ck_assert_uint_le(n * 7.2, FULL_W);
		ck_assert_str_eq(g.f[i].label + n - 2, "..");
	}
	svg_free(&g);
	free(in);
	free(too_deep);
	free(long_names);
}
END_TEST

START_TEST(test_labels_and_colours)
{
	/* 1180 px * 3/1000 = 3.54 px: no room for a label; 61 / 1000: 71.98 px */
	static const char in[] = "wide_enough_name 936\nnarrow 3\nmid_sized_function_name 61\n";
	static const char again[] = "mid_sized_function_name 1\nzzz 5\n";
	struct svg g = { 0 }, g2 = { 0 };
	const struct frame *mid;
	unsigned int r, gr, b;

	render(&g, in);
	ck_assert_str_eq(find(&g, "narrow")->label, "");
	ck_assert_str_eq(find(&g, "wide_enough_name")->label, "wide_enough_name");
	mid = find(&g, "mid_sized_function_name");
	/* (71.98 - 6) / 7.2: 9 characters, 7 of the name and ".." */
	ck_assert_str_eq(mid->label, "mid_siz..");
	/* warm, and the same for the same name in another picture */
	ck_assert_int_eq(sscanf(mid->fill, "rgb(%u,%u,%u)", &r, &gr, &b), 3);
	ck_assert(r >= 205 && r <= 255 && gr <= 230 && b <= 55);
	render(&g2, again);
	ck_assert_str_eq(find(&g2, "mid_sized_function_name")->fill, mid->fill);
	svg_free(&g);
	svg_free(&g2);
}
END_TEST

START_TEST(test_too_narrow)
{
	/* 1180 px * 1 / 10000001: far below a tenth of a pixel, not drawn */
	static const char in[] = "big 10000000\ntiny;child 1\n";
	struct svg g = { 0 };

	render(&g, in);
	ck_assert_uint_eq(g.res.nr_frames, 4);
	ck_assert_uint_eq(g.res.nr_drawn, 2);
	ck_assert_uint_eq(g.nr, 2);
	ck_assert_ptr_null(strstr(g.text, "tiny"));
	ck_assert_ptr_null(strstr(g.text, "child"));
	svg_free(&g);
}
END_TEST

START_TEST(test_fmt_time)
{
	static const struct {
		uint64_t ns;
		const char *s;
	} cases[] = {
		{ 0, "0 ns" },
		{ 740, "740 ns" },
		{ 999, "999 ns" },
		{ 1000, "1.00 us" },
		{ 12500, "12.50 us" },
		{ 3200000, "3.20 ms" },
		{ 1050000000, "1.05 s" },
		{ 999994, "999.99 us" },
		{ 999995, "1.00 ms" },
		{ 999994999, "999.99 ms" },
		{ 999995000, "1.00 s" },
		{ 90000000000, "90.00 s" },
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		flame_fmt_time(cases[i].ns, buf, sizeof(buf));
		ck_assert_str_eq(buf, cases[i].s);
	}
}
END_TEST

START_TEST(test_errors)
{
	struct flame_opts o = { .width = 10 };
	struct svg g = { 0 };
	FILE *full = fopen("/dev/full", "w");

	render_opts(&g, "a 1\n", 4, &o);
	ck_assert_int_eq(g.ret, -EINVAL);
	free(g.text);
	/* a write that fails is said */
	ck_assert_ptr_nonnull(full);
	ck_assert_int_eq(flame_render("a 1\n", 4, NULL, full, NULL), -EIO);
	fclose(full);
}
END_TEST

static Suite *flame_suite(void)
{
	Suite *s = suite_create("flame");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_widths);
	tcase_add_test(tc, test_same_input_same_output);
	tcase_add_test(tc, test_escaping);
	tcase_add_test(tc, test_bad_bytes);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_total_overflow);
	tcase_add_test(tc, test_deep);
	tcase_add_test(tc, test_labels_and_colours);
	tcase_add_test(tc, test_too_narrow);
	tcase_add_test(tc, test_fmt_time);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(flame_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
