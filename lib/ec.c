/*
 * Erasure coding with ISA-L: see ec.h. Every Galois-field operation is the
 * library's: gf_gen_cauchy1_matrix makes the coding matrix, ec_init_tables
 * expands the rows a call needs, ec_encode_data applies them, and
 * gf_invert_matrix inverts the rows of the strips at hand for a rebuild.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "ec.h"

int ec_codec_init(struct ec_codec *c, int d, int p)
{
	memset(c, 0, sizeof(*c));
	if (!ec_params_valid(d, p))
		return -EINVAL;
	c->matrix = malloc((size_t)(d + p) * d);
	c->tables = malloc((size_t)32 * d * p);
	if (!c->matrix || !c->tables) {
		ec_codec_free(c);
		return -ENOMEM;
	}
	c->d = d;
	c->p = p;
	gf_gen_cauchy1_matrix(c->matrix, d + p, d);
	ec_init_tables(d, p, c->matrix + d * d, c->tables);
	return 0;
}

void ec_codec_free(struct ec_codec *c)
{
	free(c->matrix);
	free(c->tables);
	c->matrix = c->tables = NULL;
}

void ec_encode(const struct ec_codec *c, uint32_t len, uint8_t *const *data,
	       uint8_t *const *parity)
{
	ec_encode_data((int)len, c->d, c->p, c->tables, (unsigned char **)data,
		       (unsigned char **)parity);
}

/*
 * Rebuild: take the first d strips at hand (src), invert their rows of the
 * coding matrix, and the rows of that inverse give the missing data
 * strips; missing parity strips are then encoded from the whole data.
 */
int ec_reconstruct(const struct ec_codec *c, uint32_t len, uint8_t *const *strips,
		   const bool *have, uint32_t want)
{
	int d = c->d, n = c->d + c->p, nr_src = 0, nr_lost = 0, nr_lost_par = 0;
	uint8_t *src[SD_EC_MAX_DATA], *lost[SD_EC_MAX_DATA], *lost_par[SD_EC_MAX_PARITY];
	uint8_t *sub = NULL, *inv = NULL, *rows = NULL, *tbl = NULL;
	uint32_t want_data = want;
	int ret = -ENOMEM;

	/* a parity strip wanted and missing is encoded from every data strip */
	for (int i = d; i < n; i++)
		if (!have[i] && (want & (1U << i)))
			want_data = ~UINT32_C(0);

	for (int i = 0; i < n && nr_src < d; i++)
		if (have[i])
			src[nr_src++] = strips[i];
	if (nr_src < d)
		return -EINVAL;
	sub = malloc((size_t)d * d);
	inv = malloc((size_t)d * d);
	rows = malloc((size_t)d * (d + c->p));
	tbl = malloc((size_t)32 * d * (d + c->p));
	if (!sub || !inv || !rows || !tbl)
		goto out_free;
	for (int i = 0, k = 0; i < n && k < d; i++)
		if (have[i])
			memcpy(sub + (size_t)d * k++, c->matrix + (size_t)d * i, (size_t)d);
	ret = -EINVAL;
	if (gf_invert_matrix(sub, inv, d)) /* a Cauchy matrix never gets here */
		goto out_free;
	for (int i = 0; i < d; i++)
		if (!have[i] && (want_data & (1U << i))) {
			memcpy(rows + (size_t)d * nr_lost, inv + (size_t)d * i, (size_t)d);
			lost[nr_lost++] = strips[i];
		}
	if (nr_lost) {
		ec_init_tables(d, nr_lost, rows, tbl);
		ec_encode_data((int)len, d, nr_lost, tbl, src, lost);
	}
	for (int i = d; i < n; i++)
		if (!have[i] && (want & (1U << i))) {
			memcpy(rows + (size_t)d * nr_lost_par, c->matrix + (size_t)d * i,
			       (size_t)d);
			lost_par[nr_lost_par++] = strips[i];
		}
	if (nr_lost_par) {
		ec_init_tables(d, nr_lost_par, rows, tbl);
		ec_encode_data((int)len, d, nr_lost_par, tbl, (unsigned char **)strips, lost_par);
	}
	ret = 0;
out_free:
	free(sub);
	free(inv);
	free(rows);
	free(tbl);
	return ret;
}
