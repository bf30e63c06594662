/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sorting received frames: tally datagrams for the engine, ARP and ICMP
 * echo requests for our address, and drops, each with its reason.
 *
 * Every check reads only the first segment, and only as far as its
 * data_len: a frame whose headers or payload lie beyond it is a RUNT when
 * the whole frame (pkt_len) is shorter still, a MULTISEG otherwise. The
 * IPv4 total length counts as "its headers say": a datagram cut short by
 * the frame is a RUNT, one whose total length is below its header length
 * is BAD_IP. Ethernet padding after the datagram is allowed.
 */
#include <string.h>

#include <netinet/in.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "net.h"
#include "roce.h"

#define ETH_LEN		((uint32_t)sizeof(struct rte_ether_hdr))

/* OK when the first len bytes of m lie in its first segment. */
static inline enum tally_net_drop
need(const struct rte_mbuf *m, uint32_t len)
{
	if (likely(rte_pktmbuf_data_len(m) >= len))
		return TALLY_NET_OK;
	return rte_pktmbuf_pkt_len(m) < len ? TALLY_NET_RUNT :
		TALLY_NET_MULTISEG;
}

static inline enum tally_net_kind
drop(struct tally_net_rx *rx, enum tally_net_drop why)
{
	rx->why = why;
	return TALLY_NET_DROP;
}

/* Folds a 32-bit one's-complement sum to 16 bits. */
static inline uint16_t
fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* Whether the IPv4 header checksum holds, or the port vouched for it. */
static inline int
ip_cksum_ok(const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip,
	uint32_t hlen)
{
	switch (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
	case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
	case RTE_MBUF_F_RX_IP_CKSUM_NONE:	/* header integrity verified */
		return 1;
	case RTE_MBUF_F_RX_IP_CKSUM_BAD:
		return 0;
	default:
		return rte_raw_cksum(ip, hlen) == 0xffff;
	}
}

/*
 * Whether the UDP checksum holds: the port's verdict when it gave one,
 * else computed here over the pseudo-header and the ulen bytes of the
 * datagram. A zero checksum field means the sender computed none.
 */
static inline int
udp_cksum_ok(const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip,
	const struct rte_udp_hdr *udp, uint32_t ulen)
{
	uint32_t sum;

	switch (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) {
	case RTE_MBUF_F_RX_L4_CKSUM_GOOD:
	case RTE_MBUF_F_RX_L4_CKSUM_NONE:	/* data integrity verified */
		return 1;
	case RTE_MBUF_F_RX_L4_CKSUM_BAD:
		return 0;
	default:
		break;
	}
	if (udp->dgram_cksum == 0)
		return 1;
	/* Pseudo-header words as they lie in memory: order-independent. */
	sum = (ip->src_addr & 0xffff) + (ip->src_addr >> 16) +
		(ip->dst_addr & 0xffff) + (ip->dst_addr >> 16) +
		RTE_BE16(IPPROTO_UDP) + udp->dgram_len;
	sum += tally_net_raw_cksum(udp, ulen);
	return fold(sum) == 0xffff;
}

/* An ARP frame: a request for our address, or a drop. */
static enum tally_net_kind
classify_arp(const struct rte_mbuf *m, const struct tally_net_self *self,
	struct tally_net_rx *rx)
{
	const struct rte_arp_hdr *arp;
	enum tally_net_drop why;

	why = need(m, ETH_LEN + sizeof(*arp));
	if (unlikely(why != TALLY_NET_OK))
		return drop(rx, why);
	arp = rte_pktmbuf_mtod_offset(m, const struct rte_arp_hdr *, ETH_LEN);
	if (arp->arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) ||
			arp->arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) ||
			arp->arp_hlen != RTE_ETHER_ADDR_LEN ||
			arp->arp_plen != sizeof(rte_be32_t) ||
			arp->arp_opcode != RTE_BE16(RTE_ARP_OP_REQUEST))
		return drop(rx, TALLY_NET_ARP_OTHER);
	rx->src.ip = arp->arp_data.arp_sip;
	rte_ether_addr_copy(&arp->arp_data.arp_sha, &rx->src_mac);
	if (arp->arp_data.arp_tip != self->ip)
		return drop(rx, TALLY_NET_NOT_OURS);
	return TALLY_NET_ARP;
}

/* An ICMP message of l4len bytes at l4: an echo request, or a drop. */
static enum tally_net_kind
classify_icmp(const uint8_t *l4, uint32_t l4len, struct tally_net_rx *rx)
{
	const struct rte_icmp_hdr *icmp = (const struct rte_icmp_hdr *)l4;

	if (unlikely(l4len < sizeof(*icmp)))
		return drop(rx, TALLY_NET_RUNT);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST ||
			icmp->icmp_code != 0)
		return drop(rx, TALLY_NET_L4_OTHER);
	return TALLY_NET_ICMP;
}

/*
 * A UDP datagram to the RoCEv2 port: its length (the IPv4 packet's to
 * the byte) and checksum (RoCEv2 senders mostly leave it 0) checked;
 * roce.c reads the rest. rx->payload is the BTH.
 */
static enum tally_net_kind
classify_roce(const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip, const struct rte_udp_hdr *udp,
	uint32_t l4len, struct tally_net_rx *rx)
{
	uint32_t ulen = rte_be_to_cpu_16(udp->dgram_len);

	/* The ICRC ends the datagram and the IPv4 packet alike. */
	if (unlikely(ulen < sizeof(*udp) || ulen != l4len))
		return drop(rx, TALLY_NET_BAD_UDP);
	if (unlikely(!udp_cksum_ok(m, ip, udp, ulen)))
		return drop(rx, TALLY_NET_L4_CKSUM);
	rx->payload = (const uint8_t *)(udp + 1);
	rx->len = (uint16_t)(ulen - sizeof(*udp));
	return TALLY_NET_ROCE;
}

