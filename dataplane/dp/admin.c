/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The admin socket: a Unix SOCK_SEQPACKET socket, one JSON object per
 * message each way. Every reply carries "errno" (0 on success) and, on
 * failure, "error" with a sentence. tallyd programs tally-dp through it;
 * tests use it directly. Served from the main lcore, never an lcore.
 *
 * Requests: {"cmd": NAME, ...}; admin_parse.c parses and checks them
 * (and names each command's keys), this file serves and executes them.
 * admin_serve.c owns the socket and its clients.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <jansson.h>

#include <tally/limits.h>
#include <tally/token_fp.h>

#include "admin_parse.h"
#include "dp.h"
#include "tally_config.h"

#define MAX_MSG TALLY_ADMIN_MSG_MAX

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
 * added to the table if tally-dp can serve it (jobs.c says why not).
 */
static json_t *
cmd_job_add(struct tally_dp *dp, json_t *req)
{
	struct tally_job_conf c;
	unsigned int encs;
	char why[256];
	int ret;

	if (tally_admin_parse_job_add(req, &c, &encs, why, sizeof(why)) != 0)
		return reply_err(EINVAL, "%s", why);
	/* A RoCEv2 job without max_elems: as many as the path MTU takes. */
	if (c.max_elems == 0)
		c.max_elems = (uint16_t)tally_dp_roce_max_elems(dp, encs |
			(c.auth ? TALLY_ENC_AUTH : 0), c.narrow);
	if (c.max_elems == 0)
		return reply_err(EPROTONOSUPPORT, "job %u has RoCEv2 members, "
			"and tally-dp runs without RoCEv2 (--roce-qpn-base 0) "
			"or its MTU of %u bytes takes no element", c.id,
			dp->mtu);
	ret = tally_dp_job_add(dp, &c, encs, why, sizeof(why));
	if (ret != 0)
		return reply_err(-ret, "%s", why);
	return reply_ok();
}

/* A summed counter row as {"name": value, ...}. */
static json_t *
ctr_json(const struct tally_job_ctr *sum)
{
	struct tally_dp_counter c[16];
	unsigned int n = tally_dp_ctr_list(sum, c, 16);
	json_t *o = json_object();

	for (unsigned int i = 0; i < n && i < 16; i++)
		json_object_set_new(o, c[i].name, json_integer(
			(json_int_t)c[i].value));
	return o;
}

/*
 * job_del: {"id"} -> {"counters"}: the job's final counters, read once
 * no lcore can count into them any more.
 */
static json_t *
cmd_job_del(struct tally_dp *dp, json_t *req)
{
	struct tally_job_ctr final;
	char why[256];
	uint16_t id;
	int ret;

	if (tally_admin_parse_job_del(req, &id, why, sizeof(why)) != 0)
		return reply_err(EINVAL, "%s", why);
	ret = tally_dp_job_del(dp, id, &final);
	if (ret == -ENOENT)
		return reply_err(ENOENT, "no job %u", id);
	if (ret != 0)
		return reply_err(-ret, "cannot delete job %u: %s", id,
			strerror(-ret));
	return json_pack("{s:i, s:o}", "errno", 0, "counters",
		ctr_json(&final));
}

/* The names of the encodings in mask encs. */
static json_t *
encs_json(unsigned int encs)
{
	json_t *a = json_array();

	for (unsigned int e = TALLY_ENC_F32; e < TALLY_ENC_MAX_; e++)
		if (encs & TALLY_ENC_BIT(e))
			json_array_append_new(a, json_string(tally_enc_name(e)));
	return a;
}

/* One job_list entry. The token itself is never shown. */
static json_t *
job_json(const struct tally_dp *dp, const struct tally_job *job)
{
	const struct tally_job_conf *c = &job->conf;
	const struct tally_dp_jobx *x = tally_dp_jobx(job);
	json_t *members = json_array(), *o;
	char ip[INET_ADDRSTRLEN], fp[17];
	struct tally_job_ctr sum;

	for (unsigned int r = 0; r < c->world; r++) {
		inet_ntop(AF_INET, &c->members[r].ip, ip, sizeof(ip));
		json_t *m = json_pack("{s:s, s:i}", "ip", ip, "port",
			ntohs(c->members[r].port));

		if (m != NULL && c->roce)	/* and port 4791 */
			json_object_set_new(m, "qpn", json_integer(c->qpn[r]));
		json_array_append_new(members, m);
	}
	snprintf(fp, sizeof(fp), "%016llx",
		(unsigned long long)tally_token_fp(c->token));
	o = json_pack("{s:i, s:s, s:i, s:i, s:i, s:b, s:I, s:o, s:o}", "id",
		c->id, "token_fp", fp, "world", c->world, "window", c->window,
		"max_elems", c->max_elems, "narrow", c->narrow, "mem_bytes",
		(json_int_t)x->mem, "encodings", encs_json(x->encs), "members",
		members);
	if (o != NULL && c->auth)	/* never the keys */
		json_object_set_new(o, "auth", json_true());
	json_object_set_new(o, "transport", json_string(c->roce ? "roce" :
		"udp"));
	json_object_set_new(o, "qkey", json_integer(c->qkey));
	if (c->group.ip != 0) {
		inet_ntop(AF_INET, &c->group.ip, ip, sizeof(ip));
		json_object_set_new(o, "group", json_pack("{s:s, s:i}", "ip",
			ip, "port", ntohs(c->group.port)));
	}
	if (c->up.ip != 0) {	/* a leaf of two tiers; not the token */
		inet_ntop(AF_INET, &c->up.ip, ip, sizeof(ip));
		json_object_set_new(o, "upstream", json_pack("{s:s, s:i, s:i, "
			"s:i, s:i}", "ip", ip, "port", ntohs(c->up.port),
			"nports", c->up.nports, "rank", c->up.rank, "world",
			c->up.world));
	}
	tally_dp_job_sum(dp, job, &sum);
	json_object_set_new(o, "counters", ctr_json(&sum));
	return o;
}

/* Room for the reply's frame around the entries: errno, more, brackets. */
#define LIST_FRAME 64

/*
 * job_list: {"after", "limit"} -> {"jobs": [...], "more"}: the jobs whose
 * id is above after, ascending, each with its "counters", as many as
 * limit allows and one message holds; "more" when jobs above the last
 * one shown remain (ask again with "after" = its id).
 */
static json_t *
cmd_job_list(struct tally_dp *dp, json_t *req)
{
	json_t *jobs = json_array();
	size_t used = LIST_FRAME;
	unsigned int limit, i, n = 0;
	char why[256];
	uint16_t after;
	int more;

	if (tally_admin_parse_job_list(req, &after, &limit, why,
			sizeof(why)) != 0) {
		json_decref(jobs);
		return reply_err(EINVAL, "%s", why);
	}
	pthread_mutex_lock(&dp->lock);
	for (i = tally_dp_job_after(dp, after); i < dp->njobs && n < limit;
			i++) {
		json_t *o = job_json(dp, dp->jobs[i]);
		char *text = json_dumps(o, JSON_COMPACT);
		size_t len = text != NULL ? strlen(text) + 1 : MAX_MSG;

		free(text);
		if (used + len > MAX_MSG) {
			json_decref(o);
			break;
		}
		used += len;
		json_array_append_new(jobs, o);
		n++;
	}
	more = i < dp->njobs;
	pthread_mutex_unlock(&dp->lock);
	return json_pack("{s:i, s:o, s:b}", "errno", 0, "jobs", jobs, "more",
		more);
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

/*
 * stats: {} -> {"total": {...}, "lcores": [{"lcore", ...}, ...],
 * "admin": {...}}.
 */
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
	return json_pack("{s:i, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I}}",
		"errno", 0, "total", counters_json(dp, -1), "lcores", lcores,
		"admin", "requests", (json_int_t)dp->admin.requests, "clients",
		(json_int_t)dp->admin.clients, "refused",
		(json_int_t)dp->admin.refused, "slow",
		(json_int_t)dp->admin.slow, "stale",
		(json_int_t)dp->admin.stale);
}

/*
 * RoCEv2 as ping shows it: {"qpns": [qpn_base + lcore index, ...],
 * "pkey", "pmtu" (the largest UD message), "max_elems" (the i32 default
 * of a RoCEv2 job without one, results widened)}.
 */
static json_t *
roce_json(const struct tally_dp *dp)
{
	json_t *q = json_array();

	for (uint16_t i = 0; i < dp->nworkers; i++)
		json_array_append_new(q, json_integer(dp->self.qpn_base + i));
	return json_pack("{s:o, s:i, s:i, s:i}", "qpns", q, "pkey",
		TALLY_ROCE_PKEY_FULL, "pmtu", (int)tally_roce_pmtu(dp->mtu),
		"max_elems", (int)tally_dp_roce_max_elems(dp,
			TALLY_ENC_BIT(TALLY_ENC_I32), 0));
}

/*
 * ping: {} -> {"version", "steering", "workers", "ip", "udp_port", and
 * the limits a job must fit: "mtu" (the port's L3 MTU), "max_jobs",
 * "jobs", "mem_budget", "mem_used", "max_job_mem" (bytes; 0: no limit),
 * and "roce" (roce_json()) unless RoCEv2 is off}.
 */
static json_t *
cmd_ping(struct tally_dp *dp, json_t *req)
{
	char ip[INET_ADDRSTRLEN];
	json_int_t used, njobs;
	json_t *o;

	(void)req;
	inet_ntop(AF_INET, &dp->self.ip, ip, sizeof(ip));
	pthread_mutex_lock(&dp->lock);
	used = (json_int_t)dp->mem_used;
	njobs = dp->njobs;
	pthread_mutex_unlock(&dp->lock);
	o = json_pack("{s:i, s:s, s:s, s:i, s:s, s:i, s:i, s:I, s:I, s:I, "
		"s:I, s:I}", "errno", 0, "version", TALLY_VERSION, "steering",
		dp->steer_flow ? "rte_flow" : "software", "workers",
		dp->nworkers, "ip", ip, "udp_port", ntohs(dp->self.port), "mtu",
		dp->mtu, "max_jobs", (json_int_t)dp->max_jobs, "jobs", njobs,
		"mem_budget", (json_int_t)dp->mem_budget, "mem_used", used,
		"max_job_mem", (json_int_t)dp->max_job_mem);
	if (o != NULL && dp->self.qpn_base != 0)
		json_object_set_new(o, "roce", roce_json(dp));
	return o;
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
