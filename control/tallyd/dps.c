/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The dataplanes tallyd drives (docs/scale-out.md, "Shards"): one
 * tally-dp from dp_admin and dp_address, called dp_name, and one more
 * for each "dataplane" line of the configuration. A job spans one or
 * several of them (its shards); these helpers name them, find a job's
 * shard at one, and render them for tallyctl and the state file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dpc.h"

/* Adds dataplane name at admin (address "" = ask it) as d->dps[n]. */
static int
dp_add(struct tallyd *d, const char *name, const char *admin,
	const char *address, char *why, size_t wlen)
{
	struct tallyd_dp *dp = &d->dps[d->ndps];

	if (tallyd_dp_find(d, name) >= 0) {
		snprintf(why, wlen, "dataplane '%s' is named twice", name);
		return -EINVAL;
	}
	snprintf(dp->name, sizeof(dp->name), "%s", name);
	snprintf(dp->label, sizeof(dp->label), " %s", name);
	snprintf(dp->address, sizeof(dp->address), "%s", address);
	dp->dpc = tallyd_dpc_create(d->ndps, admin);
	if (dp->dpc == NULL) {
		int err = errno;

		snprintf(why, wlen, "dataplane '%s' (%s): %s", name, admin,
			strerror(err));
		return -err;
	}
	d->ndps++;
	return 0;
}

int
tallyd_dps_open(struct tallyd *d, char *why, size_t wlen)
{
	const struct tallyd_conf *c = &d->conf;
	int ret;

	d->ndps = 0;
	ret = dp_add(d, c->dp_name, c->dp_admin, c->dp_address, why, wlen);
	for (unsigned int i = 0; ret == 0 && i < c->ndataplanes; i++)
		ret = dp_add(d, c->dataplanes[i].name, c->dataplanes[i].admin,
			c->dataplanes[i].address, why, wlen);
	return ret;
}

void
tallyd_dps_close(struct tallyd *d)
{
	for (unsigned int i = 0; i < d->ndps; i++) {
		tallyd_dpc_destroy(d->dps[i].dpc);
		json_decref(d->dps[i].stats);
		d->dps[i].dpc = NULL;
		d->dps[i].stats = NULL;
	}
	d->ndps = 0;
}

const char *
tallyd_dp_label(const struct tallyd *d, unsigned int dp)
{
	return d->ndps > 1 ? d->dps[dp].label : "";
}

int
tallyd_dp_find(const struct tallyd *d, const char *name)
{
	for (unsigned int i = 0; i < d->ndps; i++)
		if (strcmp(d->dps[i].name, name) == 0)
			return (int)i;
	return -1;
}

bool
tallyd_dps_up(const struct tallyd *d)
{
	for (unsigned int i = 0; i < d->ndps; i++)
		if (!tallyd_dpc_up(d->dps[i].dpc))
			return false;
	return d->ndps > 0;
}

/* "IP:PORT+N" of dataplane dp's endpoint, or null while unknown. */
static json_t *
endpoint_json(struct tallyd *d, unsigned int dp)
{
	uint32_t ip;
	uint16_t port, nports;
	char s[40];

	if (tallyd_dpc_endpoint(d, dp, &ip, &port, &nports) != 0)
		return json_null();
	snprintf(s, sizeof(s), "%u.%u.%u.%u:%u+%u", ip >> 24, ip >> 16 & 255,
		ip >> 8 & 255, ip & 255, port, nports);
	return json_string(s);
}

json_t *
tallyd_dps_json(struct tallyd *d)
{
	json_t *a = json_array();

	for (unsigned int i = 0; a != NULL && i < d->ndps; i++)
		json_array_append_new(a, json_pack("{s:s, s:b, s:o}", "name",
			d->dps[i].name, "up", tallyd_dpc_up(d->dps[i].dpc),
			"endpoint", endpoint_json(d, i)));
	return a;
}

struct tallyd_shard *
tallyd_job_shard(struct tallyd_job *j, unsigned int dp)
{
	for (unsigned int k = 0; k < j->nshards; k++)
		if (j->sh[k].dp == dp)
			return &j->sh[k];
	return NULL;
}

/* A shard's counters as an object of tallyd_ctr_names. */
static json_t *
ctr_json(const struct tallyd_ctr *c)
{
	const uint64_t *v = (const uint64_t *)(const void *)c;
	json_t *o = json_object();

	for (size_t i = 0; o != NULL && i < TALLYD_NCTR; i++)
		json_object_set_new(o, tallyd_ctr_names[i],
			json_integer((json_int_t)v[i]));
	return o;
}

json_t *
tallyd_shards_json(const struct tallyd *d, const struct tallyd_job *j,
	bool show)
{
	json_t *a = json_array();

	for (unsigned int k = 0; a != NULL && k < j->nshards; k++) {
		const struct tallyd_shard *sh = &j->sh[k];
		const struct tallyd_dp *dp = &d->dps[sh->dp];

		if (show)
			json_array_append_new(a, json_pack("{s:s, s:b, s:b, "
				"s:o}", "dataplane", dp->name, "up",
				tallyd_dpc_up(dp->dpc), "in_dp", sh->in_dp,
				"counters", ctr_json(&sh->last)));
		else
			json_array_append_new(a, json_pack("{s:s, s:o}",
				"dataplane", dp->name, "counters_last",
				ctr_json(&sh->last)));
	}
	return a;
}

/* The counters of a state file's object into c (missing ones are 0). */
static void
ctr_load(json_t *o, struct tallyd_ctr *c)
{
	uint64_t *v = (uint64_t *)(void *)c;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < TALLYD_NCTR; i++) {
		json_t *x = json_object_get(o, tallyd_ctr_names[i]);

		if (json_is_integer(x) && json_integer_value(x) > 0)
			v[i] = (uint64_t)json_integer_value(x);
	}
}

int
tallyd_shards_load(struct tallyd *d, struct tallyd_job *j, json_t *a,
	char *why, size_t wlen)
{
	json_t *x;
	size_t k;

	j->nshards = 1;
	j->sh[0].dp = 0;
	if (a == NULL)
		return 0;
	if (!json_is_array(a) || json_array_size(a) < 1 ||
			json_array_size(a) > TALLYD_MAX_SHARDS) {
		snprintf(why, wlen, "job '%s': 'shards' must list 1..%d "
			"dataplanes", j->name, TALLYD_MAX_SHARDS);
		return -EINVAL;
	}
	json_array_foreach(a, k, x) {
		const char *n = json_string_value(json_object_get(x,
			"dataplane"));
		int dp = n != NULL ? tallyd_dp_find(d, n) : -1;

		if (dp < 0) {
			snprintf(why, wlen, "job '%s' spans dataplane '%s', "
				"which the configuration does not have (a "
				"'dataplane' line, or dp_name)", j->name,
				n != NULL ? n : "?");
			return -EINVAL;
		}
		j->sh[k].dp = (unsigned int)dp;
		ctr_load(json_object_get(x, "counters_last"), &j->sh[k].last);
	}
	j->nshards = (unsigned int)k;
	return 0;
}
