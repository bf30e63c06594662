/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Result packets: the body (header + payload copied once, its raw sum),
 * and per-destination header mbufs chained to clones of it: shared data,
 * reference counts, headers and checksums checked on a flat copy with
 * our own RFC 1071 sum, 64 members from one body, empty pools.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "frame.h"

#define NBODY	8
#define NHDR	128
#define NCLONE	128

static struct rte_mempool *body_pool, *hdr_pool, *clone_pool, *rx_pool;
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

static void
assert_pools_full(void)
{
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	assert_int_equal(rte_mempool_avail_count(hdr_pool), NHDR);
	assert_int_equal(rte_mempool_avail_count(clone_pool), NCLONE);
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
	static const uint16_t lens[] = { 1024, 1023, 1, 0, 2016 };

	(void)state;
	for (size_t i = 0; i < RTE_DIM(lens); i++) {
		uint32_t ck = 0;
		struct rte_mbuf *b = tally_net_body(body_pool, &hdr,
			lens[i] ? pay : NULL, lens[i], &ck);
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
	assert_null(tally_net_body(body_pool, &hdr, pay, 2017, &ck));
	assert_null(tally_net_body(body_pool, &hdr, pay, 4096, &ck));
	assert_null(tally_net_body(body_pool, &hdr, pay, UINT16_MAX, &ck));
	assert_pools_full();
}

/*
 * Checks packet m for member i carrying body b: chain, sharing, headers
 * and checksums, on a flat copy.
 */
static void
check_packet(struct rte_mbuf *m, struct rte_mbuf *b, unsigned int i)
{
	static uint8_t flat[4096];
	struct tally_addr dst = member(i);
	struct rte_ether_addr mac = member_mac(i);
	struct rte_mbuf *c = m->next;
	uint32_t blen = rte_pktmbuf_pkt_len(b);
	const uint8_t *f;

	assert_int_equal(m->nb_segs, 2);
	assert_int_equal(rte_pktmbuf_data_len(m), 42);
	assert_int_equal(rte_pktmbuf_pkt_len(m), 42 + blen);
	assert_non_null(c);
	assert_null(c->next);
	assert_true(RTE_MBUF_CLONED(c));
	assert_ptr_equal(rte_mbuf_from_indirect(c), b);
	assert_ptr_equal(c->buf_addr, b->buf_addr);
	assert_ptr_equal(rte_pktmbuf_mtod(c, void *), rte_pktmbuf_mtod(b, void *));
	assert_int_equal(rte_pktmbuf_data_len(c), blen);
	assert_int_equal(m->ol_flags, 0);
	assert_int_equal(m->l2_len, 14);
	assert_int_equal(m->l3_len, 20);
	assert_int_equal(m->l4_len, 8);

	f = rte_pktmbuf_read(m, 0, rte_pktmbuf_pkt_len(m), flat);
	assert_ptr_equal(f, flat);
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
	assert_int_equal(get16(f + F_L4), 47474);
	assert_memory_equal(f + F_L4 + 2, &dst.port, 2);
	assert_int_equal(get16(f + F_L4 + 4), 8 + blen);
	assert_int_not_equal(get16(f + F_L4 + 6), 0);
	assert_true(test_udp_cksum_ok(f));
	assert_memory_equal(f + F_PAY, rte_pktmbuf_mtod(b, void *), blen);
}

/* What the member receives classifies as a tally datagram for it. */
static void
member_receives(struct rte_mbuf *m, struct rte_mbuf *b, unsigned int i)
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
	assert_int_equal(rx.src.port, RTE_BE16(SELF_PORT));
	assert_int_equal(rx.len, b->pkt_len);
	assert_memory_equal(rx.payload, rte_pktmbuf_mtod(b, void *), rx.len);
	rte_pktmbuf_free(w);
}

