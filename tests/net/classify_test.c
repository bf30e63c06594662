/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_net_classify(): valid datagrams on every port, ARP and ICMP for
 * us, checksum offload flags, and every drop reason on frames built by
 * hand. Truncated and split frames lie in buffers of their exact size,
 * so that an over-read shows under AddressSanitizer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "frame.h"

static struct rte_mempool *pool;
static uint8_t pay[1500];

/* Classifies the len bytes at buf (with RX flags) into rx. */
static enum tally_net_kind
classify(const uint8_t *buf, size_t len, uint64_t flags,
	struct tally_net_rx *rx)
{
	struct rte_mbuf *m = to_mbuf_exact(pool, buf, len);
	enum tally_net_kind k;

	assert_non_null(m);
	m->ol_flags |= flags;
	k = tally_net_classify(m, &test_self, rx);
	rte_pktmbuf_free(m);
	return k;
}

static void
expect_drop(const uint8_t *buf, size_t len, uint64_t flags,
	enum tally_net_drop why)
{
	struct tally_net_rx rx;

	assert_int_equal(classify(buf, len, flags, &rx), TALLY_NET_DROP);
	assert_string_equal(tally_net_drop_name(rx.why),
		tally_net_drop_name(why));
}

static void
expect_kind(const uint8_t *buf, size_t len, uint64_t flags,
	enum tally_net_kind kind)
{
	struct tally_net_rx rx;

	assert_int_equal(classify(buf, len, flags, &rx), kind);
	assert_int_equal(rx.why, TALLY_NET_OK);
}

/* A valid datagram from the worker to port SELF_PORT + q. */
static size_t
datagram(uint8_t *buf, unsigned int q, size_t plen)
{
	struct udp_spec s = test_udp_spec(pay, plen);

	s.dport = (uint16_t)(SELF_PORT + q);
	return build_udp(buf, &s);
}

static void
valid_datagram_every_port(void **state)
{
	uint8_t buf[2048];

	(void)state;
	for (unsigned int q = 0; q < SELF_NPORTS; q++) {
		size_t len = datagram(buf, q, 1024);
		struct rte_mbuf *m = to_mbuf(pool, buf, len);
		struct tally_net_rx rx;

		assert_non_null(m);
		assert_int_equal(tally_net_classify(m, &test_self, &rx),
			TALLY_NET_TALLY);
		assert_int_equal(rx.why, TALLY_NET_OK);
		assert_int_equal(rx.queue, q);
		assert_ptr_equal(rx.payload,
			rte_pktmbuf_mtod_offset(m, uint8_t *, F_PAY));
		assert_int_equal(rx.len, 1024);
		assert_memory_equal(rx.payload, pay, 1024);
		assert_int_equal(rx.src.ip, peer_ip);
		assert_int_equal(rx.src.port, rte_cpu_to_be_16(PEER_PORT));
		assert_memory_equal(&rx.src_mac, &peer_mac, 6);
		/* Borrowed, not modified. */
		assert_memory_equal(rte_pktmbuf_mtod(m, uint8_t *), buf, len);
		rte_pktmbuf_free(m);
	}
}

static void
valid_empty_and_odd_payloads(void **state)
{
	uint8_t buf[2048];
	struct tally_net_rx rx;

	(void)state;
	for (size_t plen = 0; plen < 40; plen++) {
		size_t len = datagram(buf, 1, plen);

		assert_int_equal(classify(buf, len, 0, &rx), TALLY_NET_TALLY);
		assert_int_equal(rx.len, plen);
		assert_int_equal(rx.queue, 1);
	}
}

/* IPv4 options: the payload moves by the header's extra length. */
static void
valid_with_ip_options(void **state)
{
	uint8_t buf[2048];
	size_t len = datagram(buf, 2, 64);
	struct rte_mbuf *m;
	struct tally_net_rx rx;

	(void)state;
	memmove(buf + F_L4 + 4, buf + F_L4, len - F_L4);
	memset(buf + F_L4, 1, 4);		/* four NOP options */
	buf[F_IP] = 0x46;
	put16(buf + F_IP + 2, (uint16_t)(get16(buf + F_IP + 2) + 4));
	fix_ip_cksum(buf);
	len += 4;
	assert_true(test_udp_cksum_ok(buf));
	m = to_mbuf(pool, buf, len);
	assert_non_null(m);
	assert_int_equal(tally_net_classify(m, &test_self, &rx),
		TALLY_NET_TALLY);
	assert_ptr_equal(rx.payload,
		rte_pktmbuf_mtod_offset(m, uint8_t *, F_PAY + 4));
	assert_int_equal(rx.len, 64);
	assert_int_equal(rx.queue, 2);
	rte_pktmbuf_free(m);
}

