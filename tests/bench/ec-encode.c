/*
 * ec-encode: the raw rate of ISA-L's erasure coding on this machine, as the
 * gateway uses it (lib/ec.c): 4 MiB objects cut into D strips, P parity
 * strips encoded, for about EC_SECONDS (default 2) per scheme.
 *
 *   ec-encode [D:P...]      (default 2:1 4:2 8:3)
 *
 * Prints a line per scheme: "D:P encode MB_per_s" (MB of object data
 * encoded per second, one thread), and a last line "D:P rebuild MB_per_s"
 * for each scheme: P data strips lost and rebuilt from the others.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ec.h"

#define OBJ (UINT32_C(4) << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(int d, int p, double secs)
{
	struct ec_codec c;
	uint32_t sl = ec_strip_len(OBJ, d);
	uint8_t *s[SD_EC_MAX_STRIPS];
	bool have[SD_EC_MAX_STRIPS];
	double t0, t;
	uint64_t n = 0;

	if (ec_codec_init(&c, d, p)) {
		fprintf(stderr, "ec-encode: %d:%d is no scheme\n", d, p);
		return 1;
	}
	for (int i = 0; i < d + p; i++) {
		s[i] = malloc(sl);
		if (!s[i])
			return 1;
		for (uint32_t k = 0; k < sl; k++)
			s[i][k] = (uint8_t)(k * 31 + i);
	}
	t0 = now_s();
	do {
		ec_encode(&c, sl, s, s + d);
		n++;
	} while ((t = now_s()) - t0 < secs);
	printf("%d:%d encode %.0f\n", d, p, (double)n * OBJ / 1e6 / (t - t0));
	for (int i = 0; i < d + p; i++)
		have[i] = i >= p; /* the first P data strips lost */
	n = 0;
	t0 = now_s();
	do {
		if (ec_reconstruct(&c, sl, s, have, ~0U))
			return 1;
		n++;
	} while ((t = now_s()) - t0 < secs);
	printf("%d:%d rebuild %.0f\n", d, p, (double)n * OBJ / 1e6 / (t - t0));
	for (int i = 0; i < d + p; i++)
		free(s[i]);
	ec_codec_free(&c);
	return 0;
}

int main(int argc, char **argv)
{
	const char *def[] = { "2:1", "4:2", "8:3" };
	double secs = getenv("EC_SECONDS") ? atof(getenv("EC_SECONDS")) : 2.0;
	int nr = argc > 1 ? argc - 1 : 3;

	for (int i = 0; i < nr; i++) {
		const char *a = argc > 1 ? argv[i + 1] : def[i];
		int d, p;

		if (sscanf(a, "%d:%d", &d, &p) != 2 || run(d, p, secs))
			return 1;
	}
	return 0;
}
