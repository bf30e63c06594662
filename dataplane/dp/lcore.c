/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The worker lcore loop: receive a burst, sort each frame (tally, ARP,
 * ICMP, drop), hand tally frames of the slots this lcore owns to the
 * engine and frames of other lcores' slots to their rings, send results,
 * replies and NACKs, report a quiescent state, and back off when idle.
 *
 * Nothing here allocates (but mbufs), locks, logs or makes a syscall,
 * except the idle back-off's wait (idle.c), which is off unless asked
 * for.
 *
 * MAC addresses are learned only from frames the engine took as a
 * member's (its token, rank and source checked), never from ARP: a host
 * that claims a member's address in an ARP request gets an answer, and
 * the member's results stay where the member is.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <tally/limits.h>

#include "dp.h"

/* A burst's worth of completions times their members, then flushed. */
#define OUT_MAX 512
/* Members with DONEs held for a bundle at once (docs/protocol.md,
 * "Bundles"): more flush the others first. */
#define PEND_MAX 16

/*
 * The DONEs of one member held back during a burst, to go as one bundle
 * at its end (or sooner: before anything else to that member, or when
 * full). first is the first DONE's header; rest its tag (an
 * authenticated job) and the other entries, each a header and its tag,
 * as the wire has them.
 */
struct pend {
	const struct tally_job *job;	/* NULL: a free entry */
	uint8_t rank;
	uint8_t n;			/* entries held */
	uint16_t len;			/* bytes of rest */
	struct tally_hdr first;
	uint8_t rest[TALLY_BUNDLE_MAX * (TALLY_HDR_LEN + TALLY_TAG_LEN)];
};

struct out {
	unsigned int n;
	struct rte_mbuf *m[OUT_MAX];
	unsigned int npend;		/* entries of pend in use */
	struct pend pend[PEND_MAX];
};

static void
flush(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o)
{
	unsigned int sent = 0, tries = 0;

	while (sent < o->n && tries++ < 4)
		sent += rte_eth_tx_burst(dp->port_id, lc->txq, o->m + sent,
			(uint16_t)(o->n - sent));
	lc->st.tx += sent;
	if (sent < o->n) {
		lc->st.tx_dropped += o->n - sent;
		rte_pktmbuf_free_bulk(o->m + sent, o->n - sent);
	}
	o->n = 0;
}

/* Queues m (consumed) for transmission. */
static inline void
push(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf *m)
{
	if (o->n == OUT_MAX)
		flush(dp, lc, o);
	o->m[o->n++] = m;
}

/*
 * Queues the n frames a fanout (tally_net_fanout(), tally_roce_fanout())
 * built at o->m[o->n..]: linearized (the payload copied once per frame)
 * only where the port takes no chains.
 */
static unsigned int
queue_frames(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	unsigned int n)
{
	struct rte_mbuf **m = o->m + o->n;
	unsigned int sent = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (!dp->tx_chains && rte_pktmbuf_linearize(m[i]) != 0) {
			lc->st.no_mbuf++;
			rte_pktmbuf_free(m[i]);
			continue;
		}
		m[sent++] = m[i];
	}
	o->n += sent;
	return sent;
}

/*
 * The frames of body (consumed) to the n destinations dst, queued for
 * the port. Returns how many were queued; what could not be built counts
 * as no_mbuf.
 */
static unsigned int
send_body(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf *body, uint32_t ck, const struct tally_net_dst *dst,
	unsigned int n)
{
	rte_be16_t sport = rte_cpu_to_be_16((uint16_t)
		(rte_be_to_cpu_16(dp->self.port) + lc->index));

	if (o->n + n > OUT_MAX)
		flush(dp, lc, o);
	if (unlikely(tally_net_fanout(dp->hdr_pool, body, ck, sport, dst, n,
			o->m + o->n) != 0)) {
		lc->st.no_mbuf += n;
		return 0;
	}
	return queue_frames(dp, lc, o, n);
}

/*
 * The destinations of a RoCEv2 job's verdict v into dst: every member
 * whose MAC this lcore knows, or the group (COMPLETE), or the sender
 * (RESEND, NACK; its template built in back). Returns how many.
 */
