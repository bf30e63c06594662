/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The dataplane's packet layer: pure functions over mbufs, no port, no
 * lcore state, so that cmocka suites test them on mbufs they build.
 *
 * - tally_net_classify() sorts a received frame: a tally datagram for the
 *   engine, an ARP request or ICMP echo request for our address (answered
 *   in place), or a drop with its reason.
 * - tally_net_arp_reply() / tally_net_icmp_reply() turn a request into its
 *   reply in the same mbuf.
 * - tally_net_body() / tally_net_fanout() build results: the tally header
 *   and payload are copied once into a body mbuf; every destination gets
 *   its own Ethernet/IPv4/UDP headers, from a template of its own
 *   (tally_net_tmpl_init()), in front of that body (its headroom for one
 *   destination, a header mbuf chained to an indirect mbuf of the body
 *   for the others), so the payload is never copied per member.
 * - struct tally_net_neigh: IPv4 -> MAC, learned from received frames.
 *
 * Addresses and ports are in network byte order throughout.
 */
#ifndef TALLY_NET_NET_H
#define TALLY_NET_NET_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <tally/proto.h>

#include "agg/job.h"	/* struct tally_addr */

/* Who the dataplane is on one port. */
struct tally_net_self {
	struct rte_ether_addr mac;
	rte_be32_t ip;
	rte_be16_t port;	/* first UDP port of the tally range */
	uint16_t nports;	/* ports in the range: one per worker lcore */
	uint32_t qpn_base;	/* RoCEv2 (roce.h): our QPNs are qpn_base +
				   0..nports-1; 0: RoCEv2 off */
};

enum tally_net_kind {
	TALLY_NET_TALLY,	/* UDP to one of our ports: rx says where */
	TALLY_NET_ARP,		/* ARP request for our IPv4 address */
	TALLY_NET_ICMP,		/* ICMP echo request to our address */
	TALLY_NET_ROCE,		/* UDP to port 4791 (RoCEv2), when
				   self->qpn_base != 0: roce.h takes it on */
	TALLY_NET_DROP,		/* anything else; rx->why says why */
};

/* Why a frame is dropped before the engine sees it (one counter each). */
enum tally_net_drop {
	TALLY_NET_OK = 0,
	TALLY_NET_RUNT,		/* shorter than its headers say (IPv4 total
				   length included) */
	TALLY_NET_MULTISEG,	/* headers or payload not in the first
				   segment (padding may lie beyond) */
	TALLY_NET_L2_OTHER,	/* neither IPv4 nor ARP (VLANs included) */
	TALLY_NET_NOT_OURS,	/* IPv4/ARP for another address */
	TALLY_NET_BAD_IP,	/* version, header length, total length
				   below the header's */
	TALLY_NET_IP_CKSUM,	/* IPv4 header checksum wrong */
	TALLY_NET_FRAGMENT,	/* IPv4 fragment */
	TALLY_NET_L4_OTHER,	/* not UDP, and not an ICMP echo request */
	TALLY_NET_PORT,		/* UDP to a port outside our range */
	TALLY_NET_BAD_UDP,	/* UDP length does not fit the packet */
	TALLY_NET_L4_CKSUM,	/* UDP checksum wrong */
	TALLY_NET_ARP_OTHER,	/* ARP that is not an IPv4 request */
	TALLY_NET_DROP_MAX_
};

/*
 * What tally_net_classify() found in a frame. The source fields are
 * filled as far as the frame was read, on drops too: src_mac from the
 * Ethernet header (the ARP sender's for ARP), src.ip from the IPv4 or
 * ARP header, src.port from the UDP header.
 */
struct tally_net_rx {
	enum tally_net_drop why;	/* TALLY_NET_OK unless kind is DROP */
	struct tally_addr src;		/* IPv4 source and UDP source port */
	struct rte_ether_addr src_mac;
	uint16_t queue;			/* dst port - self->port: the lcore */
	const uint8_t *payload;		/* UDP payload, inside m */
	uint16_t len;			/* its length */
};

/*
 * Classifies frame m (borrowed; not modified). Checks the IPv4 header
 * (and its checksum, unless the mbuf's RX offload flags vouch for it), and
 * the UDP checksum when the frame carries one and the port did not
 * verify it. Fills rx; returns its kind.
 */
enum tally_net_kind tally_net_classify(const struct rte_mbuf *m,
	const struct tally_net_self *self, struct tally_net_rx *rx);

/* Rewrites the ARP request in m (classified TALLY_NET_ARP) into our reply. */
void tally_net_arp_reply(struct rte_mbuf *m, const struct tally_net_self *self);

/* Rewrites the ICMP echo request in m into the echo reply. */
void tally_net_icmp_reply(struct rte_mbuf *m,
	const struct tally_net_self *self);

