/*
 * Unit tests of sheep/vdi*.c, the VDI namespace ops, on the real VDI table
 * (vdi_table.c), with the gateway (inodes in memory), this node's store
 * (a list of the data objects it holds) and the deleted records as
 * stand-ins. What is checked:
 *
 * - NEW_VDI: a new VDI, a name taken, more copies than members; a
 *   snapshot makes the working VDI a snapshot and moves its lock, with its
 *   holder, to the new working VDI;
 * - locks have owners: a second client is refused, the holder locks again,
 *   only the holder releases; an operator's UNLOCK_VDI is refused while the
 *   holder's node is a member (the members of the op's place), forced or
 *   not, and this node disconnects its own client when forced; a node's
 *   leave releases its clients' locks and no other's;
 * - DEL_VDI: the objects no live VDI reads are removed here, the others
 *   kept and recorded; the last reader's delete frees the deleted
 *   snapshot's kept objects (space comes back);
 * - ALTER_COPY: the header's copies written by the node asked, the table's
 *   changed by the notification every node applies (and recovery rerun
 *   from the main thread), each refusal with nothing written.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal_proto.h"
#include "logger.h"
#include "proto_util.h"
#include "deleted.h"
#include "gateway.h"
#include "group.h"
#include "ordered.h"
#include "request.h"
#include "vdi.h"
#include "vdi_table.h"
#include "store/store.h"

/* ---- the gateway: inodes in memory ---- */

#define MAX_INODES 16
static struct {
	uint32_t vid;
	uint8_t *buf; /* SD_INODE_SIZE bytes */
} inodes[MAX_INODES];

static uint8_t *inode_of(uint64_t oid, bool make)
{
	uint32_t vid = oid_to_vid(oid);

	ck_assert(is_vdi_obj(oid));
	for (int i = 0; i < MAX_INODES; i++)
		if (inodes[i].buf && inodes[i].vid == vid)
			return inodes[i].buf;
	for (int i = 0; make && i < MAX_INODES; i++)
		if (!inodes[i].buf) {
			inodes[i].vid = vid;
			inodes[i].buf = calloc(1, SD_INODE_SIZE);
			return inodes[i].buf;
		}
	return NULL;
}

int gateway_read(uint64_t oid, void *buf, uint32_t len, uint64_t off, const struct vdi_attr *attr)
{
	const uint8_t *d = inode_of(oid, false);

	(void)attr;
	if (!d)
		return SD_RES_NO_OBJ;
	memcpy(buf, d + off, len);
	return SD_RES_SUCCESS;
}

int gateway_write(uint64_t oid, const void *buf, uint32_t len, uint64_t off, unsigned int flags,
		  const struct vdi_attr *attr)
{
	uint8_t *d = inode_of(oid, false);

	(void)flags;
	(void)attr;
	if (!d)
		return SD_RES_NO_OBJ;
	memcpy(d + off, buf, len);
	return SD_RES_SUCCESS;
}

int gateway_create(uint64_t oid, uint64_t cow_oid, const void *buf, uint32_t len, uint64_t off,
		   unsigned int flags, const struct vdi_attr *attr)
{
	(void)cow_oid;
	(void)flags;
	(void)attr;
	memcpy(inode_of(oid, true) + off, buf, len);
	return SD_RES_SUCCESS;
}

/* ---- the cluster's size and the ordered notification (ALTER_COPY) ---- */

static int nr_nodes = 3, nr_gateways;
static uint32_t notified_vid;
static int nr_notified;

int group_nr_nodes(void)
{
	return nr_nodes;
}

int group_nr_gateways(void)
{
	return nr_gateways;
}

void ordered_notify_header(struct request *r, uint32_t vid)
{
	(void)r;
	notified_vid = vid;
	nr_notified++;
}

/* ---- this node: its id, its store's data objects, the deleted records ---- */

static const struct sd_node_id self = { .addr = { [15] = 1 }, .port = 7000 };
static const struct sd_node_id other = { .addr = { [15] = 1 }, .port = 7001 };

