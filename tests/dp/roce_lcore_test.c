/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally-dp's lcore loop with RoCEv2 members, on a net_ring port as
 * lcore_test.c runs it: UD SEND frames built here byte by byte (BTH,
 * DETH, PadCnt, and the ICRC by a bit-at-a-time CRC of this file's own)
 * go into the rx ring, tally_dp_lcore_poll() runs, and the frames it sent
 * are read back from the tx ring.
 *
 * What it pins down: three members' contributions (i32, and i8 of odd
 * length: PadCnt 3) complete a round and every member gets a UD SEND to
 * its IP and QPN, from the lcore's QPN, with the job's Q_Key, the
 * widened sum and an ICRC that holds; a retransmission gets the stored
 * result back to the sender's QPN; each forgery (ICRC, P_Key, Q_Key,
 * destination QPN, source QPN, source IP, a RoCEv2 packet for a UDP
 * job) is dropped under its own counter, sends nothing and leaves the
 * round open; a job with a multicast group gets one frame a round, to
 * the group and QP 0xffffff.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <tally/limits.h>

#include "dp.h"
#include "frame.h"
#include "net/icrc.h"

#define RING_SIZE	1024
#define NB_MBUFS	1023
#define WORLD		3
#define TOKEN		UINT64_C(0x0123456789abcdef)
#define QPN0		0x100		/* tally-dp's one QPN */
#define MQPN(r)		(0x700u + (r))	/* member r's QPN */
#define JOB		30
#define QKEY		0x12345u

static struct tally_dp dp;
static struct tally_dp_lcore *lc;
static struct rte_ring *rxr, *txr;
static struct rte_mempool *frame_pool;

static rte_be32_t
mip(unsigned int r)
{
	return rte_cpu_to_be_32(RTE_IPV4(10, 0, 3, 10 + r));
}

static struct rte_ether_addr
mmac(unsigned int r)
{
	return (struct rte_ether_addr){{ 0x02, 0, 0, 0x03, 0, (uint8_t)r }};
}

static uint32_t
crc32_ref(const uint8_t *p, size_t len)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

