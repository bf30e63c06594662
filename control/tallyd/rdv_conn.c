/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous' connections: accepting them, TLS, framing, deadlines,
 * and the limits that keep a flood of connections from shutting real
 * workers out (docs/control.md, "Rendezvous protocol"; rdv.c handles
 * the messages).
 *
 * A connection that has not yet joined a job (token checked, rank taken)
 * is "unauthenticated": it may hold a slot for rendezvous_handshake_ms at
 * most, each source address may hold rendezvous_max_per_source of them,
 * and when the table is full (rendezvous_max_conns, fitted to the
 * open-file limit) one is evicted for the newcomer: the oldest that has
 * sent nothing yet from a source holding several, failing that the
 * oldest that has sent nothing, and so on (evict_pick()). A worker
 * speaks at once (its TLS hello) and presents its token within a few
 * round trips, so an idle flood only ever evicts its own connections,
 * however fast it reconnects. When descriptors run out anyway (EMFILE),
 * the cap comes down below the point where they did, the oldest
 * unauthenticated connections go, and with none left to evict the
 * listener rests instead of spinning on a listener that stays readable.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "addrmap.h"
#include "rdv.h"
#include "srcs.h"
#include "tls.h"

#define FD_RESERVE	96	/* descriptors kept for all but the rendezvous */
#define FD_HEADROOM	32	/* freed at once when they run out */
#define BACKOFF_MS	250	/* the listener rests this long */
#define ACCEPT_BURST	64	/* accepts per readable listener */
#define EVICT_SCAN	256	/* candidates evict_pick() looks at */
#define NOTE_BURST	10	/* log lines of tallyd_rdv_note()... */
#define NOTE_WINDOW_MS	10000	/* ...per window */

static int
split_addr(const char *s, struct sockaddr_in *sa)
{
	char ip[INET_ADDRSTRLEN + 1];
	const char *colon = strrchr(s, ':');

	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	*sa = (struct sockaddr_in){ .sin_family = AF_INET,
		.sin_port = htons((uint16_t)atoi(colon + 1)) };
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

/*
 * The connection cap the open-file limit allows: raises the soft limit
 * toward want + FD_RESERVE (up to the hard limit), and lowers the cap
 * when even that is not enough. Sets *nfd to the soft limit.
 */
static unsigned int
fit_cap(unsigned int want, size_t *nfd)
{
	rlim_t need = (rlim_t)want + FD_RESERVE;
	struct rlimit rl;
	unsigned int cap;

	*nfd = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return want;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ||
			rl.rlim_max >= need ? need : rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) {
		*nfd = (size_t)need;
		return want;
	}
	*nfd = (size_t)rl.rlim_cur;
	cap = rl.rlim_cur > FD_RESERVE + 16 ?
		(unsigned int)(rl.rlim_cur - FD_RESERVE) : 16;
	tallyd_log("rendezvous: the open-file limit is %llu, so at most %u "
		"connections, not rendezvous_max_conns = %u (raise "
		"LimitNOFILE to %llu)", (unsigned long long)rl.rlim_cur, cap,
		want, (unsigned long long)need);
	return cap;
}

/* TLS credentials and the address map, as the configuration says. */
static int
load_files(struct tallyd *d, char *why, size_t wlen)
{
	struct tallyd_rdv *r = d->rdv;
	const struct tallyd_conf *cf = &d->conf;

	if (strcmp(cf->rendezvous_tls, "off") == 0) {
		tallyd_log("rendezvous: WARNING: rendezvous_tls = off: job "
			"tokens cross the network in clear, and anyone who "
			"sees one can join its job (docs/operations.md)");
	} else {
		r->tls = tallyd_tls_create(cf->rendezvous_tls_cert,
			cf->rendezvous_tls_key, why, wlen);
		if (r->tls == NULL) {
			int err = errno;
			size_t len = strlen(why);

			snprintf(why + len, wlen - len, " (rendezvous_tls_cert "
				"and _key: docs/operations.md, \"TLS for the "
				"rendezvous\")");
			return -err;
		}
	}
	if (cf->rendezvous_data_map[0] != '\0') {
		r->map = tallyd_addrmap_load(cf->rendezvous_data_map, why,
			wlen);
		if (r->map == NULL)
			return -errno;
		tallyd_log("rendezvous: data address map %s: %zu pairs",
			cf->rendezvous_data_map, tallyd_addrmap_size(r->map));
	}
	return 0;
}

