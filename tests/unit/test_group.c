/*
 * Unit tests of sheep/group.c's epoch logic, through its API and its files
 * (group_disk.c) in a directory of the test's own: a format writes epoch 1
 * and refuses a second one or too many copies; a restart reads the stored
 * history (newest first); a member's history is checked against this
 * node's (newer, older, forked, another cluster's, logs that cannot be
 * ones) both ways, joining and waiting; a joining node adopts a member's
 * history only when it is consistent and the member's newest epoch has the
 * nodes this node sees. Membership comes from the cluster driver, which no
 * test here drives: this node sees no member, so the member's newest epoch
 * that it may adopt has none either.
 */
#include <check.h>
#include <pthread.h>
#include <unistd.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logger.h"
#include "internal_proto.h"
#include "cluster/cluster.h"
#include "group.h"
#include "group_disk.h"

/* ---- the cluster driver's side, which these tests do not drive ---- */
uint64_t cdrv_late_at = UINT64_MAX;

void cdrv_catch_up_late(uint64_t now)
{
}

bool cdrv_is_quorate(void)
{
	return true;
}

unsigned int cdrv_heartbeat_timeout_ms(void)
{
	return 5000;
}

/* ---- a directory of the test's own ---- */
#define CTIME 1234
/* DIR/config, as group.c stores the format ("SDOGCONF") */
struct disk_config {
	uint64_t magic;
	uint64_t ctime;
	uint8_t copies;
	uint8_t block_size_shift;
	uint8_t copy_policy;
	uint8_t pad[5];
};

static char dir[64];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_group.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct sd_node node(int i)
{
	struct sd_node n = { .zone = (uint32_t)i, .nr_vnodes = 64 };

	n.nid.addr[15] = 1; /* ::1 */
	n.nid.port = (uint16_t)(7000 + i);
	return n;
}

/* epoch e's log: the nodes named by ids (0-terminated) */
static void epoch_log(struct sd_epoch_log *log, uint32_t e, const int *ids)
{
	memset(log, 0, sizeof(*log));
	log->epoch = e;
	log->ctime = CTIME + e;
	for (; *ids; ids++)
		log->nodes[log->nr_nodes++] = node(*ids);
}

/* the history 1: {1}, 2: {1 2}, 3: {1 2 3} stored in dir, then group_init */
static const int h1[] = { 1, 0 }, h2[] = { 1, 2, 0 }, h3[] = { 1, 2, 3, 0 };

static void stored_history(void)
{
	struct disk_config cfg = { .magic = UINT64_C(0x53444f47434f4e46),
				   .ctime = CTIME,
				   .copies = 2,
				   .block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT };
	const int *h[] = { h1, h2, h3 };
	struct sd_epoch_log log;
	char path[4200];

	gd_init(dir);
	gd_path(path, sizeof(path), "epoch");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	for (uint32_t e = 1; e <= 3; e++) {
		epoch_log(&log, e, h[e - 1]);
		ck_assert_int_eq(gd_write_epoch_log(e, log.nodes, (int)log.nr_nodes), 0);
	}
	ck_assert_int_eq(group_write_file("config", &cfg, sizeof(cfg)), 0);
	ck_assert_int_eq(group_init(dir), 0);
}

/* a member's STAT_CLUSTER answer of the cluster CTIME at epoch e */
static struct sd_rsp answer(uint32_t status, uint32_t e)
{
	struct sd_rsp rsp = { 0 };

	rsp.cinfo.status = status;
	rsp.cinfo.epoch = e;
	rsp.cinfo.ctime = CTIME;
	rsp.cinfo.copies = 2;
	rsp.cinfo.block_size_shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	return rsp;
}

/* a member's history: epochs top..1, each from ids[top - e] */
static int history(struct sd_epoch_log *logs, uint32_t top, const int *const *ids)
{
	for (uint32_t e = top; e >= 1; e--)
		epoch_log(&logs[top - e], e, ids[top - e]);
	return (int)top;
}

