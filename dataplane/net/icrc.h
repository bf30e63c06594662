/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CRC-32 (the Ethernet polynomial, reflected, as zlib's crc32()) for the
 * RoCEv2 invariant CRC: DPDK's rte_net_crc does the bytes, and
 * tally_crc32_combine() joins two CRCs without reading either's bytes
 * again, so a result's payload is summed once for all its members.
 *
 * The ICRC of a RoCEv2 packet over IPv4 (InfiniBand Annex A17): the CRC
 * of 8 bytes of 0xff (where InfiniBand's LRH would be), then the IPv4
 * header with TOS, TTL and header checksum as all ones, the UDP header
 * with its checksum as all ones, the BTH with its byte 4 (FECN, BECN and
 * reserved bits) as all ones, and everything after up to the ICRC, which
 * follows in little-endian byte order.
 */
#ifndef TALLY_NET_ICRC_H
#define TALLY_NET_ICRC_H

#include <stdint.h>

#include <rte_net_crc.h>

/*
 * Chooses the fastest CRC path this CPU runs (call after rte_eal_init():
 * rte_net_crc's vector paths depend on the EAL's SIMD width, and before
 * it rte_net_crc stays scalar for good): "vpclmul16" (tally's sixteen
 * 128-bit lanes of VPCLMULQDQ folding in four 512-bit registers, where
 * CPUID and the OS say AVX-512 F and VL and VPCLMULQDQ), "clmul4"
 * (tally's four lanes of PCLMULQDQ folding), or rte_net_crc's "sse42",
 * "neon" or "scalar". Returns the path's name, a constant string, for
 * the start-up log.
 */
const char *tally_icrc_init(void);

/*
 * Selects the path called name (one of tally_icrc_init()'s), so that
 * tests and benchmarks can compare paths on one CPU. Returns 0,
 * -ENOTSUP where this CPU does not run it (the path stays as it was),
 * or -EINVAL for an unknown name.
 */
int tally_icrc_set_path(const char *name);

/*
 * The CRC-32 of len bytes at p (borrowed): 256 bytes and more by sixteen
 * lanes of folding (256 bytes a step) under "vpclmul16", 64 bytes and
 * more by four lanes (64 bytes a step) under "clmul4" (and "vpclmul16"
 * from 64 to 255), 16 to 63 bytes by one lane under both; rte_net_crc
 * otherwise (one lane, 16 bytes a step).
 */
uint32_t tally_crc32(const void *p, uint32_t len);

/* a times b modulo the CRC polynomial, both in the reflected form. */
uint32_t tally_crc32_mul(uint32_t a, uint32_t b);

/*
 * x^(8 len) modulo the polynomial: what moves a CRC past len bytes.
 * Results of one length share it, so it is worth computing once.
 */
uint32_t tally_crc32_xpow(uint32_t len);

/*
 * The CRC of A followed by B from crc_a, crc_b and B's length, through
 * B's xpow (tally_crc32_xpow(len_b)): no byte of either is read.
 */
static inline uint32_t
tally_crc32_shift(uint32_t crc_a, uint32_t crc_b, uint32_t xpow_b)
{
	return tally_crc32_mul(xpow_b, crc_a) ^ crc_b;
}

static inline uint32_t
tally_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint32_t len_b)
{
	return tally_crc32_shift(crc_a, crc_b, tally_crc32_xpow(len_b));
}

/* Bytes the ICRC covers before the IPv4 header (the LRH's place). */
#define TALLY_ICRC_LRH_LEN	8

/*
 * The ICRC of the IPv4 datagram at ip, ip_len bytes of it (its total
 * length, the 4 ICRC bytes at its end not covered), in one pass. Under
 * tally's folding ("vpclmul16", "clmul4") a header without options is
 * only read: the masked fields are set in registers. Otherwise the
 * masked fields are written in place (and 0xff into the
 * TALLY_ICRC_LRH_LEN bytes before ip, which must be writable: the
 * Ethernet source address and type) and every byte put back. The
 * datagram is IPv4 (header length from its first byte), then UDP, then
 * a BTH: the caller has checked that ip_len covers them.
 */
uint32_t tally_icrc_ipv4(uint8_t *ip, uint32_t ip_len);

#endif /* TALLY_NET_ICRC_H */
