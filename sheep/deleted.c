/*
 * Deleted objects: what no recovery, rejoin or stale copy may bring back.
 *
 * DEL_VDI removes a VDI's objects from the nodes that are up, but copies
 * live on where nobody removed them: on a node that was down (it sets its
 * objects aside as stale when it rejoins) and in the stale copies of a
 * node that rejoined earlier. Recovery fetches from a stale copy any
 * object that no node holds live, so without a record it would resurrect
 * the VDI's data for good.
 *
 * So every node records each delete it applies (DEL_VDI is ordered: every
 * node applies it, in the same place of the order): the vid, and the
 * indexes of the data objects that another VDI still reads and that the
 * delete kept. The records are kept in DIR/deleted (rewritten whole at
 * each delete: vids are never reused, so a record is never withdrawn,
 * and deletes are rare) and a joining node learns a member's records
 * (GET_DELETED) before it recovers anything. Recovery neither fetches
 * such an object nor keeps a copy of it.
 *
 * A record's kept indexes only shrink: once the last live VDI that read a
 * kept object is deleted too, that delete frees the object (vdi_del.c) and the
 * record lets it go (deleted_add again, with what is still read). Records
 * that meet (a joining node's and a member's) keep what both keep.
 *
 * The records are sorted by vid, each with its kept indexes sorted, under
 * one mutex: recovery's fetchers look them up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "logger.h"
#include "internal_proto.h"
#include "lock.h"
#include "proto_util.h"
#include "deleted.h"
#include "group.h"
#include "peer_io.h"
#include "request.h"

#define DELETED_FILE "deleted"
/* the most GET_DELETED may carry: a record per vid, hardly any kept index */
#define DELETED_MAX_WIRE (16U << 20)

struct del_rec {
	uint32_t vid;
	uint32_t nr_kept;
	uint32_t *kept;
};

static struct del_rec *recs;
static size_t nr_recs, cap_recs;
static pthread_mutex_t del_lock = PTHREAD_MUTEX_INITIALIZER;

