/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CRC-32 arithmetic for the RoCEv2 ICRC (icrc.h): the bytes by tally's
 * own carry-less folding (VPCLMULQDQ on AVX-512, else PCLMULQDQ; each
 * in functions built for its instructions and run only where CPUID has
 * them) or rte_net_crc, and polynomial products modulo the CRC
 * polynomial to join CRCs.
 *
 * Combining: with CRC-32's pre- and post-inversion, the CRC of A then B
 * is crc(A) times x^(8 |B|), plus crc(B), modulo the polynomial. In the
 * reflected form the bit of x^0 is the word's top bit, and multiplying
 * by x is a right shift that folds the polynomial back in when a bit
 * falls off the bottom.
 */
/* rte_vect_get_max_simd_bitwidth() is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API

#include <errno.h>
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

/* How tally_crc32() takes 16 bytes and more (tally_icrc_set_path()). */
enum fold_path {
	FOLD_NONE,	/* rte_net_crc at every length */
	FOLD_CLMUL4,	/* fold4() from 64 bytes, fold_short() from 16 */
	FOLD_AVX512,	/* fold16() from 256 bytes, else as FOLD_CLMUL4 */
};
static enum fold_path fold_path;

#if defined(RTE_ARCH_X86_64)
/*
 * Folding constants (Intel's paper on CRC by PCLMULQDQ, Gopal et al.,
 * 2009): to move a 128-bit lane d bits forward, its low half is
 * multiplied by x^(d+32) and its high half by x^(d-32), both modulo P,
 * bit-reflected and shifted left once; K(d) packs the two.
 */
#define K_HI(d)	K_##d##_HI
#define K_LO(d)	K_##d##_LO
#define K_2048_LO	0x11542778aull
#define K_2048_HI	0x1322d1430ull
#define K_1024_LO	0x1e88ef372ull
#define K_1024_HI	0x14a7fe880ull
#define K_512_LO	0x154442bd4ull
#define K_512_HI	0x1c6e41596ull
#define K_384_LO	0x03db1ecdcull
#define K_384_HI	0x174359406ull
#define K_256_LO	0x0f1da05aaull
#define K_256_HI	0x15a546366ull
#define K_128_LO	0x1751997d0ull
#define K_128_HI	0x0ccaa009eull
#define K(d)	_mm_set_epi64x((long long)K_HI(d), (long long)K_LO(d))

/* x moved forward by k (a K()), plus y: two multiplies and a sum. */
__attribute__((target("pclmul,sse2"))) static inline __m128i
fold1(__m128i x, __m128i k, __m128i y)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
		_mm_clmulepi64_si128(x, k, 0x11)), y);
}

/*
 * The CRC register after four consecutive 128-bit lanes x0..x3 and then
 * the len (a multiple of 16) bytes at p: x0, x1 and x2 moved onto x3 at
 * once (independent multiplies), the rest 16 bytes a step, and 128 bits
 * reduced to 32 (folding by x^96 and x^64, then Barrett with
 * mu = x^64 / P).
 */
