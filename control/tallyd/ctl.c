/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control socket tallyctl talks to: Unix SOCK_SEQPACKET, mode 0660
 * (group from control_group), one JSON request per message and one reply
 * each. job_delete's reply waits until the job has drained.
 */
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "tally_config.h"
#include "tallyd.h"
#include "cluster.h"
#include "ctl_parse.h"

#define MAX_CLIENTS	64
#define MAX_REQ		8192
#define REST_MS		250	/* listener's rest when descriptors run out */

struct tallyd_ctl_client {
	int fd;
	struct tallyd_ctl_client *next;
};

int
tallyd_ctl_listen(struct tallyd *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = d->conf.control_socket;
	struct stat st;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto fail;
	if (d->conf.control_group[0] != '\0') {
		struct group *g = getgrnam(d->conf.control_group);

		if (g == NULL) {
			tallyd_log("control_group '%s': no such group",
				d->conf.control_group);
			errno = EINVAL;
			goto fail_unlink;
		}
		if (chown(path, (uid_t)-1, g->gr_gid) != 0)
			goto fail_unlink;
	}
	if (chmod(path, 0660) != 0 || listen(fd, 16) != 0)
		goto fail_unlink;
	d->ctl_fd = fd;
	return 0;
fail_unlink:
	err = errno;
	unlink(path);
	errno = err;
fail:
	err = errno;
	close(fd);
	return -err;
}

