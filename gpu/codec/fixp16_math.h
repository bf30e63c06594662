/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of the 16-bit fixed-point codec (<tally/fixp16.h>), for
 * the scalar CPU loops (fixp16.c) and the CUDA kernels (fixp16.cu) alike.
 *
 * Widening is exact: a bf16 is the top half of a binary32; an f16's
 * fields are moved into a binary32's (subnormals as mantissa * 2^-24, an
 * exact product). Encoding is tally_fixp_enc1() of fixp_math.h on the
 * widened value. Decoding works on the integer sum alone: with a = |S|,
 * the value a 2^-e has binary exponent E = floor(log2 a) - e; the type's
 * quantum there is 2^qe, qe = max(E, emin) - (p - 1); a is shifted right
 * by qe + e with round half to even on the bits shifted out (or left,
 * exactly). The rounded significand m and qe then give the bits in one
 * sum, ((qe + bias + p - 2) << (p - 1)) + m, which is right for normal
 * results, subnormal ones (the exponent field is 0 there), a carry into
 * the next binade and the smallest normal; past the largest finite
 * value it is +-inf. Integers only: no floating point rounding mode,
 * flush-to-zero or FMA can change it.
 */
#ifndef TALLY_GPU_CODEC_FIXP16_MATH_H
#define TALLY_GPU_CODEC_FIXP16_MATH_H

#include <stdint.h>

#include "fixp_math.h"
#include "hd.h"

/* A 16-bit float type's parameters: significant bits, bias, emin. */
struct tally_fixp16_fmt {
	int p;		/* significant bits, the hidden one included */
	int bias;
	int emin;	/* exponent of the smallest normal */
	uint32_t inf;	/* bits of +inf */
};

#define TALLY_FIXP16_FMT_BF16	{ 8, 127, -126, 0x7f80u }
#define TALLY_FIXP16_FMT_F16	{ 11, 15, -14, 0x7c00u }

/* A bf16's value as a float, exactly. */
static inline TALLY_HD float
tally_fixp16_bf16_f32(uint16_t h)
{
	return tally_hd_u2f((uint32_t)h << 16);
}

/* An f16's value as a float, exactly (NaN stays a NaN). */
static inline TALLY_HD float
tally_fixp16_f16_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (ex == 0x1fu)
		return tally_hd_u2f(sign | 0x7f800000u | man << 13);
	if (ex != 0)
		return tally_hd_u2f(sign | (ex + 112u) << 23 | man << 13);
	/* Zero or subnormal: man 2^-24, exact in binary32. */
	return tally_hd_u2f(sign | tally_hd_f2u((float)man * 0x1p-24f));
}

/*
 * Bits of |x| from an f16's or bf16's bits h, or 0 for a NaN (inf is the
 * bits of +inf of that type): non-negative floats order as their bits.
 */
static inline TALLY_HD uint16_t
tally_fixp16_abs_bits(uint16_t h, uint16_t inf)
{
	uint16_t a = (uint16_t)(h & 0x7fffu);

	return a > inf ? 0 : a;
}

/* Encodes one element for 16-bit lanes: enc1, clamped to int16. */
static inline TALLY_HD int16_t
tally_fixp16_enc16(float x, float s1, float s2)
{
	int32_t q = tally_fixp_enc1(x, s1, s2);

	q = q < -32768 ? -32768 : q;
	return (int16_t)(q > 32767 ? 32767 : q);
}

/* floor(log2 a) for a != 0, on either side. */
static inline TALLY_HD int
tally_fixp16_log2(uint64_t a)
{
#ifdef __CUDA_ARCH__
	return 63 - __clzll((long long)a);
#else
	return 63 - __builtin_clzll(a);
#endif
}

/*
 * The bits of q * 2^-e rounded once, to nearest even, to the type of f
 * (e clamped to [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]).
 */
static inline TALLY_HD uint16_t
tally_fixp16_dec1(int32_t q, int e, struct tally_fixp16_fmt f)
{
	uint32_t sign = q < 0 ? 0x8000u : 0;
	uint64_t a = q < 0 ? (uint64_t)(-(int64_t)q) : (uint64_t)q;
	uint64_t m, rem, half;
	int ex, qe, sh;
	int64_t bits;

	if (a == 0)
		return 0;
	e = tally_fixp_clamp(e);
	ex = tally_fixp16_log2(a) - e;
	qe = (ex > f.emin ? ex : f.emin) - (f.p - 1);
	sh = qe + e;
	if (sh <= 0) {
		m = a << -sh;		/* exact: m < 2^p */
	} else if (sh > 40) {
		m = 0;			/* a 2^-sh < 2^-8: below half a step */
	} else {
		m = a >> sh;
		rem = a & ((UINT64_C(1) << sh) - 1);
		half = UINT64_C(1) << (sh - 1);
		m += rem > half || (rem == half && (m & 1));
	}
	bits = ((int64_t)(qe + f.bias + f.p - 2) << (f.p - 1)) + (int64_t)m;
	if (bits >= (int64_t)f.inf)
		bits = f.inf;
	return (uint16_t)(sign | (uint32_t)bits);
}

#endif /* TALLY_GPU_CODEC_FIXP16_MATH_H */
