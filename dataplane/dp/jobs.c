/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control side of the job table. Jobs are kept in an array sorted by
 * id under a mutex (the control thread and the telemetry thread read
 * it; listings page through it by id); every
 * change builds a new immutable table, swaps it in by pointer, waits for
 * every worker lcore to pass a quiescent state (RCU QSBR), and only then
 * frees the old table and any removed job. Lcores never lock.
 *
 * Each job gets tally-dp's part (struct tally_dp_jobx, in job->ext: a
 * row of counters per worker lcore, and the headers of its result frames,
 * one template a member), allocated with it and freed with it, after the
 * grace period. A job changed is a job removed and added
 * again: its templates are never rewritten while an lcore may read them.
 *
 * Admission: a job must fit tally-dp's memory (its bytes as
 * <tally/limits.h> counts them against --max-job-mem, and with the other
 * jobs against --mem-budget) and its packets the port (the IPv4 MTU and
 * the mbufs' data room), or it is refused with a sentence before anything
 * is allocated: a job tally-dp cannot serve is never half-added.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_malloc.h>

#include <tally/limits.h>

#include "dp.h"

_Static_assert(sizeof(struct tally_set) == TALLY_JOB_SET_BYTES,
	"<tally/limits.h> charges a set's state at its real size");
_Static_assert(sizeof(struct tally_job) + sizeof(struct tally_dp_jobx) +
	RTE_CACHE_LINE_SIZE <= TALLY_JOB_FIXED_BYTES,
	"<tally/limits.h> charges a job's fixed part at least its real size");

int
tally_dp_jobs_init(struct tally_dp *dp)
{
	size_t sz = rte_rcu_qsbr_get_memsize(TALLY_DP_MAX_WORKERS);
	struct tally_jobtab *tab;

	dp->jobs = calloc(dp->max_jobs > 0 ? dp->max_jobs : 1,
		sizeof(*dp->jobs));
	dp->qsbr = rte_zmalloc("tally_qsbr", sz, RTE_CACHE_LINE_SIZE);
	tab = tally_jobtab_create(NULL, 0);
	if (dp->jobs == NULL || dp->qsbr == NULL || tab == NULL ||
			rte_rcu_qsbr_init(dp->qsbr, TALLY_DP_MAX_WORKERS) != 0) {
		tally_jobtab_destroy(tab);
		rte_free(dp->qsbr);
		free(dp->jobs);
		dp->qsbr = NULL;
		dp->jobs = NULL;
		return -ENOMEM;
	}
	dp->njobs = 0;
	dp->mem_used = 0;
	pthread_mutex_init(&dp->lock, NULL);
	atomic_store(&dp->tab, tab);
	return 0;
}

/* Builds and swaps in a table of the listed jobs. Called under lock. */
static int
publish(struct tally_dp *dp)
{
	struct tally_jobtab *tab, *old;

	tab = tally_jobtab_create(dp->jobs, dp->njobs);
	if (tab == NULL)
		return -errno;
	old = atomic_exchange_explicit(&dp->tab, tab, memory_order_acq_rel);
	rte_rcu_qsbr_synchronize(dp->qsbr, RTE_QSBR_THRID_INVALID);
	tally_jobtab_destroy(old);
	return 0;
}

unsigned int
tally_dp_job_after(const struct tally_dp *dp, uint32_t after)
{
	unsigned int lo = 0, hi = dp->njobs;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (dp->jobs[mid]->conf.id <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The index of job id in dp->jobs, or -1. */
static int
find(const struct tally_dp *dp, uint16_t id)
{
	unsigned int i = tally_dp_job_after(dp, id);

	return i > 0 && dp->jobs[i - 1]->conf.id == id ? (int)i - 1 : -1;
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
	for (unsigned int r = 0; r < conf->world; r++) {
		if (conf->roce)
			tally_roce_tmpl_init(&x->rmember[r], &dp->self,
				conf->members[r].ip, conf->qpn[r], conf->qkey);
		else
			tally_net_tmpl_init(&x->member[r], &dp->self,
				&conf->members[r]);
	}
	if (conf->group.ip != 0) {
		const uint8_t *g = (const uint8_t *)&conf->group.ip;

		if (conf->roce)
			tally_roce_tmpl_init(&x->rgroup, &dp->self,
				conf->group.ip, TALLY_ROCE_QPN_MCAST,
				conf->qkey);
		else
			tally_net_tmpl_init(&x->group, &dp->self,
				&conf->group);
		x->group_mac = (struct rte_ether_addr){ .addr_bytes = {
			0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3] } };
	}
}

/*
 * A job of conf with its tally-dp part (counter rows, result headers);
 * NULL with errno set.
 */
static struct tally_job *
job_new(const struct tally_dp *dp, const struct tally_job_conf *conf,
	unsigned int encs)
{
	struct tally_job_conf c = *conf;
	struct tally_job *job;
	struct tally_dp_jobx *x;

	c.nports = dp->nworkers;	/* slot s on lcore s % nworkers */
	job = tally_job_create(&c);
	if (job == NULL)
		return NULL;
	x = rte_zmalloc("tally_dp_jobx", sizeof(*x), RTE_CACHE_LINE_SIZE);
	if (x == NULL) {
		tally_job_destroy(job);
		errno = ENOMEM;
		return NULL;
	}
	jobx_init(dp, x, &job->conf);
	x->encs = encs;
	x->mem = tally_job_mem(conf->window, conf->max_elems, conf->world,
		conf->auth);
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

static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Writes the sentence into why and returns -err. */
static int
fail(int err, char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (wlen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return -err;
}

/* Bytes as MiB with one decimal, for sentences. */
static double
mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/*
 * The bytes of a result frame's payload (tally header included) that an
 * mbuf of the pool can carry: its data room less the headroom and the
 * Ethernet/IPv4/UDP headers.
 */
static size_t
mbuf_udp_room(const struct tally_dp *dp)
{
	size_t room;

	if (dp->pool == NULL)
		return SIZE_MAX;
	room = rte_pktmbuf_data_room_size(dp->pool);
	if (room < RTE_PKTMBUF_HEADROOM + TALLY_NET_HDRS_LEN)
		return 0;
	return room - RTE_PKTMBUF_HEADROOM - TALLY_NET_HDRS_LEN;
}

/*
 * The bytes of a RoCEv2 message (tally header included) that tally-dp
 * takes and sends: its path MTU, and what an mbuf holds beside the
 * headers, the pad and the ICRC.
 */
static size_t
roce_room(const struct tally_dp *dp)
{
	size_t room = mbuf_udp_room(dp), pmtu;
	size_t extra = TALLY_ROCE_HDRS_LEN - TALLY_NET_HDRS_LEN + 3 +
		TALLY_ROCE_ICRC_LEN;

	if (dp->self.qpn_base == 0)
		return 0;
	pmtu = tally_roce_pmtu(dp->mtu != 0 ? dp->mtu : 1500);
	room = room > extra ? room - extra : 0;
	return pmtu < room ? pmtu : room;
}

unsigned int
tally_dp_roce_max_elems(const struct tally_dp *dp, unsigned int encs,
	int narrow)
{
	size_t room = roce_room(dp);
	unsigned int best = tally_job_max_elems((unsigned int)room +
		TALLY_IPV4_UDP_LEN, encs, narrow);

	return room == 0 ? 0 : best;
}

/* tally_dp_job_check() for a RoCEv2 job: its messages, one a packet. */
static int
roce_check(const struct tally_dp *dp, const struct tally_job_conf *c,
	unsigned int encs, char *why, size_t wlen)
{
	unsigned int worst = 0;
	size_t msg = tally_job_udp_len(encs, c->narrow, c->max_elems, &worst);
	size_t room = roce_room(dp);

	if (room == 0)
		return fail(EPROTONOSUPPORT, why, wlen, "job %u has RoCEv2 "
			"members, and tally-dp runs without RoCEv2 "
			"(--roce-qpn-base 0)", c->id);
	if (msg <= room)
		return 0;
	return fail(EMSGSIZE, why, wlen, "job %u: %u elements of %s make "
		"%zu-byte RoCEv2 messages (%s results), over the path MTU of "
		"%zu bytes (a UD message is one packet; port MTU %u); at most "
		"max_elems %u for these encodings", c->id, c->max_elems,
		tally_enc_name(worst), msg, c->narrow ? "narrow" : "widened",
		room, dp->mtu, tally_dp_roce_max_elems(dp, encs, c->narrow));
}

int
tally_dp_job_check(const struct tally_dp *dp,
	const struct tally_job_conf *c, unsigned int encs, char *why,
	size_t wlen)
{
	uint64_t mem = tally_job_mem(c->window, c->max_elems, c->world,
		c->auth);
	size_t udp, room = mbuf_udp_room(dp);
	unsigned int worst = 0, best;

	if (dp->max_job_mem != 0 && mem > dp->max_job_mem)
		return fail(E2BIG, why, wlen, "job %u needs %.1f MiB (window "
			"%u x max_elems %u); tally-dp takes at most %.1f MiB a "
			"job (--max-job-mem)", c->id, mib(mem), c->window,
			c->max_elems, mib(dp->max_job_mem));
	if (c->auth)	/* every packet carries a tag */
		encs |= TALLY_ENC_AUTH;
	if (c->up.ip != 0)	/* a leaf's rounds go upstream in 32 bits */
		encs |= TALLY_ENC_BIT(TALLY_ENC_I32);
	if (c->roce)
		return roce_check(dp, c, encs, why, wlen);
	udp = tally_job_udp_len(encs, c->narrow, c->max_elems, &worst);
	if ((dp->mtu == 0 || TALLY_IPV4_UDP_LEN + udp <= dp->mtu) &&
			udp <= room)
		return 0;
	best = dp->mtu != 0 ? tally_job_max_elems(dp->mtu, encs, c->narrow) :
		TALLY_MAX_ELEMS;
	while (best > 0 && tally_job_udp_len(encs, c->narrow, best, NULL) >
			room)
		best--;
	return fail(EMSGSIZE, why, wlen, "job %u: %u elements of %s make "
		"%zu-byte IPv4 packets (%s results), over the port's MTU of %u "
		"bytes; at most max_elems %u for these encodings", c->id,
		c->max_elems, tally_enc_name(worst), TALLY_IPV4_UDP_LEN + udp,
		c->narrow ? "narrow" : "widened", dp->mtu, best);
}

/* Inserts job at its place by id. Called under lock, with room. */
static void
insert(struct tally_dp *dp, struct tally_job *job)
{
	unsigned int i = tally_dp_job_after(dp, job->conf.id);

	memmove(&dp->jobs[i + 1], &dp->jobs[i],
		(dp->njobs - i) * sizeof(dp->jobs[0]));
	dp->jobs[i] = job;
	dp->njobs++;
	dp->mem_used += tally_dp_jobx(job)->mem;
}

/* Removes the job at index i. Called under lock. */
static struct tally_job *
take_out(struct tally_dp *dp, unsigned int i)
{
	struct tally_job *job = dp->jobs[i];

	memmove(&dp->jobs[i], &dp->jobs[i + 1],
		(dp->njobs - i - 1) * sizeof(dp->jobs[0]));
	dp->njobs--;
	dp->mem_used -= tally_dp_jobx(job)->mem;
	return job;
}

/* The admission checks that depend on the other jobs. Under lock. */
static int
room_for(const struct tally_dp *dp, const struct tally_job_conf *c,
	char *why, size_t wlen)
{
	uint64_t mem = tally_job_mem(c->window, c->max_elems, c->world,
		c->auth);

	if (find(dp, c->id) >= 0)
		return fail(EEXIST, why, wlen, "job %u exists", c->id);
	if (dp->njobs >= dp->max_jobs)
		return fail(ENOSPC, why, wlen, "%u jobs is the maximum "
			"(--max-jobs)", dp->max_jobs);
	if (dp->mem_budget != 0 && mem > dp->mem_budget - dp->mem_used)
		return fail(ENOMEM, why, wlen, "job %u needs %.1f MiB; %.1f of "
			"%.1f MiB are taken by %u job(s) (--mem-budget)",
			c->id, mib(mem), mib(dp->mem_used),
			mib(dp->mem_budget), dp->njobs);
	return 0;
}

int
tally_dp_job_add(struct tally_dp *dp, const struct tally_job_conf *conf,
	unsigned int encs, char *why, size_t wlen)
{
	struct tally_job *job;
	int ret;

	ret = tally_dp_job_check(dp, conf, encs, why, wlen);
	if (ret != 0)
		return ret;
	pthread_mutex_lock(&dp->lock);
	ret = room_for(dp, conf, why, wlen);
	if (ret != 0)
		goto out;
	job = job_new(dp, conf, encs);
	if (job == NULL) {
		ret = fail(errno, why, wlen, "cannot add job %u: %s", conf->id,
			strerror(errno));
		goto out;
	}
	insert(dp, job);
	ret = publish(dp);
	if (ret != 0) {
		take_out(dp, (unsigned int)find(dp, conf->id));
		job_free(job);
		fail(-ret, why, wlen, "cannot add job %u: %s", conf->id,
			strerror(-ret));
	}
out:
	pthread_mutex_unlock(&dp->lock);
	return ret;
}

int
tally_dp_job_del(struct tally_dp *dp, uint16_t id, struct tally_job_ctr *final)
{
	struct tally_job *job;
	int i, ret;

	pthread_mutex_lock(&dp->lock);
	i = find(dp, id);
	if (i < 0) {
		ret = -ENOENT;
		goto out;
	}
	job = take_out(dp, (unsigned int)i);
	ret = publish(dp);
	if (ret != 0) {
		/* The old table still names it: keep it. */
		insert(dp, job);
		goto out;
	}
	/* After the grace period: no lcore counts into its rows now. */
	if (final != NULL)
		tally_dp_job_sum(dp, job, final);
	job_free(job);
out:
	pthread_mutex_unlock(&dp->lock);
	return ret;
}

/* After the lcores stopped: frees every job and the table. */
void
tally_dp_jobs_fini(struct tally_dp *dp)
{
	if (dp->qsbr == NULL)
		return;
	for (unsigned int i = 0; i < dp->njobs; i++)
		job_free(dp->jobs[i]);
	free(dp->jobs);
	dp->jobs = NULL;
	dp->njobs = 0;
	dp->mem_used = 0;
	tally_jobtab_destroy(atomic_exchange(&dp->tab, NULL));
	rte_free(dp->qsbr);
	dp->qsbr = NULL;
	pthread_mutex_destroy(&dp->lock);
}
