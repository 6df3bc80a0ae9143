/*
 * Erasure coding of data objects (lib/ec.c): an object of size S cut into
 * D data strips of S / D bytes (strip i holds bytes [i * S / D, (i + 1) *
 * S / D) of the object) and P parity strips of the same size, computed by
 * Intel's ISA-L (a Cauchy matrix over GF(2^8): any D of the D + P strips
 * give the object back). D is 2, 4, 8 or 16; P is 1 to 15.
 *
 * The scheme lives in a VDI's inode as sheepdog 1.0 kept it: copy_policy
 * ((D / 2) << 4 | P; 0: the VDI is replicated) and nr_copies = D + P.
 *
 * A strip is stored under its own oid: the data object's oid with the
 * strip's index plus one in bits 56-60 (which a client's oid leaves zero,
 * oid_is_valid), so that a node that holds a strip knows which one it
 * is, and a strip that moved is never read as another.
 */
#ifndef SD_EC_H
#define SD_EC_H

#include <stdbool.h>
#include <stdint.h>

#include "sheepdog_proto.h"

#define SD_EC_MAX_DATA 16
#define SD_EC_MAX_PARITY 15
#define SD_EC_MAX_STRIPS (SD_EC_MAX_DATA + SD_EC_MAX_PARITY)
#define SD_EC_STRIP_SHIFT 56
#define SD_EC_STRIP_MASK (UINT64_C(0x1f) << SD_EC_STRIP_SHIFT)

static inline bool ec_params_valid(int d, int p)
{
	return (d == 2 || d == 4 || d == 8 || d == 16) && p >= 1 && p <= SD_EC_MAX_PARITY;
}

/* D and P of a copy_policy: false when it names no valid scheme (0 is none) */
static inline bool ec_policy_to_dp(uint16_t policy, int *d, int *p)
{
	*d = ((policy >> 4) & 0xf) * 2;
	*p = policy & 0xf;
	return policy <= 0xff && ec_params_valid(*d, *p);
}

static inline uint8_t ec_dp_to_policy(int d, int p)
{
	return (uint8_t)(((d / 2) << 4) | p);
}

/* the size of a strip of an object of obj_len bytes: 0 when D does not divide it */
static inline uint32_t ec_strip_len(uint32_t obj_len, int d)
{
	if (d <= 0 || obj_len % (uint32_t)d)
		return 0;
	return obj_len / (uint32_t)d;
}

/* strip i (0 .. D + P - 1) of data object oid */
static inline uint64_t ec_strip_oid(uint64_t oid, int i)
{
	return (oid & ~SD_EC_STRIP_MASK) | ((uint64_t)(i + 1) << SD_EC_STRIP_SHIFT);
}

/* the strip index of oid, or -1 when oid names no strip */
static inline int ec_oid_strip(uint64_t oid)
{
	return (int)((oid & SD_EC_STRIP_MASK) >> SD_EC_STRIP_SHIFT) - 1;
}

/* the data object a strip belongs to (oid itself when it names no strip) */
static inline uint64_t ec_base_oid(uint64_t oid)
{
	return oid & ~SD_EC_STRIP_MASK;
}

/*
 * A valid oid as a peer sees it: a client's (oid_is_valid), or a strip of
 * a client's data object with an index below SD_EC_MAX_STRIPS.
 */
static inline bool ec_peer_oid_valid(uint64_t oid)
{
	int i = ec_oid_strip(oid);

	if (i < 0)
		return oid_is_valid(oid);
	return i < SD_EC_MAX_STRIPS && is_data_obj(oid) && oid_is_valid(ec_base_oid(oid));
}

/* one scheme's coding tables, made once (ec_codec_init) and read by any thread */
struct ec_codec {
	int d, p;
	uint8_t *matrix; /* (d + p) x d: identity, then the Cauchy rows */
	uint8_t *tables; /* ISA-L's expanded parity rows (32 * d * p bytes) */
};

/* 0, -EINVAL (not a valid D:P) or -ENOMEM */
int ec_codec_init(struct ec_codec *c, int d, int p);
void ec_codec_free(struct ec_codec *c);
/* parity[0 .. p - 1] from data[0 .. d - 1], len bytes each */
void ec_encode(const struct ec_codec *c, uint32_t len, uint8_t *const *data,
	       uint8_t *const *parity);
/*
 * strips[0 .. d + p - 1], len bytes each: the ones with have[i] false and
 * bit i set in want are rebuilt from d of the others (a missing parity
 * strip is encoded from the whole data, so wanting one rebuilds every
 * missing data strip too); the others are left as they are. 0, -EINVAL
 * when fewer than d are had, or -ENOMEM.
 */
int ec_reconstruct(const struct ec_codec *c, uint32_t len, uint8_t *const *strips,
		   const bool *have, uint32_t want);

#endif