static unsigned int
roce_dsts(struct tally_dp *dp, struct tally_dp_lcore *lc,
	const struct tally_verdict *v, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr, struct tally_roce_tmpl *back,
	struct tally_roce_dst *dst, uint64_t mask)
{
	const struct tally_job_conf *jc = &v->job->conf;
	const struct tally_dp_jobx *x = tally_dp_jobx(v->job);
	unsigned int n = 0;

	if (v->kind == TALLY_V_COMPLETE && jc->group.ip != 0 && !v->part) {
		dst[n++] = (struct tally_roce_dst){ &x->rgroup, &x->group_mac };
	} else if (v->kind == TALLY_V_COMPLETE) {
		for (unsigned int r = 0; r < jc->world; r++) {
			const struct rte_ether_addr *mac;

			if (!(mask >> r & 1))
				continue;
			mac = tally_net_neigh_lookup(lc->neigh,
				jc->members[r].ip);
			if (mac == NULL) {
				lc->st.no_neigh++;
				continue;
			}
			dst[n++] = (struct tally_roce_dst){ &x->rmember[r],
				mac };
		}
	} else {
		tally_roce_tmpl_init(back, &dp->self, rx->src.ip, rr->src_qpn,
			jc->qkey);
		dst[n++] = (struct tally_roce_dst){ back, &rx->src_mac };
	}
	return n;
}

/*
 * answer() for a RoCEv2 job: UD SENDs to the members' QPNs (or the
 * group's), from this lcore's QPN; the message copied and its CRC taken
 * once, each frame's ICRC combined from it (net/roce.h).
 */
static void
answer_roce(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *v, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr, struct tally_job_ctr *c, uint64_t mask)
{
	struct tally_roce_dst dst[TALLY_MAX_WORKERS];
	struct tally_roce_tmpl back;
	rte_be16_t sport = rte_cpu_to_be_16((uint16_t)(TALLY_DP_ROCE_SPORT +
		lc->index));
	unsigned int n, sent;
	struct rte_mbuf *body;
	uint32_t crc;
	uint8_t pad;

	body = tally_roce_body(dp->pool, &v->hdr, v->payload, v->payload_len,
		v->tagged ? v->tag : NULL, &crc, &pad);
	if (body == NULL) {
		lc->st.no_mbuf++;
		return;
	}
	n = roce_dsts(dp, lc, v, rx, rr, &back, dst, mask);
	if (o->n + n > OUT_MAX)
		flush(dp, lc, o);
	if (unlikely(tally_roce_fanout(dp->hdr_pool, body, crc, pad, sport,
			dp->self.qpn_base + lc->index, dst, n,
			o->m + o->n) != 0)) {
		lc->st.no_mbuf += n;
		return;
	}
	sent = queue_frames(dp, lc, o, n);
	if (v->kind == TALLY_V_NACK)
		sent = 0;	/* NACKs are not results */
	lc->st.results += sent;
	c->results += sent;
	c->bytes_out += (uint64_t)sent * (TALLY_HDR_LEN + v->payload_len +
		(v->tagged ? TALLY_TAG_LEN : 0));
}

/*
 * Sends what verdict v asks for: the result to every member of the job
 * in mask whose MAC this lcore knows, or once to its multicast group
 * (COMPLETE, but of a SCATTER or GATHER round), or the result or a NACK
 * back to the sender (RESEND, NACK). The payload
 * is written once into a body; the job's templates give the headers.
 * Result frames sent count in the job's row c.
 */
