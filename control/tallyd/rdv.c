/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rendezvous (docs/control.md, "Rendezvous protocol"): workers join a
 * job over TCP with its token, learn the dataplane's parameters, tell
 * their UDP source address, and wait at the join barrier until every rank
 * of the world has done the same. Then tallyd programs the membership
 * into tally-dp with a fresh wire token and releases them all at once.
 *
 * Each connection is a small state machine driven by the poll loop:
 * JOIN (awaiting "join") -> MEMBER (sent "params", awaiting "member") ->
 * WAIT (at the barrier) -> CLOSING (sent the last message; reading until
 * the peer closes, so that our last message is not lost to a reset).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <sodium.h>

#include "tallyd.h"

#define MAX_CONNS	1024
#define HELLO_MS	10000	/* a join must arrive this soon */
#define CLOSING_MS	2000

enum rc_state { RC_JOIN, RC_MEMBER, RC_WAIT, RC_CLOSING };

struct tallyd_rdv_conn {
	int fd;
	enum rc_state st;
	char peer[INET_ADDRSTRLEN + 8];
	int64_t deadline_ms;
	struct tallyd_job *job;		/* once joined */
	unsigned int rank;
	struct tallyd_member member;	/* once WAIT */
	uint8_t in[4 + TALLY_RDV_MAX_MSG];
	size_t inlen;
	struct tallyd_rdv_conn *next;
};

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

int
tallyd_rdv_listen(struct tallyd *d)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	if (split_addr(d->conf.rendezvous, &sa) != 0)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			listen(fd, 128) != 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	d->rdv_fd = fd;
	return 0;
}

static void
conn_free(struct tallyd *d, struct tallyd_rdv_conn *c)
{
	struct tallyd_rdv_conn **pp;

	if (c->job != NULL && c->job->joiners[c->rank] == c) {
		c->job->joiners[c->rank] = NULL;
		c->job->njoined--;
	}
	for (pp = &d->rdv_conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	close(c->fd);
	d->nrdv--;
	free(c);
}

void
tallyd_rdv_close_all(struct tallyd *d)
{
	while (d->rdv_conns != NULL)
		conn_free(d, d->rdv_conns);
	if (d->rdv_fd >= 0)
		close(d->rdv_fd);
	d->rdv_fd = -1;
}

/* Sends one message; the socket buffer always has room for one. */
static int
conn_send(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m)
{
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	int n = tally_rdv_format(m, buf, sizeof(buf));
	ssize_t w;

	if (n < 0)
		return n;
	w = send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	return w == n ? 0 : -EIO;
}

/*
 * The last message of a connection: leaves the job's forming membership,
 * sends m, half-closes, and reads until the peer closes.
 */
static void
conn_finish(struct tallyd_rdv_conn *c, const struct tally_rdv_msg *m)
{
	if (c->job != NULL && c->job->joiners[c->rank] == c) {
		c->job->joiners[c->rank] = NULL;
		c->job->njoined--;
	}
	c->job = NULL;
	conn_send(c, m);
	shutdown(c->fd, SHUT_WR);
	c->st = RC_CLOSING;
	c->inlen = 0;
	c->deadline_ms = tallyd_now_ms() + CLOSING_MS;
}

static void
conn_fail(struct tallyd *d, struct tallyd_rdv_conn *c, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void
conn_fail(struct tallyd *d, struct tallyd_rdv_conn *c, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.error, sizeof(m.error), fmt, ap);
	va_end(ap);
	d->st.join_failures[why]++;
	tallyd_log("rendezvous %s: %s", c->peer, m.error);
	conn_finish(c, &m);
}

void
tallyd_rdv_fail_job(struct tallyd *d, struct tallyd_job *j, int err,
	enum tallyd_join_fail why, const char *fmt, ...)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_ERROR, .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m.error, sizeof(m.error), fmt, ap);
	va_end(ap);
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++) {
		if (j->joiners[r] == NULL)
			continue;
		d->st.join_failures[why]++;
		conn_finish(j->joiners[r], &m);
	}
	if (m.error[0] != '\0')
		tallyd_log("%s", m.error);
}