__attribute__((target("pclmul,sse4.1"))) static inline uint32_t
fold_finish(__m128i x0, __m128i x1, __m128i x2, __m128i x3,
	const uint8_t *p, uint32_t len)
{
	const __m128i k3k4 = K(128);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i pmu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i m32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i t;

	x0 = _mm_xor_si128(fold1(x0, K(384), fold1(x1, K(256), x3)),
		fold1(x2, k3k4, _mm_setzero_si128()));
	for (; len >= 16; p += 16, len -= 16)
		x0 = fold1(x0, k3k4, _mm_loadu_si128((const __m128i *)p));
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

/*
 * The CRC register after len (a multiple of 16, at least 64) bytes at p
 * from register crc (not inverted either way), the first 64 of them
 * taken ORed with the 64 bytes at or64 (64-byte aligned: all zeros for
 * the bytes as they are, icrc_or for a RoCEv2 packet's masked fields):
 * four 128-bit lanes, each folded 64 bytes forward a step, so four
 * multiplies are in flight where one lane waits for each; then
 * fold_finish().
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
fold4(const uint8_t *p, uint32_t len, uint32_t crc, const uint8_t *or64)
{
	const __m128i k = K(512);
	const __m128i *m = (const __m128i *)or64;
	__m128i x0, x1, x2, x3;

	x0 = _mm_xor_si128(_mm_or_si128(_mm_loadu_si128((const __m128i *)p),
		_mm_load_si128(m)), _mm_cvtsi32_si128((int)crc));
	x1 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + 16)),
		_mm_load_si128(m + 1));
	x2 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + 32)),
		_mm_load_si128(m + 2));
	x3 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + 48)),
		_mm_load_si128(m + 3));
	for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
		x0 = fold1(x0, k, _mm_loadu_si128((const __m128i *)p));
		x1 = fold1(x1, k, _mm_loadu_si128((const __m128i *)(p + 16)));
		x2 = fold1(x2, k, _mm_loadu_si128((const __m128i *)(p + 32)));
		x3 = fold1(x3, k, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	return fold_finish(x0, x1, x2, x3, p, len);
}

/*
 * As fold4() for len (a multiple of 16) of 16 to 63 bytes: one lane,
 * the three before it zero (folding zero adds nothing). rte_net_crc
 * took 15 ns for a result's 56 bytes of headers, this about 4.
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
fold_short(const uint8_t *p, uint32_t len, uint32_t crc)
{
	const __m128i z = _mm_setzero_si128();

	return fold_finish(z, z, z, _mm_xor_si128(
		_mm_loadu_si128((const __m128i *)p),
		_mm_cvtsi32_si128((int)crc)), p + 16, len - 16);
}

#define AVX512_TARGET \
	__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

/* Four 128-bit lanes of x moved forward by k (a K() in each), plus y. */
AVX512_TARGET static inline __m512i
fold512(__m512i x, __m512i k, __m512i y)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
		_mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

/*
 * As fold4() (or64 too; (a | b) ^ c is ternary logic 0x56) for len (a
 * multiple of 16) of at least 256 bytes, by VPCLMULQDQ on 512-bit
 * registers: four of them, sixteen 128-bit lanes, each folded 256 bytes
 * forward a step; then the four into one (two steps), the rest 64 bytes
 * a step, and its four lanes to fold_finish().
 */
AVX512_TARGET static uint32_t
fold16(const uint8_t *p, uint32_t len, uint32_t crc, const uint8_t *or64)
{
	const __m512i k2048 = _mm512_broadcast_i32x4(K(2048));
	const __m512i k1024 = _mm512_broadcast_i32x4(K(1024));
	const __m512i k512 = _mm512_broadcast_i32x4(K(512));
	__m512i x0, x1, x2, x3;

	x0 = _mm512_ternarylogic_epi64(_mm512_loadu_si512(p),
		_mm512_load_si512(or64),
		_mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)), 0x56);
	x1 = _mm512_loadu_si512(p + 64);
	x2 = _mm512_loadu_si512(p + 128);
	x3 = _mm512_loadu_si512(p + 192);
	for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
		x0 = fold512(x0, k2048, _mm512_loadu_si512(p));
		x1 = fold512(x1, k2048, _mm512_loadu_si512(p + 64));
		x2 = fold512(x2, k2048, _mm512_loadu_si512(p + 128));
		x3 = fold512(x3, k2048, _mm512_loadu_si512(p + 192));
	}
	x2 = fold512(x0, k1024, x2);
	x3 = fold512(x1, k1024, x3);
	x3 = fold512(x2, k512, x3);
	for (; len >= 64; p += 64, len -= 64)
		x3 = fold512(x3, k512, _mm512_loadu_si512(p));
	return fold_finish(_mm512_extracti32x4_epi32(x3, 0),
		_mm512_extracti32x4_epi32(x3, 1),
		_mm512_extracti32x4_epi32(x3, 2),
		_mm512_extracti32x4_epi32(x3, 3), p, len);
}
#endif

#if defined(RTE_ARCH_X86_64)
/* 64 bytes of zeros: the first block of a fold taken as it is. */
static const uint8_t or_none[64] __rte_aligned(64);

/*
 * The ICRC's masked fields as ones in the first 64 bytes it covers, for
 * an IPv4 header without options (icrc.h): the LRH's place (8 bytes),
 * then from the IPv4 header at 8: TOS (9), TTL (16), header checksum
 * (18, 19); the UDP checksum (28 + 6, 28 + 7); BTH byte 4 (36 + 4).
 */
static const uint8_t icrc_or[64] __rte_aligned(64) = {
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	[9] = 0xff, [16] = 0xff, [18] = 0xff, [19] = 0xff,
	[34] = 0xff, [35] = 0xff, [40] = 0xff,
};

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

/*
 * The CRC register after the len (at least 16) bytes at p from register
 * crc (not inverted either way), the first 64 taken ORed with or64 (as
 * fold4()): the one place that picks the fold for a length and the path
 * (fold16() from 256 bytes on FOLD_AVX512, fold4() from 64, fold_short()
 * below), then tail() for the last len % 16 bytes. or64 must be or_none
 * under 64 bytes (fold_short() takes the bytes as they are). Borrows p.
 */
static uint32_t
fold_any(const uint8_t *p, uint32_t len, uint32_t crc, const uint8_t *or64)
{
	uint32_t n = len & ~15u, c;

	if (fold_path == FOLD_AVX512 && n >= 256)
		c = fold16(p, n, crc, or64);
	else if (n >= 64)
		c = fold4(p, n, crc, or64);
	else
		c = fold_short(p, n, crc);
	return tail(p + n, len - n, c);
}
#endif

uint32_t
tally_crc32(const void *p, uint32_t len)
{
#if defined(RTE_ARCH_X86_64)
	if (fold_path != FOLD_NONE && len >= 16)
		return ~fold_any(p, len, 0xffffffffu, or_none);
#endif
	return rte_net_crc_calc(p, len, RTE_NET_CRC32_ETH);
}

/*
 * Whether this CPU runs fold16(): AVX-512 F and VL and VPCLMULQDQ, by
 * GCC's CPUID test, which also asks the OS (XGETBV) whether it saves
 * the 512-bit registers.
 */
