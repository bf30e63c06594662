/* SPDX-License-Identifier: BSD-3-Clause */
#include <stddef.h>
#include <string.h>

#include "agg.h"
#include "lanes.h"
#include "tier.h"

static const struct tally_addr any_src;

/*
 * In an authenticated job: gives v's answer (its header, and its payload
 * when it has one) the flag AUTH and its tag, with key k as kind.
 */
static void
sign(struct tally_verdict *v, const struct tally_mac_key *k,
	enum tally_mac_kind kind)
{
	uint8_t wire[TALLY_HDR_LEN];

	v->hdr.flags |= TALLY_F_AUTH;
	tally_hdr_encode(&v->hdr, wire);
	tally_mac_tag(k, kind, wire, v->payload, v->payload_len, v->tag);
	v->tagged = 1;
}

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
	if (v->job->mac != NULL)
		sign(v, tally_job_mac(v->job, 2 + 2 * (unsigned int)h->rank),
			TALLY_MAC_NACK);
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
	set->flags = h->flags & (TALLY_F_LAST | TALLY_F_SPARSE |
		(sparse ? 0 : TALLY_F_SEQ));
	if (sparse)
		set->next_min = h->next_block;
	set->ncontrib = 0;
	set->complete = 0;
}

/*
 * The answers of a completed SCATTER or GATHER round, whose header
 * result() has filled in v as a PART_RESULT: the data (the sum, the
 * owner's chunk) goes to the owner of a SCATTER round and to everyone
 * but the owner of a GATHER round, a DONE without payload to the others
 * (docs/protocol.md, "Collectives"). A RESEND is for member to alone.
 */
static __attribute__((noinline, cold)) enum tally_verdict_kind
part_result(const struct tally_job *job, const struct tally_set *set,
	unsigned int slot, unsigned int b, enum tally_verdict_kind kind,
	struct tally_verdict *v, unsigned int to)
{
	unsigned int owner = *tally_job_owner(job, slot, b);
	uint64_t one = UINT64_C(1) << owner;
	uint64_t all = job->conf.world >= 64 ? ~UINT64_C(0) :
		(UINT64_C(1) << job->conf.world) - 1;
	uint64_t data = set->type == TALLY_PT_SCATTER ? one : all & ~one;
	uint8_t wire[TALLY_HDR_LEN];

	v->hdr.status = (uint8_t)owner;
	v->done = v->hdr;
	v->done.type = TALLY_PT_DONE;
	if (kind == TALLY_V_RESEND && !(data >> to & 1)) {
		v->hdr = v->done;
		v->payload = NULL;
		v->payload_len = 0;
	} else if (kind == TALLY_V_COMPLETE) {
		v->part = 1;
		v->data_mask = data;
		if (job->mac != NULL) {
			v->done.flags |= TALLY_F_AUTH;
			tally_hdr_encode(&v->done, wire);
			tally_mac_tag(tally_job_mac(job, 0), TALLY_MAC_RESULT,
				wire, NULL, 0, v->done_tag);
		}
	}
	if (job->mac != NULL)
		sign(v, tally_job_mac(job, 0), TALLY_MAC_RESULT);
	return kind;
}

/* The result type of a round of type t (a request type). */
static inline uint8_t
result_type(unsigned int t)
{
	if (t == TALLY_PT_MAX)
		return TALLY_PT_MAX_RESULT;
	return t == TALLY_PT_SUM ? TALLY_PT_SUM_RESULT : TALLY_PT_PART_RESULT;
}

/*
 * Fills v with set's result (round round of slot, in set b) as kind:
 * COMPLETE to every member (a SCATTER or GATHER round: part_result()),
 * RESEND to member to alone.
 */
