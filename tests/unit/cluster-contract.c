/*
 * One member of a cluster for the driver contract test
 * (cluster-contract.sh): it joins with a cluster driver and writes every
 * event the driver delivers, one line each, to an event file:
 *
 *   join PORT : PORT PORT ...     (the joined member, then the list)
 *   leave PORT : PORT ...
 *   msg PORT TEXT                 (the sender, then the message)
 *   evicted : PORT ...            (the others declared this member dead)
 *   quorum-lost :                 (this member's partition lost quorum)
 *
 * Nodes are told apart by port. Commands come one per line on a FIFO:
 * "send N" broadcasts N messages "PORT.I", "leave" leaves gracefully and
 * exits, "quit" exits without leaving.
 *
 * usage: cluster-contract --list
 *        cluster-contract DRIVER[:OPTION] PORT EVENT_FILE CONTROL_FIFO
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "event.h"
#include "logger.h"

static const struct cluster_driver *drv;
static struct sd_node self;
static int event_fd = -1;
static char cmd_buf[4096];
static size_t cmd_len;

static void log_line(const char *verb, const struct sd_node *node, const struct sd_node *members,
		     int nr)
{
	char line[2048];
	int n;

	n = snprintf(line, sizeof(line), "%s", verb);
	if (node)
		n += snprintf(line + n, sizeof(line) - n, " %u", node->nid.port);
	n += snprintf(line + n, sizeof(line) - n, " :");
	for (int i = 0; i < nr && n < (int)sizeof(line) - 8; i++)
		n += snprintf(line + n, sizeof(line) - n, " %u", members[i].nid.port);
	n += snprintf(line + n, sizeof(line) - n, "\n");
	if (sd_write_full(event_fd, line, n))
		abort();
}

static void on_joined(const struct sd_node *joined, const struct sd_node *members, int nr)
{
	log_line("join", joined, members, nr);
}

static void on_left(const struct sd_node *left, const struct sd_node *members, int nr)
{
	if (left->nid.port == self.nid.port) {
		log_line("evicted", NULL, members, nr);
		exit(3);
	}
	log_line("leave", left, members, nr);
}

static void on_notified(const struct sd_node *sender, const void *msg, size_t len)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line), "msg %u %.*s\n", sender->nid.port,
		     (int)(len < 200 ? len : 200), (const char *)msg);
	if (sd_write_full(event_fd, line, n))
		abort();
}

static void on_quorum_lost(void)
{
	log_line("quorum-lost", NULL, NULL, 0);
}

static const struct cdrv_events events = {
	.joined = on_joined,
	.left = on_left,
	.notified = on_notified,
	.quorum_lost = on_quorum_lost,
};

static void run_command(const char *cmd)
{
	char msg[64];
	int n, ret;

	if (sscanf(cmd, "send %d", &n) == 1) {
		for (int i = 0; i < n; i++) {
			int len = snprintf(msg, sizeof(msg), "%u.%d", self.nid.port, i);

			ret = drv->notify(msg, len);
			if (ret) {
				fprintf(stderr, "notify: %s\n", strerror(-ret));
				exit(1);
			}
		}
	} else if (!strcmp(cmd, "leave")) {
		ret = drv->leave();
		if (ret)
			fprintf(stderr, "leave: %s\n", strerror(-ret));
		exit(ret ? 1 : 0);
	} else if (!strcmp(cmd, "quit")) {
		exit(0);
	} else {
		fprintf(stderr, "unknown command '%s'\n", cmd);
	}
}

static void control(int fd, uint32_t events, void *data)
{
	ssize_t n = read(fd, cmd_buf + cmd_len, sizeof(cmd_buf) - 1 - cmd_len);
	char *nl;

	if (n <= 0)
		return;
	cmd_len += n;
	cmd_buf[cmd_len] = '\0';
	while ((nl = strchr(cmd_buf, '\n'))) {
		*nl = '\0';
		run_command(cmd_buf);
		cmd_len -= nl + 1 - cmd_buf;
		memmove(cmd_buf, nl + 1, cmd_len + 1);
	}
}

int main(int argc, char **argv)
{
	char names[128];
	uint64_t port;
	int ctl_fd, ret;

	cdrv_names(names, sizeof(names));
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		printf("%s\n", names);
		return 0;
	}
	if (argc != 5 || sd_parse_uint(argv[2], 1, 65535, &port)) {
		fprintf(stderr, "usage: %s DRIVER[:OPTION] PORT EVENT_FILE CONTROL_FIFO\n",
			argv[0]);
		return 64;
	}
	sd_log_init(NULL, getenv("CLUSTER_DEBUG") ? SDOG_DEBUG : SDOG_INFO, argv[2]);
	drv = cdrv_find(argv[1]);
	if (!drv) {
		fprintf(stderr, "no driver '%s' (have: %s)\n", argv[1], names);
		return 64;
	}
	self.nid.addr[10] = self.nid.addr[11] = 0xff;
	self.nid.addr[12] = 127;
	self.nid.addr[15] = 1;
	self.nid.port = (uint16_t)port;
	self.nr_vnodes = 128;
	event_fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	ctl_fd = open(argv[4], O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (event_fd < 0 || ctl_fd < 0) {
		perror("open");
		return 1;
	}
	if (ev_init(64) || ev_add(ctl_fd, EPOLLIN, control, NULL)) {
		fprintf(stderr, "event loop: %m\n");
		return 1;
	}
	ret = drv->init(NULL, &events);
	if (!ret)
		ret = drv->join(&self);
	if (ret) {
		fprintf(stderr, "cannot join with %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	for (;;)
		ev_loop_once(1000);
}
