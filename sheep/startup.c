/*
 * Start-up's verdict: the directory lock, daemonizing with a parent that
 * waits for the child's word, and systemd's readiness protocol.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "config.h"
#include "startup.h"
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* the write end of the pipe the parent waits on; -1: no parent waits */
static int verdict_fd = -1;

int startup_lock_dir(const char *dir, int *holder)
{
	char path[4200], buf[32];
	ssize_t n;
	int fd;

	*holder = 0;
	snprintf(path, sizeof(path), "%s/sheep.pid", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno == EWOULDBLOCK ? EBUSY : errno;

		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			*holder = atoi(buf);
		}
		close(fd);
		return -err;
	}
	return fd; /* kept open: the lock lives as long as the process */
}

int startup_write_pid(int fd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());

	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, n, 0) != n)
		return -EIO;
	return 0;
}

/* the parent: wait for the child's byte, or its exit, and exit likewise */
static void __attribute__((noreturn)) wait_verdict(int fd, pid_t child)
{
	uint8_t status;
	ssize_t n;
	int ws;

	do
		n = read(fd, &status, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(status);
	/* the pipe closed without a word: the child exited, say how */
	while (waitpid(child, &ws, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	if (WIFEXITED(ws))
		_exit(WEXITSTATUS(ws)); /* a failure said its reason on stderr */
	if (WIFSIGNALED(ws))
		fprintf(stderr, "sheep: the daemon was killed by signal %d (%s) while starting\n",
			WTERMSIG(ws), strsignal(WTERMSIG(ws)));
	_exit(1);
}

int startup_fork(void)
{
	int p[2], fd;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(p[0]);
		close(p[1]);
		return -err;
	}
	if (pid > 0) {
		close(p[1]);
		wait_verdict(p[0], pid);
	}
	close(p[0]);
	verdict_fd = p[1];
	if (setsid() < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -errno;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
	return 0;
}

void startup_ready(const char *status)
{
	if (verdict_fd >= 0) {
		uint8_t ok = 0;
		int fd = open("/dev/null", O_WRONLY);

		/* from now on nobody reads the caller's terminal for us */
		if (fd >= 0) {
			dup2(fd, STDERR_FILENO);
			if (fd > STDERR_FILENO)
				close(fd);
		}
		(void)!write(verdict_fd, &ok, 1);
		close(verdict_fd);
		verdict_fd = -1;
	}
#ifdef HAVE_LIBSYSTEMD
	sd_notifyf(0, "READY=1\nSTATUS=%s\nMAINPID=%d", status, (int)getpid());
#endif
}

void startup_stopping(void)
{
#ifdef HAVE_LIBSYSTEMD
	sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
#endif
}