/* Short frames are padded to 60 bytes on the wire: padding is fine. */
static void
ethernet_padding_accepted(void **state)
{
	uint8_t buf[128];
	struct tally_net_rx rx;
	size_t len = datagram(buf, 0, 4);

	(void)state;
	assert_int_equal(len, 46);
	memset(buf + len, 0xaa, 60 - len);	/* not zero: not summed */
	assert_int_equal(classify(buf, 60, 0, &rx), TALLY_NET_TALLY);
	assert_int_equal(rx.len, 4);
	/* Padding in a second segment is fine too. */
	{
		struct rte_mbuf *m = to_mbuf_split(pool, buf, 60, len);

		assert_non_null(m);
		assert_int_equal(tally_net_classify(m, &test_self, &rx),
			TALLY_NET_TALLY);
		assert_int_equal(rx.len, 4);
		rte_pktmbuf_free(m);
	}
	/* An ARP request padded likewise. */
	len = build_arp(buf, 1, self_ip);
	memset(buf + len, 0, 60 - len);
	expect_kind(buf, 60, 0, TALLY_NET_ARP);
}

/* A UDP length below the IPv4 payload: the rest is not payload. */
static void
udp_shorter_than_ip_payload(void **state)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 30);
	struct tally_net_rx rx;

	(void)state;
	put16(buf + F_L4 + 4, 8 + 10);
	fix_udp_cksum(buf);
	assert_int_equal(classify(buf, len, 0, &rx), TALLY_NET_TALLY);
	assert_int_equal(rx.len, 10);
}

static void
udp_checksum(void **state)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);
	struct udp_spec s = test_udp_spec(pay, 100);

	(void)state;
	assert_true(test_udp_cksum_ok(buf));
	expect_kind(buf, len, 0, TALLY_NET_TALLY);
	/* Wrong: in the checksum field, and in the payload. */
	buf[F_L4 + 6] ^= 0x01;
	expect_drop(buf, len, 0, TALLY_NET_L4_CKSUM);
	buf[F_L4 + 6] ^= 0x01;
	buf[F_PAY + 99] ^= 0x80;
	expect_drop(buf, len, 0, TALLY_NET_L4_CKSUM);
	/* The port's verdict wins over the bytes. */
	expect_kind(buf, len, RTE_MBUF_F_RX_L4_CKSUM_GOOD, TALLY_NET_TALLY);
	expect_kind(buf, len, RTE_MBUF_F_RX_L4_CKSUM_NONE, TALLY_NET_TALLY);
	buf[F_PAY + 99] ^= 0x80;
	expect_drop(buf, len, RTE_MBUF_F_RX_L4_CKSUM_BAD, TALLY_NET_L4_CKSUM);
	/* Zero: the sender computed none (allowed in IPv4). */
	s.no_cksum = 1;
	len = build_udp(buf, &s);
	assert_int_equal(get16(buf + F_L4 + 6), 0);
	expect_kind(buf, len, 0, TALLY_NET_TALLY);
}

/* A datagram whose checksum computes to 0 carries 0xffff. */
static void
udp_checksum_ffff(void **state)
{
	uint8_t p[16] = { 0 };
	uint8_t buf[256];
	struct udp_spec s = test_udp_spec(p, sizeof(p));
	size_t len;

	(void)state;
	build_udp(buf, &s);
	/* One's-complement x + ~x = 0xffff: the checksum becomes 0. */
	put16(p, get16(buf + F_L4 + 6));
	len = build_udp(buf, &s);
	assert_int_equal(get16(buf + F_L4 + 6), 0xffff);
	expect_kind(buf, len, 0, TALLY_NET_TALLY);
}

static void
ip_checksum(void **state)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);

	(void)state;
	buf[F_IP + 10] ^= 0x10;
	expect_drop(buf, len, 0, TALLY_NET_IP_CKSUM);
	expect_kind(buf, len, RTE_MBUF_F_RX_IP_CKSUM_GOOD, TALLY_NET_TALLY);
	expect_kind(buf, len, RTE_MBUF_F_RX_IP_CKSUM_NONE, TALLY_NET_TALLY);
	buf[F_IP + 10] ^= 0x10;
	expect_kind(buf, len, 0, TALLY_NET_TALLY);
	expect_drop(buf, len, RTE_MBUF_F_RX_IP_CKSUM_BAD, TALLY_NET_IP_CKSUM);
	/* Damage elsewhere in the header is caught too. */
	buf[F_IP + 8] = 1;		/* TTL */
	expect_drop(buf, len, 0, TALLY_NET_IP_CKSUM);
}

