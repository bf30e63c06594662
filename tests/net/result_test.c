/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Result packets: the body (header + payload copied once, its raw sum),
 * the per-destination header templates, and the frames of one body to n
 * destinations (the last one the body itself, the others header mbufs
 * chained to indirect mbufs of it): shared data, reference counts, the
 * indirect mbufs against DPDK's own clones, headers and checksums checked
 * on a flat copy with our own RFC 1071 sum (odd lengths, every source
 * port), 64 members from one body, empty and unfit pools.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "frame.h"

#define NBODY	8
#define NHDR	256

static struct rte_mempool *body_pool, *hdr_pool, *rx_pool;
static uint8_t pay[4096];

static const struct tally_hdr hdr = {
	.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM_RESULT,
	.flags = TALLY_F_LAST | TALLY_F_SET, .enc = TALLY_ENC_I32,
	.job = 0x0102, .token = 0x1122334455667788ull, .rank = TALLY_RANK_ALL,
	.slot = 17, .offset = 4096, .count = 256, .scale_exp = -3,
	.next_block = TALLY_NO_BLOCK,
};

/* Member i: 10.0.1.i, port 40000 + i, MAC 02:00:00:00:01:i. */
static struct tally_addr
member(unsigned int i)
{
	return (struct tally_addr){
		.ip = rte_cpu_to_be_32(RTE_IPV4(10, 0, 1, i)),
		.port = rte_cpu_to_be_16((uint16_t)(40000 + i)),
	};
}

static struct rte_ether_addr
member_mac(unsigned int i)
{
	return (struct rte_ether_addr){{ 0x02, 0, 0, 0, 0x01, (uint8_t)i }};
}

/* Templates and MACs of members 0..63, and their destinations. */
static struct tally_net_tmpl tmpls[TALLY_MAX_WORKERS];
static struct rte_ether_addr macs[TALLY_MAX_WORKERS];
static struct tally_net_dst dsts[TALLY_MAX_WORKERS];

static void
assert_pools_full(void)
{
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	assert_int_equal(rte_mempool_avail_count(hdr_pool), NHDR);
}

/* The raw sum as DPDK gives it, as our big-endian sum. */
static uint16_t
be_sum(uint32_t raw)
{
	uint8_t b[2];
	uint16_t v;

	while (raw >> 16)
		raw = (raw & 0xffff) + (raw >> 16);
	v = (uint16_t)raw;
	memcpy(b, &v, 2);
	return get16(b);
}

static void
body_content(void **state)
{
	static const uint16_t lens[] = { 1024, 1023, 1, 0, 2008 };

	(void)state;
	for (size_t i = 0; i < RTE_DIM(lens); i++) {
		uint32_t ck = 0;
		struct rte_mbuf *b = tally_net_body(body_pool, &hdr,
			lens[i] ? pay : NULL, lens[i], NULL, &ck);
		const uint8_t *p;
		struct tally_hdr got;

		assert_non_null(b);
		p = rte_pktmbuf_mtod(b, const uint8_t *);
		assert_int_equal(b->nb_segs, 1);
		assert_int_equal(rte_pktmbuf_pkt_len(b), TALLY_HDR_LEN + lens[i]);
		assert_int_equal(rte_pktmbuf_data_len(b), TALLY_HDR_LEN + lens[i]);
		/* The header decodes back; type checks aside, fields match. */
		tally_hdr_decode(p, TALLY_HDR_LEN + lens[i], &got);
		assert_int_equal(got.job, hdr.job);
		assert_int_equal(got.token, hdr.token);
		assert_int_equal(got.slot, hdr.slot);
		assert_int_equal(got.offset, hdr.offset);
		assert_int_equal(got.scale_exp, hdr.scale_exp);
		assert_int_equal(got.flags, hdr.flags);
		assert_int_equal(got.rank, TALLY_RANK_ALL);
		assert_int_equal(tally_ld_be16(p), TALLY_PROTO_MAGIC);
		if (lens[i] != 0)
			assert_memory_equal(p + TALLY_HDR_LEN, pay, lens[i]);
		assert_int_equal(be_sum(ck), (uint16_t)~test_cksum(p,
			TALLY_HDR_LEN + lens[i]));
		rte_pktmbuf_free(b);
	}
	assert_pools_full();
}

