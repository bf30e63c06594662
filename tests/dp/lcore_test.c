/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp's lcore loop and job table on a real port (net_ring: two
 * rte_rings made into an ethdev): contribution frames go into the rx
 * ring, tally_dp_lcore_poll() runs once, and every frame it sent is read
 * back from the tx ring and checked byte by byte with the packet-layer
 * suites' own checksum (tests/net/frame.c).
 *
 * What it pins down: results take their headers from the templates that
 * tally_dp_job_add() built, and their destination MAC from the lcore's
 * neighbour cache at the time they are sent (a member that shows up with
 * a new MAC gets the next result there); a job removed and added again
 * with other member addresses gets new templates; the multicast group
 * gets one frame; a retransmission and a NACK go back to the sender
 * (headers built on the spot); rounds of other lengths keep the
 * checksums right; a bundle of headers alone is taken header by header,
 * another lcore's slot refused; every mbuf goes back to its pool.
 *
 * And what tally-dp must refuse: an ARP request that claims a member's
 * address never moves the member's results (nor does one from a stranger
 * teach a MAC), counted in arp_refused; a result larger than the port's
 * MTU is counted in too_big, never handed to the port; a job whose memory
 * or packets tally-dp cannot serve is not added, with a sentence; a
 * deleted job's final counters come back with its deletion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <tally/limits.h>

#include "dp.h"
#include "frame.h"

#define RING_SIZE	1024
#define NB_MBUFS	1023
#define WORLD		3
#define MEMBER_PORT	40000
#define GROUP_IP	UINT32_C(0xef010203)	/* 239.1.2.3 */
#define TOKEN		UINT64_C(0x0123456789abcdef)
#define MAX_ELEMS	500	/* a result body within one default mbuf */
#define PORT_MTU	2100	/* IPv4 packets of MAX_ELEMS x i32 fit */

static struct tally_dp dp;
static struct tally_dp_lcore *lc;
static struct rte_ring *rxr, *txr;
static struct rte_mempool *frame_pool;

/* Member r of a job: 10.0.2.(10 + r + shift), MEMBER_PORT + r + shift. */
static struct tally_addr
maddr(unsigned int r, unsigned int shift)
{
	return (struct tally_addr){
		.ip = rte_cpu_to_be_32(RTE_IPV4(10, 0, 2, 10 + r + shift)),
		.port = rte_cpu_to_be_16((uint16_t)(MEMBER_PORT + r + shift)),
	};
}

/* MAC number k of member r: 02:00:00:02:k:r. */
static struct rte_ether_addr
mmac(unsigned int r, unsigned int k)
{
	return (struct rte_ether_addr){{ 0x02, 0, 0, 0x02, (uint8_t)k,
		(uint8_t)r }};
}

static int
job_add(uint16_t id, unsigned int shift, int group, uint16_t elems)
{
	char why[256];
	struct tally_job_conf c = {
		.id = id, .token = TOKEN, .world = WORLD, .window = 4,
		.max_elems = elems,
	};

	for (unsigned int r = 0; r < WORLD; r++)
		c.members[r] = maddr(r, shift);
	if (group) {
		c.group.ip = rte_cpu_to_be_32(GROUP_IP);
		c.group.port = rte_cpu_to_be_16(MEMBER_PORT);
	}
	return tally_dp_job_add(&dp, &c, TALLY_ENC_ALL, why, sizeof(why));
}

/* The i32 element e of rank r's contribution to (slot, set). */
static uint32_t contrib_seq;	/* send_contrib()'s sequence number (flag
				 * SEQ); 0: none */
static uint8_t contrib_type = TALLY_PT_SUM; /* send_contrib()'s type */
static uint8_t contrib_owner;	/* ... and owner (SCATTER, GATHER) */

static uint32_t
elem(unsigned int r, unsigned int slot, unsigned int set, unsigned int e)
{
	return (uint32_t)(r + 1) * 0x01000193u + slot * 77u + set * 5u + e;
}

/*
 * Puts rank r's contribution of job id (slot, round set, count i32
 * elements)
 * into the rx ring, from member address a and MAC mac.
 */
static void
send_contrib(uint16_t id, unsigned int r, unsigned int slot,
	unsigned int set, uint16_t count, struct tally_addr a,
	struct rte_ether_addr mac)
{
	uint8_t pl[TALLY_HDR_LEN + 4 * MAX_ELEMS], frame[F_PAY + sizeof(pl)];
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = contrib_type,
		.flags = set & 1 ? TALLY_F_SET : 0, .enc = TALLY_ENC_I32,
		.job = id, .token = TOKEN, .rank = (uint8_t)r,
		.status = tally_type_is_part(contrib_type) ? contrib_owner : 0,
		.slot = (uint16_t)slot, .offset = slot * 1000u,
		.count = count, .next_block = TALLY_NO_BLOCK, .round = set,
	};
	struct udp_spec s;
	struct rte_mbuf *m;
	size_t len;

	if (contrib_seq != 0) {
		h.flags |= TALLY_F_SEQ;
		h.next_block = contrib_seq;
	}
	tally_hdr_encode(&h, pl);
	for (unsigned int e = 0; e < count; e++) {
		uint32_t v = elem(r, slot, set, e);

		memcpy(pl + TALLY_HDR_LEN + 4 * e, &v, 4);
	}
	/* A GATHER's request, from a member that does not own it: bare. */
	if (contrib_type == TALLY_PT_GATHER && r != contrib_owner)
		count = 0;
	s = test_udp_spec(pl, TALLY_HDR_LEN + 4u * count);
	s.sip = a.ip;
	s.sport = rte_be_to_cpu_16(a.port);
	len = build_udp(frame, &s);
	memcpy(frame + 6, mac.addr_bytes, 6);	/* no checksum covers it */
	m = to_mbuf(frame_pool, frame, len);
	assert_non_null(m);
	assert_int_equal(rte_ring_enqueue(rxr, m), 0);
}

