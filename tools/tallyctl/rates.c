/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * top's frames: per job and tally-dp rates from the difference of two
 * samples' counters over the time between them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rates.h"

/* o's counter k as an unsigned count; false if it is not one. */
static bool
count(const json_t *o, const char *k, uint64_t *v)
{
	const json_t *x = json_object_get(o, k);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return false;
	*v = (uint64_t)json_integer_value(x);
	return true;
}

/* (cur - prev) / dt / scale, or null. */
static json_t *
rate(const json_t *prev, const json_t *cur, const char *k, double dt,
	double scale)
{
	uint64_t a, b;

	if (prev == NULL || dt <= 0 || !count(prev, k, &a) ||
			!count(cur, k, &b) || b < a)
		return json_null();
	return json_real((double)(b - a) / dt / scale);
}

/* The job of list's jobs named as job and with its id; NULL if none. */
static const json_t *
find_job(const json_t *list, const json_t *job)
{
	const json_t *j;
	size_t i;

	json_array_foreach(json_object_get(list, "jobs"), i, j)
		if (json_equal(json_object_get(j, "name"),
				json_object_get(job, "name")) &&
				json_equal(json_object_get(j, "id"),
				json_object_get(job, "id")))
			return j;
	return NULL;
}

static json_t *
copy_key(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return v != NULL ? json_incref(v) : json_null();
}

static json_t *
job_frame(const json_t *prev_list, const json_t *job, double dt)
{
	const json_t *c = json_object_get(job, "counters");
	const json_t *p = NULL;
	const json_t *pj;

	if (prev_list != NULL && (pj = find_job(prev_list, job)) != NULL)
		p = json_object_get(pj, "counters");
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
		"s:o, s:o, s:o, s:o}",
		"name", copy_key(job, "name"), "id", copy_key(job, "id"),
		"state", copy_key(job, "state"),
		"world", copy_key(job, "world"),
		"joined", copy_key(job, "joined"),
		"rounds", copy_key(c, "rounds"),
		"bytes_in", copy_key(c, "bytes_in"),
		"bytes_out", copy_key(c, "bytes_out"),
		"drops", copy_key(c, "drops"),
		"rounds_per_s", rate(p, c, "rounds", dt, 1),
		"mb_in_per_s", rate(p, c, "bytes_in", dt, 1e6),
		"mb_out_per_s", rate(p, c, "bytes_out", dt, 1e6),
		"drops_per_s", rate(p, c, "drops", dt, 1));
}

/* A copy of total with "drop_*" summed as "drops", or NULL. */
static json_t *
dp_sample(const json_t *stats)
{
	const json_t *total = json_object_get(json_object_get(stats, "dp"),
		"total");
	json_t *s, *v;
	uint64_t drops = 0, x;
	const char *k;

	if (!json_is_object(total))
		return NULL;
	json_object_foreach((json_t *)total, k, v)
		if (strncmp(k, "drop_", 5) == 0 && count(total, k, &x))
			drops += x;
	s = json_copy((json_t *)total);
	if (s != NULL)
		json_object_set_new(s, "drops", json_integer(
			(json_int_t)drops));
	return s;
}

static json_t *
dp_frame(const json_t *prev_stats, const json_t *stats, double dt)
{
	json_t *c = dp_sample(stats), *p, *o;

	if (c == NULL)
		return json_null();
	p = prev_stats != NULL ? dp_sample(prev_stats) : NULL;
	o = json_pack("{s:o, s:o, s:o, s:o}",
		"rx_per_s", rate(p, c, "rx", dt, 1),
		"tx_per_s", rate(p, c, "tx", dt, 1),
		"rounds_per_s", rate(p, c, "completed", dt, 1),
		"drops_per_s", rate(p, c, "drops", dt, 1));
	json_decref(p);
	json_decref(c);
	return o;
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
	json_int_t x = id_of(*(const json_t *const *)a);
	json_int_t y = id_of(*(const json_t *const *)b);

	return x < y ? -1 : x > y;
}

/* The jobs of list by id, each as job_frame() has it. */
static json_t *
jobs_frame(const json_t *prev_list, const json_t *list, double dt)
{
	const json_t *jobs = json_object_get(list, "jobs");
	size_t n = json_array_size(jobs);
	const json_t **v = calloc(n + 1, sizeof(*v));
	json_t *a = json_array();

	if (v == NULL || a == NULL) {
		free(v);
		json_decref(a);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(jobs, i);
	qsort(v, n, sizeof(*v), by_id);
	for (size_t i = 0; i < n; i++) {
		if (json_array_append_new(a, job_frame(prev_list, v[i],
				dt)) != 0) {
			json_decref(a);
			a = NULL;
			errno = ENOMEM;
			break;
		}
	}
	free(v);
	return a;
}

json_t *
tallyctl_top_frame(const json_t *prev_list, const json_t *prev_stats,
	const json_t *list, const json_t *stats, double dt, time_t now)
{
	const json_t *td = json_object_get(stats, "tallyd");
	json_t *jobs, *f;

	if (!json_is_array(json_object_get(list, "jobs"))) {
		errno = EPROTO;
		return NULL;
	}
	if (prev_list == NULL || prev_stats == NULL)
		prev_list = prev_stats = NULL;
	jobs = jobs_frame(prev_list, list, dt);
	if (jobs == NULL)
		return NULL;
	/* interval_s to the millisecond: microseconds are noise here. */
	f = json_pack("{s:I, s:f, s:o, s:o, s:o, s:o}",
		"time", (json_int_t)now, "interval_s",
		dt > 0 ? (double)(int64_t)(dt * 1000 + 0.5) / 1000 : 0.0,
		"uptime_s", copy_key(td, "uptime_s"),
		"dp_up", copy_key(td, "dp_up"),
		"jobs", jobs, "dp", dp_frame(prev_stats, stats, dt));
	if (f == NULL)
		errno = ENOMEM;
	return f;
}
