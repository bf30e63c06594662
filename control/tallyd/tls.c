/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS for the rendezvous, with GnuTLS. The job token a worker presents
 * crosses inside it, so a sniffer on the control network learns nothing
 * it could join with, and workers check tallyd's certificate, so a host
 * that answers in tallyd's place learns no token either (docs/operations.md,
 * "Threat model").
 *
 * Sessions are non-blocking and driven by the poll loop: every call here
 * returns at once, -EAGAIN meaning "poll and call again". TLS 1.2 and 1.3
 * only. Client certificates are not asked for: the job token
 * authenticates a worker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "tallyd.h"
#include "tls.h"

#define PRIORITIES	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define EXPIRY_WARN_S	(30 * 86400)

struct tallyd_tls {
	gnutls_certificate_credentials_t cred;
	gnutls_priority_t prio;
};

struct tallyd_tls_conn {
	gnutls_session_t s;
};

/* A file tallyd cannot open gets its errno, before GnuTLS hides it. */
static int
readable(const char *what, const char *path, char *why, size_t wlen)
{
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		int err = errno;

		snprintf(why, wlen, "%s %s: %s", what, path, strerror(err));
		return -err;
	}
	fclose(f);
	return 0;
}

/* Logs when the certificate expires; warns when soon or already. */
static void
log_expiry(gnutls_certificate_credentials_t cred, const char *path)
{
	gnutls_x509_crt_t *crts = NULL;
	unsigned int n = 0, i;
	time_t end, now = time(NULL);
	char when[32];
	struct tm tm;

	if (gnutls_certificate_get_x509_crt(cred, 0, &crts, &n) < 0 || n == 0)
		return;
	end = gnutls_x509_crt_get_expiration_time(crts[0]);
	gmtime_r(&end, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
	if (end <= now)
		tallyd_log("rendezvous TLS: WARNING: certificate %s expired "
			"on %s; workers will refuse it", path, when);
	else if (end - now < EXPIRY_WARN_S)
		tallyd_log("rendezvous TLS: WARNING: certificate %s expires "
			"on %s", path, when);
	else
		tallyd_log("rendezvous TLS: certificate %s valid until %s",
			path, when);
	for (i = 0; i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
}

struct tallyd_tls *
tallyd_tls_create(const char *cert, const char *key, char *why, size_t wlen)
{
	struct tallyd_tls *t = calloc(1, sizeof(*t));
	struct stat st;
	int ret, err = EINVAL;

	if (t == NULL)
		return NULL;
	if ((ret = readable("certificate", cert, why, wlen)) != 0 ||
			(ret = readable("key", key, why, wlen)) != 0) {
		err = -ret;
		goto fail;
	}
	if (stat(key, &st) == 0 && (st.st_mode & 0077) != 0)
		tallyd_log("rendezvous TLS: WARNING: key %s is readable by "
			"others (mode %03o); make it 0600", key,
			(unsigned int)(st.st_mode & 0777));
	if (gnutls_certificate_allocate_credentials(&t->cred) < 0) {
		err = ENOMEM;
		snprintf(why, wlen, "TLS credentials: out of memory");
		goto fail;
	}
	ret = gnutls_certificate_set_x509_key_file(t->cred, cert, key,
		GNUTLS_X509_FMT_PEM);
	if (ret < 0) {
		snprintf(why, wlen, "certificate %s with key %s: %s", cert,
			key, gnutls_strerror(ret));
		goto fail;
	}
	if ((ret = gnutls_priority_init(&t->prio, PRIORITIES, NULL)) < 0) {
		snprintf(why, wlen, "TLS priorities: %s", gnutls_strerror(ret));
		goto fail;
	}
	log_expiry(t->cred, cert);
	return t;
fail:
	tallyd_tls_destroy(t);
	errno = err;
	return NULL;
}

void
tallyd_tls_destroy(struct tallyd_tls *t)
{
	if (t == NULL)
		return;
	if (t->prio != NULL)
		gnutls_priority_deinit(t->prio);
	if (t->cred != NULL)
		gnutls_certificate_free_credentials(t->cred);
	free(t);
}

struct tallyd_tls_conn *
tallyd_tls_accept(struct tallyd_tls *t, int fd)
{
	struct tallyd_tls_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (gnutls_init(&c->s, GNUTLS_SERVER | GNUTLS_NONBLOCK |
			GNUTLS_NO_SIGNAL | GNUTLS_NO_TICKETS) < 0) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	if (gnutls_priority_set(c->s, t->prio) < 0 ||
			gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE,
				t->cred) < 0) {
		tallyd_tls_close(c);
		errno = EINVAL;
		return NULL;
	}
	gnutls_certificate_server_set_request(c->s, GNUTLS_CERT_IGNORE);
	gnutls_transport_set_int(c->s, fd);
	return c;
}

int
tallyd_tls_handshake(struct tallyd_tls_conn *c, char *why, size_t wlen)
{
	int ret, tries;

	/* Warning alerts are not fatal: go on, a few times at most. */
	for (tries = 0; tries < 4; tries++) {
		ret = gnutls_handshake(c->s);
		if (ret == 0)
			return 0;
		if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED)
			return -EAGAIN;
		if (gnutls_error_is_fatal(ret))
			break;
	}
	snprintf(why, wlen, "TLS handshake failed: %s", gnutls_strerror(ret));
	return -EPROTO;
}

bool
tallyd_tls_wants_write(const struct tallyd_tls_conn *c)
{
	return gnutls_record_get_direction(c->s) == 1;
}

ssize_t
tallyd_tls_recv(struct tallyd_tls_conn *c, void *buf, size_t n)
{
	ssize_t r = gnutls_record_recv(c->s, buf, n);

	if (r >= 0)
		return r;
	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
		return -EAGAIN;
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	if (r != GNUTLS_E_REHANDSHAKE && !gnutls_error_is_fatal((int)r))
		return -EAGAIN;
	return -EPROTO;
}

size_t
tallyd_tls_pending(const struct tallyd_tls_conn *c)
{
	return gnutls_record_check_pending(c->s);
}

int
tallyd_tls_send(struct tallyd_tls_conn *c, const void *buf, size_t n)
{
	ssize_t w = gnutls_record_send(c->s, buf, n);

	return w == (ssize_t)n ? 0 : -EIO;
}

void
tallyd_tls_bye(struct tallyd_tls_conn *c)
{
	(void)gnutls_bye(c->s, GNUTLS_SHUT_WR);
}

void
tallyd_tls_close(struct tallyd_tls_conn *c)
{
	if (c == NULL)
		return;
	gnutls_deinit(c->s);
	free(c);
}
