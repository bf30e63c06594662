/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two tiers (docs/scale-out.md, "Two tiers"): the leaf's side. A leaf job
 * (conf.up.ip != 0) is one rank of a spine job of the same id at another
 * tally-dp. When every member has contributed to a round, the leaf sends
 * the round's 32-bit lanes (its partial sum, "wide" whatever the members'
 * encoding) to the spine as its rank's contribution to the same slot and
 * round, and keeps the round open but full ("forwarded": every member
 * counted, no result yet). The spine's result, a SUM_RESULT or
 * MAX_RESULT from the spine's address with the spine's token, fills the
 * lanes and completes the round, answered to the members as any result.
 * A member's retransmission of a forwarded round sends it upstream again:
 * as everywhere in tally, the end hosts drive recovery and tally-dp keeps
 * no timers.
 */
#ifndef TALLY_AGG_TIER_H
#define TALLY_AGG_TIER_H

#include <stdint.h>

#include <tally/proto.h>

#include "agg.h"

/* Whether set of job holds a forwarded round: full, no result yet. */
static inline int
tally_tier_forwarded(const struct tally_job *job, const struct tally_set *set)
{
	return job->conf.up.ip != 0 && set->ncontrib >= job->conf.world &&
		set->bitmap != 0 && !set->complete;
}

/*
 * Encoding of a leaf round's partial sum on its way upstream: a maximum
 * in its own, an f32 sum in f32, every other sum in its i32 lanes.
 */
static inline unsigned int
tally_tier_wide_enc(const struct tally_set *set)
{
	if (set->type == TALLY_PT_MAX || set->enc == TALLY_ENC_F32)
		return set->enc;
	return TALLY_ENC_I32;
}

/*
 * Fills v as the UPSTREAM verdict of the round in set (set b of slot,
 * round round) of leaf job: its lanes as the leaf's contribution to the
 * spine job; retx marks a member's retransmission (flag RETX). Payload
 * borrowed from the slot.
 */
enum tally_verdict_kind tally_tier_forward(const struct tally_job *job,
	struct tally_agg_stats *st, const struct tally_set *set,
	unsigned int slot, uint64_t round, int retx, struct tally_verdict *v);

/*
 * A result packet h (decoded with status s; the len-byte pkt borrowed)
 * from src, to the leaf job of the same id in tab: the spine's result of
 * a forwarded round, which completes it (COMPLETE to the members, v->tier
 * set). Anything else is dropped and counted in st (drops[] by reason,
 * tier_refused): no leaf job (bad_type), another token (bad_token),
 * another source (bad_source), a tag (bad_auth), a slot out of the window
 * (bad_slot), a malformed packet (its decode status), a round not
 * forwarded here or another chunk (stale). The result again of a round
 * completed with it (the spine answering a re-forward whose first copy
 * did arrive) is dropped as a duplicate (status OK, tier_duplicates).
 * Nothing is ever sent back upstream.
 */
enum tally_verdict_kind tally_tier_result(const struct tally_jobtab *tab,
	struct tally_agg_stats *st, const struct tally_hdr *h,
	enum tally_status s, const void *pkt, unsigned int len,
	const struct tally_addr *src, struct tally_verdict *v);

#endif /* TALLY_AGG_TIER_H */
