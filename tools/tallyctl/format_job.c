/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jobs as text: job_list's table, a job object's fields, members and
 * counters (job_show), and job_create's reply with its token.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "table.h"

#define CELL	96

/* Adds v as a cell (tallyctl_fmt_value()). */
static int
cell(struct tallyctl_table *t, const json_t *v)
{
	char b[CELL];

	tallyctl_fmt_value(b, sizeof(b), v);
	return tallyctl_table_cell(t, "%s", b);
}

/* Adds v, a byte count, in binary units; "-" if it is not a count. */
static int
bytes_cell(struct tallyctl_table *t, const json_t *v)
{
	char b[CELL] = "-";

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		tallyctl_fmt_bytes(b, sizeof(b),
			(uint64_t)json_integer_value(v));
	return tallyctl_table_cell(t, "%s", b);
}

static json_int_t
id_of(const json_t *job)
{
	const json_t *id = json_object_get(job, "id");

	return json_is_integer(id) ? json_integer_value(id) : -1;
}

static int
by_id(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a;
	const json_t *y = *(const json_t *const *)b;

	if (id_of(x) != id_of(y))
		return id_of(x) < id_of(y) ? -1 : 1;
	return strcmp(tallyctl_json_str(x, "name"),
		tallyctl_json_str(y, "name"));
}

static int
list_rows(struct tallyctl_table *t, json_t **v, size_t n)
{
	int ret = tallyctl_table_cells(t, "NAME", "ID", "WORLD", "JOINED",
		"STATE", "ROUNDS", "BYTES_IN", NULL);

	for (size_t i = 0; i < n && ret == 0; i++) {
		const json_t *c = json_object_get(v[i], "counters");

		if ((ret = tallyctl_table_cell(t, "%s",
				tallyctl_json_str(v[i], "name"))) != 0 ||
				(ret = cell(t, json_object_get(v[i], "id"))) ||
				(ret = cell(t, json_object_get(v[i],
					"world"))) ||
				(ret = cell(t, json_object_get(v[i],
					"joined"))) ||
				(ret = tallyctl_table_cell(t, "%s",
					tallyctl_json_str(v[i], "state"))) ||
				(ret = cell(t, json_object_get(c, "rounds"))))
			break;
		ret = bytes_cell(t, json_object_get(c, "bytes_in"));
	}
	return ret;
}

int
tallyctl_print_job_list(FILE *f, const json_t *reply)
{
	const json_t *jobs = json_object_get(reply, "jobs");
	size_t n = json_array_size(jobs);
	struct tallyctl_table *t;
	json_t **v;
	int ret;

	if (!json_is_array(jobs))
		return -EPROTO;
	if (n == 0) {
		fputs("no jobs\n", f);
		return 0;
	}
	v = calloc(n, sizeof(*v));
	t = tallyctl_table_new(7, "lrrrlrr");
	ret = -ENOMEM;
	if (v == NULL || t == NULL)
		goto out;
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(jobs, i);
	qsort(v, n, sizeof(*v), by_id);
	ret = list_rows(t, v, n);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "");
out:
	tallyctl_table_destroy(t);
	free(v);
	return ret;
}

/* "key:" and v as a cell. */
static int
kv(struct tallyctl_table *t, const char *key, const json_t *v)
{
	int ret = tallyctl_table_cell(t, "%s:", key);

	return ret != 0 ? ret : cell(t, v);
}

/* "key:" and a time. */
static int
kv_time(struct tallyctl_table *t, const char *key, const json_t *v,
	time_t now)
{
	char b[CELL];

	tallyctl_fmt_time(b, sizeof(b), json_is_integer(v) ?
		json_integer_value(v) : 0, now);
	return tallyctl_table_cells(t, key, b, NULL);
}

/*
 * Why the job's epoch last changed, when not a membership's forming
 * (docs/scale-out.md, "Epochs"): a dead dataplane, no capacity, or a
 * rejoin of every rank. Nothing for a tallyd before epochs.
 */