int
tallyd_rdv_listen(struct tallyd *d, char *why, size_t wlen)
{
	struct tallyd_rdv *r;
	struct sockaddr_in sa;
	int fd, one = 1, ret;

	if (split_addr(d->conf.rendezvous, &sa) != 0) {
		snprintf(why, wlen, "'%s' is not IPv4:PORT", d->conf.rendezvous);
		return -EINVAL;
	}
	if ((r = d->rdv = calloc(1, sizeof(*r))) == NULL)
		return -ENOMEM;
	r->cap = fit_cap(d->conf.rendezvous_max_conns, &r->nbyfd);
	r->byfd = calloc(r->nbyfd, sizeof(r->byfd[0]));
	r->srcs = tallyd_srcs_create(r->cap + 1);
	if (r->byfd == NULL || r->srcs == NULL) {
		snprintf(why, wlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	if ((ret = load_files(d, why, wlen)) != 0)
		return ret;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			listen(fd, 1024) != 0) {
		ret = errno;
		close(fd);
		errno = ret;
		goto fail;
	}
	d->rdv_fd = fd;
	return 0;
fail:
	ret = errno;
	snprintf(why, wlen, "%s", strerror(ret));
	return -ret;
}

int
tallyd_rdv_listen_fd(const struct tallyd *d, int64_t now)
{
	if (d->rdv != NULL && now < d->rdv->pause_until_ms)
		return -1;
	return d->rdv_fd;
}

unsigned int
tallyd_rdv_count(const struct tallyd *d)
{
	return d->rdv != NULL ? d->rdv->n : 0;
}

unsigned int
tallyd_rdv_cap(const struct tallyd *d)
{
	return d->rdv != NULL ? d->rdv->cap : 0;
}

void
tallyd_rdv_note(struct tallyd *d, const char *fmt, ...)
{
	struct tallyd_rdv *r = d->rdv;
	int64_t now = tallyd_now_ms();
	char line[512];
	va_list ap;

	if (now >= r->note_window_ms) {
		if (r->unnoted > 0)
			tallyd_log("rendezvous: %u more such events in the "
				"last %d s (counted in stats)", r->unnoted,
				NOTE_WINDOW_MS / 1000);
		r->note_window_ms = now + NOTE_WINDOW_MS;
		r->noted = r->unnoted = 0;
	}
	if (r->noted >= NOTE_BURST) {
		r->unnoted++;
		return;
	}
	r->noted++;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	tallyd_log("%s", line);
}

static void
unauth_unlink(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	struct tallyd_rdv *r = d->rdv;

	if (c->uprev != NULL)
		c->uprev->unext = c->unext;
	else
		r->uhead = c->unext;
	if (c->unext != NULL)
		c->unext->uprev = c->uprev;
	else
		r->utail = c->uprev;
	c->uprev = c->unext = NULL;
	tallyd_srcs_sub(r->srcs, c->src);
	r->nunauth--;
}

void
tallyd_rdv_authed(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	if (c->authed)
		return;
	unauth_unlink(d, c);
	c->authed = true;
}

/* Closes and frees c, whatever its state. */
static void
conn_free(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	struct tallyd_rdv *r = d->rdv;

	tallyd_rdv_left(c);
	if (!c->authed)
		unauth_unlink(d, c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		r->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if ((size_t)c->fd < r->nbyfd)
		r->byfd[c->fd] = NULL;
	tallyd_tls_close(c->tls);
	close(c->fd);
	r->n--;
	free(c);
}

/* Closes an unauthenticated connection to make room; counts it. */
static void
evict(struct tallyd *d, struct tallyd_rdv_conn *c, uint64_t *counter,
	const char *why)
{
	tallyd_rdv_note(d, "rendezvous %s: closed before it joined (%s)",
		c->peer, why);
	(*counter)++;
	conn_free(d, c);
}

void
tallyd_rdv_close_all(struct tallyd *d)
{
	struct tallyd_rdv *r = d->rdv;

	if (r != NULL) {
		while (r->conns != NULL)
			conn_free(d, r->conns);
		tallyd_tls_destroy(r->tls);
		tallyd_addrmap_destroy(r->map);
		tallyd_srcs_destroy(r->srcs);
		free(r->byfd);
		free(r);
		d->rdv = NULL;
	}
	if (d->rdv_fd >= 0)
		close(d->rdv_fd);
	d->rdv_fd = -1;
}

int
tallyd_rdv_send(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));
	ssize_t w;

	if (n < 0)
		return n;
	if (c->tls != NULL)
		return tallyd_tls_send(c->tls, buf, (size_t)n);
	/* A fresh socket's buffer always has room for one message. */
	w = send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	return w == n ? 0 : -EIO;
}

