/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Results on the wire. The tally header and the summed payload are copied
 * once into a body mbuf; every destination then gets its own Ethernet,
 * IPv4 and UDP headers in front of that body without the payload being
 * copied: the last destination's headers go into the body's own headroom,
 * and each other destination gets a small header mbuf chained to an
 * indirect mbuf attached to the body.
 *
 * Headers come from templates (struct tally_net_tmpl) built once a
 * destination, with the one's-complement sums of what never changes
 * already taken. A frame then costs a 42-byte copy, its destination MAC,
 * the lengths, and two checksums finished with a few adds: the body's raw
 * sum is taken once, when it is built, and nothing written is read back
 * (a header summed right after it was written stalls on store
 * forwarding).
 *
 * Pools: the body pool's data room must hold RTE_PKTMBUF_HEADROOM +
 * TALLY_HDR_LEN + the largest payload; the header pool's
 * RTE_PKTMBUF_HEADROOM + TALLY_NET_HDRS_LEN at least (its mbufs are used
 * for both the header mbufs and the indirect ones, which keeps freeing a
 * sent frame to one pool).
 */
#include <errno.h>
#include <string.h>

#include <netinet/in.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "net.h"

#define IP_UDP_LEN	(sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define RESULT_TTL	64

_Static_assert(TALLY_NET_HDRS_LEN == sizeof(struct rte_ether_hdr) +
	IP_UDP_LEN, "Ethernet, IPv4 without options, UDP");

/* Where the fields a frame fills lie in its headers. */
#define OFF_IP		sizeof(struct rte_ether_hdr)
#define OFF_UDP		(OFF_IP + sizeof(struct rte_ipv4_hdr))
#define OFF_IP_LEN	(OFF_IP + offsetof(struct rte_ipv4_hdr, total_length))
#define OFF_IP_CKSUM	(OFF_IP + \
	offsetof(struct rte_ipv4_hdr, hdr_checksum))
#define OFF_UDP_SPORT	(OFF_UDP + offsetof(struct rte_udp_hdr, src_port))
#define OFF_UDP_LEN	(OFF_UDP + offsetof(struct rte_udp_hdr, dgram_len))
#define OFF_UDP_CKSUM	(OFF_UDP + \
	offsetof(struct rte_udp_hdr, dgram_cksum))

static inline uint32_t
fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* The two 16-bit words of a 32-bit field, as they lie in memory. */
static inline uint32_t
words32(uint32_t v)
{
	return (v & 0xffff) + (v >> 16);
}

static inline void
st16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

/*
 * Allocates the body from pool and fills it (payload: len bytes, and
 * tag: TALLY_TAG_LEN bytes unless NULL, borrowed, copied here). Returns
 * NULL when the pool is empty or the body does not fit one segment, or
 * an IPv4 datagram.
 */
struct rte_mbuf *
tally_net_body(struct rte_mempool *pool, const struct tally_hdr *h,
	const void *payload, uint16_t len, const uint8_t *tag, uint32_t *cksum)
{
	uint32_t blen = TALLY_HDR_LEN + (uint32_t)len +
		(tag != NULL ? TALLY_TAG_LEN : 0);
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
	if (tag != NULL)
		memcpy(p + TALLY_HDR_LEN + len, tag, TALLY_TAG_LEN);
	*cksum = tally_net_raw_cksum(p, blen);
	return m;
}

/*
 * Borrows self and dst. Fields that vary by frame (destination MAC, UDP
 * source port, lengths, checksums) are left 0 and out of the sums.
 */
void
tally_net_tmpl_init(struct tally_net_tmpl *t, const struct tally_net_self *self,
	const struct tally_addr *dst)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)t->hdr;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	memset(t, 0, sizeof(*t));
	rte_ether_addr_copy(&self->mac, &eth->src_addr);
	eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = RESULT_TTL;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = self->ip;
	ip->dst_addr = dst->ip;
	udp->dst_port = dst->port;
	t->ip_sum = rte_raw_cksum(ip, sizeof(*ip));
	t->udp_sum = words32(self->ip) + words32(dst->ip) +
		RTE_BE16(IPPROTO_UDP) + dst->port;
}

/*
 * What the frames of one body share: the lengths (network order) and
 * the part of the UDP sum that is not the destination's.
 */
struct round {
	uint16_t blen;		/* body bytes, host order */
	rte_be16_t ip_len;
	rte_be16_t udp_len;
	rte_be16_t sport;
	uint32_t udp_sum;	/* lengths (pseudo-header's and UDP's),
				   source port, body */
};

