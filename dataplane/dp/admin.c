/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket: a Unix SOCK_SEQPACKET socket, one JSON object per
 * message each way. Every reply carries "errno" (0 on success) and, on
 * failure, "error" with a sentence. tallyd programs tally-dp through it;
 * tests use it directly. Served from the main lcore, never an lcore.
 *
 * Requests: {"cmd": NAME, ...}; admin_parse.c parses and checks them
 * (and names each command's keys), this file serves and executes them.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "admin_parse.h"
#include "dp.h"
#include "tally_config.h"

#define MAX_CLIENTS 16
#define MAX_MSG (64 * 1024)

static json_t *
reply_err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static json_t *
reply_err(int err, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return json_pack("{s:i, s:s}", "errno", err, "error", buf);
}

static json_t *
reply_ok(void)
{
	return json_pack("{s:i}", "errno", 0);
}

/*
 * job_add: the job the request describes (admin_parse.c checks it),
 * added to the table.
 */
static json_t *
cmd_job_add(struct tally_dp *dp, json_t *req)
{
	struct tally_job_conf c;
	char why[256];
	int ret;

	if (tally_admin_parse_job_add(req, &c, why, sizeof(why)) != 0)
		return reply_err(EINVAL, "%s", why);
	ret = tally_dp_job_add(dp, &c);
	if (ret == -EEXIST)
		return reply_err(EEXIST, "job %u exists", c.id);
	if (ret == -ENOSPC)
		return reply_err(ENOSPC, "%u jobs is the maximum", dp->max_jobs);
	if (ret != 0)
		return reply_err(-ret, "cannot add job %u: %s", c.id,
			strerror(-ret));
	return reply_ok();
}

/* job_del: {"id"}. */
static json_t *
cmd_job_del(struct tally_dp *dp, json_t *req)
{
	char why[256];
	uint16_t id;
	int ret;

	if (tally_admin_parse_job_del(req, &id, why, sizeof(why)) != 0)
		return reply_err(EINVAL, "%s", why);
	ret = tally_dp_job_del(dp, id);
	if (ret == -ENOENT)
		return reply_err(ENOENT, "no job %u", id);
	if (ret != 0)
		return reply_err(-ret, "cannot delete job %u: %s", id,
			strerror(-ret));
	return reply_ok();
}

static json_t *
job_counters_json(const struct tally_dp *dp, const struct tally_job *job)
{
	struct tally_dp_counter c[16];
	unsigned int n = tally_dp_job_counters(dp, job, c, 16);
	json_t *o = json_object();

	for (unsigned int i = 0; i < n && i < 16; i++)
		json_object_set_new(o, c[i].name, json_integer(
			(json_int_t)c[i].value));
	return o;
}

static json_t *
job_json(const struct tally_dp *dp, const struct tally_job *job)
{
	const struct tally_job_conf *c = &job->conf;
	json_t *members = json_array();
	char ip[INET_ADDRSTRLEN];

	for (unsigned int r = 0; r < c->world; r++) {
		inet_ntop(AF_INET, &c->members[r].ip, ip, sizeof(ip));
		json_array_append_new(members, json_pack("{s:s, s:i}", "ip", ip,
			"port", ntohs(c->members[r].port)));
	}
	json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:b, s:o}", "id", c->id,
		"world", c->world, "window", c->window, "max_elems",
		c->max_elems, "narrow", c->narrow, "members", members);

	if (c->group.ip != 0) {
		inet_ntop(AF_INET, &c->group.ip, ip, sizeof(ip));
		json_object_set_new(o, "group", json_pack("{s:s, s:i}", "ip",
			ip, "port", ntohs(c->group.port)));
	}
	json_object_set_new(o, "counters", job_counters_json(dp, job));
	return o;
}

/*
 * job_list: {} -> {"jobs": [...]}, each with its "counters"; tokens are
 * never shown.
 */
static json_t *
cmd_job_list(struct tally_dp *dp, json_t *req)
{
	json_t *jobs = json_array();
	struct tally_dp_job *j;

	(void)req;
	pthread_mutex_lock(&dp->lock);
	for (j = dp->jobs; j != NULL; j = j->next)
		json_array_append_new(jobs, job_json(dp, j->job));
	pthread_mutex_unlock(&dp->lock);
	return json_pack("{s:i, s:o}", "errno", 0, "jobs", jobs);
}

static json_t *
counters_json(const struct tally_dp *dp, int index)
{
	struct tally_dp_counter c[128];
	unsigned int n = tally_dp_counters(dp, index, c, 128);
	json_t *o = json_object();

	for (unsigned int i = 0; i < n && i < 128; i++)
		json_object_set_new(o, c[i].name, json_integer(
			(json_int_t)c[i].value));
	return o;
}

