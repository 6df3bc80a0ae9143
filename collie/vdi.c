/*
 * collie vdi: create, delete, snapshot, clone, and the VDI helpers the other
 * vdi files share (name checks, name -> vid, inode reads and writes).
 *
 * Like QEMU, collie resolves a name with GET_VDI_INFO (no LOCK_VDI: it is
 * an admin tool and holds nothing open) and reads the inode with READ_OBJ.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"

int vdi_check_name(const char *name)
{
	if (!*name)
		return collie_usage_err("empty vdi name");
	if (strlen(name) >= SD_MAX_VDI_LEN)
		return collie_usage_err("vdi name too long (max %d bytes)", SD_MAX_VDI_LEN - 1);
	return EXIT_OK;
}

static bool is_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* a snapshot string: a number is a snapshot id (>= 1), anything else a tag */
static int parse_snap(const char *snap, uint32_t *snapid, const char **tag)
{
	uint64_t v;

	*snapid = 0;
	*tag = "";
	if (!snap)
		return EXIT_OK;
	if (is_number(snap)) {
		if (sd_parse_uint(snap, 1, UINT32_MAX, &v))
			return collie_usage_err("invalid snapshot id '%s'", snap);
		*snapid = (uint32_t)v;
		return EXIT_OK;
	}
	if (!*snap)
		return collie_usage_err("empty snapshot tag");
	if (strlen(snap) >= SD_MAX_VDI_TAG_LEN)
		return collie_usage_err("snapshot tag too long (max %d bytes)",
					SD_MAX_VDI_TAG_LEN - 1);
	*tag = snap;
	return EXIT_OK;
}

/* GET_VDI_INFO: the result code, or -errno (printed) */
int vdi_get_info(const char *name, uint32_t snapid, const char *tag, uint32_t *vid)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char buf[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN];
	int ret;

	memset(buf, 0, sizeof(buf));
	strncpy(buf, name, SD_MAX_VDI_LEN - 1);
	strncpy(buf + SD_MAX_VDI_LEN, tag, SD_MAX_VDI_TAG_LEN - 1);
	collie_init_req(&hdr, SD_OP_GET_VDI_INFO);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = sizeof(buf);
	hdr.vdi.snapid = snapid;
	ret = collie_exec(&hdr, buf, sizeof(buf), 0, &rsp);
	if (ret)
		return ret;
	if (rsp.result == SD_RES_SUCCESS)
		*vid = rsp.vdi.vdi_id;
	return (int)rsp.result;
}

static void print_not_found(const char *name, const char *snap)
{
	if (snap)
		collie_err("snapshot '%s' of vdi '%s' not found", snap, name);
	else
		collie_err("vdi '%s' not found", name);
}

int vdi_lookup(const char *name, const char *snap, uint32_t *vid)
{
	const char *tag;
	uint32_t snapid;
	int ret;

	ret = parse_snap(snap, &snapid, &tag);
	if (ret)
		return ret;
	ret = vdi_get_info(name, snapid, tag, vid);
	if (ret < 0)
		return EXIT_SYSFAIL;
	if (ret == SD_RES_NO_VDI || ret == SD_RES_NO_TAG) {
		print_not_found(name, snap);
		return EXIT_MISSING;
	}
	if (ret != SD_RES_SUCCESS) {
		collie_err("failed to look up vdi '%s': %s", name, sd_strerror(ret));
		return collie_exit_code(ret);
	}
	return EXIT_OK;
}