void
tallyd_rdv_finish(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m)
{
	tallyd_rdv_left(c);
	if (m != NULL)
		tallyd_rdv_send(c, m);
	if (c->tls != NULL && c->st != RC_TLS)
		tallyd_tls_bye(c->tls);
	shutdown(c->fd, SHUT_WR);
	c->st = RC_CLOSING;
	c->inlen = 0;
	c->deadline_ms = tallyd_now_ms() + TALLYD_RDV_CLOSING_MS;
}

/* Records c under its descriptor, growing the index when needed. */
static int
index_fd(struct tallyd_rdv *r, struct tallyd_rdv_conn *c)
{
	if ((size_t)c->fd >= r->nbyfd) {
		size_t n = (size_t)c->fd * 2;
		struct tallyd_rdv_conn **p = realloc(r->byfd, n * sizeof(*p));

		if (p == NULL)
			return -ENOMEM;
		memset(p + r->nbyfd, 0, (n - r->nbyfd) * sizeof(*p));
		r->byfd = p;
		r->nbyfd = n;
	}
	r->byfd[c->fd] = c;
	return 0;
}

/* The oldest unauthenticated connection from src, or NULL. */
static struct tallyd_rdv_conn *
oldest_of(struct tallyd_rdv *r, uint32_t src)
{
	struct tallyd_rdv_conn *c;

	for (c = r->uhead; c != NULL; c = c->unext)
		if (c->src == src)
			return c;
	return NULL;
}

/*
 * The unauthenticated connection to evict when the table is full. Of the
 * oldest EVICT_SCAN, the first in this order: silent (nothing received:
 * a worker sends its TLS hello at once) and from a source that holds
 * others; silent; from a source that holds others; else the oldest.
 */
static struct tallyd_rdv_conn *
evict_pick(struct tallyd_rdv *r)
{
	struct tallyd_rdv_conn *c, *best = r->uhead;
	int best_rank = 4, n = 0;

	for (c = r->uhead; c != NULL && n < EVICT_SCAN; c = c->unext, n++) {
		int rank = (c->heard ? 2 : 0) +
			(tallyd_srcs_get(r->srcs, c->src) > 1 ? 0 : 1);

		if (rank < best_rank) {
			best = c;
			best_rank = rank;
			if (rank == 0)
				break;
		}
	}
	return best;
}

/*
 * Makes room for a newcomer from src: evicts the oldest of its own when
 * src is at its cap, and one of all (evict_pick()) when the table is
 * full. Returns false when the table is full of authenticated ones.
 */
static bool
make_room(struct tallyd *d, uint32_t src)
{
	struct tallyd_rdv *r = d->rdv;
	struct tallyd_rdv_conn *old;

	if (tallyd_srcs_get(r->srcs, src) >=
			d->conf.rendezvous_max_per_source &&
			(old = oldest_of(r, src)) != NULL)
		evict(d, old, &d->st.rdv_evicted_per_source,
			"its address holds rendezvous_max_per_source");
	if (r->n < r->cap)
		return true;
	if (r->uhead == NULL)
		return false;
	evict(d, evict_pick(r), &d->st.rdv_evicted_full,
		"all connections in use");
	return true;
}