START_TEST(test_format)
{
	struct sd_epoch_log logs[4];
	struct cluster_state st;

	ck_assert_int_eq(group_init(dir), 0);
	ck_assert(!group_is_formatted());
	ck_assert_uint_eq(group_epoch(), 0);
	ck_assert_int_eq(group_read_epoch_logs(logs, 4), 0);
	ck_assert_int_eq(group_format(CTIME, 3, 0, 0, 2), -ERANGE);
	ck_assert_int_eq(group_format(CTIME, SD_MAX_COPIES + 1, 0, 0, SD_MAX_COPIES + 1), -EINVAL);
	ck_assert_int_eq(group_format(CTIME, 1, 0, SD_MAX_BLOCK_SIZE_SHIFT + 1, 2), -EINVAL);
	ck_assert(!group_is_formatted());
	/* copies 0: the default, three at most, no more than the nodes */
	ck_assert_int_eq(group_format(CTIME, 0, 0, 0, 2), 0);
	ck_assert(group_is_formatted());
	ck_assert_uint_eq(group_copies(), 2);
	ck_assert_uint_eq(group_epoch(), 1);
	group_get_state(&st);
	ck_assert_uint_eq(st.ctime, CTIME);
	ck_assert_uint_eq(st.block_size_shift, SD_DEFAULT_BLOCK_SIZE_SHIFT);
	ck_assert_int_eq(group_read_epoch_logs(logs, 4), 1);
	ck_assert_uint_eq(logs[0].epoch, 1);
	ck_assert_int_eq(group_format(CTIME + 1, 1, 0, 0, 2), -EEXIST);
	ck_assert_uint_eq(group_copies(), 2);
}
END_TEST

/*
 * An erasure-coded format (cluster format -c D:P): its copies are D + P,
 * which must be no more than the nodes; a scheme that names no code, or
 * copies that are not its D + P, are refused; the scheme is stored with
 * the format and a member's answer that contradicts itself is refused.
 */
START_TEST(test_format_erasure)
{
	struct disk_config cfg;
	struct sd_rsp rsp = answer(SD_STATUS_OK, 1);
	struct sd_epoch_log logs[1];
	char path[4200];
	FILE *f;

	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_format(CTIME, 0, 0x22 /* 4:2 */, 0, 5), -ERANGE);
	ck_assert_int_eq(group_format(CTIME, 0, 0x31 /* 6:1 */, 0, 8), -EINVAL);
	ck_assert_int_eq(group_format(CTIME, 3, 0x12 /* 2:2 */, 0, 8), -EINVAL);
	ck_assert(!group_is_formatted());
	/* a member's state: 2:2 with 2 copies cannot be */
	epoch_log(&logs[0], 1, (const int[]){ 0 });
	rsp.cinfo.copy_policy = 0x12;
	ck_assert_int_eq(group_adopt(&rsp, logs, 1), -EINVAL);
	ck_assert(!group_is_formatted());
	ck_assert_int_eq(group_format(CTIME, 0, 0x12, 0, 4), 0);
	ck_assert_uint_eq(group_copies(), 4);
	ck_assert_uint_eq(group_copy_policy(), 0x12);
	gd_path(path, sizeof(path), "config");
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(&cfg, sizeof(cfg), 1, f), 1);
	fclose(f);
	ck_assert_uint_eq(cfg.copies, 4);
	ck_assert_uint_eq(cfg.copy_policy, 0x12);
}
END_TEST

/* the config's copies, as the next start reads them */
static uint8_t config_copies(void)
{
	struct disk_config cfg;
	char path[4200];
	FILE *f;

	gd_path(path, sizeof(path), "config");
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(&cfg, sizeof(cfg), 1, f), 1);
	fclose(f);
	return cfg.copies;
}

/*
 * ALTER_CLUSTER_COPY: the default copies change, in memory and in the
 * config, within the storing nodes; refused before the format, out of
 * bounds, and on an erasure-coded default (below); a node that rejoins a
 * cluster whose default changed while it was away takes the new one into
 * its config (test_adopt_new_default).
 */
START_TEST(test_set_copies)
{
	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_set_copies(2, 3), -ENOENT);
	ck_assert_int_eq(group_format(CTIME, 2, 0, 0, 3), 0);
	ck_assert_int_eq(group_set_copies(3, 3), 0);
	ck_assert_uint_eq(group_copies(), 3);
	ck_assert_uint_eq(config_copies(), 3);
	ck_assert_int_eq(group_set_copies(4, 3), -ERANGE);
	ck_assert_int_eq(group_set_copies(0, 3), -EINVAL);
	ck_assert_int_eq(group_set_copies(SD_MAX_COPIES + 1, 64), -EINVAL);
	ck_assert_uint_eq(group_copies(), 3);
	ck_assert_uint_eq(config_copies(), 3);
}
END_TEST