int vdi_read_inode(uint32_t vid, struct sd_inode *inode, uint32_t len)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char what[64];
	int ret;

	collie_init_req(&hdr, SD_OP_READ_OBJ);
	hdr.data_length = len;
	hdr.obj.oid = vid_to_vdi_oid(vid);
	snprintf(what, sizeof(what), "failed to read the inode of vdi %x", vid);
	ret = collie_run(what, &hdr, inode, 0, len, &rsp);
	if (ret)
		return ret;
	if (rsp.data_length < len) {
		collie_err("%s: short read (%u of %u bytes)", what, rsp.data_length, len);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* a new inode (free it) with the first len bytes of vid's, or NULL and *ret an exit code */
struct sd_inode *vdi_load_inode(uint32_t vid, uint32_t len, int *ret)
{
	struct sd_inode *inode = malloc(sizeof(*inode));

	if (!inode) {
		collie_err("out of memory");
		*ret = EXIT_SYSFAIL;
		return NULL;
	}
	*ret = vdi_read_inode(vid, inode, len);
	if (*ret) {
		free(inode);
		return NULL;
	}
	return inode;
}

int vdi_write_inode(const struct sd_inode *inode, uint32_t offset, uint32_t len)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char what[64];

	collie_init_req(&hdr, SD_OP_WRITE_OBJ);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = len;
	hdr.obj.oid = vid_to_vdi_oid(inode->vdi_id);
	hdr.obj.copies = inode->nr_copies;
	hdr.obj.offset = offset;
	snprintf(what, sizeof(what), "failed to update the inode of vdi %x", inode->vdi_id);
	return collie_run(what, &hdr, (char *)inode + offset, len, 0, &rsp);
}

/* NEW_VDI: the result code or -errno; *new_vid on success */
int vdi_new(const char *name, uint64_t size, uint32_t base_vid, uint8_t copies, uint8_t copy_policy,
	    uint8_t shift, uint32_t snapshot, uint32_t *new_vid)
{
	struct sd_req hdr;
	struct sd_rsp rsp;
	char buf[SD_MAX_VDI_LEN];
	int ret;

	memset(buf, 0, sizeof(buf));
	strncpy(buf, name, sizeof(buf) - 1);
	collie_init_req(&hdr, SD_OP_NEW_VDI);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = sizeof(buf);
	hdr.vdi.vdi_size = size;
	hdr.vdi.base_vdi_id = base_vid;
	hdr.vdi.copies = copies;
	hdr.vdi.copy_policy = copy_policy;
	hdr.vdi.block_size_shift = shift;
	hdr.vdi.snapid = snapshot;
	ret = collie_exec(&hdr, buf, sizeof(buf), 0, &rsp);
	if (ret)
		return ret;
	if (rsp.result == SD_RES_SUCCESS && new_vid)
		*new_vid = rsp.vdi.vdi_id;
	return (int)rsp.result;
}

int vdi_new_err(const char *what, const char *name, int ret)
{
	if (ret < 0)
		return EXIT_SYSFAIL;
	if (ret == SD_RES_VDI_EXIST)
		collie_err("vdi '%s' already exists", name);
	else
		collie_err("failed to %s vdi '%s': %s", what, name, sd_strerror(ret));
	return collie_exit_code(ret);
}

/* the cluster's object size, as QEMU asks for it; 22 when it won't say */
static int get_block_size_shift(uint8_t *shift)
{
	struct sd_req hdr;
	struct sd_rsp rsp;

	collie_init_req(&hdr, SD_OP_GET_CLUSTER_DEFAULT);
	if (collie_exec(&hdr, NULL, 0, 0, &rsp))
		return EXIT_SYSFAIL;
	*shift = SD_DEFAULT_BLOCK_SIZE_SHIFT;
	if (rsp.result == SD_RES_SUCCESS &&
	    rsp.cluster.block_size_shift >= SD_MIN_BLOCK_SIZE_SHIFT &&
	    rsp.cluster.block_size_shift <= 31)
		*shift = rsp.cluster.block_size_shift;
	return EXIT_OK;
}

static int vdi_create(int argc, char **argv)
{
	const char *name = argv[0];
	uint64_t size, max;
	uint8_t shift;
	char maxs[32];
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (sd_parse_size(argv[1], &size) || size == 0)
		return collie_usage_err("invalid size '%s'", argv[1]);
	if (size > UINT64_MAX - 511)
		return collie_usage_err("invalid size '%s'", argv[1]);
	size = round_up(size, 512);
	ret = get_block_size_shift(&shift);
	if (ret)
		return ret;
	max = (UINT64_C(1) << shift) * MAX_DATA_OBJS;
	if (size > max) {
		sd_size_to_str(max, maxs, sizeof(maxs));
		return collie_usage_err("vdi size too large '%s' (max %s)", argv[1], maxs);
	}
	/* -c D:P: an erasure-coded vdi (copies D + P, the scheme in copy_policy) */
	ret = vdi_new(name, size, 0, opts.has_copies ? opts.copies : 0,
		      opts.has_copies ? opts.copy_policy : 0, shift, 0, NULL);
	if (ret)
		return vdi_new_err("create", name, ret);
	return EXIT_OK;
}

