/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RoCEv2 UD SEND packets in and out (roce.h).
 *
 * In: the BTH and DETH are read where tally_net_classify() left off;
 * the ICRC is taken by the slot's owner in one rte_net_crc pass over the
 * frame with its variant fields masked in place (icrc.c).
 *
 * Out: as result.c does for UDP, the message (tally header, payload,
 * tag, pad) is copied once into a body mbuf and its CRC taken once; each
 * destination's headers come from its template. A frame's ICRC is the
 * CRC of its 56 masked header bytes (8 of 0xff, IPv4, UDP, BTH, DETH)
 * combined with the message's, and every template's header CRC is the
 * same (HDR_CRC: the template's IPv4 identification and PSN, which no
 * receiver checks, are chosen to make it so), so one ICRC serves every
 * destination of a body: it lies in the body after the message, and a
 * result frame is a header mbuf and an indirect mbuf of the body, as for
 * UDP, with no third mbuf for an ICRC of its own.
 */
#include <errno.h>
#include <string.h>

#include <netinet/in.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "icrc.h"
#include "roce.h"

#define ETH_LEN		sizeof(struct rte_ether_hdr)
#define OFF_IP		ETH_LEN
#define OFF_UDP		(OFF_IP + sizeof(struct rte_ipv4_hdr))
#define OFF_BTH		(OFF_UDP + sizeof(struct rte_udp_hdr))
#define OFF_DETH	(OFF_BTH + TALLY_ROCE_BTH_LEN)
#define MASKED_LEN	(TALLY_ICRC_LRH_LEN + TALLY_ROCE_HDRS_LEN - ETH_LEN)
#define RESULT_TTL	64

/* BTH byte 1: SE, M, PadCnt (2 bits), TVer (4 bits). */
#define BTH_PAD(b1)	(((b1) >> 4) & 3u)
#define BTH_TVER(b1)	((b1) & 0x0fu)

static inline uint32_t
ld_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

static inline void
st_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void
st_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void
st16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

const char *
tally_roce_drop_name(unsigned int why)
{
	static const char *const names[TALLY_ROCE_DROP_MAX_] = {
		[TALLY_ROCE_OK] = "ok",
		[TALLY_ROCE_BTH] = "bth",
		[TALLY_ROCE_LEN] = "len",
		[TALLY_ROCE_PKEY] = "pkey",
		[TALLY_ROCE_QPN] = "qpn",
		[TALLY_ROCE_ICRC] = "icrc",
		[TALLY_ROCE_QKEY] = "qkey",
		[TALLY_ROCE_MEMBER] = "member",
	};

	return why < TALLY_ROCE_DROP_MAX_ ? names[why] : "unknown";
}

/*
 * Borrows self; rewrites rx to the message inside. Checks in the order
 * of the refusals in roce.h, so each packet is counted once, under its
 * first fault.
 */
enum tally_roce_drop
tally_roce_parse(const struct tally_net_self *self, struct tally_net_rx *rx,
	struct tally_roce_rx *rr)
{
	const uint8_t *b = rx->payload;
	uint32_t hdrs = TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_LEN, q;