/* The ICRC of the flat frame f (IPv4 without options). */
static uint32_t
icrc_ref(const uint8_t *f)
{
	static uint8_t b[4096];
	size_t tlen = get16(f + F_IP + 2);

	memset(b, 0xff, 8);
	memcpy(b + 8, f + F_IP, tlen - 4);
	b[9] = b[16] = b[18] = b[19] = 0xff;	/* TOS, TTL, checksum */
	b[34] = b[35] = 0xff;			/* UDP checksum */
	b[40] = 0xff;				/* BTH byte 4 */
	return crc32_ref(b, 8 + tlen - 4);
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

/* A forgery: which field of an otherwise good frame to break. */
enum poke { NONE, ICRC, PKEY, QKEY_, DQPN, SQPN, SIP };

/*
 * Rank r's contribution to slot 0, round rnd: count elements of enc,
 * element e of rank r being r + 1 + e, as a UD SEND (with an immediate
 * when imm) into the rx ring, broken as p says.
 */
static void
send_roce(unsigned int r, uint8_t enc, uint16_t count, uint64_t rnd,
	int retx, int imm, enum poke p)
{
	uint8_t f[2048] = { 0 }, *b = f + F_PAY, *msg;
	size_t esz = enc == TALLY_ENC_I8 ? 1 : 4;
	size_t mlen = TALLY_HDR_LEN + count * esz, pad = (4 - mlen % 4) % 4;
	size_t hl = 12 + 8 + (imm ? 4 : 0), udp = 8 + hl + mlen + pad + 4;
	struct tally_hdr h = {
		.version = TALLY_PROTO_VERSION, .type = TALLY_PT_SUM,
		.flags = (uint8_t)((rnd & 1 ? TALLY_F_SET : 0) |
			(retx ? TALLY_F_RETX : 0)), .enc = enc, .job = JOB,
		.token = TOKEN, .rank = (uint8_t)r, .count = count,
		.next_block = TALLY_NO_BLOCK, .round = rnd,
	};
	struct rte_ether_addr mac = mmac(r);
	struct rte_mbuf *m;

	memcpy(f, dp.self.mac.addr_bytes, 6);
	memcpy(f + 6, mac.addr_bytes, 6);
	put16(f + 12, 0x0800);
	f[F_IP] = 0x45;
	put16(f + F_IP + 2, (uint16_t)(20 + udp));
	f[F_IP + 8] = 64;
	f[F_IP + 9] = 17;
	{
		rte_be32_t sip = mip(p == SIP ? 7 : r);

		memcpy(f + F_IP + 12, &sip, 4);
	}
	memcpy(f + F_IP + 16, &dp.self.ip, 4);
	fix_ip_cksum(f);
	put16(f + F_L4, 0xc000);
	put16(f + F_L4 + 2, 4791);
	put16(f + F_L4 + 4, (uint16_t)udp);
	b[0] = imm ? 0x65 : 0x64;
	b[1] = (uint8_t)(pad << 4);
	put16(b + 2, p == PKEY ? 0x1234 : 0xffff);
	put32(b + 4, p == DQPN ? QPN0 + 1 : QPN0);
	put32(b + 8, 77);
	put32(b + 12, p == QKEY_ ? QKEY + 1 : QKEY);
	put32(b + 16, p == SQPN ? MQPN(r) + 9 : MQPN(r));
	if (imm)
		put32(b + 20, 0xabcdef01);
	msg = b + hl;
	tally_hdr_encode(&h, msg);
	for (unsigned int e = 0; e < count; e++) {
		int32_t v = (int32_t)(r + 1 + e);

		if (esz == 1)
			msg[TALLY_HDR_LEN + e] = (uint8_t)(int8_t)v;
		else
			memcpy(msg + TALLY_HDR_LEN + 4 * e, &v, 4);
	}
	put32(b + hl + mlen + pad, 0);
	{
		uint32_t ic = icrc_ref(f) ^ (p == ICRC ? 1u : 0u);
		uint8_t *w = b + hl + mlen + pad;

		w[0] = (uint8_t)ic;
		w[1] = (uint8_t)(ic >> 8);
		w[2] = (uint8_t)(ic >> 16);
		w[3] = (uint8_t)(ic >> 24);
	}
	m = to_mbuf(frame_pool, f, F_L4 + udp);
	assert_non_null(m);
	assert_int_equal(rte_ring_enqueue(rxr, m), 0);
}

static void
poll_all(void)
{
	unsigned int want = rte_ring_count(rxr);

	assert_int_equal(tally_dp_lcore_poll(lc), want);
}

/*
 * Reads the sent frames: every one a UD SEND from our address and QPN
 * with the job's Q_Key and a good ICRC; result r (by destination QPN)
 * holds the sum of count widened elements. Returns how many.
 */
static unsigned int
take_results(uint16_t count, unsigned int *to)
{
	unsigned int n = 0;
	void *p;

	while (rte_ring_dequeue(txr, &p) == 0) {
		static uint8_t f[4096];
		struct rte_mbuf *m = p;
		const uint8_t *b = f + F_PAY;
		size_t pad;
		struct tally_hdr h;
		unsigned int r;

		assert_true(m->pkt_len <= sizeof(f));
		memcpy(f, rte_pktmbuf_read(m, 0, m->pkt_len, f), m->pkt_len);
		assert_true(test_ip_cksum_ok(f));
		assert_int_equal(get16(f + F_L4 + 2), 4791);
		assert_int_equal(get16(f + F_L4), 49152);
		assert_int_equal(b[0], 0x64);
		assert_int_equal(get16(b + 2), 0xffff);
		r = (get32(b + 4) & 0xffffff) - MQPN(0);
		assert_true(r < WORLD);
		assert_memory_equal(f, mmac(r).addr_bytes, 6);
		assert_int_equal(get32(f + F_IP + 16),
			rte_be_to_cpu_32(mip(r)));
		assert_int_equal(get32(b + 12), QKEY);
		assert_int_equal(get32(b + 16), QPN0);
		pad = (b[1] >> 4) & 3;
		assert_int_equal(m->pkt_len, F_PAY + 20 + TALLY_HDR_LEN +
			4u * count + pad + 4);
		{
			const uint8_t *w = f + m->pkt_len - 4;

			assert_int_equal((uint32_t)w[0] | (uint32_t)w[1] << 8 |
				(uint32_t)w[2] << 16 | (uint32_t)w[3] << 24,
				icrc_ref(f));
		}
		assert_int_equal(tally_hdr_decode(b + 20, TALLY_HDR_LEN +
			4u * count, &h), TALLY_ST_OK);
		assert_int_equal(h.type, TALLY_PT_SUM_RESULT);
		assert_int_equal(h.count, count);
		for (unsigned int e = 0; e < count; e++) {
			int32_t got;

			memcpy(&got, b + 20 + TALLY_HDR_LEN + 4 * e, 4);
			assert_int_equal(got, (int32_t)(6 + 3 * e));
		}
		to[n++] = r;
		rte_pktmbuf_free(m);
	}
	return n;
}

/* i32 with an immediate, and i8 of odd length (PadCnt 3 up). */
static void
round_to_every_member(void **state)
{
	unsigned int to[8];

	(void)state;
	for (unsigned int r = 0; r < WORLD; r++)
		send_roce(r, TALLY_ENC_I32, 9, 0, 0, r == 1, NONE);
	poll_all();
	assert_int_equal(take_results(9, to), WORLD);
	for (unsigned int r = 0; r < WORLD; r++)
		send_roce(r, TALLY_ENC_I8, 7, 1, 0, 0, NONE);
	poll_all();
	assert_int_equal(take_results(7, to), WORLD);
	/* Rank 2 lost its result: the stored one comes back to it. */
	send_roce(2, TALLY_ENC_I8, 7, 1, 1, 0, NONE);
	poll_all();
	assert_int_equal(take_results(7, to), 1);
	assert_int_equal(to[0], 2);
	for (unsigned int k = 1; k < TALLY_ROCE_DROP_MAX_; k++)
		assert_int_equal(lc->st.roce_drops[k], 0);
}

/* Each forgery under its own counter; the round stays open. */
static void
forgeries(void **state)
{
	static const struct { enum poke p; enum tally_roce_drop why; } f[] = {
		{ ICRC, TALLY_ROCE_ICRC }, { PKEY, TALLY_ROCE_PKEY },
		{ QKEY_, TALLY_ROCE_QKEY }, { DQPN, TALLY_ROCE_QPN },
		{ SQPN, TALLY_ROCE_MEMBER }, { SIP, TALLY_ROCE_MEMBER },
	};
	unsigned int to[8];
	uint64_t before[TALLY_ROCE_DROP_MAX_];

	(void)state;
	for (size_t i = 0; i < RTE_DIM(f); i++) {
		memcpy(before, lc->st.roce_drops, sizeof(before));
		/* Ranks 0 and 1 for real, rank 2 forged: no result. */
		if (i == 0) {
			send_roce(0, TALLY_ENC_I32, 5, 2, 0, 0, NONE);
			send_roce(1, TALLY_ENC_I32, 5, 2, 0, 0, NONE);
		}
		send_roce(2, TALLY_ENC_I32, 5, 2, 0, 0, f[i].p);
		poll_all();
		assert_int_equal(take_results(5, to), 0);
		for (unsigned int k = 1; k < TALLY_ROCE_DROP_MAX_; k++)
			assert_int_equal(lc->st.roce_drops[k] - before[k],
				k == (unsigned int)f[i].why);
	}
	/* The real rank 2 completes it. */
	send_roce(2, TALLY_ENC_I32, 5, 2, 0, 0, NONE);
	poll_all();
	assert_int_equal(take_results(5, to), WORLD);
}

static int
add_job(uint16_t id, int roce, rte_be32_t group)
{
	char why[256];
	struct tally_job_conf c = {
		.id = id, .token = TOKEN, .world = WORLD, .window = 4,
		.max_elems = 64, .roce = (uint8_t)roce, .qkey = QKEY,
		.group = { .ip = group, .port = RTE_BE16(4791) },
	};

	for (unsigned int r = 0; r < WORLD; r++) {
		c.members[r].ip = mip(r);
		c.members[r].port = RTE_BE16(4791);
		c.qpn[r] = MQPN(r);
	}
	return tally_dp_job_add(&dp, &c, TALLY_ENC_ALL, why, sizeof(why));
}

/* The same packet for a job whose members are UDP: not a member. */
static void
udp_job_refuses_roce(void **state)
{
	unsigned int to[8];
	uint64_t before = lc->st.roce_drops[TALLY_ROCE_MEMBER];

	(void)state;
	assert_int_equal(tally_dp_job_del(&dp, JOB, NULL), 0);
	assert_int_equal(add_job(JOB, 0, 0), 0);
	send_roce(0, TALLY_ENC_I32, 5, 0, 0, 0, NONE);
	poll_all();
	assert_int_equal(take_results(5, to), 0);
	assert_int_equal(lc->st.roce_drops[TALLY_ROCE_MEMBER], before + 1);
	assert_int_equal(tally_dp_job_del(&dp, JOB, NULL), 0);
	assert_int_equal(add_job(JOB, 1, 0), 0);
}

/*
 * A RoCEv2 job with a multicast group: one UD SEND a round, to the
 * group's address and MAC and destination QP 0xffffff, its ICRC good.
 */
static void
group_result(void **state)
{
	rte_be32_t g = rte_cpu_to_be_32(UINT32_C(0xef010203)); /* 239.1.2.3 */
	static uint8_t f[4096];
	struct rte_mbuf *m;
	void *p = NULL;

	(void)state;
	assert_int_equal(tally_dp_job_del(&dp, JOB, NULL), 0);
	assert_int_equal(add_job(JOB, 1, g), 0);
	for (unsigned int r = 0; r < WORLD; r++)
		send_roce(r, TALLY_ENC_I32, 6, 0, 0, 0, NONE);
	poll_all();
	assert_int_equal(rte_ring_count(txr), 1);
	assert_int_equal(rte_ring_dequeue(txr, &p), 0);
	m = p;
	memcpy(f, rte_pktmbuf_read(m, 0, m->pkt_len, f), m->pkt_len);
	assert_memory_equal(f, ((const uint8_t []){ 0x01, 0, 0x5e, 1, 2, 3 }),
		6);
	assert_int_equal(get32(f + F_IP + 16), UINT32_C(0xef010203));
	assert_int_equal(get32(f + F_PAY + 4) & 0xffffff, 0xffffff);
	assert_int_equal(get32(f + F_PAY + 12), QKEY);
	{
		const uint8_t *w = f + m->pkt_len - 4;

		assert_int_equal((uint32_t)w[0] | (uint32_t)w[1] << 8 |
			(uint32_t)w[2] << 16 | (uint32_t)w[3] << 24,
			icrc_ref(f));
	}
	rte_pktmbuf_free(m);
	assert_int_equal(tally_dp_job_del(&dp, JOB, NULL), 0);
	assert_int_equal(add_job(JOB, 1, 0), 0);
}

static int
setup(void **state)
{
	int port;

	(void)state;
	rxr = rte_ring_create("roce_rx", RING_SIZE, SOCKET_ID_ANY,
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	txr = rte_ring_create("roce_tx", RING_SIZE, SOCKET_ID_ANY,
		RING_F_SP_ENQ | RING_F_SC_DEQ);
	frame_pool = test_pool("roce_frames", NB_MBUFS,
		RTE_PKTMBUF_HEADROOM + 2048);
	if (rxr == NULL || txr == NULL || frame_pool == NULL)
		return -1;
	port = rte_eth_from_rings("roce_lcore", &rxr, 1, &txr, 1,
		rte_socket_id());
	if (port < 0)
		return -1;
	dp.port_id = (uint16_t)port;
	dp.nworkers = 1;
	dp.max_jobs = 4;
	dp.self.ip = self_ip;
	dp.self.port = RTE_BE16(SELF_PORT);
	dp.self.nports = 1;
	dp.self.qpn_base = QPN0;
	lc = &dp.lcores[0];
	lc->dp = &dp;
	lc->lcore_id = rte_lcore_id();
	lc->neigh = tally_net_neigh_create(64, SOCKET_ID_ANY);
	if (lc->neigh == NULL || tally_dp_lcore_init(lc) != 0 ||
			tally_dp_port_init(&dp, NB_MBUFS, 1500) != 0)
		return -1;
	lc->rxq = 0;
	lc->txq = 0;
	tally_icrc_init();
	if (tally_dp_jobs_init(&dp) != 0)
		return -1;
	return add_job(JOB, 1, 0) == 0 ? 0 : -1;
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

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_to_every_member),
		cmocka_unit_test(forgeries),
		cmocka_unit_test(udp_job_refuses_roce),
		cmocka_unit_test(group_result),
	};
	int rc;

	(void)argc;
	if (test_eal_init(argv[0]) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, setup, teardown);
	test_eal_fini();
	return rc;
}
