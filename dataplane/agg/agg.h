/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The aggregation engine: one function that takes a received tally packet
 * (the UDP payload) and its source, updates the slot it names, and says
 * what to send back. It has no DPDK dependency, so the dataplane lcores,
 * the tests and the benchmarks all call this same code.
 *
 * Slots follow SwitchML's scheme: every slot has two shadow sets used in
 * turn by its numbered rounds (round & 1); a worker's contribution to a
 * round tells the aggregator it holds the result of the one before,
 * which is then kept only for the workers that have not moved on, so a
 * retransmitted contribution gets the stored result back and is never
 * counted twice, and a copy of an older round is dropped as stale.
 */
#ifndef TALLY_AGG_AGG_H
#define TALLY_AGG_AGG_H

#include <stdint.h>

#include <tally/proto.h>

#include "job.h"
#include "jobtab.h"

/* Counters of one lcore. Only that lcore writes them. */
struct tally_agg_stats {
	uint64_t rx;		/* packets handed to the engine */
	uint64_t accepted;	/* contributions counted into a slot */
	uint64_t elements;	/* elements of those contributions */
	uint64_t completed;	/* rounds completed: results to send */
	uint64_t resent;	/* retransmissions answered from a stored result */
	uint64_t duplicates;	/* retransmissions to an open round: dropped */
	uint64_t nacks;		/* refusals answered with a NACK */
	uint64_t gap_nacks;	/* NACKs gap: a member's frames missing */
	uint64_t gap_lost;	/*   the frames they named */
	uint64_t drops[TALLY_ST_MAX_]; /* refusals by reason; [0] unused */
	/* Two tiers (tier.c): a leaf's rounds to and from its spine. */
	uint64_t tier_forwarded;	/* completed rounds sent upstream */
	uint64_t tier_reforwarded;	/* ... sent again: a member
					 * retransmitted a forwarded round */
	uint64_t tier_results;		/* the spine's results taken */
	uint64_t tier_duplicates;	/* ... again, for a round already
					 * complete here: dropped */
	uint64_t tier_refused;		/* packets from upstream refused
					 * (also in drops[] by reason) */
} __attribute__((aligned(64)));

enum tally_verdict_kind {
	TALLY_V_DROP,		/* send nothing */
	TALLY_V_TAKEN,		/* counted; round still open, send nothing */
	TALLY_V_COMPLETE,	/* send the result to every member of job */
	TALLY_V_RESEND,		/* send the stored result to the sender */
	TALLY_V_NACK,		/* send hdr (a NACK) to the sender */
	TALLY_V_UPSTREAM,	/* a leaf's round: send hdr and the payload
				 * to the job's spine (conf.up, slot
				 * hdr.slot), nothing to the sender */
};

struct tally_verdict {
	enum tally_verdict_kind kind;
	enum tally_status status; /* why, for DROP and NACK; OK otherwise */
	struct tally_job *job;	/* the sender's job; NULL if not known */
	uint8_t rank;		/* the sender's rank, once authenticated */
	struct tally_hdr hdr;	/* header to send (COMPLETE, RESEND, NACK) */
	const void *payload;	/* result, borrowed from the slot: copy it */
	uint16_t payload_len;	/*   before the slot's next packet */
	uint8_t tagged;		/* hdr has the flag AUTH: tag follows the
				 * payload (an authenticated job) */
	uint8_t tag[TALLY_TAG_LEN];
	uint32_t gap_first;	/* a gap: the sender's first frame missing */
	uint32_t gap_n;		/*   how many; 0: none (tally_agg_gap()) */
	/*
	 * A COMPLETE of a SCATTER or GATHER round (part set): hdr and the
	 * payload go only to the members in data_mask (a bit a rank), done
	 * (a DONE, no payload; tagged with done_tag when tagged) to the
	 * others, every one of them unicast (docs/protocol.md,
	 * "Collectives"). part is 0 in every other verdict.
	 */
	uint8_t part;
	uint64_t data_mask;
	struct tally_hdr done;
	uint8_t done_tag[TALLY_TAG_LEN];
	uint8_t tier;		/* a COMPLETE made of the spine's result
				 * (tier.c), not of a member's packet */
};

/*
 * Processes one packet of len bytes from src, as the owner of the slot it
 * names. Borrows pkt. Fills v and returns v->kind. Every refusal is
 * counted in st under the first check it fails, in this order: header
 * (truncated, magic, version), type, job, token, rank, source, the tag
 * (an authenticated job's packet must carry the right one, a plain
 * job's none: bad_auth), then the
 * checks that are answered with a NACK because the sender is a proven
 * member: encoding, length, slot, mismatch, early; and a packet of a
 * round its sender has moved past is dropped as stale (docs/protocol.md,
 * "Rounds").
 */
enum tally_verdict_kind tally_agg_process(const struct tally_jobtab *tab,
	struct tally_agg_stats *st, const void *pkt, unsigned int len,
	const struct tally_addr *src, struct tally_verdict *v);

/*
 * The NACK gap that v's packet (pkt, len bytes, borrowed: the packet
 * tally_agg_process() just took into v) asks for, when v->gap_n is not
 * 0: the sender's frames v->gap_first .. + gap_n - 1 on the slot's port
 * never arrived, though a frame it sent after them did
 * (docs/protocol.md, "Gaps"). Fills g as a NACK verdict to the sender,
 * on top of whatever v answers, and returns TALLY_V_NACK; TALLY_V_DROP
 * when v has no gap.
 */
enum tally_verdict_kind tally_agg_gap(const struct tally_verdict *v,
	const void *pkt, unsigned int len, struct tally_verdict *g);

/*
 * Two tiers (tier.c): the round of slot in set b of a leaf job, its lanes
 * now holding the spine's sum, finished into the members' result and
 * numbered as a round completed here would be; fills v as a COMPLETE.
 */
enum tally_verdict_kind tally_agg_tier_done(struct tally_job *job,
	struct tally_agg_stats *st, unsigned int slot, unsigned int b,
	uint64_t round, struct tally_verdict *v);

#endif /* TALLY_AGG_AGG_H */