	if (unlikely(rx->len < TALLY_ROCE_BTH_LEN))
		return TALLY_ROCE_LEN;
	if (unlikely((b[TALLY_ROCE_BTH_OPCODE] != TALLY_ROCE_OP_UD_SEND &&
			b[TALLY_ROCE_BTH_OPCODE] != TALLY_ROCE_OP_UD_SEND_IMM) ||
			BTH_TVER(b[TALLY_ROCE_BTH_FLAGS]) != 0))
		return TALLY_ROCE_BTH;
	rr->has_imm = b[TALLY_ROCE_BTH_OPCODE] == TALLY_ROCE_OP_UD_SEND_IMM;
	rr->pad = (uint8_t)BTH_PAD(b[TALLY_ROCE_BTH_FLAGS]);
	hdrs += rr->has_imm ? TALLY_ROCE_IMM_LEN : 0;
	if (unlikely(rx->len < hdrs + rr->pad + TALLY_ROCE_ICRC_LEN))
		return TALLY_ROCE_LEN;
	/* Ours is 0xffff, a full member: any member of the partition. */
	if (unlikely(((b[TALLY_ROCE_BTH_PKEY] << 8 |
			b[TALLY_ROCE_BTH_PKEY + 1]) & 0x7fff) !=
			(TALLY_ROCE_PKEY_FULL & 0x7fff)))
		return TALLY_ROCE_PKEY;
	rr->dst_qpn = ld_be32(b + TALLY_ROCE_BTH_DQPN) & TALLY_ROCE_QPN_MAX;
	/* Wraps below the base: one compare does both ends. */
	q = rr->dst_qpn - self->qpn_base;
	if (unlikely(q >= self->nports))
		return TALLY_ROCE_QPN;
	rr->qkey = ld_be32(b + TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_QKEY);
	rr->src_qpn = ld_be32(b + TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_SQPN) &
		TALLY_ROCE_QPN_MAX;
	if (rr->has_imm)
		memcpy(&rr->imm, b + TALLY_ROCE_BTH_LEN + TALLY_ROCE_DETH_LEN,
			sizeof(rr->imm));
	rx->queue = (uint16_t)q;
	rx->payload = b + hdrs;
	rx->len = (uint16_t)(rx->len - hdrs - rr->pad - TALLY_ROCE_ICRC_LEN);
	rx->src.port = RTE_BE16(TALLY_ROCE_UDP_PORT);
	return TALLY_ROCE_OK;
}