const struct sd_node_id *group_self(void)
{
	return &self;
}

/* the cluster's format: 2 copies, unless a test formats it erasure-coded */
static uint8_t cluster_copies = 2, cluster_policy;

uint8_t group_copies(void)
{
	return cluster_copies;
}

uint8_t group_copy_policy(void)
{
	return cluster_policy;
}

#define MAX_LOCAL 64
static uint64_t local[MAX_LOCAL];
static int nr_local;

static bool holds(uint64_t oid)
{
	for (int i = 0; i < nr_local; i++)
		if (local[i] == oid)
			return true;
	return false;
}

static int store_for_each(int (*fn)(uint64_t oid, void *arg), void *arg)
{
	uint64_t copy[MAX_LOCAL];
	int n = nr_local;

	memcpy(copy, local, sizeof(copy));
	for (int i = 0; i < n; i++) {
		int ret = fn(copy[i], arg);

		if (ret)
			return ret;
	}
	return 0;
}

static int store_remove(uint64_t oid)
{
	for (int i = 0; i < nr_local; i++)
		if (local[i] == oid) {
			local[i] = local[--nr_local];
			return SD_RES_SUCCESS;
		}
	return SD_RES_NO_OBJ;
}

static const struct store_driver fake_store = {
	.name = "fake",
	.for_each = store_for_each,
	.remove = store_remove,
};
const struct store_driver *sd_store = &fake_store;

/* the deleted VDIs' kept indexes, as the last deleted_add of each gave them */
static struct del_rec {
	uint32_t vid;
	uint8_t kept[MAX_DATA_OBJS / 8];
} dels[4];

static struct del_rec *del_of(uint32_t vid, bool make)
{
	for (int i = 0; i < 4; i++)
		if (dels[i].vid == vid)
			return &dels[i];
	for (int i = 0; make && i < 4; i++)
		if (!dels[i].vid) {
			dels[i].vid = vid;
			return &dels[i];
		}
	return NULL;
}

int deleted_add(uint32_t vid, const uint8_t *shared)
{
	memcpy(del_of(vid, true)->kept, shared, MAX_DATA_OBJS / 8);
	return 0;
}

uint32_t deleted_kept(uint32_t vid, uint8_t *kept)
{
	struct del_rec *r = del_of(vid, false);
	uint32_t n = 0;

	memset(kept, 0, MAX_DATA_OBJS / 8);
	if (!r)
		return 0;
	memcpy(kept, r->kept, MAX_DATA_OBJS / 8);
	for (uint32_t i = 0; i < MAX_DATA_OBJS; i++)
		n += sd_vid_test(kept, i) != 0;
	return n;
}

/* ---- requests ---- */

static struct sd_node members[3];
static char names[SD_MAX_VDI_LEN + SD_MAX_VDI_TAG_LEN];
static struct request req;

static struct request *vdi_req(uint8_t opcode, const char *name, const struct sd_lock_owner *owner)
{
	memset(&req, 0, sizeof(req));
	memset(names, 0, sizeof(names));
	snprintf(names, SD_MAX_VDI_LEN, "%s", name);
	req.rq.opcode = opcode;
	req.rq.flags = SD_FLAG_CMD_WRITE;
	req.rq.data_length = sizeof(names);
	req.data = names;
	req.ord.nr_members = 3;
	req.ord.nr_storing = 3;
	req.ord.members = members;
	if (owner)
		req.ord.owner = *owner;
	return &req;
}

static uint32_t new_vdi(const char *name, uint64_t size)
{
	struct request *r = vdi_req(SD_OP_NEW_VDI, name, NULL);

	r->rq.vdi.vdi_size = size;
	ck_assert_int_eq(vdi_op_new(r), SD_RES_SUCCESS);
	return r->rp.vdi.vdi_id;
}

