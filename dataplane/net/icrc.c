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

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_cpuflags.h>
#include <rte_vect.h>
#if defined(RTE_ARCH_X86_64)
#include <immintrin.h>
#endif

#include "icrc.h"

#define POLY	0xedb88320u	/* x^32 + ... + 1, reflected, x^32 dropped */
#define X0	0x80000000u	/* the polynomial "1" */

/* x^(2^k) modulo POLY for k = 0..31, made at load time. */
static uint32_t x2k[32];
/* The reflected CRC's byte table: tab8[i] is i x^32 modulo POLY. */
static uint32_t tab8[256];
/* Slicing by 8: slice[k][i] is i x^(32 + 8 k) modulo POLY (k = 0: tab8). */
static uint32_t slice[8][256];
/* Whether the CPU has PCLMULQDQ (carry-less multiply). */
static int have_clmul;

/* Schoolbook product, a bit at a time: 32 steps, no table, no branch. */
static uint32_t
mul_bits(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (uint32_t m = X0; m != 0; m >>= 1) {
		p ^= b & (0u - ((a & m) != 0));
		b = (b >> 1) ^ (POLY & (0u - (b & 1)));
	}
	return p;
}

#if defined(RTE_ARCH_X86_64)
/*
 * The product by one carry-less multiply: of reflected a and b it puts
 * x^k at bit 62 - k, so shifted left once the upper word is the product's
 * x^0..x^31 and the lower its x^32..x^63, reflected both. The lower is
 * then brought under x^32 as a CRC brings a message (four bytes of the
 * byte table: times x^32, modulo POLY) and added to the upper.
 */
__attribute__((target("pclmul,sse2"))) static uint32_t
mul_clmul(uint32_t a, uint32_t b)
{
	__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a),
		_mm_cvtsi32_si128((int)b), 0x00);
	uint64_t r = (uint64_t)_mm_cvtsi128_si64(p) << 1;
	uint32_t hi = (uint32_t)r;

	for (int i = 0; i < 4; i++)
		hi = (hi >> 8) ^ tab8[hi & 0xff];
	return (uint32_t)(r >> 32) ^ hi;
}
#endif

RTE_INIT(tally_icrc_tables)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t v = i;

		for (int k = 0; k < 8; k++)
			v = (v >> 1) ^ (POLY & (0u - (v & 1)));
		tab8[i] = v;
		slice[0][i] = v;
	}
	for (unsigned int k = 1; k < 8; k++)
		for (uint32_t i = 0; i < 256; i++)
			slice[k][i] = (slice[k - 1][i] >> 8) ^
				tab8[slice[k - 1][i] & 0xff];
#if defined(RTE_ARCH_X86_64)
	have_clmul = __builtin_cpu_supports("pclmul");
#endif
	x2k[0] = X0 >> 1;	/* x^1 */
	for (unsigned int k = 1; k < 32; k++)
		x2k[k] = tally_crc32_mul(x2k[k - 1], x2k[k - 1]);
}

/*
 * a times b modulo POLY: one carry-less multiply and four table steps
 * where the CPU has PCLMULQDQ (about 10 ns less a member of a RoCEv2
 * result than the bit loop), the bit loop otherwise.
 */