/* stats: {} -> {"total": {...}, "lcores": [{"lcore", ...}, ...]}. */
static json_t *
cmd_stats(struct tally_dp *dp, json_t *req)
{
	json_t *lcores = json_array();

	(void)req;
	for (uint16_t i = 0; i < dp->nworkers; i++) {
		json_t *o = counters_json(dp, i);

		json_object_set_new(o, "lcore",
			json_integer(dp->lcores[i].lcore_id));
		json_array_append_new(lcores, o);
	}
	return json_pack("{s:i, s:o, s:o}", "errno", 0, "total",
		counters_json(dp, -1), "lcores", lcores);
}

/* ping: {} -> {"version", "steering", "workers", "ip", "udp_port"}. */
static json_t *
cmd_ping(struct tally_dp *dp, json_t *req)
{
	char ip[INET_ADDRSTRLEN];

	(void)req;
	inet_ntop(AF_INET, &dp->self.ip, ip, sizeof(ip));
	return json_pack("{s:i, s:s, s:s, s:i, s:s, s:i}", "errno", 0,
		"version", TALLY_VERSION, "steering", dp->steer_flow ?
		"rte_flow" : "software", "workers", dp->nworkers, "ip", ip,
		"udp_port", ntohs(dp->self.port));
}

static json_t *cmd_list_commands(struct tally_dp *dp, json_t *req);

/* What each command does, by admin_parse.h's command ids. */
static json_t *(*const handlers[TALLY_ADMIN_CMD_MAX_])(struct tally_dp *dp,
	json_t *req) = {
	[TALLY_ADMIN_PING] = cmd_ping,
	[TALLY_ADMIN_JOB_ADD] = cmd_job_add,
	[TALLY_ADMIN_JOB_DEL] = cmd_job_del,
	[TALLY_ADMIN_JOB_LIST] = cmd_job_list,
	[TALLY_ADMIN_STATS] = cmd_stats,
	[TALLY_ADMIN_LIST_COMMANDS] = cmd_list_commands,
};

static json_t *
cmd_list_commands(struct tally_dp *dp, json_t *req)
{
	json_t *o = json_object();

	(void)dp;
	(void)req;
	for (unsigned int i = 0; i < TALLY_ADMIN_CMD_MAX_; i++)
		json_object_set_new(o, tally_admin_cmd_name(i),
			json_string(tally_admin_cmd_usage(i)));
	return json_pack("{s:i, s:o}", "errno", 0, "commands", o);
}

char *
tally_dp_admin_handle(struct tally_dp *dp, const char *req, size_t len)
{
	enum tally_admin_cmd cmd;
	json_t *in, *out;
	char why[256];
	char *text;
	int ret;

	ret = tally_admin_parse(req, len, &in, &cmd, why, sizeof(why));
	if (ret != 0)
		out = reply_err(-ret, "%s", why);
	else
		out = handlers[cmd](dp, in);
	json_decref(in);
	text = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	return text;
}

int
tally_dp_admin_open(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	/* A socket left by a previous run; anything else is not ours. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
			chmod(path, 0600) != 0 || listen(fd, 8) != 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

/* Answers one message on client fd; returns -1 when it should close. */
static int
serve_one(struct tally_dp *dp, int fd, char *buf)
{
	ssize_t n = recv(fd, buf, MAX_MSG, MSG_TRUNC);
	char *reply;
	int ret = 0;

	if (n <= 0)
		return -1;
	if (n > MAX_MSG) {
		static const char big[] = "{\"errno\":90,\"error\":"
			"\"request larger than 64 KiB\"}";

		send(fd, big, sizeof(big) - 1, MSG_NOSIGNAL);
		return 0;
	}
	reply = tally_dp_admin_handle(dp, buf, (size_t)n);
	if (reply == NULL ||
			send(fd, reply, strlen(reply), MSG_NOSIGNAL) < 0)
		ret = -1;
	free(reply);
	return ret;
}

int
tally_dp_admin_serve(struct tally_dp *dp, int lfd)
{
	struct pollfd pfd[MAX_CLIENTS + 1];
	unsigned int n = 1;
	char *buf = malloc(MAX_MSG);

	if (buf == NULL)
		return -ENOMEM;
	pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	while (!dp->stop) {
		if (poll(pfd, n, 200) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (unsigned int i = 1; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			if ((pfd[i].revents & POLLIN) == 0 ||
					serve_one(dp, pfd[i].fd, buf) < 0) {
				close(pfd[i].fd);
				pfd[i--] = pfd[--n];
			}
		}
		if (pfd[0].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0 && n <= MAX_CLIENTS)
				pfd[n++] = (struct pollfd){ .fd = c,
					.events = POLLIN };
			else if (c >= 0)
				close(c);
		}
	}
	for (unsigned int i = 1; i < n; i++)
		close(pfd[i].fd);
	free(buf);
	return 0;
}
