/*
 * collie node md: the disks of the node collie talks to (sheep --disk):
 * info shows each one, plug and unplug add and remove one while the node
 * serves; the objects that must move go in the background.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

static const char *md_state(uint32_t state)
{
	switch (state) {
	case SD_MD_ACTIVE:
		return "active";
	case SD_MD_UNPLUGGING:
		return "unplugging";
	case SD_MD_UNPLUGGED:
		return "unplugged";
	case SD_MD_FAILED:
		return "failed";
	}
	return "unknown";
}

static int node_md_info(int argc, char **argv)
{
	uint32_t len = SD_MAX_NODES * sizeof(struct sd_md_disk);
	struct sd_md_disk *d = calloc(SD_MAX_NODES, sizeof(*d));
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	(void)argc;
	(void)argv;
	if (!d) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	collie_init_req(&hdr, SD_OP_MD_INFO);
	hdr.data_length = len;
	ret = collie_run("failed to get the disks", &hdr, d, 0, len, &rsp);
	if (ret)
		goto out_free;
	if (!opts.raw)
		printf("%3s %-10s %10s %10s %9s %6s  %s\n", "Id", "State", "Size", "Used", "Objects",
		       "Weight", "Path");
	for (uint32_t i = 0; i < rsp.data_length / sizeof(*d); i++) {
		char s[32], u[32];

		d[i].path[SD_MD_PATH_LEN - 1] = '\0';
		collie_fmt_size(d[i].size, s, sizeof(s));
		collie_fmt_size(d[i].used, u, sizeof(u));
		if (opts.raw)
			printf("%u %s %s %s %llu %u %s\n", i, md_state(d[i].state), s, u,
			       (unsigned long long)d[i].nr_objects, d[i].vnodes, d[i].path);
		else
			printf("%3u %-10s %10s %10s %9llu %6u  %s\n", i, md_state(d[i].state), s,
			       u, (unsigned long long)d[i].nr_objects, d[i].vnodes, d[i].path);
	}
out_free:
	free(d);
	return ret;
}

/* plug or unplug PATH on the node collie talks to */
static int node_md_change(uint8_t opcode, const char *path)
{
	char buf[SD_MD_PATH_LEN];
	size_t len = strlen(path);
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	if (!len || len >= sizeof(buf))
		return collie_usage_err("a disk's path is 1 to %d bytes", SD_MD_PATH_LEN - 1);
	memcpy(buf, path, len + 1);
	collie_init_req(&hdr, opcode);
	hdr.flags |= SD_FLAG_CMD_WRITE;
	hdr.data_length = (uint32_t)len + 1;
	ret = collie_run(opcode == SD_OP_MD_PLUG ? "failed to plug the disk"
						 : "failed to unplug the disk",
			 &hdr, buf, (uint32_t)len + 1, 0, &rsp);
	if (ret)
		return ret;
	printf("%s %s: objects move in the background (collie node md info)\n",
	       opcode == SD_OP_MD_PLUG ? "plugged" : "unplugging", path);
	return EXIT_OK;
}

static int node_md_plug(int argc, char **argv)
{
	(void)argc;
	return node_md_change(SD_OP_MD_PLUG, argv[0]);
}

static int node_md_unplug(int argc, char **argv)
{
	(void)argc;
	return node_md_change(SD_OP_MD_UNPLUG, argv[0]);
}

const struct subcommand node_md_cmds[] = {
	{ "info", "", OPT_RAW, "show the node's disks: state, size, used, objects, weight, path",
	  node_md_info, NULL, 0, 0, "  collie node md info -p 7001\n" },
	{ "plug", "PATH[,WEIGHT]", 0,
	  "add the disk mounted at PATH (a directory the daemon can reach) to the node",
	  node_md_plug, NULL, 1, 1, "  collie node md plug /mnt/disk4\n  collie node md plug /mnt/disk5,512\n" },
	{ "unplug", "PATH", 0,
	  "take the disk PATH out of the node: its objects move to the other disks first",
	  node_md_unplug, NULL, 1, 1, "  collie node md unplug /mnt/disk4\n" },
	{ NULL },
};
