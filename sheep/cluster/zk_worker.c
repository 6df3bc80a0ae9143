/*
 * The zookeeper driver's worker thread: every ZooKeeper call of a member
 * after its join (the design: zookeeper.c; the threads: zk.h). Each round
 * (woken by a watch, a notify(), a completion, or every ZK_TICK_MS) it
 * sends what waits, fetches new queue entries for the main thread, records
 * the leave of members whose znode is gone, publishes its progress,
 * collects the queue if it is the first member, and watches the main
 * thread's tick.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "logger.h"
#include "util.h"
#include "zk.h"

#define ZK_MAX_BATCH 256   /* writes submitted in one round */
#define ZK_MAX_DELETES 1000 /* entries collected in one round */

static pthread_t worker;
static bool is_running;
/* the worker's own */
static uint8_t *buf;
static uint64_t first_member_id = UINT64_MAX; /* of the view it read last */
static uint64_t leave_noticed_ns;
static int64_t published_seq = -1;

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

/* ------------------------------------------------------------------ */
/* sending: this member's versioned writes, pipelined (see zookeeper.c) */

static void out_completed(struct zk_out *o, int rc)
{
	bool is_gone = false, give_up = false;

	lock();
	zk.nr_in_flight--;
	if (rc == ZOK) {
		list_del(&o->node);
		if (!o->is_progress)
			zk.nr_out--;
		free(o);
		zk_stamp_ok();
	} else {
		zk.need_resync = true;
		give_up = ++o->nr_resends > ZK_MAX_RESENDS;
		is_gone = rc == ZNONODE;
		if (rc == ZSESSIONEXPIRED)
			zk.is_expired = true;
	}
	pthread_cond_broadcast(&zk.cond);
	unlock();
	if (is_gone)
		zk_post_evicted("this member's znode is gone");
	else if (give_up)
		zk_post_evicted("a write failed %d times: %s", ZK_MAX_RESENDS, zerror(rc));
}

static void multi_done(int rc, const void *data)
{
	struct zk_out *o = (struct zk_out *)data;

	out_completed(o, rc == ZOK ? rc : zk_multi_error(rc, o->results, 2));
}

static void set_done(int rc, const struct Stat *stat, const void *data)
{
	out_completed((struct zk_out *)data, rc);
}

static void submit(struct zk_out *o)
{
	int rc;

	o->mdata.magic = ZK_MAGIC;
	o->mdata.flags = ZK_MEMBER_JOINED;
	o->mdata.progress = (uint64_t)__atomic_load_n(&zk.delivered_seq, __ATOMIC_RELAXED);
	o->mdata.node = zk.self_node;
	if (o->is_progress) {
		published_seq = (int64_t)o->mdata.progress;
		rc = zoo_aset(zk.zh, zk.self_path, (const char *)&o->mdata, sizeof(o->mdata),
			      o->version, set_done, o);
	} else {
		zoo_set_op_init(&o->ops[0], zk.self_path, (const char *)&o->mdata,
				sizeof(o->mdata), o->version, &o->stat);
		zoo_create_op_init(&o->ops[1], zk.entry_prefix, (const char *)o->rec, (int)o->len,
				   &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, o->created,
				   sizeof(o->created));
		rc = zoo_amulti(zk.zh, 2, o->ops, o->results, multi_done, o);
	}
	if (rc != ZOK)
		out_completed(o, rc); /* not queued: no completion comes */
}

/* no write in flight: which of the failed ones did the server apply? */
static void resync(void)
{
	struct zk_out *o, *tmp;
	struct Stat st;
	int rc = zoo_exists(zk.zh, zk.self_path, 0, &st);

	if (rc == ZNONODE) {
		zk_post_evicted("this member's znode is gone");
		return;
	}
	if (rc != ZOK)
		return;
	zk_stamp_ok();
	lock();
	if (zk.nr_in_flight == 0) {
		list_for_each_entry_safe(o, tmp, &zk.out, node) {
			if (!o->is_submitted)
				break;
			if (o->version < st.version) {
				list_del(&o->node);
				if (!o->is_progress)
					zk.nr_out--;
				free(o);
			} else {
				o->is_submitted = false;
			}
		}
		zk.member_version = st.version;
		zk.need_resync = false;
	}
	unlock();
}

static void send_out(void)
{
	struct zk_out *batch[ZK_MAX_BATCH], *o;
	int n = 0;

	lock();
	if (zk.need_resync) {
		if (zk.nr_in_flight) {
			unlock();
			return;
		}
		unlock();
		resync();
		lock();
		if (zk.need_resync) {
			unlock();
			return;
		}
	}
	list_for_each_entry(o, &zk.out, node) {
		if (o->is_submitted)
			continue;
		if (n == ZK_MAX_BATCH)
			break;
		o->is_submitted = true;
		o->version = zk.member_version++;
		zk.nr_in_flight++;
		batch[n++] = o;
	}
	unlock();
	for (int i = 0; i < n; i++)
		submit(batch[i]);
}