static int
cpu_has_vpclmul16(void)
{
#if defined(RTE_ARCH_X86_64)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") &&
		__builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("vpclmulqdq") &&
		__builtin_cpu_supports("pclmul") &&
		__builtin_cpu_supports("sse4.1");
#else
	return 0;
#endif
}

/* Whether this CPU and the EAL's SIMD width allow PCLMULQDQ paths. */
static int
cpu_has_clmul(int need_sse41)
{
#if defined(RTE_ARCH_X86_64)
	return rte_cpu_get_flag_enabled(RTE_CPUFLAG_PCLMULQDQ) > 0 &&
		(!need_sse41 ||
		 rte_cpu_get_flag_enabled(RTE_CPUFLAG_SSE4_1) > 0) &&
		rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128;
#else
	(void)need_sse41;
	return 0;
#endif
}

/*
 * Selects path name (tally_icrc_init()'s names) for every later CRC;
 * for tests and benchmarks that compare paths on one CPU. name is
 * borrowed. Returns 0, -ENOTSUP where this CPU (or the EAL's SIMD
 * width) does not run it, leaving the path as it was, or -EINVAL for
 * a name not known.
 */
int
tally_icrc_set_path(const char *name)
{
	enum fold_path fp = FOLD_NONE;
	enum rte_net_crc_alg alg = RTE_NET_CRC_SCALAR;
	int ok;

	if (strcmp(name, "vpclmul16") == 0) {
		ok = cpu_has_vpclmul16() && cpu_has_clmul(1);
		fp = FOLD_AVX512;
		alg = RTE_NET_CRC_SSE42;
	} else if (strcmp(name, "clmul4") == 0) {
		ok = cpu_has_clmul(1);
		fp = FOLD_CLMUL4;
		alg = RTE_NET_CRC_SSE42;
	} else if (strcmp(name, "sse42") == 0) {
		ok = cpu_has_clmul(0);
		alg = RTE_NET_CRC_SSE42;
	} else if (strcmp(name, "neon") == 0) {
#if defined(RTE_ARCH_ARM64)
		ok = rte_cpu_get_flag_enabled(RTE_CPUFLAG_PMULL) > 0 &&
			rte_vect_get_max_simd_bitwidth() >= RTE_VECT_SIMD_128;
		alg = RTE_NET_CRC_NEON;
#else
		ok = 0;
#endif
	} else if (strcmp(name, "scalar") == 0) {
		ok = 1;
	} else {
		return -EINVAL;
	}
	if (!ok)
		return -ENOTSUP;
	rte_net_crc_set_alg(alg);
	fold_path = fp;
	return 0;
}

/*
 * The fastest path this CPU runs: tally's sixteen-lane VPCLMULQDQ
 * folding where AVX-512 has it (by the CPU's word, as the engine's
 * lanes: the EAL's SIMD width, 256 by default, is not asked), its
 * four-lane PCLMULQDQ folding, rte_net_crc's SSE4.2/PCLMULQDQ or NEON
 * path (DPDK 22.11 picks those by the same tests), scalar otherwise.
 * rte_net_crc's own AVX-512 path is not asked for: it needs the EAL's
 * SIMD width raised to 512, and tally's folding is faster anyway.
 */
const char *
tally_icrc_init(void)
{
	static const char *const order[] = {
		"vpclmul16", "clmul4", "sse42", "neon", "scalar",
	};

	for (unsigned int i = 0; i < RTE_DIM(order); i++)
		if (tally_icrc_set_path(order[i]) == 0)
			return order[i];
	return "scalar";	/* not reached: scalar always runs */
}

/*
 * Borrows ip. An IPv4 header without options under tally's folding
 * reads the frame only: fold_any() ORs the masked fields into its first
 * 64 bytes in registers (icrc_or), so no load waits on a store (the
 * masking in place cost a failed store forward on the fold's first
 * 64-byte load) and nothing is put back; otherwise the masked fields are
 * written in place, with the 8 bytes before ip, and put back before
 * returning: a lcore that owns the frame alone may do this.
 */
uint32_t
tally_icrc_ipv4(uint8_t *ip, uint32_t ip_len)
{
	uint32_t hlen = (uint32_t)(ip[0] & 0x0f) * 4;
	uint8_t *udp = ip + hlen, *bth = udp + 8, *lrh = ip - TALLY_ICRC_LRH_LEN;
	uint8_t save_lrh[TALLY_ICRC_LRH_LEN], tos, ttl, ipck[2], udpck[2], b4;
	uint32_t crc;

#if defined(RTE_ARCH_X86_64)
	if (likely(hlen == 20 && fold_path != FOLD_NONE &&
			ip_len >= 64 - TALLY_ICRC_LRH_LEN + 4))
		return ~fold_any(lrh, TALLY_ICRC_LRH_LEN + ip_len - 4,
			0xffffffffu, icrc_or);
#endif
	tos = ip[1];
	ttl = ip[8];
	ipck[0] = ip[10];
	ipck[1] = ip[11];
	udpck[0] = udp[6];
	udpck[1] = udp[7];
	b4 = bth[4];
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
