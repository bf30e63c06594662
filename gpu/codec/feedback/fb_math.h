/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Arithmetic shared by the element math of the feedback family
 * (<tally/feedback.h>): correctly rounded operations that neither side
 * fuses, one canonical NaN, and the counter-based hash behind every
 * random draw of the family.
 *
 * Requirements, as for fixp_math.h: the host runs in the default floating
 * point environment (round to nearest even, no flush-to-zero), the C code
 * that includes this is built with -ffp-contract=off (GCC's gnu11 default
 * is "fast", which would fuse m * u + g into an FMA where the target has
 * one), and nvcc runs without --use_fast_math / -ftz=true. On the device
 * the operations are the _rn intrinsics, which nvcc never contracts.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_FB_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_FB_MATH_H

#include <stdint.h>

#include "codec/fixp_math.h"
#include "codec/hd.h"

/*
 * The one NaN that float results of this family carry: the GPU's own
 * (its arithmetic never propagates payloads), so the host's results,
 * whose NaNs keep an operand's payload, are made to match.
 */
#define TALLY_FB_NAN_BITS	0x7fffffffu

/* a + b, rounded to nearest even. */
static inline TALLY_HD float
tally_fb_add(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(a, b);
#else
	return a + b;
#endif
}

/* a - b, rounded to nearest even. */
static inline TALLY_HD float
tally_fb_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fsub_rn(a, b);
#else
	return a - b;
#endif
}

/* a * b, rounded to nearest even. */
static inline TALLY_HD float
tally_fb_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

/* a / b, rounded to nearest even (IEEE division on both sides). */
static inline TALLY_HD float
tally_fb_div(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fdiv_rn(a, b);
#else
	return a / b;
#endif
}

/* x, or the canonical NaN when x is a NaN. */
static inline TALLY_HD float
tally_fb_canon(float x)
{
	return x != x ? tally_hd_u2f(TALLY_FB_NAN_BITS) : x;
}

/* 1 when x is +-inf. */
static inline TALLY_HD unsigned int
tally_fb_isinf(float x)
{
	return (tally_hd_f2u(x) & 0x7fffffffu) == 0x7f800000u;
}

/* 1 when x is neither infinite nor NaN. */
static inline TALLY_HD unsigned int
tally_fb_isfinite(float x)
{
	return (tally_hd_f2u(x) & 0x7f800000u) != 0x7f800000u;
}

/* SplitMix64's output function: a bijective 64-bit mixer. */
static inline TALLY_HD uint64_t
tally_fb_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A stream key from a seed: seeds 0, 1, 2, ... give unrelated streams. */
static inline TALLY_HD uint64_t
tally_fb_key(uint64_t seed)
{
	return tally_fb_mix64(seed ^ 0x6a09e667f3bcc909ull);
}

/*
 * Draw number ctr of the stream key: SplitMix64's ctr-th output from the
 * state key. Counter-based, so any element's draw is computed on its own
 * (on either side, in any chunk).
 */
static inline TALLY_HD uint64_t
tally_fb_hash(uint64_t key, uint64_t ctr)
{
	return tally_fb_mix64(key + (ctr + 1) * 0x9e3779b97f4a7c15ull);
}

/* Uniform in [0, 1): the top 24 bits of h, times 2^-24 (exact). */
static inline TALLY_HD float
tally_fb_unit(uint64_t h)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(__uint2float_rn((unsigned int)(h >> 40)), 0x1p-24f);
#else
	return (float)(uint32_t)(h >> 40) * 0x1p-24f;
#endif
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_FB_MATH_H */
