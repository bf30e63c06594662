/* SPDX-License-Identifier: BSD-3-Clause */
#include <stddef.h>

#include "agg.h"
#include "lanes.h"

static const struct tally_addr any_src;

/* A block-sparse contribution: the uncommon path. */
static inline int
unlikely_sparse(const struct tally_hdr *h)
{
	return __builtin_expect((h->flags & TALLY_F_SPARSE) != 0, 0);
}

static enum tally_verdict_kind
refuse(struct tally_agg_stats *st, struct tally_verdict *v,
	enum tally_status s)
{
	st->drops[s]++;
	v->kind = TALLY_V_DROP;
	v->status = s;
	return v->kind;
}

/* A NACK echoes the refused packet so its sender knows which chunk. */
static enum tally_verdict_kind
nack(struct tally_agg_stats *st, struct tally_verdict *v,
	const struct tally_hdr *h, enum tally_status s)
{
	st->drops[s]++;
	st->nacks++;
	v->kind = TALLY_V_NACK;
	v->status = s;
	v->hdr = *h;
	v->hdr.type = TALLY_PT_NACK;
	v->hdr.status = (uint8_t)s;
	v->hdr.flags &= TALLY_F_SET | TALLY_F_RETX | TALLY_F_LAST;
	return v->kind;
}

static inline int
addr_match(const struct tally_addr *m, const struct tally_addr *src)
{
	return (m->ip == 0 || m->ip == src->ip) &&
		(m->port == 0 || m->port == src->port);
}

/*
 * Whether h is a contribution to the round that set holds. A dense
 * contribution matches a dense round chunk for chunk. In a block-sparse
 * round a member without the block sends count 0, and the round's count
 * is 0 until a member with the block sends it (and stays 0 once the round
 * completed without one). sparse is a constant: the two kinds of round
 * get one copy of this code each.
 */
static inline int
same_round(const struct tally_set *set, const struct tally_hdr *h,
	const int sparse)
{
	if (set->offset != h->offset || set->type != h->type ||
			set->enc != h->enc || set->scale_exp != h->scale_exp)
		return 0;
	if (!sparse)
		return set->count == h->count &&
			!(set->flags & TALLY_F_SPARSE);
	if (!(set->flags & TALLY_F_SPARSE))
		return 0;
	return h->count == 0 || set->count == h->count ||
		(set->count == 0 && !set->complete);
}

static inline void
start_round(struct tally_set *set, const struct tally_hdr *h,
	const int sparse)
{
	set->offset = h->offset;
	set->count = h->count;
	set->scale_exp = h->scale_exp;
	set->type = h->type;
	set->enc = h->enc;
	set->flags = h->flags & (TALLY_F_LAST | TALLY_F_SPARSE);
	if (sparse)
		set->next_min = h->next_block;
	set->ncontrib = 0;
	set->complete = 0;
}

static inline enum tally_verdict_kind
result(const struct tally_job *job, const struct tally_set *set,
	unsigned int slot, unsigned int b, enum tally_verdict_kind kind,
	uint8_t rank, struct tally_verdict *v, const int sparse)
{
	struct tally_hdr *r = &v->hdr;

	r->version = TALLY_PROTO_VERSION;
	r->type = set->type == TALLY_PT_MAX ? TALLY_PT_MAX_RESULT :
		TALLY_PT_SUM_RESULT;
	r->flags = set->flags | (b ? TALLY_F_SET : 0) |
		(kind == TALLY_V_RESEND ? TALLY_F_RETX : 0);
	r->enc = set->res_enc;
	r->job = job->conf.id;
	r->token = job->conf.token;
	r->rank = rank;
	r->status = TALLY_ST_OK;
	r->slot = (uint16_t)slot;
	r->offset = set->offset;
	r->count = set->count;
	r->scale_exp = set->scale_exp;
	/* A block-sparse result names the stream's next round's block. */
	r->next_block = sparse ? set->next_min : TALLY_NO_BLOCK;
	v->payload = tally_job_lanes(job, slot, b);
	v->payload_len = set->res_len;
	v->kind = kind;
	return kind;
}

/*
 * The slot state machine for an authenticated, well-formed contribution
 * from rank h->rank to set b of slot h->slot. sparse is a constant
 * (h carries TALLY_F_SPARSE or not): dense packets run a copy of this
 * code with no block-sparse test left in it.
 */
