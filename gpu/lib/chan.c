/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous connection from a worker to tallyd, in TLS (GnuTLS): the
 * job token the worker presents travels only inside it, and only to a
 * tallyd whose certificate the worker's CA vouches for under the name or
 * address the worker dialled (docs/control.md, "Rendezvous protocol").
 * Without TLS (an operator's explicit and unsafe choice) the same calls
 * use the bare socket.
 *
 * The socket is non-blocking; each call waits in poll() for what GnuTLS
 * needs (reading or writing) until its deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "chan.h"
#include "ctx.h"

#define PRIORITIES	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct tally_chan {
	int fd;
	gnutls_session_t s;		/* NULL: cleartext */
	gnutls_certificate_credentials_t cred;
};

int64_t
tally_chan_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd can be read (or written) or the deadline passes. */
static int
wait_fd(int fd, int write, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = write ? POLLOUT : POLLIN };
	int64_t left = deadline_ms - tally_chan_now_ms();
	int n;

	if (left <= 0)
		return -ETIMEDOUT;
	n = poll(&p, 1, (int)left);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

void
tally_chan_close(struct tally_chan *ch)
{
	if (ch == NULL)
		return;
	if (ch->s != NULL) {
		(void)gnutls_bye(ch->s, GNUTLS_SHUT_WR);
		gnutls_deinit(ch->s);
	}
	if (ch->cred != NULL)
		gnutls_certificate_free_credentials(ch->cred);
	if (ch->fd >= 0)
		close(ch->fd);
	free(ch);
}

/* Trust: the CA file, or the system's store; then a client session. */
static int
session(struct tally_chan *ch, const char *host, const char *ca_file)
{
	struct in_addr a;
	int ret;

	if (gnutls_certificate_allocate_credentials(&ch->cred) < 0)
		return tally_ctx_open_fail(-ENOMEM, "TLS: out of memory");
	if (ca_file != NULL) {
		FILE *f = fopen(ca_file, "r");

		if (f == NULL)
			return tally_ctx_open_fail(-errno, "the CA file %s: %s",
				ca_file, strerror(errno));
		fclose(f);
		ret = gnutls_certificate_set_x509_trust_file(ch->cred, ca_file,
			GNUTLS_X509_FMT_PEM);
	} else {
		ret = gnutls_certificate_set_x509_system_trust(ch->cred);
	}
	if (ret <= 0)
		return tally_ctx_open_fail(-EINVAL, "%s%s holds no CA "
			"certificate%s%s", ca_file != NULL ? "the CA file " :
			"the system's trust store", ca_file != NULL ? ca_file :
			"", ret < 0 ? ": " : "", ret < 0 ?
			gnutls_strerror(ret) : "");
	if (gnutls_init(&ch->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK |
			GNUTLS_NO_SIGNAL) < 0) {
		ch->s = NULL;
		return tally_ctx_open_fail(-ENOMEM, "TLS: out of memory");
	}
	if (gnutls_priority_set_direct(ch->s, PRIORITIES, NULL) < 0 ||
			gnutls_credentials_set(ch->s, GNUTLS_CRD_CERTIFICATE,
				ch->cred) < 0)
		return tally_ctx_open_fail(-EINVAL, "TLS: cannot set up a "
			"session");
	/* SNI for names only; the certificate is checked either way. */
	if (inet_pton(AF_INET, host, &a) != 1)
		(void)gnutls_server_name_set(ch->s, GNUTLS_NAME_DNS, host,
			strlen(host));
	gnutls_session_set_verify_cert(ch->s, host, 0);
	gnutls_transport_set_int(ch->s, ch->fd);
	return 0;
}

