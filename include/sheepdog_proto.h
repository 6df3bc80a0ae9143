/*
 * The public sheepdog client protocol, byte-compatible with what QEMU's
 * sheepdog block driver speaks (see shared/PROTOCOL.md).
 *
 * Host byte order, natural alignment, every header exactly 48 bytes.
 */
#ifndef SHEEPDOG_PROTO_H
#define SHEEPDOG_PROTO_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#define SD_PROTO_VER 0x01
#define SD_LISTEN_PORT 7000

/* public opcodes */
#define SD_OP_CREATE_AND_WRITE_OBJ 0x01
#define SD_OP_READ_OBJ 0x02
#define SD_OP_WRITE_OBJ 0x03
#define SD_OP_REMOVE_OBJ 0x04 /* reserved: never sent by QEMU */
#define SD_OP_NEW_VDI 0x11
#define SD_OP_LOCK_VDI 0x12
#define SD_OP_RELEASE_VDI 0x13
#define SD_OP_GET_VDI_INFO 0x14
#define SD_OP_READ_VDIS 0x15
#define SD_OP_FLUSH_VDI 0x16
#define SD_OP_DEL_VDI 0x17
#define SD_OP_GET_CLUSTER_DEFAULT 0x18

/* flags */
#define SD_FLAG_CMD_WRITE 0x01
#define SD_FLAG_CMD_COW 0x02
#define SD_FLAG_CMD_CACHE 0x04
#define SD_FLAG_CMD_DIRECT 0x08

/* result codes */
#define SD_RES_SUCCESS 0x00
#define SD_RES_UNKNOWN 0x01
#define SD_RES_NO_OBJ 0x02
#define SD_RES_EIO 0x03
#define SD_RES_VDI_EXIST 0x04
#define SD_RES_INVALID_PARMS 0x05
#define SD_RES_SYSTEM_ERROR 0x06
#define SD_RES_VDI_LOCKED 0x07
#define SD_RES_NO_VDI 0x08
#define SD_RES_NO_BASE_VDI 0x09
#define SD_RES_VDI_READ 0x0A
#define SD_RES_VDI_WRITE 0x0B
#define SD_RES_BASE_VDI_READ 0x0C
#define SD_RES_BASE_VDI_WRITE 0x0D
#define SD_RES_NO_TAG 0x0E
#define SD_RES_STARTUP 0x0F
#define SD_RES_VDI_NOT_LOCKED 0x10
#define SD_RES_SHUTDOWN 0x11
#define SD_RES_NO_MEM 0x12
#define SD_RES_FULL_VDI 0x13
#define SD_RES_VER_MISMATCH 0x14
#define SD_RES_NO_SPACE 0x15
#define SD_RES_WAIT_FOR_FORMAT 0x16
#define SD_RES_WAIT_FOR_JOIN 0x17
#define SD_RES_JOIN_FAILED 0x18
#define SD_RES_HALT 0x19
#define SD_RES_READONLY 0x1A

/* object ids */
#define VDI_SPACE_SHIFT 32
#define VDI_BIT (UINT64_C(1) << 63)
#define VMSTATE_BIT (UINT64_C(1) << 62)
#define SD_NR_VDIS (1U << 24)
#define MAX_DATA_OBJS (1U << 20)
#define SD_DEFAULT_BLOCK_SIZE_SHIFT 22
#define SD_MIN_BLOCK_SIZE_SHIFT 20
/* this daemon refuses larger objects than 16 MiB (QEMU allows up to 2^31) */
#define SD_MAX_BLOCK_SIZE_SHIFT 24
#define SD_DATA_OBJ_SIZE (UINT64_C(1) << SD_DEFAULT_BLOCK_SIZE_SHIFT)
#define SD_MAX_VDI_LEN 256
#define SD_MAX_VDI_TAG_LEN 256
#define SD_MAX_CHILDREN 1024
#define SD_MAX_COPIES 31
#define SD_LOCK_TYPE_NORMAL 0
#define SD_LOCK_TYPE_SHARED 1
#define SD_INODE_HEADER_SIZE 4664
#define SD_INODE_SIZE (SD_INODE_HEADER_SIZE + 4 * MAX_DATA_OBJS)
#define SD_VDI_BITMAP_SIZE (SD_NR_VDIS / 8)

