/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ARP and ICMP echo replies written in place: the ARP reply compared
 * byte for byte with one built here, the echo reply's checksums verified
 * with our own RFC 1071 sum, for every possible request checksum.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "frame.h"

static struct rte_mempool *pool;

/* RX flags a port may set; a reply must not carry them to Tx. */
#define RX_FLAGS (RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD | \
	RTE_MBUF_F_RX_RSS_HASH | RTE_MBUF_F_RX_VLAN)

static void
arp_reply_bytes(void **state)
{
	uint8_t req[64], want[64];
	size_t len = build_arp(req, 1, self_ip);
	struct tally_net_rx rx;
	struct rte_mbuf *m;
	uint8_t *a = want + 14;

	(void)state;
	memset(req + len, 0x5a, 60 - len);	/* padding, kept as it came */
	m = to_mbuf(pool, req, 60);
	assert_non_null(m);
	m->ol_flags |= RX_FLAGS;
	assert_int_equal(tally_net_classify(m, &test_self, &rx), TALLY_NET_ARP);
	tally_net_arp_reply(m, &test_self);

	memcpy(want, peer_mac.addr_bytes, 6);
	memcpy(want + 6, self_mac.addr_bytes, 6);
	put16(want + 12, 0x0806);
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, 2);			/* reply */
	memcpy(a + 8, self_mac.addr_bytes, 6);
	memcpy(a + 14, &self_ip, 4);
	memcpy(a + 18, peer_mac.addr_bytes, 6);
	memcpy(a + 24, &peer_ip, 4);
	memset(want + 42, 0x5a, 18);

	assert_int_equal(rte_pktmbuf_pkt_len(m), 60);
	assert_int_equal(rte_pktmbuf_data_len(m), 60);
	assert_memory_equal(rte_pktmbuf_mtod(m, uint8_t *), want, 60);
	assert_int_equal(m->ol_flags, 0);
	assert_int_equal(m->l2_len, 14);
	rte_pktmbuf_free(m);
}

/* A buffer the mbuf does not own stays marked so, and is freed right. */
static void
arp_reply_keeps_external_buffer(void **state)
{
	uint8_t req[64];
	size_t len = build_arp(req, 1, self_ip);
	struct rte_mbuf *m = to_mbuf_exact(pool, req, len);

	(void)state;
	assert_non_null(m);
	m->ol_flags |= RX_FLAGS;
	tally_net_arp_reply(m, &test_self);
	assert_int_equal(m->ol_flags, RTE_MBUF_F_EXTERNAL);
	assert_int_equal(get16(rte_pktmbuf_mtod_offset(m, uint8_t *, 20)), 2);
	rte_pktmbuf_free(m);
}

/* Checks the reply in m against the request req (len bytes). */
static void
check_echo_reply(const struct rte_mbuf *m, const uint8_t *req, size_t len)
{
	const uint8_t *r = rte_pktmbuf_mtod(m, const uint8_t *);
	size_t hlen = (req[F_IP] & 0xf) * 4u;
	const uint8_t *icmp = r + F_IP + hlen;
	const uint8_t *qicmp = req + F_IP + hlen;
	size_t ilen = len - F_IP - hlen;

	assert_int_equal(rte_pktmbuf_pkt_len(m), len);
	assert_memory_equal(r, peer_mac.addr_bytes, 6);
	assert_memory_equal(r + 6, self_mac.addr_bytes, 6);
	assert_int_equal(get16(r + 12), 0x0800);
	/* IPv4: same header but TTL, addresses and checksum. */
	assert_memory_equal(r + F_IP, req + F_IP, 8);
	assert_int_equal(r[F_IP + 8], 64);
	assert_int_equal(r[F_IP + 9], 1);
	assert_memory_equal(r + F_IP + 12, &self_ip, 4);
	assert_memory_equal(r + F_IP + 16, &peer_ip, 4);
	assert_memory_equal(r + F_IP + 20, req + F_IP + 20, hlen - 20);
	assert_true(test_ip_cksum_ok(r));
	/* ICMP: type 0, code 0, identifier, sequence and data as sent. */
	assert_int_equal(icmp[0], 0);
	assert_int_equal(icmp[1], 0);
	assert_memory_equal(icmp + 4, qicmp + 4, ilen - 4);
	assert_int_equal(test_cksum(icmp, ilen), 0);
	assert_int_equal(m->ol_flags, 0);
	assert_int_equal(m->l2_len, 14);
	assert_int_equal(m->l3_len, hlen);
}

