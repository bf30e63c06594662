/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Answers to ARP and ICMP echo requests, written over the request in the
 * same mbuf so that the lcore sends back what it received: no allocation,
 * no copy. Both expect a frame that tally_net_classify() sorted as
 * TALLY_NET_ARP or TALLY_NET_ICMP, whose headers are therefore in the
 * first segment; frame length and Ethernet padding stay as they came.
 */
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "net.h"

#define REPLY_TTL	64

/*
 * Readies m for transmission with no offload requested: drops the RX
 * flags but keeps the two that say how m's buffer is attached, which
 * freeing it needs.
 */
static void
tx_plain(struct rte_mbuf *m, uint32_t l3_len)
{
	m->ol_flags &= RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL;
	m->tx_offload = 0;
	m->l2_len = sizeof(struct rte_ether_hdr);
	m->l3_len = l3_len;
}

/*
 * RFC 1624, eqn. 3: the checksum hc once a 16-bit word of the data it
 * covers changed from old to new (all three as they lie in memory).
 */
static uint16_t
cksum_adjust(uint16_t hc, uint16_t old, uint16_t new)
{
	uint32_t sum = (uint32_t)(uint16_t)~hc + (uint16_t)~old + new;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * Borrows m (classified TALLY_NET_ARP) and rewrites it into our reply:
 * to the requester's hardware address, saying that self->ip is at
 * self->mac.
 */
void
tally_net_arp_reply(struct rte_mbuf *m, const struct tally_net_self *self)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	struct rte_arp_ipv4 *a = &arp->arp_data;

	rte_ether_addr_copy(&a->arp_sha, &eth->dst_addr);
	rte_ether_addr_copy(&self->mac, &eth->src_addr);
	arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REPLY);
	rte_ether_addr_copy(&a->arp_sha, &a->arp_tha);
	a->arp_tip = a->arp_sip;
	rte_ether_addr_copy(&self->mac, &a->arp_sha);
	a->arp_sip = self->ip;
	tx_plain(m, sizeof(*arp));
}

/*
 * Borrows m (classified TALLY_NET_ICMP) and rewrites it into the echo
 * reply: addresses swapped, TTL reset, IPv4 checksum recomputed and the
 * ICMP checksum adjusted for the changed type only, so that a request
 * that arrived damaged gets an equally damaged answer. IPv4 options and
 * the echo data stay.
 */
void
tally_net_icmp_reply(struct rte_mbuf *m, const struct tally_net_self *self)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t hlen = rte_ipv4_hdr_len(ip);
	struct rte_icmp_hdr *icmp =
		(struct rte_icmp_hdr *)((uint8_t *)ip + hlen);
	uint16_t old, new;

	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(&self->mac, &eth->src_addr);
	ip->dst_addr = ip->src_addr;
	ip->src_addr = self->ip;
	ip->time_to_live = REPLY_TTL;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	/* Type and code form the first 16-bit word of the message. */
	memcpy(&old, icmp, sizeof(old));
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	memcpy(&new, icmp, sizeof(new));
	icmp->icmp_cksum = cksum_adjust(icmp->icmp_cksum, old, new);
	tx_plain(m, hlen);
}
