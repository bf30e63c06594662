/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control-socket request parsing: a command table with each command's
 * keys and usage (as Open vSwitch's unixctl registry has), strict about
 * types, ranges and unknown keys.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "tally/proto.h"
#include "ctl_parse.h"

struct cmd {
	const char *name;
	const char *keys[16];	/* besides "cmd"; NULL-terminated */
	const char *usage;
};

static const struct cmd cmds[TALLYD_CTL_MAX_] = {
	[TALLYD_CTL_PING] = { "ping", { NULL }, "{}" },
	[TALLYD_CTL_JOB_CREATE] = { "job_create",
		{ "name", "world", "window", "max_elems", "narrow", "group",
		  "idle_timeout_s", "codec", "auth", "transport",
		  "dataplanes", "leaves", "spine" },
		"{\"name\", \"world\", \"window\"?, \"max_elems\"?, "
		"\"narrow\"?, \"group\"?: \"IP:PORT\", \"idle_timeout_s\"?, "
		"\"codec\"?: SPEC, \"auth\"?, \"transport\"?: \"udp\"|\"rdma\", "
		"\"dataplanes\"?: [NAME, ...], \"leaves\"?: [NAME, ...], "
		"\"spine\"?: NAME}" },
	[TALLYD_CTL_JOB_LIST] = { "job_list", { "after", "limit", NULL },
		"{\"after\"?: ID, \"limit\"?: N}" },
	[TALLYD_CTL_JOB_SHOW] = { "job_show", { "name", NULL }, "{\"name\"}" },
	[TALLYD_CTL_JOB_DELETE] = { "job_delete", { "name", NULL },
		"{\"name\"}" },
	[TALLYD_CTL_STATS] = { "stats", { NULL }, "{}" },
	[TALLYD_CTL_LIST_COMMANDS] = { "list_commands", { NULL }, "{}" },
};

const char *
tallyd_ctl_cmd_name(enum tallyd_ctl_cmd c)
{
	return c < TALLYD_CTL_MAX_ ? cmds[c].name : "?";
}

const char *
tallyd_ctl_cmd_usage(enum tallyd_ctl_cmd c)
{
	return c < TALLYD_CTL_MAX_ ? cmds[c].usage : "?";
}

static int
fail(char *why, size_t wlen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
fail(char *why, size_t wlen, int err, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return -err;
}

/* Optional integer key k in lo..hi; *v untouched when absent. */
static int
opt_uint(json_t *o, const char *k, unsigned long lo, unsigned long hi,
	unsigned int *v, bool *given, char *why, size_t wlen)
{
	json_t *x = json_object_get(o, k);

	if (x == NULL)
		return 0;
	if (!json_is_integer(x) || json_integer_value(x) < (json_int_t)lo ||
			json_integer_value(x) > (json_int_t)hi)
		return fail(why, wlen, EINVAL, "'%s' must be an integer in "
			"%lu..%lu", k, lo, hi);
	*v = (unsigned int)json_integer_value(x);
	if (given != NULL)
		*given = true;
	return 0;
}

/*
 * job_create's optional "dataplanes": 1..TALLYD_CTL_MAX_DPS distinct
 * names, the shards of the job in slot order. Whether tallyd has them
 * is ctl.c's to say.
 */
static int
parse_dataplanes(json_t *a, struct tallyd_ctl_req *r, char *why, size_t wlen)
{
	json_t *x;
	size_t i;

	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) < 1 ||
			json_array_size(a) > TALLYD_CTL_MAX_DPS)
		return fail(why, wlen, EINVAL, "'dataplanes' must be a list "
			"of 1..%d dataplane names", TALLYD_CTL_MAX_DPS);
	json_array_foreach(a, i, x) {
		const char *n = json_string_value(x);

		if (n == NULL || strlen(n) > TALLYD_CTL_DP_NAME_MAX ||
				!tally_rdv_name_ok(n))
			return fail(why, wlen, EINVAL, "'dataplanes' names "
				"are 1-%d of [A-Za-z0-9_.-]",
				TALLYD_CTL_DP_NAME_MAX);
		for (size_t k = 0; k < i; k++)
			if (strcmp(r->dataplanes[k], n) == 0)
				return fail(why, wlen, EINVAL, "'dataplanes' "
					"names '%s' twice", n);
		strcpy(r->dataplanes[i], n);
	}
	r->ndataplanes = (unsigned int)i;
	return 0;
}