static void
one_destination(void **state)
{
	static const uint16_t lens[] = { 1024, 1023, 0, 1, 2016 };

	(void)state;
	for (size_t k = 0; k < RTE_DIM(lens); k++) {
		uint32_t ck;
		struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay,
			lens[k], &ck);
		struct tally_addr dst = member(3);
		struct rte_ether_addr mac = member_mac(3);
		struct rte_mbuf *m;

		assert_non_null(b);
		m = tally_net_to(hdr_pool, clone_pool, b, ck, &test_self,
			RTE_BE16(SELF_PORT), &mac, &dst);
		assert_non_null(m);
		assert_int_equal(rte_mbuf_refcnt_read(b), 2);
		check_packet(m, b, 3);
		member_receives(m, b, 3);
		rte_pktmbuf_free(m);
		assert_int_equal(rte_mbuf_refcnt_read(b), 1);
		rte_pktmbuf_free(b);
	}
	assert_pools_full();
}

static void
sixty_four_destinations(void **state)
{
	struct rte_mbuf *pkts[TALLY_MAX_WORKERS];
	uint32_t ck;
	struct rte_mbuf *b = tally_net_body(body_pool, &hdr, pay, 1024, &ck);
	const uint8_t before = pay[0];

	(void)state;
	assert_non_null(b);
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++) {
		struct tally_addr dst = member(i);
		struct rte_ether_addr mac = member_mac(i);

		pkts[i] = tally_net_to(hdr_pool, clone_pool, b, ck, &test_self,
			RTE_BE16(SELF_PORT), &mac, &dst);
		assert_non_null(pkts[i]);
	}
	assert_int_equal(rte_mbuf_refcnt_read(b), 1 + TALLY_MAX_WORKERS);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY - 1);
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++)
		check_packet(pkts[i], b, i);
	/* No copy: a byte changed in the body shows in every packet. */
	rte_pktmbuf_mtod_offset(b, uint8_t *, TALLY_HDR_LEN)[0] ^= 0xff;
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++)
		assert_int_equal(rte_pktmbuf_mtod_offset(pkts[i]->next,
			uint8_t *, TALLY_HDR_LEN)[0], (uint8_t)~before);
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++)
		rte_pktmbuf_free(pkts[i]);
	assert_int_equal(rte_mbuf_refcnt_read(b), 1);
	rte_pktmbuf_free(b);
	assert_pools_full();
}