/* Writes the headers for destination d at p (TALLY_NET_HDRS_LEN bytes). */
static inline void
put_headers(uint8_t *p, const struct round *rd, const struct tally_net_dst *d)
{
	const struct tally_net_tmpl *t = d->tmpl;
	uint16_t ck;

	memcpy(p, t->hdr, TALLY_NET_HDRS_LEN);
	memcpy(p, d->mac, RTE_ETHER_ADDR_LEN);
	st16(p + OFF_IP_LEN, rd->ip_len);
	st16(p + OFF_IP_CKSUM, (uint16_t)~fold(t->ip_sum + rd->ip_len));
	st16(p + OFF_UDP_SPORT, rd->sport);
	st16(p + OFF_UDP_LEN, rd->udp_len);
	ck = (uint16_t)~fold(t->udp_sum + rd->udp_sum);
	/* 0 would mean "no checksum"; 0xffff is the same sum. */
	st16(p + OFF_UDP_CKSUM, ck == 0 ? 0xffff : ck);
}

/* The offsets a port needs for checksum offloads; harmless otherwise. */
static inline void
set_lens(struct rte_mbuf *m)
{
	m->l2_len = sizeof(struct rte_ether_hdr);
	m->l3_len = sizeof(struct rte_ipv4_hdr);
	m->l4_len = sizeof(struct rte_udp_hdr);
}

/* Shared with roce.c; net.h says what it does. */
void
tally_net_attach_noref(struct rte_mbuf *c, const struct rte_mbuf *body)
{
	c->priv_size = body->priv_size;
	c->ol_flags = body->ol_flags | RTE_MBUF_F_INDIRECT;
	c->port = body->port;
	c->vlan_tci = body->vlan_tci;
	c->vlan_tci_outer = body->vlan_tci_outer;
	c->tx_offload = body->tx_offload;
	c->hash = body->hash;
	c->packet_type = body->packet_type;
	rte_mbuf_dynfield_copy(c, body);
	c->data_off = body->data_off;
	c->data_len = body->data_len;
	rte_mbuf_iova_set(c, rte_mbuf_iova_get(body));
	c->buf_addr = body->buf_addr;
	c->buf_len = body->buf_len;
	c->next = NULL;
	c->pkt_len = c->data_len;
	c->nb_segs = 1;
}

/*
 * Consumes body (a single-segment mbuf from tally_net_body(), of which
 * the caller holds the only reference); borrows pool and dst. On success
 * out[0..n-1] own the body between them. On failure nothing is kept.
 */
int
tally_net_fanout(struct rte_mempool *pool, struct rte_mbuf *body,
	uint32_t body_cksum, rte_be16_t src_port,
	const struct tally_net_dst *dst, unsigned int n, struct rte_mbuf **out)
{
	struct rte_mbuf *m[2 * (TALLY_MAX_WORKERS - 1)];
	unsigned int nc = n - 1;	/* destinations served by clones */
	struct round rd;
	uint32_t sum;
	uint8_t *p;
	int ret = -EINVAL;

	if (n == 0) {
		ret = 0;
		goto free_body;
	}
	if (unlikely(n > TALLY_MAX_WORKERS || body->pkt_len >
			UINT16_MAX - IP_UDP_LEN || body->nb_segs != 1 ||
			!RTE_MBUF_DIRECT(body) ||
			rte_mbuf_refcnt_read(body) != 1 ||
			rte_pktmbuf_headroom(body) < TALLY_NET_HDRS_LEN))
		goto free_body;
	rd.blen = (uint16_t)body->pkt_len;
	rd.ip_len = rte_cpu_to_be_16((uint16_t)(IP_UDP_LEN + rd.blen));
	rd.udp_len = rte_cpu_to_be_16((uint16_t)(sizeof(struct rte_udp_hdr) +
		rd.blen));
	rd.sport = src_port;
	sum = 2u * rd.udp_len + src_port + fold(body_cksum);
	rd.udp_sum = fold(sum);
	if (nc > 0) {
		ret = -ENOBUFS;
		if (unlikely(rte_pktmbuf_alloc_bulk(pool, m, 2 * nc) != 0))
			goto free_body;
		if (unlikely(rte_pktmbuf_tailroom(m[0]) < TALLY_NET_HDRS_LEN)) {
			ret = -EINVAL;
			rte_pktmbuf_free_bulk(m, 2 * nc);
			goto free_body;
		}
		/* One reference a clone, taken at once, not nc atomics. */
		rte_mbuf_refcnt_update(body, (int16_t)nc);
		for (unsigned int i = 0; i < nc; i++) {
			struct rte_mbuf *h = m[i], *c = m[nc + i];

			tally_net_attach_noref(c, body);
			put_headers(rte_pktmbuf_mtod(h, uint8_t *), &rd,
				&dst[i]);
			h->data_len = TALLY_NET_HDRS_LEN;
			h->pkt_len = TALLY_NET_HDRS_LEN + (uint32_t)rd.blen;
			h->next = c;
			h->nb_segs = 2;
			set_lens(h);
			out[i] = h;
		}
	}
	/* The last destination's headers go in front of the body itself. */
	p = (uint8_t *)rte_pktmbuf_prepend(body, TALLY_NET_HDRS_LEN);
	put_headers(p, &rd, &dst[nc]);
	set_lens(body);
	out[nc] = body;
	return 0;
free_body:
	rte_pktmbuf_free(body);
	return ret;
}