static inline enum tally_verdict_kind
result(const struct tally_job *job, const struct tally_set *set,
	unsigned int slot, unsigned int b, uint64_t round,
	enum tally_verdict_kind kind, struct tally_verdict *v,
	const int sparse, unsigned int to)
{
	struct tally_hdr *r = &v->hdr;
	/* Numbered (docs/protocol.md, "Gaps"): a dense round of SEQ
	 * contributions, in a plain job. */
	int numbered = !sparse && (set->flags & TALLY_F_SEQ) && job->mac == NULL;

	r->version = TALLY_PROTO_VERSION;
	r->type = result_type(set->type);
	r->flags = (set->flags & ~TALLY_F_SEQ) | (numbered ? TALLY_F_SEQ : 0) |
		(b ? TALLY_F_SET : 0) |
		(kind == TALLY_V_RESEND ? TALLY_F_RETX : 0);
	r->enc = set->res_enc;
	r->job = job->conf.id;
	r->token = job->conf.token;
	r->rank = TALLY_RANK_ALL;
	r->status = TALLY_ST_OK;
	r->slot = (uint16_t)slot;
	r->offset = set->offset;
	r->count = set->count;
	r->scale_exp = set->scale_exp;
	/* A block-sparse result names the stream's next round's block; a
	 * numbered one its number on the port. */
	r->next_block = sparse || numbered ? set->next_min : TALLY_NO_BLOCK;
	r->round = round;
	v->payload = tally_job_lanes(job, slot, b);
	v->payload_len = set->res_len;
	v->kind = kind;
	if (__builtin_expect(tally_type_is_part(set->type), 0))
		return part_result(job, set, slot, b, kind, v, to);
	if (job->mac != NULL)
		sign(v, tally_job_mac(job, 0), TALLY_MAC_RESULT);
	return kind;
}

/*
 * Whether h names the owner of the SCATTER or GATHER round its set holds
 * (true of any other packet: only those have owners).
 */
static inline int
same_owner(const struct tally_job *job, const struct tally_hdr *h)
{
	return !tally_type_is_part(h->type) ||
		*tally_job_owner(job, h->slot, h->round & 1) == h->status;
}

/*
 * Why h does not belong to the round cur holds: wrong_op when one of
 * them is a SCATTER or GATHER and the other not, or not the same, or of
 * another owner; mismatch for another chunk of the same kind of round.
 */
static __attribute__((noinline, cold)) enum tally_status
differs(const struct tally_job *job, const struct tally_set *cur,
	const struct tally_hdr *h)
{
	if (cur->type != h->type ? tally_type_is_part(cur->type) ||
			tally_type_is_part(h->type) : !same_owner(job, h))
		return TALLY_ST_WRONG_OP;
	return TALLY_ST_MISMATCH;
}

/*
 * A GATHER contribution: the owner's data is copied into the lanes as it
 * is (nothing to sum); the others' requests carry none.
 */
static inline void
gather_in(uint32_t *lanes, const struct tally_hdr *h, const void *payload)
{
	if (h->rank == h->status)
		memcpy(lanes, payload, tally_enc_payload_len(h->enc, h->count));
}

/* A packet of a round its sender has moved past: dropped, counted. */
static enum tally_verdict_kind
stale(struct tally_agg_stats *st, struct tally_verdict *v)
{
	return refuse(st, v, TALLY_ST_STALE);
}

/*
 * A contribution from a member already counted in set cur, which holds
 * the packet's round: a duplicate while the round is open, answered with
 * the stored result once it is complete.
 */
static inline enum tally_verdict_kind
again(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, struct tally_set *cur,
	struct tally_verdict *v, const int sparse)
{
	if (!same_round(cur, h, sparse) || !same_owner(job, h))
		return nack(st, v, h, differs(job, cur, h));
	if (__builtin_expect(tally_tier_forwarded(job, cur), 0))
		return tally_tier_forward(job, st, cur, h->slot, h->round, 1, v);
	if (!cur->complete) {
		st->duplicates++;
		v->kind = TALLY_V_DROP;
		return v->kind;
	}
	st->resent++;
	return result(job, cur, h->slot, h->round & 1, h->round,
		TALLY_V_RESEND, v, sparse, h->rank);
}

/*
 * Numbers the result of the round cur just completed on slot
 * (docs/protocol.md, "Gaps"): one up a port, in its low 16 bits, with
 * the slot of the port's result before it in its high 16, so that a
 * member that lost that one knows which it was. Stored in the set, for
 * a result sent again. Not in an authenticated job: a round summed
 * again after a restart would get another number under the same
 * (key, IV) ("Authenticated jobs").
 */
