/*
 * Prometheus metrics over HTTP (metrics.c).
 */
#ifndef SHEEP_METRICS_H
#define SHEEP_METRICS_H

#include <stddef.h>

/* metrics.c: Prometheus' text format over HTTP, on the main event loop */
#define METRICS_MAX_CONNS 16 /* its connection cap (listen.h) */
/* check "[ADDR:]PORT"; with addr, split it (ADDR defaults to 127.0.0.1): 0 or -EINVAL */
int metrics_parse(const char *arg, char *addr, size_t addr_len, int *port);
/* listen on arg ([ADDR:]PORT): 0 or -errno */
int metrics_start(const char *arg);

#endif
