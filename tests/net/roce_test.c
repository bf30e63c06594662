/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RoCEv2 packets (net/roce.c): UD SEND frames that scapy's RoCE layer
 * built (with and without an immediate, PadCnt 3) classified and parsed
 * to the tally packet inside; each refusal (opcode, version, P_Key,
 * destination QPN, lengths, PadCnt, ICRC) on its own; RoCEv2 off when
 * tally-dp has no QPNs; and results: the message copied once, every
 * destination's headers, and ICRCs checked by a bit-at-a-time CRC of our
 * own over the masked headers and the message, for 1, 3 and 64
 * destinations, with pools empty or too small.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "net/icrc.h"
#include "net/roce.h"

#define NBODY	8
#define NHDR	256
#define QPN0	0x100

static struct rte_mempool *body_pool, *hdr_pool, *rx_pool;

/* Us with RoCEv2 on: QPNs 0x100..0x103. */
static struct tally_net_self roce_self;

/* scapy: UD SEND, PadCnt 3, dest QP 0x101, Q_Key 0x11223344, src QP
 * 0xabcdef, PSN 0x123456, 37 message bytes 00..24, UDP checksum 0. */
static const char ud_hex[] =
	"02000000000102000000000208004502005c00074000401126860a0000020a"
	"000001c35012b7004800006430ffff00000101001234561122334400abcdef00"
	"0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
	"2122232400000001b645c1";
/* scapy: UD SEND with immediate 0xdeadbeef, dest QP 0x102, src QP 0x42,
 * 40 message bytes 00..27, PadCnt 0. */
static const char imm_hex[] =
	"02000000000102000000000208004502006000074000401126820a0000020a"
	"000001c35012b7004c00006500ffff00000102001234561122334400000042de"
	"adbeef000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c"
	"1d1e1f20212223242526277abc4376";

#define F_BTH	F_PAY
#define F_DETH	(F_BTH + 12)

static uint32_t
ref_crc32(const uint8_t *p, size_t len)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

/* The ICRC of a flat frame, by the rules written out again here. */
static uint32_t
ref_icrc(const uint8_t *f)
{
	static uint8_t b[10000];
	size_t tlen = get16(f + F_IP + 2);

	memset(b, 0xff, 8);
	memcpy(b + 8, f + F_IP, tlen - 4);
	b[8 + 1] = 0xff;
	b[8 + 8] = 0xff;
	b[8 + 10] = b[8 + 11] = 0xff;
	b[8 + 26] = b[8 + 27] = 0xff;
	b[8 + 32] = 0xff;
	return ref_crc32(b, 8 + tlen - 4);
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		(uint32_t)p[3] << 24;
}

static size_t
unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;

	for (; hex[0] != '\0' && hex[1] != '\0'; hex += 2) {
		char b[3] = { hex[0], hex[1], '\0' };

		out[n++] = (uint8_t)strtoul(b, NULL, 16);
	}
	return n;
}

/* Classifies and parses the n bytes at f; returns the refusal. */
static enum tally_roce_drop
parse(const uint8_t *f, size_t n, struct tally_net_rx *rx,
	struct tally_roce_rx *rr)
{
	struct rte_mbuf *m = to_mbuf_exact(rx_pool, f, n);
	enum tally_net_kind k;
	enum tally_roce_drop why;

	assert_non_null(m);
	k = tally_net_classify(m, &roce_self, rx);
	assert_int_equal(k, TALLY_NET_ROCE);
	why = tally_roce_parse(&roce_self, rx, rr);
	rte_pktmbuf_free(m);
	return why;
}