static void queue_progress(void)
{
	int64_t d = __atomic_load_n(&zk.delivered_seq, __ATOMIC_RELAXED);
	struct zk_out *o;

	if (d == published_seq)
		return;
	lock();
	list_for_each_entry(o, &zk.out, node) {
		if (o->is_progress) {
			unlock();
			return;
		}
	}
	o = calloc(1, sizeof(*o));
	if (o) {
		o->is_progress = true;
		list_add_tail(&o->node, &zk.out);
	}
	unlock();
}

/* ------------------------------------------------------------------ */
/* receiving */

struct named_seq {
	int64_t seq;
	const char *name;
};

static int cmp_seq(const void *a, const void *b)
{
	const struct named_seq *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* hand one entry to the main thread; false when the data is malformed */
static bool push_ready(int64_t seq, int len)
{
	struct zk_decoded d;
	struct zk_ready *r;

	if (len < 0 || zk_decode_rec(buf, (size_t)len, false, &d)) {
		sd_err("malformed queue entry %" PRId64 " (%d bytes) skipped", seq, len);
		return false;
	}
	r = malloc(sizeof(*r) + (size_t)len);
	if (!r)
		return false;
	r->seq = seq;
	r->len = (size_t)len;
	memcpy(r->data, buf, (size_t)len);
	lock();
	list_add_tail(&r->node, &zk.ready);
	zk.ready_bytes += (size_t)len;
	unlock();
	return true;
}

/* read the entries after the last fetched one, in order, into zk.ready */
static void fetch_queue(void)
{
	struct String_vector names = { 0 };
	struct named_seq *v;
	char path[ZK_PATH_LEN];
	int n = 0, nr_pushed = 0, rc;
	uint64_t one = 1;

	rc = zoo_get_children(zk.zh, zk.queue_path, 1, &names);
	if (rc != ZOK)
		return;
	zk_stamp_ok();
	v = calloc((size_t)names.count + 1, sizeof(*v));
	for (int i = 0; v && i < names.count; i++) {
		int64_t seq = zk_seq_of(names.data[i]);

		if (seq > zk.fetched_seq)
			v[n++] = (struct named_seq){ seq, names.data[i] };
	}
	if (v)
		qsort(v, (size_t)n, sizeof(*v), cmp_seq);
	for (int i = 0; v && i < n; i++) {
		int len = ZK_BUF_LEN;
		size_t backlog;

		lock();
		backlog = zk.ready_bytes;
		unlock();
		if (backlog > ZK_MAX_READY)
			break; /* the next round goes on */
		snprintf(path, sizeof(path), "%s/%s", zk.queue_path, v[i].name);
		rc = zoo_get(zk.zh, path, 0, (char *)buf, &len, NULL);
		if (rc == ZNONODE) {
			zk_post_evicted("queue entry %" PRId64 " was collected before this member "
					"read it",
					v[i].seq);
			break;
		}
		if (rc != ZOK)
			break;
		nr_pushed += push_ready(v[i].seq, len);
		zk.fetched_seq = v[i].seq;
	}
	free(v);
	deallocate_String_vector(&names);
	if (nr_pushed && write(zk.ready_fd, &one, sizeof(one)) < 0)
		sd_err("eventfd: %m");
}

/* record the LEAVE of the members of the view whose znode is gone */
static void leave_duty(uint64_t now)
{
	static struct zk_member list[SD_MAX_NODES];
	uint64_t alive[SD_MAX_NODES * 2], gone[SD_MAX_NODES], first = UINT64_MAX;
	int nr, nr_alive, nr_gone = 0, rc;
	int32_t version;

	nr_alive = zk_alive_ids(alive, SD_MAX_NODES * 2, true);
	if (nr_alive < 0 || zk_read_view(list, &nr, &version) != ZOK)
		return;
	if (zk_find(list, nr, zk.self_id) < 0)
		return; /* this member's own LEAVE is in the queue */
	first_member_id = list[0].id;
	for (int i = 0; i < nr; i++) {
		bool is_alive = false;

		for (int j = 0; j < nr_alive && !is_alive; j++)
			is_alive = alive[j] == list[i].id;
		if (!is_alive)
			gone[nr_gone++] = list[i].id;
		else if (first == UINT64_MAX)
			first = list[i].id;
	}
	if (nr_gone == 0) {
		leave_noticed_ns = 0;
		return;
	}
	for (int i = 0; i < nr_gone; i++) {
		if (gone[i] == zk.self_id) {
			zk_post_evicted("this member's znode is gone");
			return;
		}
	}
	if (!leave_noticed_ns)
		leave_noticed_ns = now;
	if (first != zk.self_id && now - leave_noticed_ns < ZK_LEAVE_BACKUP_MS * 1000000ULL)
		return;
	rc = zk_commit_view(list, nr, version, gone, nr_gone, NULL, NULL, 0, NULL);
	if (rc == ZOK) {
		sd_info("recorded the leave of %d member(s), first %" PRIu64, nr_gone, gone[0]);
		leave_noticed_ns = 0;
	} else if (rc != ZBADVERSION) {
		sd_warn("cannot record a leave: %s", zerror(rc));
	}
}

static void noop_done(int rc, const void *data)
{
}

/* the first member deletes the entries that every member has delivered */
static void collect(void)
{
	struct String_vector names = { 0 };
	struct zk_member_data md;
	char path[ZK_PATH_LEN];
	int64_t min = INT64_MAX;
	int nr_deleted = 0;

	if (first_member_id != zk.self_id ||
	    zoo_get_children(zk.zh, zk.members_path, 0, &names) != ZOK)
		return;
	for (int i = 0; i < names.count; i++) {
		int len = sizeof(md);

		snprintf(path, sizeof(path), "%s/%s", zk.members_path, names.data[i]);
		if (zoo_get(zk.zh, path, 0, (char *)&md, &len, NULL) != ZOK ||
		    len != sizeof(md) || md.magic != ZK_MAGIC || !(md.flags & ZK_MEMBER_JOINED)) {
			min = -1; /* a joiner, or gone meanwhile: next round */
			break;
		}
		if ((int64_t)md.progress < min)
			min = (int64_t)md.progress;
	}
	deallocate_String_vector(&names);
	if (min < 0 || zoo_get_children(zk.zh, zk.queue_path, 0, &names) != ZOK)
		return;
	for (int i = 0; i < names.count && nr_deleted < ZK_MAX_DELETES; i++) {
		int64_t seq = zk_seq_of(names.data[i]);

		if (seq < 0 || seq > min)
			continue;
		snprintf(path, sizeof(path), "%s/%s", zk.queue_path, names.data[i]);
		if (zoo_adelete(zk.zh, path, -1, noop_done, NULL) == ZOK)
			nr_deleted++;
	}
	deallocate_String_vector(&names);
	if (nr_deleted)
		sd_debug("collected %d queue entries up to %" PRId64, nr_deleted, min);
}

/* main has not ticked for the heartbeat timeout: it hangs; leave the cluster */
static void watch_main(uint64_t now)
{
	uint64_t alive = __atomic_load_n(&zk.main_alive_ns, __ATOMIC_RELAXED);

	if (now <= alive || now - alive <= (uint64_t)cdrv_heartbeat_timeout_ms() * 1000000)
		return;
	sd_err("the main thread has not run for %" PRIu64 " ms: this member leaves the cluster",
	       (now - alive) / 1000000);
	zoo_delete(zk.zh, zk.self_path, -1);
	zk_post_evicted("the main thread stalled for longer than the heartbeat timeout");
}

/* true when the worker has something to do now (zk.lock held) */
static bool has_work(void)
{
	struct zk_out *o;

	if (zk.stop || zk.wake_queue || zk.wake_members)
		return true;
	if (!zk.is_connected || zk.is_evict_posted)
		return false;
	if (zk.need_resync)
		return zk.nr_in_flight == 0;
	list_for_each_entry(o, &zk.out, node)
		if (!o->is_submitted)
			return true;
	return false;
}

static void wait_work(uint64_t until_ns)
{
	struct timespec ts = { (time_t)(until_ns / 1000000000), (long)(until_ns % 1000000000) };

	while (!has_work() && sd_now_ns() < until_ns)
		pthread_cond_timedwait(&zk.cond, &zk.lock, &ts);
}

static void *zk_worker(void *arg)
{
	uint64_t next_poll = 0, next_progress = 0, next_gc = 0;

	lock();
	while (!zk.stop) {
		bool wake_queue, wake_members, is_connected, is_expired, is_out;
		uint64_t now;

		wait_work(next_poll);
		wake_queue = zk.wake_queue;
		wake_members = zk.wake_members;
		zk.wake_queue = zk.wake_members = false;
		is_connected = zk.is_connected;
		is_expired = zk.is_expired;
		is_out = zk.is_evict_posted || zk.stop;
		unlock();
		now = sd_now_ns();
		if (is_expired)
			zk_post_evicted("the ensemble expired this member's session");
		else if (!is_out && is_connected)
			watch_main(now);
		if (!is_out && is_connected && !is_expired) {
			send_out();
			if (wake_queue || now >= next_poll)
				fetch_queue();
			if (wake_members || now >= next_poll)
				leave_duty(now);
			if (now >= next_progress) {
				queue_progress();
				next_progress = now + ZK_PROGRESS_MS * 1000000ULL;
			}
			if (now >= next_gc) {
				collect();
				next_gc = now + ZK_GC_MS * 1000000ULL;
			}
		}
		if (now >= next_poll)
			next_poll = now + ZK_TICK_MS * 1000000ULL;
		lock();
	}
	unlock();
	return NULL;
}

int zk_worker_start(void)
{
	int ret;

	if (!buf)
		buf = malloc(ZK_BUF_LEN);
	if (!buf)
		return -ENOMEM;
	first_member_id = UINT64_MAX;
	leave_noticed_ns = 0;
	published_seq = -1;
	ret = pthread_create(&worker, NULL, zk_worker, NULL);
	if (ret)
		return -ret;
	is_running = true;
	return 0;
}

void zk_worker_stop(void)
{
	if (!is_running)
		return;
	lock();
	zk.stop = true;
	pthread_cond_broadcast(&zk.cond);
	unlock();
	pthread_join(worker, NULL);
	is_running = false;
}