static void
answer_to(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *v, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr, struct tally_job_ctr *c, uint64_t mask)
{
	const struct tally_job_conf *jc = &v->job->conf;
	const struct tally_dp_jobx *x = tally_dp_jobx(v->job);
	struct tally_net_dst dst[TALLY_MAX_WORKERS];
	struct tally_net_tmpl back;
	struct rte_mbuf *body;
	unsigned int n = 0, sent;
	uint32_t ck;

	if (jc->roce) {
		answer_roce(dp, lc, o, v, rx, rr, c, mask);
		return;
	}
	/* Never handed to the port to vanish there: counted instead. */
	if (unlikely(TALLY_IPV4_UDP_LEN + TALLY_HDR_LEN +
			(unsigned int)v->payload_len > dp->mtu)) {
		lc->st.too_big += v->kind == TALLY_V_COMPLETE &&
			(jc->group.ip == 0 || v->part) ?
			(unsigned int)__builtin_popcountll(mask &
				~(~UINT64_C(0) << (jc->world - 1) << 1)) : 1;
		return;
	}
	body = tally_net_body(dp->pool, &v->hdr, v->payload, v->payload_len,
		v->tagged ? v->tag : NULL, &ck);
	if (body == NULL) {
		lc->st.no_mbuf++;
		return;
	}
	if (v->kind == TALLY_V_COMPLETE && jc->group.ip != 0 && !v->part) {
		dst[n++] = (struct tally_net_dst){ &x->group, &x->group_mac };
	} else if (v->kind == TALLY_V_COMPLETE) {
		for (unsigned int r = 0; r < jc->world; r++) {
			const struct rte_ether_addr *mac;

			if (!(mask >> r & 1))
				continue;
			mac = tally_net_neigh_lookup(lc->neigh,
				jc->members[r].ip);
			if (mac == NULL) {
				lc->st.no_neigh++;
				continue;
			}
			dst[n++] = (struct tally_net_dst){ &x->member[r], mac };
		}
	} else {
		/* Back to where it came from: rare, no template kept. */
		tally_net_tmpl_init(&back, &dp->self, &rx->src);
		dst[n++] = (struct tally_net_dst){ &back, &rx->src_mac };
	}
	sent = send_body(dp, lc, o, body, ck, dst, n);
	if (v->kind == TALLY_V_NACK)
		sent = 0;	/* NACKs are not results */
	lc->st.results += sent;
	c->results += sent;
	c->bytes_out += (uint64_t)sent * (TALLY_HDR_LEN + v->payload_len +
		(v->tagged ? TALLY_TAG_LEN : 0));
}

/*
 * Sends the DONEs held for member p->rank as one datagram (a bundle of
 * them, or the one alone) and frees p. A bundle counts as one result
 * frame.
 */
static void
pend_send(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct pend *p)
{
	struct tally_verdict d = { .kind = TALLY_V_COMPLETE, .part = 1,
		.job = (struct tally_job *)(uintptr_t)p->job, .hdr = p->first,
		.payload = p->rest, .payload_len = p->len };

	answer_to(dp, lc, o, &d, NULL, NULL,
		&tally_dp_jobx(p->job)->ctr[lc->index],
		UINT64_C(1) << p->rank);
	p->job = NULL;
}

/* Sends every member's held DONEs (the end of a burst). */
static void
pend_flush(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o)
{
	for (unsigned int i = 0; i < o->npend; i++)
		if (o->pend[i].job != NULL)
			pend_send(dp, lc, o, &o->pend[i]);
	o->npend = 0;
}

/* Sends the DONEs held for the members of job in mask, before others. */
static void
pend_flush_to(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_job *job, uint64_t mask)
{
	for (unsigned int i = 0; i < o->npend; i++)
		if (o->pend[i].job == job && (mask >> o->pend[i].rank & 1))
			pend_send(dp, lc, o, &o->pend[i]);
}

/*
 * Holds the DONE of verdict v (d: v with the DONE's header and tag) for
 * member r, to go in a bundle with r's other DONEs of the burst; a bundle
 * full (TALLY_BUNDLE_MAX, or a datagram of the MTU) goes now.
 */