/* a node formatted with 2 copies, away while the default became 3, rejoins at epoch 4 */
START_TEST(test_adopt_new_default)
{
	static const int none[] = { 0 };
	const int *ids[] = { none, h3, h2, h1 };
	struct sd_epoch_log logs[4];
	struct sd_rsp rsp = answer(SD_STATUS_OK, 4);

	stored_history();
	ck_assert_uint_eq(group_copies(), 2);
	rsp.cinfo.copies = 3;
	ck_assert_int_eq(group_adopt(&rsp, logs, history(logs, 4, ids)), 0);
	ck_assert_uint_eq(group_copies(), 3);
	ck_assert_uint_eq(config_copies(), 3);
}
END_TEST

/* an erasure-coded default: its copies are its D + P, not alterable */
START_TEST(test_set_copies_erasure)
{
	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_format(CTIME, 0, 0x11, 0, 3), 0);
	ck_assert_int_eq(group_set_copies(2, 3), -EINVAL);
	ck_assert_uint_eq(group_copies(), 3);
}
END_TEST

START_TEST(test_restart_reads_history)
{
	struct sd_epoch_log logs[8];

	stored_history();
	ck_assert(group_is_formatted());
	ck_assert_uint_eq(group_epoch(), 3);
	ck_assert_uint_eq(group_copies(), 2);
	ck_assert(!group_started_clean());
	ck_assert_int_eq(group_read_epoch_logs(logs, 8), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(logs[i].epoch, 3 - i);
		ck_assert_uint_eq(logs[i].nr_nodes, 3 - i);
		ck_assert_uint_eq(logs[i].nodes[0].nid.port, 7001);
	}
	ck_assert_uint_eq(logs[0].nodes[2].nid.port, 7003);
	/* fewer than stored: the newest */
	ck_assert_int_eq(group_read_epoch_logs(logs, 2), 2);
	ck_assert_uint_eq(logs[1].epoch, 2);
}
END_TEST

START_TEST(test_a_config_that_is_none)
{
	uint64_t junk[3] = { 1, 2, 3 };

	gd_init(dir);
	ck_assert_int_eq(group_write_file("config", junk, sizeof(junk)), 0);
	ck_assert_int_eq(group_init(dir), -EINVAL);
	ck_assert(!group_is_formatted());
}
END_TEST

START_TEST(test_check_history)
{
	static const int h4[] = { 1, 2, 3, 4, 0 }, fork3[] = { 1, 2, 4, 0 },
			 reorder3[] = { 3, 1, 2, 0 };
	const int *same[] = { h3, h2, h1 }, *newer[] = { h4, h3, h2, h1 }, *older[] = { h2, h1 },
		  *forked[] = { fork3, h2, h1 }, *reordered[] = { reorder3, h2, h1 };
	struct sd_epoch_log logs[4];
	struct sd_rsp rsp = answer(SD_STATUS_OK, 3);
	int n;

	stored_history();
	n = history(logs, 3, same);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), 0);
	/* the same nodes in another order are the same epoch */
	n = history(logs, 3, reordered);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
	/* one node in another zone is another epoch: forked */
	n = history(logs, 3, same);
	logs[0].nodes[1].zone = 9;
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), -ESTALE);
	/* an epoch of the same number with other nodes: forked, both ways */
	n = history(logs, 3, forked);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), -ESTALE);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), -ESTALE);
	/* the member's is newer: a joiner takes it, a waiting node must not lead */
	rsp = answer(SD_STATUS_OK, 4);
	n = history(logs, 4, newer);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), -ESTALE);
	/* this node's is newer: a joiner would lose acknowledged writes */
	rsp = answer(SD_STATUS_OK, 2);
	n = history(logs, 2, older);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), -ESTALE);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), 0);
	/* a member that waits too is checked like a serving one */
	rsp = answer(SD_STATUS_WAIT_FOR_JOIN, 2);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), -ESTALE);
}
END_TEST

START_TEST(test_check_history_not_ours)
{
	const int *same[] = { h3, h2, h1 }, *forked[] = { h1, h1, h1 };
	struct sd_epoch_log logs[4];
	struct sd_rsp rsp = answer(SD_STATUS_OK, 3);
	int n;

	/* logs that cannot be ones */
	stored_history();
	n = history(logs, 3, same);
	logs[1].epoch = 0;
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), -EINVAL);
	n = history(logs, 3, same);
	logs[2].nr_nodes = SD_MAX_NODES + 1;
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), -EINVAL);
	/* another cluster's, or an unformatted one's: not compared (adopt refuses it) */
	n = history(logs, 3, forked);
	rsp.cinfo.ctime = CTIME + 1;
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
	rsp = answer(SD_STATUS_WAIT_FOR_FORMAT, 0);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
}
END_TEST

