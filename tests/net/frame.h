/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the packet-layer suites: a real EAL, mbuf pools, frames
 * built byte by byte (not through DPDK's header structs, so that the
 * tests do not share a mistake with the code they test), and an RFC 1071
 * checksum of our own.
 */
#ifndef TALLY_TEST_NET_FRAME_H
#define TALLY_TEST_NET_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "net/net.h"

/* Offsets in a frame without IPv4 options. */
#define F_IP	14
#define F_L4	34
#define F_PAY	42

#define SELF_PORT	47474
#define SELF_NPORTS	4
#define PEER_PORT	40000

/* 10.0.0.1 (us) and 10.0.0.2 (a worker), in network order. */
extern const rte_be32_t self_ip, peer_ip;
extern const struct rte_ether_addr self_mac, peer_mac;
extern const struct tally_net_self test_self;

/*
 * Starts the EAL (no hugepages, no PCI, no shared files) as program
 * argv0; returns 0, or -1 after saying why on stderr.
 */
int test_eal_init(const char *argv0);
void test_eal_fini(void);

/* A pktmbuf pool of n mbufs (no cache) with the given data room. */
struct rte_mempool *test_pool(const char *name, unsigned int n,
	uint16_t data_room);

/* RFC 1071: the complemented one's-complement sum of big-endian words. */
uint16_t test_cksum(const void *buf, size_t len);

/* 1 when the frame's IPv4 header checksum holds. */
int test_ip_cksum_ok(const uint8_t *frame);

/* The UDP checksum the frame's datagram should carry (0 -> 0xffff). */
uint16_t test_udp_cksum(const uint8_t *frame);

/* 1 when the frame's UDP checksum holds (a zero field does not). */
int test_udp_cksum_ok(const uint8_t *frame);

/* What a UDP frame holds; ports in host order, addresses network order. */
struct udp_spec {
	rte_be32_t sip, dip;
	uint16_t sport, dport;
	const void *payload;
	size_t plen;
	int no_cksum;		/* leave the UDP checksum 0 */
};

/* A UDP spec from the worker to our first port, with plen bytes. */
struct udp_spec test_udp_spec(const void *payload, size_t plen);

/* Writes the frame into buf; returns its length. */
size_t build_udp(uint8_t *buf, const struct udp_spec *s);

/* An ICMP echo request (id, seq, dlen data bytes) from the worker. */
size_t build_icmp_echo(uint8_t *buf, uint16_t id, uint16_t seq,
	const void *data, size_t dlen);

/* An ARP packet of the given opcode, from the worker's addresses. */
size_t build_arp(uint8_t *buf, uint16_t op, rte_be32_t tip);

/* Recomputes the IPv4 header checksum, and the UDP one, after a poke. */
void fix_ip_cksum(uint8_t *frame);
void fix_udp_cksum(uint8_t *frame);

/* Big-endian stores and loads. */
void put16(uint8_t *p, uint16_t v);
uint16_t get16(const uint8_t *p);

/* An mbuf from pool holding the len bytes at buf, in one segment. */
struct rte_mbuf *to_mbuf(struct rte_mempool *pool, const uint8_t *buf,
	size_t len);

/*
 * The same in an external buffer malloc()ed to exactly len bytes: under
 * AddressSanitizer, reading one byte past the frame is caught.
 */
struct rte_mbuf *to_mbuf_exact(struct rte_mempool *pool, const uint8_t *buf,
	size_t len);

/*
 * The first `first` bytes in one segment (exact, as above), the rest in
 * a second one.
 */
struct rte_mbuf *to_mbuf_split(struct rte_mempool *pool, const uint8_t *buf,
	size_t len, size_t first);

#endif /* TALLY_TEST_NET_FRAME_H */