/* Builds, classifies and answers one echo request; checks the answer. */
static void
echo(const uint8_t *req, size_t len)
{
	struct rte_mbuf *m = to_mbuf(pool, req, len);
	struct tally_net_rx rx;

	assert_non_null(m);
	m->ol_flags |= RX_FLAGS;
	assert_int_equal(tally_net_classify(m, &test_self, &rx),
		TALLY_NET_ICMP);
	tally_net_icmp_reply(m, &test_self);
	check_echo_reply(m, req, len);
	rte_pktmbuf_free(m);
}

static void
icmp_reply(void **state)
{
	uint8_t data[64], req[256];
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0xc0 + i);
	len = build_icmp_echo(req, 0x1234, 1, data, 56);
	echo(req, len);
	len = build_icmp_echo(req, 0x1234, 2, data, 37);	/* odd */
	echo(req, len);
	len = build_icmp_echo(req, 0x1234, 3, NULL, 0);
	echo(req, len);
}

/* The incremental update, for every checksum the request may carry. */
static void
icmp_reply_every_checksum(void **state)
{
	uint8_t data[3] = { 0xde, 0xad, 0x01 };
	uint8_t req[128];

	(void)state;
	for (unsigned int id = 0; id < 65536; id++) {
		size_t len = build_icmp_echo(req, (uint16_t)id, 0x0800,
			data, sizeof(data));

		echo(req, len);
	}
}

static void
icmp_reply_with_ip_options(void **state)
{
	uint8_t data[16] = { 1, 2, 3 };
	uint8_t req[256];
	size_t len = build_icmp_echo(req, 9, 9, data, sizeof(data));

	(void)state;
	memmove(req + F_L4 + 8, req + F_L4, len - F_L4);
	memset(req + F_L4, 1, 8);		/* eight NOP options */
	req[F_IP] = 0x47;
	put16(req + F_IP + 2, (uint16_t)(get16(req + F_IP + 2) + 8));
	fix_ip_cksum(req);
	echo(req, len + 8);
}

/* A request that came damaged gets an answer damaged the same way. */
static void
icmp_reply_keeps_damage(void **state)
{
	uint8_t data[8] = { 0 };
	uint8_t req[128];
	size_t len = build_icmp_echo(req, 5, 5, data, sizeof(data));
	struct rte_mbuf *m;
	uint16_t before;

	(void)state;
	req[F_L4 + 8] ^= 0x40;			/* flip a data bit */
	before = test_cksum(req + F_L4, len - F_L4);
	assert_int_not_equal(before, 0);
	m = to_mbuf(pool, req, len);
	assert_non_null(m);
	tally_net_icmp_reply(m, &test_self);
	assert_int_equal(test_cksum(rte_pktmbuf_mtod_offset(m, uint8_t *,
		F_L4), len - F_L4), before);
	rte_pktmbuf_free(m);
}

static int
setup(void **state)
{
	(void)state;
	pool = test_pool("reply", 64, RTE_MBUF_DEFAULT_BUF_SIZE);
	return pool == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	(void)state;
	if (rte_mempool_avail_count(pool) != 64)
		return -1;
	rte_mempool_free(pool);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arp_reply_bytes),
		cmocka_unit_test(arp_reply_keeps_external_buffer),
		cmocka_unit_test(icmp_reply),
		cmocka_unit_test(icmp_reply_every_checksum),
		cmocka_unit_test(icmp_reply_with_ip_options),
		cmocka_unit_test(icmp_reply_keeps_damage),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