/* The ICRC lies in the datagram's last 4 bytes, little-endian. */
int
tally_roce_icrc_ok(struct rte_mbuf *m)
{
	uint8_t *ip = rte_pktmbuf_mtod_offset(m, uint8_t *, ETH_LEN);
	uint32_t tlen = (uint32_t)ip[2] << 8 | ip[3];
	const uint8_t *w = ip + tlen - TALLY_ROCE_ICRC_LEN;
	uint32_t want = (uint32_t)w[0] | (uint32_t)w[1] << 8 |
		(uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;

	return tally_icrc_ipv4(ip, tlen) == want;
}

/*
 * CRC-32 of MASKED_LEN (56) zero bytes, zlib.crc32(bytes(56)): what
 * linearity leaves over. A constant, not computed at load time: a CRC
 * taken before rte_eal_init() would ask rte_net_crc for a path too soon.
 */
#define CRC_ZEROS	0xd3c8a549u
_Static_assert(MASKED_LEN == 56, "CRC_ZEROS is the CRC of 56 zero bytes");

/*
 * The header CRC (struct tally_roce_tmpl's hcrc) of every template: any
 * constant would do; this one is the CRC of 56 bytes of 0xff.
 */
#define HDR_CRC		0xd8bbabfbu

/*
 * The template bits free to choose: the IPv4 identification (16 bits;
 * results are sent with DF, so it identifies no fragments) and the
 * BTH's PSN (24; not checked on a UD QP), by their offsets in a frame's
 * headers. Bit i of a choice is bit i % 8 of byte FREE_OFF[i / 8].
 */
#define FREE_BITS	40
static const uint8_t free_off[FREE_BITS / 8] = {
	OFF_IP + 4, OFF_IP + 5, OFF_BTH + 9, OFF_BTH + 10, OFF_BTH + 11,
};

/*
 * A basis of what the free bits do to the header CRC: pin[h] is a
 * change of the CRC whose highest set bit is h, and the choice of free
 * bits that makes it. Made at load time (32 found: any 32 bits of the
 * PSN and identification reach every CRC).
 */
static struct {
	uint32_t crc;
	uint64_t bits;
} pin[32];

/*
 * What flipping free bit i does to the CRC of the masked headers: the
 * CRC register, from 0 and not inverted, after the 56 bytes that are 0
 * but for that bit (the CRC is linear; the constant part cancels).
 */
static uint32_t
free_bit_effect(unsigned int i)
{
	uint32_t c = 0;

	for (unsigned int k = 0; k < MASKED_LEN; k++) {
		unsigned int at = TALLY_ICRC_LRH_LEN + free_off[i / 8] - ETH_LEN;

		c ^= k == at ? 1u << (i % 8) : 0;
		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return c;
}

/* Gaussian elimination over GF(2), at load time: no CRC path needed. */
RTE_INIT(tally_roce_pin_init)
{
	for (unsigned int i = 0; i < FREE_BITS; i++) {
		uint32_t e = free_bit_effect(i);
		uint64_t m = UINT64_C(1) << i;

		while (e != 0) {
			unsigned int h = 31 - (unsigned int)__builtin_clz(e);

			if (pin[h].crc == 0) {
				pin[h].crc = e;
				pin[h].bits = m;
				break;
			}
			e ^= pin[h].crc;
			m ^= pin[h].bits;
		}
	}
}

/*
 * Sets the free bits of hdr (TALLY_ROCE_HDRS_LEN bytes, their bits 0)
 * so that its header CRC, hcrc now, becomes HDR_CRC. Returns the new
 * header CRC (HDR_CRC where the basis is whole, which it is).
 */
static uint32_t
pin_headers(uint8_t *hdr, uint32_t hcrc)
{
	uint32_t d = hcrc ^ HDR_CRC;
	uint64_t m = 0;

	while (d != 0) {
		unsigned int h = 31 - (unsigned int)__builtin_clz(d);

		if (pin[h].crc == 0)
			return hcrc;	/* not reached: the rank is 32 */
		d ^= pin[h].crc;
		m ^= pin[h].bits;
	}
	for (unsigned int i = 0; i < FREE_BITS; i++)
		if (m >> i & 1)
			hdr[free_off[i / 8]] ^= (uint8_t)(1u << (i % 8));
	return HDR_CRC;
}

/*
 * The ICRC's view (icrc.h) of the headers at hdr (TALLY_ROCE_HDRS_LEN
 * bytes from Ethernet), into masked (MASKED_LEN bytes): the LRH's place,
 * TOS, TTL, the IPv4 and UDP checksums and BTH byte 4 set to ones (ones
 * 0xff), or to zeros (ones 0) for the part of a round's fields alone.
 * Returns masked.
 */
static uint8_t *
mask_headers(uint8_t *masked, const uint8_t *hdr, uint8_t ones)
{
	memset(masked, ones, TALLY_ICRC_LRH_LEN);
	memcpy(masked + TALLY_ICRC_LRH_LEN, hdr + OFF_IP,
		TALLY_ROCE_HDRS_LEN - ETH_LEN);
	masked[TALLY_ICRC_LRH_LEN + 1] = ones;		/* TOS */
	masked[TALLY_ICRC_LRH_LEN + 8] = ones;		/* TTL */
	masked[TALLY_ICRC_LRH_LEN + 10] = ones;		/* IPv4 sum */
	masked[TALLY_ICRC_LRH_LEN + 11] = ones;
	masked[TALLY_ICRC_LRH_LEN + 26] = ones;		/* UDP sum */
	masked[TALLY_ICRC_LRH_LEN + 27] = ones;
	masked[TALLY_ICRC_LRH_LEN + 32] = ones;		/* BTH byte 4 */
	return masked;
}

/* Borrows self. The fields that vary by frame stay 0 (roce.h). */
void
tally_roce_tmpl_init(struct tally_roce_tmpl *t,
	const struct tally_net_self *self, rte_be32_t dst_ip, uint32_t dst_qpn,
	uint32_t qkey)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)t->hdr;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint8_t *bth = t->hdr + OFF_BTH, *deth = t->hdr + OFF_DETH;
	uint8_t masked[MASKED_LEN];

	memset(t, 0, sizeof(*t));
	rte_ether_addr_copy(&self->mac, &eth->src_addr);
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = RESULT_TTL;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = self->ip;
	ip->dst_addr = dst_ip;
	udp->dst_port = RTE_BE16(TALLY_ROCE_UDP_PORT);
	bth[TALLY_ROCE_BTH_OPCODE] = TALLY_ROCE_OP_UD_SEND;
	bth[TALLY_ROCE_BTH_PKEY] = TALLY_ROCE_PKEY_FULL >> 8;
	bth[TALLY_ROCE_BTH_PKEY + 1] = TALLY_ROCE_PKEY_FULL & 0xff;
	st_be32(bth + TALLY_ROCE_BTH_DQPN, dst_qpn & TALLY_ROCE_QPN_MAX);
	st_be32(deth + TALLY_ROCE_DETH_QKEY, qkey);
	t->hcrc = pin_headers(t->hdr, tally_crc32(mask_headers(masked,
		t->hdr, 0xff), MASKED_LEN));
	t->ip_sum = rte_raw_cksum(ip, sizeof(*ip));
}

