/*
 * Who may run which op, and who may connect (access.c).
 */
#ifndef SHEEP_ACCESS_H
#define SHEEP_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

struct sd_op_template;

/* access.c: who may run which op (see there) */
enum access_class {
	ACCESS_PUBLIC, /* the VDI protocol: every client */
	ACCESS_ADMIN,  /* loopback, members and --admin-allow networks */
	ACCESS_MEMBER, /* cluster members (and loopback when a member is on it) */
};
/* 0, or -EINVAL for a bad ADDR[/BITS] */
int access_allow_add(const char *cidr);
enum access_class access_class_of(const struct sd_op_template *op);
/* SD_RES_SUCCESS or SD_RES_ACCESS_DENIED for a client at addr */
int access_check(const struct sd_op_template *op, const uint8_t addr[16]);
void access_log_refusal(const struct sd_op_template *op, const uint8_t addr[16]);
uint64_t access_nr_refused(void);
/* the listeners checked per connection (NBD, /metrics) */
enum access_service {
	ACCESS_NBD,	/* loopback and --nbd-allow networks */
	ACCESS_METRICS, /* the admin rule: loopback, members, --admin-allow */
};
/* --nbd-allow CIDR: 0, or -EINVAL; how many were given */
int access_nbd_allow_add(const char *cidr);
int access_nbd_nr_allow(void);
/* may the client of the accepted connection fd use svc? A refusal is logged */
bool access_conn_ok(enum access_service svc, int fd);
uint64_t access_nr_conns_refused(void);

#endif