uint32_t
tally_crc32_mul(uint32_t a, uint32_t b)
{
#if defined(RTE_ARCH_X86_64)
	if (likely(have_clmul))
		return mul_clmul(a, b);
#endif
	return mul_bits(a, b);
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

/* Whether tally_crc32() folds in four lanes (tally_icrc_init()). */
static int use_fold4;

#if defined(RTE_ARCH_X86_64)
/*
 * The CRC register after len (a multiple of 16, at least 64) bytes at p
 * from register crc (not inverted either way): four 128-bit lanes, each
 * folded 64 bytes forward a step by x^(512+-64) modulo POLY, so four
 * multiplies are in flight where one lane waits for each; then the lanes
 * folded into one, the rest 16 bytes a step, and 128 bits reduced to 32
 * (folding by x^96 and x^64, then Barrett with mu = x^64 / P).
 * Constants: x^k modulo P, bit-reflected and shifted, as in Intel's
 * paper on CRC by PCLMULQDQ (Gopal et al., 2009).
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
fold4(const uint8_t *p, uint32_t len, uint32_t crc)
{
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i pmu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i m32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x0, x1, x2, x3, t;

	x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p),
		_mm_cvtsi32_si128((int)crc));
	x1 = _mm_loadu_si128((const __m128i *)(p + 16));
	x2 = _mm_loadu_si128((const __m128i *)(p + 32));
	x3 = _mm_loadu_si128((const __m128i *)(p + 48));
	for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
#define FOLD(x, k, off) (x) = _mm_xor_si128(_mm_xor_si128( \
		_mm_clmulepi64_si128((x), (k), 0x00), \
		_mm_clmulepi64_si128((x), (k), 0x11)), \
		_mm_loadu_si128((const __m128i *)(p + (off))))
		FOLD(x0, k1k2, 0);
		FOLD(x1, k1k2, 16);
		FOLD(x2, k1k2, 32);
		FOLD(x3, k1k2, 48);
	}
#define FOLD1(x, y) (x) = _mm_xor_si128(_mm_xor_si128( \
		_mm_clmulepi64_si128((x), k3k4, 0x00), \
		_mm_clmulepi64_si128((x), k3k4, 0x11)), (y))
	FOLD1(x0, x1);
	FOLD1(x0, x2);
	FOLD1(x0, x3);
	for (; len >= 16; p += 16, len -= 16)
		FOLD1(x0, _mm_loadu_si128((const __m128i *)p));
#undef FOLD
#undef FOLD1
	/* 128 -> 64 bits (32 zero bits appended), then -> 32. */
	t = _mm_clmulepi64_si128(k3k4, x0, 0x01);
	x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
	t = _mm_srli_si128(x0, 4);
	x0 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x0, m32), k5,
		0x00), t);
	t = x0;
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, m32), pmu, 0x10);
	x0 = _mm_clmulepi64_si128(_mm_and_si128(x0, m32), pmu, 0x00);
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x0, t), 1);
}
#endif

#if defined(RTE_ARCH_X86_64)
/*
 * The CRC register after the len (under 16) bytes at p from register c:
 * 8 and 4 bytes at once by independent lookups in the slice tables (a
 * chain of 8 dependent byte steps took 20 ns), the rest a byte a step.
 */
static uint32_t
tail(const uint8_t *p, uint32_t len, uint32_t c)
{
	uint32_t a, b;

	if (len >= 8) {
		memcpy(&a, p, 4);
		memcpy(&b, p + 4, 4);
		a = rte_le_to_cpu_32(a) ^ c;
		b = rte_le_to_cpu_32(b);
		c = slice[7][a & 0xff] ^ slice[6][(a >> 8) & 0xff] ^
			slice[5][(a >> 16) & 0xff] ^ slice[4][a >> 24] ^
			slice[3][b & 0xff] ^ slice[2][(b >> 8) & 0xff] ^
			slice[1][(b >> 16) & 0xff] ^ slice[0][b >> 24];
		p += 8;
		len -= 8;
	}
	if (len >= 4) {
		memcpy(&a, p, 4);
		a = rte_le_to_cpu_32(a) ^ c;
		c = slice[3][a & 0xff] ^ slice[2][(a >> 8) & 0xff] ^
			slice[1][(a >> 16) & 0xff] ^ slice[0][a >> 24];
		p += 4;
		len -= 4;
	}
	while (len-- > 0)
		c = (c >> 8) ^ tab8[(c ^ *p++) & 0xff];
	return c;
}
#endif

uint32_t
tally_crc32(const void *p, uint32_t len)
{
#if defined(RTE_ARCH_X86_64)
	if (use_fold4 && len >= 64) {
		const uint8_t *b = p;
		uint32_t n = len & ~15u;

		return ~tail(b + n, len - n, fold4(b, n, 0xffffffffu));
	}
#endif
	return rte_net_crc_calc(p, len, RTE_NET_CRC32_ETH);
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
	use_fold4 = 0;
	if (rte_cpu_get_flag_enabled(RTE_CPUFLAG_PCLMULQDQ) > 0 &&
			rte_cpu_get_flag_enabled(RTE_CPUFLAG_SSE4_1) > 0 &&
			rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128) {
		use_fold4 = 1;
		return "clmul4";
	}
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