/* Runs the loop once over what the rx ring holds; all of it is taken. */
static void
poll_all(void)
{
	unsigned int want = rte_ring_count(rxr);

	assert_int_equal(tally_dp_lcore_poll(lc), want);
	assert_int_equal(rte_ring_count(rxr), 0);
}

/* What a sent frame says, read from a flat copy of it. */
struct sent {
	uint8_t f[F_PAY + TALLY_HDR_LEN + 4 * MAX_ELEMS];
	uint32_t len;
	struct rte_ether_addr dmac;
	rte_be32_t dip;
	rte_be16_t dport;
	struct tally_hdr h;
};

/*
 * Takes up to max frames from the tx ring into out (freeing the mbufs),
 * each checked: Ethernet from our MAC, IPv4 and UDP from our address and
 * the lcore's port, lengths, both checksums. Returns how many.
 */
static unsigned int
take_sent(struct sent *out, unsigned int max)
{
	unsigned int n = 0;
	void *p;

	while (rte_ring_dequeue(txr, &p) == 0) {
		struct rte_mbuf *m = p;
		struct sent *s = &out[n];
		const uint8_t *f;
		uint32_t hl;

		assert_true(n < max);
		s->len = m->pkt_len;
		assert_true(s->len <= sizeof(s->f));
		f = rte_pktmbuf_read(m, 0, s->len, s->f);
		assert_non_null(f);
		if (f != s->f)
			memcpy(s->f, f, s->len);
		rte_pktmbuf_free(m);
		f = s->f;
		memcpy(s->dmac.addr_bytes, f, 6);
		assert_memory_equal(f + 6, dp.self.mac.addr_bytes, 6);
		assert_int_equal(get16(f + 12), 0x0800);
		assert_int_equal(get16(f + F_IP + 2), s->len - 14);
		assert_true(test_ip_cksum_ok(f));
		assert_memory_equal(f + F_IP + 12, &dp.self.ip, 4);
		memcpy(&s->dip, f + F_IP + 16, 4);
		assert_int_equal(get16(f + F_L4), SELF_PORT);
		memcpy(&s->dport, f + F_L4 + 2, 2);
		assert_int_equal(get16(f + F_L4 + 4), s->len - F_L4);
		assert_int_not_equal(get16(f + F_L4 + 6), 0);
		assert_true(test_udp_cksum_ok(f));
		/* A bundle of DONEs: its first header. */
		hl = s->len - F_PAY;
		if (tally_done_bundle_count(f + F_PAY, hl) > 1)
			hl = (uint32_t)tally_bundle_stride(f + F_PAY);
		assert_int_equal(tally_hdr_decode(f + F_PAY, hl, &s->h),
			TALLY_ST_OK);
		n++;
	}
	return n;
}

/* Frame s carries the sum of the WORLD ranks' (slot, set) elements. */
static void
assert_sum(const struct sent *s, unsigned int slot, unsigned int set,
	uint16_t count)
{
	assert_int_equal(s->h.type, TALLY_PT_SUM_RESULT);
	assert_int_equal(s->h.slot, slot);
	assert_int_equal(s->h.count, count);
	assert_int_equal(s->len, F_PAY + TALLY_HDR_LEN + 4u * count);
	for (unsigned int e = 0; e < count; e++) {
		uint32_t got, want = 0;

		for (unsigned int r = 0; r < WORLD; r++)
			want += elem(r, slot, set, e);
		memcpy(&got, s->f + F_PAY + TALLY_HDR_LEN + 4 * e, 4);
		assert_int_equal(got, want);
	}
}

/* The frame of s that went to a, or NULL. */
static const struct sent *
to_addr(const struct sent *s, unsigned int n, struct tally_addr a)
{
	for (unsigned int i = 0; i < n; i++)
		if (s[i].dip == a.ip && s[i].dport == a.port)
			return &s[i];
	return NULL;
}

/* One complete round of job id: every rank from its address and MAC. */
static void
round_of(uint16_t id, unsigned int slot, unsigned int set, uint16_t count,
	unsigned int shift, const struct rte_ether_addr *macs)
{
	for (unsigned int r = 0; r < WORLD; r++)
		send_contrib(id, r, slot, set, count, maddr(r, shift), macs[r]);
	poll_all();
}

static void
assert_pools_full(void)
{
	assert_int_equal(rte_mempool_avail_count(dp.pool), NB_MBUFS);
	if (dp.hdr_pool != dp.pool)
		assert_int_equal(rte_mempool_avail_count(dp.hdr_pool),
			2 * NB_MBUFS + 1);
	assert_int_equal(rte_mempool_avail_count(frame_pool), NB_MBUFS);
}

/* Every member gets the sum, from the job's templates, at its MAC. */
static void
members_get_results(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];
	const struct tally_dp_jobx *x;
	const struct tally_jobtab *tab;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 1);
	assert_int_equal(job_add(11, 0, 0, 256), 0);
	/* The templates are the job's own, built when it was added. */
	tab = atomic_load(&dp.tab);
	assert_non_null(tab);
	assert_int_equal(dp.jobs[0]->conf.id, 11);
	x = tally_dp_jobx(dp.jobs[0]);
	for (unsigned int r = 0; r < WORLD; r++) {
		struct tally_addr a = maddr(r, 0);

		assert_memory_equal(x->member[r].hdr + F_IP + 16, &a.ip, 4);
		assert_memory_equal(x->member[r].hdr + F_L4 + 2, &a.port, 2);
	}
	round_of(11, 1, 0, 256, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		const struct sent *f = to_addr(s, WORLD, maddr(r, 0));

		assert_non_null(f);
		assert_memory_equal(f->dmac.addr_bytes, macs[r].addr_bytes, 6);
		assert_sum(f, 1, 0, 256);
	}
	assert_int_equal(lc->st.no_neigh, 0);
	assert_int_equal(lc->st.no_mbuf, 0);
	assert_int_equal(tally_dp_job_del(&dp, 11, NULL), 0);
	assert_pools_full();
}

