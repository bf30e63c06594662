/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's connection to tally-dp's admin socket (SOCK_SEQPACKET, one
 * JSON object each way per message), driven by main.c's poll loop and
 * never waited on: a non-blocking connect, a queue of requests sent one
 * at a time, each with REQ_TIMEOUT_MS from the moment it starts (connect
 * and send included) to its reply. A request past its deadline fails
 * with -ETIMEDOUT and takes tally-dp down: the connection is closed,
 * queued requests fail with -EHOSTDOWN, and so does every request until
 * one marked TALLYD_DPC_PROBE (the poll's, every dp_poll_ms) gets an
 * answer on a fresh connection. A stopped tally-dp whose listen backlog
 * is full refuses the connect at once (EAGAIN): the same, sooner.
 *
 * What the requests mean is in dpc_ops.c (memberships) and dpc_poll.c
 * (the poll and the reconciliation).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "dpc.h"

#define REQ_TIMEOUT_MS	1000
#define MAX_REPLY	(256 * 1024)

struct dpc_req {
	char *text;			/* the request, NUL-terminated */
	struct tallyd_job *j;		/* NULL: none, or freed since */
	unsigned int flags;
	tallyd_dpc_cb *cb;
	uintptr_t arg;
	int err;			/* failed: dispatch with this */
	bool retried;			/* resent once on a new connection */
	struct dpc_req *next;
};

enum dpc_conn { DPC_CLOSED, DPC_CONNECTING, DPC_OPEN };

struct tallyd_dpc {
	unsigned int dp;		/* its index in d->dps */
	char path[108];
	int fd;
	enum dpc_conn conn;
	bool sent;			/* the head went out; awaiting its reply */
	int64_t deadline_ms;		/* the head's, once started */
	struct dpc_req *head, **tail;	/* queued, head first */
	struct dpc_req *failed, **ftail; /* to dispatch */
	uint64_t seq;
	bool up;			/* the last exchange succeeded */
	int down_err;			/* why it went down (-errno); 0: up */
	bool logged_down;
	bool del_counters;
	uint32_t ip;			/* from ping; host order */
	uint16_t port;
	uint16_t nports;
	uint16_t nqpns;			/* info's "roce": 0 = none */
	uint32_t qpns[TALLY_RDV_MAX_QPNS];
	struct tallyd_dpc_poll *poll;
	char *buf;			/* MAX_REPLY bytes */
};

struct tallyd_dpc *
tallyd_dpc_create(unsigned int dp, const char *path)
{
	struct tallyd_dpc *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (strlen(path) >= sizeof(c->path)) {
		free(c);
		errno = ENAMETOOLONG;
		return NULL;
	}
	c->buf = malloc(MAX_REPLY);
	c->poll = tallyd_dpc_poll_new();
	if (c->buf == NULL || c->poll == NULL) {
		tallyd_dpc_destroy(c);
		errno = ENOMEM;
		return NULL;
	}
	strcpy(c->path, path);
	c->dp = dp;
	c->fd = -1;
	c->tail = &c->head;
	c->ftail = &c->failed;
	return c;
}

static void
req_free(struct dpc_req *r)
{
	free(r->text);
	free(r);
}

/* Drops every request without calling back: tallyd is exiting. */
void
tallyd_dpc_destroy(struct tallyd_dpc *c)
{
	struct dpc_req *lists[2], *r;

	if (c == NULL)
		return;
	lists[0] = c->head;
	lists[1] = c->failed;
	for (int i = 0; i < 2; i++)
		while ((r = lists[i]) != NULL) {
			lists[i] = r->next;
			req_free(r);
		}
	if (c->fd >= 0)
		close(c->fd);
	tallyd_dpc_poll_free(c->poll);
	free(c->buf);
	free(c);
}

bool
tallyd_dpc_up(const struct tallyd_dpc *c)
{
	return c != NULL && c->up;
}

bool
tallyd_dpc_dead(const struct tallyd_dpc *c)
{
	/* Nothing listens, or the process closed on us: not a stall. */
	return c != NULL && !c->up && (c->down_err == -ECONNREFUSED ||
		c->down_err == -ENOENT || c->down_err == -ECONNRESET ||
		c->down_err == -EPIPE);
}

uint64_t
tallyd_dpc_seq(const struct tallyd_dpc *c)
{
	return c->seq;
}

bool
tallyd_dpc_del_counters(const struct tallyd_dpc *c)
{
	return c->del_counters;
}

void
tallyd_dpc_set_del_counters(struct tallyd_dpc *c)
{
	c->del_counters = true;
}

struct tallyd_dpc_poll *
tallyd_dpc_poll_state(struct tallyd_dpc *c)
{
	return c->poll;
}

/*
 * tally-dp's RoCEv2 QPNs from its info reply's optional "roce":
 * {"qpns": [...], "pkey": N}, one QPN per worker lcore (docs/rdma.md).
 * Absent: a tally-dp without RoCEv2 (nqpns 0). 0, or -EPROTO.
 */
static int
set_roce(struct tallyd_dpc *c, json_t *roce)
{
	json_t *qpns = json_object_get(roce, "qpns");
	size_t i, n = json_array_size(qpns);

	c->nqpns = 0;
	if (roce == NULL)
		return 0;
	if (!json_is_array(qpns) || n < 1 || n > TALLY_RDV_MAX_QPNS)
		return -EPROTO;
	for (i = 0; i < n; i++) {
		json_int_t q = json_integer_value(json_array_get(qpns, i));

		if (!json_is_integer(json_array_get(qpns, i)) || q < 1 ||
				q > 0xffffff)
			return -EPROTO;
		c->qpns[i] = (uint32_t)q;
	}
	c->nqpns = (uint16_t)n;
	return 0;
}

int
tallyd_dpc_set_endpoint(struct tallyd *d, unsigned int dp, json_t *r)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;
	json_int_t port, workers;
	const char *ip = NULL;
	struct in_addr a;

	if (json_unpack(r, "{s:I, s:I, s?s}", "udp_port", &port, "workers",
			&workers, "ip", &ip) != 0 || port < 1 ||
			port > 65535 || workers < 1 ||
			port + workers - 1 > 65535)
		return -EPROTO;
	if (d->dps[dp].address[0] != '\0')
		ip = d->dps[dp].address;
	if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1)
		return -EPROTO;
	c->ip = ntohl(a.s_addr);
	c->port = (uint16_t)port;
	c->nports = (uint16_t)workers;
	return set_roce(c, json_object_get(r, "roce"));
}