static void
pend_add(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *d, unsigned int r)
{
	unsigned int stride = TALLY_HDR_LEN + (d->tagged ? TALLY_TAG_LEN : 0);
	unsigned int max = (dp->mtu - TALLY_IPV4_UDP_LEN) / stride, i;
	struct pend *p = NULL;

	for (i = 0; i < o->npend && p == NULL; i++)
		if (o->pend[i].job == d->job && o->pend[i].rank == r)
			p = &o->pend[i];
	if (p == NULL) {
		if (o->npend == PEND_MAX)
			pend_flush(dp, lc, o);
		p = &o->pend[o->npend++];
		*p = (struct pend){ .job = d->job, .rank = (uint8_t)r,
			.n = 1, .first = d->hdr };
		if (d->tagged) {
			memcpy(p->rest, d->tag, TALLY_TAG_LEN);
			p->len = TALLY_TAG_LEN;
		}
	} else {
		tally_hdr_encode(&d->hdr, p->rest + p->len);
		if (d->tagged)
			memcpy(p->rest + p->len + TALLY_HDR_LEN, d->tag,
				TALLY_TAG_LEN);
		p->len = (uint16_t)(p->len + stride);
		p->n++;
	}
	if (p->n >= TALLY_BUNDLE_MAX || p->n >= max)
		pend_send(dp, lc, o, p);
}

/*
 * The DONEs of part verdict v (d: its DONE) to the members of mask: held
 * for bundles (a UDP job), or sent now, one frame each (RoCEv2).
 */
static void
send_dones(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *d, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr, struct tally_job_ctr *c, uint64_t mask)
{
	if (d->job->conf.roce) {
		answer_to(dp, lc, o, d, rx, rr, c, mask);
		return;
	}
	for (unsigned int r = 0; r < d->job->conf.world; r++)
		if (mask >> r & 1)
			pend_add(dp, lc, o, d, r);
}

/*
 * Sends what verdict v asks for (answer_to()): a COMPLETE to every
 * member; one of a SCATTER or GATHER round (v->part) as two bodies, the
 * data to the members of v->data_mask and a DONE to the others, each
 * unicast even in a job with a multicast group (docs/protocol.md,
 * "Collectives").
 */
static void
answer(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *v, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr, struct tally_job_ctr *c)
{
	uint64_t all = ~UINT64_C(0);
	struct tally_verdict d;

	if (likely(!v->part)) {
		/* Held DONEs first: a member's frames keep their order. */
		if (unlikely(o->npend != 0))
			pend_flush(dp, lc, o);
		answer_to(dp, lc, o, v, rx, rr, c, all);
		return;
	}
	if (v->data_mask != 0) {
		pend_flush_to(dp, lc, o, v->job, v->data_mask);
		answer_to(dp, lc, o, v, rx, rr, c, v->data_mask);
	}
	if ((v->data_mask | ~(all << (v->job->conf.world - 1) << 1)) == all)
		return;
	d = *v;
	d.hdr = v->done;
	d.payload = NULL;
	d.payload_len = 0;
	memcpy(d.tag, v->done_tag, sizeof(d.tag));
	send_dones(dp, lc, o, &d, rx, rr, c, ~v->data_mask);
}

/*
 * A leaf's round to its spine (verdict UPSTREAM, two tiers): one frame to
 * the spine's port for the slot, from tally-dp's first port (the address
 * the spine knows this leaf by, whichever lcore sends), to the spine's
 * MAC once learned from its results, to the Ethernet broadcast address
 * until then (the spine never sends first). Counted in the job's row c
 * as bytes out, not as a result.
 */
static void
upstream(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_verdict *v, struct tally_job_ctr *c)
{
	static const struct rte_ether_addr bcast = {
		.addr_bytes = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
	};
	const struct tally_job_up *up = &v->job->conf.up;
	struct tally_addr to = { .ip = up->ip };
	const struct rte_ether_addr *mac;
	struct tally_net_tmpl t;
	struct tally_net_dst dst;
	struct rte_mbuf *body;
	uint32_t ck;

	to.port = rte_cpu_to_be_16((uint16_t)(rte_be_to_cpu_16(up->port) +
		v->hdr.slot % (up->nports > 0 ? up->nports : 1)));
	if (unlikely(TALLY_IPV4_UDP_LEN + TALLY_HDR_LEN +
			(unsigned int)v->payload_len > dp->mtu)) {
		lc->st.too_big++;
		return;
	}
	body = tally_net_body(dp->pool, &v->hdr, v->payload, v->payload_len,
		NULL, &ck);
	if (body == NULL) {
		lc->st.no_mbuf++;
		return;
	}
	mac = tally_net_neigh_lookup(lc->neigh, up->ip);
	if (mac == NULL) {
		mac = &bcast;
		lc->st.upstream_bcast++;
	}
	tally_net_tmpl_init(&t, &dp->self, &to);
	dst = (struct tally_net_dst){ &t, mac };
	if (o->n + 1 > OUT_MAX)
		flush(dp, lc, o);
	if (unlikely(tally_net_fanout(dp->hdr_pool, body, ck, dp->self.port,
			&dst, 1, o->m + o->n) != 0)) {
		lc->st.no_mbuf++;
		return;
	}
	if (queue_frames(dp, lc, o, 1) == 1) {
		lc->st.upstream++;
		c->bytes_out += TALLY_HDR_LEN + v->payload_len;
	}
}