/*
 * A SCATTER round's sum goes to its owner alone and a GATHER round's
 * data to every member but its owner, each of the others getting a DONE
 * (a header, no payload); unicast even in a job with a multicast group.
 */
static void
parts_routed(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];
	const struct sent *f;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 1);
	assert_int_equal(job_add(16, 0, 1, 256), 0);
	contrib_type = TALLY_PT_SCATTER;
	contrib_owner = 1;
	round_of(16, 2, 0, 100, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		f = to_addr(s, WORLD, maddr(r, 0));
		assert_non_null(f);
		assert_memory_equal(f->dmac.addr_bytes, macs[r].addr_bytes, 6);
		assert_int_equal(f->h.status, 1);
		if (r != 1) {
			assert_int_equal(f->h.type, TALLY_PT_DONE);
			assert_int_equal(f->h.count, 100);
			assert_int_equal(f->len, F_PAY + TALLY_HDR_LEN);
			continue;
		}
		assert_int_equal(f->h.type, TALLY_PT_PART_RESULT);
		assert_int_equal(f->len, F_PAY + TALLY_HDR_LEN + 4u * 100);
		for (unsigned int e = 0; e < 100; e++) {
			uint32_t got, want = 0;

			for (unsigned int k = 0; k < WORLD; k++)
				want += elem(k, 2, 0, e);
			memcpy(&got, f->f + F_PAY + TALLY_HDR_LEN + 4 * e, 4);
			assert_int_equal(got, want);
		}
	}
	contrib_type = TALLY_PT_GATHER;
	contrib_owner = 2;
	round_of(16, 3, 0, 50, 0, macs);
	contrib_type = TALLY_PT_SUM;
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		f = to_addr(s, WORLD, maddr(r, 0));
		assert_non_null(f);
		assert_int_equal(f->h.type, r == 2 ? TALLY_PT_DONE :
			TALLY_PT_PART_RESULT);
		assert_int_equal(f->len, F_PAY + TALLY_HDR_LEN +
			(r == 2 ? 0 : 4u * 50));
		for (unsigned int e = 0; r != 2 && e < 50; e++) {
			uint32_t got, want = elem(2, 3, 0, e);

			memcpy(&got, f->f + F_PAY + TALLY_HDR_LEN + 4 * e, 4);
			assert_int_equal(got, want);
		}
	}
	assert_int_equal(lc->st.no_neigh, 0);
	assert_int_equal(tally_dp_job_del(&dp, 16, NULL), 0);
	assert_pools_full();
}

/*
 * A member that comes back with another MAC (a NIC swapped, a VM moved)
 * gets the next result there: the MAC is not part of the template.
 */
static void
mac_change(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];
	const struct sent *f;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 1);
	assert_int_equal(job_add(12, 0, 0, 64), 0);
	round_of(12, 0, 0, 64, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	f = to_addr(s, WORLD, maddr(1, 0));
	assert_non_null(f);
	assert_memory_equal(f->dmac.addr_bytes, macs[1].addr_bytes, 6);
	macs[1] = mmac(1, 2);
	round_of(12, 0, 1, 64, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		f = to_addr(s, WORLD, maddr(r, 0));
		assert_non_null(f);
		assert_memory_equal(f->dmac.addr_bytes, macs[r].addr_bytes, 6);
		assert_sum(f, 0, 1, 64);
	}
	assert_int_equal(tally_dp_job_del(&dp, 12, NULL), 0);
	assert_pools_full();
}

/*
 * The same job id removed and added again with other member addresses:
 * results follow the new ones, none goes to an old one.
 */
static void
job_readded(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 3);
	assert_int_equal(job_add(13, 0, 0, 32), 0);
	round_of(13, 2, 0, 32, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	assert_int_equal(tally_dp_job_del(&dp, 13, NULL), 0);
	assert_int_equal(job_add(13, 5, 0, 32), 0);
	round_of(13, 2, 0, 32, 5, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		assert_non_null(to_addr(s, WORLD, maddr(r, 5)));
		assert_sum(to_addr(s, WORLD, maddr(r, 5)), 2, 0, 32);
	}
	/* maddr(r, 0) for r < 3 is not among 10.0.2.15.. */
	for (unsigned int r = 0; r < WORLD; r++)
		assert_null(to_addr(s, WORLD, maddr(r, 0)));
	assert_int_equal(tally_dp_job_del(&dp, 13, NULL), 0);
	assert_pools_full();
}

/* A job with a multicast group: one frame a round, to the group. */
static void
group_result(void **state)
{
	const struct rte_ether_addr gmac = {{ 0x01, 0x00, 0x5e, 0x01, 0x02,
		0x03 }};
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 4);
	assert_int_equal(job_add(14, 0, 1, 256), 0);
	round_of(14, 3, 0, 256, 0, macs);
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_int_equal(s[0].dip, rte_cpu_to_be_32(GROUP_IP));
	assert_int_equal(s[0].dport, rte_cpu_to_be_16(MEMBER_PORT));
	assert_memory_equal(s[0].dmac.addr_bytes, gmac.addr_bytes, 6);
	assert_sum(&s[0], 3, 0, 256);
	assert_int_equal(tally_dp_job_del(&dp, 14, NULL), 0);
	assert_pools_full();
}