static inline uint32_t
fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* Copies h, payload, tag and the pad; takes their CRC. Borrows all. */
struct rte_mbuf *
tally_roce_body(struct rte_mempool *pool, const struct tally_hdr *h,
	const void *payload, uint16_t len, const uint8_t *tag, uint32_t *crc,
	uint8_t *pad)
{
	uint32_t blen = TALLY_HDR_LEN + (uint32_t)len +
		(tag != NULL ? TALLY_TAG_LEN : 0);
	uint32_t padded = (blen + 3u) & ~3u;
	struct rte_mbuf *m;
	uint8_t *p;

	if (unlikely(padded > UINT16_MAX - TALLY_ROCE_IP_OVERHEAD))
		return NULL;
	m = rte_pktmbuf_alloc(pool);
	if (unlikely(m == NULL))
		return NULL;
	if (unlikely(rte_pktmbuf_tailroom(m) < padded + TALLY_ROCE_ICRC_LEN ||
			rte_pktmbuf_headroom(m) < TALLY_ROCE_HDRS_LEN)) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)padded);
	tally_hdr_encode(h, p);
	if (len != 0)
		memcpy(p + TALLY_HDR_LEN, payload, len);
	if (tag != NULL)
		memcpy(p + TALLY_HDR_LEN + len, tag, TALLY_TAG_LEN);
	memset(p + blen, 0, padded - blen);
	*pad = (uint8_t)(padded - blen);
	*crc = tally_crc32(p, padded);
	return m;
}

/* What the frames of one body share. */
struct round {
	rte_be16_t ip_len;
	rte_be16_t udp_len;
	rte_be16_t sport;
	uint8_t bth1;		/* PadCnt */
	uint32_t src_qpn;
	uint32_t crc;		/* the message's CRC */
	uint32_t hcrc;		/* the round's part of a header CRC */
	uint32_t xpow;		/* x^(8 message bytes) */
};

/*
 * Writes the fields of a round (what a template leaves 0) into p, a
 * frame's headers (TALLY_ROCE_HDRS_LEN bytes) with those fields 0.
 */
static void
put_round(uint8_t *p, const struct round *rd)
{
	st16(p + OFF_IP + offsetof(struct rte_ipv4_hdr, total_length),
		rd->ip_len);
	st16(p + OFF_UDP, rd->sport);
	st16(p + OFF_UDP + offsetof(struct rte_udp_hdr, dgram_len),
		rd->udp_len);
	p[OFF_BTH + TALLY_ROCE_BTH_FLAGS] = rd->bth1;
	st_be32(p + OFF_DETH + TALLY_ROCE_DETH_SQPN, rd->src_qpn);
}

/*
 * rd->hcrc: the CRC of a round's fields alone (all else 0) plus that of
 * zeros. The CRC is linear: a destination's header CRC is its template's
 * (hcrc) plus this, as the fields lie where the template has zeros, so
 * no header is read to make a destination's ICRC.
 */
static void
round_hcrc(struct round *rd)
{
	uint8_t hdr[TALLY_ROCE_HDRS_LEN] = { 0 }, masked[MASKED_LEN];

	put_round(hdr, rd);
	rd->hcrc = tally_crc32(mask_headers(masked, hdr, 0), MASKED_LEN) ^
		CRC_ZEROS;
}

/* Writes destination d's headers at p (TALLY_ROCE_HDRS_LEN bytes). */
static void
put_headers(uint8_t *p, const struct round *rd, const struct tally_roce_dst *d)
{
	const struct tally_roce_tmpl *t = d->tmpl;

	memcpy(p, t->hdr, TALLY_ROCE_HDRS_LEN);
	memcpy(p, d->mac, RTE_ETHER_ADDR_LEN);
	put_round(p, rd);
	st16(p + OFF_IP + offsetof(struct rte_ipv4_hdr, hdr_checksum),
		(uint16_t)~fold(t->ip_sum + rd->ip_len));
}

static inline void
set_lens(struct rte_mbuf *m)
{
	m->l2_len = ETH_LEN;
	m->l3_len = sizeof(struct rte_ipv4_hdr);
	m->l4_len = sizeof(struct rte_udp_hdr);
}