/*
 * Counts verdict k on packet rx into the job's row c: what was accepted
 * (with its elements, read back from the wire header the engine decoded),
 * completed, answered from a stored result, NACKed, refused or dropped
 * as a duplicate of an open round (DROP with status OK).
 */
static inline void
count(struct tally_job_ctr *c, enum tally_verdict_kind k,
	const struct tally_verdict *v, const struct tally_net_rx *rx)
{
	if (unlikely(v->tier)) {
		c->rounds++;	/* the spine's result: no contribution */
		return;
	}
	if (unlikely(k == TALLY_V_UPSTREAM) &&
			(v->hdr.flags & TALLY_F_RETX)) {
		c->resent++;	/* a member's retransmission, forwarded */
		return;
	}
	if (likely(k == TALLY_V_TAKEN || k == TALLY_V_COMPLETE ||
			k == TALLY_V_UPSTREAM)) {
		const uint8_t *w = rx->payload;

		c->contributions++;
		/* A GATHER's request (not from its owner) carries none. */
		if (likely(w[offsetof(struct tally_wire_hdr, type)] !=
				TALLY_PT_GATHER ||
				w[offsetof(struct tally_wire_hdr, rank)] ==
				w[offsetof(struct tally_wire_hdr, status)]))
			c->elements += tally_ld_be16(w +
				offsetof(struct tally_wire_hdr, count));
		c->bytes_in += rx->len;
		c->rounds += k == TALLY_V_COMPLETE;
	} else if (k == TALLY_V_RESEND) {
		c->resent++;
	} else if (k == TALLY_V_NACK) {
		c->nacks++;
	} else {
		c->drops += v->status != TALLY_ST_OK;
		c->duplicates += v->status == TALLY_ST_OK;
	}
}

/*
 * A RoCEv2 packet's sender against the job its tally header names: the
 * job's transport, its Q_Key, and (source IP, source QPN) the member of
 * the rank it claims. Returns 1 when refused (counted here, and in the
 * job's row); 0 to go on, also when the header names no job or rank the
 * engine knows: the engine refuses and counts those.
 */
static int
roce_refused(struct tally_dp_lcore *lc, const struct tally_jobtab *tab,
	const struct tally_net_rx *rx, const struct tally_roce_rx *rr)
{
	const struct tally_job *job;
	enum tally_roce_drop why;
	uint8_t rank;

	if (unlikely(rx->len < TALLY_HDR_LEN))
		return 0;
	job = tally_jobtab_lookup(tab, tally_ld_be16(rx->payload +
		offsetof(struct tally_wire_hdr, job)));
	rank = rx->payload[offsetof(struct tally_wire_hdr, rank)];
	if (job == NULL || rank >= job->conf.world)
		return 0;
	if (!job->conf.roce)
		why = TALLY_ROCE_MEMBER;
	else if (rr->qkey != job->conf.qkey)
		why = TALLY_ROCE_QKEY;
	else if (rr->src_qpn != job->conf.qpn[rank] ||
			rx->src.ip != job->conf.members[rank].ip)
		why = TALLY_ROCE_MEMBER;
	else
		return 0;
	lc->st.roce_drops[why]++;
	tally_dp_jobx(job)->ctr[lc->index].drops++;
	return 1;
}

/*
 * One tally packet (alone, or one of a bundle's) through the engine; rr
 * is its RoCEv2 headers', NULL for UDP.
 */