static void
body_too_big(void **state)
{
	uint32_t ck;

	(void)state;
	/* RTE_MBUF_DEFAULT_BUF_SIZE: 2048 bytes after the headroom. */
	assert_null(tally_net_body(body_pool, &hdr, pay, 2009, NULL, &ck));
	assert_null(tally_net_body(body_pool, &hdr, pay, 4096, NULL, &ck));
	assert_null(tally_net_body(body_pool, &hdr, pay, UINT16_MAX, NULL, &ck));
	assert_pools_full();
}

/* The template's bytes, byte by byte, and its sums against ours. */
static void
template_fields(void **state)
{
	struct tally_addr dst = member(9);
	struct tally_net_tmpl t;
	const uint8_t *h = t.hdr;
	uint8_t ph[12];

	(void)state;
	memset(&t, 0xa5, sizeof(t));
	tally_net_tmpl_init(&t, &test_self, &dst);
	assert_int_equal(sizeof(t) % RTE_CACHE_LINE_SIZE, 0);
	/* Destination MAC, lengths, checksums, source port: left 0. */
	for (int i = 0; i < 6; i++)
		assert_int_equal(h[i], 0);
	assert_memory_equal(h + 6, self_mac.addr_bytes, 6);
	assert_int_equal(get16(h + 12), 0x0800);
	assert_int_equal(h[F_IP], 0x45);
	assert_int_equal(h[F_IP + 1], 0);
	assert_int_equal(get16(h + F_IP + 2), 0);
	assert_int_equal(get16(h + F_IP + 4), 0);
	assert_int_equal(get16(h + F_IP + 6), 0x4000);
	assert_int_equal(h[F_IP + 8], 64);
	assert_int_equal(h[F_IP + 9], 17);
	assert_int_equal(get16(h + F_IP + 10), 0);
	assert_memory_equal(h + F_IP + 12, &self_ip, 4);
	assert_memory_equal(h + F_IP + 16, &dst.ip, 4);
	assert_int_equal(get16(h + F_L4), 0);
	assert_memory_equal(h + F_L4 + 2, &dst.port, 2);
	assert_int_equal(get16(h + F_L4 + 4), 0);
	assert_int_equal(get16(h + F_L4 + 6), 0);
	/* Sums: the IPv4 header as it stands; addresses, protocol, port. */
	assert_int_equal(be_sum(t.ip_sum),
		(uint16_t)~test_cksum(h + F_IP, 20));
	memcpy(ph, &self_ip, 4);
	memcpy(ph + 4, &dst.ip, 4);
	put16(ph + 8, 17);
	memcpy(ph + 10, &dst.port, 2);
	assert_int_equal(be_sum(t.udp_sum), (uint16_t)~test_cksum(ph, 12));
}

/*
 * Checks frame m for member i carrying body b (blen bytes at bdata):
 * segments, sharing, headers and checksums, on a flat copy.
 */
