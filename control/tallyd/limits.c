/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Jobs against tally-dp's limits (declared in dplimits.h, a name that
 * does not hide <limits.h>). The numbers are tally-dp's own: its ping
 * reports them, and <tally/limits.h> has the formulas tally-dp's job_add
 * applies, so a job tallyd accepts is one tally-dp takes (unless
 * tally-dp restarted with smaller limits since, which the check at join
 * catches).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include <tally/codec.h>
#include <tally/limits.h>

#include "tallyd.h"

static uint64_t
get_u64(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return v > 0 ? (uint64_t)v : 0;
}

void
tallyd_limits_from_ping(struct tallyd_dp_limits *l, json_t *ping)
{
	uint64_t mtu = get_u64(ping, "mtu");

	l->mtu = mtu <= 65535 ? (unsigned int)mtu : 0;
	l->max_jobs = (unsigned int)get_u64(ping, "max_jobs");
	l->mem_budget = get_u64(ping, "mem_budget");
	l->max_job_mem = get_u64(ping, "max_job_mem");
	l->roce_pmtu = (unsigned int)get_u64(json_object_get(ping, "roce"),
		"pmtu");
	if (l->roce_pmtu > 65535)
		l->roce_pmtu = 0;
	l->known = true;
}

unsigned int
tallyd_limits_encs(const struct tallyd_job *j)
{
	struct tally_codec c;

	if (j->codec[0] == '\0')
		return tally_codec_encs(TALLY_CODEC_FIXP);
	if (tally_codec_parse(j->codec, &c, NULL, 0) != 0)
		return TALLY_ENC_ALL;
	return tally_codec_encs(c.kind);
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

static double
mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/*
 * Memory of tallyd's jobs but skip at dataplane dp (those with a shard
 * there: each shard holds the whole window), as tally-dp will hold them.
 */
static uint64_t
jobs_mem(const struct tallyd *d, const struct tallyd_job *skip,
	unsigned int dp)
{
	uint64_t sum = 0;

	for (struct tallyd_job *o = d->jobs; o != NULL; o = o->next)
		if (o != skip && tallyd_job_shard(o, dp) != NULL)
			sum += tally_job_mem(o->window, o->max_elems,
				o->world, o->auth);
	return sum;
}

/* The limits of j's first shard's dataplane (an RDMA job has one). */
static const struct tallyd_dp_limits *
first_limits(const struct tallyd *d, const struct tallyd_job *j)
{
	return &d->dps[j->nshards > 0 ? j->sh[0].dp : 0].limits;
}

unsigned int
tallyd_limits_rdma_elems(const struct tallyd *d, const struct tallyd_job *j)
{
	unsigned int encs = tallyd_limits_encs(j) |
		(j->auth ? TALLY_ENC_AUTH : 0);

	if (first_limits(d, j)->roce_pmtu == 0)
		return 0;
	/* A message is what a UDP payload would be: the same formula. */
	return tally_job_max_elems(first_limits(d, j)->roce_pmtu +
		TALLY_IPV4_UDP_LEN, encs, j->narrow);
}

/* An RDMA job's largest message against tally-dp's RoCEv2 path MTU. */
static int
check_pmtu(const struct tallyd_dp_limits *l, const struct tallyd_job *j,
	unsigned int encs, char *why, size_t wlen)
{
	unsigned int worst = 0;
	size_t msg = tally_job_udp_len(encs, j->narrow, j->max_elems, &worst);

	if (l->roce_pmtu == 0 || msg <= l->roce_pmtu)
		return 0;
	return fail(EMSGSIZE, why, wlen, "job '%s': max_elems %u with codec "
		"%s makes %zu-byte RDMA messages (%s, %s results), over "
		"tally-dp's RoCEv2 path MTU of %u (a UD message is one "
		"packet); at most max_elems %u", j->name, j->max_elems,
		j->codec[0] != '\0' ? j->codec : "fixp", msg,
		tally_enc_name(worst), j->narrow ? "narrow" : "widened",
		l->roce_pmtu, tally_job_max_elems(l->roce_pmtu +
		TALLY_IPV4_UDP_LEN, encs, j->narrow));
}

/* j's largest packet against the MTU (an RDMA job's: the path MTU). */
static int
check_mtu(const struct tallyd_dp_limits *l, const struct tallyd_job *j,
	char *why, size_t wlen)
{
	unsigned int encs = tallyd_limits_encs(j) |
		(j->auth ? TALLY_ENC_AUTH : 0), worst = 0;
	size_t ip = TALLY_IPV4_UDP_LEN + tally_job_udp_len(encs, j->narrow,
		j->max_elems, &worst);

	if (j->rdma)
		return check_pmtu(l, j, encs, why, wlen);
	if (l->mtu == 0 || ip <= l->mtu)
		return 0;
	return fail(EMSGSIZE, why, wlen, "job '%s': max_elems %u with codec "
		"%s makes %zu-byte packets (%s, %s results), over tally-dp's "
		"MTU of %u; at most max_elems %u", j->name, j->max_elems,
		j->codec[0] != '\0' ? j->codec : "fixp", ip,
		tally_enc_name(worst), j->narrow ? "narrow" : "widened",
		l->mtu, tally_job_max_elems(l->mtu, encs, j->narrow));
}

/* tallyd_limits_check() at one dataplane, dp. */
static int
check_dp(const struct tallyd *d, const struct tallyd_job *j, unsigned int dp,
	bool others, char *why, size_t wlen)
{
	const struct tallyd_dp_limits *l = &d->dps[dp].limits;
	uint64_t mem = tally_job_mem(j->window, j->max_elems, j->world,
		j->auth), used;

	if (!l->known)
		return 0;
	if (l->max_job_mem != 0 && mem > l->max_job_mem)
		return fail(E2BIG, why, wlen, "job '%s' needs %.1f MiB at "
			"tally-dp (window %u x max_elems %u); it takes at most "
			"%.1f MiB a job (tally-dp --max-job-mem)", j->name,
			mib(mem), j->window, j->max_elems, mib(l->max_job_mem));
	if (check_mtu(l, j, why, wlen) != 0)
		return -EMSGSIZE;
	if (!others || l->mem_budget == 0)
		return 0;
	used = jobs_mem(d, j, dp);
	if (mem > l->mem_budget || used > l->mem_budget - mem)
		return fail(ENOMEM, why, wlen, "job '%s' needs %.1f MiB at "
			"tally-dp; the other jobs take %.1f of its %.1f MiB "
			"(tally-dp --mem-budget)", j->name, mib(mem), mib(used),
			mib(l->mem_budget));
	return 0;
}

int
tallyd_limits_check(const struct tallyd *d, const struct tallyd_job *j,
	bool others, char *why, size_t wlen)
{
	int ret = 0;

	for (unsigned int k = 0; ret == 0 && k < j->nshards; k++)
		ret = check_dp(d, j, j->sh[k].dp, others, why, wlen);
	return ret;
}

void
tallyd_limits_job_add(const struct tallyd_job *j, json_t *req)
{
	unsigned int encs = tallyd_limits_encs(j);
	json_t *a = json_array();

	for (unsigned int e = TALLY_ENC_F32; e < TALLY_ENC_MAX_; e++)
		if (encs & TALLY_ENC_BIT(e))
			json_array_append_new(a, json_string(tally_enc_name(e)));
	json_object_set_new(req, "encodings", a);
}
