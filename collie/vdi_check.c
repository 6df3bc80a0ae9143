/*
 * collie vdi check: whether every copy of every object of a VDI is the same.
 *
 * The VDI's inode names its objects: the inode itself and, for each entry
 * of its data map that is not 0, oid(entry, idx) (an ancestor's object
 * where the VDI shares one). Each object's nodes are those that the ring of
 * the current epoch gives it (lib/ring.c: the daemons' own placement, from
 * the node list); each is asked for its copy with READ_PEER at that epoch,
 * and the copies are compared byte for byte (a copy reads as the whole
 * object, zeros past what the node stored).
 *
 * Reported: an object whose copies differ, one that a node lacks, and one
 * that no node has. With --repair, the copy that most nodes hold (on a tie,
 * that of the object's first node in the ring's order) is written over the
 * others, or created where one is missing, durably. A lost object cannot be
 * repaired.
 *
 * It refuses while a recovery runs (objects are moving) and stops when the
 * epoch changes under it; --repair refuses a VDI that a client has locked. A client that writes the
 * VDI meanwhile makes its copies differ for a moment: an object found different is read again
 * before it is reported or repaired, but a VDI in use may still show a
 * write in flight; check a VDI that no VM writes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collie.h"
#include "ec.h"
#include "ring.h"

struct check {
	struct sd_ring ring;
	uint32_t epoch;
	int copies;
	uint32_t obj_size;
	char *bufs[SD_MAX_COPIES];
	/* an erasure-coded VDI: its codec, and the strips rebuilt to compare with */
	bool is_ec;
	struct ec_codec codec;
	uint8_t *rebuilt[SD_EC_MAX_STRIPS];
	/* the counts of the summary */
	uint64_t nr_checked, nr_differ, nr_missing, nr_lost, nr_repaired;
};

/* epoch and ring of the cluster now: EXIT_OK or an exit code */
static int get_ring(struct check *c)
{
	struct sd_node *nodes;
	uint32_t nr, local_idx;
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	collie_init_req(&hdr, SD_OP_STAT_CLUSTER);
	ret = collie_run("failed to get the cluster state", &hdr, NULL, 0, 0, &rsp);
	if (ret)
		return ret;
	c->epoch = rsp.cinfo.epoch;
	ret = node_get_list(&nodes, &nr, &local_idx);
	if (ret)
		return ret;
	if (ring_build(&c->ring, nodes, (int)nr)) {
		collie_err("out of memory");
		ret = EXIT_SYSFAIL;
	}
	free(nodes);
	return ret;
}

/* every node's recovery of the epoch is done: EXIT_OK, or an exit code after saying why */
static int recovery_done(const struct check *c)
{
	for (int i = 0; i < c->ring.nr_nodes; i++) {
		const struct sd_node *n = &c->ring.nodes[i];
		struct sd_recovery_info ri;
		struct sd_req hdr;
		struct sd_rsp rsp;
		char host[64];

		collie_node_host(n, host, sizeof(host));
		collie_init_req(&hdr, SD_OP_STAT_RECOVERY);
		hdr.data_length = sizeof(ri);
		memset(&ri, 0, sizeof(ri));
		if (collie_exec_at(host, n->nid.port, &hdr, &ri, 0, sizeof(ri), &rsp))
			return EXIT_SYSFAIL;
		if (rsp.result != SD_RES_SUCCESS) {
			collie_err("failed to get the recovery state of %s:%u: %s", host,
				   n->nid.port, sd_strerror((int)rsp.result));
			return collie_exit_code((int)rsp.result);
		}
		if (ri.epoch != c->epoch || ri.state != SD_RECOVERY_DONE) {
			collie_err("%s:%u has not recovered epoch %u yet (collie node recovery): "
				   "check after it",
				   host, n->nid.port, c->epoch);
			return EXIT_FAIL;
		}
	}
	return EXIT_OK;
}

/*
 * Whether a client holds vid's lock (GET_VDI_LOCKS): a repair over a VDI
 * that a VM writes could put an older copy over its newest write. EXIT_OK
 * and *locked, or an exit code after saying why.
 */
#define CHECK_MAX_LOCKS (1U << 16)
int vdi_is_locked(uint32_t vid, bool *locked)
{
	struct sd_vdi_lock *locks = malloc(CHECK_MAX_LOCKS * sizeof(*locks));
	struct sd_req hdr;
	struct sd_rsp rsp;
	int ret;

	*locked = false;
	if (!locks) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	collie_init_req(&hdr, SD_OP_GET_VDI_LOCKS);
	hdr.data_length = CHECK_MAX_LOCKS * sizeof(*locks);
	ret = collie_run("failed to get the locked vdis", &hdr, locks, 0, hdr.data_length, &rsp);
	for (uint32_t i = 0; !ret && i < rsp.data_length / sizeof(*locks); i++)
		*locked |= locks[i].vid == vid;
	free(locks);
	return ret;
}