/* Clone i of nc: header mbuf h, then c, an indirect mbuf of the body. */
static void
build_clone(struct rte_mbuf *h, struct rte_mbuf *c,
	const struct rte_mbuf *body, const struct round *rd,
	const struct tally_roce_dst *d)
{
	tally_net_attach_noref(c, body);
	put_headers(rte_pktmbuf_mtod(h, uint8_t *), rd, d);
	h->data_len = TALLY_ROCE_HDRS_LEN;
	h->pkt_len = TALLY_ROCE_HDRS_LEN + body->data_len;
	h->next = c;
	h->nb_segs = 2;
	set_lens(h);
}

/*
 * Consumes body (one segment, its only reference the caller's); borrows
 * pool and dst. On success out[0..n-1] own the body between them.
 */
int
tally_roce_fanout(struct rte_mempool *pool, struct rte_mbuf *body,
	uint32_t crc, uint8_t pad, rte_be16_t sport, uint32_t src_qpn,
	const struct tally_roce_dst *dst, unsigned int n, struct rte_mbuf **out)
{
	struct rte_mbuf *m[2 * (TALLY_MAX_WORKERS - 1)];
	unsigned int nc = n - 1;
	uint32_t blen, icrc;
	struct round rd;
	uint8_t *p;
	int ret = -EINVAL;

	if (n == 0) {
		ret = 0;
		goto free_body;
	}
	blen = body->pkt_len;
	if (unlikely(n > TALLY_MAX_WORKERS || pad > 3 ||
			blen > UINT16_MAX - TALLY_ROCE_IP_OVERHEAD ||
			body->nb_segs != 1 || !RTE_MBUF_DIRECT(body) ||
			rte_mbuf_refcnt_read(body) != 1 ||
			rte_pktmbuf_headroom(body) < TALLY_ROCE_HDRS_LEN ||
			rte_pktmbuf_tailroom(body) < TALLY_ROCE_ICRC_LEN))
		goto free_body;
	rd.ip_len = rte_cpu_to_be_16((uint16_t)(TALLY_ROCE_HDRS_LEN - ETH_LEN +
		blen + TALLY_ROCE_ICRC_LEN));
	rd.udp_len = rte_cpu_to_be_16((uint16_t)(TALLY_ROCE_HDRS_LEN -
		OFF_UDP + blen + TALLY_ROCE_ICRC_LEN));
	rd.sport = sport;
	rd.bth1 = (uint8_t)(pad << 4);
	rd.src_qpn = src_qpn & TALLY_ROCE_QPN_MAX;
	rd.crc = crc;
	rd.xpow = tally_crc32_xpow(blen);
	round_hcrc(&rd);
	if (nc > 0) {
		ret = -ENOBUFS;
		if (unlikely(rte_pktmbuf_alloc_bulk(pool, m, 2 * nc) != 0))
			goto free_body;
		if (unlikely(rte_pktmbuf_tailroom(m[0]) < TALLY_ROCE_HDRS_LEN)) {
			ret = -EINVAL;
			rte_pktmbuf_free_bulk(m, 2 * nc);
			goto free_body;
		}
	}
	/*
	 * Every template's header CRC is the same (tmpl_init), so every
	 * frame's ICRC is: one, after the message, before the clones
	 * attach, so that they carry it too.
	 */
	icrc = tally_crc32_shift(dst[nc].tmpl->hcrc ^ rd.hcrc, crc, rd.xpow);
	st_le32((uint8_t *)rte_pktmbuf_append(body, TALLY_ROCE_ICRC_LEN), icrc);
	if (nc > 0) {
		/* One reference a clone, taken at once. */
		rte_mbuf_refcnt_update(body, (int16_t)nc);
		for (unsigned int i = 0; i < nc; i++) {
			build_clone(m[i], m[nc + i], body, &rd, &dst[i]);
			out[i] = m[i];
		}
	}
	/* The clones see the body as it was: the headers go before it. */
	p = (uint8_t *)rte_pktmbuf_prepend(body, TALLY_ROCE_HDRS_LEN);
	put_headers(p, &rd, &dst[nc]);
	set_lens(body);
	out[nc] = body;
	return 0;
free_body:
	rte_pktmbuf_free(body);
	return ret;
}