int
tallyd_dpc_qpns(struct tallyd *d, unsigned int dp, uint32_t *qpns,
	uint16_t *n)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;

	if (c->nqpns == 0)
		return -EPROTONOSUPPORT;
	memcpy(qpns, c->qpns, c->nqpns * sizeof(qpns[0]));
	*n = c->nqpns;
	return 0;
}

int
tallyd_dpc_endpoint(struct tallyd *d, unsigned int dp, uint32_t *ip,
	uint16_t *port, uint16_t *nports)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;

	/* Down but known: workers may join while it restarts. */
	if (c->ip == 0 || c->port == 0)
		return -EHOSTDOWN;
	*ip = c->ip;
	*port = c->port;
	*nports = c->nports;
	return 0;
}

int
tallyd_dpc_request(struct tallyd *d, unsigned int dp, json_t *req,
	struct tallyd_job *j, unsigned int flags, tallyd_dpc_cb *cb,
	uintptr_t arg)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;
	struct tallyd_shard *sh = j != NULL ? tallyd_job_shard(j, dp) : NULL;
	struct dpc_req *r = calloc(1, sizeof(*r));

	if (r != NULL && req != NULL)
		r->text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (r == NULL || r->text == NULL) {
		free(r);
		return -ENOMEM;
	}
	r->j = j;
	r->flags = flags;
	r->cb = cb;
	r->arg = arg;
	*c->tail = r;
	c->tail = &r->next;
	c->seq++;
	if (sh != NULL)
		sh->opseq = c->seq;
	return 0;
}

void
tallyd_dpc_forget(struct tallyd *d, struct tallyd_job *j)
{
	for (unsigned int dp = 0; dp < d->ndps; dp++) {
		struct tallyd_dpc *c = d->dps[dp].dpc;
		struct dpc_req *lists[2], *r;

		if (c == NULL)
			continue;
		lists[0] = c->head;
		lists[1] = c->failed;
		for (int i = 0; i < 2; i++)
			for (r = lists[i]; r != NULL; r = r->next)
				if (r->j == j)
					r->j = NULL;
	}
}

