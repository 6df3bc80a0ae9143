/*
 * proto-client: a protocol test client that speaks the public sheepdog
 * protocol byte for byte as QEMU's sheepdog driver does (shared/PROTOCOL.md)
 * and checks every reply field QEMU reads. One line per step on stdout, no
 * times and no ports, so that a golden file can hold the output; a failed
 * check prints an indented "FAIL:" line and makes the exit status 1.
 */
#ifndef PROTO_CLIENT_H
#define PROTO_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto_util.h"

#define MiB (UINT32_C(1) << 20)
#define OBJ_SIZE (UINT32_C(1) << SD_DEFAULT_BLOCK_SIZE_SHIFT)

extern int pc_port;
extern const char *pc_addr; /* -a, default 127.0.0.1 */
extern int nr_fail;

#define step(fmt, ...) printf(fmt "\n", ##__VA_ARGS__)
/* print an indented FAIL line and count it */
void pc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define fail(fmt, ...) pc_fail(fmt, ##__VA_ARGS__)
/* print nothing when cond holds, a FAIL line otherwise; returns cond */
#define check(cond, fmt, ...) ((cond) ? true : (fail(fmt, ##__VA_ARGS__), false))

/* "SUCCESS", "VDI_EXIST", ... or "0x%x" */
const char *res_name(uint32_t result);

/* a blocking connection to pc_addr:port with a receive timeout (ms); -1 on failure */
int pc_connect(int timeout_ms);

/* 0, or -errno (-ECONNRESET on EOF) */
int send_all(int fd, const void *buf, size_t len);
int send_req(int fd, const struct sd_req *hdr, const void *data, uint32_t wlen);

/*
 * Receive one response header and up to cap payload bytes into buf (the
 * rest is drained). Returns 0, -ECONNRESET on EOF, -EAGAIN on timeout or
 * another -errno. Checks that an error reply carries no payload.
 */
int recv_rsp(int fd, struct sd_rsp *rsp, void *buf, uint32_t cap);

/* a FAIL line for a transport error (-errno from the calls above) */
void transport_fail(const char *what, int ret);

/* send + receive on fd; returns 0 or -errno as recv_rsp */
int exec_req(int fd, const struct sd_req *hdr, const void *wdata, uint32_t wlen, void *rbuf,
	     uint32_t rcap, struct sd_rsp *rsp);

/* the same on a new short connection, as QEMU's control requests */
int exec_ctl(const struct sd_req *hdr, const void *wdata, uint32_t wlen, void *rbuf,
	     uint32_t rcap, struct sd_rsp *rsp);

/* request headers exactly as QEMU builds them */
void vdi_hdr(struct sd_req *h, uint8_t opcode, uint32_t data_length);
void obj_hdr(struct sd_req *h, uint8_t opcode, uint16_t flags, uint64_t oid, uint64_t offset,
	     uint32_t len, uint8_t copies, uint32_t id);

/* VDI operations on a new ctl connection; return the result, or -1 on a transport error */
int ctl_new_vdi(const char *name, uint64_t size, uint32_t base, uint32_t snapshot,
		uint8_t copies, uint32_t *vid);
int ctl_lookup(uint8_t opcode, const char *name, const char *tag, uint32_t snapid,
	       uint32_t *vid);
int ctl_release(const char *name, uint32_t vid);
int ctl_del(const char *name, const char *tag, uint32_t snapid, uint32_t base);
int ctl_read_vdis(uint8_t *bitmap);
int ctl_cluster_default(uint8_t *shift);

/* deterministic data */
void fill_pattern(void *buf, size_t len, uint64_t seed);

/* the QEMU scenarios (proto-qemu.c) */
int scenario_qemu(void);
int scenario_pipeline(void);

/* the bad-input scenarios (proto-bad.c) */
int scenario_bad_opcode(void);
int scenario_bad_length(void);
int scenario_short_body(void);
int scenario_bad_range(void);
int scenario_bad_name(void);
int scenario_garbage(void);
int scenario_unformatted(void);

/* the namespace scenarios (proto-ns.c) */
int scenario_wedge(void);
int scenario_lookup(void);
int scenario_set_tag(void);
int scenario_snapshot(void);
/* a snapshot's frozen map, every node's answers alike (proto-snap.c) */
int scenario_snap_map(void);
int scenario_ns_order(void);
/* the data-path scenarios (proto-inode.c) */
int scenario_inode_write(void);
int scenario_create(void);
int scenario_past_end(void);
int scenario_empty_answers(void);
int scenario_discard(void);
int scenario_partial_create(void);
/* the access scenario (proto-access.c) */
int scenario_access(void);
int scenario_reply_flood(void);

#endif
