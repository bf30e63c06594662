/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The vectorized loops of the 16-bit fixed-point codec, for CPUs with
 * AVX2 and F16C (fixp16.c checks at run time), eight elements a step and
 * the scalar element math of fixp16_math.h for the tail.
 *
 * Encoding widens exactly (bf16: a shift; f16: vcvtph2ps) and then does
 * what tally_fixp_enc1() does, operation for operation. Decoding takes
 * another road to the same bits than the scalar integer rounding: the
 * sum times 2^-e is exact in binary64; for results of the type's normal
 * range its bits are rounded to p significant bits, half to even, with
 * integer operations (a carry runs into the exponent, past the largest
 * finite value gives +-inf); below the smallest normal 2^emin, adding
 * M = 2^(emin - p + 53) rounds at the type's subnormal step (one IEEE
 * rounding, to nearest even) and the bits of the sum less M's are the
 * result's. 16-bit sums take a shorter road where the exponent allows:
 * through binary32, exact for them, and one rounding (dec8_f32()). The
 * tests compare the two for every 16-bit pattern.
 */
#include <stddef.h>
#include <stdint.h>

#include "fixp16_math.h"
#include "fixp16_simd.h"

#if TALLY_FIXP16_HAVE_SIMD

#include <immintrin.h>

#define TGT	__attribute__((target("avx2,f16c")))

/* Eight elements of type f16 (else bf16) at x as floats, exactly. */
TGT static inline __m256
widen8(int f16, const uint16_t *x)
{
	__m128i h = _mm_loadu_si128((const __m128i *)(const void *)x);

	if (f16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h),
		16));
}

/* tally_fixp_enc1() of eight floats. */
TGT static inline __m256i
enc8(__m256 x, __m256 s1, __m256 s2)
{
	__m256 y = _mm256_mul_ps(_mm256_mul_ps(x, s1), s2);

	y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q));
	y = _mm256_max_ps(y, _mm256_set1_ps(TALLY_FIXP_SAT_MIN));
	y = _mm256_min_ps(y, _mm256_set1_ps(TALLY_FIXP_SAT_MAX));
	return _mm256_cvtps_epi32(y);	/* nearest even: the default mode */
}

TGT void
tally_fixp16_enc32_avx2(int f16, const uint16_t *x, int32_t *q, size_t n,
	float s1, float s2)
{
	__m256 v1 = _mm256_set1_ps(s1), v2 = _mm256_set1_ps(s2);
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_si256((__m256i *)(void *)(q + i),
			enc8(widen8(f16, x + i), v1, v2));
	for (; i < n; i++)
		q[i] = tally_fixp_enc1(f16 ? tally_fixp16_f16_f32(x[i]) :
			tally_fixp16_bf16_f32(x[i]), s1, s2);
}

TGT void
tally_fixp16_enc16_avx2(int f16, const uint16_t *x, int16_t *q, size_t n,
	float s1, float s2)
{
	__m256 v1 = _mm256_set1_ps(s1), v2 = _mm256_set1_ps(s2);
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i a = enc8(widen8(f16, x + i), v1, v2);
		__m256i b = enc8(widen8(f16, x + i + 8), v1, v2);

		/* packs works per 128-bit half: put the quarters in order. */
		_mm256_storeu_si256((__m256i *)(void *)(q + i),
			_mm256_permute4x64_epi64(_mm256_packs_epi32(a, b),
			0xd8));
	}
	for (; i < n; i++)
		q[i] = tally_fixp16_enc16(f16 ? tally_fixp16_f16_f32(x[i]) :
			tally_fixp16_bf16_f32(x[i]), s1, s2);
}

/*
 * The largest of n elements' magnitude bits, NaN as 0 (what
 * fixp16_math.h's tally_fixp16_abs_bits() gives, maxed), sixteen a step:
 * the magnitudes are below 2^15, so the signed 16-bit compare and max
 * order them as unsigned would. inf: the type's infinity bits.
 */