void
tallyd_rdv_accept(struct tallyd *d)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct tallyd_rdv_conn *c;
	int fd, one = 1;

	fd = accept4(d->rdv_fd, (struct sockaddr *)&sa, &len,
		SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (d->nrdv >= MAX_CONNS || (c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->st = RC_JOIN;
	c->deadline_ms = tallyd_now_ms() + HELLO_MS;
	inet_ntop(AF_INET, &sa.sin_addr, c->peer, INET_ADDRSTRLEN);
	snprintf(c->peer + strlen(c->peer), 8, ":%u", ntohs(sa.sin_port));
	c->next = d->rdv_conns;
	d->rdv_conns = c;
	d->nrdv++;
}

unsigned int
tallyd_rdv_pollfds(struct tallyd *d, struct pollfd *p, unsigned int max)
{
	struct tallyd_rdv_conn *c;
	unsigned int n = 0;

	for (c = d->rdv_conns; c != NULL && n < max; c = c->next)
		p[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	return n;
}

static void barrier_try(struct tallyd *d, struct tallyd_job *j);

/*
 * Every rank of j is at the barrier: program the membership into tally-dp
 * with a fresh wire token (dpc_ops.c, asynchronous). The ranks are
 * released by tallyd_rdv_programmed() when tally-dp has taken it. While
 * it cannot (tally-dp is down, or a request about j is outstanding), the
 * ranks keep waiting: tallyd_rdv_retry() tries again after each poll and
 * after j's outstanding request, until the job's join deadline.
 */
static void
barrier_done(struct tallyd *d, struct tallyd_job *j)
{
	struct tallyd_member m[TALLY_MAX_WORKERS];
	uint64_t token;
	unsigned int r;

	if (tallyd_dpc_busy(j)) {
		j->program_pending = true;
		return;
	}
	for (r = 0; r < j->world; r++)
		m[r] = j->joiners[r]->member;
	randombytes_buf(&token, sizeof(token));
	if (tallyd_dpc_program(d, j, m, token) != 0)
		j->program_pending = true;
}

/* Whether every rank of j waits at the barrier with j's members. */
static bool
barrier_holds(const struct tallyd_job *j)
{
	for (unsigned int r = 0; r < j->world; r++) {
		const struct tallyd_rdv_conn *c = j->joiners[r];

		if (c == NULL || c->st != RC_WAIT ||
				c->member.ip != j->members[r].ip ||
				c->member.port != j->members[r].port)
			return false;
	}
	return true;
}

void
tallyd_rdv_programmed(struct tallyd *d, struct tallyd_job *j, int err)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_READY };
	unsigned int r;

	if (err != 0) {
		if (!j->program_pending && j->njoined > 0)
			tallyd_log("job '%s': all %u ranks joined; waiting for "
				"tally-dp to take the membership (%s)", j->name,
				j->world, strerror(-err));
		j->program_pending = j->njoined > 0;
		return;
	}
	j->program_pending = false;
	if (j->draining)
		return;
	if (!barrier_holds(j)) {
		/* A rank left or came back from elsewhere meanwhile. */
		barrier_try(d, j);
		return;
	}
	j->epoch = ++d->next_epoch;
	j->last_active = tallyd_wall_s();
	d->st.joins += j->world;
	d->st.memberships++;
	/* On disk before any rank may count under it. */
	tallyd_state_save(d);
	m.wire_token = j->wire_token;
	m.epoch = j->epoch;
	for (r = 0; r < j->world; r++)
		conn_finish(j->joiners[r], &m);
	j->njoined = 0;
	tallyd_log("job '%s' (id %u): membership %u of %u ranks formed",
		j->name, j->id, j->epoch, j->world);
}

/* Completes j's barrier if every rank is there. */
static void
barrier_try(struct tallyd *d, struct tallyd_job *j)
{
	unsigned int r;

	for (r = 0; r < j->world; r++)
		if (j->joiners[r] == NULL || j->joiners[r]->st != RC_WAIT)
			return;
	barrier_done(d, j);
}

void
tallyd_rdv_retry(struct tallyd *d)
{
	struct tallyd_job *j;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j->program_pending && !j->draining)
			barrier_try(d, j);
}