static uint32_t snapshot(const char *name)
{
	struct request *r = vdi_req(SD_OP_NEW_VDI, name, NULL);
	uint32_t working;

	ck_assert_int_eq(vdi_find_vid(name, 0, "", &working), SD_RES_SUCCESS);
	r->rq.vdi.base_vdi_id = working;
	r->rq.vdi.snapid = 1;
	r->rq.vdi.vdi_size = 16 << 20;
	ck_assert_int_eq(vdi_op_new(r), SD_RES_SUCCESS);
	if (r->ord.after) /* on the main thread, as ordered.c calls it */
		r->ord.after(r);
	return r->rp.vdi.vdi_id;
}

static int lock(const char *name, const struct sd_lock_owner *o)
{
	return vdi_op_lock(vdi_req(SD_OP_LOCK_VDI, name, o));
}

static int release(const char *name, uint32_t vid, const struct sd_lock_owner *o)
{
	struct request *r = vdi_req(SD_OP_RELEASE_VDI, name, o);

	r->rq.vdi.base_vdi_id = vid;
	return vdi_op_release(r);
}

static int nr_broken, nr_moved;
static uint32_t moved_from, moved_to;

static int unlock(uint32_t vid, bool force)
{
	struct request *r = vdi_req(SD_OP_UNLOCK_VDI, "", NULL);
	int broken_before = nr_broken, ret;

	r->rq.flags = 0;
	r->rq.data_length = 0;
	r->rq.vdi.base_vdi_id = vid;
	r->rq.vdi.type = force ? SD_UNLOCK_FORCE : 0;
	ret = vdi_op_unlock(r);
	ck_assert_int_eq(nr_broken, broken_before); /* never on the apply thread */
	if (r->ord.after)
		r->ord.after(r);
	return ret;
}

static void on_moved(uint32_t from, uint32_t to)
{
	moved_from = from;
	moved_to = to;
	nr_moved++;
}

static void on_broken(uint32_t vid, const struct sd_lock_owner *owner)
{
	(void)vid;
	ck_assert(!memcmp(&owner->node, &self, sizeof(self)));
	nr_broken++;
}

/* a client of this node (conn 5) and one of another node (conn 9) */
static struct sd_lock_owner mine, theirs;

static void setup(void)
{
	for (int i = 0; i < MAX_INODES; i++) {
		free(inodes[i].buf);
		inodes[i].buf = NULL;
	}
	nr_local = 0;
	memset(dels, 0, sizeof(dels));
	nr_broken = 0;
	nr_moved = 0;
	vdi_table_clear();
	ck_assert_int_eq(vdi_table_init(), 0);
	memset(members, 0, sizeof(members));
	members[0].nid = self;
	members[1].nid = other;
	members[2].nid.port = 7002;
	mine = (struct sd_lock_owner){ .node = self, .addr = { [15] = 1 }, .conn = 5 };
	theirs = (struct sd_lock_owner){ .node = other, .addr = { [15] = 2 }, .conn = 9 };
	vdi_set_lock_hooks(on_broken, on_moved);
}

/* ---- tests ---- */

START_TEST(test_new)
{
	struct request *r;
	uint32_t vid = new_vdi("vm1", 16 << 20);

	ck_assert_uint_ne(vid, 0);
	ck_assert_ptr_nonnull(inode_of(vid_to_vdi_oid(vid), false));
	r = vdi_req(SD_OP_NEW_VDI, "vm1", NULL);
	r->rq.vdi.vdi_size = 1 << 20;
	ck_assert_int_eq(vdi_op_new(r), SD_RES_VDI_EXIST);
	r = vdi_req(SD_OP_NEW_VDI, "vm2", NULL);
	r->rq.vdi.vdi_size = 1 << 20;
	r->rq.vdi.copies = 4; /* three members */
	ck_assert_int_eq(vdi_op_new(r), SD_RES_TOO_FEW_NODES);
}
END_TEST