START_TEST(test_check_history_unformatted)
{
	const int *forked[] = { h1, h1, h1 };
	struct sd_epoch_log logs[4];
	struct sd_rsp rsp = answer(SD_STATUS_OK, 3);
	int n = history(logs, 3, forked);

	/* nothing stored here: nothing to contradict */
	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, true), 0);
	ck_assert_int_eq(group_check_history(&rsp, logs, n, false), 0);
}
END_TEST

START_TEST(test_adopt)
{
	static const int none[] = { 0 };
	const int *members[] = { none, h2, h1 }, *other[] = { h1, h1, h1 };
	struct sd_epoch_log logs[4], back[4];
	struct sd_rsp rsp;
	int n;

	ck_assert_int_eq(group_init(dir), 0);
	/* a member that waits for its own nodes answers nothing yet */
	rsp = answer(SD_STATUS_WAIT_FOR_JOIN, 3);
	ck_assert_int_eq(group_adopt(&rsp, logs, 0), -EAGAIN);
	/* a format this daemon cannot serve, logs that cannot be ones */
	n = history(logs, 3, members);
	rsp = answer(SD_STATUS_OK, 3);
	rsp.cinfo.copies = 0;
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -EINVAL);
	rsp = answer(SD_STATUS_OK, 3);
	logs[2].epoch = 0;
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -EINVAL);
	/* the member's newest epoch is not what this node sees (yet) */
	n = history(logs, 3, other);
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -EAGAIN);
	n = history(logs, 3, members);
	rsp = answer(SD_STATUS_OK, 4);
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -EAGAIN);
	ck_assert(!group_is_formatted());
	/* consistent: taken, and stored */
	rsp = answer(SD_STATUS_OK, 3);
	ck_assert_int_eq(group_adopt(&rsp, logs, n), 0);
	ck_assert(group_is_formatted());
	ck_assert(!group_is_joining());
	ck_assert_uint_eq(group_epoch(), 3);
	ck_assert_uint_eq(group_copies(), 2);
	ck_assert_int_eq(group_read_epoch_logs(back, 4), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(back[i].epoch, logs[i].epoch);
		ck_assert_uint_eq(back[i].nr_nodes, logs[i].nr_nodes);
	}
	/* now formatted: an unformatted cluster's answer is another cluster's */
	rsp = answer(SD_STATUS_WAIT_FOR_FORMAT, 0);
	ck_assert_int_eq(group_adopt(&rsp, logs, 0), -EINVAL);
}
END_TEST

/* the weights: compared on the nodes both lists have, only their vnodes */
START_TEST(test_same_weights)
{
	struct sd_node a[3] = { node(1), node(2), node(3) }, b[2] = { node(3), node(1) };

	ck_assert(gd_same_weights(a, 3, b, 2));
	ck_assert(gd_same_weights(a, 3, b, 0));
	b[0].nr_vnodes = 65;
	ck_assert(!gd_same_weights(a, 3, b, 2));
	ck_assert(!gd_same_weights(b, 2, a, 3));
	/* the zone is gd_same_nodes' business, not this one's */
	b[0] = node(3);
	b[0].zone = 9;
	ck_assert(gd_same_weights(a, 3, b, 2));
	ck_assert(!gd_same_nodes(a, 2, b, 2));
}
END_TEST