TGT uint16_t
tally_fixp16_absmax_avx2(const uint16_t *x, size_t n, uint16_t inf)
{
	__m256i mag = _mm256_set1_epi16(0x7fff), lim = _mm256_set1_epi16(
		(short)inf), m = _mm256_setzero_si256();
	__m128i h;
	uint16_t r;
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i a = _mm256_and_si256(_mm256_loadu_si256(
			(const __m256i *)(const void *)(x + i)), mag);

		/* NaNs (above inf) count as 0. */
		a = _mm256_andnot_si256(_mm256_cmpgt_epi16(a, lim), a);
		m = _mm256_max_epi16(m, a);
	}
	h = _mm_max_epi16(_mm256_castsi256_si128(m),
		_mm256_extracti128_si256(m, 1));
	h = _mm_max_epi16(h, _mm_srli_si128(h, 8));
	h = _mm_max_epi16(h, _mm_srli_si128(h, 4));
	h = _mm_max_epi16(h, _mm_srli_si128(h, 2));
	r = (uint16_t)_mm_extract_epi16(h, 0);
	for (; i < n; i++) {
		uint16_t a = tally_fixp16_abs_bits(x[i], inf);

		r = a > r ? a : r;
	}
	return r;
}

/* The constants of decoding for one type and exponent. */
struct dec_k {
	__m256d iscale;		/* 2^-e */
	__m256d big;		/* M */
	__m256i big_bits;
	__m256i min_normal;	/* bits of 2^emin as a double */
	__m256i round;		/* 2^(sh - 1) - 1 */
	__m128i sh;		/* 53 - p: binary64 bits beyond the type's */
	__m256i rebias;		/* (1023 - bias) << (p - 1) */
	__m256i inf;
	__m256i inf_m1;
	__m256i idx;		/* low 32 bits of each 64-bit lane, first */
	struct tally_fixp16_fmt f;
};

/* A double from its biased exponent alone: 2^(x - 1023). */
static inline uint64_t
pow2_bits(int x)
{
	return (uint64_t)x << 52;
}

TGT static void
dec_k_init(struct dec_k *k, int f16, int e)
{
	const struct tally_fixp16_fmt bf = TALLY_FIXP16_FMT_BF16;
	const struct tally_fixp16_fmt hf = TALLY_FIXP16_FMT_F16;
	struct tally_fixp16_fmt f = f16 ? hf : bf;
	int sh = 53 - f.p;

	k->f = f;
	k->iscale = _mm256_castsi256_pd(_mm256_set1_epi64x(
		(long long)pow2_bits(1023 - e)));
	k->big_bits = _mm256_set1_epi64x((long long)pow2_bits(1023 + f.emin -
		f.p + 53));
	k->big = _mm256_castsi256_pd(k->big_bits);
	k->min_normal = _mm256_set1_epi64x((long long)pow2_bits(1023 +
		f.emin));
	k->round = _mm256_set1_epi64x((1ll << (sh - 1)) - 1);
	k->sh = _mm_cvtsi32_si128(sh);
	k->rebias = _mm256_set1_epi64x((long long)(1023 - f.bias) <<
		(f.p - 1));
	k->inf = _mm256_set1_epi64x(f.inf);
	k->inf_m1 = _mm256_set1_epi64x(f.inf - 1);
	k->idx = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
}

/* Four int32 sums to four results, one in each int32 of the return. */
TGT static inline __m128i
dec4(const struct dec_k *k, __m128i s)
{
	__m256d d = _mm256_mul_pd(_mm256_cvtepi32_pd(s), k->iscale);
	__m256i b = _mm256_castpd_si256(d);
	__m256i sign = _mm256_and_si256(b,
		_mm256_set1_epi64x((long long)0x8000000000000000ull));
	__m256i ab = _mm256_xor_si256(b, sign);
	__m256i lsb = _mm256_and_si256(_mm256_srl_epi64(ab, k->sh),
		_mm256_set1_epi64x(1));
	__m256i r, sub, m;

	/* Normal results: round the significand, rebias the exponent. */
	r = _mm256_srl_epi64(_mm256_add_epi64(ab, _mm256_add_epi64(k->round,
		lsb)), k->sh);
	r = _mm256_sub_epi64(r, k->rebias);
	r = _mm256_blendv_epi8(r, k->inf, _mm256_cmpgt_epi64(r, k->inf_m1));
	/* Below 2^emin: |d| + M rounds at the subnormal step. */
	m = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(
		_mm256_castsi256_pd(ab), k->big)), k->big_bits);
	sub = _mm256_cmpgt_epi64(k->min_normal, ab);
	r = _mm256_blendv_epi8(r, m, sub);
	r = _mm256_or_si256(r, _mm256_srli_epi64(sign, 48));
	return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(r, k->idx));
}

