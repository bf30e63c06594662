/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's metrics endpoint: GET /metrics over HTTP (libmicrohttpd),
 * driven by tallyd's own poll() loop, no thread of its own:
 *
 *	poll tallyd_http_fd() for POLLIN, waiting at most
 *	tallyd_http_timeout_ms() (-1: no limit from the endpoint);
 *	then call tallyd_http_run(), whether the fd was readable or not.
 *
 * Calling tallyd_http_run() when nothing is ready is harmless.
 */
#ifndef TALLY_TALLYD_HTTP_H
#define TALLY_TALLYD_HTTP_H

#include <stdint.h>

struct tallyd_http;

/*
 * Listens on addr_port ("A.B.C.D:PORT", IPv4 only; port 0 picks a free
 * one) and serves GET (and HEAD) /metrics with the text render(arg)
 * returns: malloc'd and NUL-terminated, freed by the endpoint once sent;
 * NULL answers 500. render runs inside tallyd_http_run(). Other paths
 * get 404, other methods 405.
 *
 * Returns NULL with errno EINVAL (bad address), EADDRINUSE, EADDRNOTAVAIL
 * (no such local address), EACCES, ENOMEM, or another socket error.
 */
struct tallyd_http *tallyd_http_start(const char *addr_port,
	char *(*render)(void *arg), void *arg);

/* The fd to poll for POLLIN (an epoll fd; valid until stop). */
int tallyd_http_fd(const struct tallyd_http *h);

/*
 * The longest tallyd may wait before calling tallyd_http_run(), in ms;
 * -1 when the endpoint has no deadline (wait for the fd alone).
 */
int tallyd_http_timeout_ms(const struct tallyd_http *h);

/* Accepts, reads, answers and times out connections; never blocks. */
void tallyd_http_run(struct tallyd_http *h);

/* The port listened on: the one asked for, or the one picked for 0. */
uint16_t tallyd_http_port(const struct tallyd_http *h);

/* Closes the listener and every connection. h may be NULL. */
void tallyd_http_stop(struct tallyd_http *h);

#endif /* TALLY_TALLYD_HTTP_H */
