/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's side of tally-dp's admin socket: requests (one JSON object
 * each way on a SOCK_SEQPACKET connection, reconnected as needed), the
 * programming of memberships, and the poll that reads tally-dp's jobs and
 * counters. The poll is also how tallyd notices that tally-dp restarted:
 * a membership tallyd has programmed is missing from its job list, so it
 * is put back (with fresh slots at tally-dp) and counted in dp_reprograms.
 *
 * Requests block for at most REQ_TIMEOUT_MS: tally-dp answers from its
 * main lcore within microseconds; a tally-dp that does not is treated as
 * down.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "tallyd.h"

#define REQ_TIMEOUT_MS	1000
#define MAX_REPLY	(256 * 1024)

struct tallyd_dpc {
	char path[108];
	int fd;			/* -1: not connected */
	bool up;		/* the last request got a reply */
	bool logged_down;
	uint32_t ip;		/* from ping; host order */
	uint16_t port;
	uint16_t nports;
	char *buf;		/* MAX_REPLY bytes */
};

struct tallyd_dpc *
tallyd_dpc_create(const char *path)
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
	if (c->buf == NULL) {
		free(c);
		return NULL;
	}
	strcpy(c->path, path);
	c->fd = -1;
	return c;
}

void
tallyd_dpc_destroy(struct tallyd_dpc *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

bool
tallyd_dpc_up(const struct tallyd_dpc *c)
{
	return c != NULL && c->up;
}

static int
dpc_connect(struct tallyd_dpc *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	strcpy(sa.sun_path, c->path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	c->fd = fd;
	return 0;
}

static void
dpc_down(struct tallyd_dpc *c, int err)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->up || !c->logged_down)
		tallyd_log("tally-dp at %s unreachable: %s", c->path,
			strerror(err));
	c->up = false;
	c->logged_down = true;
}

/* Sends req (borrowed) and returns the reply object, or NULL with errno. */
static json_t *
dpc_request_once(struct tallyd_dpc *c, json_t *req)
{
	struct pollfd p;
	json_error_t jerr;
	json_t *r;
	char *text;
	ssize_t n;
	int ret;

	if (c->fd < 0 && (ret = dpc_connect(c)) != 0) {
		errno = -ret;
		return NULL;
	}
	text = json_dumps(req, JSON_COMPACT);
	if (text == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	n = send(c->fd, text, strlen(text), MSG_NOSIGNAL);
	free(text);
	if (n < 0)
		return NULL;
	p = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	ret = poll(&p, 1, REQ_TIMEOUT_MS);
	if (ret == 0) {
		errno = ETIMEDOUT;
		return NULL;
	}
	if (ret < 0)
		return NULL;
	n = recv(c->fd, c->buf, MAX_REPLY, 0);
	if (n <= 0) {
		errno = n == 0 ? ECONNRESET : errno;
		return NULL;
	}
	r = json_loadb(c->buf, (size_t)n, 0, &jerr);
	if (r == NULL || !json_is_integer(json_object_get(r, "errno"))) {
		json_decref(r);
		errno = EPROTO;
		return NULL;
	}
	return r;
}

/*
 * One request, with one reconnection (a restarted tally-dp drops the old
 * connection). Returns the reply or NULL (errno set; tally-dp is down).
 */
static json_t *
dpc_request(struct tallyd *d, json_t *req)
{
	struct tallyd_dpc *c = d->dpc;
	json_t *r = dpc_request_once(c, req);

	if (r == NULL && c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
		r = dpc_request_once(c, req);
	}
	if (r == NULL) {
		int err = errno;

		d->st.dp_errors++;
		dpc_down(c, err);
		errno = err;
		return NULL;
	}
	if (!c->up)
		tallyd_log("tally-dp at %s is up", c->path);
	c->up = true;
	c->logged_down = false;
	return r;
}

/* Reads tally-dp's address and port range. */
static int
dpc_ping(struct tallyd *d)
{
	struct tallyd_dpc *c = d->dpc;
	json_t *req = json_pack("{s:s}", "cmd", "ping"), *r;
	json_int_t port, workers;
	const char *ip = NULL;
	struct in_addr a;
	int ret = 0;

	r = dpc_request(d, req);
	json_decref(req);
	if (r == NULL)
		return -EHOSTDOWN;
	if (json_unpack(r, "{s:I, s:I, s?s}", "udp_port", &port, "workers",
			&workers, "ip", &ip) != 0 || port < 1 ||
			port > 65535 || workers < 1 ||
			port + workers - 1 > 65535) {
		ret = -EPROTO;
	} else {
		c->port = (uint16_t)port;
		c->nports = (uint16_t)workers;
		if (d->conf.dp_address[0] != '\0')
			ip = d->conf.dp_address;
		if (ip != NULL && inet_pton(AF_INET, ip, &a) == 1)
			c->ip = ntohl(a.s_addr);
		else
			ret = -EPROTO;
	}
	json_decref(r);
	return ret;
}

int
tallyd_dpc_endpoint(struct tallyd *d, uint32_t *ip, uint16_t *port,
	uint16_t *nports)
{
	struct tallyd_dpc *c = d->dpc;

	/* Down but known: workers may join while it restarts. */
	if (c->ip == 0 && dpc_ping(d) != 0)
		return -EHOSTDOWN;
	*ip = c->ip;
	*port = c->port;
	*nports = c->nports;
	return 0;
}

static json_t *
job_add_req(const struct tallyd_job *j)
{
	json_t *members = json_array(), *o;
	char tok[17], ip[INET_ADDRSTRLEN];

	for (unsigned int r = 0; r < j->world; r++) {
		struct in_addr a = { .s_addr = htonl(j->members[r].ip) };

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		json_array_append_new(members, json_pack("{s:s, s:i}", "ip", ip,
			"port", j->members[r].port));
	}
	snprintf(tok, sizeof(tok), "%016llx",
		(unsigned long long)j->wire_token);
	o = json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:b, s:o}", "cmd",
		"job_add", "id", j->id, "token", tok, "world", j->world,
		"window", j->window, "max_elems", j->max_elems, "narrow",
		j->narrow, "members", members);
	if (o != NULL && j->group_ip != 0) {
		struct in_addr a = { .s_addr = htonl(j->group_ip) };

		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		json_object_set_new(o, "group", json_pack("{s:s, s:i}", "ip",
			ip, "port", j->group_port));
	}
	return o;
}

