/*
 * For unit tests that link sheep/metrics.c without the daemon's access
 * rules (access.c needs the group): every connection is let in.
 */
#include "access.h"

bool access_conn_ok(enum access_service svc, int fd)
{
	return true;
}