/* a peer op on node i of the ring at the check's epoch: the result, or -1 (unreachable) */
static int peer_op(const struct check *c, int i, uint8_t opcode, uint64_t oid, void *buf,
		   uint32_t len)
{
	const struct sd_node *n = &c->ring.nodes[i];
	bool write = opcode != SD_OP_READ_PEER;
	struct sd_req hdr;
	struct sd_rsp rsp;
	char host[64];

	collie_node_host(n, host, sizeof(host));
	collie_init_req(&hdr, opcode);
	hdr.epoch = c->epoch;
	hdr.flags = write ? SD_FLAG_CMD_WRITE : 0;
	hdr.data_length = len;
	hdr.obj.oid = oid;
	hdr.obj.copies = (uint8_t)c->copies;
	if (collie_exec_at(host, n->nid.port, &hdr, buf, write ? len : 0, write ? 0 : len, &rsp))
		return -1;
	if (!write && rsp.result == SD_RES_SUCCESS && rsp.data_length != len)
		return SD_RES_EIO;
	return (int)rsp.result;
}

static const char *node_name(const struct check *c, int i, char *buf, size_t len)
{
	char host[64];

	collie_node_host(&c->ring.nodes[i], host, sizeof(host));
	snprintf(buf, len, "%s:%u", host, c->ring.nodes[i].nid.port);
	return buf;
}

/* a read of oid from ring node i failed with r (not SD_RES_NO_OBJ): say why, the exit code */
static int read_failed(const struct check *c, uint64_t oid, int i, int r)
{
	char name[80];

	if (r == SD_RES_OLD_NODE_VER || r == SD_RES_NEW_NODE_VER) {
		collie_err("the epoch changed during the check (it was %u): run it again",
			   c->epoch);
		return EXIT_FAIL;
	}
	collie_err("failed to read %016" PRIx64 " from %s: %s", oid,
		   node_name(c, i, name, sizeof(name)), r < 0 ? "unreachable" : sd_strerror(r));
	return r < 0 ? EXIT_SYSFAIL : collie_exit_code(r);
}

/*
 * An erasure-coded data object: strip i read from the i-th node of the
 * object's placement; the strips not among the first D found are rebuilt
 * from those D (ISA-L) and compared with what their nodes hold. Reported:
 * a strip that its node lacks, one that differs from the rebuild (which
 * strip is wrong is not known: the first D are taken as the truth), and
 * an object with fewer than D strips left (lost). With --repair, the
 * rebuilt strips are written where a strip is missing or differs.
 */
static int check_ec_object(struct check *c, uint64_t oid, bool repair)
{
	int d = c->codec.d, n = c->codec.d + c->codec.p, idx[SD_EC_MAX_STRIPS], nr_have = 0, r;
	uint32_t sl = ec_strip_len(c->obj_size, d);
	bool have[SD_EC_MAX_STRIPS], base[SD_EC_MAX_STRIPS] = { false };
	uint8_t *t[SD_EC_MAX_STRIPS];
	char name[80];

	ring_map(&c->ring, oid, n, idx);
	for (int i = 0; i < n; i++) {
		r = peer_op(c, idx[i], SD_OP_READ_PEER, ec_strip_oid(oid, i), c->bufs[i], sl);
		if (r && r != SD_RES_NO_OBJ)
			return read_failed(c, ec_strip_oid(oid, i), idx[i], r);
		have[i] = r == SD_RES_SUCCESS;
		if (have[i] && nr_have++ < d)
			base[i] = true;
	}
	c->nr_checked++;
	if (nr_have < d) {
		c->nr_lost++;
		printf("%016" PRIx64 ": lost, %d of its %d strips left, %d needed\n", oid, nr_have,
		       n, d);
		return EXIT_OK;
	}
	for (int i = 0; i < n; i++)
		t[i] = base[i] ? (uint8_t *)c->bufs[i] : c->rebuilt[i];
	if (ec_reconstruct(&c->codec, sl, t, base, ~0U)) {
		collie_err("out of memory");
		return EXIT_SYSFAIL;
	}
	for (int i = 0; i < n; i++) {
		if (base[i] || (have[i] && !memcmp(t[i], c->bufs[i], sl)))
			continue;
		if (have[i])
			c->nr_differ++;
		else
			c->nr_missing++;
		printf("%016" PRIx64 ": strip %d on %s %s\n", oid, i,
		       node_name(c, idx[i], name, sizeof(name)),
		       have[i] ? "differs from the one the other strips give" : "is missing");
		if (!repair)
			continue;
		r = peer_op(c, idx[i], SD_OP_CREATE_AND_WRITE_PEER, ec_strip_oid(oid, i), t[i], sl);
		if (r) {
			collie_err("failed to repair strip %d of %016" PRIx64 " on %s: %s", i, oid,
				   name, r < 0 ? "unreachable" : sd_strerror(r));
			return r < 0 ? EXIT_SYSFAIL : collie_exit_code(r);
		}
		c->nr_repaired++;
		printf("%016" PRIx64 ": strip %d repaired on %s\n", oid, i, name);
	}
	return EXIT_OK;
}