static void
check_frame(struct rte_mbuf *m, const uint8_t *bdata, uint32_t blen,
	unsigned int i, uint16_t sport)
{
	static uint8_t flat[4096];
	struct tally_addr dst = member(i);
	struct rte_ether_addr mac = member_mac(i);
	const uint8_t *f;

	assert_int_equal(rte_pktmbuf_pkt_len(m), 42 + blen);
	if (m->nb_segs == 2) {
		struct rte_mbuf *c = m->next;

		assert_int_equal(rte_pktmbuf_data_len(m), 42);
		assert_non_null(c);
		assert_null(c->next);
		assert_true(RTE_MBUF_CLONED(c));
		assert_ptr_equal(rte_pktmbuf_mtod(c, const uint8_t *), bdata);
		assert_int_equal(rte_pktmbuf_data_len(c), blen);
		assert_int_equal(rte_pktmbuf_pkt_len(c), blen);
		assert_int_equal(c->nb_segs, 1);
		assert_int_equal(m->ol_flags, 0);
	} else {
		/* The body itself, its headers in its headroom. */
		assert_int_equal(m->nb_segs, 1);
		assert_null(m->next);
		assert_true(RTE_MBUF_DIRECT(m));
		assert_int_equal(rte_pktmbuf_data_len(m), 42 + blen);
		assert_ptr_equal(rte_pktmbuf_mtod_offset(m, const uint8_t *,
			42), bdata);
	}
	assert_int_equal(m->l2_len, 14);
	assert_int_equal(m->l3_len, 20);
	assert_int_equal(m->l4_len, 8);

	/* flat for two segments; the frame itself for one. */
	f = rte_pktmbuf_read(m, 0, rte_pktmbuf_pkt_len(m), flat);
	assert_non_null(f);
	assert_memory_equal(f, mac.addr_bytes, 6);
	assert_memory_equal(f + 6, self_mac.addr_bytes, 6);
	assert_int_equal(get16(f + 12), 0x0800);
	assert_int_equal(f[F_IP], 0x45);
	assert_int_equal(f[F_IP + 1], 0);
	assert_int_equal(get16(f + F_IP + 2), 28 + blen);
	assert_int_equal(get16(f + F_IP + 4), 0);
	assert_int_equal(get16(f + F_IP + 6), 0x4000);	/* DF */
	assert_int_equal(f[F_IP + 8], 64);
	assert_int_equal(f[F_IP + 9], 17);
	assert_memory_equal(f + F_IP + 12, &self_ip, 4);
	assert_memory_equal(f + F_IP + 16, &dst.ip, 4);
	assert_true(test_ip_cksum_ok(f));
	assert_int_equal(get16(f + F_L4), sport);
	assert_memory_equal(f + F_L4 + 2, &dst.port, 2);
	assert_int_equal(get16(f + F_L4 + 4), 8 + blen);
	assert_int_not_equal(get16(f + F_L4 + 6), 0);
	assert_int_equal(get16(f + F_L4 + 6), test_udp_cksum(f));
	assert_true(test_udp_cksum_ok(f));
	assert_memory_equal(f + F_PAY, bdata, blen);
}

/* What the member receives classifies as a tally datagram for it. */
static void
member_receives(struct rte_mbuf *m, const uint8_t *bdata, uint32_t blen,
	unsigned int i, uint16_t sport)
{
	uint8_t flat[4096];
	struct tally_net_self worker = {
		.mac = member_mac(i), .ip = member(i).ip,
		.port = member(i).port, .nports = 1,
	};
	struct tally_net_rx rx;
	struct rte_mbuf *w;

	w = to_mbuf(rx_pool, rte_pktmbuf_read(m, 0, m->pkt_len, flat),
		m->pkt_len);
	assert_non_null(w);
	assert_int_equal(tally_net_classify(w, &worker, &rx), TALLY_NET_TALLY);
	assert_int_equal(rx.src.ip, self_ip);
	assert_int_equal(rx.src.port, rte_cpu_to_be_16(sport));
	assert_int_equal(rx.len, blen);
	assert_memory_equal(rx.payload, bdata, blen);
	rte_pktmbuf_free(w);
}

/*
 * The frames of a body of len payload bytes to members 0..n-1 from
 * source port sport, each checked; then freed. Returns nothing: every
 * pool is full again afterwards.
 */
static void
fan_and_check(uint16_t len, unsigned int n, uint16_t sport)
{
	struct rte_mbuf *out[TALLY_MAX_WORKERS];
	const uint8_t *bdata;
	struct rte_mbuf *b;
	uint32_t ck, blen;

	b = tally_net_body(body_pool, &hdr, pay, len, NULL, &ck);
	assert_non_null(b);
	bdata = rte_pktmbuf_mtod(b, const uint8_t *);
	blen = rte_pktmbuf_pkt_len(b);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		rte_cpu_to_be_16(sport), dsts, n, out), 0);
	assert_ptr_equal(out[n - 1], b);
	assert_int_equal(rte_mbuf_refcnt_read(b), n);
	assert_int_equal(rte_mempool_avail_count(hdr_pool), NHDR - 2 * (n - 1));
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(out[i]->nb_segs, i + 1 < n ? 2 : 1);
		check_frame(out[i], bdata, blen, i, sport);
		member_receives(out[i], bdata, blen, i, sport);
	}
	for (unsigned int i = 0; i < n; i++)
		rte_pktmbuf_free(out[i]);
	assert_pools_full();
}

static void
one_destination(void **state)
{
	static const uint16_t lens[] = { 1024, 1023, 0, 1, 2008 };

	(void)state;
	for (size_t k = 0; k < RTE_DIM(lens); k++)
		fan_and_check(lens[k], 1, SELF_PORT);
}