/* NEW_VDI with copies and copy_policy as collie and QEMU's driver send them */
static int new_scheme(const char *name, uint32_t base, uint8_t copies, uint8_t policy)
{
	struct request *r = vdi_req(SD_OP_NEW_VDI, name, NULL);

	r->rq.vdi.vdi_size = 16 << 20;
	r->rq.vdi.base_vdi_id = base;
	r->rq.vdi.copies = copies;
	r->rq.vdi.copy_policy = policy;
	return vdi_op_new(r);
}

START_TEST(test_erasure_code)
{
	struct vdi_attr attr;
	uint32_t vid, snap, clone, working;

	/* 2:1 is copy_policy 0x11, copies 3 (0: D + P) */
	ck_assert_int_eq(new_scheme("ec", 0, 0, 0x11), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("ec", 0, "", &vid), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_get_attr(vid, &attr), SD_RES_SUCCESS);
	ck_assert_uint_eq(attr.copy_policy, 0x11);
	ck_assert_uint_eq(attr.nr_copies, 3);
	ck_assert_uint_eq(vdi_copy_policy(vid), 0x11);
	ck_assert_uint_eq(((struct sd_inode *)(void *)inode_of(vid_to_vdi_oid(vid), false))->copy_policy,
			  0x11);
	/* as QEMU sends it: copies D + P with the policy */
	ck_assert_int_eq(new_scheme("ec2", 0, 3, 0x11), SD_RES_SUCCESS);
	/* refused: no such code (6:1, 2:0), copies that are not D + P, more strips than nodes */
	ck_assert_int_eq(new_scheme("bad", 0, 0, 0x31), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(new_scheme("bad", 0, 0, 0x10), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(new_scheme("bad", 0, 2, 0x11), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(new_scheme("bad", 0, 0, 0x22), SD_RES_TOO_FEW_NODES);
	/* a snapshot and a clone keep the scheme */
	snap = snapshot("ec");
	ck_assert_uint_eq(vdi_copy_policy(snap), 0x11);
	ck_assert_int_eq(vdi_find_vid("ec", 0, "", &working), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(working), 0x11);
	ck_assert_int_eq(new_scheme("ec-clone", vid, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("ec-clone", 0, "", &clone), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(clone), 0x11);
	/* copies and D:P never mix: a replicated clone of it, or an erasure-coded one of a replicated VDI */
	ck_assert_int_eq(new_scheme("mix", vid, 2, 0), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(new_scheme("rep", 0, 2, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("rep", 0, "", &vid), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(vid), 0);
	ck_assert_int_eq(new_scheme("mix", vid, 0, 0x11), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(new_scheme("rep-clone", vid, 0, 0), SD_RES_SUCCESS);
}
END_TEST

/*
 * A cluster formatted 2:1 (cluster format -c 2:1): a VDI created without a
 * scheme is 2:1, one that names copies is replicated, and a clone of a
 * replicated VDI stays replicated (its base's scheme wins).
 */
START_TEST(test_erasure_code_default)
{
	uint32_t vid, rep;

	cluster_copies = 3;
	cluster_policy = 0x11;
	ck_assert_int_eq(new_scheme("d", 0, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("d", 0, "", &vid), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(vid), 0x11);
	ck_assert_int_eq(vdi_copies(vid), 3);
	ck_assert_int_eq(new_scheme("r", 0, 2, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("r", 0, "", &rep), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(rep), 0);
	ck_assert_int_eq(vdi_copies(rep), 2);
	ck_assert_int_eq(new_scheme("r-clone", rep, 0, 0), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("r-clone", 0, "", &vid), SD_RES_SUCCESS);
	ck_assert_uint_eq(vdi_copy_policy(vid), 0);
	ck_assert_int_eq(vdi_copies(vid), 2);
}
END_TEST

START_TEST(test_lock_owners)
{
	uint32_t vid = new_vdi("vm1", 16 << 20);

	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(lock("vm1", &mine), SD_RES_VDI_LOCKED);
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS); /* its holder again */
	ck_assert_int_eq(release("vm1", vid, &mine), SD_RES_LOCK_NOT_OWNER);
	ck_assert_int_eq(release("vm1", vid, &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(release("vm1", vid, &theirs), SD_RES_VDI_NOT_LOCKED);
	ck_assert_int_eq(lock("vm1", &mine), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_unlock_by_an_operator)
{
	uint32_t vid = new_vdi("vm1", 16 << 20), vid2 = new_vdi("vm2", 16 << 20);

	/* its holder's node is a member: refused, then forced (not this node's client) */
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(unlock(vid, false), SD_RES_VDI_LOCKED);
	ck_assert_int_eq(unlock(vid, true), SD_RES_SUCCESS);
	ck_assert_int_eq(nr_broken, 0);
	ck_assert_int_eq(unlock(vid, false), SD_RES_VDI_NOT_LOCKED);
	/* this node's client: forced away, this node disconnects it */
	ck_assert_int_eq(lock("vm2", &mine), SD_RES_SUCCESS);
	ck_assert_int_eq(unlock(vid2, true), SD_RES_SUCCESS);
	ck_assert_int_eq(nr_broken, 1);
	/* the holder's node is gone (not among the op's members): no force needed */
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	memset(&members[1], 0, sizeof(members[1]));
	ck_assert_int_eq(unlock(vid, false), SD_RES_SUCCESS);
	ck_assert_int_eq(unlock(0x123456, false), SD_RES_NO_VDI);
}
END_TEST

START_TEST(test_node_leaves)
{
	uint32_t vid = new_vdi("vm1", 16 << 20);

	new_vdi("vm2", 16 << 20);
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(lock("vm2", &mine), SD_RES_SUCCESS);
	/* another client of the same node is no holder: nothing released */
	ck_assert_int_eq(vdi_release_owner(&(struct sd_lock_owner){ .node = other, .conn = 1 },
					   false),
			 0);
	ck_assert_int_eq(vdi_release_owner(&(struct sd_lock_owner){ .node = other }, true), 1);
	ck_assert_int_eq(lock("vm1", &mine), SD_RES_SUCCESS);
	ck_assert_int_eq(lock("vm2", &theirs), SD_RES_VDI_LOCKED);
	ck_assert_int_eq(release("vm1", vid, &mine), SD_RES_SUCCESS);
}
END_TEST

START_TEST(test_snapshot_moves_the_lock)
{
	uint32_t old, cur;

	new_vdi("vm1", 16 << 20);
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("vm1", 0, "", &old), SD_RES_SUCCESS);
	cur = snapshot("vm1");
	ck_assert_uint_ne(cur, old);
	/* the working VDI is the new one, still held by the same client */
	ck_assert_int_eq(lock("vm1", &mine), SD_RES_VDI_LOCKED);
	ck_assert_int_eq(release("vm1", old, &theirs), SD_RES_VDI_NOT_LOCKED);
	ck_assert_int_eq(release("vm1", cur, &theirs), SD_RES_SUCCESS);
	/* another node's client: that node's front end follows, not this one's */
	ck_assert_int_eq(nr_moved, 0);

	/* this node's client: its binding follows to the new working VDI */
	ck_assert_int_eq(lock("vm1", &mine), SD_RES_SUCCESS);
	old = cur;
	cur = snapshot("vm1");
	ck_assert_int_eq(nr_moved, 1);
	ck_assert_uint_eq(moved_from, old);
	ck_assert_uint_eq(moved_to, cur);
}
END_TEST

/* object idx of vid in the map of vid's inode, and a copy of it on this node */
static void allocate(uint32_t vid, uint32_t idx, uint32_t owner)
{
	uint8_t *inode = inode_of(vid_to_vdi_oid(vid), false);

	memcpy(inode + SD_INODE_HEADER_SIZE + 4 * idx, &owner, 4);
	if (owner == vid)
		local[nr_local++] = vid_to_data_oid(vid, idx);
}

START_TEST(test_delete_and_space)
{
	uint32_t snap, work;
	struct request *r;

	/* vm1 with objects 0-3; a snapshot; the working VDI writes object 0 anew */
	snap = new_vdi("vm1", 16 << 20);
	for (uint32_t i = 0; i < 4; i++)
		allocate(snap, i, snap);
	work = snapshot("vm1");
	for (uint32_t i = 1; i < 4; i++)
		allocate(work, i, snap);
	allocate(work, 0, work);
	/* the snapshot is deleted: objects 1-3 stay for vm1, object 0 goes */
	r = vdi_req(SD_OP_DEL_VDI, "vm1", NULL);
	r->rq.vdi.snapid = 1;
	ck_assert_int_eq(vdi_op_del(r), SD_RES_SUCCESS);
	ck_assert(!holds(vid_to_data_oid(snap, 0)));
	for (uint32_t i = 1; i < 4; i++)
		ck_assert(holds(vid_to_data_oid(snap, i)));
	ck_assert(!sd_vid_test(del_of(snap, false)->kept, 0));
	ck_assert(sd_vid_test(del_of(snap, false)->kept, 1));
	/* the last reader goes: so do they, and the record keeps nothing */
	r = vdi_req(SD_OP_DEL_VDI, "vm1", NULL);
	ck_assert_int_eq(vdi_op_del(r), SD_RES_SUCCESS);
	ck_assert_int_eq(nr_local, 0);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert(!sd_vid_test(del_of(snap, false)->kept, i));
	r = vdi_req(SD_OP_DEL_VDI, "vm1", NULL);
	ck_assert_int_eq(vdi_op_del(r), SD_RES_NO_VDI);
}
END_TEST

START_TEST(test_get_locks)
{
	struct sd_vdi_lock locks[4];
	struct request *r;
	uint32_t vid = new_vdi("vm1", 16 << 20);

	new_vdi("vm2", 16 << 20);
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	r = vdi_req(SD_OP_GET_VDI_LOCKS, "", NULL);
	r->rq.flags = 0;
	r->rq.data_length = sizeof(locks);
	r->data = locks;
	ck_assert_int_eq(vdi_op_get_locks(r), SD_RES_SUCCESS);
	ck_assert_uint_eq(r->rp.data_length, sizeof(locks[0]));
	ck_assert_uint_eq(locks[0].vid, vid);
	ck_assert(!memcmp(&locks[0].owner, &theirs, sizeof(theirs)));
}
END_TEST

static int nr_copies_changed;

static void on_copies_changed(void)
{
	nr_copies_changed++;
}

static int alter_copy(uint32_t vid, uint8_t copies)
{
	struct request *r = vdi_req(SD_OP_ALTER_COPY, "", NULL);

	r->rq.flags = 0;
	r->rq.data_length = 0;
	r->rq.vdi.base_vdi_id = vid;
	r->rq.vdi.copies = copies;
	r->rp.result = (uint32_t)vdi_op_alter_copy(r);
	if (vdi_op_alter_copy_held(r))
		vdi_op_alter_copy_notify(r);
	return (int)r->rp.result;
}

/* NOTIFY_VDI_HEADER of vid as every node applies it, then its main-thread part */
static void header_changed(uint32_t vid)
{
	struct request *r = vdi_req(SD_OP_NOTIFY_VDI_HEADER, "", NULL);
	int before = nr_copies_changed;

	r->rq.flags = 0;
	r->rq.data_length = 0;
	r->rq.vdi.base_vdi_id = vid;
	ck_assert_int_eq(vdi_op_header_changed(r), SD_RES_SUCCESS);
	ck_assert_int_eq(nr_copies_changed, before); /* never on the apply thread */
	if (r->ord.after)
		r->ord.after(r);
}

static uint8_t header_copies(uint32_t vid)
{
	return ((struct sd_inode *)(void *)inode_of(vid_to_vdi_oid(vid), false))->nr_copies;
}

/*
 * ALTER_COPY: the node asked checks the change and writes the header's
 * copies; the table (the gateways' placement) changes only when the
 * notification is applied, and then this node's recovery runs again.
 * Refused with nothing written: an unknown vid, an erasure-coded VDI, 0
 * copies, more copies than storing nodes; a VDI a client holds is not.
 */
START_TEST(test_alter_copy)
{
	uint32_t vid = new_vdi("vm1", 16 << 20), ec;

	nr_copies_changed = 0;
	nr_notified = 0;
	vdi_set_copies_hook(on_copies_changed);
	ck_assert_int_eq(vdi_copies(vid), 2);
	ck_assert_int_eq(alter_copy(vid, 3), SD_RES_SUCCESS);
	ck_assert_uint_eq(header_copies(vid), 3);
	ck_assert_int_eq(nr_notified, 1);
	ck_assert_uint_eq(notified_vid, vid);
	ck_assert_int_eq(vdi_copies(vid), 2); /* not before the notification */
	header_changed(vid);
	ck_assert_int_eq(vdi_copies(vid), 3);
	ck_assert_int_eq(nr_copies_changed, 1);
	/* the same count: the notification changes nothing, recovery is not rerun */
	ck_assert_int_eq(alter_copy(vid, 3), SD_RES_SUCCESS);
	header_changed(vid);
	ck_assert_int_eq(nr_copies_changed, 1);
	ck_assert_int_eq(alter_copy(vid, 1), SD_RES_SUCCESS);
	header_changed(vid);
	ck_assert_int_eq(vdi_copies(vid), 1);
	ck_assert_int_eq(nr_copies_changed, 2);

	nr_notified = 0;
	ck_assert_int_eq(alter_copy(0x123456, 2), SD_RES_NO_VDI);
	ck_assert_int_eq(alter_copy(vid, 0), SD_RES_INVALID_PARMS);
	ck_assert_int_eq(alter_copy(vid, 4), SD_RES_TOO_FEW_NODES);
	nr_gateways = 1; /* 3 members, one of them a gateway: 2 store */
	ck_assert_int_eq(alter_copy(vid, 3), SD_RES_TOO_FEW_NODES);
	ck_assert_int_eq(alter_copy(vid, 2), SD_RES_SUCCESS);
	nr_gateways = 0;
	header_changed(vid);
	/* a client's lock is no refusal: its I/O goes on (the copies fence) */
	ck_assert_int_eq(lock("vm1", &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(alter_copy(vid, 2), SD_RES_SUCCESS);
	ck_assert_int_eq(release("vm1", vid, &theirs), SD_RES_SUCCESS);
	ck_assert_int_eq(new_scheme("ec", 0, 0, 0x11), SD_RES_SUCCESS);
	ck_assert_int_eq(vdi_find_vid("ec", 0, "", &ec), SD_RES_SUCCESS);
	ck_assert_int_eq(alter_copy(ec, 2), SD_RES_INVALID_PARMS);
	ck_assert_uint_eq(header_copies(ec), 3);
	ck_assert_uint_eq(header_copies(vid), 2);
	ck_assert_int_eq(nr_notified, 2); /* the two successes */
	vdi_set_copies_hook(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vdi");
	TCase *tc = tcase_create("ops");
	SRunner *sr;
	int nr_failed;

	sd_log_init("/dev/null", SDOG_ERR, "test");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_new);
	tcase_add_test(tc, test_lock_owners);
	tcase_add_test(tc, test_unlock_by_an_operator);
	tcase_add_test(tc, test_node_leaves);
	tcase_add_test(tc, test_snapshot_moves_the_lock);
	tcase_add_test(tc, test_delete_and_space);
	tcase_add_test(tc, test_get_locks);
	tcase_add_test(tc, test_erasure_code);
	tcase_add_test(tc, test_erasure_code_default);
	tcase_add_test(tc, test_alter_copy);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nr_failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nr_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