static void
ud_send(void **state)
{
	uint8_t f[256], copy[256];
	size_t n = unhex(ud_hex, f);
	struct tally_net_rx rx;
	struct tally_roce_rx rr;
	struct rte_mbuf *m;

	(void)state;
	m = to_mbuf(rx_pool, f, n);
	assert_int_equal(tally_net_classify(m, &roce_self, &rx),
		TALLY_NET_ROCE);
	assert_int_equal(tally_roce_parse(&roce_self, &rx, &rr), TALLY_ROCE_OK);
	assert_int_equal(rx.queue, 1);
	assert_int_equal(rx.len, 37);
	assert_ptr_equal(rx.payload, rte_pktmbuf_mtod(m, uint8_t *) + F_DETH + 8);
	assert_int_equal(rx.payload[0], 0);
	assert_int_equal(rx.payload[36], 0x24);
	assert_int_equal(rx.src.ip, peer_ip);
	assert_int_equal(rx.src.port, rte_cpu_to_be_16(4791));
	assert_int_equal(rr.src_qpn, 0xabcdef);
	assert_int_equal(rr.qkey, 0x11223344);
	assert_int_equal(rr.dst_qpn, 0x101);
	assert_int_equal(rr.pad, 3);
	assert_false(rr.has_imm);
	memcpy(copy, rte_pktmbuf_mtod(m, uint8_t *), n);
	assert_true(tally_roce_icrc_ok(m));
	assert_memory_equal(rte_pktmbuf_mtod(m, uint8_t *), copy, n);
	rte_pktmbuf_mtod(m, uint8_t *)[F_DETH + 8 + 20] ^= 1;
	assert_false(tally_roce_icrc_ok(m));
	rte_pktmbuf_free(m);
}

static void
ud_send_imm(void **state)
{
	uint8_t f[256];
	size_t n = unhex(imm_hex, f);
	struct tally_net_rx rx;
	struct tally_roce_rx rr;
	struct rte_mbuf *m;

	(void)state;
	assert_int_equal(parse(f, n, &rx, &rr), TALLY_ROCE_OK);
	assert_int_equal(rx.queue, 2);
	assert_int_equal(rx.len, 40);
	assert_true(rr.has_imm);
	assert_int_equal(rte_be_to_cpu_32(rr.imm), 0xdeadbeef);
	assert_int_equal(rr.src_qpn, 0x42);
	m = to_mbuf(rx_pool, f, n);
	assert_true(tally_roce_icrc_ok(m));
	rte_pktmbuf_free(m);
}

/* One field of the UD SEND frame poked: the refusal it must draw. */
static enum tally_roce_drop
poked(size_t off, uint8_t v)
{
	uint8_t f[256];
	size_t n = unhex(ud_hex, f);
	struct tally_net_rx rx;
	struct tally_roce_rx rr;

	f[off] = v;
	return parse(f, n, &rx, &rr);
}

static void
refusals(void **state)
{
	(void)state;
	assert_int_equal(poked(F_BTH, 0x04), TALLY_ROCE_BTH);	/* RC SEND */
	assert_int_equal(poked(F_BTH, 0x66), TALLY_ROCE_BTH);
	assert_int_equal(poked(F_BTH + 1, 0x31), TALLY_ROCE_BTH); /* TVer 1 */
	assert_int_equal(poked(F_BTH + 2, 0x80), TALLY_ROCE_PKEY);
	assert_int_equal(poked(F_BTH + 3, 0xfe), TALLY_ROCE_PKEY);
	/* A limited member of the default partition: ours is full. */
	assert_int_equal(poked(F_BTH + 2, 0x7f), TALLY_ROCE_OK);
	assert_int_equal(poked(F_BTH + 7, 0x04), TALLY_ROCE_QPN);
	assert_int_equal(poked(F_BTH + 7, 0xff), TALLY_ROCE_QPN);
	assert_int_equal(poked(F_BTH + 7, 0x00), TALLY_ROCE_OK);
	assert_int_equal(poked(F_BTH + 7, 0x03), TALLY_ROCE_OK);
	assert_int_equal(poked(F_BTH + 6, 0x02), TALLY_ROCE_QPN);
	assert_int_equal(poked(F_BTH + 5, 0x01), TALLY_ROCE_QPN);
	/* The BTH's reserved top byte of the QPN word is not the QPN. */
	assert_int_equal(poked(F_BTH + 4, 0xc0), TALLY_ROCE_OK);
}

