/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyctl job create|list|show|delete: the job_* requests of
 * docs/control.md, one each.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "tally/proto.h"
#include "format.h"
#include "num.h"
#include "tallyctl.h"

/* job create's numeric options, in the order the request has them. */
static const struct {
	const char *opt;
	const char *key;
	unsigned long lo, hi;
} nums[] = {
	{ "--world", "world", 1, TALLY_MAX_WORKERS },
	{ "--window", "window", 1, 32768 },
	{ "--max-elems", "max_elems", 1, TALLY_MAX_ELEMS },
	{ "--idle-timeout", "idle_timeout_s", 0, 365ul * 86400 },
};

#define NNUMS	(sizeof(nums) / sizeof(nums[0]))

struct create_args {
	const char *name;
	unsigned long num[NNUMS];
	bool given[NNUMS];
	bool narrow;
	bool auth;
	const char *group;
	const char *codec;
	const char *transport;
	const char *dataplanes;		/* "A,B,C" */
	const char *leaves;		/* a two-tier tree: "A,B" */
	const char *spine;		/* and its spine */
	const char *big_world;		/* --world over 64, as given */
};

#define TREE_WORLD_MAX	4096	/* a two-tier tree's total world */

/* "A.B.C.D:PORT", as far as tallyctl checks it (tallyd does the rest). */
static bool
group_ok(const char *s)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = strrchr(s, ':');
	struct in_addr a;
	unsigned long port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	return inet_pton(AF_INET, ip, &a) == 1 &&
		tallyctl_parse_uint(colon + 1, 1, 65535, &port) == 0;
}

/* One of create's own options at *i: 1, 0 (not one), -1 (mistake). */
static int
create_opt(struct tallyctl *g, int argc, char **argv, int *i,
	struct create_args *a)
{
	const char *v;
	int r;

