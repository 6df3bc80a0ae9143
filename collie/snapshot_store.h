/*
 * The directory of cluster snapshots: chunks stored once by content hash,
 * one manifest per tag (layout in snapshot_store.c, manifest format in
 * snapshot_manifest.h). Every function returns EXIT_OK or an exit code
 * after saying why.
 */
#ifndef SNAPSHOT_STORE_H
#define SNAPSHOT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "snapshot_manifest.h"

struct cs_store {
	const char *dir;
	int dirfd;
	int lockfd;
	/* what cs_store_put did: chunks written, their bytes, chunks already there */
	uint64_t nr_new, new_bytes, nr_dup;
	uint64_t manifest_bytes; /* the last manifest written */
};

/* open DIR (create: make it and its layout), locked exclusive or shared */
int cs_store_open(struct cs_store *s, const char *dir, bool create, bool exclusive);
void cs_store_close(struct cs_store *s);
/* a chunk, unless one of that hash is there already */
int cs_store_put(struct cs_store *s, const uint8_t hash[CS_HASH_LEN], const void *buf, size_t len);
/* a chunk of len bytes, read and its hash checked */
int cs_store_get(struct cs_store *s, const uint8_t hash[CS_HASH_LEN], void *buf, size_t len);
/* every chunk m names is there and whole: each read once and its hash checked */
int cs_store_check_chunks(struct cs_store *s, const struct cs_manifest *m);
/* snapshot tag's manifest, parsed and checked (EXIT_MISSING: none) */
int cs_store_read_manifest(struct cs_store *s, const char *tag, struct cs_manifest *m);
/* m as snapshot m->tag, durably, after every chunk written so far */
int cs_store_write_manifest(struct cs_store *s, const struct cs_manifest *m);
/* whether snapshot tag exists */
int cs_store_has(struct cs_store *s, const char *tag);
/* the tags (free the array) */
int cs_store_list(struct cs_store *s, char (**tags)[CS_TAG_MAX + 1], int *nr);
/* remove the chunks that no manifest names */
int cs_store_gc(struct cs_store *s, uint64_t *nr_removed, uint64_t *bytes);

#endif