static void
arp_request_for_us(void **state)
{
	uint8_t buf[64];
	size_t len = build_arp(buf, 1, self_ip);
	struct tally_net_rx rx;

	(void)state;
	assert_int_equal(classify(buf, len, 0, &rx), TALLY_NET_ARP);
	assert_int_equal(rx.src.ip, peer_ip);
	assert_memory_equal(&rx.src_mac, &peer_mac, 6);
}

static void
icmp_echo_for_us(void **state)
{
	uint8_t buf[128];
	size_t len = build_icmp_echo(buf, 7, 1, pay, 56);
	struct tally_net_rx rx;

	(void)state;
	assert_int_equal(classify(buf, len, 0, &rx), TALLY_NET_ICMP);
	assert_int_equal(rx.src.ip, peer_ip);
	assert_memory_equal(&rx.src_mac, &peer_mac, 6);
}

/* Every prefix of a valid frame is a runt, and is read within bounds. */
static void
drop_runt(void **state)
{
	uint8_t bufs[4][256];
	size_t lens[4];
	struct udp_spec s = test_udp_spec(pay, 0);

	(void)state;
	lens[0] = datagram(bufs[0], 0, 100);
	lens[1] = build_icmp_echo(bufs[1], 1, 2, pay, 20);
	lens[2] = build_arp(bufs[2], 1, self_ip);
	lens[3] = build_udp(bufs[3], &s);
	for (int f = 0; f < 4; f++)
		for (size_t len = 0; len < lens[f]; len++)
			expect_drop(bufs[f], len, 0, TALLY_NET_RUNT);
	/* An ICMP message shorter than its 8-byte header. */
	put16(bufs[1] + F_IP + 2, 20 + 4);
	fix_ip_cksum(bufs[1]);
	expect_drop(bufs[1], F_L4 + 4, 0, TALLY_NET_RUNT);
}

/* Headers or payload past the first segment. */
static void
drop_multiseg(void **state)
{
	uint8_t buf[256], arp[64];
	size_t len = datagram(buf, 0, 100);
	size_t alen = build_arp(arp, 1, self_ip);
	struct tally_net_rx rx;

	(void)state;
	for (size_t first = 1; first < len; first++) {
		struct rte_mbuf *m = to_mbuf_split(pool, buf, len, first);

		assert_non_null(m);
		assert_int_equal(tally_net_classify(m, &test_self, &rx),
			TALLY_NET_DROP);
		assert_int_equal(rx.why, TALLY_NET_MULTISEG);
		rte_pktmbuf_free(m);
	}
	for (size_t first = 1; first < alen; first++) {
		struct rte_mbuf *m = to_mbuf_split(pool, arp, alen, first);

		assert_non_null(m);
		assert_int_equal(tally_net_classify(m, &test_self, &rx),
			TALLY_NET_DROP);
		assert_int_equal(rx.why, TALLY_NET_MULTISEG);
		rte_pktmbuf_free(m);
	}
}

static void
drop_l2_other(void **state)
{
	uint8_t buf[256], vlan[260];
	size_t len = datagram(buf, 0, 100);

	(void)state;
	put16(buf + 12, 0x86dd);		/* IPv6 */
	expect_drop(buf, len, 0, TALLY_NET_L2_OTHER);
	put16(buf + 12, 0x88cc);		/* LLDP */
	expect_drop(buf, len, 0, TALLY_NET_L2_OTHER);
	/* A VLAN tag in front of a datagram that is otherwise ours. */
	put16(buf + 12, 0x0800);
	memcpy(vlan, buf, 12);
	put16(vlan + 12, 0x8100);
	put16(vlan + 14, 5);
	memcpy(vlan + 16, buf + 12, len - 12);
	expect_drop(vlan, len + 4, 0, TALLY_NET_L2_OTHER);
}

