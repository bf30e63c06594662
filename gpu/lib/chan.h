/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker's side of the rendezvous connection (chan.c): a connected
 * TCP socket to tallyd, inside TLS unless the caller turned it off, with
 * tallyd's certificate checked against a CA and the host name or address
 * the worker dialled. Every call takes an absolute deadline
 * (CLOCK_MONOTONIC milliseconds) and fails with -ETIMEDOUT past it.
 */
#ifndef TALLY_LIB_CHAN_H
#define TALLY_LIB_CHAN_H

#include <stddef.h>
#include <stdint.h>

struct tally_chan;

/*
 * Takes over fd (connected, non-blocking) as a channel to tallyd at host
 * (as the URL named it: a DNS name or a dotted quad). With tls set, runs
 * the TLS handshake and verifies tallyd's certificate against ca_file (a
 * PEM file of CA certificates), or against the system's trust store when
 * ca_file is NULL, and against host. Returns the channel in *out and 0,
 * or -errno with the reason in tally_ctx_error(NULL) (fd closed then):
 * -EKEYREJECTED (certificate not trusted, or not for host), -EPROTO (no
 * TLS agreed: e.g. a tallyd without TLS), -ENOENT/-EACCES (ca_file),
 * -ETIMEDOUT, -ENOMEM.
 */
int tally_chan_open(int fd, const char *host, int tls, const char *ca_file,
	int64_t deadline_ms, struct tally_chan **out);

/* Sends n bytes. Returns 0 or -errno (-ETIMEDOUT, -EPIPE, -EPROTO...). */
int tally_chan_send(struct tally_chan *ch, const void *buf, size_t n,
	int64_t deadline_ms);

/*
 * Receives exactly n bytes. Returns 0, -ECONNRESET when tallyd closed
 * first, -ETIMEDOUT, or -errno.
 */
int tally_chan_recv(struct tally_chan *ch, void *buf, size_t n,
	int64_t deadline_ms);

/* Ends TLS (when it can at once), closes the socket, frees. NULL is fine. */
void tally_chan_close(struct tally_chan *ch);

/* Monotonic milliseconds, the clock of every deadline here. */
int64_t tally_chan_now_ms(void);

#endif /* TALLY_LIB_CHAN_H */