/*
 * Rounds of 1 to MAX_ELEMS elements through the same templates: the lengths
 * and both checksums follow each round's payload (odd byte counts are
 * tests/net/result_test.c's: an i32 payload is always 4k bytes).
 */
static void
several_lengths(void **state)
{
	static const uint16_t counts[] = { 1, 2, 3, 255, 256, MAX_ELEMS };
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 5);
	assert_int_equal(job_add(15, 0, 0, MAX_ELEMS), 0);
	for (size_t k = 0; k < RTE_DIM(counts); k++) {
		round_of(15, 0, (unsigned int)k, counts[k], 0, macs);
		assert_int_equal(take_sent(s, WORLD), WORLD);
		for (unsigned int r = 0; r < WORLD; r++)
			assert_sum(&s[r], 0, (unsigned int)k, counts[k]);
	}
	assert_int_equal(tally_dp_job_del(&dp, 15, NULL), 0);
	assert_pools_full();
}

/*
 * Replies to one sender: a retransmission of a completed round gets the
 * stored result back, a contribution too early gets a NACK; both to the
 * sender's address and MAC, headers made on the spot.
 */
static void
replies_to_sender(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 6);
	assert_int_equal(job_add(16, 0, 0, 100), 0);
	round_of(16, 1, 0, 100, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	/* Rank 2 did not get it: it sends again. */
	send_contrib(16, 2, 1, 0, 100, maddr(2, 0), macs[2]);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_int_equal(s[0].dip, maddr(2, 0).ip);
	assert_int_equal(s[0].dport, maddr(2, 0).port);
	assert_memory_equal(s[0].dmac.addr_bytes, macs[2].addr_bytes, 6);
	assert_true(s[0].h.flags & TALLY_F_RETX);
	assert_sum(&s[0], 1, 0, 100);
	/* Rank 0 moves on to round 1, then to 2: too early. */
	send_contrib(16, 0, 1, 1, 100, maddr(0, 0), macs[0]);
	send_contrib(16, 0, 1, 2, 100, maddr(0, 0), macs[0]);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_int_equal(s[0].h.type, TALLY_PT_NACK);
	assert_int_equal(s[0].h.status, TALLY_ST_EARLY);
	assert_int_equal(s[0].dip, maddr(0, 0).ip);
	assert_memory_equal(s[0].dmac.addr_bytes, macs[0].addr_bytes, 6);
	assert_int_equal(tally_dp_job_del(&dp, 16, NULL), 0);
	assert_pools_full();
}

/*
 * The NACK gap (docs/protocol.md, "Gaps"): rank 0's frame numbered 2 is
 * lost, its frame numbered 3 shows it: a NACK gap goes back to rank 0
 * alone, naming 2, besides the frame's own handling; the round's
 * result, once complete, is numbered.
 */
static void
gap_to_sender(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];
	struct tally_dp_counter ctr[256];
	unsigned int n;
	uint64_t gaps = 0, results = lc->st.results;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 7);
	assert_int_equal(job_add(18, 0, 0, 100), 0);

	contrib_seq = 1;
	send_contrib(18, 0, 0, 0, 100, maddr(0, 0), macs[0]);
	contrib_seq = 3;
	send_contrib(18, 0, 2, 0, 100, maddr(0, 0), macs[0]);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_int_equal(lc->st.results, results);	/* not a result */
	assert_int_equal(s[0].h.type, TALLY_PT_NACK);
	assert_int_equal(s[0].h.status, TALLY_ST_GAP);
	assert_int_equal(s[0].h.rank, 0);
	assert_int_equal(s[0].h.slot, 2);
	assert_int_equal(s[0].h.next_block, 2);
	assert_int_equal(s[0].h.count, 1);
	assert_int_equal(s[0].len, F_PAY + TALLY_HDR_LEN);
	assert_int_equal(s[0].dip, maddr(0, 0).ip);
	assert_memory_equal(s[0].dmac.addr_bytes, macs[0].addr_bytes, 6);
	/* The others complete slot 0's round: a numbered result. */
	contrib_seq = 1;
	send_contrib(18, 1, 0, 0, 100, maddr(1, 0), macs[1]);
	send_contrib(18, 2, 0, 0, 100, maddr(2, 0), macs[2]);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), WORLD);
	assert_sum(&s[0], 0, 0, 100);
	assert_true(s[0].h.flags & TALLY_F_SEQ);
	assert_int_equal(s[0].h.next_block, 1);
	contrib_seq = 0;
	n = tally_dp_counters(&dp, -1, ctr, 256);
	assert_true(n <= 256);
	for (unsigned int i = 0; i < n; i++) {
		assert_string_not_equal(ctr[i].name, "drop_gap");
		if (strcmp(ctr[i].name, "gap_nacks") == 0)
			gaps = ctr[i].value;
	}
	assert_true(gaps >= 1);
	assert_int_equal(tally_dp_job_del(&dp, 18, NULL), 0);
	assert_pools_full();
}

/*
 * Puts rank r's bundle of job id into the rx ring: for each slot of
 * slots[0..k), a header alone of a block-sparse stream's round on set 0
 * (docs/protocol.md, "Bundles").
 */
