/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS for the rendezvous (tls.c, GnuTLS): tallyd's certificate and key,
 * and server sessions over the non-blocking sockets of the poll loop.
 */
#ifndef TALLYD_TLS_H
#define TALLYD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct tallyd_tls;		/* credentials shared by every session */
struct tallyd_tls_conn;		/* one connection's session */

/*
 * Loads the certificate chain (PEM, tallyd's first) and its private key
 * (PEM). Returns the credentials, or NULL with errno (ENOENT, EACCES,
 * EINVAL: unreadable, not PEM, a key that does not match, ...) and the
 * reason in why. A key file that others may read is logged as a warning.
 */
struct tallyd_tls *tallyd_tls_create(const char *cert, const char *key,
	char *why, size_t wlen);

/* Frees t; its sessions must be closed first. NULL is fine. */
void tallyd_tls_destroy(struct tallyd_tls *t);

/*
 * A server session on fd (connected, non-blocking; still owned by the
 * caller). Returns NULL with errno ENOMEM or EINVAL.
 */
struct tallyd_tls_conn *tallyd_tls_accept(struct tallyd_tls *t, int fd);

/*
 * One step of the handshake. Returns 0 once done, -EAGAIN until then
 * (poll for write when tallyd_tls_wants_write(), else for read), or
 * -EPROTO with GnuTLS's reason in why.
 */
int tallyd_tls_handshake(struct tallyd_tls_conn *s, char *why, size_t wlen);

/* true if the session's last -EAGAIN waited to write, not to read. */
bool tallyd_tls_wants_write(const struct tallyd_tls_conn *s);

/*
 * Up to n bytes of application data. Returns the count, 0 when the peer
 * closed (with or without close_notify), -EAGAIN, or -EPROTO.
 */
ssize_t tallyd_tls_recv(struct tallyd_tls_conn *s, void *buf, size_t n);

/* Bytes already decrypted and waiting: read them without polling. */
size_t tallyd_tls_pending(const struct tallyd_tls_conn *s);

/*
 * Sends n bytes (one record) at once. Returns 0, or -EIO when the socket
 * could not take it all now (the caller drops the connection).
 */
int tallyd_tls_send(struct tallyd_tls_conn *s, const void *buf, size_t n);

/* Sends close_notify if the socket takes it now; never waits. */
void tallyd_tls_bye(struct tallyd_tls_conn *s);

/* Frees the session (not its socket). NULL is fine. */
void tallyd_tls_close(struct tallyd_tls_conn *s);

#endif /* TALLYD_TLS_H */