/* Sends req (consumed); returns 0 or -errno from the reply or transport. */
static int
dpc_simple(struct tallyd *d, json_t *req, const char *what,
	const struct tallyd_job *j)
{
	json_t *r = dpc_request(d, req);
	int err;

	json_decref(req);
	if (r == NULL)
		return -EHOSTDOWN;
	err = (int)json_integer_value(json_object_get(r, "errno"));
	if (err != 0 && err != ENOENT)
		tallyd_log("tally-dp refused %s of job '%s' (id %u): %s", what,
			j->name, j->id, json_string_value(json_object_get(r,
				"error")));
	json_decref(r);
	return -err;
}

int
tallyd_dpc_remove(struct tallyd *d, struct tallyd_job *j)
{
	int ret = dpc_simple(d, json_pack("{s:s, s:i}", "cmd", "job_del", "id",
		j->id), "job_del", j);

	if (ret == 0 || ret == -ENOENT) {
		j->in_dp = false;
		return 0;
	}
	return ret;
}

/* Folds tally-dp's last reading into the base: its counters restart. */
static void
fold(struct tallyd_job *j)
{
	uint64_t *b = (uint64_t *)(void *)&j->base;
	const uint64_t *l = (const uint64_t *)(const void *)&j->last;

	for (size_t i = 0; i < TALLYD_NCTR; i++)
		b[i] += l[i];
	memset(&j->last, 0, sizeof(j->last));
}

int
tallyd_dpc_program(struct tallyd *d, struct tallyd_job *j)
{
	int ret;

	if (j->in_dp && (ret = tallyd_dpc_remove(d, j)) != 0)
		return ret;
	ret = dpc_simple(d, job_add_req(j), "job_add", j);
	if (ret == -EEXIST) {
		/* Left over from before tallyd knew: replace it. */
		if ((ret = tallyd_dpc_remove(d, j)) == 0)
			ret = dpc_simple(d, job_add_req(j), "job_add", j);
	}
	if (ret == 0) {
		fold(j);
		j->in_dp = true;
	}
	return ret;
}

static void
read_counters(json_t *o, struct tallyd_ctr *c)
{
	uint64_t *v = (uint64_t *)(void *)c;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < TALLYD_NCTR; i++) {
		json_t *x = json_object_get(o, tallyd_ctr_names[i]);

		if (json_is_integer(x) && json_integer_value(x) > 0)
			v[i] = (uint64_t)json_integer_value(x);
	}
}

void
tallyd_dpc_poll(struct tallyd *d)
{
	json_t *req, *r, *jobs, *o, *stats;
	struct tallyd_job *j;
	static bool seen[65536];
	size_t i;

	memset(seen, 0, sizeof(seen));
	req = json_pack("{s:s}", "cmd", "job_list");
	r = dpc_request(d, req);
	json_decref(req);
	if (r == NULL) {
		for (j = d->jobs; j != NULL; j = j->next)
			j->in_dp = false;
		json_decref(d->dp_stats);
		d->dp_stats = NULL;
		return;
	}
	if (d->dpc->ip == 0 || d->dpc->port == 0)
		dpc_ping(d);
	jobs = json_object_get(r, "jobs");
	json_array_foreach(jobs, i, o) {
		json_int_t id = json_integer_value(json_object_get(o, "id"));
		struct tallyd_ctr c;
		const uint64_t *cv = (const uint64_t *)(const void *)&c;
		const uint64_t *lv;
		bool reset = false, moved = false;

		if (id < 0 || id > UINT16_MAX)
			continue;
		seen[id] = true;
		j = tallyd_job_find_id(d, (uint16_t)id);
		if (j == NULL || !j->has_members)
			continue;
		read_counters(json_object_get(o, "counters"), &c);
		lv = (const uint64_t *)(const void *)&j->last;
		for (size_t k = 0; k < TALLYD_NCTR; k++) {
			if (cv[k] < lv[k])
				reset = true;
			if (cv[k] != lv[k])
				moved = true;
		}
		if (reset)
			fold(j);
		j->last = c;
		j->in_dp = true;
		j->moved = moved;
		if (moved)
			j->last_active = tallyd_wall_s();
	}
	json_decref(r);

	/* Memberships tally-dp lost (it restarted): put them back. */
	for (j = d->jobs; j != NULL; j = j->next) {
		if (seen[j->id] || !j->has_members || j->draining) {
			if (!seen[j->id])
				j->in_dp = false;
			continue;
		}
		j->in_dp = false;
		if (tallyd_dpc_program(d, j) == 0) {
			d->st.dp_reprograms++;
			d->state_dirty = true;
			tallyd_log("job '%s' (id %u, epoch %u) programmed into "
				"tally-dp again", j->name, j->id, j->epoch);
		}
	}

	tallyd_rdv_retry(d);

	req = json_pack("{s:s}", "cmd", "stats");
	stats = dpc_request(d, req);
	json_decref(req);
	json_decref(d->dp_stats);
	d->dp_stats = stats;
	if (stats != NULL)
		json_object_del(stats, "errno");
}