static void
send_bundle(uint16_t id, unsigned int r, const unsigned int *slots,
	unsigned int k, struct rte_ether_addr mac)
{
	uint8_t pl[TALLY_BUNDLE_MAX * TALLY_HDR_LEN], frame[F_PAY + sizeof(pl)];
	struct udp_spec sp;
	struct rte_mbuf *m;
	size_t len;

	for (unsigned int i = 0; i < k; i++) {
		struct tally_hdr h = {
			.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
			.flags = TALLY_F_SPARSE, .enc = TALLY_ENC_I32,
			.job = id, .token = TOKEN, .rank = (uint8_t)r,
			.slot = (uint16_t)slots[i],
			.offset = slots[i] * 256u, .count = 0,
			.next_block = TALLY_NO_BLOCK,
		};

		tally_hdr_encode(&h, pl + i * TALLY_HDR_LEN);
	}
	sp = test_udp_spec(pl, k * TALLY_HDR_LEN);
	sp.sip = maddr(r, 0).ip;
	sp.sport = rte_be_to_cpu_16(maddr(r, 0).port);
	len = build_udp(frame, &sp);
	memcpy(frame + 6, mac.addr_bytes, 6);
	m = to_mbuf(frame_pool, frame, len);
	assert_non_null(m);
	assert_int_equal(rte_ring_enqueue(rxr, m), 0);
}

/*
 * A bundle's headers are taken one by one, as if each had come alone:
 * with two worker lcores, the headers of this lcore's slots (even) end
 * their rounds, each result to every member; the header of the other
 * lcore's slot is refused as misrouted.
 */
static void
bundles(void **state)
{
	static const unsigned int slots[] = { 0, 1, 2 };
	struct rte_ether_addr macs[WORLD];
	struct sent s[2 * WORLD];
	struct tally_job *job;
	uint64_t misrouted = lc->st.misrouted;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 7);
	assert_int_equal(job_add(17, 0, 0, 100), 0);
	dp.nworkers = 2;
	for (unsigned int r = 0; r < WORLD; r++)
		send_bundle(17, r, slots, 3, macs[r]);
	poll_all();
	dp.nworkers = 1;
	assert_int_equal(lc->st.misrouted - misrouted, WORLD);
	assert_int_equal(take_sent(s, 2 * WORLD), 2 * WORLD);
	for (unsigned int i = 0; i < 2 * WORLD; i++) {
		assert_int_equal(s[i].h.type, TALLY_PT_SUM_RESULT);
		assert_true(s[i].h.flags & TALLY_F_SPARSE);
		assert_int_equal(s[i].h.count, 0);
		assert_true(s[i].h.slot == 0 || s[i].h.slot == 2);
		assert_int_equal(s[i].len, F_PAY + TALLY_HDR_LEN);
	}
	job = tally_jobtab_lookup(atomic_load(&dp.tab), 17);
	assert_non_null(job);
	assert_int_equal(tally_dp_jobx(job)->ctr[0].contributions, 2 * WORLD);
	assert_int_equal(tally_dp_jobx(job)->ctr[0].rounds, 2);
	assert_int_equal(tally_dp_job_del(&dp, 17, NULL), 0);
	assert_pools_full();
}

/*
 * Puts an ARP request for our address into the rx ring: sender address
 * ip with MAC mac (in the Ethernet header and the ARP body alike).
 */
static void
send_arp(rte_be32_t ip, struct rte_ether_addr mac)
{
	uint8_t frame[64];
	size_t len = build_arp(frame, 1, self_ip);
	struct rte_mbuf *m;

	memcpy(frame + 6, mac.addr_bytes, 6);
	memcpy(frame + F_IP + 8, mac.addr_bytes, 6);
	memcpy(frame + F_IP + 14, &ip, 4);
	m = to_mbuf(frame_pool, frame, len);
	assert_non_null(m);
	assert_int_equal(rte_ring_enqueue(rxr, m), 0);
}

/* Takes the one frame sent, an ARP reply, and checks it went to mac. */
static void
take_arp_reply(struct rte_ether_addr mac)
{
	struct rte_mbuf *m;
	const uint8_t *f;
	void *p = NULL;

	assert_int_equal(rte_ring_dequeue(txr, &p), 0);
	m = p;
	f = rte_pktmbuf_mtod(m, const uint8_t *);
	assert_int_equal(get16(f + 12), 0x0806);
	assert_int_equal(get16(f + F_IP + 6), 2);
	assert_memory_equal(f, mac.addr_bytes, 6);
	rte_pktmbuf_free(m);
	assert_int_equal(rte_ring_count(txr), 0);
}

/*
 * ARP spoofing: a host claims member 1's address in an ARP request. It
 * gets tally-dp's answer, but member 1's results stay at member 1's MAC
 * (learned from its proven frames), and the claim is counted. A stranger's
 * ARP teaches nothing either.
 */
static void
arp_spoof(void **state)
{
	static const struct rte_ether_addr evil = {{ 0x02, 0x66, 0, 0, 0, 1 }};
	uint64_t refused = lc->st.arp_refused, replies = lc->st.arp_replies;
	struct rte_ether_addr macs[WORLD];
	struct sent s[WORLD];
	const struct sent *f;
	rte_be32_t stranger = rte_cpu_to_be_32(RTE_IPV4(10, 0, 9, 9));

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 8);
	assert_int_equal(job_add(18, 0, 0, 64), 0);
	round_of(18, 0, 0, 64, 0, macs);
	assert_int_equal(take_sent(s, WORLD), WORLD);
	/* Between member 1's contribution and the round's end. */
	for (unsigned int r = 0; r < WORLD - 1; r++)
		send_contrib(18, r, 0, 1, 64, maddr(r, 0), macs[r]);
	poll_all();
	send_arp(maddr(1, 0).ip, evil);
	poll_all();
	take_arp_reply(evil);
	assert_int_equal(lc->st.arp_replies - replies, 1);
	assert_int_equal(lc->st.arp_refused - refused, 1);
	send_contrib(18, WORLD - 1, 0, 1, 64, maddr(WORLD - 1, 0),
		macs[WORLD - 1]);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		f = to_addr(s, WORLD, maddr(r, 0));
		assert_non_null(f);
		assert_memory_equal(f->dmac.addr_bytes, macs[r].addr_bytes, 6);
		assert_sum(f, 0, 1, 64);
	}
	/* Unknown sender: answered, not learned, not a refusal. */
	send_arp(stranger, evil);
	poll_all();
	take_arp_reply(evil);
	assert_null(tally_net_neigh_lookup(lc->neigh, stranger));
	assert_int_equal(lc->st.arp_refused - refused, 1);
	assert_int_equal(tally_dp_job_del(&dp, 18, NULL), 0);
	assert_pools_full();
}