/* Why tallyd's certificate was refused, as one sentence. */
static int
untrusted(struct tally_chan *ch, const char *host)
{
	unsigned int status = gnutls_session_get_verify_cert_status(ch->s);
	gnutls_datum_t out = { NULL, 0 };
	size_t len;
	int rc;

	if (gnutls_certificate_verification_status_print(status,
			GNUTLS_CRT_X509, &out, 0) < 0)
		out.data = NULL;
	/* GnuTLS ends each sentence with a blank: drop the last ones. */
	for (len = out.data != NULL ? strlen((char *)out.data) : 0;
			len > 0 && out.data[len - 1] == ' '; len--)
		out.data[len - 1] = '\0';
	rc = tally_ctx_open_fail(-EKEYREJECTED, "tallyd at %s: its TLS "
		"certificate is not trusted: %s", host, out.data != NULL ?
		(const char *)out.data : "verification failed");
	gnutls_free(out.data);
	return rc;
}

static int
handshake(struct tally_chan *ch, const char *host, int64_t deadline_ms)
{
	int ret;

	for (;;) {
		ret = gnutls_handshake(ch->s);
		if (ret == 0)
			return 0;
		if (ret == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR)
			return untrusted(ch, host);
		if (ret != GNUTLS_E_AGAIN && ret != GNUTLS_E_INTERRUPTED &&
				gnutls_error_is_fatal(ret))
			return tally_ctx_open_fail(-EPROTO, "TLS with tallyd "
				"at %s failed: %s (does it have TLS on?)", host,
				gnutls_strerror(ret));
		ret = wait_fd(ch->fd, gnutls_record_get_direction(ch->s),
			deadline_ms);
		if (ret != 0)
			return tally_ctx_open_fail(ret, "TLS with tallyd at "
				"%s: %s", host, strerror(-ret));
	}
}

int
tally_chan_open(int fd, const char *host, int tls, const char *ca_file,
	int64_t deadline_ms, struct tally_chan **out)
{
	struct tally_chan *ch = calloc(1, sizeof(*ch));
	int rc;

	*out = NULL;
	if (ch == NULL) {
		close(fd);
		return tally_ctx_open_fail(-ENOMEM, "out of memory");
	}
	ch->fd = fd;
	if (tls && ((rc = session(ch, host, ca_file)) != 0 ||
			(rc = handshake(ch, host, deadline_ms)) != 0)) {
		tally_chan_close(ch);
		return rc;
	}
	*out = ch;
	return 0;
}

int
tally_chan_send(struct tally_chan *ch, const void *buf, size_t n,
	int64_t deadline_ms)
{
	const uint8_t *p = buf;

	while (n > 0) {
		ssize_t w;
		int rc, again;

		if (ch->s != NULL) {
			/* After GNUTLS_E_AGAIN: again with the same data. */
			w = gnutls_record_send(ch->s, p, n);
			again = w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED;
			if (w == GNUTLS_E_PUSH_ERROR)
				return -EPIPE;
			if (w < 0 && !again)
				return -EPROTO;
		} else {
			w = send(ch->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
			again = w < 0 && (errno == EAGAIN || errno == EINTR);
			if (w < 0 && !again)
				return -errno;
		}
		if (again) {
			if ((rc = wait_fd(ch->fd, 1, deadline_ms)) != 0)
				return rc;
			continue;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One read of at most n bytes: >0, 0 at the end, -EAGAIN, -errno. */
static ssize_t
read_some(struct tally_chan *ch, void *buf, size_t n)
{
	ssize_t r;

	if (ch->s == NULL) {
		r = recv(ch->fd, buf, n, MSG_DONTWAIT);
		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN :
				-errno;
		return r;
	}
	r = gnutls_record_recv(ch->s, buf, n);
	if (r >= 0)
		return r;
	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
		return -EAGAIN;
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	if (r == GNUTLS_E_PULL_ERROR)
		return -ECONNRESET;	/* the socket's error, as tallyd left */
	return gnutls_error_is_fatal((int)r) ? -EPROTO : -EAGAIN;
}

int
tally_chan_recv(struct tally_chan *ch, void *buf, size_t n,
	int64_t deadline_ms)
{
	uint8_t *p = buf;

	while (n > 0) {
		ssize_t r = read_some(ch, p, n);
		int rc;

		if (r == 0)
			return -ECONNRESET;
		if (r == -EAGAIN) {
			if ((rc = wait_fd(ch->fd, 0, deadline_ms)) != 0)
				return rc;
			continue;
		}
		if (r < 0)
			return (int)r;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