static void
two_destinations(void **state)
{
	static const uint16_t lens[] = { 1024, 1023, 0, 1, 2008 };

	(void)state;
	for (size_t k = 0; k < RTE_DIM(lens); k++)
		fan_and_check(lens[k], 2, SELF_PORT + 1);
}

/* Every payload length up to 80 bytes and some odd large ones. */
static void
odd_lengths(void **state)
{
	static const uint16_t big[] = { 255, 257, 511, 1021, 1025, 1999, 2007 };

	(void)state;
	for (uint16_t len = 0; len <= 80; len++)
		fan_and_check(len, 3, SELF_PORT);
	for (size_t k = 0; k < RTE_DIM(big); k++)
		fan_and_check(big[k], 3, SELF_PORT + 3);
}

/* The source port is added to the sums by frame, not in the template. */
static void
source_ports(void **state)
{
	static const uint16_t ports[] = { 0, 1, 255, 256, 47474, 47475,
		0xff00, 0xffff };

	(void)state;
	for (size_t k = 0; k < RTE_DIM(ports); k++)
		fan_and_check(1024, 2, ports[k]);
}

/* 64 members from one body: one payload, shared by every frame. */
static void
sixty_four_destinations(void **state)
{
	struct rte_mbuf *out[TALLY_MAX_WORKERS];
	uint32_t ck;
	struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay, 1024, NULL, &ck);
	const uint8_t *bdata = rte_pktmbuf_mtod(b, const uint8_t *);
	const uint8_t before = pay[0];

	(void)state;
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, TALLY_MAX_WORKERS, out), 0);
	assert_int_equal(rte_mbuf_refcnt_read(b), TALLY_MAX_WORKERS);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY - 1);
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++)
		check_frame(out[i], bdata, TALLY_HDR_LEN + 1024, i, SELF_PORT);
	/* No copy: a byte changed in the body shows in every frame. */
	rte_pktmbuf_mtod_offset(b, uint8_t *, 42 + TALLY_HDR_LEN)[0] ^= 0xff;
	for (unsigned int i = 0; i + 1 < TALLY_MAX_WORKERS; i++)
		assert_int_equal(rte_pktmbuf_mtod_offset(out[i]->next,
			uint8_t *, TALLY_HDR_LEN)[0], (uint8_t)~before);
	/* Freed in any order, the body goes back with the last of them. */
	rte_pktmbuf_free(out[TALLY_MAX_WORKERS - 1]);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY - 1);
	for (unsigned int i = 0; i + 1 < TALLY_MAX_WORKERS; i++) {
		assert_int_equal(rte_mbuf_refcnt_read(b),
			TALLY_MAX_WORKERS - 1 - i);
		rte_pktmbuf_free(out[i]);
	}
	assert_pools_full();
}

/*
 * The indirect mbufs are what rte_pktmbuf_clone() makes of the body: the
 * same fields, so that DPDK's free detaches them the same way.
 */
static void
indirect_as_dpdk_clones(void **state)
{
	struct rte_mbuf *out[4], *c0, ref;
	uint32_t ck;
	struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay, 700, NULL, &ck);

	(void)state;
	assert_non_null(b);
	b->port = 3;
	b->packet_type = 0x11;
	b->hash.rss = 0xdeadbeef;
	/* DPDK's clone of the body as it is now, kept by value. */
	c0 = rte_pktmbuf_clone(b, hdr_pool);
	assert_non_null(c0);
	ref = *c0;
	rte_pktmbuf_free(c0);
	assert_int_equal(rte_mbuf_refcnt_read(b), 1);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, 4, out), 0);
	assert_int_equal(rte_mbuf_refcnt_read(b), 4);
	for (unsigned int i = 0; i < 3; i++) {
		const struct rte_mbuf *c = out[i]->next;

		assert_int_equal(c->ol_flags, ref.ol_flags);
		assert_int_equal(c->priv_size, ref.priv_size);
		assert_ptr_equal(c->buf_addr, ref.buf_addr);
		assert_int_equal(c->buf_iova, ref.buf_iova);
		assert_int_equal(c->buf_len, ref.buf_len);
		assert_int_equal(c->data_off, ref.data_off);
		assert_int_equal(c->data_len, ref.data_len);
		assert_int_equal(c->pkt_len, ref.pkt_len);
		assert_int_equal(c->nb_segs, ref.nb_segs);
		assert_int_equal(c->port, ref.port);
		assert_int_equal(c->packet_type, ref.packet_type);
		assert_int_equal(c->hash.rss, ref.hash.rss);
		assert_int_equal(c->tx_offload, ref.tx_offload);
		assert_int_equal(rte_mbuf_refcnt_read(c), 1);
		assert_ptr_equal(rte_mbuf_from_indirect((struct rte_mbuf *)c),
			b);
	}
	rte_pktmbuf_free_bulk(out, 4);
	assert_pools_full();
}