/*
 * A result larger than the port's MTU (a port whose MTU shrank under a
 * job, or a member sending a wider encoding than the job declared) is
 * not handed to the port: counted in too_big, once a member.
 */
static void
result_too_big(void **state)
{
	uint64_t too_big = lc->st.too_big, tx = lc->st.tx;
	struct rte_ether_addr macs[WORLD];
	struct tally_job_ctr c;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 9);
	assert_int_equal(job_add(19, 0, 0, 300), 0);
	dp.mtu = TALLY_IPV4_UDP_LEN + TALLY_HDR_LEN + 4 * 300 - 1;
	round_of(19, 1, 0, 300, 0, macs);
	dp.mtu = PORT_MTU;
	assert_int_equal(rte_ring_count(txr), 0);
	assert_int_equal(lc->st.too_big - too_big, WORLD);
	assert_int_equal(lc->st.tx, tx);
	assert_int_equal(tally_dp_job_del(&dp, 19, &c), 0);
	assert_int_equal(c.rounds, 1);
	assert_int_equal(c.results, 0);
	assert_pools_full();
}

/* job_del hands back the job's counters, final: the grace period passed. */
static void
final_counters(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[2 * WORLD];
	struct tally_job_ctr c;

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 10);
	assert_int_equal(job_add(20, 0, 0, 16), 0);
	round_of(20, 0, 0, 16, 0, macs);
	round_of(20, 1, 0, 16, 0, macs);
	assert_int_equal(take_sent(s, 2 * WORLD), 2 * WORLD);
	memset(&c, 0xff, sizeof(c));
	assert_int_equal(tally_dp_job_del(&dp, 20, &c), 0);
	assert_int_equal(c.contributions, 2 * WORLD);
	assert_int_equal(c.elements, 2 * WORLD * 16);
	assert_int_equal(c.rounds, 2);
	assert_int_equal(c.results, 2 * WORLD);
	assert_int_equal(c.bytes_out, 2 * WORLD * (TALLY_HDR_LEN + 64));
	assert_int_equal(c.drops, 0);
	assert_int_equal(tally_dp_job_del(&dp, 20, &c), -ENOENT);
}

/* job_add of conf with encodings encs; the sentence in why. */
static int
add_conf(uint16_t id, uint16_t window, uint16_t elems, int narrow,
	unsigned int encs, char *why, size_t wlen)
{
	struct tally_job_conf c = {
		.id = id, .token = TOKEN, .world = 1, .window = window,
		.max_elems = elems, .narrow = (uint8_t)narrow,
	};

	c.members[0] = maddr(0, 0);
	why[0] = '\0';
	return tally_dp_job_add(&dp, &c, encs, why, wlen);
}

/*
 * What tally-dp cannot serve is refused before anything is allocated:
 * a job over --max-job-mem (E2BIG), jobs over --mem-budget together
 * (ENOMEM, until one leaves), packets over the MTU for the encodings
 * declared, widened or narrow (EMSGSIZE).
 */
static void
admission(void **state)
{
	const unsigned int i8 = TALLY_ENC_BIT(TALLY_ENC_I8);
	char why[256];

	(void)state;
	dp.max_job_mem = 1u << 20;
	assert_int_equal(add_conf(21, 1024, 256, 0, TALLY_ENC_ALL, why,
		sizeof(why)), -E2BIG);
	assert_string_equal(why, "job 21 needs 2.1 MiB (window 1024 x "
		"max_elems 256); tally-dp takes at most 1.0 MiB a job "
		"(--max-job-mem)");
	dp.max_job_mem = 0;
	dp.mem_budget = 1u << 20;
	assert_int_equal(add_conf(21, 256, 256, 0, TALLY_ENC_ALL, why,
		sizeof(why)), 0);
	assert_int_equal(dp.mem_used, tally_job_mem_bytes(256, 256));
	assert_int_equal(add_conf(22, 256, 256, 0, TALLY_ENC_ALL, why,
		sizeof(why)), -ENOMEM);
	assert_string_equal(why, "job 22 needs 0.5 MiB; 0.5 of 1.0 MiB are "
		"taken by 1 job(s) (--mem-budget)");
	assert_int_equal(tally_dp_job_del(&dp, 21, NULL), 0);
	assert_int_equal(dp.mem_used, 0);
	assert_int_equal(add_conf(22, 256, 256, 0, TALLY_ENC_ALL, why,
		sizeof(why)), 0);
	assert_int_equal(tally_dp_job_del(&dp, 22, NULL), 0);
	dp.mem_budget = 0;
	/* PORT_MTU 2100: 2032 bytes of payload, 508 i32 or 2032 i8. */
	assert_int_equal(add_conf(23, 4, 511, 0, TALLY_ENC_ALL, why,
		sizeof(why)), -EMSGSIZE);
	assert_string_equal(why, "job 23: 511 elements of f32 make 2112-byte "
		"IPv4 packets (widened results), over the port's MTU of 2100 "
		"bytes; at most max_elems 508 for these encodings");
	assert_int_equal(add_conf(23, 4, 600, 0, i8, why, sizeof(why)),
		-EMSGSIZE);
	assert_non_null(strstr(why, "600 elements of i8 make 2468-byte"));
	assert_int_equal(add_conf(23, 4, 2032, 1, i8, why, sizeof(why)), 0);
	assert_int_equal(tally_dp_job_del(&dp, 23, NULL), 0);
	assert_int_equal(add_conf(23, 4, 2033, 1, i8, why, sizeof(why)),
		-EMSGSIZE);
	assert_int_equal(add_conf(23, 4, 508, 0, TALLY_ENC_ALL, why,
		sizeof(why)), 0);
	assert_int_equal(tally_dp_job_del(&dp, 23, NULL), 0);
	assert_int_equal(dp.njobs, 0);
	assert_pools_full();
}

