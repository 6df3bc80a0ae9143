/*
 * The zookeeper driver's parsers (sheep/cluster/zk_wire.c): the option of
 * `-c zookeeper:OPTION` (zk_parse_option) and what a member reads from a
 * znode (zk_decode_rec: queue entries and the view), which another process
 * wrote and which may be anything.
 *
 * Input: byte 0 picks what the rest is: 0, an option (cut at its first
 * NUL, like an argv word); 1, a queue entry; 2, the view; 3, a name whose
 * sequence number zk_seq_of reads.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/zk_wire.h"
#include "fuzz.h"

static void check_option(const uint8_t *data, size_t size)
{
	struct zk_config cfg;
	char *s = malloc(size + 1), err[256];

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	if (zk_parse_option(s, &cfg, err, sizeof(err)) == 0) {
		FUZZ_ASSERT(memchr(cfg.hosts, '\0', sizeof(cfg.hosts)));
		FUZZ_ASSERT(cfg.hosts[0] && cfg.base[0] == '/');
		FUZZ_ASSERT(!cfg.timeout_ms ||
			    (cfg.timeout_ms >= ZK_MIN_TIMEOUT_S * 1000 &&
			     cfg.timeout_ms <= ZK_MAX_TIMEOUT_S * 1000));
		/* a host string parses again as itself */
		struct zk_config again;

		FUZZ_ASSERT(zk_parse_option(cfg.hosts, &again, err, sizeof(err)) == 0);
		FUZZ_ASSERT(!strcmp(again.hosts, cfg.hosts));
	} else {
		FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) && err[0]);
	}
	free(s);
}

static void check_record(const uint8_t *data, size_t size, bool is_view)
{
	static struct zk_member list[SD_MAX_NODES];
	static uint8_t again[sizeof(struct zk_rec) + SD_MAX_NODES * sizeof(struct zk_member) +
			     ZK_MAX_MSG_LEN];
	struct zk_decoded d;
	uint8_t *copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */

	if (!copy)
		return;
	memcpy(copy, data, size);
	if (zk_decode_rec(copy, size, is_view, &d) == 0) {
		FUZZ_ASSERT(d.nr >= 0 && d.nr <= SD_MAX_NODES && d.msg_len <= ZK_MAX_MSG_LEN);
		zk_copy_list(list, &d);
		for (int i = 0; i < d.nr; i++)
			FUZZ_ASSERT(zk_find(list, d.nr, list[i].id) == i);
		if (d.msg_len)
			(void)((const volatile uint8_t *)d.msg)[d.msg_len - 1];
		/* encoding what was decoded gives the same bytes */
		FUZZ_ASSERT(zk_encode_rec(again, sizeof(again), d.type, d.id, list, d.nr, d.msg,
					  d.msg_len) == size);
		FUZZ_ASSERT(!memcmp(again, copy, size));
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 4) {
	case 0:
		check_option(data + 1, size - 1);
		break;
	case 1:
		check_record(data + 1, size - 1, false);
		break;
	case 2:
		check_record(data + 1, size - 1, true);
		break;
	case 3: {
		char *s = malloc(size);

		if (s) {
			memcpy(s, data + 1, size - 1);
			s[size - 1] = '\0';
			FUZZ_ASSERT(zk_seq_of(s) >= -1);
			free(s);
		}
		break;
	}
	}
	return 0;
}