/* Lengths: short datagrams, and a PadCnt longer than what is left. */
static void
lengths(void **state)
{
	uint8_t f[256];
	size_t n = unhex(ud_hex, f);
	struct tally_net_rx rx;
	struct tally_roce_rx rr;
	uint8_t imm[64] = { 0 };
	const uint8_t *bth;

	(void)state;
	assert_int_equal(parse(f, n, &rx, &rr), TALLY_ROCE_OK);
	/* Parsed again here from f itself (parse() freed its mbuf). */
	bth = f + F_BTH;
	for (uint16_t len = 0; len < 12 + 8 + 3 + 4; len++) {
		rx.payload = bth;
		rx.len = len;
		assert_int_equal(tally_roce_parse(&roce_self, &rx, &rr),
			TALLY_ROCE_LEN);
	}
	/* Exactly the headers, the pad and the ICRC: an empty message. */
	rx.payload = bth;
	rx.len = 12 + 8 + 3 + 4;
	assert_int_equal(tally_roce_parse(&roce_self, &rx, &rr), TALLY_ROCE_OK);
	assert_int_equal(rx.len, 0);
	/* With an immediate, four more. */
	memcpy(imm, bth, 12);
	imm[0] = TALLY_ROCE_OP_UD_SEND_IMM;
	rx.payload = imm;
	rx.len = 12 + 8 + 4 + 3 + 3;
	assert_int_equal(tally_roce_parse(&roce_self, &rx, &rr), TALLY_ROCE_LEN);
	rx.payload = imm;
	rx.len = 12 + 8 + 4 + 3 + 4;
	assert_int_equal(tally_roce_parse(&roce_self, &rx, &rr), TALLY_ROCE_OK);
}

/* No QPNs: port 4791 is like any port outside the range. */
static void
roce_off(void **state)
{
	uint8_t f[256];
	size_t n = unhex(ud_hex, f);
	struct tally_net_rx rx;
	struct rte_mbuf *m = to_mbuf(rx_pool, f, n);

	(void)state;
	assert_int_equal(tally_net_classify(m, &test_self, &rx),
		TALLY_NET_DROP);
	assert_int_equal(rx.why, TALLY_NET_PORT);
	rte_pktmbuf_free(m);
}

/* A UDP length short of the IPv4 packet's: the ICRC is not at its end. */
static void
udp_len_short(void **state)
{
	uint8_t f[256];
	size_t n = unhex(ud_hex, f);
	struct tally_net_rx rx;
	struct rte_mbuf *m;

	(void)state;
	put16(f + F_L4 + 4, (uint16_t)(get16(f + F_L4 + 4) - 4));
	m = to_mbuf(rx_pool, f, n);
	assert_int_equal(tally_net_classify(m, &roce_self, &rx),
		TALLY_NET_DROP);
	assert_int_equal(rx.why, TALLY_NET_BAD_UDP);
	rte_pktmbuf_free(m);
}

static const struct tally_hdr hdr = {
	.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM_RESULT,
	.flags = TALLY_F_LAST, .enc = TALLY_ENC_I32, .job = 7,
	.token = 0x1122334455667788ull, .rank = TALLY_RANK_ALL, .slot = 5,
	.offset = 256, .count = 9, .next_block = TALLY_NO_BLOCK,
};

static struct tally_roce_tmpl tmpls[TALLY_MAX_WORKERS];
static struct rte_ether_addr macs[TALLY_MAX_WORKERS];
static struct tally_roce_dst dsts[TALLY_MAX_WORKERS];