/*
 * Two tiers at the lcore (docs/scale-out.md): a leaf job's completed
 * round leaves as one frame to its spine's port for the slot, from our
 * first port, with the wide partial sum, to the broadcast MAC until the
 * spine's is known; the spine's result (to our first port) goes to the
 * members and teaches the spine's MAC, which the next round's frame then
 * takes; a result with another token is refused and counted.
 */
#define SPINE_IP	RTE_IPV4(10, 0, 9, 1)
#define SPINE_PORT	47000

static void
send_result(uint16_t id, uint64_t token, unsigned int slot, unsigned int set,
	uint16_t count, const uint32_t *sum, struct rte_ether_addr mac)
{
	uint8_t pl[TALLY_HDR_LEN + 4 * MAX_ELEMS], frame[F_PAY + sizeof(pl)];
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM_RESULT,
		.flags = set & 1 ? TALLY_F_SET : 0, .enc = TALLY_ENC_I32,
		.job = id, .token = token, .rank = TALLY_RANK_ALL,
		.slot = (uint16_t)slot, .offset = slot * 1000u, .count = count,
		.next_block = TALLY_NO_BLOCK, .round = set,
	};
	struct udp_spec sp;
	struct rte_mbuf *m;
	size_t len;

	tally_hdr_encode(&h, pl);
	memcpy(pl + TALLY_HDR_LEN, sum, 4u * count);
	sp = test_udp_spec(pl, TALLY_HDR_LEN + 4u * count);
	sp.sip = rte_cpu_to_be_32(SPINE_IP);
	sp.sport = SPINE_PORT + 1;
	len = build_udp(frame, &sp);
	memcpy(frame + 6, mac.addr_bytes, 6);
	m = to_mbuf(frame_pool, frame, len);
	assert_non_null(m);
	assert_int_equal(rte_ring_enqueue(rxr, m), 0);
}

static void
tier_upstream(void **state)
{
	static const struct rte_ether_addr bcast = {{ 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff }};
	struct rte_ether_addr macs[WORLD], smac = {{ 0x02, 0, 0, 9, 9, 1 }};
	struct tally_job_conf c = {
		.id = 31, .token = TOKEN, .world = WORLD, .window = 4,
		.max_elems = 64,
		.up = { .ip = rte_cpu_to_be_32(SPINE_IP),
			.port = rte_cpu_to_be_16(SPINE_PORT), .nports = 2,
			.token = TOKEN ^ 1, .rank = 5, .world = 9 },
	};
	uint32_t up[16], spine[16];
	struct sent s[WORLD];
	char why[256];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++) {
		macs[r] = mmac(r, 1);
		c.members[r] = maddr(r, 0);
	}
	assert_int_equal(tally_dp_job_add(&dp, &c, TALLY_ENC_ALL, why,
		sizeof(why)), 0);
	round_of(31, 3, 0, 16, 0, macs);
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_int_equal(s[0].dip, rte_cpu_to_be_32(SPINE_IP));
	assert_int_equal(s[0].dport, rte_cpu_to_be_16(SPINE_PORT + 3 % 2));
	assert_memory_equal(s[0].dmac.addr_bytes, bcast.addr_bytes, 6);
	assert_int_equal(s[0].h.type, TALLY_PT_SUM);
	assert_int_equal(s[0].h.token, TOKEN ^ 1);
	assert_int_equal(s[0].h.rank, 5);
	assert_int_equal(s[0].h.slot, 3);
	memcpy(up, s[0].f + F_PAY + TALLY_HDR_LEN, sizeof(up));
	for (unsigned int e = 0; e < 16; e++) {
		uint32_t want = 0;

		for (unsigned int r = 0; r < WORLD; r++)
			want += elem(r, 3, 0, e);
		assert_int_equal(up[e], want);
		spine[e] = want * 3;	/* the other leaves' too */
	}
	assert_int_equal(lc->st.upstream, 1);
	assert_int_equal(lc->st.upstream_bcast, 1);
	/* Another token: refused, nothing sent. */
	send_result(31, TOKEN, 3, 0, 16, spine, smac);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), 0);
	assert_int_equal(lc->agg.tier_refused, 1);
	assert_int_equal(lc->agg.drops[TALLY_ST_BAD_TOKEN], 1);
	/* The spine's result: every member gets it. */
	send_result(31, TOKEN ^ 1, 3, 0, 16, spine, smac);
	poll_all();
	assert_int_equal(take_sent(s, WORLD), WORLD);
	for (unsigned int r = 0; r < WORLD; r++) {
		const struct sent *f = to_addr(s, WORLD, maddr(r, 0));

		assert_non_null(f);
		assert_int_equal(f->h.type, TALLY_PT_SUM_RESULT);
		assert_int_equal(f->h.token, TOKEN);
		assert_memory_equal(f->f + F_PAY + TALLY_HDR_LEN, spine,
			sizeof(spine));
	}
	assert_int_equal(lc->agg.tier_results, 1);
	/* The next round goes to the spine's MAC, learned from its result. */
	round_of(31, 3, 1, 16, 0, macs);
	assert_int_equal(take_sent(s, WORLD), 1);
	assert_memory_equal(s[0].dmac.addr_bytes, smac.addr_bytes, 6);
	assert_int_equal(lc->st.upstream_bcast, 1);
	assert_int_equal(tally_dp_job_del(&dp, 31, NULL), 0);
	assert_pools_full();
}