struct sd_req {
	uint8_t proto_ver;
	uint8_t opcode;
	uint16_t flags;
	uint32_t epoch;
	uint32_t id;
	uint32_t data_length;
	union {
		struct {
			uint64_t oid;
			uint64_t cow_oid;
			uint8_t copies;
			uint8_t copy_policy;
			uint8_t reserved[6];
			uint64_t offset;
		} obj;
		struct {
			uint64_t vdi_size;
			uint32_t base_vdi_id;
			uint8_t copies;
			uint8_t copy_policy;
			uint8_t store_policy;
			uint8_t block_size_shift;
			uint32_t snapid;
			uint32_t type;
			uint32_t pad[2];
		} vdi;
		/* internal requests (internal_proto.h) */
		struct {
			uint64_t ctime;
			uint8_t copies;
			uint8_t copy_policy;
			uint8_t block_size_shift;
			uint8_t reserved;
			uint32_t flags;
			uint32_t pad[4];
		} cluster;
		/* CREATE_AND_WRITE_PEER with SD_FLAG_CMD_COW (internal_proto.h) */
		struct {
			uint64_t oid;
			uint32_t wr_offset; /* the client's write inside the payload */
			uint32_t wr_length;
			uint8_t copies;
			uint8_t copy_policy;
			uint8_t reserved[6];
			uint64_t offset;
		} create;
		struct {
			uint32_t tracer_flags;
			uint32_t depth;
			uint64_t buffer_size;
			uint64_t offset;
			uint32_t format;
			uint32_t pad;
		} trace;
		uint32_t __pad[8];
	};
};

struct sd_rsp {
	uint8_t proto_ver;
	uint8_t opcode;
	uint16_t flags;
	uint32_t epoch;
	uint32_t id;
	uint32_t data_length;
	union {
		uint32_t result;
		struct {
			uint32_t __pad;
			uint8_t copies;
			uint8_t copy_policy;
			uint8_t reserved[2];
			uint32_t pad[6];
		} obj;
		struct {
			uint32_t __pad;
			uint32_t rsvd;
			uint32_t vdi_id;
			uint32_t pad[5];
		} vdi;
		struct {
			uint32_t __pad;
			uint8_t nr_copies;
			uint8_t copy_policy;
			uint8_t block_size_shift;
			uint8_t pad1;
			uint32_t pad[6];
		} cluster;
		/* internal responses (internal_proto.h) */
		struct {
			uint32_t __pad;
			uint32_t nr_nodes;
			uint32_t local_idx;
			uint32_t pad1;
			uint64_t store_size;
			uint64_t store_free;
		} node;
		struct {
			uint32_t __pad;
			uint32_t status;
			uint32_t epoch;
			uint32_t nr_epochs;
			uint64_t ctime;
			uint8_t copies;
			uint8_t block_size_shift;
			uint8_t flags; /* internal_proto.h: SD_CINFO_* */
			uint8_t copy_policy; /* the default scheme (ec.h); 0 from older sheep */
			uint8_t pad1[4];
		} cinfo;
		struct {
			uint32_t __pad;
			uint32_t pad1;
			uint64_t total_length;
			uint64_t generation;
			uint64_t pad2;
		} trace;
		uint32_t __rpad[8];
	};
};

/* inode: one object of SD_INODE_SIZE bytes */
struct sd_inode {
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	uint64_t create_time;
	uint64_t snap_ctime;
	uint64_t vm_clock_nsec;
	uint64_t vdi_size;
	uint64_t vm_state_size;
	uint16_t copy_policy;
	uint8_t nr_copies;
	uint8_t block_size_shift;
	uint32_t snap_id;
	uint32_t vdi_id;
	uint32_t parent_vdi_id;
	uint32_t child_vdi_id[SD_MAX_CHILDREN];
	uint32_t data_vdi_id[MAX_DATA_OBJS];
};