/*
 * Read oid's copies from its nodes idx[n] into c->bufs; group[k]: the
 * first copy equal to copy k, or -1 for a node without one. EXIT_OK, or an
 * exit code (a node unreachable, the epoch changed) after saying why.
 */
static int read_copies(struct check *c, uint64_t oid, const int *idx, int n, uint32_t size,
		       int *group)
{

	for (int k = 0; k < n; k++) {
		int r = peer_op(c, idx[k], SD_OP_READ_PEER, oid, c->bufs[k], size);

		group[k] = -1;
		if (r == SD_RES_NO_OBJ)
			continue;
		if (r)
			return read_failed(c, oid, idx[k], r);
		group[k] = k;
		for (int j = 0; j < k; j++)
			if (group[j] == j && !memcmp(c->bufs[j], c->bufs[k], size)) {
				group[k] = j;
				break;
			}
	}
	return EXIT_OK;
}

/* the copy most nodes hold (the first node's on a tie), -1 when none has one; *nr_agree */
static int best_copy(const int *group, int n, int *nr_agree)
{
	int best = -1, best_nr = 0;

	for (int k = 0; k < n; k++) {
		int nr = 0;

		if (group[k] != k)
			continue;
		for (int j = 0; j < n; j++)
			nr += group[j] == k;
		if (nr > best_nr) {
			best = k;
			best_nr = nr;
		}
	}
	*nr_agree = best_nr;
	return best;
}

/* check (and with repair, repair) one object: EXIT_OK or an exit code */
static int check_object(struct check *c, uint64_t oid, uint32_t size, bool repair)
{
	int idx[SD_MAX_COPIES], group[SD_MAX_COPIES], n, best, nr_agree, ret;
	bool same = true, missing = false;
	char name[80], from[80];

	n = ring_map(&c->ring, oid, c->copies, idx);
	for (int pass = 0; pass < 2; pass++) {
		ret = read_copies(c, oid, idx, n, size, group);
		if (ret)
			return ret;
		same = true;
		missing = false;
		for (int k = 0; k < n; k++) {
			missing |= group[k] < 0;
			same &= group[k] <= 0;
		}
		if (same && !missing)
			break;
		/* differing copies: once more, in case a client's write was landing */
	}
	c->nr_checked++;
	if (same && !missing)
		return EXIT_OK;
	best = best_copy(group, n, &nr_agree);
	if (best < 0) {
		c->nr_lost++;
		printf("%016" PRIx64 ": lost, none of its %d node(s) has a copy\n", oid, n);
		return EXIT_OK;
	}
	for (int k = 0; k < n; k++) {
		if (group[k] == best)
			continue;
		if (group[k] < 0)
			c->nr_missing++;
		else
			c->nr_differ++;
		printf("%016" PRIx64 ": %s %s (%d of %d copies agree with %s)\n", oid,
		       node_name(c, idx[k], name, sizeof(name)),
		       group[k] < 0 ? "has no copy" : "holds a different copy", nr_agree, n,
		       node_name(c, idx[best], from, sizeof(from)));
		if (!repair)
			continue;
		ret = peer_op(c, idx[k],
			      group[k] < 0 ? SD_OP_CREATE_AND_WRITE_PEER : SD_OP_WRITE_PEER, oid,
			      c->bufs[best], size);
		if (ret) {
			collie_err("failed to repair %016" PRIx64 " on %s: %s", oid, name,
				   ret < 0 ? "unreachable" : sd_strerror(ret));
			return ret < 0 ? EXIT_SYSFAIL : collie_exit_code(ret);
		}
		c->nr_repaired++;
		printf("%016" PRIx64 ": repaired on %s\n", oid, name);
	}
	return EXIT_OK;
}

static int check_objects(struct check *c, const struct sd_inode *inode, uint32_t vid, bool repair)
{
	uint64_t nr = (inode->vdi_size + c->obj_size - 1) / c->obj_size;
	int ret;

	if (nr > MAX_DATA_OBJS)
		nr = MAX_DATA_OBJS;
	ret = check_object(c, vid_to_vdi_oid(vid), SD_INODE_SIZE, repair);
	for (uint64_t i = 0; i < nr && !ret; i++) {
		uint64_t oid = vid_to_data_oid(inode->data_vdi_id[i], (uint32_t)i);

		if (!inode->data_vdi_id[i])
			continue;
		if (c->is_ec)
			ret = check_ec_object(c, oid, repair);
		else
			ret = check_object(c, oid, c->obj_size, repair);
	}
	return ret;
}