/* Moves the head to the failed list with err. */
static void
fail_head(struct tallyd *d, struct tallyd_dpc *c, int err)
{
	struct dpc_req *r = c->head;

	c->head = r->next;
	if (c->head == NULL)
		c->tail = &c->head;
	r->next = NULL;
	r->err = err;
	*c->ftail = r;
	c->ftail = &r->next;
	c->sent = false;
	c->deadline_ms = 0;
	d->st.dp_errors++;
}

static void
conn_close(struct tallyd_dpc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->conn = DPC_CLOSED;
	c->sent = false;
}

/*
 * tally-dp is down: the connection goes, the head fails with err, the
 * queue behind it with -EHOSTDOWN (except probes, which may reconnect),
 * and its last stats go (they are no longer current).
 */
static void
go_down(struct tallyd *d, struct tallyd_dpc *c, int err)
{
	struct dpc_req **pp, *r;

	conn_close(c);
	if (c->head != NULL)
		fail_head(d, c, err);
	for (pp = &c->head; (r = *pp) != NULL;) {
		if (r->flags & TALLYD_DPC_PROBE) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		r->next = NULL;
		r->err = -EHOSTDOWN;
		*c->ftail = r;
		c->ftail = &r->next;
		d->st.dp_errors++;
	}
	c->tail = pp;
	if (c->up || !c->logged_down)
		tallyd_log("tally-dp at %s is down: %s", c->path,
			strerror(-err));
	c->up = false;
	c->down_err = err;
	c->logged_down = true;
	json_decref(d->dps[c->dp].stats);
	d->dps[c->dp].stats = NULL;
}

/* Starts a non-blocking connect; 0 (open or under way) or -errno. */
static int
conn_open(struct tallyd_dpc *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	strcpy(sa.sun_path, c->path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
		0);
	if (fd < 0)
		return -errno;
	c->fd = fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		c->conn = DPC_OPEN;
		return 0;
	}
	if (errno == EINPROGRESS) {
		c->conn = DPC_CONNECTING;
		return 0;
	}
	/* EAGAIN: its backlog is full (tally-dp is not accepting). */
	return -errno;
}

/*
 * Sends the head on the open connection. Returns 0 (sent, or the socket
 * is full: POLLOUT will say when), -EAGAIN to resend on a new
 * connection, or another -errno for the head.
 */
static int
send_head(struct tallyd_dpc *c)
{
	struct dpc_req *r = c->head;
	ssize_t n = send(c->fd, r->text, strlen(r->text),
		MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n >= 0) {
		c->sent = true;
		return 0;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	if ((errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) &&
			!r->retried) {
		r->retried = true;
		return -EAGAIN;
	}
	return -errno;
}

/* Sends what can be sent now; fails what cannot be sent at all. */
static void
kick(struct tallyd *d, struct tallyd_dpc *c)
{
	int ret;

	while (c->head != NULL && !c->sent) {
		if (c->conn == DPC_CLOSED) {
			if (!c->up && !(c->head->flags & TALLYD_DPC_PROBE)) {
				fail_head(d, c, -EHOSTDOWN);
				continue;
			}
			c->deadline_ms = tallyd_now_ms() + REQ_TIMEOUT_MS;
			if ((ret = conn_open(c)) != 0) {
				go_down(d, c, ret);
				continue;
			}
		}
		if (c->deadline_ms == 0)
			c->deadline_ms = tallyd_now_ms() + REQ_TIMEOUT_MS;
		if (c->conn == DPC_CONNECTING)
			return;
		ret = send_head(c);
		if (ret == -EAGAIN) {
			conn_close(c);
			continue;
		}
		if (ret == -EMSGSIZE) {
			fail_head(d, c, ret);	/* the request, not tally-dp */
			continue;
		}
		if (ret != 0)
			go_down(d, c, ret);
		return;
	}
}

/* Calls back the failed requests (they may queue new ones). */
static void
dispatch_failed(struct tallyd *d, struct tallyd_dpc *c)
{
	struct dpc_req *r;

	/* Popped one by one: a callback may free a job others name. */
	while ((r = c->failed) != NULL) {
		c->failed = r->next;
		if (c->failed == NULL)
			c->ftail = &c->failed;
		if (r->cb != NULL)
			r->cb(d, c->dp, r->j, NULL, r->err, r->arg);
		req_free(r);
	}
}

void
tallyd_dpc_pollfd(struct tallyd *d, unsigned int dp, struct pollfd *p)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;

	/* tallyd_dpc_timers(), just before, sent what could be sent. */
	*p = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	if (c->conn == DPC_CONNECTING || (c->head != NULL && !c->sent))
		p->events |= POLLOUT;
}

