/*
 * The local cluster driver's log parser (sheep/cluster/local.c): read_rec,
 * view_apply, scan_tail (a writer's view, cutting a half-written tail) and
 * deliver (a member's view, handing events to the daemon), over a log held
 * in a memfd.
 *
 * local.c is compiled into this file to set its log and views directly;
 * the daemon's three handlers are the harness's, checking what they are
 * given. Input: byte 0 is a mode (bit 0: make every record's magic, length
 * and checksum right, so that the fuzzer reaches the views), byte 1 picks
 * this member's id among the records' ids, the rest is the log.
 */
#include <sys/mman.h>

#include "../../sheep/cluster/local.c"

#include "fuzz.h"

static int nr_events;

static void on_joined(const struct sd_node *joined, const struct sd_node *members, int nr)
{
	FUZZ_ASSERT(nr >= 0 && nr <= SD_MAX_NODES);
	nr_events++;
}

static void on_left(const struct sd_node *left, const struct sd_node *members, int nr)
{
	FUZZ_ASSERT(nr >= 0 && nr <= SD_MAX_NODES);
	nr_events++;
}

static void on_notified(const struct sd_node *sender, const void *msg, size_t len)
{
	FUZZ_ASSERT(len <= CDRV_MAX_MSG_LEN);
	if (len) /* the whole message is readable (ASan checks this read) */
		(void)((const volatile uint8_t *)msg)[len - 1];
	nr_events++;
}

static const struct cdrv_events fuzz_events = {
	.joined = on_joined,
	.left = on_left,
	.notified = on_notified,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	sd_log_init("/dev/null", SDOG_DEBUG, "sheep");
	events = &fuzz_events; /* local.c's, as its init would set it */
	scan_buf = malloc(CDRV_MAX_MSG_LEN);
	deliver_buf = malloc(CDRV_MAX_MSG_LEN);
	log_fd = memfd_create("local-log", MFD_CLOEXEC);
	if (!scan_buf || !deliver_buf || log_fd < 0)
		abort();
	return 0;
}

/* mode bit 0: records that pass read_rec's checks, as a writer makes them */
/*
 * gcc 12 with -fsanitize=address sees a region of size 0 at log here and
 * warns (false positives: the loop reads and writes only within len)
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
static void fix_records(uint8_t *log, size_t len)
{
	size_t off = 0;

	while (len - off >= sizeof(struct local_rec)) {
		struct local_rec rec;
		size_t room = len - off - sizeof(rec);

		memcpy(&rec, log + off, sizeof(rec));
		rec.magic = LOCAL_MAGIC;
		if (rec.len > room)
			rec.len = (uint32_t)(room ? rec.len % (room + 1) : 0);
		rec.sum = rec_sum(&rec, log + off + sizeof(rec));
		memcpy(log + off, &rec, sizeof(rec));
		off += sizeof(rec) + rec.len;
	}
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *log;
	size_t len;

	if (size < 2)
		return 0;
	len = size - 2;
	log = malloc(len ? len : 1);
	if (!log)
		return 0;
	memcpy(log, data + 2, len);
	if (data[0] & 1)
		fix_records(log, len);
	/* this member: the id of the record byte 1 points at, if any */
	self_id = 0x5e1f;
	if (len >= sizeof(struct local_rec) * (data[1] % 4 + 1))
		memcpy(&self_id,
		       log + sizeof(struct local_rec) * (data[1] % 4) +
			   offsetof(struct local_rec, id),
		       sizeof(self_id));
	if (ftruncate(log_fd, 0) < 0 || pwrite(log_fd, log, len, 0) != (ssize_t)len)
		abort();

	memset(&tail, 0, sizeof(tail));
	memset(&delivered, 0, sizeof(delivered));
	FUZZ_ASSERT(scan_tail() == 0);
	FUZZ_ASSERT(tail.off <= len && tail.nr >= 0 && tail.nr <= SD_MAX_NODES);
	joined = true;
	nr_events = 0;
	deliver();
	/* a member that was not told it left saw the writer's very view */
	if (joined) {
		FUZZ_ASSERT(delivered.off == tail.off && delivered.nr == tail.nr);
		FUZZ_ASSERT(!memcmp(delivered.m, tail.m, tail.nr * sizeof(tail.m[0])));
	}
	free(log);
	return 0;
}