/* Member i: 10.0.1.i, QPN 0x500 + i, MAC 02:00:00:00:01:i. */
static void
make_dsts(void)
{
	for (unsigned int i = 0; i < TALLY_MAX_WORKERS; i++) {
		tally_roce_tmpl_init(&tmpls[i], &roce_self, rte_cpu_to_be_32(
			RTE_IPV4(10, 0, 1, i)), 0x500 + i, 0xcafe0000u + i);
		macs[i] = (struct rte_ether_addr){{ 2, 0, 0, 0, 1, (uint8_t)i }};
		dsts[i] = (struct tally_roce_dst){ &tmpls[i], &macs[i] };
	}
}

/*
 * Checks frame m (any segments) as destination i's result carrying
 * plen payload bytes pay: headers field by field, the message, the pad,
 * and the ICRC against ref_icrc().
 */
static void
check_frame(const struct rte_mbuf *m, unsigned int i, const uint8_t *pay,
	uint16_t plen, uint16_t sport, uint32_t sqpn)
{
	static uint8_t f[10000];
	uint32_t mlen = TALLY_HDR_LEN + plen, pad = (4 - mlen % 4) % 4;
	uint8_t h[TALLY_HDR_LEN];

	assert_int_equal(m->pkt_len, 62 + mlen + pad + 4);
	memcpy(f, rte_pktmbuf_read(m, 0, m->pkt_len, f), m->pkt_len);
	assert_memory_equal(f, &macs[i], 6);
	assert_memory_equal(f + 6, &roce_self.mac, 6);
	assert_true(test_ip_cksum_ok(f));
	assert_int_equal(get16(f + F_IP + 2), m->pkt_len - 14);
	assert_int_equal(f[F_IP + 8], 64);
	assert_int_equal(be32(f + F_IP + 16), RTE_IPV4(10, 0, 1, i));
	assert_int_equal(get16(f + F_L4), sport);
	assert_int_equal(get16(f + F_L4 + 2), 4791);
	assert_int_equal(get16(f + F_L4 + 4), m->pkt_len - 34);
	assert_int_equal(get16(f + F_L4 + 6), 0);
	assert_int_equal(f[F_BTH], 0x64);
	assert_int_equal(f[F_BTH + 1], pad << 4);
	assert_int_equal(get16(f + F_BTH + 2), 0xffff);
	assert_int_equal(be32(f + F_BTH + 4), 0x500 + i);
	assert_int_equal(be32(f + F_DETH), 0xcafe0000u + i);
	assert_int_equal(be32(f + F_DETH + 4), sqpn);
	tally_hdr_encode(&hdr, h);
	assert_memory_equal(f + 62, h, TALLY_HDR_LEN);
	assert_memory_equal(f + 62 + TALLY_HDR_LEN, pay, plen);
	for (uint32_t k = 0; k < pad; k++)
		assert_int_equal(f[62 + mlen + k], 0);
	assert_int_equal(le32(f + m->pkt_len - 4), ref_icrc(f));
}

/* n destinations from one body of plen payload bytes. */
static void
fan(unsigned int n, uint16_t plen)
{
	static uint8_t pay[4096];
	struct rte_mbuf *out[TALLY_MAX_WORKERS], *body;
	uint32_t crc;
	uint8_t pad;

	for (unsigned int k = 0; k < plen; k++)
		pay[k] = (uint8_t)(k * 7 + plen);
	body = tally_roce_body(body_pool, &hdr, pay, plen, NULL, &crc, &pad);
	assert_non_null(body);
	assert_int_equal(pad, (4 - (TALLY_HDR_LEN + plen) % 4) % 4);
	assert_int_equal(tally_roce_fanout(hdr_pool, body, crc, pad,
		rte_cpu_to_be_16(49152 + 3), 0x103, dsts, n, out), 0);
	for (unsigned int i = 0; i < n; i++) {
		check_frame(out[i], i, pay, plen, 49152 + 3, 0x103);
		/* A header mbuf and the body's: no ICRC mbuf. */
		assert_int_equal(out[i]->nb_segs, i + 1 < n ? 2 : 1);
	}
	rte_pktmbuf_free_bulk(out, n);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	assert_int_equal(rte_mempool_avail_count(hdr_pool), NHDR);
}