/* A dataplane's name: 1..31 of [A-Za-z0-9_.-]. */
static bool
dp_name_ok(const char *n)
{
	return n != NULL && strlen(n) <= TALLYD_CTL_DP_NAME_MAX &&
		tally_rdv_name_ok(n);
}

/*
 * job_create's "leaves" (1..64 distinct dataplane names) and "spine" (a
 * name, not a leaf's): a two-tier tree, whose "world" is the total.
 * Whether tallyd has them, and what a tree cannot carry, is ctl.c's and
 * tree.c's to say.
 */
static int
parse_tree(json_t *o, struct tallyd_ctl_req *r, char *why, size_t wlen)
{
	json_t *a = json_object_get(o, "leaves"), *x;
	json_t *sp = json_object_get(o, "spine");
	size_t i;

	if (a == NULL && sp == NULL)
		return 0;
	if (a == NULL || sp == NULL)
		return fail(why, wlen, EINVAL, "a two-tier tree needs both "
			"'leaves' and 'spine'");
	if (!json_is_array(a) || json_array_size(a) < 1 ||
			json_array_size(a) > TALLYD_CTL_MAX_LEAVES)
		return fail(why, wlen, EINVAL, "'leaves' must be a list of "
			"1..%d dataplane names", TALLYD_CTL_MAX_LEAVES);
	if (!dp_name_ok(json_string_value(sp)))
		return fail(why, wlen, EINVAL, "'spine' is a dataplane name, "
			"1-%d of [A-Za-z0-9_.-]", TALLYD_CTL_DP_NAME_MAX);
	strcpy(r->spine, json_string_value(sp));
	json_array_foreach(a, i, x) {
		const char *n = json_string_value(x);

		if (!dp_name_ok(n))
			return fail(why, wlen, EINVAL, "'leaves' names are "
				"1-%d of [A-Za-z0-9_.-]",
				TALLYD_CTL_DP_NAME_MAX);
		if (strcmp(n, r->spine) == 0)
			return fail(why, wlen, EINVAL, "dataplane '%s' is "
				"the spine and a leaf: a tree's spine and "
				"leaves are distinct dataplanes", n);
		for (size_t k = 0; k < i; k++)
			if (strcmp(r->leaves[k], n) == 0)
				return fail(why, wlen, EINVAL, "'leaves' "
					"names '%s' twice", n);
		strcpy(r->leaves[i], n);
	}
	r->nleaves = (unsigned int)i;
	if (r->ndataplanes > 0)
		return fail(why, wlen, EINVAL, "'dataplanes' (shards) and "
			"'leaves' (a tree) do not go together");
	return 0;
}

