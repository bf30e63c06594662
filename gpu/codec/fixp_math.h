/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of the shared-scale fixed-point codec (<tally/fixp.h>).
 *
 * The CPU reference (fixp.c) and the CUDA kernels (fixp.cu) both call
 * these functions, so the CPU tests check the code the GPU runs. Only
 * plain IEEE operations are used, each correctly rounded to nearest even
 * on both sides:
 * - x * 2^e is one multiplication by 2^e, a normal float for
 *   e in [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]: exact unless the product
 *   overflows (and then saturates) or is subnormal (and then rounds to
 *   integer 0 anyway), i.e. the same as ldexpf(x, e). On the device it is
 *   __fmul_rn, which nvcc never fuses into an FMA.
 * - float -> int: host rintf (current rounding mode: the default one,
 *   to nearest even; then an exact cast, the value being an integer in
 *   range), device __float2int_rn.
 * - int -> float: host (float)q, device __int2float_rn, both to nearest
 *   even.
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
 * 2^e as a float, e first clamped to [TALLY_FIXP_EXP_MIN,
 * TALLY_FIXP_EXP_MAX] so that the result is a normal float (built from its
 * bits: no libm call, the same on both sides). Encoding multiplies by
 * tally_fixp_pow2(e), decoding by tally_fixp_pow2(-e).
 */
static inline TALLY_HD float
tally_fixp_pow2(int e)
{
	e = e < TALLY_FIXP_EXP_MIN ? TALLY_FIXP_EXP_MIN : e;
	e = e > TALLY_FIXP_EXP_MAX ? TALLY_FIXP_EXP_MAX : e;
	return tally_hd_u2f((uint32_t)(e + 127) << 23);
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
 * Encodes one element: scale is tally_fixp_pow2(e). NaN -> 0; x * scale
 * clamped to [TALLY_FIXP_SAT_MIN, TALLY_FIXP_SAT_MAX] (+-inf included),
 * then rounded to the nearest integer, ties to even.
 */
static inline TALLY_HD int32_t
tally_fixp_enc1(float x, float scale)
{
	float y;

#ifdef __CUDA_ARCH__
	y = __fmul_rn(x, scale);
#else
	y = x * scale;
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
 * Decodes one element (or a sum of them): iscale is tally_fixp_pow2(-e).
 * (float)q rounds to nearest even; the multiplication is then exact unless
 * it overflows to +-inf (a sum too large for f32).
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

#endif /* TALLY_GPU_CODEC_FIXP_MATH_H */