static void
results(void **state)
{
	(void)state;
	for (uint16_t plen = 0; plen < 9; plen++)
		fan(3, plen);
	fan(1, 1024 - TALLY_HDR_LEN);
	fan(3, 1001);
	fan(TALLY_MAX_WORKERS, 37);
}

/*
 * Destinations of every kind share one ICRC: 3000 templates of random
 * IPs, QPNs and Q_Keys (a group's QPN among them) have one header CRC,
 * their PSN and IPv4 identification chosen for it, and frames to pairs
 * of them, sharing one ICRC in the body, carry the ICRC that the
 * test's own CRC of each whole frame gives.
 */
static void
shared_icrc(void **state)
{
	static struct tally_roce_tmpl t[2];
	static uint8_t pay[300], f[1024];
	struct rte_ether_addr mac = {{ 2, 0, 0, 0, 2, 1 }};
	uint64_t z = 0x9e3779b97f4a7c15ull;
	uint32_t first = 0, seen_psn = 0;

	(void)state;
	for (int k = 0; k < 1500; k++) {
		struct tally_roce_dst d[2];
		struct rte_mbuf *out[2], *body;
		uint32_t crc;
		uint8_t pad;

		for (int j = 0; j < 2; j++) {
			z ^= z << 13;
			z ^= z >> 7;
			z ^= z << 17;
			tally_roce_tmpl_init(&t[j], &roce_self,
				(rte_be32_t)z, k == 7 ? TALLY_ROCE_QPN_MCAST :
				(uint32_t)(z >> 32), (uint32_t)(z >> 16));
			if (k == 0 && j == 0)
				first = t[0].hcrc;
			assert_int_equal(t[j].hcrc, first);
			seen_psn |= be32(t[j].hdr + F_BTH + 8);
			d[j] = (struct tally_roce_dst){ &t[j], &mac };
		}
		body = tally_roce_body(body_pool, &hdr, pay, (uint16_t)(k % 300),
			NULL, &crc, &pad);
		assert_non_null(body);
		assert_int_equal(tally_roce_fanout(hdr_pool, body, crc, pad,
			rte_cpu_to_be_16(49152), 0x101, d, 2, out), 0);
		for (int j = 0; j < 2; j++) {
			const uint8_t *g = rte_pktmbuf_read(out[j], 0,
				out[j]->pkt_len, f);

			assert_true(test_ip_cksum_ok(g));
			assert_int_equal(le32(g + out[j]->pkt_len - 4),
				ref_icrc(g));
			assert_int_equal(be32(g + F_IP + 16) , be32(t[j].hdr +
				F_IP + 16));
		}
		rte_pktmbuf_free_bulk(out, 2);
	}
	/* The PSNs are not all 0: they are what makes the CRCs meet. */
	assert_int_not_equal(seen_psn & 0xffffff, 0);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	assert_int_equal(rte_mempool_avail_count(hdr_pool), NHDR);
}

/* Parsing our own result as a worker would: QPNs and ICRC hold. */
static void
result_parses(void **state)
{
	static uint8_t pay[64], f[512];
	struct rte_mbuf *out[1], *body, *m;
	struct tally_net_self worker = roce_self;
	struct tally_net_rx rx;
	struct tally_roce_rx rr;
	uint32_t crc;
	uint8_t pad;

	(void)state;
	body = tally_roce_body(body_pool, &hdr, pay, 33, NULL, &crc, &pad);
	assert_int_equal(tally_roce_fanout(hdr_pool, body, crc, pad,
		rte_cpu_to_be_16(49152), 0x101, dsts, 1, out), 0);
	memcpy(f, rte_pktmbuf_mtod(out[0], uint8_t *), out[0]->pkt_len);
	worker.ip = rte_cpu_to_be_32(RTE_IPV4(10, 0, 1, 0));
	worker.qpn_base = 0x500;
	m = to_mbuf(rx_pool, f, out[0]->pkt_len);
	assert_int_equal(tally_net_classify(m, &worker, &rx), TALLY_NET_ROCE);
	assert_int_equal(tally_roce_parse(&worker, &rx, &rr), TALLY_ROCE_OK);
	assert_int_equal(rx.len, TALLY_HDR_LEN + 33);
	assert_int_equal(rr.src_qpn, 0x101);
	assert_true(tally_roce_icrc_ok(m));
	rte_pktmbuf_free(m);
	rte_pktmbuf_free(out[0]);
}