/* the record of vid, or where it would go (*pos); caller holds del_lock */
static struct del_rec *find_rec(uint32_t vid, size_t *pos)
{
	size_t lo = 0, hi = nr_recs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (recs[mid].vid < vid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return lo < nr_recs && recs[lo].vid == vid ? &recs[lo] : NULL;
}

/* keep in r only the indexes that kept[nr] holds too (both sorted): whether r changed */
static bool intersect(struct del_rec *r, const uint32_t *kept, uint32_t nr)
{
	uint32_t n = 0, j = 0;

	for (uint32_t i = 0; i < r->nr_kept; i++) {
		while (j < nr && kept[j] < r->kept[i])
			j++;
		if (j < nr && kept[j] == r->kept[i])
			r->kept[n++] = r->kept[i];
	}
	if (n == r->nr_kept)
		return false;
	r->nr_kept = n;
	return true;
}

/*
 * Insert a record (kept, sorted, is taken over), or let an existing one
 * keep only what both keep; *changed (if given) says whether anything did.
 * Caller holds del_lock. 0 or -ENOMEM.
 */
static int insert_rec(uint32_t vid, uint32_t nr_kept, uint32_t *kept, bool *changed)
{
	struct del_rec *r;
	size_t pos;

	r = find_rec(vid, &pos);
	if (r) {
		bool c = intersect(r, kept, nr_kept);

		if (changed)
			*changed = c;
		free(kept);
		return 0;
	}
	if (changed)
		*changed = true;
	if (nr_recs == cap_recs) {
		size_t cap = cap_recs ? cap_recs * 2 : 64;
		struct del_rec *n = realloc(recs, cap * sizeof(*n));

		if (!n) {
			free(kept);
			return -ENOMEM;
		}
		recs = n;
		cap_recs = cap;
	}
	memmove(&recs[pos + 1], &recs[pos], (nr_recs - pos) * sizeof(*recs));
	recs[pos] = (struct del_rec){ vid, nr_kept, kept };
	nr_recs++;
	return 0;
}

/* the records packed as the wire and the file carry them; caller holds del_lock */
static size_t packed_len(void)
{
	size_t len = 0;

	for (size_t i = 0; i < nr_recs; i++)
		len += (2 + (size_t)recs[i].nr_kept) * sizeof(uint32_t);
	return len;
}

static void pack(uint32_t *p)
{
	for (size_t i = 0; i < nr_recs; i++) {
		*p++ = recs[i].vid;
		*p++ = recs[i].nr_kept;
		if (recs[i].nr_kept)
			memcpy(p, recs[i].kept, recs[i].nr_kept * sizeof(uint32_t));
		p += recs[i].nr_kept;
	}
}

/*
 * Add the packed records of buf (len bytes): *nr_new (if given) counts the
 * vids new here, *changed (if given) whether anything changed. Caller holds
 * del_lock. 0, -EINVAL (not records: a kept list not strictly increasing
 * too, which the merge relies on) or -ENOMEM.
 */
static int unpack(const uint32_t *p, size_t len, int *nr_new, bool *changed)
{
	size_t n = len / sizeof(uint32_t), i = 0;
	int ret = 0;

	if (len % sizeof(uint32_t))
		return -EINVAL;
	while (i + 2 <= n && !ret) {
		uint32_t vid = p[i], nr_kept = p[i + 1];
		uint32_t *kept = NULL;

		bool c;

		i += 2;
		if (nr_kept > MAX_DATA_OBJS || nr_kept > n - i || !vid || vid >= SD_NR_VDIS)
			return -EINVAL;
		for (uint32_t k = 1; k < nr_kept; k++)
			if (p[i + k] <= p[i + k - 1])
				return -EINVAL;
		if (nr_kept) {
			kept = malloc(nr_kept * sizeof(uint32_t));
			if (!kept)
				return -ENOMEM;
			memcpy(kept, p + i, nr_kept * sizeof(uint32_t));
		}
		i += nr_kept;
		if (!find_rec(vid, NULL) && nr_new)
			(*nr_new)++;
		ret = insert_rec(vid, nr_kept, kept, &c);
		if (changed && c)
			*changed = true;
	}
	return ret ? ret : i == n ? 0 : -EINVAL;
}

/* rewrite DIR/deleted; caller holds del_lock. 0 or -errno */
static int save(void)
{
	size_t len = packed_len();
	uint32_t *buf = malloc(len ? len : 1);
	int ret;

	if (!buf)
		return -ENOMEM;
	pack(buf);
	ret = group_write_file(DELETED_FILE, buf, len);
	free(buf);
	return ret;
}

int deleted_init(const char *dir)
{
	char path[4200];
	struct stat st;
	uint32_t *buf;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/" DELETED_FILE, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	ret = sd_read_full(fd, buf, (size_t)st.st_size);
	close(fd);
	if (!ret) {
		sd_mutex_lock(&del_lock);
		ret = unpack(buf, (size_t)st.st_size, NULL, NULL);
		sd_mutex_unlock(&del_lock);
	}
	free(buf);
	if (ret)
		sd_err("%s: %s", path,
		       ret == -EINVAL ? "not a list of deleted vdis" : strerror(-ret));
	else if (nr_recs)
		sd_info("%zu deleted vdi(s) recorded", nr_recs);
	return ret;
}

int deleted_add(uint32_t vid, const uint8_t *shared)
{
	uint32_t nr_kept = 0, *kept = NULL;
	bool changed;
	int ret;

	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		if (sd_vid_test(shared, i))
			nr_kept++;
	if (nr_kept) {
		kept = malloc(nr_kept * sizeof(*kept));
		if (!kept)
			return -ENOMEM;
		nr_kept = 0;
		for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
			if (sd_vid_test(shared, i))
				kept[nr_kept++] = i;
	}
	sd_mutex_lock(&del_lock);
	ret = insert_rec(vid, nr_kept, kept, &changed);
	if (!ret && changed)
		ret = save();
	sd_mutex_unlock(&del_lock);
	return ret;
}

uint32_t deleted_kept(uint32_t vid, uint8_t *kept)
{
	const struct del_rec *r;
	uint32_t n = 0;

	memset(kept, 0, MAX_DATA_OBJS / 8);
	sd_mutex_lock(&del_lock);
	r = find_rec(vid, NULL);
	if (r) {
		for (uint32_t i = 0; i < r->nr_kept; i++)
			sd_vid_set(kept, r->kept[i]);
		n = r->nr_kept;
	}
	sd_mutex_unlock(&del_lock);
	return n;
}

static bool is_kept(const struct del_rec *r, uint32_t idx)
{
	size_t lo = 0, hi = r->nr_kept;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->kept[mid] == idx)
			return true;
		if (r->kept[mid] < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool deleted_has(uint64_t oid)
{
	const struct del_rec *r;
	bool ret = false;

	/* the inode stays, nameless: it keeps the vid taken */
	if (is_vdi_obj(oid))
		return false;
	sd_mutex_lock(&del_lock);
	r = nr_recs ? find_rec(oid_to_vid(oid), NULL) : NULL;
	if (r)
		ret = is_vmstate_obj(oid) || !is_kept(r, oid_to_idx(oid));
	sd_mutex_unlock(&del_lock);
	return ret;
}

int deleted_op_get(struct request *req)
{
	int ret = SD_RES_SUCCESS;
	size_t len;

	sd_mutex_lock(&del_lock);
	len = packed_len();
	if (len > req->rq.data_length)
		ret = SD_RES_BUFFER_SMALL;
	else
		pack(req->data);
	sd_mutex_unlock(&del_lock);
	req->rp.data_length = ret == SD_RES_SUCCESS ? (uint32_t)len : 0;
	return ret;
}

/*
 * gcc 12's -fanalyzer loses the kept list that unpack hands insert_rec, once
 * stored into the grown records array, and reports it leaked in this
 * function: a false positive (ASan's unit and fuzz runs see no leak). Only
 * that warning, only in this function (script/analyze).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
int deleted_sync_from(const struct sd_node_id *nid)
{
	struct sd_req rq = { .proto_ver = SD_SHEEP_PROTO_VER, .opcode = SD_OP_GET_DELETED };
	uint32_t len = 1U << 16;
	struct sd_rsp rsp;
	void *buf = NULL;
	int ret, nr_new = 0;
	bool changed = false;

	for (;;) {
		free(buf);
		buf = malloc(len);
		if (!buf)
			return SD_RES_NO_MEM;
		rq.data_length = len;
		if (peer_request(nid, &rq, NULL, buf, &rsp)) {
			ret = SD_RES_EIO;
			goto out_free;
		}
		if (rsp.result != SD_RES_BUFFER_SMALL || len >= DELETED_MAX_WIRE)
			break;
		len *= 4;
	}
	ret = (int)rsp.result;
	if (ret != SD_RES_SUCCESS)
		goto out_free;
	sd_mutex_lock(&del_lock);
	ret = unpack(buf, rsp.data_length, &nr_new, &changed);
	if (!ret && changed)
		ret = save();
	sd_mutex_unlock(&del_lock);
	if (ret) {
		sd_err("cannot take the deleted vdis of the cluster: %s", strerror(-ret));
		ret = ret == -EINVAL ? SD_RES_INVALID_PARMS : SD_RES_EIO;
	} else {
		sd_info("learned %d deleted vdi(s) from the cluster", nr_new);
	}
out_free:
	free(buf);
	return ret;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#pragma GCC diagnostic pop
#endif