static int
epoch_reason(struct tallyctl_table *t, const json_t *job, time_t now)
{
	const json_t *w = json_object_get(job, "epoch_reason");
	const char *cause = json_string_value(json_object_get(w, "cause"));
	const char *dp = json_string_value(json_object_get(w, "dataplane"));
	const char *missed = json_string_value(json_object_get(w, "missed"));
	char at[CELL], b[3 * CELL];

	if (cause == NULL || strcmp(cause, "membership") == 0)
		return 0;
	tallyctl_fmt_time(at, sizeof(at), json_integer_value(json_object_get(w,
		"at")), now);
	if (dp != NULL)
		snprintf(b, sizeof(b), "%s: tally-dp %s missed %s, %s (epoch "
			"%lld ended)", cause, dp, missed != NULL ? missed : "?",
			at, (long long)json_integer_value(json_object_get(w,
			"from")));
	else
		snprintf(b, sizeof(b), "%s: %s, %s (epoch %lld ended)", cause,
			missed != NULL ? missed : "?", at, (long long)
			json_integer_value(json_object_get(w, "from")));
	return tallyctl_table_cells(t, "epoch_reason:", b, NULL);
}

/* The settings every job has: name to created. */
static int
settings(struct tallyctl_table *t, const json_t *job, time_t now)
{
	static const char *const plain[] = {
		"name", "id", "state", "world", "joined", "epoch", "window",
		"max_elems", "narrow",
	};
	const json_t *idle = json_object_get(job, "idle_timeout_s");
	const char *group = json_string_value(json_object_get(job, "group"));
	char b[CELL] = "never";
	int ret = 0;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if ((ret = kv(t, plain[i], json_object_get(job, plain[i]))))
			return ret;
	if ((ret = epoch_reason(t, job, now)) != 0)
		return ret;
	/* Authenticated or plain (a tallyd before it does not say). */
	if (json_object_get(job, "auth") != NULL &&
			(ret = kv(t, "auth", json_object_get(job, "auth"))))
		return ret;
	/* udp or rdma (docs/rdma.md); older tallyds do not say. */
	if (json_object_get(job, "transport") != NULL && (ret = kv(t,
			"transport", json_object_get(job, "transport"))))
		return ret;
	/* The job's codec spec (<tally/codec.h>); older tallyds have none. */
	if (json_object_get(job, "codec") != NULL &&
			(ret = kv(t, "codec", json_object_get(job, "codec"))))
		return ret;
	if ((ret = tallyctl_table_cells(t, "group:", group != NULL ? group :
			"none (unicast)", NULL)) != 0)
		return ret;
	if (!json_is_integer(idle) || json_integer_value(idle) < 0)
		strcpy(b, "-");
	else if (json_integer_value(idle) > 0)
		tallyctl_fmt_duration(b, sizeof(b),
			(uint64_t)json_integer_value(idle));
	if ((ret = tallyctl_table_cells(t, "idle_timeout:", b, NULL)) != 0)
		return ret;
	return kv_time(t, "created:", json_object_get(job, "created"), now);
}

static int
print_members(FILE *f, const json_t *members)
{
	struct tallyctl_table *t = tallyctl_table_new(3, "rlr");
	const json_t *m;
	size_t i;
	int ret;

	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "RANK", "IP", "PORT", NULL);
	json_array_foreach(members, i, m) {
		if (ret != 0 || (ret = cell(t, json_object_get(m, "rank"))) ||
				(ret = cell(t, json_object_get(m, "ip"))) ||
				(ret = cell(t, json_object_get(m, "port"))))
			break;
	}
	if (ret == 0)		/* under "members:", the last of the fields */
		ret = tallyctl_table_print(t, f, "  ");
	tallyctl_table_destroy(t);
	return ret;
}

