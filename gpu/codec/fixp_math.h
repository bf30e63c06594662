/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of the shared-scale fixed-point codec (<tally/fixp.h>).
 *
 * The CPU reference (fixp.c) and the CUDA kernels (fixp.cu) both call
 * these functions, so the CPU tests check the code the GPU runs. Only
 * plain IEEE operations are used, each correctly rounded to nearest even
 * on both sides:
 * - x * 2^e is two multiplications, by 2^e1 and then by 2^e2 (normal
 *   floats, e1 = min(e, 126), e2 = e - e1 in [0, 52]; for e up to
 *   TALLY_FIXP_EXP_MAX = 178, as a tensor of subnormals needs). Each is
 *   exact unless it overflows (then x * 2^e is past the saturation too,
 *   and saturates) or, for e1 < 0 only, gives a subnormal (then
 *   |x * 2^e| < 2^-126 and rounds to integer 0 anyway): so the result is
 *   the exact x * 2^e wherever the rounding to an integer can tell. On
 *   the device they are __fmul_rn, which nvcc never fuses into an FMA.
 * - float -> int: host rintf (current rounding mode: the default one,
 *   to nearest even; then an exact cast, the value being an integer in
 *   range), device __float2int_rn.
 * - q * 2^-e, one rounding: for e <= 126, (float)q (host; device
 *   __int2float_rn) times 2^-e, a normal float: exact, since the product
 *   stays normal for q != 0 (or overflows as the exact value would).
 *   For e > 126 the product can be subnormal, where a second rounding
 *   could differ from one: then (double)q * 2^-e, exact in binary64,
 *   rounded once to float (device __int2double_rn, __dmul_rn,
 *   __double2float_rn).
 * Requirements this relies on: the host runs in the default floating
 * point environment (round to nearest, no flush-to-zero / denormals-are-
 * zero), nothing here is built with -ffast-math / -ffinite-math-only, and
 * nvcc runs without --use_fast_math / -ftz=true.
 */
#ifndef TALLY_GPU_CODEC_FIXP_MATH_H
#define TALLY_GPU_CODEC_FIXP_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tally/fixp.h>

#include "hd.h"

/*
 * 2^e as a float, e first clamped to [-126, 126] so that the result is a
 * normal float (built from its bits: no libm call, the same on both
 * sides). The 2-bit codec's threshold uses it too.
 */
static inline TALLY_HD float
tally_fixp_pow2(int e)
{
	e = e < -126 ? -126 : e;
	e = e > 126 ? 126 : e;
	return tally_hd_u2f((uint32_t)(e + 127) << 23);
}

/* e clamped to [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]. */
static inline TALLY_HD int
tally_fixp_clamp(int e)
{
	e = e < TALLY_FIXP_EXP_MIN ? TALLY_FIXP_EXP_MIN : e;
	return e > TALLY_FIXP_EXP_MAX ? TALLY_FIXP_EXP_MAX : e;
}

/*
 * The encoding's two factors for exponent e (clamped): 2^e1 and 2^e2
 * with e1 = min(e, 126) and e2 = e - e1, so that 2^e = 2^e1 * 2^e2 with
 * both normal floats.
 */
static inline TALLY_HD float
tally_fixp_scale1(int e)
{
	e = tally_fixp_clamp(e);
	return tally_fixp_pow2(e < 126 ? e : 126);
}

static inline TALLY_HD float
tally_fixp_scale2(int e)
{
	e = tally_fixp_clamp(e);
	return tally_fixp_pow2(e > 126 ? e - 126 : 0);
}

/*
 * Whether decoding with exponent e (clamped) takes the binary64 path of
 * tally_fixp_dec1_tiny(): e > 126, where q * 2^-e can be subnormal.
 */
static inline TALLY_HD int
tally_fixp_dec_tiny(int e)
{
	return tally_fixp_clamp(e) > 126;
}

/* 2^-e for the float path (e clamped to [TALLY_FIXP_EXP_MIN, 126]). */
static inline TALLY_HD float
tally_fixp_iscale(int e)
{
	e = tally_fixp_clamp(e);
	return tally_fixp_pow2(e < 126 ? -e : -126);
}

/*
 * 2^-e as a double for the binary64 path (e clamped to
 * [127, TALLY_FIXP_EXP_MAX]): the product of two normal floats, exact.
 */
static inline TALLY_HD double
tally_fixp_iscale_tiny(int e)
{
	e = tally_fixp_clamp(e);
	e = e < 127 ? 127 : e;
	return (double)tally_fixp_pow2(-126) * (double)tally_fixp_pow2(126 - e);
}

/*
 * Bits of |x| from the bits u of x, or 0 when x is NaN. For non-negative
 * floats the bits order as the values do, so the max of these is the bits
 * of max |x| (the device reduces them with an integer atomicMax).
 */
static inline TALLY_HD uint32_t
tally_fixp_abs_bits_u(uint32_t u)
{
	u &= 0x7fffffffu;
	/* A mask rather than a select: GCC vectorizes the max loop then. */
	return u & (0u - (uint32_t)(u <= 0x7f800000u));
}

/* tally_fixp_abs_bits_u() of the bits of x. */
static inline TALLY_HD uint32_t
tally_fixp_abs_bits(float x)
{
	return tally_fixp_abs_bits_u(tally_hd_f2u(x));
}

/*
 * Encodes one element: s1, s2 are tally_fixp_scale1(e), _scale2(e).
 * NaN -> 0; x * s1 * s2 clamped to [TALLY_FIXP_SAT_MIN,
 * TALLY_FIXP_SAT_MAX] (+-inf included), then rounded to the nearest
 * integer, ties to even.
 */
static inline TALLY_HD int32_t
tally_fixp_enc1(float x, float s1, float s2)
{
	float y;

#ifdef __CUDA_ARCH__
	y = __fmul_rn(__fmul_rn(x, s1), s2);
#else
	y = x * s1;
	y = y * s2;
#endif
	y = y != y ? 0.0f : y;
	y = y < TALLY_FIXP_SAT_MIN ? TALLY_FIXP_SAT_MIN : y;
	y = y > TALLY_FIXP_SAT_MAX ? TALLY_FIXP_SAT_MAX : y;
#ifdef __CUDA_ARCH__
	return __float2int_rn(y);
#else
	return (int32_t)rintf(y);
#endif
}

/*
 * Decodes one element (or a sum of them) for e <= 126: iscale is
 * tally_fixp_iscale(e). (float)q rounds to nearest even; the
 * multiplication is then exact unless it overflows to +-inf (a sum too
 * large for f32).
 */
static inline TALLY_HD float
tally_fixp_dec1(int32_t q, float iscale)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(__int2float_rn(q), iscale);
#else
	return (float)q * iscale;
#endif
}

/*
 * Decodes one element for e > 126: iscale is tally_fixp_iscale_tiny(e).
 * q * 2^-e is exact in binary64 (31 bits at an exponent >= -209), so the
 * one rounding is the conversion to float, subnormals included.
 */
static inline TALLY_HD float
tally_fixp_dec1_tiny(int32_t q, double iscale)
{
#ifdef __CUDA_ARCH__
	return __double2float_rn(__dmul_rn(__int2double_rn(q), iscale));
#else
	return (float)((double)q * iscale);
#endif
}

#endif /* TALLY_GPU_CODEC_FIXP_MATH_H */
