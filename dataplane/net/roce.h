/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RoCEv2 framing (docs/protocol.md, "RoCEv2 framing"): UD SEND packets
 *
 *   Ethernet | IPv4 | UDP 4791 | BTH | DETH | [ImmDt] | tally | pad | ICRC
 *
 * whose message is an unchanged tally packet (header, payload, tag), so
 * the engine sees what it sees over UDP. tally-dp is a set of UD queue
 * pairs, qpn_base + lcore index, one per worker lcore: the BTH's
 * destination QPN does what the UDP port does for UDP (slot s belongs to
 * QPN qpn_base + s % lcores). A RoCE member is (source IP, source QPN).
 *
 * - tally_roce_parse() checks the BTH and DETH of a datagram that
 *   tally_net_classify() found addressed to UDP port 4791, and points rx
 *   at the tally packet inside; tally_roce_icrc_ok() checks the ICRC (the
 *   slot's owner does it, once).
 * - tally_roce_body() / tally_roce_fanout() build results as
 *   tally_net_body() / tally_net_fanout() do for UDP: the message is
 *   copied once, its CRC taken once, and combined once with the CRC of
 *   the headers, which is the same for every destination (each
 *   template's PSN and IPv4 identification are chosen for it): one ICRC
 *   for all, carried in the body.
 *
 * Addresses in network byte order; QPNs and Q_Keys in host order.
 */
#ifndef TALLY_NET_ROCE_H
#define TALLY_NET_ROCE_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "net.h"

#include <tally/roce.h>	/* the wire constants */

/* Ethernet, IPv4 (no options), UDP, BTH, DETH: a result's headers. */
#define TALLY_ROCE_HDRS_LEN	(TALLY_NET_HDRS_LEN + TALLY_ROCE_BTH_LEN + \
				 TALLY_ROCE_DETH_LEN)

/* Why a RoCEv2 packet is refused (one counter each, drop_roce_<name>). */
enum tally_roce_drop {
	TALLY_ROCE_OK = 0,
	TALLY_ROCE_BTH,		/* not a UD SEND (opcode), or a BTH version
				   other than 0 */
	TALLY_ROCE_LEN,		/* shorter than BTH, DETH, ImmDt and ICRC, or
				   a pad count longer than the message */
	TALLY_ROCE_PKEY,	/* P_Key not of the default partition */
	TALLY_ROCE_QPN,		/* destination QPN not one of ours */
	TALLY_ROCE_ICRC,	/* ICRC wrong */
	TALLY_ROCE_QKEY,	/* Q_Key not the job's */
	TALLY_ROCE_MEMBER,	/* (source IP, source QPN) not the rank's
				   member, or the job has no RoCE members */
	TALLY_ROCE_DROP_MAX_
};

/* A short constant name for a refusal, for counters. */
const char *tally_roce_drop_name(unsigned int why);

/* What tally_roce_parse() read from the BTH and DETH. */
struct tally_roce_rx {
	uint32_t src_qpn;	/* DETH: the sender's QP */
	uint32_t qkey;		/* DETH */
	uint32_t dst_qpn;	/* BTH */
	uint32_t imm;		/* ImmDt, network order, when has_imm */
	uint8_t has_imm;
	uint8_t pad;		/* BTH PadCnt: bytes after the message */
};

/*
 * Checks the RoCEv2 headers of rx (a TALLY_NET_ROCE datagram: rx->payload
 * at the BTH, rx->len bytes to the datagram's end) against self: a UD
 * SEND (with or without immediate) of BTH version 0, P_Key of the
 * default partition (its low 15 bits all ones), destination QPN one of
 * self->qpn_base + 0..nports-1, and lengths that hold together. On
 * success rx->payload and rx->len describe the tally packet (PadCnt and
 * ICRC excluded), rx->queue is the QPN's lcore, rx->src.port is
 * TALLY_ROCE_UDP_PORT (network order; what a RoCE member's entry holds,
 * so the engine's source check compares the IP alone), and rr is filled.
 * The ICRC is not checked here. Returns TALLY_ROCE_OK or the refusal.
 */
enum tally_roce_drop tally_roce_parse(const struct tally_net_self *self,
	struct tally_net_rx *rx, struct tally_roce_rx *rr);

/*
 * Whether the ICRC of frame m (one segment, a datagram that
 * tally_roce_parse() took) holds. Writes m's headers and puts them back
 * (icrc.h): the caller owns m alone.
 */
int tally_roce_icrc_ok(struct rte_mbuf *m);

/*
 * The headers of every RoCE result frame to one destination (a member's
 * IP and QPN, or a multicast group and TALLY_ROCE_QPN_MCAST), built once:
 * Ethernet from self->mac, IPv4 from self->ip (DF, TTL 64), UDP to port
 * 4791 (checksum 0, as RoCEv2 allows), BTH (UD SEND, P_Key 0xffff, the
 * destination QPN) and DETH with qkey. The IPv4 identification and
 * the PSN (free: results go with DF, and a UD QP checks no PSN) are set
 * so that the header CRC is the same constant for every template. What
 * varies by frame is left 0: destination MAC, IPv4 length and checksum,
 * UDP source port and length, PadCnt, DETH source QP.
 */
struct tally_roce_tmpl {
	uint8_t hdr[TALLY_ROCE_HDRS_LEN];
	uint16_t pad_;
	uint32_t ip_sum;	/* raw sum of the IPv4 header in hdr */
	uint32_t hcrc;		/* CRC-32 of hdr as the ICRC sees it (its
				   masked fields all ones, 8 bytes of LRH
				   before), the varying fields 0: the same
				   in every template */
};	/* 72 bytes, not cache-aligned: a job holds 64 of them */

void tally_roce_tmpl_init(struct tally_roce_tmpl *t,
	const struct tally_net_self *self, rte_be32_t dst_ip, uint32_t dst_qpn,
	uint32_t qkey);

/* One destination of a RoCE result: its template and MAC, borrowed. */
struct tally_roce_dst {
	const struct tally_roce_tmpl *tmpl;
	const struct rte_ether_addr *mac;
};

/*
 * A RoCE result message: one mbuf from pool holding the encoded header
 * h, len bytes of payload, the tag unless NULL, and zeros to a multiple
 * of 4 bytes (*pad of them), copied once; *crc receives the CRC-32 of
 * those bytes, the part of every destination's ICRC they make. The pool's
 * data room must also leave TALLY_ROCE_HDRS_LEN of headroom and
 * TALLY_ROCE_ICRC_LEN of tailroom. Returns NULL when the pool is empty
 * or the message does not fit.
 */
struct rte_mbuf *tally_roce_body(struct rte_mempool *pool,
	const struct tally_hdr *h, const void *payload, uint16_t len,
	const uint8_t *tag, uint32_t *crc, uint8_t *pad);

/*
 * The RoCE result frames of body to the n (<= TALLY_MAX_WORKERS)
 * destinations dst, into out[0..n-1], from UDP source port sport and
 * source QP src_qpn; crc and pad as tally_roce_body() gave them. As
 * tally_net_fanout(): out[n-1] is the body itself (headers in its
 * headroom, ICRC in its tailroom); every other frame is a header mbuf
 * from pool and an indirect mbuf of the body, ICRC included, chained
 * (two segments). The ICRC, the same for every destination, is the CRC
 * of the masked headers (equal in every template) combined with crc:
 * the message is not read again. Consumes body; returns 0, -ENOBUFS
 * (pool empty) or -EINVAL (body or pool does not fit), building no
 * frame on failure.
 */
int tally_roce_fanout(struct rte_mempool *pool, struct rte_mbuf *body,
	uint32_t crc, uint8_t pad, rte_be16_t sport, uint32_t src_qpn,
	const struct tally_roce_dst *dst, unsigned int n,
	struct rte_mbuf **out);

#endif /* TALLY_NET_ROCE_H */
