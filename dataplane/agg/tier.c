/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two tiers: a leaf's rounds upstream and the spine's results back
 * (tier.h).
 */
#include <stddef.h>
#include <string.h>

#include "tier.h"

enum tally_verdict_kind
tally_tier_forward(const struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_set *set, unsigned int slot, uint64_t round,
	int retx, struct tally_verdict *v)
{
	struct tally_hdr *u = &v->hdr;
	unsigned int enc = tally_tier_wide_enc(set);

	*u = (struct tally_hdr){
		.version = TALLY_PROTO_VERSION, .type = set->type,
		.flags = (uint8_t)((set->flags & TALLY_F_LAST) |
			(round & 1 ? TALLY_F_SET : 0) |
			(retx ? TALLY_F_RETX : 0)),
		.enc = (uint8_t)enc, .job = job->conf.id,
		.token = job->conf.up.token, .rank = job->conf.up.rank,
		.slot = (uint16_t)slot, .offset = set->offset,
		.count = set->count, .scale_exp = set->scale_exp,
		.next_block = TALLY_NO_BLOCK, .round = round,
	};
	v->payload = tally_job_lanes(job, slot, round & 1);
	v->payload_len = (uint16_t)tally_enc_payload_len(enc, set->count);
	v->kind = TALLY_V_UPSTREAM;
	if (retx)
		st->tier_reforwarded++;
	else
		st->tier_forwarded++;
	return v->kind;
}

static enum tally_verdict_kind
refuse_up(struct tally_agg_stats *st, struct tally_verdict *v,
	enum tally_status s)
{
	st->drops[s]++;
	st->tier_refused++;
	v->kind = TALLY_V_DROP;
	v->status = s;
	return v->kind;
}

/* Whether result h is of the round that set holds, chunk for chunk. */
static int
same_chunk(const struct tally_set *set, const struct tally_hdr *h)
{
	unsigned int want = set->type == TALLY_PT_MAX ?
		TALLY_PT_MAX_RESULT : TALLY_PT_SUM_RESULT;

	return h->type == want && h->offset == set->offset &&
		h->count == set->count && h->scale_exp == set->scale_exp &&
		h->enc == tally_tier_wide_enc(set);
}

/*
 * Whether h is the spine's result again for a round this leaf already
 * completed with it: the latest round of the slot or the one before,
 * chunk for chunk.
 */
static int
again(const struct tally_set *sets, const struct tally_set *cur,
	const struct tally_hdr *h)
{
	uint64_t latest = tally_slot_round(sets);

	return cur->complete && (h->round == latest ||
		h->round + 1 == latest) && same_chunk(cur, h);
}

enum tally_verdict_kind
tally_tier_result(const struct tally_jobtab *tab, struct tally_agg_stats *st,
	const struct tally_hdr *h, enum tally_status s, const void *pkt,
	unsigned int len, const struct tally_addr *src,
	struct tally_verdict *v)
{
	struct tally_job *job = tally_jobtab_lookup(tab, h->job);
	const struct tally_job_up *up;
	struct tally_set *sets, *cur;

	if (job == NULL)
		return refuse_up(st, v, TALLY_ST_UNKNOWN_JOB);
	up = &job->conf.up;
	/*
	 * A job with no upstream takes no results: refused as a type no job
	 * takes, before the job is named, so the drop is counted as the
	 * dataplane's, not the job's.
	 */
	if (up->ip == 0)
		return refuse_up(st, v, TALLY_ST_BAD_TYPE);
	v->job = job;
	if (h->token != up->token)
		return refuse_up(st, v, TALLY_ST_BAD_TOKEN);
	if (src == NULL || src->ip != up->ip)
		return refuse_up(st, v, TALLY_ST_BAD_SOURCE);
	if (h->flags & TALLY_F_AUTH)
		return refuse_up(st, v, TALLY_ST_BAD_AUTH);
	if (s != TALLY_ST_OK)
		return refuse_up(st, v, s);
	if (h->flags & TALLY_F_SPARSE)
		return refuse_up(st, v, TALLY_ST_BAD_TYPE);
	if (h->slot >= job->conf.window)
		return refuse_up(st, v, TALLY_ST_BAD_SLOT);
	sets = tally_job_set(job, h->slot, 0);
	cur = &sets[h->round & 1];
	if (again(sets, cur, h)) {
		/* The spine answered a re-forward: the first copy came. */
		st->tier_duplicates++;
		v->kind = TALLY_V_DROP;
		return v->kind;
	}
	if (h->round != tally_slot_round(sets) ||
			!tally_tier_forwarded(job, cur) || !same_chunk(cur, h))
		return refuse_up(st, v, TALLY_ST_STALE);
	memcpy(tally_job_lanes(job, h->slot, h->round & 1),
		(const uint8_t *)pkt + TALLY_HDR_LEN,
		tally_enc_payload_len(h->enc, h->count));
	(void)len;	/* tally_hdr_decode() checked it against count */
	st->tier_results++;
	return tally_agg_tier_done(job, st, h->slot, h->round & 1, h->round, v);
}