/* SET_VNODES refused before anything is sent, and the count a node keeps for its next start */
START_TEST(test_vnodes_refused_and_kept)
{
	struct sd_vnodes_entry e = { .nid = node(1).nid, .nr_vnodes = 200 };
	char path[4200];
	uint32_t v;

	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_set_vnodes(&e, 1), -EAGAIN); /* not formatted */
	ck_assert_int_eq(group_set_vnodes(&e, 0), -EINVAL);
	gd_path(path, sizeof(path), "epoch");
	ck_assert_int_eq(rmdir(path), 0); /* stored_history makes it */
	stored_history();
	ck_assert_int_eq(group_set_vnodes(&e, 1), -ENOENT); /* not a member of this node's view */
	e.nr_vnodes = 0;
	ck_assert_int_eq(group_set_vnodes(&e, 1), -EINVAL);
	e.nr_vnodes = SD_MAX_VNODES + 1;
	ck_assert_int_eq(group_set_vnodes(&e, 1), -EINVAL);

	ck_assert_int_eq(group_saved_vnodes(false), 0);
	v = 300;
	ck_assert_int_eq(group_write_file("vnodes", &v, sizeof(v)), 0);
	ck_assert_int_eq(group_saved_vnodes(false), 300);
	v = SD_MAX_VNODES + 1; /* not a count: ignored */
	ck_assert_int_eq(group_write_file("vnodes", &v, sizeof(v)), 0);
	ck_assert_int_eq(group_saved_vnodes(false), 0);
	ck_assert_int_eq(group_saved_vnodes(true), 0);
	gd_path(path, sizeof(path), "vnodes");
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(group_saved_vnodes(true), 0); /* nothing to forget */
}
END_TEST

START_TEST(test_adopt_unformatted_cluster)
{
	struct sd_rsp rsp = answer(SD_STATUS_WAIT_FOR_FORMAT, 0);

	ck_assert_int_eq(group_init(dir), 0);
	ck_assert_int_eq(group_adopt(&rsp, NULL, 0), 0);
	ck_assert(!group_is_formatted());
	ck_assert(!group_is_joining());
	ck_assert_uint_eq(group_epoch(), 0);
}
END_TEST

static void *format_later(void *arg)
{
	(void)arg;
	usleep(20000);
	ck_assert_int_eq(group_format(CTIME, 1, 0, 0, 1), 0);
	return NULL;
}

/* a gateway's retry waits for a newer ring: woken by its publication, else it times out */
START_TEST(test_wait_epoch)
{
	pthread_t t;

	ck_assert_int_eq(group_init(dir), 0);
	ck_assert(!group_wait_epoch(0, 1)); /* no ring yet */
	ck_assert_int_eq(pthread_create(&t, NULL, format_later, NULL), 0);
	ck_assert(group_wait_epoch(0, 10000)); /* epoch 1's ring */
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(group_epoch(), 1);
	ck_assert(group_wait_epoch(0, 0)); /* published already */
	ck_assert(!group_wait_epoch(1, 1));
}
END_TEST

START_TEST(test_adopt_refused_when_formatted)
{
	static const int none[] = { 0 };
	const int *older[] = { none, h1 }, *newer[] = { none, h3, h2, h1 };
	struct sd_epoch_log logs[4];
	struct sd_rsp rsp = answer(SD_STATUS_OK, 4);
	int n;

	stored_history();
	/* another cluster (another format time) */
	n = history(logs, 4, newer);
	rsp.cinfo.ctime = CTIME + 1;
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -EINVAL);
	ck_assert_uint_eq(group_epoch(), 3);
	/* this node's history is the newer */
	rsp = answer(SD_STATUS_OK, 2);
	n = history(logs, 2, older);
	ck_assert_int_eq(group_adopt(&rsp, logs, n), -ESTALE);
	ck_assert_uint_eq(group_epoch(), 3);
	/* the member's is newer and holds this node's alike: taken */
	rsp = answer(SD_STATUS_OK, 4);
	n = history(logs, 4, newer);
	ck_assert_int_eq(group_adopt(&rsp, logs, n), 0);
	ck_assert_uint_eq(group_epoch(), 4);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("group");
	TCase *tc = tcase_create("epochs");
	SRunner *sr;
	int nr_failed;

	sd_log_init(NULL, SDOG_EMERG, "test_group");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_format_erasure);
	tcase_add_test(tc, test_set_copies);
	tcase_add_test(tc, test_set_copies_erasure);
	tcase_add_test(tc, test_adopt_new_default);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_wait_epoch);
	tcase_add_test(tc, test_restart_reads_history);
	tcase_add_test(tc, test_a_config_that_is_none);
	tcase_add_test(tc, test_check_history);
	tcase_add_test(tc, test_check_history_not_ours);
	tcase_add_test(tc, test_check_history_unformatted);
	tcase_add_test(tc, test_adopt);
	tcase_add_test(tc, test_same_weights);
	tcase_add_test(tc, test_vnodes_refused_and_kept);
	tcase_add_test(tc, test_adopt_unformatted_cluster);
	tcase_add_test(tc, test_adopt_refused_when_formatted);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