static inline void
number(const struct tally_job *job, struct tally_set *cur, unsigned int slot)
{
	uint32_t *port = tally_job_seen(job, slot, job->conf.world);

	port[0]++;
	cur->next_min = port[1] << 16 | (port[0] & 0xffff);
	port[1] = slot;
}

/*
 * Counts the contribution h (payload borrowed) into set cur, which holds
 * its round (started here when cur is empty), and completes the round
 * when every member is in.
 */
static inline enum tally_verdict_kind
count_in(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, const void *payload, struct tally_set *cur,
	struct tally_set *oth, struct tally_verdict *v, const int sparse)
{
	unsigned int b = h->round & 1;
	uint32_t *lanes = tally_job_lanes(job, h->slot, b);
	uint64_t bit = UINT64_C(1) << h->rank;
	enum tally_lane_op op = h->type == TALLY_PT_MAX ?
		TALLY_OP_MAX : TALLY_OP_SUM;

	if (cur->bitmap == 0) {
		start_round(cur, h, sparse);
		if (__builtin_expect(tally_type_is_part(h->type), 0))
			*tally_job_owner(job, h->slot, b) = h->status;
		if (h->type == TALLY_PT_GATHER)
			gather_in(lanes, h, payload);
		else if (!sparse || h->count > 0)
			tally_lanes_init(lanes, payload, op, h->enc, h->count);
	} else {
		if (!same_round(cur, h, sparse) || !same_owner(job, h))
			return nack(st, v, h, differs(job, cur, h));
		if (!sparse && h->type == TALLY_PT_GATHER) {
			gather_in(lanes, h, payload);
		} else if (!sparse) {
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
	/* Holding this round proves holding the last one's result. */
	oth->bitmap &= ~bit;
	cur->bitmap |= bit;
	cur->ncontrib++;
	st->accepted++;
	/* A GATHER's request carries no elements. */
	st->elements += h->type != TALLY_PT_GATHER || h->rank == h->status ?
		h->count : 0;
	if (cur->ncontrib < job->conf.world) {
		v->kind = TALLY_V_TAKEN;
		return v->kind;
	}
	/* A leaf's round goes to its spine, whose result completes it. */
	if (__builtin_expect(job->conf.up.ip != 0, 0))
		return tally_tier_forward(job, st, cur, h->slot, h->round, 0, v);
	if (h->type == TALLY_PT_GATHER) {
		/* The owner's bytes, as they came. */
		cur->res_enc = h->enc;
		cur->res_len = (uint16_t)tally_enc_payload_len(h->enc,
			cur->count);
	} else {
		cur->res_enc = (uint8_t)(op == TALLY_OP_MAX ? h->enc :
			tally_enc_result(h->enc, job->conf.narrow));
		cur->res_len = (uint16_t)tally_lanes_finish(lanes,
			cur->res_enc, cur->count, job->conf.world);
	}
	cur->complete = 1;
	st->completed++;
	if (!sparse && (cur->flags & TALLY_F_SEQ) && job->mac == NULL)
		number(job, cur, h->slot);
	return result(job, cur, h->slot, b, h->round, TALLY_V_COMPLETE, v,
		sparse, TALLY_RANK_ALL);
}

/*
 * The slot state machine for an authenticated, well-formed contribution
 * from rank h->rank to round h->round of slot h->slot (docs/protocol.md,
 * "Rounds"). The slot's latest round L is in set L & 1, L - 1 in the
 * other set. Round L + 1 starts once L is complete (every member then
 * holds L - 1's result); L takes contributions while open and answers a
 * counted member's retransmission with its result once complete, as
 * L - 1 does for members that have not moved on; anything older is
 * stale, anything further ahead is early. A fresh slot takes its first
 * round from its first contribution. sparse is a constant (h carries
 * TALLY_F_SPARSE or not): dense packets run a copy of this code with no
 * block-sparse test left in it.
 */
static inline __attribute__((always_inline)) enum tally_verdict_kind
contribute(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, const void *payload, struct tally_verdict *v,
	const int sparse)
{
	struct tally_set *sets = tally_job_set(job, h->slot, 0);
	unsigned int b = h->round & 1;
	struct tally_set *cur = &sets[b], *oth = &sets[!b];
	uint64_t bit = UINT64_C(1) << h->rank;
	int64_t d = (int64_t)(h->round - tally_slot_round(sets));

	if (d == 1 && oth->complete) {
		/* Every member contributed to L: none holds L - 1 still. */
		if (cur->bitmap != 0)
			return nack(st, v, h, TALLY_ST_EARLY);
		tally_slot_set_round(sets, h->round);
		return count_in(job, st, h, payload, cur, oth, v, sparse);
	}
	if (d == 0 && cur->bitmap != 0) {
		if (cur->bitmap & bit)
			return again(job, st, h, cur, v, sparse);
		if (cur->complete)
			return stale(st, v);
		return count_in(job, st, h, payload, cur, oth, v, sparse);
	}
	if (d == -1 && (cur->bitmap & bit))
		return again(job, st, h, cur, v, sparse);
	if (tally_slot_fresh(sets)) {
		tally_slot_set_round(sets, h->round);
		return count_in(job, st, h, payload, cur, oth, v, sparse);
	}
	if (d > 0)
		return nack(st, v, h, TALLY_ST_EARLY);
	return stale(st, v);
}

/*
 * The rare cases of the sequence check below: d (the packet's sequence
 * number less the latest seen) is 0 or behind (a retransmission or a
 * copy: nothing), 2 .. window + 1 (the frames in between were lost: a
 * gap to NACK), or further ahead (no loss a window allows: a sender
 * restarted, taken as it is).
 */
static __attribute__((noinline, cold)) void
seq_jump(const struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, struct tally_verdict *v, uint32_t *seen,
	uint32_t d)
{
	if (d == 0 || d >= UINT32_C(0x80000000))
		return;
	if (d <= (uint32_t)job->conf.window + 1) {
		v->gap_first = *seen + 1;
		v->gap_n = d - 1;
		st->gap_nacks++;
		st->gap_lost += d - 1;
	}
	*seen = h->next_block;
}

/*
 * A dense contribution with the flag SEQ: its next_block is the sender's
 * sequence number on the slot's port, one up for each fresh frame it
 * sends there, and a member's frames reach a port in the order it sent
 * them. So one that skips numbers shows the frames in between lost, at
 * once: v gets the gap (docs/protocol.md, "Gaps"). One compare when
 * nothing was lost.
 */
static inline void
seq_check(const struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, struct tally_verdict *v)
{
	uint32_t *seen = tally_job_seen(job, h->slot, h->rank);
	uint32_t d = h->next_block - *seen;

	if (__builtin_expect(d == 1, 1))
		*seen = h->next_block;
	else
		seq_jump(job, st, h, v, seen, d);
}

enum tally_verdict_kind
tally_agg_gap(const struct tally_verdict *v, const void *pkt, unsigned int len,
	struct tally_verdict *g)
{
	struct tally_job *job = v->job;
	uint32_t first = v->gap_first, n = v->gap_n;	/* g may be v */
	struct tally_hdr h;

	if (n == 0 || job == NULL ||
			tally_hdr_decode(pkt, len, &h) != TALLY_ST_OK) {
		g->kind = TALLY_V_DROP;
		return g->kind;
	}
	*g = (struct tally_verdict){ .kind = TALLY_V_NACK,
		.status = TALLY_ST_GAP, .job = job, .rank = h.rank, .hdr = h };
	g->hdr.type = TALLY_PT_NACK;
	g->hdr.status = TALLY_ST_GAP;
	g->hdr.flags &= TALLY_F_SET | TALLY_F_RETX | TALLY_F_LAST | TALLY_F_SEQ;
	g->hdr.next_block = first;
	g->hdr.count = (uint16_t)n;
	if (job->mac != NULL)
		sign(g, tally_job_mac(job, 2 + 2 * (unsigned int)h.rank),
			TALLY_MAC_NACK);
	return g->kind;
}

/*
 * A block-sparse contribution: its own copy, out of the dense path. A
 * leaf of two tiers carries dense rounds only (wrong_op).
 */
static __attribute__((noinline, cold)) enum tally_verdict_kind
contribute_sparse(struct tally_job *job, struct tally_agg_stats *st,
	const struct tally_hdr *h, const void *payload, struct tally_verdict *v)
{
	if (job->conf.up.ip != 0)
		return nack(st, v, h, TALLY_ST_WRONG_OP);
	return contribute(job, st, h, payload, v, 1);
}

enum tally_verdict_kind
tally_agg_tier_done(struct tally_job *job, struct tally_agg_stats *st,
	unsigned int slot, unsigned int b, uint64_t round,
	struct tally_verdict *v)
{
	struct tally_set *cur = tally_job_set(job, slot, b);
	uint32_t *lanes = tally_job_lanes(job, slot, b);

	cur->res_enc = (uint8_t)(cur->type == TALLY_PT_MAX ? cur->enc :
		tally_enc_result(cur->enc, job->conf.narrow));
	cur->res_len = (uint16_t)tally_lanes_finish(lanes, cur->res_enc,
		cur->count, job->conf.up.world);
	cur->complete = 1;
	st->completed++;
	if ((cur->flags & TALLY_F_SEQ) && job->mac == NULL)
		number(job, cur, slot);
	v->tier = 1;
	return result(job, cur, slot, b, round, TALLY_V_COMPLETE, v, 0,
		TALLY_RANK_ALL);
}

/*
 * The owner of a SCATTER or GATHER contribution h (len bytes on the
 * wire): a member of the job; and a GATHER carries data exactly when its
 * sender owns the round (docs/protocol.md, "Collectives").
 */
static __attribute__((noinline, cold)) enum tally_status
part_check(const struct tally_job *job, const struct tally_hdr *h,
	unsigned int len)
{
	unsigned int bare = TALLY_HDR_LEN +
		((h->flags & TALLY_F_AUTH) ? TALLY_TAG_LEN : 0);

	if (h->status >= job->conf.world)
		return TALLY_ST_BAD_OWNER;
	if (h->type == TALLY_PT_GATHER &&
			(len != bare) != (h->rank == h->status))
		return TALLY_ST_NOT_OWNER;
	return TALLY_ST_OK;
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
	v->tagged = 0;
	v->gap_n = 0;
	v->part = 0;
	v->tier = 0;
	s = tally_hdr_decode(pkt, len, &h);
	if (s == TALLY_ST_TRUNCATED || s == TALLY_ST_BAD_MAGIC ||
			s == TALLY_ST_BAD_VERSION || s == TALLY_ST_BAD_TYPE)
		return refuse(st, v, s);
	/* A spine's result to a leaf (two tiers, tier.c). */
	if (__builtin_expect(h.type == TALLY_PT_SUM_RESULT ||
			h.type == TALLY_PT_MAX_RESULT, 0))
		return tally_tier_result(tab, st, &h, s, pkt, len, src, v);
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
	/* An authenticated job's member proves itself with its tag. */
	if (__builtin_expect(job->mac != NULL || (h.flags & TALLY_F_AUTH), 0) &&
			(job->mac == NULL || !(h.flags & TALLY_F_AUTH) ||
			 !tally_mac_verify(tally_job_mac(job, 1 + 2 *
				(unsigned int)h.rank), TALLY_MAC_UP, pkt, len)))
		return refuse(st, v, TALLY_ST_BAD_AUTH);
	v->rank = h.rank;
	if (s != TALLY_ST_OK)
		return nack(st, v, &h, s);
	if (h.count > job->conf.max_elems)
		return nack(st, v, &h, TALLY_ST_BAD_LENGTH);
	if (h.slot >= job->conf.window)
		return nack(st, v, &h, TALLY_ST_BAD_SLOT);
	if (__builtin_expect(tally_type_is_part(h.type), 0) &&
			(s = job->conf.up.ip != 0 ? TALLY_ST_WRONG_OP :
			 part_check(job, &h, len)) != TALLY_ST_OK)
		return nack(st, v, &h, s);
	if ((h.flags & (TALLY_F_SEQ | TALLY_F_SPARSE)) == TALLY_F_SEQ)
		seq_check(job, st, &h, v);
	if (unlikely_sparse(&h))
		return contribute_sparse(job, st, &h,
			(const uint8_t *)pkt + TALLY_HDR_LEN, v);
	return contribute(job, st, &h, (const uint8_t *)pkt + TALLY_HDR_LEN, v,
		0);
}
