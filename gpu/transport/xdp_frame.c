/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The headers of the AF_XDP transport's frames: what the kernel's UDP
 * path writes for a datagram (Ethernet II, IPv4 without options, UDP),
 * written and checked here because the frames bypass it. The payload is
 * the tally packet, as over kernel UDP (docs/protocol.md).
 */
#include <arpa/inet.h>
#include <string.h>

#include "xdp.h"

#define ETH_P_IPV4	0x0800
#define IP_DF		0x4000
#define IP_FRAG_MASK	0x3fff	/* more-fragments and the offset */
#define XDP_IP_TTL		64

/*
 * The IPv4 header checksum of the hlen bytes at ip: to write into a
 * header whose field is 0, and 0 over a header whose field is right.
 */
static uint16_t
ip_csum(const uint8_t *ip, uint32_t hlen)
{
	uint32_t sum = 0;

	for (uint32_t i = 0; i < hlen; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void
tally_xdp_frame_hdrs(uint8_t *f, const struct tally_xdp_hdr *h,
	uint16_t dport, uint16_t id, uint32_t plen)
{
	uint8_t *ip = f + 14, *udp = f + 34;

	memcpy(f, h->dst_mac, 6);
	memcpy(f + 6, h->src_mac, 6);
	put16(f + 12, ETH_P_IPV4);
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(20 + 8 + plen));
	put16(ip + 4, id);
	put16(ip + 6, IP_DF);
	ip[8] = XDP_IP_TTL;
	ip[9] = IPPROTO_UDP;
	put16(ip + 10, 0);
	memcpy(ip + 12, &h->src_ip, 4);
	memcpy(ip + 16, &h->dst_ip, 4);
	put16(ip + 10, ip_csum(ip, 20));
	memcpy(udp, &h->sport, 2);
	memcpy(udp + 2, &dport, 2);
	put16(udp + 4, (uint16_t)(8 + plen));
	put16(udp + 6, 0);
}

int
tally_xdp_frame_check(const uint8_t *f, uint32_t len, uint32_t src_ip,
	uint16_t dport, uint32_t *off, uint32_t *plen)
{
	const uint8_t *ip = f + 14, *udp;
	uint32_t ihl, tot, ulen;

	if (len < TALLY_XDP_HDRS || get16(f + 12) != ETH_P_IPV4 ||
			(ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP ||
			(get16(ip + 6) & IP_FRAG_MASK) != 0 ||
			memcmp(ip + 12, &src_ip, 4) != 0)
		return 0;
	ihl = (uint32_t)(ip[0] & 0xf) * 4;
	tot = get16(ip + 2);
	if (ihl < 20 || tot < ihl + 8 || 14 + tot > len ||
			ip_csum(ip, ihl) != 0)
		return 0;
	udp = ip + ihl;
	ulen = get16(udp + 4);
	if (memcmp(udp + 2, &dport, 2) != 0 || ulen < 8 || ulen > tot - ihl)
		return 0;
	*off = 14 + ihl + 8;
	*plen = ulen - 8;
	return 1;
}