/* Takes an accepted connection in, or closes it. */
static void
admit(struct tallyd *d, int fd, const struct sockaddr_in *sa)
{
	struct tallyd_rdv *r = d->rdv;
	uint32_t src = ntohl(sa->sin_addr.s_addr);
	struct tallyd_rdv_conn *c;
	int one = 1;

	if (!make_room(d, src)) {
		d->st.rdv_refused++;
		tallyd_rdv_note(d, "rendezvous: refused a connection: all %u "
			"are jobs' ranks (rendezvous_max_conns)", r->cap);
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->src = src;
	if (index_fd(r, c) != 0 || (r->tls != NULL &&
			(c->tls = tallyd_tls_accept(r->tls, fd)) == NULL) ||
			tallyd_srcs_add(r->srcs, src) != 0) {
		if ((size_t)fd < r->nbyfd)
			r->byfd[fd] = NULL;
		tallyd_tls_close(c->tls);
		free(c);
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->st = r->tls != NULL ? RC_TLS : RC_JOIN;
	c->deadline_ms = tallyd_now_ms() + d->conf.rendezvous_handshake_ms;
	inet_ntop(AF_INET, &sa->sin_addr, c->peer, INET_ADDRSTRLEN);
	snprintf(c->peer + strlen(c->peer), 8, ":%u", ntohs(sa->sin_port));
	c->next = r->conns;
	if (r->conns != NULL)
		r->conns->prev = c;
	r->conns = c;
	c->uprev = r->utail;
	if (r->utail != NULL)
		r->utail->unext = c;
	else
		r->uhead = c;
	r->utail = c;
	r->n++;
	r->nunauth++;
}

/*
 * accept() found no descriptor: bring the cap below this point for good,
 * and free FD_HEADROOM descriptors from the oldest unauthenticated
 * connections. Returns true if any were freed (try again); false: the
 * listener rests for BACKOFF_MS.
 */
static bool
out_of_fds(struct tallyd *d, int err)
{
	struct tallyd_rdv *r = d->rdv;
	unsigned int cap = r->n > FD_HEADROOM + 16 ? r->n - FD_HEADROOM : 16;
	unsigned int freed = 0;

	if (cap < r->cap) {
		tallyd_log("rendezvous: accept: %s with %u connections: "
			"holding at most %u from now on (raise LimitNOFILE)",
			strerror(err), r->n, cap);
		r->cap = cap;
	}
	while (freed < FD_HEADROOM && r->uhead != NULL) {
		evict(d, evict_pick(r), &d->st.rdv_evicted_fds,
			"out of file descriptors");
		freed++;
	}
	if (freed > 0)
		return true;
	d->st.rdv_fd_backoffs++;
	r->pause_until_ms = tallyd_now_ms() + BACKOFF_MS;
	tallyd_rdv_note(d, "rendezvous: accept: %s, and every connection is "
		"a job's rank: not accepting for %d ms", strerror(err),
		BACKOFF_MS);
	return false;
}

void
tallyd_rdv_accept(struct tallyd *d)
{
	bool retried = false;

	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct sockaddr_in sa;
		socklen_t len = sizeof(sa);
		int fd = accept4(d->rdv_fd, (struct sockaddr *)&sa, &len,
			SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			admit(d, fd, &sa);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS &&
				errno != ENOMEM)
			return;		/* EAGAIN: all taken */
		if (retried || !out_of_fds(d, errno)) {
			if (retried) {
				d->rdv->pause_until_ms = tallyd_now_ms() +
					BACKOFF_MS;
				d->st.rdv_fd_backoffs++;
			}
			return;
		}
		retried = true;
	}
}

unsigned int
tallyd_rdv_pollfds(struct tallyd *d, struct pollfd *p, unsigned int max)
{
	struct tallyd_rdv_conn *c;
	unsigned int n = 0;

	for (c = d->rdv->conns; c != NULL && n < max; c = c->next) {
		short ev = POLLIN;

		if (c->st == RC_TLS && tallyd_tls_wants_write(c->tls))
			ev = POLLOUT;
		p[n++] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	return n;
}

/*
 * A rendezvous with TLS, and a client that speaks without it: its first
 * bytes are a message's length prefix (a 0 first), not a TLS record (22).
 * Such a worker sent its token in clear; tell it so, in clear. Returns 1
 * when that was the case (c is closing), -1 when c closed before saying
 * anything (c is freed), 0 to go on with the handshake.
 */
static int
cleartext_join(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = EPROTO };
	ssize_t n;
	uint8_t b;

	n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	c->peeked = true;
	if (n == 0)
		return -1;
	c->heard = true;
	if (b != 0)
		return 0;
	d->st.rdv_tls_failures++;
	tallyd_rdv_note(d, "rendezvous %s: a join without TLS: its token "
		"crossed the network in clear", c->peer);
	snprintf(m.error, sizeof(m.error), "this rendezvous takes TLS only; "
		"the join was sent in clear: give the worker tallyd's CA "
		"(TALLY_CA) and consider its job token seen");
	tallyd_tls_close(c->tls);
	c->tls = NULL;
	c->st = RC_JOIN;
	tallyd_rdv_finish(c, &m);
	return 1;
}

/* One step of c's TLS handshake; frees c when it fails. */
static void
handshake(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	char why[160];
	int ret;

	if (!c->peeked) {
		ret = cleartext_join(d, c);
		if (ret < 0)
			conn_free(d, c);
		if (ret != 0 || !c->peeked)
			return;
	}
	ret = tallyd_tls_handshake(c->tls, why, sizeof(why));
	if (ret == -EAGAIN)
		return;
	if (ret != 0) {
		d->st.rdv_tls_failures++;
		tallyd_rdv_note(d, "rendezvous %s: %s", c->peer, why);
		conn_free(d, c);
		return;
	}
	c->st = RC_JOIN;
}

static ssize_t
conn_recv(struct tallyd_rdv_conn *c, void *buf, size_t n)
{
	ssize_t r;

	if (c->tls != NULL)
		return tallyd_tls_recv(c->tls, buf, n);
	r = recv(c->fd, buf, n, MSG_DONTWAIT);
	if (r >= 0)
		return r;
	return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
}

/*
 * Reads what c has for us, up to one message, and handles the message.
 * Returns 1 when c may have more to read now, 0 when not, -1 when c is
 * gone.
 */
static int
read_step(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	size_t want = c->inlen < 4 ? 4 - c->inlen :
		4 + tally_rdv_frame_len(c->in) - c->inlen;
	ssize_t n = conn_recv(c, c->in + c->inlen, want);

	if (n == -EAGAIN)
		return 0;
	if (n <= 0) {
		/* Gone: leaves the forming membership, if it was in one. */
		if (c->job != NULL)
			tallyd_log("rendezvous %s: rank %u of job '%s' left "
				"before the barrier", c->peer, c->rank,
				c->job->name);
		conn_free(d, c);
		return -1;
	}
	c->heard = true;
	if (c->st == RC_WAIT) {
		tallyd_rdv_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"unexpected data while waiting at the barrier");
		return 0;
	}
	c->inlen += (size_t)n;
	if (c->inlen == 4 && tally_rdv_frame_len(c->in) == 0) {
		tallyd_rdv_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"a message must be 1-%d bytes", TALLY_RDV_MAX_MSG);
		return 0;
	}
	if (c->inlen > 4 && c->inlen == 4 + tally_rdv_frame_len(c->in)) {
		size_t len = c->inlen - 4;

		c->inlen = 0;
		tallyd_rdv_message(d, c, c->in + 4, len);
	}
	return c->st == RC_JOIN || c->st == RC_MEMBER || c->st == RC_WAIT;
}