/* A datagram whose checksum computes to 0 carries 0xffff. */
static void
udp_checksum_ffff(void **state)
{
	uint8_t p[64] = { 0 };
	struct tally_addr dst = member(1);
	struct rte_ether_addr mac = member_mac(1);
	uint8_t flat[256];
	struct rte_mbuf *b, *m;
	uint32_t ck;

	(void)state;
	for (int round = 0; round < 2; round++) {
		b = tally_net_body(body_pool, &hdr, p, sizeof(p), &ck);
		assert_non_null(b);
		m = tally_net_to(hdr_pool, clone_pool, b, ck, &test_self,
			RTE_BE16(SELF_PORT), &mac, &dst);
		assert_non_null(m);
		rte_pktmbuf_read(m, 0, m->pkt_len, flat);
		/* x + ~x = 0xffff: with the checksum as data, it sums to 0. */
		if (round == 0)
			memcpy(p, flat + F_L4 + 6, 2);
		else
			assert_int_equal(get16(flat + F_L4 + 6), 0xffff);
		assert_true(test_udp_cksum_ok(flat));
		rte_pktmbuf_free(m);
		rte_pktmbuf_free(b);
	}
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

/* tally_net_to() for member 0 from the given pools. */
static struct rte_mbuf *
to0(struct rte_mempool *hp, struct rte_mempool *cp, struct rte_mbuf *b,
	uint32_t ck)
{
	struct tally_addr dst = member(0);
	struct rte_ether_addr mac = member_mac(0);

	return tally_net_to(hp, cp, b, ck, &test_self, RTE_BE16(SELF_PORT),
		&mac, &dst);
}

/*
 * Four packets drain the 4-mbuf pool of hp or cp; then NULL, twice, and
 * the other pool (big, of big_n) lends nothing to the failed calls.
 */
static void
run_dry(struct rte_mempool *hp, struct rte_mempool *cp,
	struct rte_mempool *big, unsigned int big_n)
{
	struct rte_mbuf *pkts[4], *b;
	uint32_t ck;

	b = tally_net_body(body_pool, &hdr, pay, 100, &ck);
	assert_non_null(b);
	for (int i = 0; i < 4; i++) {
		pkts[i] = to0(hp, cp, b, ck);
		assert_non_null(pkts[i]);
	}
	assert_null(to0(hp, cp, b, ck));
	assert_null(to0(hp, cp, b, ck));
	assert_int_equal(rte_mbuf_refcnt_read(b), 5);
	assert_int_equal(rte_mempool_avail_count(big), big_n - 4);
	for (int i = 0; i < 4; i++)
		rte_pktmbuf_free(pkts[i]);
	assert_int_equal(rte_mbuf_refcnt_read(b), 1);
	rte_pktmbuf_free(b);
	assert_pools_full();
}

/* Header pool empty: the clone already taken is given back. */
static void
header_pool_empty(void **state)
{
	struct rte_mempool *hp = small_pool("hdr4", 4,
		RTE_PKTMBUF_HEADROOM + 64);

	(void)state;
	run_dry(hp, clone_pool, clone_pool, NCLONE);
	assert_int_equal(rte_mempool_avail_count(hp), 4);
	rte_mempool_free(hp);
}

/* Clone pool empty: the header already taken is given back. */
static void
clone_pool_empty(void **state)
{
	struct rte_mempool *cp = small_pool("clone4", 4, 0);

	(void)state;
	run_dry(hdr_pool, cp, hdr_pool, NHDR);
	assert_int_equal(rte_mempool_avail_count(cp), 4);
	rte_mempool_free(cp);
}

/* Header mbufs with no room for 42 bytes: NULL, nothing kept. */
static void
header_room_too_small(void **state)
{
	struct rte_mempool *tiny = small_pool("tinyhdr", 4,
		RTE_PKTMBUF_HEADROOM + 41);
	struct rte_mbuf *b;
	uint32_t ck;

	(void)state;
	b = tally_net_body(body_pool, &hdr, pay, 100, &ck);
	assert_non_null(b);
	assert_null(to0(tiny, clone_pool, b, ck));
	assert_int_equal(rte_mempool_avail_count(tiny), 4);
	assert_int_equal(rte_mbuf_refcnt_read(b), 1);
	rte_pktmbuf_free(b);
	assert_pools_full();
	rte_mempool_free(tiny);
}

static void
body_pool_empty(void **state)
{
	struct rte_mbuf *bs[NBODY];
	uint32_t ck;

	(void)state;
	for (int i = 0; i < NBODY; i++) {
		bs[i] = tally_net_body(body_pool, &hdr, pay, 10, &ck);
		assert_non_null(bs[i]);
	}
	assert_null(tally_net_body(body_pool, &hdr, pay, 10, &ck));
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
	body_pool = test_pool("body", NBODY, RTE_MBUF_DEFAULT_BUF_SIZE);
	hdr_pool = test_pool("hdr", NHDR, RTE_PKTMBUF_HEADROOM + 64);
	clone_pool = test_pool("clone", NCLONE, 0);
	rx_pool = test_pool("rx", 4, RTE_PKTMBUF_HEADROOM + 4096);
	return body_pool && hdr_pool && clone_pool && rx_pool ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	rte_mempool_free(body_pool);
	rte_mempool_free(hdr_pool);
	rte_mempool_free(clone_pool);
	rte_mempool_free(rx_pool);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(body_content),
		cmocka_unit_test(body_too_big),
		cmocka_unit_test(one_destination),
		cmocka_unit_test(sixty_four_destinations),
		cmocka_unit_test(udp_checksum_ffff),
		cmocka_unit_test(header_pool_empty),
		cmocka_unit_test(clone_pool_empty),
		cmocka_unit_test(header_room_too_small),
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
