/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tallyd's view of what tally-dp can serve: the limits of its last ping
 * (MTU, memory budget and per-job cap, max_jobs), and the check of a job
 * against them with the formulas tally-dp itself applies
 * (<tally/limits.h>), so that `job create` and a join are refused with a
 * sentence instead of failing later inside tally-dp.
 */
#ifndef TALLYD_DPLIMITS_H
#define TALLYD_DPLIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct tallyd;
struct tallyd_job;

/* What tally-dp's last ping said; known is false before any. */
struct tallyd_dp_limits {
	bool known;
	unsigned int mtu;		/* the port's L3 MTU; 0: not said */
	unsigned int max_jobs;
	uint64_t mem_budget;		/* bytes; 0: not said or no limit */
	uint64_t max_job_mem;		/* bytes; 0: not said or no limit */
	unsigned int roce_pmtu;		/* bytes a RoCEv2 message may hold
					 * (ping's roce.pmtu); 0: no RoCEv2 */
};

/*
 * Takes a dataplane's limits from its ping reply (borrowed); keys it
 * lacks stay 0.
 */
void tallyd_limits_from_ping(struct tallyd_dp_limits *l, json_t *ping);

/* The encodings (TALLY_ENC_BIT mask) j's codec sends at full length. */
unsigned int tallyd_limits_encs(const struct tallyd_job *j);

/*
 * The most elements a packet that RDMA job j's messages may carry
 * within tally-dp's RoCEv2 path MTU (its codec, narrow, auth); 0 when
 * tally-dp's last ping said no RoCEv2 (or none came yet).
 */
unsigned int tallyd_limits_rdma_elems(const struct tallyd *d,
	const struct tallyd_job *j);

/*
 * Whether each tally-dp j spans, as its last ping described it, can
 * serve job j:
 * its memory against the per-job cap, its largest packet against the
 * MTU, and with others (job create) the memory of all tallyd's jobs
 * with j against the budget. Returns 0 (also while the limits are not
 * known), -E2BIG, -EMSGSIZE or -ENOMEM with a sentence in why.
 */
int tallyd_limits_check(const struct tallyd *d, const struct tallyd_job *j,
	bool others, char *why, size_t wlen);

/* Adds j's "encodings" to a job_add request (borrowed). */
void tallyd_limits_job_add(const struct tallyd_job *j, json_t *req);

#endif /* TALLYD_DPLIMITS_H */