/*
 * Grow a VDI: its inode's vdi_size, written as QEMU's driver writes it (the
 * gateway checks the change: growing only, within the objects a data map
 * holds, and every node's VDI table learns it before the answer)
 */
static int vdi_resize(int argc, char **argv)
{
	const char *name = argv[0];
	struct sd_inode *inode;
	char olds[32], maxs[32];
	uint64_t size, max;
	uint32_t vid;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (sd_parse_size(argv[1], &size) || size == 0 || size > UINT64_MAX - 511)
		return collie_usage_err("invalid size '%s'", argv[1]);
	size = round_up(size, 512);
	ret = vdi_lookup(name, NULL, &vid);
	if (ret)
		return ret;
	inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
	if (!inode)
		return ret;
	sd_size_to_str(inode->vdi_size, olds, sizeof(olds));
	max = inode->block_size_shift <= SD_MAX_BLOCK_SIZE_SHIFT
		  ? (UINT64_C(1) << inode->block_size_shift) * MAX_DATA_OBJS
		  : 0;
	if (size < inode->vdi_size) {
		collie_err("vdi '%s' is %s: a vdi cannot shrink", name, olds);
		ret = EXIT_FAIL;
	} else if (size > max) {
		sd_size_to_str(max, maxs, sizeof(maxs));
		ret = collie_usage_err("vdi size too large '%s' (max %s)", argv[1], maxs);
	} else if (size > inode->vdi_size) {
		inode->vdi_size = size;
		ret = vdi_write_inode(inode, offsetof(struct sd_inode, vdi_size),
				      sizeof(inode->vdi_size));
	}
	free(inode);
	return ret;
}

int vdi_del(const char *name, uint32_t vid)
{
	char buf[SD_MAX_VDI_LEN];
	struct sd_req hdr;
	struct sd_rsp rsp;

	memset(buf, 0, sizeof(buf));
	strncpy(buf, name, sizeof(buf) - 1);
	collie_init_req(&hdr, SD_OP_DEL_VDI);
	hdr.flags = SD_FLAG_CMD_WRITE;
	hdr.data_length = SD_MAX_VDI_LEN;
	hdr.vdi.base_vdi_id = vid;
	if (collie_exec(&hdr, buf, sizeof(buf), 0, &rsp))
		return EXIT_SYSFAIL;
	if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to delete vdi '%s': %s", name, sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
	return EXIT_OK;
}

/* DEL_VDI: name only for the working VDI, name + tag and snapid for a snapshot */
static int vdi_delete(int argc, char **argv)
{
	const char *name = argv[0];
	struct sd_inode *inode = NULL;
	struct sd_req hdr;
	struct sd_rsp rsp;
	char buf[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN];
	uint32_t vid;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	ret = vdi_lookup(name, opts.snapshot, &vid);
	if (ret)
		return ret;
	memset(buf, 0, sizeof(buf));
	strncpy(buf, name, SD_MAX_VDI_LEN - 1);
	collie_init_req(&hdr, SD_OP_DEL_VDI);
	hdr.flags = SD_FLAG_CMD_WRITE;
	if (opts.snapshot) {
		inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
		if (!inode)
			return ret;
		/* a number may name the working vdi's own id: that is no snapshot */
		if (!vdi_is_snapshot(inode)) {
			print_not_found(name, opts.snapshot);
			ret = EXIT_MISSING;
			goto out_free;
		}
		memcpy(buf + SD_MAX_VDI_LEN, inode->tag, SD_MAX_VDI_TAG_LEN - 1);
		hdr.data_length = sizeof(buf);
		hdr.vdi.snapid = inode->snap_id;
	} else {
		hdr.data_length = SD_MAX_VDI_LEN;
		hdr.vdi.base_vdi_id = vid;
	}
	if (collie_exec(&hdr, buf, hdr.data_length, 0, &rsp)) {
		ret = EXIT_SYSFAIL;
		goto out_free;
	}
	ret = EXIT_OK;
	if (rsp.result == SD_RES_NO_VDI || rsp.result == SD_RES_NO_TAG) {
		print_not_found(name, opts.snapshot);
		ret = EXIT_MISSING;
	} else if (rsp.result != SD_RES_SUCCESS) {
		collie_err("failed to delete vdi '%s': %s", name, sd_strerror((int)rsp.result));
		ret = collie_exit_code((int)rsp.result);
	}
out_free:
	free(inode);
	return ret;
}

