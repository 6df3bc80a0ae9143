/*
 * The cluster snapshot manifest parser (collie/snapshot_manifest.c), as
 * collie cluster snapshot load, list and delete run it.
 *
 * Input: byte 0 is the mode, the rest the manifest. Mode bit 0 set: the
 * harness appends the checksum line that the text deserves, so that
 * mutations reach the parser behind the checksum.
 *
 * Invariants: a manifest that parses is formatted back into text that
 * parses into the same manifest (tags, every vdi field, every chunk);
 * chunks are in increasing offset order, inside their vdi.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../../collie/snapshot_manifest.h"
#include "fuzz.h"

static void same(const struct cs_manifest *a, const struct cs_manifest *b)
{
	FUZZ_ASSERT(!strcmp(a->tag, b->tag) && a->created == b->created);
	FUZZ_ASSERT(a->chunk_size == b->chunk_size && a->copies == b->copies);
	FUZZ_ASSERT(a->block_size_shift == b->block_size_shift && a->ctime == b->ctime);
	FUZZ_ASSERT(a->nr_vdis == b->nr_vdis);
	for (uint32_t i = 0; i < a->nr_vdis; i++) {
		const struct cs_vdi *x = &a->vdis[i], *y = &b->vdis[i];

		FUZZ_ASSERT(!strcmp(x->name, y->name) && !strcmp(x->tag, y->tag));
		FUZZ_ASSERT(x->vid == y->vid && x->parent == y->parent && x->snap_id == y->snap_id);
		FUZZ_ASSERT(x->snapshot == y->snapshot && x->size == y->size);
		FUZZ_ASSERT(x->copies == y->copies && x->copy_policy == y->copy_policy);
		FUZZ_ASSERT(x->erasure == y->erasure && x->block_size_shift == y->block_size_shift);
		FUZZ_ASSERT(x->create_time == y->create_time && x->snap_ctime == y->snap_ctime);
		FUZZ_ASSERT(x->vm_clock_nsec == y->vm_clock_nsec);
		FUZZ_ASSERT(x->vm_state_size == y->vm_state_size && x->nr_chunks == y->nr_chunks);
		for (uint64_t c = 0; c < x->nr_chunks; c++) {
			FUZZ_ASSERT(x->chunks[c].offset == y->chunks[c].offset);
			FUZZ_ASSERT(!memcmp(x->chunks[c].hash, y->chunks[c].hash, CS_HASH_LEN));
			FUZZ_ASSERT(x->chunks[c].offset < x->size);
			FUZZ_ASSERT(!c || x->chunks[c].offset > x->chunks[c - 1].offset);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cs_manifest m, again;
	char err[160], *text, *out;
	size_t len, out_len;

	if (!size)
		return 0;
	len = size - 1;
	text = malloc(len + 64);
	if (!text)
		return 0;
	memcpy(text, data + 1, len);
	if (data[0] & 1)
		len += (size_t)sprintf(text + len, "checksum %016llx\n",
				       (unsigned long long)XXH3_64bits(text, len));
	if (cs_manifest_parse(text, len, &m, err, sizeof(err)) == 0) {
		out = cs_manifest_format(&m, &out_len);
		if (out) {
			FUZZ_ASSERT(cs_manifest_parse(out, out_len, &again, err, sizeof(err)) == 0);
			same(&m, &again);
			cs_manifest_free(&again);
			free(out);
		}
	} else {
		FUZZ_ASSERT(err[0]);
	}
	cs_manifest_free(&m);
	free(text);
	return 0;
}