static void
contribution(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	const struct tally_jobtab *tab, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr)
{
	struct tally_job_ctr *c;
	struct tally_verdict v;
	enum tally_verdict_kind k;

	if (rr != NULL && roce_refused(lc, tab, rx, rr))
		return;
	k = tally_agg_process(tab, &lc->agg, rx->payload, rx->len, &rx->src,
		&v);
	if (v.job == NULL)
		return;
	c = &tally_dp_jobx(v.job)->ctr[lc->index];
	count(c, k, &v, rx);
	/* Proven members (and their duplicates) teach us their MAC. */
	if (k != TALLY_V_DROP || v.status == TALLY_ST_OK)
		tally_net_neigh_learn(lc->neigh, rx->src.ip, &rx->src_mac);
	if (unlikely(k == TALLY_V_UPSTREAM))
		upstream(dp, lc, o, &v, c);
	else if (k >= TALLY_V_COMPLETE)
		answer(dp, lc, o, &v, rx, rr, c);
	/* The sender's frames before this one went missing: say so. */
	if (unlikely(v.gap_n != 0) &&
			tally_agg_gap(&v, rx->payload, rx->len, &v) ==
			TALLY_V_NACK)
		answer(dp, lc, o, &v, rx, rr, c);
}

/*
 * A tally frame of a slot this lcore owns: one packet, or a bundle of
 * header-only ones (docs/protocol.md, "Bundles"), each taken as if it
 * had come alone; a bundled header of another lcore's slot is refused
 * (misrouted), so no two lcores ever touch one slot. rr: the RoCEv2
 * headers, NULL for UDP. Consumes m.
 */
static void
aggregate(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf *m, const struct tally_net_rx *rx,
	const struct tally_roce_rx *rr)
{
	const struct tally_jobtab *tab;
	unsigned int k = tally_bundle_count(rx->payload, rx->len);
	struct tally_net_rx one;
	size_t stride;

	tab = atomic_load_explicit(&dp->tab, memory_order_acquire);
	if (likely(k == 1)) {
		contribution(dp, lc, o, tab, rx, rr);
		rte_pktmbuf_free(m);
		return;
	}
	one = *rx;
	stride = tally_bundle_stride(rx->payload);
	one.len = (uint16_t)stride;
	for (unsigned int i = 0; i < k; i++) {
		one.payload = rx->payload + i * stride;
		if (tally_ld_be16(one.payload + offsetof(struct tally_wire_hdr,
				slot)) % dp->nworkers != lc->index) {
			lc->st.misrouted++;
			continue;
		}
		contribution(dp, lc, o, tab, &one, rr);
	}
	rte_pktmbuf_free(m);
}

/*
 * Whether rx is a result (two tiers: a spine's, to a leaf job), which the
 * spine sends to our first port whatever its slot.
 */
static inline int
tier_result(const struct tally_net_rx *rx)
{
	uint8_t t = rx->payload[offsetof(struct tally_wire_hdr, type)];

	return t == TALLY_PT_SUM_RESULT || t == TALLY_PT_MAX_RESULT;
}

/*
 * Which lcore owns the frame's slot: the UDP port (RoCEv2: the QPN) it
 * was sent to. A slot that does not belong to that port is refused, so
 * no two lcores ever touch one slot. Returns the owner, or -1.
 */
static inline int
owner(const struct tally_dp *dp, struct tally_dp_lcore *lc,
	const struct tally_net_rx *rx)
{
	uint16_t slot;

	if (rx->len >= TALLY_HDR_LEN) {
		slot = tally_ld_be16(rx->payload +
			offsetof(struct tally_wire_hdr, slot));
		if (slot % dp->nworkers != rx->queue) {
			/* A spine's result comes to our first port. */
			if (tier_result(rx))
				return slot % dp->nworkers;
			lc->st.misrouted++;
			return -1;
		}
	}
	return rx->queue;
}