/* The port, the dataplane's state as tally-dp's main.c builds it. */
static int
setup(void **state)
{
	int port;

	(void)state;
	rxr = rte_ring_create("lcore_rx", RING_SIZE, SOCKET_ID_ANY,
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	txr = rte_ring_create("lcore_tx", RING_SIZE, SOCKET_ID_ANY,
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	frame_pool = test_pool("frames", NB_MBUFS,
		RTE_PKTMBUF_HEADROOM + F_PAY + TALLY_HDR_LEN + 4 * MAX_ELEMS);
	if (rxr == NULL || txr == NULL || frame_pool == NULL)
		return -1;
	port = rte_eth_from_rings("lcore_test", &rxr, 1, &txr, 1,
		rte_socket_id());
	if (port < 0)
		return -1;
	dp.port_id = (uint16_t)port;
	dp.nworkers = 1;
	dp.max_jobs = 4;
	dp.self.ip = self_ip;
	dp.self.port = RTE_BE16(SELF_PORT);
	dp.self.nports = 1;
	lc = &dp.lcores[0];
	lc->dp = &dp;
	lc->lcore_id = rte_lcore_id();
	lc->index = 0;
	lc->neigh = tally_net_neigh_create(64, SOCKET_ID_ANY);
	if (lc->neigh == NULL || tally_dp_lcore_init(lc) != 0)
		return -1;
	/* Room for MAX_ELEMS of i32: tally-dp refuses jobs beyond it. */
	if (tally_dp_port_init(&dp, NB_MBUFS, PORT_MTU) != 0)
		return -1;
	lc->rxq = 0;
	lc->txq = 0;
	return tally_dp_jobs_init(&dp) == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	tally_dp_port_close(&dp);
	tally_dp_lcore_fini(lc);
	tally_net_neigh_destroy(lc->neigh);
	tally_dp_jobs_fini(&dp);
	if (dp.hdr_pool != dp.pool)
		rte_mempool_free(dp.hdr_pool);
	rte_mempool_free(dp.pool);
	rte_mempool_free(frame_pool);
	rte_ring_free(rxr);
	rte_ring_free(txr);
	return 0;
}

/*
 * The DONEs of a burst go to each member as one datagram, a bundle
 * (docs/protocol.md, "Bundles"), in the order the rounds completed, and
 * before anything else that member is sent: slots 0-2 of owner 1 and
 * slot 3 of owner 0 in one poll. Rank 0 gets a bundle of 3 DONEs, then
 * its data; rank 1 its 3 sums, then a DONE alone; rank 2 one bundle of
 * 4 DONEs.
 */
static void
dones_bundled(void **state)
{
	struct rte_ether_addr macs[WORLD];
	struct sent s[16];
	unsigned int n, got[WORLD] = { 0 };

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		macs[r] = mmac(r, 1);
	assert_int_equal(job_add(17, 0, 0, 256), 0);
	contrib_type = TALLY_PT_SCATTER;
	for (unsigned int slot = 0; slot < 4; slot++) {
		contrib_owner = slot < 3 ? 1 : 0;
		for (unsigned int r = 0; r < WORLD; r++)
			send_contrib(17, r, slot, 0, 10, maddr(r, 0), macs[r]);
	}
	poll_all();
	contrib_type = TALLY_PT_SUM;
	n = take_sent(s, 16);
	assert_int_equal(n, 2 + 4 + 1);
	for (unsigned int i = 0; i < n; i++) {
		unsigned int r = rte_be_to_cpu_16(s[i].dport) - MEMBER_PORT;
		unsigned int k = got[r]++;
		const uint8_t *b = s[i].f + F_PAY;
		uint32_t blen = s[i].len - F_PAY;
		unsigned int want_k = r == 0 && k == 0 ? 3 : r == 2 ? 4 : 1;
		int done = !(r == 0 && k == 1) && !(r == 1 && k < 3);

		assert_true(r < WORLD);
		assert_int_equal(s[i].h.type, done ? TALLY_PT_DONE :
			TALLY_PT_PART_RESULT);
		if (!done) {
			assert_int_equal(s[i].h.slot, r == 0 ? 3 : k);
			continue;
		}
		assert_int_equal(tally_done_bundle_count(b, blen), want_k);
		assert_int_equal(blen, want_k * TALLY_HDR_LEN);
		for (unsigned int e = 0; e < want_k; e++) {
			struct tally_hdr h;

			assert_int_equal(tally_hdr_decode(b + e * TALLY_HDR_LEN,
				TALLY_HDR_LEN, &h), TALLY_ST_OK);
			assert_int_equal(h.type, TALLY_PT_DONE);
			assert_int_equal(h.slot, r == 1 ? 3 : e);
			assert_int_equal(h.status, h.slot < 3 ? 1 : 0);
		}
	}
	assert_int_equal(got[0], 2);
	assert_int_equal(got[1], 4);
	assert_int_equal(got[2], 1);
	assert_int_equal(tally_dp_job_del(&dp, 17, NULL), 0);
	assert_pools_full();
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(members_get_results),
		cmocka_unit_test(mac_change),
		cmocka_unit_test(parts_routed),
		cmocka_unit_test(dones_bundled),
		cmocka_unit_test(job_readded),
		cmocka_unit_test(group_result),
		cmocka_unit_test(several_lengths),
		cmocka_unit_test(replies_to_sender),
		cmocka_unit_test(gap_to_sender),
		cmocka_unit_test(bundles),
		cmocka_unit_test(arp_spoof),
		cmocka_unit_test(result_too_big),
		cmocka_unit_test(final_counters),
		cmocka_unit_test(admission),
		cmocka_unit_test(tier_upstream),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
