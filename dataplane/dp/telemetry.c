/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK telemetry commands (dpdk-telemetry.py, or the telemetry socket):
 *   /tally/stats          counters summed over worker lcores
 *   /tally/stats,N        counters of worker N
 *   /tally/jobs           every job: world, window, max_elems, narrow and
 *                         its counters (summed over lcores)
 * Callbacks run on DPDK's telemetry thread, beside the lcores. Telemetry
 * nests one level only, so a job's counters sit beside its settings.
 */
#include <stdio.h>
#include <stdlib.h>

#include <rte_telemetry.h>

#include "dp.h"

static struct tally_dp *the_dp;

static int
tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tally_dp_counter c[128];
	unsigned int n;
	int index = -1;

	(void)cmd;
	if (params != NULL && *params != '\0') {
		char *end;
		long v = strtol(params, &end, 10);

		if (*end != '\0' || v < 0 || v >= the_dp->nworkers)
			return -EINVAL;
		index = (int)v;
	}
	n = tally_dp_counters(the_dp, index, c, 128);
	rte_tel_data_start_dict(d);
	for (unsigned int i = 0; i < n && i < 128; i++)
		rte_tel_data_add_dict_u64(d, c[i].name, c[i].value);
	return 0;
}

static int
tel_jobs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tally_dp_job *j;

	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	pthread_mutex_lock(&the_dp->lock);
	for (j = the_dp->jobs; j != NULL; j = j->next) {
		const struct tally_job_conf *c = &j->job->conf;
		struct rte_tel_data *o = rte_tel_data_alloc();
		struct tally_dp_counter ctr[16];
		unsigned int n;
		char key[16];

		if (o == NULL)
			break;
		rte_tel_data_start_dict(o);
		rte_tel_data_add_dict_u64(o, "world", c->world);
		rte_tel_data_add_dict_u64(o, "window", c->window);
		rte_tel_data_add_dict_u64(o, "max_elems", c->max_elems);
		rte_tel_data_add_dict_u64(o, "narrow", c->narrow);
		n = tally_dp_job_counters(the_dp, j->job, ctr, 16);
		for (unsigned int i = 0; i < n && i < 16; i++)
			rte_tel_data_add_dict_u64(o, ctr[i].name,
				ctr[i].value);
		snprintf(key, sizeof(key), "%u", c->id);
		rte_tel_data_add_dict_container(d, key, o, 0);
	}
	pthread_mutex_unlock(&the_dp->lock);
	return 0;
}

int
tally_dp_telemetry_init(struct tally_dp *dp)
{
	the_dp = dp;
	if (rte_telemetry_register_cmd("/tally/stats", tel_stats,
			"Counters of tally-dp, summed or of one worker. "
			"Parameters: int worker index (optional)") != 0 ||
			rte_telemetry_register_cmd("/tally/jobs", tel_jobs,
			"The jobs tally-dp aggregates. Takes no parameters") != 0)
		return -EINVAL;
	return 0;
}