/* The MAC is the frame's, not the template's: two MACs, one template. */
static void
mac_by_frame(void **state)
{
	const struct rte_ether_addr a = {{ 0x02, 0xaa, 0, 0, 0, 1 }};
	const struct rte_ether_addr c = {{ 0x02, 0xcc, 0, 0, 0, 1 }};
	struct tally_net_dst d[2] = {
		{ &tmpls[1], &a }, { &tmpls[1], &c },
	};
	struct rte_mbuf *out[2];
	uint8_t flat[2048];
	uint32_t ck;
	struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay, 64, NULL, &ck);

	(void)state;
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), d, 2, out), 0);
	for (int i = 0; i < 2; i++) {
		const uint8_t *f = rte_pktmbuf_read(out[i], 0,
			out[i]->pkt_len, flat);

		assert_memory_equal(f, i == 0 ? a.addr_bytes : c.addr_bytes, 6);
		assert_true(test_ip_cksum_ok(f));
		assert_true(test_udp_cksum_ok(f));
	}
	rte_pktmbuf_free_bulk(out, 2);
	assert_pools_full();
}

/* A datagram whose checksum computes to 0 carries 0xffff. */
static void
udp_checksum_ffff(void **state)
{
	uint8_t p[64] = { 0 };
	struct rte_mbuf *b, *out[2];
	uint8_t flat[256];
	uint32_t ck;

	(void)state;
	for (int round = 0; round < 2; round++) {
		b = tally_net_body(body_pool, &hdr, p, sizeof(p), NULL, &ck);
		assert_non_null(b);
		/* Member 1 in the header mbuf, member 1 in the body. */
		struct tally_net_dst d[2] = { dsts[1], dsts[1] };

		assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
			RTE_BE16(SELF_PORT), d, 2, out), 0);
		for (int i = 0; i < 2; i++) {
			const uint8_t *f = rte_pktmbuf_read(out[i], 0,
				out[i]->pkt_len, flat);

			/* x + ~x = 0xffff: with the checksum as data, it
			 * sums to 0. */
			if (round == 0 && i == 0)
				memcpy(p, f + F_L4 + 6, 2);
			else if (round == 1)
				assert_int_equal(get16(f + F_L4 + 6), 0xffff);
			assert_true(test_udp_cksum_ok(f));
		}
		rte_pktmbuf_free_bulk(out, 2);
	}
	assert_pools_full();
}

/* No destination: nothing built, the body freed. */
static void
no_destination(void **state)
{
	struct rte_mbuf *out[1] = { NULL };
	uint32_t ck;
	struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay, 10, NULL, &ck);

	(void)state;
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, 0, out), 0);
	assert_null(out[0]);
	assert_pools_full();
}

/* A pool of n mbufs, for the exhaustion cases. */
static struct rte_mempool *
small_pool(const char *name, unsigned int n, uint16_t room)
{
	struct rte_mempool *mp = test_pool(name, n, room);

	assert_non_null(mp);
	return mp;
}

/*
 * A pool of 9 mbufs serves 4 destinations (3 x 2 mbufs), then refuses 6
 * destinations (10 mbufs): -ENOBUFS, the body freed, nothing taken.
 */
static void
header_pool_empty(void **state)
{
	struct rte_mempool *hp = small_pool("hdr9", 9,
		RTE_PKTMBUF_HEADROOM + 64);
	struct rte_mbuf *out[6], *b;
	uint32_t ck;

	(void)state;
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hp, b, ck, RTE_BE16(SELF_PORT),
		dsts, 4, out), 0);
	assert_int_equal(rte_mempool_avail_count(hp), 3);
	rte_pktmbuf_free_bulk(out, 4);
	assert_int_equal(rte_mempool_avail_count(hp), 9);
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hp, b, ck, RTE_BE16(SELF_PORT),
		dsts, 6, out), -ENOBUFS);
	assert_int_equal(rte_mempool_avail_count(hp), 9);
	assert_pools_full();
	rte_mempool_free(hp);
}