int vdi_check(int argc, char **argv)
{
	struct check c = { 0 };
	struct sd_inode *inode = NULL;
	uint32_t vid;
	int ret;

	ret = vdi_check_name(argv[0]);
	if (!ret)
		ret = vdi_lookup(argv[0], opts.snapshot, &vid);
	if (ret)
		return ret;
	inode = vdi_load_inode(vid, sizeof(*inode), &ret);
	if (!inode)
		return ret;
	if (inode->block_size_shift < SD_MIN_BLOCK_SIZE_SHIFT ||
	    inode->block_size_shift > SD_MAX_BLOCK_SIZE_SHIFT) {
		collie_err("vdi '%s' has an unusable object size (block_size_shift %u)", argv[0],
			   inode->block_size_shift);
		ret = EXIT_FAIL;
		goto out;
	}
	c.obj_size = UINT32_C(1) << inode->block_size_shift;
	c.copies = inode->nr_copies;
	ret = get_ring(&c);
	if (ret)
		goto out;
	if (c.copies < 1 || c.copies > SD_MAX_COPIES || c.copies > c.ring.nr_nodes) {
		collie_err("vdi '%s' has %u copies for %d node(s): nothing to compare", argv[0],
			   inode->nr_copies, c.ring.nr_nodes);
		ret = EXIT_FAIL;
		goto out;
	}
	ret = recovery_done(&c);
	if (ret)
		goto out;
	if (inode->copy_policy) {
		int d, p;

		/* the daemons refuse such an inode's scheme too (vdi_table.c): replicated */
		c.is_ec = ec_policy_to_dp(inode->copy_policy, &d, &p) && d + p == c.copies;
		if (c.is_ec && ec_codec_init(&c.codec, d, p)) {
			collie_err("out of memory");
			ret = EXIT_SYSFAIL;
			goto out;
		}
		for (int k = 0; c.is_ec && k < c.copies; k++) {
			c.rebuilt[k] = malloc(ec_strip_len(c.obj_size, d));
			if (!c.rebuilt[k]) {
				collie_err("out of memory");
				ret = EXIT_SYSFAIL;
				goto out;
			}
		}
	}
	if (opts.repair) {
		bool locked;

		ret = vdi_is_locked(vid, &locked);
		if (!ret && locked) {
			collie_err(
			    "vdi '%s' is locked, a client may be writing it: stop the client "
			    "(or release a dead client's lock with collie vdi unlock) and repair "
			    "then",
			    argv[0]);
			ret = EXIT_FAIL;
		}
		if (ret)
			goto out;
	}
	for (int k = 0; k < c.copies; k++) {
		c.bufs[k] = malloc(SD_INODE_SIZE > c.obj_size ? SD_INODE_SIZE : c.obj_size);
		if (!c.bufs[k]) {
			collie_err("out of memory");
			ret = EXIT_SYSFAIL;
			goto out;
		}
	}
	ret = check_objects(&c, inode, vid, opts.repair);
	if (c.is_ec)
		printf("%" PRIu64 " object(s) checked at epoch %u, %d:%d: %" PRIu64
		       " differing strip(s), %" PRIu64 " missing, %" PRIu64 " lost%s",
		       c.nr_checked, c.epoch, c.codec.d, c.codec.p, c.nr_differ, c.nr_missing,
		       c.nr_lost, opts.repair ? "" : "\n");
	else
		printf("%" PRIu64 " object(s) checked at epoch %u, %d copies: %" PRIu64
		       " differing, %" PRIu64 " missing, %" PRIu64 " lost%s",
		       c.nr_checked, c.epoch, c.copies, c.nr_differ, c.nr_missing, c.nr_lost,
		       opts.repair ? "" : "\n");
	if (opts.repair)
		printf("; %" PRIu64 " %s repaired\n", c.nr_repaired, c.is_ec ? "strips" : "copies");
	if (!ret && (c.nr_lost || (!opts.repair && (c.nr_differ || c.nr_missing))))
		ret = EXIT_FAIL;
out:
	for (int k = 0; k < SD_MAX_COPIES; k++)
		free(c.bufs[k]);
	for (int k = 0; k < SD_EC_MAX_STRIPS; k++)
		free(c.rebuilt[k]);
	if (c.is_ec)
		ec_codec_free(&c.codec);
	if (c.ring.vnodes)
		ring_free(&c.ring);
	free(inode);
	return ret;
}
