/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the packet-layer suites (frame.h says what each does). */
#include <stdio.h>
#include <limits.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "frame.h"

const rte_be32_t self_ip = RTE_BE32(RTE_IPV4(10, 0, 0, 1));
const rte_be32_t peer_ip = RTE_BE32(RTE_IPV4(10, 0, 0, 2));
const struct rte_ether_addr self_mac = {{ 0x02, 0, 0, 0, 0, 0x01 }};
const struct rte_ether_addr peer_mac = {{ 0x02, 0, 0, 0, 0, 0x02 }};
const struct tally_net_self test_self = {
	.mac = {{ 0x02, 0, 0, 0, 0, 0x01 }},
	.ip = RTE_BE32(RTE_IPV4(10, 0, 0, 1)),
	.port = RTE_BE16(SELF_PORT),
	.nports = SELF_NPORTS,
};

int
test_eal_init(const char *argv0)
{
	/*
	 * DPDK 22.11 turns --no-huge into --legacy-mem, which it refuses
	 * together with --in-memory; --no-shconf is the part of
	 * --in-memory that matters here (no shared files, no IPC socket).
	 */
	char prefix[48];
	char *args[] = {
		(char *)argv0,
		"--no-huge", "--no-shconf", "--no-pci", "--no-telemetry",
		prefix, "-l", "0", "-m", "128",
		"--log-level=*:error",
	};

	/* One runtime directory per process: suites run in parallel. */
	snprintf(prefix, sizeof(prefix), "--file-prefix=tally-net-%d",
		(int)getpid());
	int n = (int)RTE_DIM(args);

	/* EAL logs to stdout by default, where TAP goes: keep it clean. */
	rte_openlog_stream(stderr);
	if (rte_eal_init(n, args) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

void
test_eal_fini(void)
{
	char dir[PATH_MAX];

	/* EAL leaves its (here empty) runtime directory behind. */
	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	rmdir(dir);
}

struct rte_mempool *
test_pool(const char *name, unsigned int n, uint16_t data_room)
{
	struct rte_mempool *mp;

	mp = rte_pktmbuf_pool_create(name, n, 0, 0, data_room, SOCKET_ID_ANY);
	if (mp == NULL)
		fprintf(stderr, "pool %s: %s\n", name, rte_strerror(rte_errno));
	return mp;
}

void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
put_be32(uint8_t *p, rte_be32_t v)
{
	memcpy(p, &v, 4);	/* already in network order */
}

static uint32_t
sum_words(const uint8_t *p, size_t len, uint32_t sum)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)get16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

uint16_t
test_cksum(const void *buf, size_t len)
{
	uint32_t sum = sum_words(buf, len, 0);

	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

int
test_ip_cksum_ok(const uint8_t *frame)
{
	return test_cksum(frame + F_IP, (frame[F_IP] & 0xf) * 4u) == 0;
}

/*
 * The one's-complement sum of the pseudo-header and the datagram, with
 * or without the checksum field's own value.
 */
static uint16_t
udp_sum(const uint8_t *frame, int with_field)
{
	const uint8_t *ip = frame + F_IP;
	const uint8_t *udp = ip + (ip[0] & 0xf) * 4;
	uint16_t ulen = get16(udp + 4);
	uint32_t sum;

	sum = sum_words(ip + 12, 8, 0) + 17 + ulen;
	sum = sum_words(udp, 6, sum);
	if (with_field)
		sum += get16(udp + 6);
	sum = sum_words(udp + 8, ulen - 8u, sum);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

uint16_t
test_udp_cksum(const uint8_t *frame)
{
	uint16_t c = (uint16_t)~udp_sum(frame, 0);

	return c == 0 ? 0xffff : c;
}

int
test_udp_cksum_ok(const uint8_t *frame)
{
	return udp_sum(frame, 1) == 0xffff;
}

static size_t
put_eth(uint8_t *p, const struct rte_ether_addr *dst,
	const struct rte_ether_addr *src, uint16_t type)
{
	memcpy(p, dst->addr_bytes, 6);
	memcpy(p + 6, src->addr_bytes, 6);
	put16(p + 12, type);
	return 14;
}

/* A 20-byte IPv4 header carrying l4len bytes of proto. */
static void
put_ip(uint8_t *p, rte_be32_t sip, rte_be32_t dip, uint8_t proto,
	size_t l4len)
{
	memset(p, 0, 20);
	p[0] = 0x45;
	put16(p + 2, (uint16_t)(20 + l4len));
	put16(p + 4, 0x1234);		/* id */
	put16(p + 6, 0x4000);		/* DF */
	p[8] = 17;			/* TTL */
	p[9] = proto;
	put_be32(p + 12, sip);
	put_be32(p + 16, dip);
	put16(p + 10, test_cksum(p, 20));
}

struct udp_spec
test_udp_spec(const void *payload, size_t plen)
{
	return (struct udp_spec){
		.sip = peer_ip, .dip = self_ip,
		.sport = PEER_PORT, .dport = SELF_PORT,
		.payload = payload, .plen = plen,
	};
}

size_t
build_udp(uint8_t *buf, const struct udp_spec *s)
{
	uint8_t *udp = buf + F_L4;

	put_eth(buf, &self_mac, &peer_mac, 0x0800);
	put_ip(buf + F_IP, s->sip, s->dip, 17, 8 + s->plen);
	put16(udp, s->sport);
	put16(udp + 2, s->dport);
	put16(udp + 4, (uint16_t)(8 + s->plen));
	put16(udp + 6, 0);
	if (s->plen != 0)
		memcpy(udp + 8, s->payload, s->plen);
	if (!s->no_cksum)
		put16(udp + 6, test_udp_cksum(buf));
	return F_PAY + s->plen;
}

size_t
build_icmp_echo(uint8_t *buf, uint16_t id, uint16_t seq, const void *data,
	size_t dlen)
{
	uint8_t *icmp = buf + F_L4;

	put_eth(buf, &self_mac, &peer_mac, 0x0800);
	put_ip(buf + F_IP, peer_ip, self_ip, 1, 8 + dlen);
	icmp[0] = 8;
	icmp[1] = 0;
	put16(icmp + 2, 0);
	put16(icmp + 4, id);
	put16(icmp + 6, seq);
	if (dlen != 0)
		memcpy(icmp + 8, data, dlen);
	put16(icmp + 2, test_cksum(icmp, 8 + dlen));
	return F_L4 + 8 + dlen;
}

size_t
build_arp(uint8_t *buf, uint16_t op, rte_be32_t tip)
{
	static const struct rte_ether_addr bcast = {{ 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff }};
	uint8_t *a = buf + 14;

	put_eth(buf, &bcast, &peer_mac, 0x0806);
	put16(a, 1);			/* Ethernet */
	put16(a + 2, 0x0800);		/* IPv4 */
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, peer_mac.addr_bytes, 6);
	put_be32(a + 14, peer_ip);
	memset(a + 18, 0, 6);
	put_be32(a + 24, tip);
	return 14 + 28;
}

void
fix_ip_cksum(uint8_t *frame)
{
	uint8_t *ip = frame + F_IP;
	size_t hlen = (ip[0] & 0xf) * 4u;

	put16(ip + 10, 0);
	put16(ip + 10, test_cksum(ip, hlen));
}

void
fix_udp_cksum(uint8_t *frame)
{
	uint8_t *udp = frame + F_IP + (frame[F_IP] & 0xf) * 4;

	put16(udp + 6, 0);
	put16(udp + 6, test_udp_cksum(frame));
}

struct rte_mbuf *
to_mbuf(struct rte_mempool *pool, const uint8_t *buf, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	char *p;

	if (m == NULL)
		return NULL;
	p = rte_pktmbuf_append(m, (uint16_t)len);
	if (p == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(p, buf, len);
	return m;
}

/* Frees an exact buffer and its shared info (opaque). */
static void
ext_free(void *addr, void *opaque)
{
	free(addr);
	free(opaque);
}

struct rte_mbuf *
to_mbuf_exact(struct rte_mempool *pool, const uint8_t *buf, size_t len)
{
	struct rte_mbuf_ext_shared_info *shinfo = malloc(sizeof(*shinfo));
	uint8_t *data = malloc(len != 0 ? len : 1);
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	if (shinfo == NULL || data == NULL || m == NULL) {
		free(shinfo);
		free(data);
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(data, buf, len);
	shinfo->free_cb = ext_free;
	shinfo->fcb_opaque = shinfo;
	rte_mbuf_ext_refcnt_set(shinfo, 1);
	rte_pktmbuf_attach_extbuf(m, data, (rte_iova_t)(uintptr_t)data,
		(uint16_t)len, shinfo);
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	return m;
}

struct rte_mbuf *
to_mbuf_split(struct rte_mempool *pool, const uint8_t *buf, size_t len,
	size_t first)
{
	struct rte_mbuf *a = to_mbuf_exact(pool, buf, first);
	struct rte_mbuf *b = to_mbuf(pool, buf + first, len - first);

	if (a == NULL || b == NULL || rte_pktmbuf_chain(a, b) != 0) {
		rte_pktmbuf_free(a);
		rte_pktmbuf_free(b);
		return NULL;
	}
	return a;
}
