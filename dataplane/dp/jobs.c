/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control side of the job table. Jobs are kept in a list under a
 * mutex (the control thread and the telemetry thread read it); every
 * change builds a new immutable table, swaps it in by pointer, waits for
 * every worker lcore to pass a quiescent state (RCU QSBR), and only then
 * frees the old table and any removed job. Lcores never lock.
 *
 * Each job gets tally-dp's part (struct tally_dp_jobx, in job->ext: a
 * row of counters per worker lcore, and the headers of its result frames,
 * one template a member), allocated with it and freed with it, after the
 * grace period. A job changed is a job removed and added
 * again: its templates are never rewritten while an lcore may read them.
 */
#include <errno.h>
#include <stdlib.h>

#include <rte_malloc.h>

#include "dp.h"

int
tally_dp_jobs_init(struct tally_dp *dp)
{
	size_t sz = rte_rcu_qsbr_get_memsize(TALLY_DP_MAX_WORKERS);
	struct tally_jobtab *tab;

	dp->qsbr = rte_zmalloc("tally_qsbr", sz, RTE_CACHE_LINE_SIZE);
	if (dp->qsbr == NULL)
		return -ENOMEM;
	if (rte_rcu_qsbr_init(dp->qsbr, TALLY_DP_MAX_WORKERS) != 0) {
		rte_free(dp->qsbr);
		dp->qsbr = NULL;
		return -EINVAL;
	}
	tab = tally_jobtab_create(NULL, 0);
	if (tab == NULL) {
		rte_free(dp->qsbr);
		dp->qsbr = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&dp->lock, NULL);
	atomic_store(&dp->tab, tab);
	return 0;
}

/* Builds and swaps in a table of the listed jobs. Called under lock. */
static int
publish(struct tally_dp *dp)
{
	struct tally_job *arr[dp->njobs + 1];
	struct tally_jobtab *tab, *old;
	struct tally_dp_job *j;
	unsigned int n = 0;

	for (j = dp->jobs; j != NULL; j = j->next)
		arr[n++] = j->job;
	tab = tally_jobtab_create(arr, n);
	if (tab == NULL)
		return -errno;
	old = atomic_exchange_explicit(&dp->tab, tab, memory_order_acq_rel);
	rte_rcu_qsbr_synchronize(dp->qsbr, RTE_QSBR_THRID_INVALID);
	tally_jobtab_destroy(old);
	return 0;
}

static struct tally_dp_job **
find(struct tally_dp *dp, uint16_t id)
{
	struct tally_dp_job **p;

	for (p = &dp->jobs; *p != NULL; p = &(*p)->next)
		if ((*p)->job->conf.id == id)
			return p;
	return NULL;
}

/*
 * The headers of the job's results: one template a member, and one for
 * its multicast group with the group's MAC (01:00:5e and the group's low
 * 23 bits). The lcores add the destination MAC and the lengths.
 */
static void
jobx_init(const struct tally_dp *dp, struct tally_dp_jobx *x,
	const struct tally_job_conf *conf)
{
	for (unsigned int r = 0; r < conf->world; r++)
		tally_net_tmpl_init(&x->member[r], &dp->self,
			&conf->members[r]);
	if (conf->group.ip != 0) {
		const uint8_t *g = (const uint8_t *)&conf->group.ip;

		tally_net_tmpl_init(&x->group, &dp->self, &conf->group);
		x->group_mac = (struct rte_ether_addr){ .addr_bytes = {
			0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3] } };
	}
}

/*
 * A job of conf with its tally-dp part (counter rows, result headers);
 * NULL with errno set.
 */
static struct tally_job *
job_new(const struct tally_dp *dp, const struct tally_job_conf *conf)
{
	struct tally_job *job = tally_job_create(conf);
	struct tally_dp_jobx *x;

	if (job == NULL)
		return NULL;
	x = rte_zmalloc("tally_dp_jobx", sizeof(*x), RTE_CACHE_LINE_SIZE);
	if (x == NULL) {
		tally_job_destroy(job);
		errno = ENOMEM;
		return NULL;
	}
	jobx_init(dp, x, &job->conf);
	job->ext = x;
	return job;
}

/* Frees a job and its tally-dp part; no lcore may still see it. */
static void
job_free(struct tally_job *job)
{
	if (job == NULL)
		return;
	rte_free(tally_dp_jobx(job));
	tally_job_destroy(job);
}

int
tally_dp_job_add(struct tally_dp *dp, const struct tally_job_conf *conf)
{
	struct tally_dp_job *j;
	int ret;

	pthread_mutex_lock(&dp->lock);
	if (find(dp, conf->id) != NULL) {
		ret = -EEXIST;
		goto out;
	}
	if (dp->njobs >= dp->max_jobs) {
		ret = -ENOSPC;
		goto out;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		ret = -ENOMEM;
		goto out;
	}
	j->job = job_new(dp, conf);
	if (j->job == NULL) {
		ret = -errno;
		free(j);
		goto out;
	}
	j->next = dp->jobs;
	dp->jobs = j;
	dp->njobs++;
	ret = publish(dp);
	if (ret != 0) {
		dp->jobs = j->next;
		dp->njobs--;
		job_free(j->job);
		free(j);
	}
out:
	pthread_mutex_unlock(&dp->lock);
	return ret;
}

int
tally_dp_job_del(struct tally_dp *dp, uint16_t id)
{
	struct tally_dp_job **p, *j;
	int ret;

	pthread_mutex_lock(&dp->lock);
	p = find(dp, id);
	if (p == NULL) {
		ret = -ENOENT;
		goto out;
	}
	j = *p;
	*p = j->next;
	dp->njobs--;
	ret = publish(dp);
	if (ret != 0) {
		/* The old table still names it: keep it. */
		j->next = dp->jobs;
		dp->jobs = j;
		dp->njobs++;
		goto out;
	}
	job_free(j->job);
	free(j);
out:
	pthread_mutex_unlock(&dp->lock);
	return ret;
}

/* After the lcores stopped: frees every job and the table. */
void
tally_dp_jobs_fini(struct tally_dp *dp)
{
	struct tally_dp_job *j, *next;

	if (dp->qsbr == NULL)
		return;
	for (j = dp->jobs; j != NULL; j = next) {
		next = j->next;
		job_free(j->job);
		free(j);
	}
	dp->jobs = NULL;
	dp->njobs = 0;
	tally_jobtab_destroy(atomic_exchange(&dp->tab, NULL));
	rte_free(dp->qsbr);
	dp->qsbr = NULL;
	pthread_mutex_destroy(&dp->lock);
}