static void
client_free(struct tallyd *d, struct tallyd_ctl_client *c)
{
	struct tallyd_ctl_client **pp;
	struct tallyd_job *j;

	for (j = d->jobs; j != NULL; j = j->next)
		if (j->drain_waiter == c)
			j->drain_waiter = NULL;
	for (pp = &d->ctl_clients; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	close(c->fd);
	free(c);
}

void
tallyd_ctl_close_all(struct tallyd *d)
{
	while (d->ctl_clients != NULL)
		client_free(d, d->ctl_clients);
	if (d->ctl_fd >= 0) {
		close(d->ctl_fd);
		unlink(d->conf.control_socket);
	}
	d->ctl_fd = -1;
}

void
tallyd_ctl_accept(struct tallyd *d)
{
	struct tallyd_ctl_client *c, *x;
	unsigned int n = 0;
	int fd;

	fd = accept4(d->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		/*
		 * The connection stays queued and the listener readable:
		 * polling it again at once would spin. Rest it instead.
		 */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
				errno == ENOMEM) {
			if (d->st.ctl_fd_backoffs++ == 0)
				tallyd_log("control socket: accept: %s; not "
					"accepting for %d ms at a time while it "
					"lasts (ctl_fd_backoffs)",
					strerror(errno), REST_MS);
			d->ctl_rest_until_ms = tallyd_now_ms() + REST_MS;
		}
		return;
	}
	for (x = d->ctl_clients; x != NULL; x = x->next)
		n++;
	if (n >= MAX_CLIENTS || (c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->next = d->ctl_clients;
	d->ctl_clients = c;
}

int
tallyd_ctl_listen_fd(const struct tallyd *d, int64_t now)
{
	return now < d->ctl_rest_until_ms ? -1 : d->ctl_fd;
}

unsigned int
tallyd_ctl_pollfds(struct tallyd *d, struct pollfd *p, unsigned int max)
{
	struct tallyd_ctl_client *c;
	unsigned int n = 0;

	for (c = d->ctl_clients; c != NULL && n < max; c = c->next)
		p[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
	return n;
}

/* The text of r (consumed), or of an EMSGSIZE error if r is too long. */
static char *
reply_text(json_t *r)
{
	char *text = json_dumps(r, JSON_COMPACT), why[160];
	size_t len = text != NULL ? strlen(text) : 0;

	json_decref(r);
	if (len <= TALLYD_CTL_REPLY_MAX)
		return text;
	free(text);
	snprintf(why, sizeof(why), "the reply (%zu bytes) is over the "
		"control socket's limit of %d bytes", len,
		TALLYD_CTL_REPLY_MAX);
	r = json_pack("{s:i, s:s}", "errno", EMSGSIZE, "error", why);
	text = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	return text;
}

void
tallyd_ctl_reply(struct tallyd *d, struct tallyd_ctl_client *c, json_t *r)
{
	char *text;
	ssize_t n = -1;
	size_t len;

	if (r == NULL)
		r = json_pack("{s:i, s:s}", "errno", ENOMEM, "error",
			"out of memory");
	if (json_integer_value(json_object_get(r, "errno")) != 0)
		d->st.ctl_errors++;
	text = reply_text(r);
	if (c == NULL) {
		free(text);
		return;
	}
	len = text != NULL ? strlen(text) : 0;
	errno = ENOMEM;
	if (text != NULL)
		n = send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n != (ssize_t)len || text == NULL) {
		d->st.ctl_send_failures++;
		tallyd_log("a control reply (%zu bytes) was not sent: %s", len,
			n < 0 ? strerror(errno) : "sent in part");
	}
	free(text);
}

static json_t *
err_reply(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static json_t *
err_reply(int err, const char *fmt, ...)
{
	char buf[640];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return json_pack("{s:i, s:s}", "errno", err, "error", buf);
}

_Static_assert(TALLYD_CTL_MAX_DPS == TALLYD_MAX_SHARDS &&
	TALLYD_CTL_DP_NAME_MAX == TALLYD_DP_NAME_MAX, "ctl_parse.h's limits");

/*
 * A job_create's dataplanes into t's shards (none named: the first).
 * A sharded job needs each of them up: its shards are programmed
 * together, and one that is down now would leave the job unready.
 * Returns NULL, or the error reply.
 */
static json_t *
create_shards(struct tallyd *d, const struct tallyd_ctl_req *r,
	struct tallyd_job *t)
{
	t->nshards = r->ndataplanes > 0 ? r->ndataplanes : 1;
	for (unsigned int k = 0; k < r->ndataplanes; k++) {
		int dp = tallyd_dp_find(d, r->dataplanes[k]);

		if (dp < 0)
			return err_reply(ENOENT, "no dataplane '%s' (tallyd's "
				"are listed by tallyctl stats)",
				r->dataplanes[k]);
		t->sh[k].dp = (unsigned int)dp;
	}
	for (unsigned int k = 0; t->nshards > 1 && k < t->nshards; k++)
		if (!tallyd_dpc_up(d->dps[t->sh[k].dp].dpc))
			return err_reply(EHOSTDOWN, "job '%s' not created: "
				"dataplane '%s' is down (its tally-dp does not "
				"answer), and a job sharded over %u dataplanes "
				"needs all of them", r->name,
				d->dps[t->sh[k].dp].name, t->nshards);
	return NULL;
}

/* job show's object: the job with its members and its shards. */
static json_t *
show_json(struct tallyd *d, const struct tallyd_job *j)
{
	json_t *o = tallyd_job_json(j, true);

	if (o != NULL)
		json_object_set_new(o, "shards", tallyd_shards_json(d, j,
			true));
	if (o != NULL && j->tier == TALLYD_TIER_SPINE)
		json_object_set_new(o, "tree", tallyd_tree_json(d, j));
	return o;
}

/* job_create of a two-tier tree (tree_create.c): the reply. */
static json_t *
create_tree(struct tallyd *d, const struct tallyd_ctl_req *r,
	const struct tallyd_job *t)
{
	char token[TALLY_RDV_TOKEN_HEX + 1], why[512];
	struct tallyd_job *j;
	json_t *o;
	int ret;

	ret = tallyd_tree_create(d, r, t, &j, token, why, sizeof(why));
	if (ret != 0) {
		tallyd_log("%s", why);
		return err_reply(-ret, "%s", why);
	}
	tallyd_log("job '%s' (id %u, world %u) created: a tree of %u leaves "
		"of %u ranks, spine at %s", j->name, j->id, j->tree_world,
		j->world, tallyd_tree_leaf_world(j), d->dps[j->sh[0].dp].name);
	o = json_pack("{s:i, s:o, s:s}", "errno", 0, "job", show_json(d, j),
		"token", token);
	sodium_memzero(token, sizeof(token));
	return o;
}

static json_t *
do_create(struct tallyd *d, const struct tallyd_ctl_req *r)
{
	struct tallyd_job t = { 0 }, *j;
	char token[TALLY_RDV_TOKEN_HEX + 1], why[256];
	unsigned int fit;
	json_t *o;
	int ret;

	/* Narrow i4 sums hold 7 ranks of -1..+1 (q4: of -1..+1 levels). */
	if (r->narrow && r->world > 7 && (strncmp(r->codec, "q4", 2) == 0 ||
			strncmp(r->codec, "ternary", 7) == 0 ||
			strncmp(r->codec, "2bit", 4) == 0))
		return err_reply(ERANGE, "codec %s with narrow results holds "
			"at most 7 ranks (i4 sums), not %u: drop narrow or "
			"pick q8", r->codec, r->world);
	strcpy(t.name, r->name);
	t.world = (uint8_t)r->world;
	t.window = (uint16_t)r->window;
	t.max_elems = (uint16_t)r->max_elems;
	t.narrow = r->narrow;
	t.rdma = r->rdma;
	t.auth = r->auth;
	t.group_ip = r->group_ip;
	t.group_port = r->group_port;
	t.idle_timeout_s = r->has_idle_timeout ? r->idle_timeout_s :
		d->conf.idle_timeout_s;
	strcpy(t.codec, r->codec);
	if (r->nleaves > 0)
		return create_tree(d, r, &t);
	if ((o = create_shards(d, r, &t)) != NULL)
		return o;
	/* An RDMA job without max_elems: what tally-dp's path MTU takes. */
	if (t.rdma && !r->has_max_elems && (fit = tallyd_limits_rdma_elems(d,
			&t)) != 0 && fit < t.max_elems)
		t.max_elems = (uint16_t)fit;
	if ((ret = tallyd_limits_check(d, &t, true, why, sizeof(why))) != 0)
		return err_reply(-ret, "%s", why);
	j = tallyd_job_create(d, &t, token);
	if (j == NULL && errno == EEXIST)
		return err_reply(EEXIST, "job '%s' exists", r->name);
	if (j == NULL && errno == ENOSPC)
		return err_reply(ENOSPC, "%u jobs is the maximum (max_jobs)",
			d->conf.max_jobs);
	if (j == NULL)
		return err_reply(errno, "cannot create job '%s': %s", r->name,
			strerror(errno));
	/* On disk before the reply; not at all if it cannot be. */
	if ((ret = tallyd_state_save(d)) != 0) {
		tallyd_job_free(d, j);
		sodium_memzero(token, sizeof(token));
		tallyd_log("job '%s' not created: %s", r->name, d->sf.error);
		return err_reply(-ret, "job '%s' not created: %s", r->name,
			d->sf.error);
	}
	tallyd_log("job '%s' (id %u, world %u) created", j->name, j->id,
		j->world);
	o = json_pack("{s:i, s:o, s:s}", "errno", 0, "job",
		show_json(d, j), "token", token);
	sodium_memzero(token, sizeof(token));
	return o;
}

/* A listing's reply without its jobs ({"errno":0,"jobs":[],"more":...}). */
#define LIST_ENVELOPE	64

/*
 * job_list: the jobs with an id above r->after, in id order, as many as
 * r->limit (0: any number) and the reply's size limit allow. "more" says
 * whether jobs are left out; "next" is the "after" that asks for them.
 * A request with neither "after" nor "limit" (a client that does not
 * page) gets every job or EMSGSIZE, never a part that looks whole.
 */
static json_t *
do_list(struct tallyd *d, const struct tallyd_ctl_req *r)
{
	json_t *a = json_array(), *o;
	size_t size = LIST_ENVELOPE;
	struct tallyd_job *j;
	unsigned int n = 0;
	bool more = false;
	uint16_t last = 0;

	for (j = d->jobs; j != NULL && a != NULL; j = j->next) {
		if (j->id <= r->after)
			continue;
		/* A tree's parts share an id: one page holds them all. */
		more = r->limit != 0 && n >= r->limit && j->id != last;
		o = more ? NULL : tallyd_job_json(j, false);
		if (o == NULL)
			break;
		size += json_dumpb(o, NULL, 0, JSON_COMPACT) + 1;
		if (size > TALLYD_CTL_REPLY_MAX) {
			json_decref(o);
			more = true;
			break;
		}
		if (json_array_append_new(a, o) != 0)
			break;
		n++;
		last = j->id;
	}
	if (a == NULL || (j != NULL && !more)) {
		json_decref(a);
		return NULL;	/* out of memory */
	}
	if (more && !r->paged) {
		json_decref(a);
		return err_reply(EMSGSIZE, "%u jobs do not fit in one reply "
			"of %d bytes: ask for pages (\"limit\", \"after\"; "
			"docs/control.md)", d->njobs, TALLYD_CTL_REPLY_MAX);
	}
	o = json_pack("{s:i, s:o, s:b}", "errno", 0, "jobs", a, "more", more);
	if (o != NULL && more)
		json_object_set_new(o, "next", json_integer(last));
	return o;
}

static json_t *
do_list_commands(void)
{
	json_t *o = json_object();

	for (int c = 0; c < TALLYD_CTL_MAX_; c++)
		json_object_set_new(o, tallyd_ctl_cmd_name(c),
			json_string(tallyd_ctl_cmd_usage(c)));
	return json_pack("{s:i, s:o}", "errno", 0, "commands", o);
}

/* Answers one request; NULL when the reply comes later (job_delete). */
static json_t *
handle(struct tallyd *d, struct tallyd_ctl_client *c, const char *buf,
	size_t len)
{
	struct tallyd_ctl_req r;
	struct tallyd_job *j;
	char why[200];
	int ret;

	ret = tallyd_ctl_parse(buf, len, &r, why, sizeof(why));
	if (ret != 0)
		return err_reply(-ret, "%s", why);
	/* Several tallyd on etcd: only the leader changes jobs. */
	if ((r.cmd == TALLYD_CTL_JOB_CREATE || r.cmd == TALLYD_CTL_JOB_DELETE)
			&& !tallyd_state_leads(d))
		return tallyd_cluster_refusal(d, tallyd_ctl_cmd_name(r.cmd));
	switch (r.cmd) {
	case TALLYD_CTL_PING:
		return json_pack("{s:i, s:s, s:I, s:b}", "errno", 0,
			"version", TALLY_VERSION, "uptime_s",
			(json_int_t)(tallyd_wall_s() - d->started), "dp_up",
			tallyd_dps_up(d));
	case TALLYD_CTL_JOB_CREATE:
		return do_create(d, &r);
	case TALLYD_CTL_JOB_LIST:
		return do_list(d, &r);
	case TALLYD_CTL_JOB_SHOW:
	case TALLYD_CTL_JOB_DELETE:
		j = tallyd_job_find(d, r.name);
		if (j == NULL)
			return err_reply(ENOENT, "no job '%s'", r.name);
		if (r.cmd == TALLYD_CTL_JOB_SHOW)
			return json_pack("{s:i, s:o}", "errno", 0, "job",
				show_json(d, j));
		if (j->draining)
			return err_reply(EBUSY, "job '%s' is already being "
				"deleted", r.name);
		if (j->tier == TALLYD_TIER_SPINE) {
			tallyd_tree_delete(d, j, c);
			return NULL;
		}
		tallyd_job_delete_start(d, j, c);
		return NULL;
	case TALLYD_CTL_STATS:
		return json_pack("{s:i, s:o, s:O, s:o}", "errno", 0, "tallyd",
			tallyd_stats_json(d), "dp", d->dps[0].stats != NULL ?
			d->dps[0].stats : json_null(), "dataplanes",
			tallyd_dps_json(d));
	case TALLYD_CTL_LIST_COMMANDS:
	case TALLYD_CTL_MAX_:
		break;
	}
	return do_list_commands();
}

void
tallyd_ctl_event(struct tallyd *d, int fd, short revents)
{
	struct tallyd_ctl_client *c;
	char buf[MAX_REQ];
	json_t *r;
	ssize_t n;

	for (c = d->ctl_clients; c != NULL; c = c->next)
		if (c->fd == fd)
			break;
	if (c == NULL || !(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		client_free(d, c);
		return;
	}
	if (n < 0)
		return;
	d->st.ctl_requests++;
	if ((size_t)n > sizeof(buf)) {
		tallyd_ctl_reply(d, c, err_reply(EMSGSIZE, "a request is at "
			"most %d bytes", MAX_REQ));
		return;
	}
	r = handle(d, c, buf, (size_t)n);
	if (r != NULL)
		tallyd_ctl_reply(d, c, r);
}