/* Header mbufs with no room for 42 bytes: -EINVAL, nothing kept. */
static void
header_room_too_small(void **state)
{
	struct rte_mempool *tiny = small_pool("tinyhdr", 4,
		RTE_PKTMBUF_HEADROOM + 41);
	struct rte_mbuf *out[2], *b;
	uint32_t ck;

	(void)state;
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(tiny, b, ck, RTE_BE16(SELF_PORT),
		dsts, 2, out), -EINVAL);
	assert_int_equal(rte_mempool_avail_count(tiny), 4);
	assert_pools_full();
	rte_mempool_free(tiny);
}

/* Bodies that cannot take the last frame's headers: -EINVAL, freed. */
static void
body_unfit(void **state)
{
	struct rte_mbuf *out[2], *b, *c;
	uint32_t ck;

	(void)state;
	/* No headroom left for 42 bytes. */
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	assert_non_null(rte_pktmbuf_prepend(b, (uint16_t)
		(rte_pktmbuf_headroom(b) - 41)));
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, 2, out), -EINVAL);
	assert_pools_full();
	/* Shared: the caller's reference is dropped, the other stays. */
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	c = rte_pktmbuf_clone(b, hdr_pool);
	assert_non_null(c);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, 2, out), -EINVAL);
	assert_int_equal(rte_mbuf_refcnt_read(b), 1);
	rte_pktmbuf_free(c);
	/* More destinations than a job has members. */
	b = tally_net_body(body_pool, &hdr, pay, 100, NULL, &ck);
	assert_non_null(b);
	assert_int_equal(tally_net_fanout(hdr_pool, b, ck,
		RTE_BE16(SELF_PORT), dsts, TALLY_MAX_WORKERS + 1, out),
		-EINVAL);
	assert_pools_full();
}

static void
body_pool_empty(void **state)
{
	struct rte_mbuf *bs[NBODY];
	uint32_t ck;

	(void)state;
	for (int i = 0; i < NBODY; i++) {
		bs[i] = tally_net_body(body_pool, &hdr, pay, 10, NULL, &ck);
		assert_non_null(bs[i]);
	}
	assert_null(tally_net_body(body_pool, &hdr, pay, 10, NULL, &ck));
	for (int i = 0; i < NBODY; i++)
		rte_pktmbuf_free(bs[i]);
	assert_pools_full();
}

static int
setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 13 + 1);
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++) {
		struct tally_addr a = member(i);

		tally_net_tmpl_init(&tmpls[i], &test_self, &a);
		macs[i] = member_mac(i);
		dsts[i] = (struct tally_net_dst){ &tmpls[i], &macs[i] };
	}
	body_pool = test_pool("body", NBODY, RTE_MBUF_DEFAULT_BUF_SIZE);
	hdr_pool = test_pool("hdr", NHDR, RTE_PKTMBUF_HEADROOM + 64);
	rx_pool = test_pool("rx", 4, RTE_PKTMBUF_HEADROOM + 4096);
	return body_pool && hdr_pool && rx_pool ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	rte_mempool_free(body_pool);
	rte_mempool_free(hdr_pool);
	rte_mempool_free(rx_pool);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(body_content),
		cmocka_unit_test(body_too_big),
		cmocka_unit_test(template_fields),
		cmocka_unit_test(one_destination),
		cmocka_unit_test(two_destinations),
		cmocka_unit_test(odd_lengths),
		cmocka_unit_test(source_ports),
		cmocka_unit_test(sixty_four_destinations),
		cmocka_unit_test(indirect_as_dpdk_clones),
		cmocka_unit_test(mac_by_frame),
		cmocka_unit_test(udp_checksum_ffff),
		cmocka_unit_test(no_destination),
		cmocka_unit_test(header_pool_empty),
		cmocka_unit_test(header_room_too_small),
		cmocka_unit_test(body_unfit),
		cmocka_unit_test(body_pool_empty),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