/* Whether an ARP sender claims an address the cache knows elsewhere. */
static inline int
arp_moves(const struct tally_dp_lcore *lc, const struct tally_net_rx *rx)
{
	const struct rte_ether_addr *mac = tally_net_neigh_lookup(lc->neigh,
		rx->src.ip);

	return mac != NULL && !rte_is_same_ether_addr(mac, &rx->src_mac);
}

/*
 * A RoCEv2 frame (classified TALLY_NET_ROCE): its BTH and DETH checked,
 * passed to the lcore of its destination QPN, or, on that lcore, its
 * ICRC checked and its packet taken by the engine. Consumes m.
 */
static void
roce_frame(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf *m, struct tally_net_rx *rx, struct rte_mbuf **disp[],
	uint16_t *ndisp)
{
	struct tally_roce_rx rr;
	enum tally_roce_drop why;
	int own;

	why = tally_roce_parse(&dp->self, rx, &rr);
	if (unlikely(why != TALLY_ROCE_OK)) {
		lc->st.roce_drops[why]++;
		rte_pktmbuf_free(m);
		return;
	}
	own = owner(dp, lc, rx);
	if (own < 0) {
		rte_pktmbuf_free(m);
		return;
	}
	if (own != lc->index) {
		m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD |
			RTE_MBUF_F_RX_L4_CKSUM_GOOD;
		disp[own][ndisp[own]++] = m;
		return;
	}
	if (unlikely(!tally_roce_icrc_ok(m))) {
		lc->st.roce_drops[TALLY_ROCE_ICRC]++;
		rte_pktmbuf_free(m);
		return;
	}
	aggregate(dp, lc, o, m, rx, &rr);
}

/* Sorts and handles one received frame. Consumes m. */
static void
handle(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf *m, struct rte_mbuf **disp[], uint16_t *ndisp)
{
	struct tally_net_rx rx;
	int own;

	switch (tally_net_classify(m, &dp->self, &rx)) {
	case TALLY_NET_TALLY:
		own = owner(dp, lc, &rx);
		if (own < 0)
			break;
		if (own == lc->index) {
			aggregate(dp, lc, o, m, &rx, NULL);
			return;
		}
		/* Checked once: the owner need not verify sums again. */
		m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD |
			RTE_MBUF_F_RX_L4_CKSUM_GOOD;
		disp[own][ndisp[own]++] = m;
		return;
	case TALLY_NET_ROCE:
		roce_frame(dp, lc, o, m, &rx, disp, ndisp);
		return;
	case TALLY_NET_ARP:
		/*
		 * Answered, never learned from: anyone can claim any
		 * address in an ARP request. MACs come from members' own
		 * proven frames (contribution()); a claim that would have
		 * moved one is counted.
		 */
		if (unlikely(arp_moves(lc, &rx)))
			lc->st.arp_refused++;
		tally_net_arp_reply(m, &dp->self);
		lc->st.arp_replies++;
		push(dp, lc, o, m);
		return;
	case TALLY_NET_ICMP:
		tally_net_icmp_reply(m, &dp->self);
		lc->st.icmp_replies++;
		push(dp, lc, o, m);
		return;
	case TALLY_NET_DROP:
		lc->st.net_drops[rx.why]++;
		break;
	}
	rte_pktmbuf_free(m);
}

/*
 * Asks for the bytes of frame m, all of its first segment: the UDP
 * checksum and then the engine read every byte of a tally frame, and
 * this is the first time they are touched (the NIC, or another lcore,
 * wrote them).
 */