static void
on_join(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	struct tally_rdv_msg p = { .op = TALLY_RDV_PARAMS };
	struct tallyd_job *j = tallyd_job_find(d, m->job);
	char why[256];
	int err;

	if (j == NULL)
		return conn_fail(d, c, ENOENT, TALLYD_JF_UNKNOWN_JOB,
			"no job '%s'", m->job);
	if (!tallyd_job_token_ok(j, m->token))
		return conn_fail(d, c, EACCES, TALLYD_JF_BAD_TOKEN,
			"bad token for job '%s'", m->job);
	if (j->draining)
		return conn_fail(d, c, ECANCELED, TALLYD_JF_DRAINING,
			"job '%s' is being deleted", m->job);
	if ((err = tallyd_limits_check(d, j, false, why, sizeof(why))) != 0)
		return conn_fail(d, c, -err, TALLYD_JF_LIMITS, "%s", why);
	if (m->world != j->world)
		return conn_fail(d, c, EINVAL, TALLYD_JF_WORLD_MISMATCH,
			"world size %u does not match job '%s' (world %u)",
			m->world, m->job, j->world);
	if (m->rank >= j->world)
		return conn_fail(d, c, ERANGE, TALLYD_JF_BAD_RANK,
			"rank %u is outside 0..%u of job '%s'", m->rank,
			j->world - 1, m->job);
	if (j->joiners[m->rank] != NULL)
		return conn_fail(d, c, EEXIST, TALLYD_JF_DUPLICATE_RANK,
			"rank %u already joined job '%s'", m->rank, m->job);
	if (tallyd_dpc_endpoint(d, &p.dp_ip, &p.dp_port, &p.dp_nports) != 0)
		return conn_fail(d, c, EHOSTDOWN, TALLYD_JF_DP_DOWN,
			"the dataplane (tally-dp) is not reachable, and its "
			"address is not known yet");
	p.job_id = j->id;
	p.window = j->window;
	p.max_elems = j->max_elems;
	p.narrow = j->narrow;
	p.group_ip = j->group_ip;
	p.group_port = j->group_port;
	strcpy(p.codec, j->codec);
	if (conn_send(c, &p) != 0) {
		conn_free(d, c);
		return;
	}
	if (j->njoined == 0)
		j->form_deadline_ms = tallyd_now_ms() +
			(int64_t)d->conf.join_timeout_s * 1000;
	j->joiners[m->rank] = c;
	j->njoined++;
	c->job = j;
	c->rank = m->rank;
	c->st = RC_MEMBER;
	c->deadline_ms = j->form_deadline_ms;
}

static void
on_member(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tally_rdv_msg *m)
{
	struct tallyd_job *j = c->job;
	unsigned int r;

	for (r = 0; r < j->world; r++) {
		struct tallyd_rdv_conn *o = j->joiners[r];

		if (o != NULL && o != c && o->st == RC_WAIT &&
				o->member.ip == m->ip &&
				o->member.port == m->port)
			return conn_fail(d, c, EADDRINUSE,
				TALLYD_JF_DUPLICATE_RANK, "rank %u of job "
				"'%s' sends from the same address as rank %u",
				c->rank, j->name, r);
	}
	c->member.ip = m->ip;
	c->member.port = m->port;
	c->st = RC_WAIT;
	barrier_try(d, j);
}

/* Handles one complete message body. */
static void
on_message(struct tallyd *d, struct tallyd_rdv_conn *c, const uint8_t *body,
	size_t len)
{
	struct tally_rdv_msg m;
	char why[160];

	if (tally_rdv_parse(body, len, &m, why, sizeof(why)) != 0)
		return conn_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"malformed message: %s", why);
	if (c->st == RC_JOIN && m.op == TALLY_RDV_JOIN)
		return on_join(d, c, &m);
	if (c->st == RC_MEMBER && m.op == TALLY_RDV_MEMBER)
		return on_member(d, c, &m);
	conn_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
		"unexpected message at this point of the rendezvous");
}