/*
 * An operator releases a VDI's lock (UNLOCK_VDI): one that a dead client
 * left. A lock whose holder is still connected (its gateway is a member)
 * is refused unless --force, which also disconnects the holder. Prints
 * nothing when done.
 */
static int vdi_unlock(int argc, char **argv)
{
	const char *name = argv[0];
	struct sd_req hdr;
	struct sd_rsp rsp;
	uint32_t vid;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	ret = vdi_lookup(name, NULL, &vid);
	if (ret)
		return ret;
	collie_init_req(&hdr, SD_OP_UNLOCK_VDI);
	hdr.vdi.base_vdi_id = vid;
	hdr.vdi.type = opts.force ? SD_UNLOCK_FORCE : 0;
	if (collie_exec(&hdr, NULL, 0, 0, &rsp))
		return EXIT_SYSFAIL;
	switch (rsp.result) {
	case SD_RES_SUCCESS:
		return EXIT_OK;
	case SD_RES_NO_VDI:
		print_not_found(name, NULL);
		return EXIT_MISSING;
	case SD_RES_VDI_NOT_LOCKED:
		collie_err("vdi '%s' is not locked", name);
		return collie_exit_code((int)rsp.result);
	case SD_RES_VDI_LOCKED:
		collie_err("vdi '%s' is locked by a client that is still connected (--force "
			   "disconnects it and releases the lock)",
			   name);
		return collie_exit_code((int)rsp.result);
	default:
		collie_err("failed to unlock vdi '%s': %s", name, sd_strerror((int)rsp.result));
		return collie_exit_code((int)rsp.result);
	}
}

/*
 * As QEMU does it: write the tag into the working VDI's inode header, then
 * NEW_VDI with base_vdi_id = that vid and snapid = 1. The old vid becomes
 * the snapshot; a new working VDI takes the name.
 */
static int vdi_snapshot(int argc, char **argv)
{
	const char *name = argv[0], *tag = opts.snapshot ? opts.snapshot : "";
	char old_tag[SD_MAX_VDI_TAG_LEN];
	struct sd_inode *inode;
	uint32_t vid, snap_vid;
	int ret;

	ret = vdi_check_name(name);
	if (ret)
		return ret;
	if (opts.snapshot && (!*tag || is_number(tag)))
		return collie_usage_err("invalid snapshot tag '%s' (a tag is not a number)", tag);
	if (strlen(tag) >= SD_MAX_VDI_TAG_LEN)
		return collie_usage_err("snapshot tag too long (max %d bytes)",
					SD_MAX_VDI_TAG_LEN - 1);
	ret = vdi_lookup(name, NULL, &vid);
	if (ret)
		return ret;
	if (*tag) {
		ret = vdi_get_info(name, 0, tag, &snap_vid);
		if (ret < 0)
			return EXIT_SYSFAIL;
		if (ret == SD_RES_SUCCESS) {
			collie_err("snapshot '%s' of vdi '%s' already exists", tag, name);
			return EXIT_EXISTS;
		}
	}
	inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
	if (!inode)
		return ret;
	memcpy(old_tag, inode->tag, sizeof(old_tag));
	memset(inode->tag, 0, sizeof(inode->tag));
	memcpy(inode->tag, tag, strlen(tag));
	ret = vdi_write_inode(inode, offsetof(struct sd_inode, tag), sizeof(inode->tag));
	if (ret)
		goto out_free;
	ret = vdi_new(name, inode->vdi_size, vid, inode->nr_copies, (uint8_t)inode->copy_policy,
		      inode->block_size_shift, 1, NULL);
	if (ret) {
		ret = vdi_new_err("snapshot", name, ret);
		/* the working vdi keeps no tag of a snapshot that was not taken */
		memcpy(inode->tag, old_tag, sizeof(old_tag));
		if (vdi_write_inode(inode, offsetof(struct sd_inode, tag), sizeof(inode->tag)))
			collie_err("the tag '%s' stays on vdi '%s'", tag, name);
	}
out_free:
	free(inode);
	return ret;
}

