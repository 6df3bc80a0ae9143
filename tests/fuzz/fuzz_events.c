/*
 * collie's reading of the nodes' trace events (collie/trace_cluster.c:
 * tev_parse) and what it builds from them (collie/trace_merge.c: the
 * requests' parts and calls, their times, the cross-node graph and the
 * slow table), as cat --all and slow do after reading every node.
 *
 * Input: event lines (internal_proto.h, SD_TRACE_FMT_EVENTS); a line "@N"
 * makes node N (0-2) the one whose lines follow. collie.c and
 * trace_merge.c are compiled into this file to reach their statics.
 */
#define main collie_main
#include "../../collie/collie.c"
#undef main
#include "../../collie/trace_merge.c"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	FILE *null = fopen("/dev/null", "w");

	if (null) {
		stdout = null;
		stderr = null;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m = { .first = true };
	char *text = malloc(size + 1), *line, *save = NULL;
	struct slow *v = NULL;
	size_t nr = 0;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	m.nr_nodes = 3;
	m.nodes = calloc(3, sizeof(*m.nodes));
	if (!m.nodes) {
		free(text);
		return 0;
	}
	for (int i = 0; i < 3; i++) {
		snprintf(m.nodes[i].label, sizeof(m.nodes[i].label), "127.0.0.1:%d", 7000 + i);
		m.nodes[i].offset_ns = i * 1000 - 1000;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct tev ev;

		if (line[0] == '@') {
			m.cur = (line[1] - '0') % 3;
			if (m.cur < 0)
				m.cur = 0;
			m.nr_threads = 0;
			continue;
		}
		if (tev_parse(line, &ev))
			continue;
		FUZZ_ASSERT(strchr("TQDCO", ev.kind));
		FUZZ_ASSERT(ev.kind != 'C' && ev.kind != 'O' && ev.kind != 'T' ? !ev.text : !!ev.text);
		if (on_event(&ev, &m))
			break;
	}
	model_analyze(&m);
	if (!requests(&m, &v, &nr)) {
		for (size_t i = 0; i < nr; i++) {
			FUZZ_ASSERT(v[i].from < v[i].to && v[i].to <= m.nr_parts);
			graph_request(&m, v[i].from, v[i].to);
		}
		slow_print(&m, v, nr);
	}
	free(v);
	model_free(&m);
	free(text);
	return 0;
}