static void
drop_not_ours(void **state)
{
	static const rte_be32_t others[] = {
		RTE_BE32(RTE_IPV4(10, 0, 0, 3)),
		RTE_BE32(RTE_IPV4(255, 255, 255, 255)),
		RTE_BE32(RTE_IPV4(10, 0, 0, 255)),
		RTE_BE32(RTE_IPV4(224, 0, 0, 251)),
		RTE_BE32(RTE_IPV4(1, 0, 0, 10)),	/* ours, byte-swapped */
	};
	uint8_t buf[256];
	size_t len;

	(void)state;
	for (size_t i = 0; i < RTE_DIM(others); i++) {
		struct udp_spec s = test_udp_spec(pay, 10);

		s.dip = others[i];
		len = build_udp(buf, &s);
		expect_drop(buf, len, 0, TALLY_NET_NOT_OURS);
		len = build_arp(buf, 1, others[i]);
		expect_drop(buf, len, 0, TALLY_NET_NOT_OURS);
	}
	len = build_icmp_echo(buf, 1, 1, pay, 8);
	memcpy(buf + F_IP + 16, &others[0], 4);
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_NOT_OURS);
	/* Gratuitous ARP: the sender announces itself. */
	len = build_arp(buf, 1, peer_ip);
	expect_drop(buf, len, 0, TALLY_NET_NOT_OURS);
}

/* Pokes a header byte of a fresh datagram and expects a BAD_IP drop. */
static void
expect_bad_ip(size_t off, uint8_t v, int tlen)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);

	buf[off] = v;
	if (tlen >= 0)
		put16(buf + F_IP + 2, (uint16_t)tlen);
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_BAD_IP);
}

static void
drop_bad_ip(void **state)
{
	(void)state;
	expect_bad_ip(F_IP, 0x65, -1);		/* version 6 */
	expect_bad_ip(F_IP, 0x05, -1);		/* version 0 */
	expect_bad_ip(F_IP, 0x44, -1);		/* IHL 4 */
	expect_bad_ip(F_IP, 0x40, -1);		/* IHL 0 */
	expect_bad_ip(F_IP, 0x45, 19);		/* total below the header */
	expect_bad_ip(F_IP, 0x46, 22);		/* total below IHL 6 */
	expect_bad_ip(F_IP, 0x45, 0);
}

static void
drop_fragment(void **state)
{
	static const uint16_t frag[] = { 0x2000, 0x0001, 0x2001, 0x1fff,
		0x6000, 0x4001 };
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);

	(void)state;
	for (size_t i = 0; i < RTE_DIM(frag); i++) {
		put16(buf + F_IP + 6, frag[i]);
		fix_ip_cksum(buf);
		expect_drop(buf, len, 0, TALLY_NET_FRAGMENT);
	}
	/* DF alone is no fragment; nor is a clear field. */
	put16(buf + F_IP + 6, 0x0000);
	fix_ip_cksum(buf);
	expect_kind(buf, len, 0, TALLY_NET_TALLY);
	/* A fragmented echo request is a fragment too. */
	len = build_icmp_echo(buf, 1, 1, pay, 8);
	put16(buf + F_IP + 6, 0x2000);
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_FRAGMENT);
}

static void
drop_l4_other(void **state)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);

	(void)state;
	buf[F_IP + 9] = 6;			/* TCP */
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_L4_OTHER);
	buf[F_IP + 9] = 132;			/* SCTP */
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_L4_OTHER);
	/* ICMP other than an echo request: reply, code 1, unreachable. */
	len = build_icmp_echo(buf, 1, 1, pay, 8);
	buf[F_L4] = 0;
	expect_drop(buf, len, 0, TALLY_NET_L4_OTHER);
	buf[F_L4] = 8;
	buf[F_L4 + 1] = 1;
	expect_drop(buf, len, 0, TALLY_NET_L4_OTHER);
	buf[F_L4] = 3;
	buf[F_L4 + 1] = 3;
	expect_drop(buf, len, 0, TALLY_NET_L4_OTHER);
}

static void
drop_port(void **state)
{
	static const uint16_t bad[] = { SELF_PORT - 1, SELF_PORT + SELF_NPORTS,
		0, 1, 65535, SELF_PORT + 256 };
	struct tally_net_self top = test_self;
	uint8_t buf[256];
	struct tally_net_rx rx;
	size_t len;

	(void)state;
	for (size_t i = 0; i < RTE_DIM(bad); i++) {
		struct udp_spec s = test_udp_spec(pay, 10);

		s.dport = bad[i];
		len = build_udp(buf, &s);
		expect_drop(buf, len, 0, TALLY_NET_PORT);
	}
	/* A range at the very top of the port space does not wrap. */
	top.port = RTE_BE16(65534);
	for (unsigned int p = 0; p < 65536; p++) {
		struct udp_spec s = test_udp_spec(pay, 4);
		struct rte_mbuf *m;
		enum tally_net_kind k;

		if (p > 8 && p < 65530)
			continue;
		s.dport = (uint16_t)p;
		len = build_udp(buf, &s);
		m = to_mbuf(pool, buf, len);
		assert_non_null(m);
		k = tally_net_classify(m, &top, &rx);
		rte_pktmbuf_free(m);
		if (p >= 65534) {
			assert_int_equal(k, TALLY_NET_TALLY);
			assert_int_equal(rx.queue, p - 65534);
		} else {
			assert_int_equal(k, TALLY_NET_DROP);
			assert_int_equal(rx.why, TALLY_NET_PORT);
		}
	}
}