/* A UDP datagram of l4len bytes at l4: one for our ports, or a drop. */
static enum tally_net_kind
classify_udp(const struct rte_mbuf *m, const struct tally_net_self *self,
	const struct rte_ipv4_hdr *ip, const uint8_t *l4, uint32_t l4len,
	struct tally_net_rx *rx)
{
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)l4;
	uint32_t q, ulen;

	if (unlikely(l4len < sizeof(*udp)))
		return drop(rx, TALLY_NET_BAD_UDP);
	rx->src.port = udp->src_port;
	if (udp->dst_port == RTE_BE16(TALLY_ROCE_UDP_PORT) &&
			self->qpn_base != 0)
		return classify_roce(m, ip, udp, l4len, rx);
	/* Wraps to a large value below the base: one compare does both. */
	q = (uint32_t)rte_be_to_cpu_16(udp->dst_port) -
		rte_be_to_cpu_16(self->port);
	if (q >= self->nports)
		return drop(rx, TALLY_NET_PORT);
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	if (unlikely(ulen < sizeof(*udp) || ulen > l4len))
		return drop(rx, TALLY_NET_BAD_UDP);
	if (unlikely(!udp_cksum_ok(m, ip, udp, ulen)))
		return drop(rx, TALLY_NET_L4_CKSUM);
	rx->queue = (uint16_t)q;
	rx->payload = l4 + sizeof(*udp);
	rx->len = (uint16_t)(ulen - sizeof(*udp));
	return TALLY_NET_TALLY;
}

/* An IPv4 frame: checks the header, then hands over to its protocol. */
static enum tally_net_kind
classify_ipv4(const struct rte_mbuf *m, const struct tally_net_self *self,
	struct tally_net_rx *rx)
{
	const struct rte_ipv4_hdr *ip;
	enum tally_net_drop why;
	uint32_t hlen, tlen;

	why = need(m, ETH_LEN + sizeof(*ip));
	if (unlikely(why != TALLY_NET_OK))
		return drop(rx, why);
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, ETH_LEN);
	hlen = (uint32_t)(ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) *
		RTE_IPV4_IHL_MULTIPLIER;
	tlen = rte_be_to_cpu_16(ip->total_length);
	if (unlikely(ip->version_ihl >> 4 != IPVERSION ||
			hlen < sizeof(*ip) || tlen < hlen))
		return drop(rx, TALLY_NET_BAD_IP);
	why = need(m, ETH_LEN + tlen);
	if (unlikely(why != TALLY_NET_OK))
		return drop(rx, why);
	if (unlikely(!ip_cksum_ok(m, ip, hlen)))
		return drop(rx, TALLY_NET_IP_CKSUM);
	rx->src.ip = ip->src_addr;
	if (ip->dst_addr != self->ip)
		return drop(rx, TALLY_NET_NOT_OURS);
	if (unlikely(ip->fragment_offset &
			RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)))
		return drop(rx, TALLY_NET_FRAGMENT);
	switch (ip->next_proto_id) {
	case IPPROTO_UDP:
		return classify_udp(m, self, ip, (const uint8_t *)ip + hlen,
			tlen - hlen, rx);
	case IPPROTO_ICMP:
		return classify_icmp((const uint8_t *)ip + hlen, tlen - hlen,
			rx);
	default:
		return drop(rx, TALLY_NET_L4_OTHER);
	}
}

/*
 * Borrows m. rx->src_mac is the Ethernet source (the ARP sender's
 * address for ARP), rx->src.ip the IPv4 or ARP sender as soon as its
 * header was read, rx->src.port the UDP source port; drops fill what they
 * reached, so that a caller may count or learn from them.
 */
enum tally_net_kind
tally_net_classify(const struct rte_mbuf *m, const struct tally_net_self *self,
	struct tally_net_rx *rx)
{
	const struct rte_ether_hdr *eth;
	enum tally_net_drop why;

	memset(rx, 0, sizeof(*rx));
	why = need(m, ETH_LEN);
	if (unlikely(why != TALLY_NET_OK))
		return drop(rx, why);
	eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	rte_ether_addr_copy(&eth->src_addr, &rx->src_mac);
	if (likely(eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV4)))
		return classify_ipv4(m, self, rx);
	if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP))
		return classify_arp(m, self, rx);
	return drop(rx, TALLY_NET_L2_OTHER);
}

const char *
tally_net_drop_name(unsigned int why)
{
	static const char *const names[TALLY_NET_DROP_MAX_] = {
		[TALLY_NET_OK] = "ok",
		[TALLY_NET_RUNT] = "runt",
		[TALLY_NET_MULTISEG] = "multiseg",
		[TALLY_NET_L2_OTHER] = "l2_other",
		[TALLY_NET_NOT_OURS] = "not_ours",
		[TALLY_NET_BAD_IP] = "bad_ip",
		[TALLY_NET_IP_CKSUM] = "ip_cksum",
		[TALLY_NET_FRAGMENT] = "fragment",
		[TALLY_NET_L4_OTHER] = "l4_other",
		[TALLY_NET_PORT] = "port",
		[TALLY_NET_BAD_UDP] = "bad_udp",
		[TALLY_NET_L4_CKSUM] = "l4_cksum",
		[TALLY_NET_ARP_OTHER] = "arp_other",
	};

	return why < TALLY_NET_DROP_MAX_ ? names[why] : "unknown";
}
