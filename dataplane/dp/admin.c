/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket: a Unix SOCK_SEQPACKET socket, one JSON object per
 * message each way. Every reply carries "errno" (0 on success) and, on
 * failure, "error" with a sentence. tallyd programs tally-dp through it;
 * tests use it directly. Served from the main lcore, never an lcore.
 *
 * Requests: {"cmd": NAME, ...}; see the command table for each.
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

#include "dp.h"
#include "tally_config.h"

#define MAX_CLIENTS 16
#define MAX_MSG (64 * 1024)

struct command {
	const char *name;
	json_t *(*fn)(struct tally_dp *dp, json_t *req);
	const char *usage;
};

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

/* Reads integer key k of o into *v, checking lo..hi; def when absent. */
static int
get_int(json_t *o, const char *k, json_int_t lo, json_int_t hi,
	json_int_t def, json_int_t *v, char *why, size_t wlen)
{
	json_t *x = json_object_get(o, k);

	if (x == NULL) {
		if (def < lo) {
			snprintf(why, wlen, "'%s' is required", k);
			return -EINVAL;
		}
		*v = def;
		return 0;
	}
	if (!json_is_integer(x) || json_integer_value(x) < lo ||
			json_integer_value(x) > hi) {
		snprintf(why, wlen, "'%s' must be an integer in %lld..%lld", k,
			(long long)lo, (long long)hi);
		return -EINVAL;
	}
	*v = json_integer_value(x);
	return 0;
}

static int
parse_token(json_t *o, uint64_t *token, char *why, size_t wlen)
{
	const char *s = json_string_value(json_object_get(o, "token"));

	if (s == NULL || strlen(s) != 16 ||
			strspn(s, "0123456789abcdefABCDEF") != 16) {
		snprintf(why, wlen, "'token' must be 16 hex digits");
		return -EINVAL;
	}
	*token = strtoull(s, NULL, 16);
	return 0;
}

static int
parse_members(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *arr = json_object_get(o, "members"), *m;
	size_t i;

	if (!json_is_array(arr) || json_array_size(arr) != c->world) {
		snprintf(why, wlen, "'members' must be an array of 'world' "
			"(%u) {\"ip\", \"port\"} objects, by rank", c->world);
		return -EINVAL;
	}
	json_array_foreach(arr, i, m) {
		const char *ip = json_string_value(json_object_get(m, "ip"));
		json_t *port = json_object_get(m, "port");
		struct in_addr a;

		if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1 ||
				a.s_addr == 0) {
			snprintf(why, wlen, "member %zu: 'ip' must be an "
				"IPv4 address", i);
			return -EINVAL;
		}
		if (!json_is_integer(port) || json_integer_value(port) < 1 ||
				json_integer_value(port) > 65535) {
			snprintf(why, wlen, "member %zu: 'port' must be "
				"1..65535", i);
			return -EINVAL;
		}
		c->members[i].ip = a.s_addr;
		c->members[i].port = htons((uint16_t)json_integer_value(port));
	}
	return 0;
}

static const char *const job_keys[] = {
	"cmd", "id", "token", "world", "window", "max_elems", "narrow",
	"members", "group", NULL,
};

/* "group": {"ip": a multicast address, "port"}; absent: unicast. */
static int
parse_group(json_t *o, struct tally_job_conf *c, char *why, size_t wlen)
{
	json_t *g = json_object_get(o, "group"), *port;
	const char *ip;
	struct in_addr a;

	if (g == NULL)
		return 0;
	ip = json_string_value(json_object_get(g, "ip"));
	port = json_object_get(g, "port");
	if (ip == NULL || inet_pton(AF_INET, ip, &a) != 1 ||
			!IN_MULTICAST(ntohl(a.s_addr))) {
		snprintf(why, wlen, "'group': 'ip' must be an IPv4 multicast "
			"address (224.0.0.0/4)");
		return -EINVAL;
	}
	if (!json_is_integer(port) || json_integer_value(port) < 1 ||
			json_integer_value(port) > 65535) {
		snprintf(why, wlen, "'group': 'port' must be 1..65535");
		return -EINVAL;
	}
	c->group.ip = a.s_addr;
	c->group.port = htons((uint16_t)json_integer_value(port));
	return 0;
}

