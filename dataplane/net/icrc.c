/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CRC-32 arithmetic for the RoCEv2 ICRC (icrc.h): rte_net_crc for the
 * bytes, and polynomial products modulo the CRC polynomial to join CRCs.
 *
 * Combining: with CRC-32's pre- and post-inversion, the CRC of A then B
 * is crc(A) times x^(8 |B|), plus crc(B), modulo the polynomial. In the
 * reflected form the bit of x^0 is the word's top bit, and multiplying
 * by x is a right shift that folds the polynomial back in when a bit
 * falls off the bottom.
 */
/* rte_vect_get_max_simd_bitwidth() is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API

#include <string.h>

#include <rte_common.h>
#include <rte_cpuflags.h>
#include <rte_vect.h>

#include "icrc.h"

#define POLY	0xedb88320u	/* x^32 + ... + 1, reflected, x^32 dropped */
#define X0	0x80000000u	/* the polynomial "1" */

/* x^(2^k) modulo POLY for k = 0..31, made at load time. */
static uint32_t x2k[32];

RTE_INIT(tally_icrc_tables)
{
	x2k[0] = X0 >> 1;	/* x^1 */
	for (unsigned int k = 1; k < 32; k++)
		x2k[k] = tally_crc32_mul(x2k[k - 1], x2k[k - 1]);
}

/* Schoolbook product, a bit at a time: 32 steps, no table. */
uint32_t
tally_crc32_mul(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (uint32_t m = X0; m != 0; m >>= 1) {
		if (a & m)
			p ^= b;
		b = (b >> 1) ^ (POLY & (0u - (b & 1)));
	}
	return p;
}

/* x^(8 len): the product of x^(2^k) over the set bits of 8 len. */
uint32_t
tally_crc32_xpow(uint32_t len)
{
	uint64_t n = (uint64_t)len << 3;
	uint32_t p = X0;

	for (unsigned int k = 0; n != 0 && k < 32; k++, n >>= 1)
		if (n & 1)
			p = tally_crc32_mul(p, x2k[k]);
	return p;
}

/*
 * Chooses SSE4.2/PCLMULQDQ where the CPU and the EAL's SIMD width allow
 * it (DPDK 22.11 picks the same by the same two tests), scalar
 * otherwise. AVX-512 is not asked for: it needs the EAL's SIMD width
 * raised to 512, which tally-dp leaves at its default.
 */
const char *
tally_icrc_init(void)
{
#if defined(RTE_ARCH_X86_64)
	rte_net_crc_set_alg(RTE_NET_CRC_SSE42);
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_PCLMULQDQ) > 0 &&
			rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128)
		return "sse42";
#elif defined(RTE_ARCH_ARM64)
	rte_net_crc_set_alg(RTE_NET_CRC_NEON);
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_PMULL) > 0 &&
			rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128)
		return "neon";
#endif
	rte_net_crc_set_alg(RTE_NET_CRC_SCALAR);
	return "scalar";
}

/*
 * Borrows ip, writes it and the 8 bytes before it, and restores them
 * before returning: a lcore that owns the frame alone may do this.
 */
uint32_t
tally_icrc_ipv4(uint8_t *ip, uint32_t ip_len)
{
	uint32_t hlen = (uint32_t)(ip[0] & 0x0f) * 4;
	uint8_t *udp = ip + hlen, *bth = udp + 8, *lrh = ip - TALLY_ICRC_LRH_LEN;
	uint8_t save_lrh[TALLY_ICRC_LRH_LEN], tos = ip[1], ttl = ip[8];
	uint8_t ipck[2] = { ip[10], ip[11] }, udpck[2] = { udp[6], udp[7] };
	uint8_t b4 = bth[4];
	uint32_t crc;

	memcpy(save_lrh, lrh, sizeof(save_lrh));
	memset(lrh, 0xff, TALLY_ICRC_LRH_LEN);
	ip[1] = 0xff;
	ip[8] = 0xff;
	ip[10] = ip[11] = 0xff;
	udp[6] = udp[7] = 0xff;
	bth[4] = 0xff;
	crc = tally_crc32(lrh, TALLY_ICRC_LRH_LEN + ip_len - 4);
	memcpy(lrh, save_lrh, sizeof(save_lrh));
	ip[1] = tos;
	ip[8] = ttl;
	ip[10] = ipck[0];
	ip[11] = ipck[1];
	udp[6] = udpck[0];
	udp[7] = udpck[1];
	bth[4] = b4;
	return crc;
}