/* the first SD_INODE_HEADER_SIZE bytes of an inode: the same fields */
struct sd_inode_header {
	char name[SD_MAX_VDI_LEN];
	char tag[SD_MAX_VDI_TAG_LEN];
	uint64_t create_time;
	uint64_t snap_ctime;
	uint64_t vm_clock_nsec;
	uint64_t vdi_size;
	uint64_t vm_state_size;
	uint16_t copy_policy;
	uint8_t nr_copies;
	uint8_t block_size_shift;
	uint32_t snap_id;
	uint32_t vdi_id;
	uint32_t parent_vdi_id;
	uint32_t child_vdi_id[SD_MAX_CHILDREN];
};

_Static_assert(sizeof(struct sd_inode_header) == SD_INODE_HEADER_SIZE, "inode header size");
_Static_assert(sizeof(struct sd_req) == 48, "sd_req must be 48 bytes");
_Static_assert(sizeof(struct sd_rsp) == 48, "sd_rsp must be 48 bytes");
_Static_assert(offsetof(struct sd_inode, data_vdi_id) == SD_INODE_HEADER_SIZE,
	       "inode header layout");
_Static_assert(sizeof(struct sd_inode) == SD_INODE_SIZE, "inode layout");
_Static_assert(offsetof(struct sd_req, obj.offset) == 40, "obj req layout");
_Static_assert(offsetof(struct sd_req, vdi.snapid) == 32, "vdi req layout");
_Static_assert(offsetof(struct sd_req, create.copies) == offsetof(struct sd_req, obj.copies) &&
		       offsetof(struct sd_req, create.offset) == offsetof(struct sd_req, obj.offset),
	       "peer create layout");
_Static_assert(offsetof(struct sd_rsp, vdi.vdi_id) == 24, "vdi rsp layout");
_Static_assert(offsetof(struct sd_rsp, cluster.block_size_shift) == 22, "cluster rsp layout");

static inline uint64_t vid_to_vdi_oid(uint32_t vid)
{
	return VDI_BIT | ((uint64_t)vid << VDI_SPACE_SHIFT);
}

static inline uint64_t vid_to_data_oid(uint32_t vid, uint32_t idx)
{
	return ((uint64_t)vid << VDI_SPACE_SHIFT) | idx;
}

static inline uint64_t vid_to_vmstate_oid(uint32_t vid, uint32_t idx)
{
	return VMSTATE_BIT | ((uint64_t)vid << VDI_SPACE_SHIFT) | idx;
}

static inline uint32_t oid_to_vid(uint64_t oid)
{
	return (uint32_t)((oid >> VDI_SPACE_SHIFT) & (SD_NR_VDIS - 1));
}

static inline uint32_t oid_to_idx(uint64_t oid)
{
	return (uint32_t)(oid & (MAX_DATA_OBJS - 1));
}

static inline bool is_vdi_obj(uint64_t oid)
{
	return !!(oid & VDI_BIT);
}

static inline bool is_vmstate_obj(uint64_t oid)
{
	return !!(oid & VMSTATE_BIT);
}

static inline bool is_data_obj(uint64_t oid)
{
	return !is_vdi_obj(oid) && !is_vmstate_obj(oid);
}

/*
 * A valid oid: an inode has no index bits; any object has no reserved bits
 * (56-61 and 20-31) and a non-zero vid.
 */
static inline bool oid_is_valid(uint64_t oid)
{
	const uint64_t reserved = (UINT64_C(0x3f) << 56) | (UINT64_C(0xfff) << 20);

	if (oid & reserved)
		return false;
	if (oid_to_vid(oid) == 0)
		return false;
	if (is_vdi_obj(oid) && (is_vmstate_obj(oid) || oid_to_idx(oid)))
		return false;
	return true;
}

/* a deleted VDI keeps its vid (the probe chain) but loses its name */
static inline bool vdi_is_deleted(const struct sd_inode *inode)
{
	return inode->name[0] == '\0';
}

static inline bool vdi_is_snapshot(const struct sd_inode *inode)
{
	return inode->snap_ctime != 0;
}

#define FNV1A_64_INIT UINT64_C(0xcbf29ce484222325)
#define FNV_64_PRIME UINT64_C(0x100000001b3)

static inline uint64_t fnv_64a_buf(const void *buf, size_t len, uint64_t hval)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		hval ^= (uint64_t)p[i];
		hval *= FNV_64_PRIME;
	}
	return hval;
}

#endif
