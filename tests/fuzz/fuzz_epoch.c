/*
 * The cluster state's parsers (sheep/group_format.c): DIR/config and the epoch
 * files DIR/epoch/NNNNNNNN read at start-up (group_init) and served to
 * STAT_CLUSTER (group_read_epoch_logs), and the epoch history a joining
 * node adopts from a member's STAT_CLUSTER reply (group_adopt, called by
 * recovery.c with what the member sent).
 *
 * group.c is compiled into this file to start every input from a node that
 * knows nothing (its current ring is static); the rest of the daemon links
 * as it is (sheep_env.c). Input: a 48-byte STAT_CLUSTER reply header, then
 * struct sd_epoch_log records (a short last one is padded with zeros). The
 * records are also written as epoch files, and the reply's format fields
 * as DIR/config, before group_init reads them back.
 */
#include "../../sheep/group.c"

#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include "fuzz.h"

#define MAX_LOGS 8

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sheep_setup(false);
	return 0;
}

static int rm_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_F ? remove(path) : 0;
}

static void forget_all(void)
{
	char path[4200];

	pthread_mutex_lock(&group_cs_lock);
	memset(&group_cs, 0, sizeof(group_cs));
	if (cur_ring)
		group_ring_put(cur_ring);
	cur_ring = NULL;
	pthread_mutex_unlock(&group_cs_lock);
	gd_path(path, sizeof(path), "epoch");
	nftw(path, rm_file, 8, FTW_PHYS);
	gd_path(path, sizeof(path), "config");
	unlink(path);
}

static void write_disk(const struct sd_rsp *rsp, const struct sd_epoch_log *logs, int n)
{
	struct sheep_disk_config cfg = {
		.magic = CONFIG_MAGIC,
		.ctime = rsp->cinfo.ctime,
		.copies = rsp->cinfo.copies,
		.block_size_shift = rsp->cinfo.block_size_shift,
	};
	char name[64];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "epoch/%08" PRIu32, logs[i].epoch);
		group_write_file(name, &logs[i], sizeof(logs[i]));
	}
	if (rsp->cinfo.status == SD_STATUS_OK) {
		group_write_file("config", &cfg, sizeof(cfg));
	}
}

/* what a reader of an epoch log may rely on */
static void check_logs(const struct sd_epoch_log *logs, int n)
{
	for (int i = 0; i < n; i++) {
		FUZZ_ASSERT(logs[i].nr_nodes <= SD_MAX_NODES);
		for (uint32_t j = 0; j < logs[i].nr_nodes; j++)
			(void)logs[i].nodes[j].nid.port;
	}
}

/* what every VDI and object op trusts of a formatted cluster's state */
static void check_format_state(void)
{
	if (!group_is_formatted())
		return;
	FUZZ_ASSERT(group_cs.copies >= 1 && group_cs.copies <= SD_MAX_COPIES);
	FUZZ_ASSERT(group_cs.block_size_shift >= SD_MIN_BLOCK_SIZE_SHIFT &&
		    group_cs.block_size_shift <= SD_MAX_BLOCK_SIZE_SHIFT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_epoch_log *logs = calloc(MAX_LOGS, sizeof(*logs));
	struct sd_epoch_log *back = calloc(MAX_LOGS, sizeof(*back));
	struct sd_rsp rsp;
	size_t body;
	int n, ret;

	if (!logs || !back || size < sizeof(rsp))
		goto out_free;
	memcpy(&rsp, data, sizeof(rsp));
	body = size - sizeof(rsp);
	if (body > MAX_LOGS * sizeof(*logs))
		body = MAX_LOGS * sizeof(*logs);
	memcpy(logs, data + sizeof(rsp), body);
	n = (int)((body + sizeof(*logs) - 1) / sizeof(*logs));

	/* a restarted node: what it finds on disk */
	forget_all();
	write_disk(&rsp, logs, n);
	if (group_init(fuzz_sheep_dir()) == 0) {
		check_format_state();
		ret = group_read_epoch_logs(back, MAX_LOGS);
		FUZZ_ASSERT(ret >= 0 && ret <= MAX_LOGS);
		check_logs(back, ret);
	}

	/* a joining node: what a member answered */
	forget_all();
	ret = group_adopt(&rsp, logs, n);
	if (ret == 0 && group_is_formatted()) {
		check_format_state();
		ret = group_read_epoch_logs(back, MAX_LOGS);
		check_logs(back, ret);
		FUZZ_ASSERT(group_epoch() == rsp.cinfo.epoch);
	}
	forget_all();
out_free:
	free(back);
	free(logs);
	return 0;
}