/* One client's deadlines and failed requests; ms to its next deadline. */
static int64_t
timers(struct tallyd *d, struct tallyd_dpc *c, int64_t now)
{
	if (c->head != NULL && c->deadline_ms != 0 && now >= c->deadline_ms) {
		d->st.dp_timeouts++;
		go_down(d, c, -ETIMEDOUT);
	}
	kick(d, c);
	dispatch_failed(d, c);
	kick(d, c);
	if (c->failed != NULL)
		return 0;
	if (c->head != NULL && c->deadline_ms != 0)
		return c->deadline_ms > now ? c->deadline_ms - now : 0;
	return REQ_TIMEOUT_MS;
}

int64_t
tallyd_dpc_timers(struct tallyd *d, int64_t now)
{
	int64_t wait = REQ_TIMEOUT_MS, w;

	for (unsigned int dp = 0; dp < d->ndps; dp++)
		if ((w = timers(d, d->dps[dp].dpc, now)) < wait)
			wait = w;
	return wait;
}

/* The head's reply arrived in c->buf (n bytes): calls it back. */
static void
on_reply(struct tallyd *d, struct tallyd_dpc *c, size_t n)
{
	struct dpc_req *r = c->head;
	json_error_t jerr;
	json_t *reply;

	reply = json_loadb(c->buf, n, 0, &jerr);
	if (!json_is_object(reply) ||
			!json_is_integer(json_object_get(reply, "errno"))) {
		json_decref(reply);
		go_down(d, c, -EPROTO);
		return;
	}
	c->head = r->next;
	if (c->head == NULL)
		c->tail = &c->head;
	c->sent = false;
	c->deadline_ms = 0;
	if (!c->up)
		tallyd_log("tally-dp at %s is up", c->path);
	c->up = true;
	c->logged_down = false;
	if (r->cb != NULL)
		r->cb(d, c->dp, r->j, reply, 0, r->arg);
	json_decref(reply);
	req_free(r);
}

/* Reads one message: the head's reply, or the connection's end. */
static void
receive(struct tallyd *d, struct tallyd_dpc *c)
{
	bool waiting = c->head != NULL && c->sent;
	ssize_t n = recv(c->fd, c->buf, MAX_REPLY, MSG_DONTWAIT | MSG_TRUNC);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		int err = n == 0 ? -ECONNRESET : -errno;

		/* An idle connection ends when tally-dp restarts. */
		if (!waiting) {
			conn_close(c);
		} else if (!c->head->retried) {
			c->head->retried = true;
			conn_close(c);
		} else {
			go_down(d, c, err);
		}
		return;
	}
	if (!waiting)
		return;		/* nothing was asked: not a reply */
	if ((size_t)n > MAX_REPLY) {
		tallyd_log("tally-dp's reply of %zd bytes is over %d",
			n, MAX_REPLY);
		fail_head(d, c, -EMSGSIZE);
		return;
	}
	on_reply(d, c, (size_t)n);
}

void
tallyd_dpc_event(struct tallyd *d, unsigned int dp, short revents)
{
	struct tallyd_dpc *c = d->dps[dp].dpc;
	socklen_t len = sizeof(int);
	int err = 0;

	if (c->fd < 0)
		return;
	if (c->conn == DPC_CONNECTING) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err != 0) {
			go_down(d, c, -err);
			return;
		}
		c->conn = DPC_OPEN;
	} else if (revents & (POLLIN | POLLERR | POLLHUP)) {
		receive(d, c);
	}
	kick(d, c);
}