/* The counters in the reply's order; byte counts also in units. */
static int
print_counters(FILE *f, const json_t *counters)
{
	struct tallyctl_table *t = tallyctl_table_new(3, "lrl");
	const char *k;
	json_t *v;
	int ret = 0;

	if (t == NULL)
		return -ENOMEM;
	json_object_foreach((json_t *)counters, k, v) {
		if ((ret = tallyctl_table_cell(t, "%s", k)) ||
				(ret = cell(t, v)))
			break;
		if (strncmp(k, "bytes", 5) == 0)
			ret = bytes_cell(t, v);
		else
			ret = tallyctl_table_cell(t, "%s", "");
		if (ret != 0)
			break;
	}
	if (ret == 0) {
		fputs("counters:\n", f);
		ret = tallyctl_table_print(t, f, "  ");
	}
	tallyctl_table_destroy(t);
	return ret;
}

/*
 * The job's shards (tallyd's "shards": a job on several tally-dp hosts,
 * docs/scale-out.md): each dataplane, whether it answers, and the
 * counters that tally-dp reports for the job there.
 */
static int
print_shards(FILE *f, const json_t *shards)
{
	static const char *const ctr[] = { "rounds", "contributions",
		"bytes_in", "results", "drops" };
	struct tallyctl_table *t = tallyctl_table_new(8, "lllrrrrr");
	const json_t *s;
	size_t i;
	int ret;

	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "DATAPLANE", "UP", "HOLDS", "ROUNDS",
		"CONTRIBUTIONS", "BYTES_IN", "RESULTS", "DROPS", NULL);
	json_array_foreach(shards, i, s) {
		const json_t *c = json_object_get(s, "counters");

		if (ret != 0 || (ret = cell(t, json_object_get(s,
				"dataplane"))) || (ret = tallyctl_table_cell(t,
				"%s", json_is_true(json_object_get(s, "up")) ?
				"yes" : "no")) || (ret = tallyctl_table_cell(t,
				"%s", json_is_true(json_object_get(s,
				"in_dp")) ? "yes" : "no")))
			break;
		for (size_t k = 0; ret == 0 && k < 5; k++)
			ret = cell(t, json_object_get(c, ctr[k]));
	}
	if (ret == 0) {
		fputs("shards:\n", f);
		ret = tallyctl_table_print(t, f, "  ");
	}
	tallyctl_table_destroy(t);
	return ret;
}

int
tallyctl_print_job(FILE *f, const json_t *job, time_t now)
{
	const json_t *members = json_object_get(job, "members");
	const json_t *counters = json_object_get(job, "counters");
	struct tallyctl_table *t;
	int ret;

	if (!json_is_object(job))
		return -EPROTO;
	t = tallyctl_table_new(2, "l");
	if (t == NULL)
		return -ENOMEM;
	ret = settings(t, job, now);
	if (ret == 0)
		ret = kv_time(t, "last_active:", json_object_get(job,
			"last_active"), now);
	if (ret == 0 && json_is_array(members))
		ret = tallyctl_table_cells(t, "members:",
			json_array_size(members) == 0 ? "none" : "", NULL);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "");
	tallyctl_table_destroy(t);
	if (ret == 0 && json_array_size(members) > 0)
		ret = print_members(f, members);
	if (ret == 0 && json_is_object(counters))
		ret = print_counters(f, counters);
	if (ret == 0 && json_array_size(json_object_get(job, "shards")) > 0)
		ret = print_shards(f, json_object_get(job, "shards"));
	if (ret == 0 && json_is_object(json_object_get(job, "tree")))
		ret = tallyctl_print_tree(f, json_object_get(job, "tree"));
	return ret;
}

int
tallyctl_print_created(FILE *f, const json_t *reply, time_t now)
{
	const json_t *job = json_object_get(reply, "job");
	const char *token = json_string_value(json_object_get(reply, "token"));
	struct tallyctl_table *t;
	int ret;

	if (!json_is_object(job) || token == NULL)
		return -EPROTO;
	t = tallyctl_table_new(2, "l");
	if (t == NULL)
		return -ENOMEM;
	ret = settings(t, job, now);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "");
	tallyctl_table_destroy(t);
	if (ret != 0)
		return ret;
	fprintf(f, "\ntoken: %s\n", token);
	fprintf(f, "warning: the token is not shown again; keep it: workers "
		"present it to join job '%s'\n", tallyctl_json_str(job,
		"name"));
	return 0;
}
