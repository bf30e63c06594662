/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Results on the wire. The tally header and the summed payload are copied
 * once into a body mbuf; each member then gets a 42-byte header mbuf with
 * its own Ethernet, IPv4 and UDP headers, chained to an indirect clone of
 * the body, so that a result for 64 members costs one payload copy and 64
 * small header writes. The UDP checksum covers the body too: its raw sum
 * is taken once, when the body is built, and each destination adds its
 * own headers' sum to it.
 *
 * Pools: the body pool's data room must hold RTE_PKTMBUF_HEADROOM +
 * TALLY_HDR_LEN + the largest payload; the header pool's
 * RTE_PKTMBUF_HEADROOM + 42 (HDRS_LEN); clones take no data room.
 */
#include <string.h>

#include <netinet/in.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "net.h"

#define HDRS_LEN		(sizeof(struct rte_ether_hdr) + \
	sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define IP_UDP_LEN	(sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define RESULT_TTL	64

static inline uint32_t
fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/*
 * Allocates the body from pool and fills it (payload: len bytes,
 * borrowed, copied here). Returns NULL when the pool is empty or the
 * body does not fit one segment, or an IPv4 datagram.
 */
struct rte_mbuf *
tally_net_body(struct rte_mempool *pool, const struct tally_hdr *h,
	const void *payload, uint16_t len, uint32_t *cksum)
{
	uint32_t blen = TALLY_HDR_LEN + (uint32_t)len;
	struct rte_mbuf *m;
	uint8_t *p;

	if (unlikely(blen > UINT16_MAX - IP_UDP_LEN))
		return NULL;
	m = rte_pktmbuf_alloc(pool);
	if (unlikely(m == NULL))
		return NULL;
	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)blen);
	if (unlikely(p == NULL)) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	tally_hdr_encode(h, p);
	if (len != 0)
		memcpy(p + TALLY_HDR_LEN, payload, len);
	*cksum = tally_net_raw_cksum(p, blen);
	return m;
}

/*
 * Writes the Ethernet, IPv4 and UDP headers of a datagram carrying blen
 * bytes of body whose raw sum is bsum, at p (HDRS_LEN bytes).
 */
static void
put_headers(uint8_t *p, const struct tally_net_self *self, rte_be16_t sport,
	const struct rte_ether_addr *dmac, const struct tally_addr *dst,
	uint32_t blen, uint32_t bsum)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)p;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint32_t sum;

	rte_ether_addr_copy(dmac, &eth->dst_addr);
	rte_ether_addr_copy(&self->mac, &eth->src_addr);
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	*ip = (struct rte_ipv4_hdr){
		.version_ihl = RTE_IPV4_VHL_DEF,
		.total_length = rte_cpu_to_be_16((uint16_t)(IP_UDP_LEN + blen)),
		.fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG),
		.time_to_live = RESULT_TTL,
		.next_proto_id = IPPROTO_UDP,
		.src_addr = self->ip,
		.dst_addr = dst->ip,
	};
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = sport;
	udp->dst_port = dst->port;
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + blen));
	udp->dgram_cksum = 0;
	sum = (uint32_t)rte_ipv4_phdr_cksum(ip, 0) +
		rte_raw_cksum(udp, sizeof(*udp)) + fold(bsum);
	udp->dgram_cksum = (uint16_t)~fold(sum);
	if (udp->dgram_cksum == 0)	/* 0 would mean "no checksum" */
		udp->dgram_cksum = 0xffff;
}

/*
 * Borrows body, self, dst_mac and dst; returns a new packet (owned by
 * the caller, to send or free) that holds its own reference to body.
 * NULL when a pool is empty (nothing is kept then) or body is too long
 * for one datagram.
 */
struct rte_mbuf *
tally_net_to(struct rte_mempool *hdr_pool, struct rte_mempool *clone_pool,
	struct rte_mbuf *body, uint32_t body_cksum,
	const struct tally_net_self *self, rte_be16_t src_port,
	const struct rte_ether_addr *dst_mac, const struct tally_addr *dst)
{
	struct rte_mbuf *h, *c;
	uint8_t *p;

	if (unlikely(body->pkt_len > UINT16_MAX - IP_UDP_LEN))
		return NULL;
	h = rte_pktmbuf_alloc(hdr_pool);
	if (unlikely(h == NULL))
		return NULL;
	p = (uint8_t *)rte_pktmbuf_append(h, HDRS_LEN);
	if (unlikely(p == NULL))
		goto free_h;
	c = rte_pktmbuf_clone(body, clone_pool);
	if (unlikely(c == NULL))
		goto free_h;
	put_headers(p, self, src_port, dst_mac, dst, body->pkt_len,
		body_cksum);
	if (unlikely(rte_pktmbuf_chain(h, c) != 0))
		goto free_c;
	h->l2_len = sizeof(struct rte_ether_hdr);
	h->l3_len = sizeof(struct rte_ipv4_hdr);
	h->l4_len = sizeof(struct rte_udp_hdr);
	return h;
free_c:
	rte_pktmbuf_free(c);
free_h:
	rte_pktmbuf_free(h);
	return NULL;
}