static inline void
prefetch_frame(const struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	unsigned int len = rte_pktmbuf_data_len(m);

	for (unsigned int off = 0; off < len; off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(p + off);
}

/*
 * Handles a burst of k frames, each one's successor prefetched while it
 * is handled (two or four frames ahead, or the first line only, measured
 * no better in tally-bench dataplane).
 */
static inline void
handle_burst(struct tally_dp *dp, struct tally_dp_lcore *lc, struct out *o,
	struct rte_mbuf **pkts, uint16_t k, struct rte_mbuf **disp[],
	uint16_t *ndisp)
{
	if (k > 0)
		prefetch_frame(pkts[0]);
	for (uint16_t i = 0; i < k; i++) {
		if (i + 1 < k)
			prefetch_frame(pkts[i + 1]);
		handle(dp, lc, o, pkts[i], disp, ndisp);
	}
}

/* Passes frames of other lcores' slots to their rings. */
static void
dispatch(struct tally_dp *dp, struct tally_dp_lcore *lc,
	struct rte_mbuf **disp[], uint16_t *ndisp)
{
	for (uint16_t i = 0; i < dp->nworkers; i++) {
		unsigned int n;

		if (ndisp[i] == 0)
			continue;
		n = rte_ring_enqueue_burst(dp->lcores[i].ring,
			(void **)disp[i], ndisp[i], NULL);
		lc->st.dispatched += n;
		if (n < ndisp[i]) {
			lc->st.ring_full += ndisp[i] - n;
			rte_pktmbuf_free_bulk(disp[i] + n, ndisp[i] - n);
		}
		ndisp[i] = 0;
	}
}

/*
 * One pass of the loop: a burst from the port (when this lcore polls a
 * queue) and one from its ring, handled, dispatched and sent. Returns how
 * many frames it took. Benchmarks call it directly.
 */
uint16_t
tally_dp_lcore_poll(struct tally_dp_lcore *lc)
{
	struct tally_dp *dp = lc->dp;
	struct rte_mbuf *pkts[TALLY_DP_BURST];
	struct rte_mbuf *dbuf[TALLY_DP_MAX_WORKERS][TALLY_DP_BURST];
	struct rte_mbuf **disp[TALLY_DP_MAX_WORKERS];
	uint16_t ndisp[TALLY_DP_MAX_WORKERS] = { 0 };
	struct out *o = lc->out;
	uint16_t n = 0, k;

	for (unsigned int i = 0; i < dp->nworkers; i++)
		disp[i] = dbuf[i];
	if (lc->rxq != UINT16_MAX) {
		k = rte_eth_rx_burst(dp->port_id, lc->rxq, pkts, TALLY_DP_BURST);
		lc->st.rx += k;
		handle_burst(dp, lc, o, pkts, k, disp, ndisp);
		n += k;
	}
	if (lc->ring != NULL) {
		k = (uint16_t)rte_ring_dequeue_burst(lc->ring, (void **)pkts,
			TALLY_DP_BURST, NULL);
		handle_burst(dp, lc, o, pkts, k, disp, ndisp);
		n += k;
	}
	dispatch(dp, lc, disp, ndisp);
	if (o->npend > 0)
		pend_flush(dp, lc, o);
	if (o->n > 0)
		flush(dp, lc, o);
	return n;
}

int
tally_dp_lcore_main(void *arg)
{
	struct tally_dp_lcore *lc = arg;
	struct tally_dp *dp = lc->dp;
	unsigned int idle = 0;

	rte_rcu_qsbr_thread_register(dp->qsbr, lc->index);
	rte_rcu_qsbr_thread_online(dp->qsbr, lc->index);
	while (!dp->stop) {
		uint16_t n = tally_dp_lcore_poll(lc);

		rte_rcu_qsbr_quiescent(dp->qsbr, lc->index);
		if (n > 0)
			idle = 0;
		else
			tally_dp_idle(dp, lc, &idle);
	}
	rte_rcu_qsbr_thread_offline(dp->qsbr, lc->index);
	rte_rcu_qsbr_thread_unregister(dp->qsbr, lc->index);
	return 0;
}

/* The transmit buffer of an lcore, made before it runs. */
int
tally_dp_lcore_init(struct tally_dp_lcore *lc)
{
	lc->out = rte_zmalloc_socket("tally_out", sizeof(struct out),
		RTE_CACHE_LINE_SIZE, (int)rte_lcore_to_socket_id(lc->lcore_id));
	return lc->out == NULL ? -ENOMEM : 0;
}

void
tally_dp_lcore_fini(struct tally_dp_lcore *lc)
{
	/* The port may be gone: drop what was never sent. */
	if (lc->out != NULL && lc->out->n > 0)
		rte_pktmbuf_free_bulk(lc->out->m, lc->out->n);
	rte_free(lc->out);
	lc->out = NULL;
}
