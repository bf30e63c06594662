/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of the ternary codecs (<tally/feedback.h>): threshold
 * ternary with a residual (MXNet 2-bit), stochastic ternary (TernGrad),
 * their i4 / i8 packing and the decoding of sums. Shared by tern.c and
 * tern.cu.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_TERN_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_TERN_MATH_H

#include <stdint.h>

#include <tally/feedback.h>

#include "fb_math.h"

/*
 * 2^exp with exp clamped to [TALLY_TERN_EXP_MIN, TALLY_TERN_EXP_MAX]
 * (the 2-bit threshold t), and the bound lim = 2^(exp + 24) under which
 * v - t is exact (+inf when that is past the floats).
 */
static inline TALLY_HD float
tally_2bit_t(int exp)
{
	return tally_fixp_pow2(exp);
}

static inline TALLY_HD float
tally_2bit_lim(int exp)
{
	exp = exp < TALLY_TERN_EXP_MIN ? TALLY_TERN_EXP_MIN : exp;
	exp = exp > TALLY_TERN_EXP_MAX ? TALLY_TERN_EXP_MAX : exp;
	/* From the bits: 2^(exp + 24) may be 2^127, past tally_fixp_pow2(). */
	return exp + 24 > 127 ? tally_hd_u2f(0x7f800000u) :
		tally_hd_u2f((uint32_t)(exp + 24 + 127) << 23);
}

/*
 * One 2-bit step on v (= g + r): q = +1 when t <= v < lim, -1 when
 * -lim < v <= -t, else 0; *r = v - q * t, exact (<tally/feedback.h>).
 */
static inline TALLY_HD int
tally_2bit_step1(float v, float t, float lim, float *r)
{
	/* Comparisons combined with & and selects: no branches (the CPU
	 * loops vectorize, the warps do not diverge). */
	int pos = (v >= t) & (v < lim);
	int neg = (v <= -t) & (v > -lim);
	float s = pos ? t : 0.0f;

	s = neg ? -t : s;
	*r = tally_fb_canon(tally_fb_sub(v, s));
	return pos - neg;
}

/*
 * TernGrad's draw for an element g at global index idx: with
 * p = min(|g| / s, 1) and u = tally_fb_unit(hash(key, idx)), q = sign(g)
 * when u < p, else 0. NaN g (or s) gives 0.
 */
static inline TALLY_HD int
tally_tern_q1(float g, float s, uint64_t key, uint64_t idx)
{
	float p = tally_fb_div(fabsf(g), s);
	float u = tally_fb_unit(tally_fb_hash(key, idx));

	p = p > 1.0f ? 1.0f : p;
	return u < p ? (g < 0.0f ? -1 : 1) : 0;
}

/* The byte holding q0 (low nibble) and q1 (high), two's complement. */
static inline TALLY_HD uint8_t
tally_tern_pack2(int q0, int q1)
{
	return (uint8_t)(((unsigned int)q0 & 0xfu) |
		(((unsigned int)q1 & 0xfu) << 4));
}

/* Nibble hi (0: low, 1: high) of b, sign-extended: -8 .. 7. */
static inline TALLY_HD int32_t
tally_tern_nib(uint8_t b, unsigned int hi)
{
	int32_t v = hi ? (b >> 4) : (b & 0xf);

	return (v ^ 8) - 8;
}

/* A sum of ternary values decoded: (float)sum * scale. */
static inline TALLY_HD float
tally_tern_dec1(int32_t sum, float scale)
{
#ifdef __CUDA_ARCH__
	return tally_fb_canon(__fmul_rn(__int2float_rn(sum), scale));
#else
	return tally_fb_canon((float)sum * scale);
#endif
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_TERN_MATH_H */