static inline __attribute__((always_inline)) enum tally_verdict_kind
contribute(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, const void *payload, struct tally_verdict *v,
	const int sparse)
{
	unsigned int b = (h->flags & TALLY_F_SET) != 0;
	struct tally_set *cur = tally_job_set(job, h->slot, b);
	struct tally_set *oth = tally_job_set(job, h->slot, !b);
	uint32_t *lanes = tally_job_lanes(job, h->slot, b);
	uint64_t bit = UINT64_C(1) << h->rank;
	enum tally_lane_op op = h->type == TALLY_PT_MAX ?
		TALLY_OP_MAX : TALLY_OP_SUM;

	if (cur->bitmap & bit) {
		/* Counted before: a retransmission. */
		if (!same_round(cur, h, sparse))
			return nack(st, v, h, TALLY_ST_MISMATCH);
		if (!cur->complete) {
			st->duplicates++;
			v->kind = TALLY_V_DROP;
			return v->kind;
		}
		st->resent++;
		return result(job, cur, h->slot, b, TALLY_V_RESEND, h->rank, v,
			sparse);
	}
	/* Moving to this set means holding the other's result. */
	if ((oth->bitmap & bit) && !oth->complete)
		return nack(st, v, h, TALLY_ST_EARLY);
	if (cur->bitmap == 0) {
		start_round(cur, h, sparse);
		if (!sparse || h->count > 0)
			tally_lanes_init(lanes, payload, op, h->enc, h->count);
	} else {
		/* A completed round is kept until every member moved on. */
		if (cur->complete)
			return nack(st, v, h, TALLY_ST_EARLY);
		if (!same_round(cur, h, sparse))
			return nack(st, v, h, TALLY_ST_MISMATCH);
		if (!sparse) {
			tally_lanes_fold(lanes, payload, op, h->enc, h->count);
		} else {
			/* Members without the block add nothing. */
			if (h->next_block < cur->next_min)
				cur->next_min = h->next_block;
			if (h->count > 0 && cur->count == 0) {
				cur->count = h->count;
				tally_lanes_init(lanes, payload, op, h->enc,
					h->count);
			} else if (h->count > 0) {
				tally_lanes_fold(lanes, payload, op, h->enc,
					h->count);
			}
		}
	}
	oth->bitmap &= ~bit;
	cur->bitmap |= bit;
	cur->ncontrib++;
	st->accepted++;
	st->elements += h->count;
	if (cur->ncontrib < job->conf.world) {
		v->kind = TALLY_V_TAKEN;
		return v->kind;
	}
	cur->res_enc = (uint8_t)(op == TALLY_OP_MAX ? h->enc :
		tally_enc_result(h->enc, job->conf.narrow));
	cur->res_len = (uint16_t)tally_lanes_finish(lanes, cur->res_enc,
		cur->count, job->conf.world);
	cur->complete = 1;
	st->completed++;
	return result(job, cur, h->slot, b, TALLY_V_COMPLETE, TALLY_RANK_ALL, v,
		sparse);
}

/* A block-sparse contribution: its own copy, out of the dense path. */
static __attribute__((noinline, cold)) enum tally_verdict_kind
contribute_sparse(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, const void *payload, struct tally_verdict *v)
{
	return contribute(job, st, h, payload, v, 1);
}

enum tally_verdict_kind
tally_agg_process(const struct tally_jobtab *tab, struct tally_agg_stats *st,
	const void *pkt, unsigned int len, const struct tally_addr *src,
	struct tally_verdict *v)
{
	struct tally_hdr h;
	struct tally_job *job;
	enum tally_status s;

	st->rx++;
	v->job = NULL;
	v->status = TALLY_ST_OK;
	v->payload = NULL;
	v->payload_len = 0;
	s = tally_hdr_decode(pkt, len, &h);
	if (s == TALLY_ST_TRUNCATED || s == TALLY_ST_BAD_MAGIC ||
			s == TALLY_ST_BAD_VERSION || s == TALLY_ST_BAD_TYPE)
		return refuse(st, v, s);
	if (!tally_type_is_request(h.type))
		return refuse(st, v, TALLY_ST_BAD_TYPE);
	job = tally_jobtab_lookup(tab, h.job);
	if (job == NULL)
		return refuse(st, v, TALLY_ST_UNKNOWN_JOB);
	v->job = job;
	if (h.token != job->conf.token)
		return refuse(st, v, TALLY_ST_BAD_TOKEN);
	if (h.rank >= job->conf.world)
		return refuse(st, v, TALLY_ST_BAD_RANK);
	if (!addr_match(&job->conf.members[h.rank], src ? src : &any_src))
		return refuse(st, v, TALLY_ST_BAD_SOURCE);
	v->rank = h.rank;
	if (s != TALLY_ST_OK)
		return nack(st, v, &h, s);
	if (h.count > job->conf.max_elems)
		return nack(st, v, &h, TALLY_ST_BAD_LENGTH);
	if (h.slot >= job->conf.window)
		return nack(st, v, &h, TALLY_ST_BAD_SLOT);
	if (unlikely_sparse(&h))
		return contribute_sparse(job, st, &h,
			(const uint8_t *)pkt + TALLY_HDR_LEN, v);
	return contribute(job, st, &h, (const uint8_t *)pkt + TALLY_HDR_LEN, v,
		0);
}
