/*
 * Start-up's verdict: the directory lock, daemonizing, and telling whoever
 * started sheep whether it started.
 *
 * A sheep that daemonizes forks; the parent waits until the child is ready
 * (it listens and has joined the cluster) or exits, and exits with the
 * child's verdict: 0 once it serves, its exit status when it fails. Until
 * then the child keeps the caller's stderr, so every start-up error is said
 * there (startup_fail) as well as in the log. Under systemd (Type=notify)
 * the daemon says READY=1 and STOPPING=1 on $NOTIFY_SOCKET.
 *
 * Main thread only, at start-up and shutdown.
 */
#ifndef SHEEP_STARTUP_H
#define SHEEP_STARTUP_H

#include <stdio.h>

#include "logger.h"

/*
 * A start-up failure: logged, and said on stderr ("sheep: ..."), which is
 * the caller's until the daemon is ready. Evaluates to 1, main's exit
 * status for a failed start.
 */
#define startup_fail(fmt, ...)                                                                     \
	({                                                                                         \
		sd_emerg(fmt, ##__VA_ARGS__);                                                      \
		fprintf(stderr, "sheep: " fmt "\n", ##__VA_ARGS__);                                \
		1;                                                                                 \
	})

/*
 * Lock DIR/sheep.pid for the life of the process (one sheep per
 * directory): the fd, or -EBUSY (*holder: the pid the file names, 0 if
 * unknown) or another -errno. The lock survives startup_fork().
 */
int startup_lock_dir(const char *dir, int *holder);

/* write this process's pid into the locked file: 0 or -errno */
int startup_write_pid(int fd);

/*
 * Fork into the background. Returns 0 in the child (a new session, stdin
 * and stdout on /dev/null, stderr kept until startup_ready). The parent
 * never returns: it exits with the child's verdict. -errno if it cannot.
 */
int startup_fork(void);

/*
 * The daemon serves: the waiting parent exits 0 (and stderr goes to
 * /dev/null), systemd hears READY=1 with STATUS=status.
 */
void startup_ready(const char *status);

/* shutting down: systemd hears STOPPING=1 */
void startup_stopping(void);

#endif