static void
pools_short(void **state)
{
	struct rte_mbuf *out[TALLY_MAX_WORKERS], *held[NHDR], *body;
	struct rte_mempool *tiny = test_pool("roce_tiny", 4,
		RTE_PKTMBUF_HEADROOM + 40);
	uint8_t pay[16] = { 0 }, pad;
	uint32_t crc;

	(void)state;
	/* No room for the message and its ICRC: no body. */
	assert_null(tally_roce_body(tiny, &hdr, pay, 16, NULL, &crc, &pad));
	assert_int_equal(rte_mempool_avail_count(tiny), 4);
	/* Header pool empty: nothing built, the body freed. */
	assert_int_equal(rte_pktmbuf_alloc_bulk(hdr_pool, held, NHDR), 0);
	body = tally_roce_body(body_pool, &hdr, pay, 16, NULL, &crc, &pad);
	assert_int_equal(tally_roce_fanout(hdr_pool, body, crc, pad, 0, 1,
		dsts, 2, out), -ENOBUFS);
	rte_pktmbuf_free_bulk(held, NHDR);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	/* A pad count that cannot be: refused. */
	body = tally_roce_body(body_pool, &hdr, pay, 16, NULL, &crc, &pad);
	assert_int_equal(tally_roce_fanout(hdr_pool, body, crc, 4, 0, 1,
		dsts, 1, out), -EINVAL);
	assert_int_equal(rte_mempool_avail_count(body_pool), NBODY);
	rte_mempool_free(tiny);
}

static void
pmtu(void **state)
{
	(void)state;
	assert_int_equal(tally_roce_pmtu(1500), 1024);
	assert_int_equal(tally_roce_pmtu(9000), 4096);
	assert_int_equal(tally_roce_pmtu(3000), 2048);
	assert_int_equal(tally_roce_pmtu(1024 + 56), 1024);
	assert_int_equal(tally_roce_pmtu(1024 + 55), 512);
	assert_int_equal(tally_roce_pmtu(300), 0);
	assert_string_equal(tally_roce_drop_name(TALLY_ROCE_ICRC), "icrc");
	assert_string_equal(tally_roce_drop_name(99), "unknown");
}

static int
setup(void **state)
{
	(void)state;
	roce_self = test_self;
	roce_self.qpn_base = QPN0;
	body_pool = test_pool("roce_body", NBODY, RTE_PKTMBUF_HEADROOM + 9000);
	hdr_pool = test_pool("roce_hdr", NHDR, RTE_PKTMBUF_HEADROOM + 128);
	rx_pool = test_pool("roce_rx", 64, RTE_PKTMBUF_HEADROOM + 2048);
	make_dsts();
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
		cmocka_unit_test(ud_send),
		cmocka_unit_test(ud_send_imm),
		cmocka_unit_test(refusals),
		cmocka_unit_test(lengths),
		cmocka_unit_test(roce_off),
		cmocka_unit_test(udp_len_short),
		cmocka_unit_test(results),
		cmocka_unit_test(shared_icrc),
		cmocka_unit_test(result_parses),
		cmocka_unit_test(pools_short),
		cmocka_unit_test(pmtu),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	tally_icrc_init();
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