static void
drop_bad_udp(void **state)
{
	uint8_t buf[256];
	size_t len = datagram(buf, 0, 100);

	(void)state;
	put16(buf + F_L4 + 4, 7);
	expect_drop(buf, len, 0, TALLY_NET_BAD_UDP);
	put16(buf + F_L4 + 4, 0);
	expect_drop(buf, len, 0, TALLY_NET_BAD_UDP);
	put16(buf + F_L4 + 4, 8 + 101);		/* one past the datagram */
	expect_drop(buf, len, RTE_MBUF_F_RX_L4_CKSUM_GOOD, TALLY_NET_BAD_UDP);
	/* An IPv4 payload too short for the UDP header itself. */
	len = datagram(buf, 0, 0);
	put16(buf + F_IP + 2, 20 + 4);
	fix_ip_cksum(buf);
	expect_drop(buf, len, 0, TALLY_NET_BAD_UDP);
}

static void
drop_arp_other(void **state)
{
	uint8_t buf[64];
	size_t len;

	(void)state;
	len = build_arp(buf, 2, self_ip);	/* reply */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
	len = build_arp(buf, 3, self_ip);	/* RARP request */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
	len = build_arp(buf, 1, self_ip);
	put16(buf + 14, 6);			/* IEEE 802 hardware */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
	len = build_arp(buf, 1, self_ip);
	put16(buf + 16, 0x86dd);		/* IPv6 protocol */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
	len = build_arp(buf, 1, self_ip);
	buf[18] = 8;				/* hardware length */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
	len = build_arp(buf, 1, self_ip);
	buf[19] = 16;				/* protocol length */
	expect_drop(buf, len, 0, TALLY_NET_ARP_OTHER);
}

static void
drop_names(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < TALLY_NET_DROP_MAX_; i++) {
		const char *n = tally_net_drop_name(i);

		assert_non_null(n);
		assert_true(strlen(n) > 0);
		assert_string_not_equal(n, "unknown");
		for (unsigned int j = 0; j < i; j++)
			assert_string_not_equal(n, tally_net_drop_name(j));
	}
	assert_string_equal(tally_net_drop_name(TALLY_NET_OK), "ok");
	assert_string_equal(tally_net_drop_name(TALLY_NET_L4_CKSUM),
		"l4_cksum");
	assert_string_equal(tally_net_drop_name(TALLY_NET_DROP_MAX_),
		"unknown");
	assert_string_equal(tally_net_drop_name(~0u), "unknown");
}

static int
setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 7 + 3);
	pool = test_pool("classify", 256, RTE_MBUF_DEFAULT_BUF_SIZE);
	return pool == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	(void)state;
	if (rte_mempool_avail_count(pool) != 256)
		return -1;	/* an mbuf leaked */
	rte_mempool_free(pool);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(valid_datagram_every_port),
		cmocka_unit_test(valid_empty_and_odd_payloads),
		cmocka_unit_test(valid_with_ip_options),
		cmocka_unit_test(ethernet_padding_accepted),
		cmocka_unit_test(udp_shorter_than_ip_payload),
		cmocka_unit_test(udp_checksum),
		cmocka_unit_test(udp_checksum_ffff),
		cmocka_unit_test(ip_checksum),
		cmocka_unit_test(arp_request_for_us),
		cmocka_unit_test(icmp_echo_for_us),
		cmocka_unit_test(drop_runt),
		cmocka_unit_test(drop_multiseg),
		cmocka_unit_test(drop_l2_other),
		cmocka_unit_test(drop_not_ours),
		cmocka_unit_test(drop_bad_ip),
		cmocka_unit_test(drop_fragment),
		cmocka_unit_test(drop_l4_other),
		cmocka_unit_test(drop_port),
		cmocka_unit_test(drop_bad_udp),
		cmocka_unit_test(drop_arp_other),
		cmocka_unit_test(drop_names),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