/*
 * job_add: {"id", "token": 16 hex digits, "world", "window" (64),
 * "max_elems" (256), "narrow" (false), "members": [{"ip", "port"}...]}.
 */
static json_t *
cmd_job_add(struct tally_dp *dp, json_t *req)
{
	struct tally_job_conf c = { 0 };
	json_int_t id, world, window, elems;
	json_t *narrow = json_object_get(req, "narrow");
	const char *k;
	json_t *val;
	char why[160] = "";
	int ret;

	json_object_foreach(req, k, val) {
		unsigned int i;

		for (i = 0; job_keys[i] != NULL; i++)
			if (strcmp(k, job_keys[i]) == 0)
				break;
		if (job_keys[i] == NULL)
			return reply_err(EINVAL, "unknown key '%s'", k);
	}
	if (get_int(req, "id", 0, UINT16_MAX, -1, &id, why, sizeof(why)) ||
			get_int(req, "world", 1, TALLY_MAX_WORKERS, -1, &world,
				why, sizeof(why)) ||
			get_int(req, "window", 1, TALLY_MAX_WINDOW, 64, &window,
				why, sizeof(why)) ||
			get_int(req, "max_elems", 1, TALLY_MAX_ELEMS,
				TALLY_DEFAULT_ELEMS, &elems, why, sizeof(why)) ||
			parse_token(req, &c.token, why, sizeof(why)))
		return reply_err(EINVAL, "%s", why);
	if (narrow != NULL && !json_is_boolean(narrow))
		return reply_err(EINVAL, "'narrow' must be true or false");
	c.id = (uint16_t)id;
	c.world = (uint8_t)world;
	c.window = (uint16_t)window;
	c.max_elems = (uint16_t)elems;
	c.narrow = json_is_true(narrow);
	if (parse_members(req, &c, why, sizeof(why)) != 0 ||
			parse_group(req, &c, why, sizeof(why)) != 0)
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
	json_int_t id;
	char why[160];
	int ret;

	if (get_int(req, "id", 0, UINT16_MAX, -1, &id, why, sizeof(why)))
		return reply_err(EINVAL, "%s", why);
	ret = tally_dp_job_del(dp, (uint16_t)id);
	if (ret == -ENOENT)
		return reply_err(ENOENT, "no job %lld", (long long)id);
	if (ret != 0)
		return reply_err(-ret, "cannot delete job %lld: %s",
			(long long)id, strerror(-ret));
	return reply_ok();
}

/* The job's counters, summed over lcores. Called under dp->lock. */
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

static const struct command commands[] = {
	{ "ping", cmd_ping, "{}" },
	{ "job_add", cmd_job_add, "{\"id\", \"token\", \"world\", "
		"\"window\"?, \"max_elems\"?, \"narrow\"?, \"members\": "
		"[{\"ip\", \"port\"}, ...], \"group\"?: {\"ip\", "
		"\"port\"}}" },
	{ "job_del", cmd_job_del, "{\"id\"}" },
	{ "job_list", cmd_job_list, "{}" },
	{ "stats", cmd_stats, "{}" },
	{ "list_commands", cmd_list_commands, "{}" },
};

static json_t *
cmd_list_commands(struct tally_dp *dp, json_t *req)
{
	json_t *o = json_object();

	(void)dp;
	(void)req;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		json_object_set_new(o, commands[i].name,
			json_string(commands[i].usage));
	return json_pack("{s:i, s:o}", "errno", 0, "commands", o);
}

char *
tally_dp_admin_handle(struct tally_dp *dp, const char *req, size_t len)
{
	json_error_t jerr;
	json_t *in, *out = NULL;
	const char *cmd;
	char *text;

	in = json_loadb(req, len, JSON_REJECT_DUPLICATES, &jerr);
	if (in == NULL) {
		out = reply_err(EINVAL, "invalid JSON: %s (at byte %d)",
			jerr.text, jerr.position);
	} else if (!json_is_object(in) || (cmd = json_string_value(
			json_object_get(in, "cmd"))) == NULL) {
		out = reply_err(EINVAL, "a request is an object with a "
			"string \"cmd\"");
	} else {
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]);
				i++)
			if (strcmp(cmd, commands[i].name) == 0)
				out = commands[i].fn(dp, in);
		if (out == NULL)
			out = reply_err(EOPNOTSUPP, "unknown command '%s' "
				"(try list_commands)", cmd);
	}
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