/*
 * A result body: one mbuf from pool holding the encoded header h, len
 * bytes of payload and, unless tag is NULL, the TALLY_TAG_LEN bytes of
 * tag (an authenticated job's), all copied here, once. *cksum receives the raw 16-bit
 * one's-complement sum of the body for tally_net_fanout(). Returns NULL when
 * the pool is empty or the body does not fit one segment.
 */
struct rte_mbuf *tally_net_body(struct rte_mempool *pool,
	const struct tally_hdr *h, const void *payload, uint16_t len,
	const uint8_t *tag, uint32_t *cksum);

/* Ethernet, IPv4 (no options) and UDP: the headers of a result frame. */
#define TALLY_NET_HDRS_LEN	42

/*
 * The headers of every result frame to one destination, built once
 * (tally_net_tmpl_init()) and kept while the destination stays: Ethernet
 * from self->mac, IPv4 from self->ip to the destination (DF, TTL 64), UDP
 * to its port, and the one's-complement sums of those fixed fields. What
 * varies by frame is left 0 and out of the sums: the destination MAC
 * (the lcore's neighbour cache knows it, and no checksum covers it), the
 * UDP source port (the lcore's), the lengths and the checksums.
 */
struct tally_net_tmpl {
	uint8_t hdr[TALLY_NET_HDRS_LEN];
	uint16_t pad_;
	uint32_t ip_sum;	/* raw sum of the IPv4 header in hdr */
	uint32_t udp_sum;	/* raw sum of the pseudo-header's addresses
				   and protocol, and the destination port */
} __rte_cache_aligned;

/* Fills t for results from self to dst (both borrowed). */
void tally_net_tmpl_init(struct tally_net_tmpl *t,
	const struct tally_net_self *self, const struct tally_addr *dst);

/* One destination of a result: its template and its MAC, borrowed. */
struct tally_net_dst {
	const struct tally_net_tmpl *tmpl;
	const struct rte_ether_addr *mac;
};

/*
 * The result frames of body to the n (<= TALLY_MAX_WORKERS) destinations
 * dst, into out[0..n-1], with UDP source port src_port; body_cksum is
 * what tally_net_body() gave. The payload is not copied: out[n-1] is the
 * body itself, its headers written into its headroom (one segment);
 * every other frame is a header mbuf from pool chained to an indirect
 * mbuf of the body, also from pool (two segments: the port must transmit
 * chained mbufs, RTE_ETH_TX_OFFLOAD_MULTI_SEGS, or linearize them, for
 * which pool's data room must hold the whole frame). pool's data room:
 * RTE_PKTMBUF_HEADROOM + TALLY_NET_HDRS_LEN at least.
 * Consumes body, of which the caller holds the only reference: the
 * frames own it on success, and it is freed on failure. Returns 0;
 * -ENOBUFS when pool is empty, -EINVAL when body or pool does not fit
 * (no frame is built then).
 */
int tally_net_fanout(struct rte_mempool *pool, struct rte_mbuf *body,
	uint32_t body_cksum, rte_be16_t src_port,
	const struct tally_net_dst *dst, unsigned int n, struct rte_mbuf **out);

/*
 * Makes c, a fresh mbuf, an indirect mbuf of body, as
 * rte_pktmbuf_attach() does, but without taking a reference: the caller
 * takes them all at once. body is direct and has no external buffer.
 */
void tally_net_attach_noref(struct rte_mbuf *c, const struct rte_mbuf *body);

/* IPv4 -> MAC cache of fixed size, no allocation after create. */
struct tally_net_neigh;

/* entries: a power of two. NULL with errno EINVAL / ENOMEM. */
struct tally_net_neigh *tally_net_neigh_create(unsigned int entries,
	int socket);

void tally_net_neigh_destroy(struct tally_net_neigh *nb);

/* Remembers (or refreshes) ip's MAC; an old entry may be replaced. */
void tally_net_neigh_learn(struct tally_net_neigh *nb, rte_be32_t ip,
	const struct rte_ether_addr *mac);

/* ip's MAC, or NULL if not known; points into the table until a learn. */
const struct rte_ether_addr *tally_net_neigh_lookup(
	const struct tally_net_neigh *nb, rte_be32_t ip);

/*
 * The 16-bit one's-complement sum of len bytes at buf (any alignment),
 * folded: the same value as rte_raw_cksum(), computed with wide vectors.
 */
uint16_t tally_net_raw_cksum(const void *buf, size_t len);

/* A short constant name for a drop reason, for counters and telemetry. */
const char *tally_net_drop_name(unsigned int why);

#endif /* TALLY_NET_NET_H */
