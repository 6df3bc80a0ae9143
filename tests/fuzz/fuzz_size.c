/*
 * collie's number parsers (lib/util.c): sd_parse_size, sd_parse_uint and
 * sd_size_to_str, as collie applies them to --buffer-size, --depth, -p,
 * -c and a VDI's size.
 *
 * Input: byte 0 picks the bounds of sd_parse_uint, the rest is the string
 * (cut at its first NUL, like an argv word).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "util.h"

static const uint64_t bounds[][2] = {
	{ 0, UINT64_MAX }, { 1, 65535 }, { 1, 31 }, { 1, UINT32_MAX }, { 5, 5 }, { 0, 0 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, buf[64];
	uint64_t v = 0xdeadbeef, w;
	size_t b;

	if (!size)
		return 0;
	b = data[0] % (sizeof(bounds) / sizeof(bounds[0]));
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';

	if (sd_parse_uint(s, bounds[b][0], bounds[b][1], &v) == 0)
		FUZZ_ASSERT(v >= bounds[b][0] && v <= bounds[b][1]);
	if (sd_parse_size(s, &v) == 0) {
		sd_size_to_str(v, buf, sizeof(buf));
		FUZZ_ASSERT(memchr(buf, '\0', sizeof(buf)));
		/* a plain number of bytes reads back as itself */
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
		FUZZ_ASSERT(sd_parse_size(buf, &w) == 0 && w == v);
	}
	/* every size prints within a small buffer, cut but terminated */
	sd_size_to_str(v, buf, 8);
	FUZZ_ASSERT(memchr(buf, '\0', 8));
	free(s);
	return 0;
}
