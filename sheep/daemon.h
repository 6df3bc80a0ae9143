/*
 * The daemon's life (daemon.c): whether it is stopping, and with what exit
 * status. A low module that every layer may ask; it calls nothing above
 * it. What a stop request does (wake main's loop) is the handler that main
 * registers.
 *
 * Threads: daemon_stopping() and daemon_stop() from any thread (atomics);
 * the handler runs on the thread that asked for the stop, so it must only
 * set what main's loop reads (it does no I/O).
 */
#ifndef SHEEP_DAEMON_H
#define SHEEP_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

/* true from the first stop request on: workers give up what they retry */
bool daemon_stopping(void);
/*
 * Ask the daemon to stop: status 0 for a clean stop (a signal, a cluster
 * shutdown), non-zero when it stops because it failed (the first failure's
 * status is the exit status).
 */
void daemon_stop(int status);
/* the status the daemon exits with: 0, or the first failure's */
int daemon_exit_status(void);
/* a number for a new client connection, unique in this daemon (any front end's) */
uint64_t daemon_conn_id(void);
/* main, before any other thread exists: what a stop request calls (NULL: nothing) */
void daemon_set_stop_handler(void (*fn)(void));

#endif