static int vdi_clone(int argc, char **argv)
{
	const char *src = argv[0], *dst = argv[1];
	struct sd_inode *inode;
	uint32_t vid;
	int ret;

	ret = vdi_check_name(src);
	if (!ret)
		ret = vdi_check_name(dst);
	if (ret)
		return ret;
	if (!opts.snapshot)
		return collie_usage_err("clone needs the snapshot to clone from: -s SNAP");
	ret = vdi_lookup(src, opts.snapshot, &vid);
	if (ret)
		return ret;
	inode = vdi_load_inode(vid, SD_INODE_HEADER_SIZE, &ret);
	if (!inode)
		return ret;
	if (!vdi_is_snapshot(inode)) {
		collie_err("'%s' names the working vdi '%s', not a snapshot", opts.snapshot, src);
		ret = EXIT_FAIL;
		goto out_free;
	}
	ret = vdi_new(dst, inode->vdi_size, vid, inode->nr_copies, (uint8_t)inode->copy_policy,
		      inode->block_size_shift, 0, NULL);
	if (ret)
		ret = vdi_new_err("clone", dst, ret);
out_free:
	free(inode);
	return ret;
}

const struct subcommand vdi_cmds[] = {
	{ "create", "NAME SIZE", OPT_COPIES, "create a vdi of SIZE bytes (K/M/G/T suffixes)",
	  vdi_create, NULL, 2, 2 },
	{ "list", "", OPT_RAW, "list the vdis and their snapshots", vdi_list, NULL, 0, 0 },
	{ "delete", "NAME", OPT_SNAPSHOT, "delete a vdi, or one of its snapshots with -s",
	  vdi_delete, NULL, 1, 1 },
	{ "read", "NAME [OFFSET [LEN]]", OPT_SNAPSHOT,
	  "write the vdi's contents to stdout (default: from OFFSET to the end)", vdi_read, NULL, 1,
	  3 },
	{ "write", "NAME [OFFSET [LEN]]", 0,
	  "write stdin into the vdi at OFFSET (LEN bytes, or until end of input)", vdi_write, NULL,
	  1, 3 },
	{ "snapshot", "NAME", OPT_SNAPSHOT, "take a snapshot of a vdi, tagged with -s TAG",
	  vdi_snapshot, NULL, 1, 1 },
	{ "clone", "SRC DST", OPT_SNAPSHOT, "create vdi DST from snapshot -s SNAP of vdi SRC",
	  vdi_clone, NULL, 2, 2 },
	{ "tree", "", 0, "show the vdis, snapshots and clones as a tree", vdi_tree, NULL, 0, 0 },
	{ "unlock", "NAME", OPT_FORCE, "release a vdi's lock (one a dead client left)", vdi_unlock,
	  NULL, 1, 1, "  collie vdi unlock vm1\n  collie vdi unlock vm1 --force\n",
	  "A lock belongs to the client that took it, through one node. It is\n"
	  "released when that client closes the disk, when its connections close\n"
	  "(the client died), and when its node leaves the cluster. A lock whose\n"
	  "client is still connected is refused unless --force, which disconnects\n"
	  "that client first (a second writer must never write beside it).\n" },
	{ "resize", "NAME SIZE", 0, "grow a vdi to SIZE bytes (K/M/G/T suffixes)", vdi_resize, NULL,
	  2, 2, "  collie vdi resize vm1 20G\n",
	  "The new size applies to the clients that open the vdi afterwards (a running\n"
	  "QEMU learns it from its own resize). A vdi cannot shrink; its snapshots keep\n"
	  "their size.\n" },
	{ "check", "NAME", OPT_SNAPSHOT | OPT_REPAIR,
	  "compare the copies of every object of a vdi (--repair: make them one)", vdi_check, NULL,
	  1, 1, "  collie vdi check vm1\n  collie vdi check vm1 --repair\n",
	  "Reads every copy of every object of the vdi (its inode and each allocated\n"
	  "object) from the nodes that the current epoch gives it, and reports the\n"
	  "objects whose copies differ, that a node lacks, or that no node has. With\n"
	  "--repair the copy that most nodes hold (on a tie, the object's first\n"
	  "node's) is written over the others. Refused while a recovery runs; --repair\n"
	  "is refused on a vdi that a client has locked. Check a vdi that no VM writes.\n"
	  "Exit status 1 when copies differ (and were not repaired) or an object is\n"
	  "lost.\n" },
	{ "backup", "NAME", OPT_SNAPSHOT | OPT_FROM | OPT_COMPRESS,
	  "write snapshot -s TO (or what changed since -F FROM) to stdout as a backup stream",
	  vdi_backup, NULL, 1, 1,
	  "  collie vdi backup vm1 -s monday > vm1-monday.bk\n"
	  "  collie vdi backup vm1 -F monday -s tuesday --compress > vm1-tuesday.bk\n",
	  "A full backup holds every non-zero sector of the snapshot; an incremental\n"
	  "one (-F) the sectors that differ between the two snapshots, and a hash of\n"
	  "each base object it changes. Every record carries a checksum. The format is\n"
	  "in collie(8).\n" },
	{ "restore", "NAME", OPT_SNAPSHOT | OPT_COPIES,
	  "make vdi NAME from a full backup on stdin, or apply an incremental one on -s BASE",
	  vdi_restore, NULL, 1, 1,
	  "  collie vdi restore vm1 < vm1-monday.bk\n"
	  "  collie vdi snapshot vm1 -s monday\n"
	  "  collie vdi restore vm1 -s monday < vm1-tuesday.bk\n",
	  "The whole stream is checked before anything is written (stdin is read twice:\n"
	  "a pipe is first copied to an unlinked file in $TMPDIR). A full backup makes a\n"
	  "new vdi (-c: its copies). An incremental one is applied to the working vdi\n"
	  "NAME, which must still hold its snapshot -s BASE unchanged, and only when BASE\n"
	  "holds the content the stream was taken from. Refused: a damaged, truncated\n"
	  "or foreign stream, another base, another object size, a locked vdi.\n" },
	{ "rollback", "NAME", OPT_SNAPSHOT,
	  "make the working vdi the content of its snapshot -s SNAP again", vdi_rollback, NULL, 1,
	  1, "  collie vdi rollback vm1 -s before-upgrade\n",
	  "What the working vdi wrote since is dropped (its own objects are removed).\n"
	  "It keeps its size: past the snapshot's end it reads zeros. Refused while a\n"
	  "client holds the vdi's lock (stop the VM first).\n" },
	{ "alter-copy", "NAME", OPT_COPIES,
	  "give a replicated vdi and its snapshots -c N copies; recovery moves the objects",
	  vdi_alter_copy, NULL, 1, 1, "  collie vdi alter-copy vm1 -c 3\n",
	  "Every node places the vdi's objects with the new count as soon as the\n"
	  "command returns; recovery then copies what a higher count adds and, once\n"
	  "every node has it, removes what a lower one drops (collie node recovery\n"
	  "shows it; collie vdi check the result). A running VM goes on reading and\n"
	  "writing. Refused for an erasure-coded vdi and for more copies than nodes\n"
	  "that store objects. Objects the vdi shares with a clone's base or a\n"
	  "deleted snapshot keep the count of the vdi they belong to.\n" },
	{ "object", "NAME [INDEX]", OPT_SNAPSHOT | OPT_RAW,
	  "which nodes hold an object of the vdi (or every object), its size and state", vdi_object,
	  NULL, 1, 2, "  collie vdi object vm1 0\n  collie vdi object vm1\n",
	  "With INDEX: the object's owner (the vdi or the ancestor it shares it with),\n"
	  "its size, each node the current epoch places a copy on or that holds one.\n"
	  "Without: a line per allocated object. State: ok, degraded (fewer copies\n"
	  "than the vdi wants) or lost; exit status 1 unless every object is ok.\n" },
	{ NULL },
};