	for (size_t k = 0; k < NNUMS; k++) {
		if ((r = tallyctl_opt(g, argc, argv, i, nums[k].opt, &v)) == 0)
			continue;
		/* A tree's total world (--leaves, checked after all). */
		if (k == 0 && r > 0 && tallyctl_parse_uint(v, TALLY_MAX_WORKERS
				+ 1, TREE_WORLD_MAX, &a->num[0]) == 0) {
			a->big_world = v;
			a->given[0] = true;
			return 1;
		}
		if (r < 0 || tallyctl_opt_uint(g, nums[k].opt, v, nums[k].lo,
				nums[k].hi, &a->num[k]) != 0)
			return -1;
		a->given[k] = true;
		return 1;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--narrow", NULL)) != 0) {
		a->narrow = r > 0;
		return r > 0 ? 1 : -1;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--auth", NULL)) != 0) {
		a->auth = r > 0;
		return r > 0 ? 1 : -1;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--codec", &a->codec)) != 0)
		return r > 0 ? 1 : -1;	/* tallyd checks the spec */
	if ((r = tallyctl_opt(g, argc, argv, i, "--transport",
			&a->transport)) != 0) {
		if (r > 0 && strcmp(a->transport, "udp") != 0 &&
				strcmp(a->transport, "rdma") != 0) {
			tallyctl_usage_error(g, "--transport: '%s' is not udp "
				"or rdma", a->transport);
			return -1;
		}
		return r > 0 ? 1 : -1;
	}
	if ((r = tallyctl_opt(g, argc, argv, i, "--dataplanes",
			&a->dataplanes)) != 0)
		return r > 0 ? 1 : -1;	/* tallyd checks the names */
	if ((r = tallyctl_opt(g, argc, argv, i, "--leaves",
			&a->leaves)) != 0)
		return r > 0 ? 1 : -1;
	if ((r = tallyctl_opt(g, argc, argv, i, "--spine", &a->spine)) != 0)
		return r > 0 ? 1 : -1;
	if ((r = tallyctl_opt(g, argc, argv, i, "--group", &a->group)) == 0)
		return 0;
	if (r > 0 && !group_ok(a->group)) {
		tallyctl_usage_error(g, "--group: '%s' is not IP:PORT (an IPv4 "
			"multicast group and a port in 1..65535)", a->group);
		return -1;
	}
	return r > 0 ? 1 : -1;
}

/* job create's arguments: -1 to go on, or the status to end with. */
static int
create_args(struct tallyctl *g, int argc, char **argv, struct create_args *a)
{
	int i, r, status;

	for (i = 1; i < argc; i++) {
		if ((r = tallyctl_common_arg(g, argc, argv, &i, &status)) < 0)
			return status;
		if (r == 0 && (r = create_opt(g, argc, argv, &i, a)) < 0)
			return TALLYCTL_EXIT_USAGE;
		if (r > 0)
			continue;
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			return tallyctl_usage_error(g, "unknown option '%s'",
				argv[i]);
		if (a->name != NULL)
			return tallyctl_usage_error(g, "unexpected argument "
				"'%s'", argv[i]);
		if (!tallyctl_utf8_arg(g, "NAME", argv[i]))
			return TALLYCTL_EXIT_USAGE;
		a->name = argv[i];
	}
	if (a->name == NULL)
		return tallyctl_usage_error(g, "missing NAME");
	if (!a->given[0])
		return tallyctl_usage_error(g, "missing --world N");
	if ((a->leaves == NULL) != (a->spine == NULL))
		return tallyctl_usage_error(g, "a two-tier tree needs both "
			"--leaves and --spine");
	if (a->leaves == NULL && a->big_world != NULL)
		return tallyctl_usage_error(g, "--world: '%s' is not a whole "
			"number in 1..%u (up to %u in a two-tier tree: --leaves, "
			"--spine)", a->big_world, TALLY_MAX_WORKERS,
			TREE_WORLD_MAX);
	return -1;
}

/* "A,B,C" as ["A", "B", "C"] (empty names kept: tallyd refuses them). */
static json_t *
names_json(const char *list)
{
	json_t *a = json_array();
	const char *p = list;

	while (a != NULL) {
		size_t n = strcspn(p, ",");

		json_array_append_new(a, json_stringn(p, n));
		if (p[n] == '\0')
			break;
		p += n + 1;
	}
	return a;
}

/* The job_create request: only the keys given. NULL on ENOMEM. */
static json_t *
create_req(const struct create_args *a)
{
	json_t *req = json_pack("{s:s, s:s}", "cmd", "job_create", "name",
		a->name);
	int err = req == NULL;

	for (size_t k = 0; k < NNUMS && req != NULL; k++)
		if (a->given[k])
			err |= json_object_set_new(req, nums[k].key,
				json_integer((json_int_t)a->num[k]));
	if (req != NULL && a->narrow)
		err |= json_object_set_new(req, "narrow", json_true());
	if (req != NULL && a->auth)
		err |= json_object_set_new(req, "auth", json_true());
	if (req != NULL && a->group != NULL)
		err |= json_object_set_new(req, "group", json_string(a->group));
	if (req != NULL && a->codec != NULL)
		err |= json_object_set_new(req, "codec", json_string(a->codec));
	if (req != NULL && a->transport != NULL)
		err |= json_object_set_new(req, "transport",
			json_string(a->transport));
	if (req != NULL && a->dataplanes != NULL)
		err |= json_object_set_new(req, "dataplanes",
			names_json(a->dataplanes));
	if (req != NULL && a->leaves != NULL)
		err |= json_object_set_new(req, "leaves",
			names_json(a->leaves));
	if (req != NULL && a->spine != NULL)
		err |= json_object_set_new(req, "spine",
			json_string(a->spine));
	if (err) {
		json_decref(req);
		return NULL;
	}
	return req;
}

static int
job_create(struct tallyctl *g, int argc, char **argv)
{
	struct create_args a = { 0 };
	json_t *reply;
	int ret;

	ret = create_args(g, argc, argv, &a);
	if (ret >= 0)
		return ret;
	ret = tallyctl_call(g, create_req(&a), &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		ret = tallyctl_printed(g, tallyctl_print_created(stdout, reply,
			time(NULL)));
	json_decref(reply);
	return ret;
}

static int
job_list(struct tallyctl *g, int argc, char **argv)
{
	json_t *reply;
	int ret;

	if (tallyctl_args(g, argc, argv, NULL, NULL, &ret) != 0)
		return ret;
	ret = tallyctl_call_list(g, "job_list", "jobs", &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		ret = tallyctl_printed(g, tallyctl_print_job_list(stdout,
			reply));
	json_decref(reply);
	return ret;
}

static int
job_show(struct tallyctl *g, int argc, char **argv)
{
	const char *name;
	json_t *reply;
	int ret;

	if (tallyctl_args(g, argc, argv, "NAME", &name, &ret) != 0)
		return ret;
	ret = tallyctl_call(g, json_pack("{s:s, s:s}", "cmd", "job_show",
		"name", name), &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		ret = tallyctl_printed(g, tallyctl_print_job(stdout,
			json_object_get(reply, "job"), time(NULL)));
	json_decref(reply);
	return ret;
}

static int
job_delete(struct tallyctl *g, int argc, char **argv)
{
	const char *name;
	json_t *reply;
	int ret;

	if (tallyctl_args(g, argc, argv, "NAME", &name, &ret) != 0)
		return ret;
	ret = tallyctl_call(g, json_pack("{s:s, s:s}", "cmd", "job_delete",
		"name", name), &reply);
	if (ret != 0)
		return ret;
	if (g->json)
		ret = tallyctl_print_json(g, reply);
	else
		printf("deleted job %s\n", name);
	json_decref(reply);
	return ret;
}

const struct tallyctl_cmd tallyctl_job_cmds[] = {
	{ "create", "NAME --world N [--window N] [--max-elems N] [--narrow] "
	  "[--group IP:PORT] [--idle-timeout S] [--codec SPEC] [--auth] "
	  "[--transport udp|rdma] [--dataplanes A,B,...] "
	  "[--leaves A,B,... --spine S]",
	  "Create a job (world 1-64, "
	  "window 1-32768 slots, max-elems 1-8192, idle timeout in seconds, "
	  "0: never; --auth: every packet tagged, docs/protocol.md; "
	  "--transport rdma: workers send RoCEv2 UD, docs/rdma.md; "
	  "--dataplanes: shard it over these tally-dp hosts, slot s at the "
	  "(s mod H)th, docs/scale-out.md; --leaves and --spine: a "
	  "two-tier tree, --world the total (up to 4096), rank r at leaf "
	  "r / (world / leaves), docs/scale-out.md) and "
	  "print its token, which is shown only this once.",
	  job_create, NULL },
	{ "list", "", "One line per job: its id, world, members joined, "
	  "state, rounds and bytes in.", job_list, NULL },
	{ "show", "NAME", "A job's settings, members and counters.",
	  job_show, NULL },
	{ "delete", "NAME", "Delete a job, once its rounds in flight are "
	  "done.", job_delete, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};
