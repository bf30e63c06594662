/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK telemetry commands (dpdk-telemetry.py, or the telemetry socket):
 *   /tally/stats          counters summed over worker lcores
 *   /tally/stats,N        counters of worker N
 *   /tally/jobs[,AFTER]   a page of jobs, by ascending id above AFTER (0):
 *                         each one's world, window, max_elems, narrow,
 *                         mem_bytes and counters (summed over lcores),
 *                         keyed by id; "more" is 1 when jobs above the
 *                         page's last id ("next") remain
 *   /tally/job,ID         one job, the same fields
 * Callbacks run on DPDK's telemetry thread, beside the lcores. Telemetry
 * nests one level only, so a job's counters sit beside its settings, and
 * a reply holds 16 KiB: a page is JOBS_PAGE jobs, which fit it with every
 * counter at its widest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_telemetry.h>

#include "dp.h"

#define JOBS_PAGE 32

static struct tally_dp *the_dp;

/* A non-negative integer in 0..max from params into *v; -EINVAL if not. */
static int
param(const char *params, long max, long *v)
{
	char *end;

	if (params == NULL || *params == '\0')
		return -EINVAL;
	*v = strtol(params, &end, 10);
	if (*end != '\0' || *v < 0 || *v > max)
		return -EINVAL;
	return 0;
}

static int
tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tally_dp_counter c[128];
	unsigned int n;
	int index = -1;

	(void)cmd;
	if (params != NULL && *params != '\0') {
		long v;

		if (param(params, the_dp->nworkers - 1, &v) != 0)
			return -EINVAL;
		index = (int)v;
	}
	n = tally_dp_counters(the_dp, index, c, 128);
	rte_tel_data_start_dict(d);
	for (unsigned int i = 0; i < n && i < 128; i++)
		rte_tel_data_add_dict_u64(d, c[i].name, c[i].value);
	return 0;
}

/* Fills dict o with job's settings and counters. Under the_dp->lock. */
static void
job_dict(struct rte_tel_data *o, const struct tally_job *job)
{
	const struct tally_job_conf *c = &job->conf;
	struct tally_dp_counter ctr[16];
	unsigned int n;

	rte_tel_data_start_dict(o);
	rte_tel_data_add_dict_u64(o, "world", c->world);
	rte_tel_data_add_dict_u64(o, "window", c->window);
	rte_tel_data_add_dict_u64(o, "max_elems", c->max_elems);
	rte_tel_data_add_dict_u64(o, "narrow", c->narrow);
	rte_tel_data_add_dict_u64(o, "mem_bytes", tally_dp_jobx(job)->mem);
	n = tally_dp_job_counters(the_dp, job, ctr, 16);
	for (unsigned int i = 0; i < n && i < 16; i++)
		rte_tel_data_add_dict_u64(o, ctr[i].name, ctr[i].value);
}

/*
 * Adds job to d as a container under its id. A container d does not
 * take is freed here (d owns those it took).
 */
static int
add_job(struct rte_tel_data *d, const struct tally_job *job)
{
	struct rte_tel_data *o = rte_tel_data_alloc();
	char key[8];

	if (o == NULL)
		return -ENOMEM;
	job_dict(o, job);
	snprintf(key, sizeof(key), "%u", job->conf.id);
	if (rte_tel_data_add_dict_container(d, key, o, 0) != 0) {
		rte_tel_data_free(o);
		return -ENOSPC;
	}
	return 0;
}

static int
tel_jobs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned int i, n = 0;
	long after = 0;
	uint16_t last = 0;

	(void)cmd;
	if (params != NULL && *params != '\0' &&
			param(params, UINT16_MAX, &after) != 0)
		return -EINVAL;
	rte_tel_data_start_dict(d);
	pthread_mutex_lock(&the_dp->lock);
	for (i = tally_dp_job_after(the_dp, (uint32_t)after);
			i < the_dp->njobs && n < JOBS_PAGE; i++, n++) {
		if (add_job(d, the_dp->jobs[i]) != 0)
			break;
		last = the_dp->jobs[i]->conf.id;
	}
	rte_tel_data_add_dict_u64(d, "more", i < the_dp->njobs);
	rte_tel_data_add_dict_u64(d, "next", n > 0 ? last : (uint64_t)after);
	pthread_mutex_unlock(&the_dp->lock);
	return 0;
}

static int
tel_job(const char *cmd, const char *params, struct rte_tel_data *d)
{
	unsigned int i;
	int ret = -ENOENT;
	long id;

	(void)cmd;
	if (param(params, UINT16_MAX, &id) != 0 || id == 0)
		return -EINVAL;
	pthread_mutex_lock(&the_dp->lock);
	i = tally_dp_job_after(the_dp, (uint32_t)id - 1);
	if (i < the_dp->njobs && the_dp->jobs[i]->conf.id == id) {
		job_dict(d, the_dp->jobs[i]);
		ret = 0;
	}
	pthread_mutex_unlock(&the_dp->lock);
	return ret;
}

/* DPDK takes help texts of at most 63 characters. */
int
tally_dp_telemetry_init(struct tally_dp *dp)
{
	the_dp = dp;
	if (rte_telemetry_register_cmd("/tally/stats", tel_stats,
			"tally-dp's counters. Parameter: worker index (optional)")
			!= 0 ||
			rte_telemetry_register_cmd("/tally/jobs", tel_jobs,
			"A page of jobs. Parameter: id to start after (optional)")
			!= 0 ||
			rte_telemetry_register_cmd("/tally/job", tel_job,
			"One job's settings and counters. Parameter: job id")
			!= 0)
		return -EINVAL;
	return 0;
}