static struct tallyd_rdv_conn *
conn_by_fd(struct tallyd *d, int fd)
{
	struct tallyd_rdv_conn *c;

	for (c = d->rdv_conns; c != NULL; c = c->next)
		if (c->fd == fd)
			return c;
	return NULL;
}

void
tallyd_rdv_event(struct tallyd *d, int fd, short revents)
{
	struct tallyd_rdv_conn *c = conn_by_fd(d, fd);
	ssize_t n;
	size_t want;

	if (c == NULL)
		return;
	if (c->st == RC_CLOSING) {
		uint8_t junk[512];

		n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_free(d, c);
		return;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	/* Read the prefix, then exactly the body it announces. */
	want = c->inlen < 4 ? 4 - c->inlen :
		4 + tally_rdv_frame_len(c->in) - c->inlen;
	n = recv(fd, c->in + c->inlen, want, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* Gone: leaves the forming membership, if it was in one. */
		if (c->job != NULL)
			tallyd_log("rendezvous %s: rank %u of job '%s' left "
				"before the barrier", c->peer, c->rank,
				c->job->name);
		conn_free(d, c);
		return;
	}
	if (n < 0)
		return;
	if (c->st == RC_WAIT)
		return conn_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"unexpected data while waiting at the barrier");
	c->inlen += (size_t)n;
	if (c->inlen == 4 && tally_rdv_frame_len(c->in) == 0)
		return conn_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
			"a message must be 1-%d bytes", TALLY_RDV_MAX_MSG);
	if (c->inlen > 4 && c->inlen == 4 + tally_rdv_frame_len(c->in)) {
		size_t len = c->inlen - 4;

		c->inlen = 0;
		on_message(d, c, c->in + 4, len);
	}
}

int64_t
tallyd_rdv_timers(struct tallyd *d, int64_t now)
{
	struct tallyd_rdv_conn *c, *next;
	struct tallyd_job *j;
	int64_t wait = 1000;

	for (j = d->jobs; j != NULL; j = j->next) {
		char missing[TALLY_MAX_WORKERS * 3 + 1] = "";
		unsigned int r, nmissing;

		if (j->njoined == 0)
			continue;
		if (now < j->form_deadline_ms) {
			if (j->form_deadline_ms - now < wait)
				wait = j->form_deadline_ms - now;
			continue;
		}
		nmissing = 0;
		for (r = 0; r < j->world; r++)
			if (j->joiners[r] == NULL ||
					j->joiners[r]->st != RC_WAIT) {
				snprintf(missing + strlen(missing),
					sizeof(missing) - strlen(missing),
					" %u", r);
				nmissing++;
			}
		if (nmissing == 0)
			tallyd_rdv_fail_job(d, j, EHOSTDOWN, TALLYD_JF_DP_DOWN,
				"all %u ranks joined job '%s' but tally-dp "
				"did not take the membership in %u s",
				j->world, j->name, d->conf.join_timeout_s);
		else
			tallyd_rdv_fail_job(d, j, ETIMEDOUT, TALLYD_JF_TIMEOUT,
				"%u of %u ranks joined job '%s' in %u s "
				"(missing:%s)", j->world - nmissing, j->world,
				j->name, d->conf.join_timeout_s, missing);
		j->program_pending = false;
	}
	for (c = d->rdv_conns; c != NULL; c = next) {
		next = c->next;
		if (c->st == RC_MEMBER || c->st == RC_WAIT)
			continue;	/* the job's deadline covers them */
		if (now >= c->deadline_ms) {
			if (c->st == RC_CLOSING)
				conn_free(d, c);
			else
				conn_fail(d, c, EPROTO, TALLYD_JF_MALFORMED,
					"no join message within %d s",
					HELLO_MS / 1000);
		} else if (c->deadline_ms - now < wait) {
			wait = c->deadline_ms - now;
		}
	}
	return wait;
}