void
tallyd_rdv_event(struct tallyd *d, int fd, short revents)
{
	struct tallyd_rdv *r = d->rdv;
	struct tallyd_rdv_conn *c = (size_t)fd < r->nbyfd ? r->byfd[fd] : NULL;
	int more;

	if (c == NULL)
		return;
	if (c->st == RC_CLOSING) {
		uint8_t junk[512];
		ssize_t n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_free(d, c);
		return;
	}
	if (!(revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
		return;
	if (c->st == RC_TLS) {
		handshake(d, c);
		/* Freed, closing, or still at it: the next event will tell. */
		if (r->byfd[fd] != c || c->st != RC_JOIN)
			return;
	}
	/*
	 * GnuTLS may hold decrypted bytes the socket no longer signals:
	 * read on while it does.
	 */
	do {
		more = read_step(d, c);
	} while (more == 1 && c->tls != NULL && tallyd_tls_pending(c->tls) > 0);
}

int64_t
tallyd_rdv_conn_timers(struct tallyd *d, int64_t now, int64_t wait)
{
	struct tallyd_rdv_conn *c, *next;

	for (c = d->rdv->conns; c != NULL; c = next) {
		next = c->next;
		if (c->st == RC_MEMBER || c->st == RC_WAIT)
			continue;	/* the job's deadline covers them */
		if (now < c->deadline_ms) {
			if (c->deadline_ms - now < wait)
				wait = c->deadline_ms - now;
			continue;
		}
		if (c->st == RC_CLOSING) {
			conn_free(d, c);
		} else if (c->st == RC_TLS) {
			d->st.rdv_handshake_timeouts++;
			tallyd_rdv_note(d, "rendezvous %s: no TLS handshake "
				"within %u ms", c->peer,
				d->conf.rendezvous_handshake_ms);
			conn_free(d, c);
		} else {
			d->st.rdv_handshake_timeouts++;
			tallyd_rdv_note(d, "rendezvous %s: no join message "
				"within %u ms", c->peer,
				d->conf.rendezvous_handshake_ms);
			tallyd_rdv_finish(c, &(struct tally_rdv_msg){
				.op = TALLY_RDV_ERROR, .err = ETIMEDOUT,
				.error = "no join message in time" });
		}
	}
	return wait;
}