static int
parse_create(json_t *o, struct tallyd_ctl_req *r, char *why, size_t wlen)
{
	json_t *narrow = json_object_get(o, "narrow");
	json_t *auth = json_object_get(o, "auth");
	json_t *group = json_object_get(o, "group");
	json_t *codec = json_object_get(o, "codec");
	json_t *tp = json_object_get(o, "transport");
	struct tally_codec c = { .kind = TALLY_CODEC_FIXP, .density = 0.01 };
	bool have_world = false;
	char cwhy[160];

	r->window = 64;
	r->max_elems = TALLY_DEFAULT_ELEMS;
	/* A tree's world is its total. */
	if (opt_uint(o, "world", 1, json_object_get(o, "leaves") != NULL ?
			TALLYD_CTL_TREE_WORLD_MAX : TALLY_MAX_WORKERS,
			&r->world, &have_world, why, wlen) ||
			opt_uint(o, "window", 1, 32768, &r->window, NULL, why,
				wlen) ||
			opt_uint(o, "max_elems", 1, TALLY_MAX_ELEMS,
				&r->max_elems, &r->has_max_elems, why, wlen) ||
			opt_uint(o, "idle_timeout_s", 0, 365u * 86400,
				&r->idle_timeout_s, &r->has_idle_timeout, why,
				wlen))
		return -EINVAL;
	if (!have_world)
		return fail(why, wlen, EINVAL, "'world' is required");
	if (narrow != NULL && !json_is_boolean(narrow))
		return fail(why, wlen, EINVAL, "'narrow' must be true or false");
	r->narrow = json_is_true(narrow);
	if (auth != NULL && !json_is_boolean(auth))
		return fail(why, wlen, EINVAL, "'auth' must be true or false");
	r->auth = json_is_true(auth);
	if (tp != NULL && (!json_is_string(tp) ||
			(strcmp(json_string_value(tp), "udp") != 0 &&
			 strcmp(json_string_value(tp), "rdma") != 0)))
		return fail(why, wlen, EINVAL, "'transport' must be \"udp\" "
			"or \"rdma\"");
	r->rdma = tp != NULL && strcmp(json_string_value(tp), "rdma") == 0;
	if (r->rdma && group != NULL)
		return fail(why, wlen, EINVAL, "'transport' rdma takes no "
			"'group' (results go to each member's QPN)");
	if (group != NULL && (!json_is_string(group) ||
			tally_rdv_group_parse(json_string_value(group),
				&r->group_ip, &r->group_port) != 0))
		return fail(why, wlen, EINVAL, "'group' must be \"IP:PORT\" "
			"of an IPv4 multicast group (224.0.0.0/4)");
	if (codec != NULL && !json_is_string(codec))
		return fail(why, wlen, EINVAL, "'codec' must be a string, "
			"NAME[,KEY=VALUE]...");
	if (codec != NULL && tally_codec_parse(json_string_value(codec), &c,
			cwhy, sizeof(cwhy)) != 0)
		return fail(why, wlen, EINVAL, "'codec': %s", cwhy);
	if (tally_codec_format(&c, r->codec, sizeof(r->codec)) < 0)
		return fail(why, wlen, EINVAL, "'codec' is too long");
	if (parse_dataplanes(json_object_get(o, "dataplanes"), r, why, wlen))
		return -EINVAL;
	if (r->rdma && r->ndataplanes > 1)
		return fail(why, wlen, EINVAL, "'transport' rdma takes one "
			"dataplane, not %u", r->ndataplanes);
	return parse_tree(o, r, why, wlen);
}

int
tallyd_ctl_parse(const char *buf, size_t len, struct tallyd_ctl_req *r,
	char *why, size_t wlen)
{
	json_error_t jerr;
	const char *name, *k;
	json_t *o, *v;
	int ret = 0;
	unsigned int c;

	memset(r, 0, sizeof(*r));
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL)
		return fail(why, wlen, EINVAL, "invalid JSON: %s (at byte %d)",
			jerr.text, jerr.position);
	if (!json_is_object(o) || (name = json_string_value(json_object_get(o,
			"cmd"))) == NULL) {
		ret = fail(why, wlen, EINVAL, "a request is an object with a "
			"string \"cmd\"");
		goto out;
	}
	for (c = 0; c < TALLYD_CTL_MAX_; c++)
		if (strcmp(name, cmds[c].name) == 0)
			break;
	if (c == TALLYD_CTL_MAX_) {
		ret = fail(why, wlen, EOPNOTSUPP, "unknown command '%.32s' "
			"(try list_commands)", name);
		goto out;
	}
	r->cmd = (enum tallyd_ctl_cmd)c;
	json_object_foreach(o, k, v) {
		unsigned int i;

		if (strcmp(k, "cmd") == 0)
			continue;
		for (i = 0; cmds[c].keys[i] != NULL; i++)
			if (strcmp(k, cmds[c].keys[i]) == 0)
				break;
		if (cmds[c].keys[i] == NULL) {
			ret = fail(why, wlen, EINVAL, "unknown key '%.32s' for "
				"%s (usage: %s)", k, cmds[c].name,
				cmds[c].usage);
			goto out;
		}
	}
	if (cmds[c].keys[0] != NULL && strcmp(cmds[c].keys[0], "name") == 0) {
		const char *n = json_string_value(json_object_get(o, "name"));

		if (n == NULL || !tally_rdv_name_ok(n)) {
			ret = fail(why, wlen, EINVAL, "'name' must be 1-%d of "
				"[A-Za-z0-9_.-]", TALLY_RDV_NAME_MAX);
			goto out;
		}
		strcpy(r->name, n);
	}
	if (r->cmd == TALLYD_CTL_JOB_CREATE)
		ret = parse_create(o, r, why, wlen);
	if (r->cmd == TALLYD_CTL_JOB_LIST)
		ret = opt_uint(o, "after", 0, UINT16_MAX, &r->after,
			&r->paged, why, wlen) ? -EINVAL : opt_uint(o, "limit",
			1, TALLYD_CTL_LIMIT_MAX, &r->limit, &r->paged, why,
			wlen);
out:
	json_decref(o);
	return ret;
}
