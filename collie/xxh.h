/*
 * xxHash for collie's backup streams and cluster snapshots. Where libxxhash
 * has its x86 run-time dispatch (Debian's does), its header turns XXH3_64bits,
 * XXH3_64bits_update, XXH3_128bits and their kin into the dispatching entry
 * points, which take AVX2 or AVX-512 when the CPU has them: the plain ones
 * are the SSE2 code, about half as fast.
 */
#ifndef COLLIE_XXH_H
#define COLLIE_XXH_H

#include "config.h"

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#ifdef HAVE_XXH_X86DISPATCH
#include <xxh_x86dispatch.h>
#endif

#endif