/* Eight int32 sums to eight results at x. */
TGT static inline void
dec8(const struct dec_k *k, __m256i s, uint16_t *x)
{
	__m128i lo = dec4(k, _mm256_castsi256_si128(s));
	__m128i hi = dec4(k, _mm256_extracti128_si256(s, 1));

	_mm_storeu_si128((__m128i *)(void *)x, _mm_packus_epi32(lo, hi));
}

TGT void
tally_fixp16_dec32_avx2(int f16, const int32_t *q, uint16_t *x, size_t n,
	int e)
{
	struct dec_k k;
	size_t i = 0;

	dec_k_init(&k, f16, e);
	for (; i + 8 <= n; i += 8)
		dec8(&k, _mm256_loadu_si256((const __m256i *)(const void *)
			(q + i)), x + i);
	for (; i < n; i++)
		x[i] = tally_fixp16_dec1(q[i], e, k.f);
}

/*
 * Eight 16-bit sums (in int32s) to eight results, through binary32: a
 * sum of at most 16 significant bits times 2^-e (a normal float) is
 * exact, or at least 2^128, which is past both types' largest finite
 * and gives inf as rounding would. The one rounding is then bf16's half
 * to even on the float's bits (a carry runs into the exponent; results
 * are normal, e being at most DEC16_F32_EMAX), or F16C's conversion to
 * nearest even.
 */
TGT static inline __m128i
dec8_f32(int f16, __m256i s, __m256 scale)
{
	__m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(s), scale);
	__m256i b = _mm256_castps_si256(v), lsb;

	if (f16)
		return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |
			_MM_FROUND_NO_EXC);
	lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
	b = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb,
		_mm256_set1_epi32(0x7fff))), 16);
	return _mm_packus_epi32(_mm256_castsi256_si128(b),
		_mm256_extracti128_si256(b, 1));
}

/*
 * The largest exponent dec8_f32() takes: the smallest nonzero result,
 * 2^-e, stays a normal float (16 below 2^-126 to spare), so subnormals,
 * and flush-to-zero modes, never meet it.
 */
#define DEC16_F32_EMAX	110

TGT void
tally_fixp16_dec16_avx2(int f16, const int16_t *q, uint16_t *x, size_t n,
	int e)
{
	struct dec_k k;
	size_t i = 0;

	if (e >= -126 && e <= DEC16_F32_EMAX) {
		/* 2^-e, a normal float (-126: TALLY_FIXP_EXP_MIN). */
		__m256 sc = _mm256_castsi256_ps(_mm256_set1_epi32((127 - e) <<
			23));

		/* Each step reads its eight sums before writing: x may be q. */
		for (; i + 8 <= n; i += 8)
			_mm_storeu_si128((__m128i *)(void *)(x + i), dec8_f32(f16,
				_mm256_cvtepi16_epi32(_mm_loadu_si128(
				(const __m128i *)(const void *)(q + i))), sc));
	}
	dec_k_init(&k, f16, e);
	/* Each step reads its eight sums before writing: x may be q. */
	for (; i + 8 <= n; i += 8)
		dec8(&k, _mm256_cvtepi16_epi32(_mm_loadu_si128(
			(const __m128i *)(const void *)(q + i))), x + i);
	for (; i < n; i++)
		x[i] = tally_fixp16_dec1(q[i], e, k.f);
}

#endif /* TALLY_FIXP16_HAVE_SIMD */
