/*
 * The zookeeper driver's shared state and the calls that both its halves
 * make (zk.h): the session's watcher, the hand-over of an eviction to the
 * main thread, and the synchronous reads and the view commit that the
 * join (main thread) and the worker both use. The design: zookeeper.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logger.h"
#include "util.h"
#include "zk.h"

struct zk_shared zk = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ready_fd = -1,
};

static void lock(void)
{
	if (pthread_mutex_lock(&zk.lock))
		abort();
}

static void unlock(void)
{
	if (pthread_mutex_unlock(&zk.lock))
		abort();
}

void zk_stamp_ok(void)
{
	__atomic_store_n(&zk.last_ok_ns, sd_now_ns(), __ATOMIC_RELAXED);
}

void zk_post_evicted(const char *fmt, ...)
{
	struct zk_ready *r = malloc(sizeof(*r) + 256);
	uint64_t one = 1;
	va_list ap;

	if (!r)
		abort(); /* the main thread would go on serving a view the others left */
	va_start(ap, fmt);
	r->len = (size_t)vsnprintf((char *)r->data, 256, fmt, ap);
	va_end(ap);
	r->len = r->len > 255 ? 255 : r->len;
	r->seq = -1;
	lock();
	if (zk.is_evict_posted) {
		unlock();
		free(r);
		return;
	}
	zk.is_evict_posted = true;
	list_add_tail(&r->node, &zk.ready);
	unlock();
	if (write(zk.ready_fd, &one, sizeof(one)) < 0)
		sd_err("eventfd: %m");
}

void zk_log(const char *message)
{
	sd_info("zookeeper client: %s", message);
}

void zk_watcher(zhandle_t *h, int type, int zstate, const char *path, void *ctx)
{
	lock();
	if ((uintptr_t)ctx != zk.gen) {
		unlock(); /* a handle the worker replaced */
		return;
	}
	if (type == ZOO_SESSION_EVENT) {
		if (zstate == ZOO_CONNECTED_STATE) {
			zk.is_connected = true;
			zk_stamp_ok();
		} else if (zstate == ZOO_EXPIRED_SESSION_STATE || zstate == ZOO_AUTH_FAILED_STATE) {
			zk.is_connected = false;
			zk.is_expired = true;
		} else {
			zk.is_connected = false;
		}
	} else if (type == ZOO_CHILD_EVENT && path) {
		if (!strcmp(path, zk.queue_path))
			zk.wake_queue = true;
		else if (!strcmp(path, zk.members_path))
			zk.wake_members = true;
	}
	pthread_cond_broadcast(&zk.cond);
	unlock();
}

int zk_read_view(struct zk_member *list, int *nr, int32_t *version)
{
	uint8_t vbuf[sizeof(struct zk_rec) + SD_MAX_NODES * sizeof(struct zk_member)];
	int len = sizeof(vbuf), rc;
	struct zk_decoded d;
	struct Stat st;

	rc = zoo_get(zk.zh, zk.view_path, 0, (char *)vbuf, &len, &st);
	if (rc != ZOK)
		return rc;
	zk_stamp_ok();
	if (len < 0 || zk_decode_rec(vbuf, (size_t)len, true, &d)) {
		sd_err("%s is malformed (%d bytes)", zk.view_path, len);
		return ZMARSHALLINGERROR;
	}
	zk_copy_list(list, &d);
	*nr = d.nr;
	*version = st.version;
	return ZOK;
}

int zk_alive_ids(uint64_t *ids, int max, bool watch)
{
	struct String_vector names = { 0 };
	int n = 0, rc;

	rc = zoo_get_children(zk.zh, zk.members_path, watch, &names);
	if (rc != ZOK)
		return -1;
	zk_stamp_ok();
	for (int i = 0; i < names.count && n < max; i++) {
		int64_t seq = zk_seq_of(names.data[i]);

		if (seq >= 0)
			ids[n++] = (uint64_t)seq;
	}
	deallocate_String_vector(&names);
	return n;
}

int zk_multi_error(int rc, const zoo_op_result_t *results, int nr)
{
	for (int i = 0; i < nr; i++)
		if (results[i].err != ZOK && results[i].err != ZRUNTIMEINCONSISTENCY)
			return results[i].err;
	return rc;
}

int zk_commit_view(const struct zk_member *list, int nr, int32_t version, const uint64_t *gone,
		   int nr_gone, const struct zk_member *joiner, const zoo_op_t *extra, int nr_extra,
		   int64_t *join_seq)
{
	const size_t rec_len = sizeof(struct zk_rec) + SD_MAX_NODES * sizeof(struct zk_member);
	int nr_ops = nr_extra + 1 + nr_gone + (joiner ? 1 : 0), k = nr_extra, n = nr, rc;
	zoo_op_t *ops = calloc((size_t)nr_ops, sizeof(*ops));
	zoo_op_result_t *results = calloc((size_t)nr_ops, sizeof(*results));
	uint8_t *recs = malloc(rec_len * (size_t)(nr_gone + 2));
	struct zk_member cur[SD_MAX_NODES];
	char created[ZK_PATH_LEN] = "";
	size_t len;

	rc = ZSYSTEMERROR;
	if (!ops || !results || !recs || nr > SD_MAX_NODES || (joiner && nr >= SD_MAX_NODES))
		goto out;
	if (nr_extra) /* extra may be NULL then, and memcpy's arguments never are */
		memcpy(ops, extra, (size_t)nr_extra * sizeof(*ops));
	memcpy(cur, list, (size_t)nr * sizeof(*cur));
	for (int i = 0; i < nr_gone; i++) {
		int j = zk_find(cur, n, gone[i]);
		uint8_t *r = recs + rec_len * (size_t)(i + 1);

		if (j < 0)
			continue;
		n--;
		memmove(&cur[j], &cur[j + 1], (size_t)(n - j) * sizeof(cur[0]));
		len = zk_encode_rec(r, rec_len, ZK_REC_LEAVE, gone[i], cur, n, NULL, 0);
		zoo_create_op_init(&ops[++k], zk.entry_prefix, (const char *)r, (int)len,
				   &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, NULL, 0);
	}
	if (joiner) {
		uint8_t *r = recs + rec_len * (size_t)(nr_gone + 1);

		cur[n++] = *joiner;
		len = zk_encode_rec(r, rec_len, ZK_REC_JOIN, joiner->id, cur, n, NULL, 0);
		zoo_create_op_init(&ops[++k], zk.entry_prefix, (const char *)r, (int)len,
				   &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, created, sizeof(created));
	}
	len = zk_encode_view(recs, rec_len, cur, n);
	zoo_set_op_init(&ops[nr_extra], zk.view_path, (const char *)recs, (int)len, version, NULL);
	nr_ops = k + 1;
	rc = zoo_multi(zk.zh, nr_ops, ops, results);
	if (rc == ZOK) {
		zk_stamp_ok();
		if (join_seq)
			*join_seq = zk_seq_of(created);
	} else {
		rc = zk_multi_error(rc, results, nr_ops);
	}
out:
	free(ops);
	free(results);
	free(recs);
	return rc;
}

