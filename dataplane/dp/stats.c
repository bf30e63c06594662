/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters by name, summed over worker lcores or of one lcore, and the
 * counters of each job, summed over its rows. Readers
 * (admin socket, telemetry) run beside the lcores and read 64-bit words
 * the lcores write; on x86-64 an aligned word is read whole, so a value
 * may be a burst old but never torn.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dp.h"

struct field {
	const char *name;
	size_t off;
};

#define DP(f) { #f, offsetof(struct tally_dp_lcore, st.f) }
#define AGG(n, f) { n, offsetof(struct tally_dp_lcore, agg.f) }

static const struct field fields[] = {
	DP(rx), DP(tx), DP(tx_dropped), DP(results), DP(arp_replies),
	DP(icmp_replies), DP(dispatched), DP(ring_full), DP(no_neigh),
	DP(no_mbuf), DP(too_big), DP(arp_refused), DP(misrouted),
	DP(idle_sleeps), DP(upstream), DP(upstream_bcast),
	AGG("agg_rx", rx), AGG("contributions", accepted),
	AGG("elements", elements), AGG("completed", completed),
	AGG("retransmissions_served", resent), AGG("duplicates", duplicates),
	AGG("nacks", nacks), AGG("gap_nacks", gap_nacks),
	AGG("gap_lost", gap_lost),
	AGG("tier_forwarded", tier_forwarded),
	AGG("tier_reforwarded", tier_reforwarded),
	AGG("tier_results", tier_results),
	AGG("tier_duplicates", tier_duplicates),
	AGG("tier_refused", tier_refused),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* The drop arrays, one after the other: engine, packet layer, RoCEv2. */
#define NET0	TALLY_ST_MAX_
#define ROCE0	(NET0 + TALLY_NET_DROP_MAX_)
#define NDROPS	(ROCE0 + TALLY_ROCE_DROP_MAX_)

/* Names of the per-reason drop counters, built once. */
static char drop_names[NDROPS][40];

static const char *
drop_name(unsigned int k)
{
	char *s = drop_names[k];

	if (s[0] == '\0') {
		if (k < NET0)
			snprintf(s, sizeof(drop_names[0]), "drop_%s",
				tally_status_name(k));
		else if (k < ROCE0)
			snprintf(s, sizeof(drop_names[0]), "drop_net_%s",
				tally_net_drop_name(k - NET0));
		else
			snprintf(s, sizeof(drop_names[0]), "drop_roce_%s",
				tally_roce_drop_name(k - ROCE0));
	}
	return s;
}

static uint64_t
value(const struct tally_dp *dp, int index, unsigned int k)
{
	uint64_t v = 0;

	for (uint16_t i = 0; i < dp->nworkers; i++) {
		const struct tally_dp_lcore *lc = &dp->lcores[i];

		if (index >= 0 && i != index)
			continue;
		if (k < NFIELDS)
			v += *(const volatile uint64_t *)((const char *)lc +
				fields[k].off);
		else if (k - NFIELDS < NET0)
			v += lc->agg.drops[k - NFIELDS];
		else if (k - NFIELDS < ROCE0)
			v += lc->st.net_drops[k - NFIELDS - NET0];
		else
			v += lc->st.roce_drops[k - NFIELDS - ROCE0];
	}
	return v;
}

unsigned int
tally_dp_counters(const struct tally_dp *dp, int index,
	struct tally_dp_counter *out, unsigned int max)
{
	unsigned int n = 0;

	for (unsigned int k = 0; k < NFIELDS + NDROPS; k++) {
		/* Slot 0 of each drop array is "ok": not a drop; nor is
		 * a gap (gap_nacks counts those). */
		if (k == NFIELDS || k == NFIELDS + TALLY_ST_GAP ||
				k == NFIELDS + NET0 || k == NFIELDS + ROCE0)
			continue;
		if (n < max) {
			out[n].name = k < NFIELDS ? fields[k].name :
				drop_name(k - NFIELDS);
			out[n].value = value(dp, index, k);
		}
		n++;
	}
	return n;
}

#define JOB(f) { #f, offsetof(struct tally_job_ctr, f) }

static const struct field job_fields[] = {
	JOB(contributions), JOB(elements), JOB(bytes_in), JOB(rounds),
	JOB(results), JOB(bytes_out), JOB(resent), JOB(nacks), JOB(drops),
	JOB(duplicates),
};

#define NJOB_FIELDS (sizeof(job_fields) / sizeof(job_fields[0]))

void
tally_dp_job_sum(const struct tally_dp *dp, const struct tally_job *job,
	struct tally_job_ctr *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned int k = 0; k < NJOB_FIELDS; k++) {
		uint64_t v = 0;

		for (uint16_t i = 0; i < dp->nworkers; i++)
			v += *(const volatile uint64_t *)((const char *)
				&tally_dp_jobx(job)->ctr[i] + job_fields[k].off);
		*(uint64_t *)((char *)sum + job_fields[k].off) = v;
	}
}

unsigned int
tally_dp_ctr_list(const struct tally_job_ctr *sum, struct tally_dp_counter *out,
	unsigned int max)
{
	for (unsigned int k = 0; k < NJOB_FIELDS && k < max; k++) {
		out[k].name = job_fields[k].name;
		out[k].value = *(const uint64_t *)((const char *)sum +
			job_fields[k].off);
	}
	return NJOB_FIELDS;
}

unsigned int
tally_dp_job_counters(const struct tally_dp *dp, const struct tally_job *job,
	struct tally_dp_counter *out, unsigned int max)
{
	struct tally_job_ctr sum;

	tally_dp_job_sum(dp, job, &sum);
	return tally_dp_ctr_list(&sum, out, max);
}
