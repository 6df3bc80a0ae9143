/* The one table of result messages. */
#include <stdio.h>

#include "internal_proto.h"
#include "util.h"

static const char *const messages[] = {
	[SD_RES_SUCCESS] = "success",
	[SD_RES_UNKNOWN] = "unknown error",
	[SD_RES_NO_OBJ] = "no object found",
	[SD_RES_EIO] = "i/o error",
	[SD_RES_VDI_EXIST] = "vdi exists already",
	[SD_RES_INVALID_PARMS] = "invalid parameters",
	[SD_RES_SYSTEM_ERROR] = "system error",
	[SD_RES_VDI_LOCKED] = "vdi is locked",
	[SD_RES_NO_VDI] = "no vdi found",
	[SD_RES_NO_BASE_VDI] = "no base vdi found",
	[SD_RES_VDI_READ] = "cannot read requested vdi",
	[SD_RES_VDI_WRITE] = "cannot write requested vdi",
	[SD_RES_BASE_VDI_READ] = "cannot read base vdi",
	[SD_RES_BASE_VDI_WRITE] = "cannot write base vdi",
	[SD_RES_NO_TAG] = "requested tag is not found",
	[SD_RES_STARTUP] = "system is still booting",
	[SD_RES_VDI_NOT_LOCKED] = "vdi is not locked",
	[SD_RES_SHUTDOWN] = "system is shutting down",
	[SD_RES_NO_MEM] = "out of memory on server",
	[SD_RES_FULL_VDI] = "maximum number of vdis reached",
	[SD_RES_VER_MISMATCH] = "protocol version mismatch",
	[SD_RES_NO_SPACE] = "server has no space for new objects",
	[SD_RES_WAIT_FOR_FORMAT] = "cluster is not formatted",
	[SD_RES_WAIT_FOR_JOIN] = "waiting for other nodes to join",
	[SD_RES_JOIN_FAILED] = "node failed to join the cluster",
	[SD_RES_HALT] = "cluster is halted: fewer live nodes than copies",
	[SD_RES_READONLY] = "object is read-only (it belongs to a snapshot)",
	[SD_RES_NO_SUPPORT] = "operation is not supported by this daemon",
	[SD_RES_NOT_FORMATTED] = "cluster is not formatted",
	[SD_RES_ALREADY_FORMATTED] = "cluster is already formatted",
	[SD_RES_TRACE_BUSY] = "tracer is in the wrong state for this",
	[SD_RES_TRACE_TIMEOUT] = "a thread did not stop in time; nothing was changed",
	[SD_RES_TRACE_BROKEN] = "tracer disabled itself after an anomaly (see sheep.log)",
	[SD_RES_NO_MATCH] = "no function matches the filter",
	[SD_RES_INVALID_VERSION] = "wrong protocol version for this opcode",
	[SD_RES_TOO_FEW_NODES] = "more copies than nodes: each copy needs its own node",
	[SD_RES_OLD_NODE_VER] = "request from an older epoch than this node's",
	[SD_RES_NEW_NODE_VER] = "request from a newer epoch than this node's",
	[SD_RES_BUFFER_SMALL] = "the answer does not fit in the buffer given",
	[SD_RES_NOT_WAITING] = "this node is not waiting for other nodes",
	[SD_RES_LOCK_NOT_OWNER] = "the lock is another client's",
	[SD_RES_NO_TRACER] = "no such tracer",
	[SD_RES_TRACE_OFF] = "that tracer is not running",
	[SD_RES_TRACE_FOLLOWERS] = "too many followers of the trace (4 at once)",
	[SD_RES_TRACE_FOLLOW_GONE] =
	    "this follower was silent too long: its cursor went to another",
	[SD_RES_TRACE_TOO_BIG] = "the tracer's rings would be over their total for every thread",
	[SD_RES_TRACE_NO_THREAD] = "no thread of the daemon is of that kind",
	[SD_RES_COPIES_CHANGED] = "the vdi's copies changed: ask again with the new count",
	[SD_RES_NETWORK] = "cannot reach a peer node",
	[SD_RES_ACCESS_DENIED] = "access denied: this address may not run that operation "
				 "(see sheep --admin-allow)",
	[SD_RES_MD_EXIST] = "that disk is plugged already",
	[SD_RES_MD_NO_DISK] = "no disk of that path is in use on this node",
	[SD_RES_MD_LAST] = "the node's last disk cannot be unplugged",
	[SD_RES_MD_BAD_DISK] = "not a usable disk: a writable directory, and at most 64 disks",
};

const char *sd_strerror(int result)
{
	static __thread char buf[48];

	if (result >= 0 && (size_t)result < ARRAY_SIZE(messages) && messages[result])
		return messages[result];
	snprintf(buf, sizeof(buf), "unknown result code 0x%x", (unsigned)result);
	return buf;
}
