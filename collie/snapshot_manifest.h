/*
 * The manifest of a cluster snapshot (collie cluster snapshot), version 1:
 * one text file per TAG in DIR/snapshots/, naming every VDI of the cluster
 * and, for each, the chunks of its content by hash. The chunks themselves
 * live once in DIR/chunks/ (cluster_snapshot.c).
 *
 *   sheepdog-cluster-snapshot 1
 *   tag TAG
 *   created SECONDS
 *   chunk-size BYTES
 *   cluster copies=N block-size-shift=S ctime=SECONDS
 *   vdi KEY=VALUE ...            (one line per VDI, parents before children)
 *   c OFFSET HASH                (its chunk lines, in offset order)
 *   z OFFSET
 *   ...
 *   end vdis=N
 *   checksum HEX16
 *
 * A vdi line has exactly these keys, in any order: name, tag (percent-
 * encoded), vid, parent (hex; parent 0: none), snap-id, snapshot (0 or 1),
 * size, copies, copy-policy, redundancy (replicated or erasure: what
 * copy-policy means), block-size-shift, create-time, snap-ctime,
 * vm-clock-nsec, vm-state-size, delta (0 or 1), lines (the number of chunk
 * lines that follow). With delta=0 the lines are the VDI's non-zero chunks
 * ("c"); with delta=1 (its parent is listed before it) its chunks are the
 * parent's inside its size with the lines applied: "c" adds or replaces a
 * chunk, "z" removes one the parent has. A chunk's OFFSET is its byte
 * offset in the VDI (a multiple of the chunk size, below the VDI's size,
 * increasing); HASH is the XXH3-128 of its bytes (always chunk-size bytes:
 * past the VDI's end, zeros) as 32 hex digits. Absent chunks are zeros.
 * The checksum is the XXH3-64 of every byte before its line, as 16
 * lower-case hex digits.
 */
#ifndef SNAPSHOT_MANIFEST_H
#define SNAPSHOT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CS_VERSION 1
#define CS_MAGIC "sheepdog-cluster-snapshot"
#define CS_HASH_LEN 16
#define CS_NAME_LEN 256
#define CS_TAG_MAX 64 /* a cluster snapshot's TAG */
#define CS_MIN_CHUNK 4096
#define CS_MAX_CHUNK (1U << 24)
/* chunks of all the VDIs of one manifest at most (a parser's bound: 1.5 GiB of lists) */
#define CS_MAX_CHUNKS (UINT64_C(1) << 26)

struct cs_chunk {
	uint64_t offset;
	uint8_t hash[CS_HASH_LEN];
};

struct cs_vdi {
	char name[CS_NAME_LEN];
	char tag[CS_NAME_LEN];
	uint32_t vid, parent, snap_id;
	bool snapshot;
	uint64_t size;
	uint8_t copies;
	uint8_t copy_policy;
	bool erasure; /* redundancy: erasure coded (copy_policy says how), else replicated */
	uint8_t block_size_shift;
	uint64_t create_time, snap_ctime, vm_clock_nsec, vm_state_size;
	bool delta;	    /* parsed: its lines were relative to its parent's chunks */
	uint64_t nr_lines;  /* parsed: the chunk lines that followed its vdi line */
	uint64_t nr_chunks; /* its whole chunk list */
	struct cs_chunk *chunks;
};

struct cs_manifest {
	char tag[CS_TAG_MAX + 1];
	uint64_t created;
	uint32_t chunk_size;
	uint8_t copies, block_size_shift;
	uint64_t ctime;
	uint32_t nr_vdis;
	struct cs_vdi *vdis;
};

/* a TAG is 1-64 of [A-Za-z0-9._-], not starting with '.' */
bool cs_tag_valid(const char *tag);

/*
 * Parse a manifest of len bytes: 0, or -EINVAL (err says why, with the
 * line number), -ENOMEM. Free it with cs_manifest_free (also after a failure).
 */
int cs_manifest_parse(const char *text, size_t len, struct cs_manifest *m, char *err,
		      size_t err_len);
void cs_manifest_free(struct cs_manifest *m);

/* the manifest's text (free it) and its length, or NULL on no memory */
char *cs_manifest_format(const struct cs_manifest *m, size_t *len);

/* XXH3-128 of a chunk, and as 32 hex digits (buf of 33) */
void cs_hash(const void *buf, size_t len, uint8_t out[CS_HASH_LEN]);
void cs_hash_hex(const uint8_t hash[CS_HASH_LEN], char *buf);

#endif
