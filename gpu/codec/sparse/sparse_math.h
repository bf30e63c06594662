/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of block-sparse selection (<tally/sparse.h>), shared by the
 * CPU reference (*.c here) and the CUDA kernels (sparse.cu), so that the
 * CPU tests check the code the GPU runs.
 *
 * Keys. The key of x is the bits of its magnitude: |x|'s bits, 0 for a
 * NaN (+inf is 0x7f800000, above every finite key). Non-negative floats
 * order as their bits, so comparisons with a threshold, block maxima and
 * the radix select are integer operations, exact on both sides.
 *
 * Fits. Each element gives y = |x| - t when x is finite and |x| > t (y is
 * then > 0: the difference of two distinct floats never rounds to 0 with
 * gradual underflow), else 0, which counts for nothing; y^2 and ln y
 * follow. Only correctly rounded IEEE operations are used, each written
 * out (host: plain C operators, the library built with -ffp-contract=off so
 * that no multiply-add is fused; device: __fadd_rn and friends, never
 * fused), so both sides give the same bits. Requirements as in
 * fixp_math.h: default rounding, no flush-to-zero, no fast-math.
 *
 * Block sums. A block's 256 values t[0..255] (0 past the end of the data)
 * are added in one fixed tree: for s = 128, 64, ..., 1: t[i] += t[i + s]
 * for i < s; the sum is t[0]. The CPU runs tally_sparse_tree256() below;
 * the device runs the same pairs with one value a thread (shared memory
 * for s >= 32, warp shuffles below).
 */
#ifndef TALLY_GPU_CODEC_SPARSE_MATH_H
#define TALLY_GPU_CODEC_SPARSE_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tally/sparse.h>

#include "../hd.h"

/* Largest finite key, and the key of +inf. */
#define TALLY_SPARSE_KEY_FLT_MAX	0x7f7fffffu
#define TALLY_SPARSE_KEY_INF		0x7f800000u
/* Blocks whose sums a segment adds (in double) before the total does. */
#define TALLY_SPARSE_SEGMENT		1024

#ifdef __CUDA_ARCH__
#define TALLY_SPARSE_ADD(a, b)	__fadd_rn((a), (b))
#define TALLY_SPARSE_SUB(a, b)	__fsub_rn((a), (b))
#define TALLY_SPARSE_MUL(a, b)	__fmul_rn((a), (b))
#define TALLY_SPARSE_DIV(a, b)	__fdiv_rn((a), (b))
#else
#define TALLY_SPARSE_ADD(a, b)	((a) + (b))
#define TALLY_SPARSE_SUB(a, b)	((a) - (b))
#define TALLY_SPARSE_MUL(a, b)	((a) * (b))
#define TALLY_SPARSE_DIV(a, b)	((a) / (b))
#endif

/* Key of the float whose bits are u: |x|'s bits, NaN -> 0. */
static inline TALLY_HD uint32_t
tally_sparse_key_u(uint32_t u)
{
	u &= 0x7fffffffu;
	/* A mask rather than a select: GCC vectorizes the loops then. */
	return u & (0u - (uint32_t)(u <= TALLY_SPARSE_KEY_INF));
}

/* Key of x. */
static inline TALLY_HD uint32_t
tally_sparse_key(float x)
{
	return tally_sparse_key_u(tally_hd_f2u(x));
}

/*
 * Key of a threshold: thresholds are positive, at least FLT_TRUE_MIN
 * (key 1), so that a zero key is never kept.
 */
static inline TALLY_HD uint32_t
tally_sparse_thr_key(float threshold)
{
	uint32_t k = tally_sparse_key(threshold);

	return k == 0 ? 1 : k;
}

/* Exceedance of x over t (t >= 0, finite): |x| - t or 0, see above. */
static inline TALLY_HD float
tally_sparse_exceed(float x, float t)
{
	float a = fabsf(x);
	float y = TALLY_SPARSE_SUB(a, t);

	/*
	 * a <= FLT_MAX is false for +inf and NaN; a > t for NaN too. A mask
	 * rather than a select: the loops stay branch-free (GCC does not
	 * speculate a float operation into a select under -ftrapping-math).
	 */
	uint32_t keep = (uint32_t)((a > t) & (a <= 3.40282347e38f));

	return tally_hd_u2f(tally_hd_f2u(y) & (0u - keep));
}

/*
 * ln y for y > 0 finite (subnormals too), within 2 ulp: y = m * 2^e with
 * m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(f / (2 + f)), f = m - 1, by its
 * odd series to the 9th power (|s| < 0.172: the next term is below
 * 2^-30 of the sum). ln 2 in two parts so that e * ln 2 stays exact.
 * Anything else (0, inf, NaN, negative) gives garbage: callers mask.
 */
static inline TALLY_HD float
tally_sparse_log(float y)
{
	uint32_t u = tally_hd_f2u(y);
	uint32_t us = tally_hd_f2u(TALLY_SPARSE_MUL(y, 33554432.0f));
	uint32_t sub = (uint32_t)(u < 0x00800000u);
	int32_t e;
	float m, f, s, z, r, lm;

	/* Subnormals: times 2^25 (exact), then 25 off the exponent. */
	u = (us & (0u - sub)) | (u & (sub - 1u));
	u -= 0x3f3504f3u;	/* the bits of sqrt(1/2) */
	e = ((int32_t)u >> 23) - 25 * (int32_t)sub;
	m = tally_hd_u2f((u & 0x007fffffu) + 0x3f3504f3u);
	f = TALLY_SPARSE_SUB(m, 1.0f);
	s = TALLY_SPARSE_DIV(f, TALLY_SPARSE_ADD(f, 2.0f));
	z = TALLY_SPARSE_MUL(s, s);
	r = TALLY_SPARSE_ADD(0.28571428571f, TALLY_SPARSE_MUL(z,
		0.22222222222f));
	r = TALLY_SPARSE_ADD(0.4f, TALLY_SPARSE_MUL(z, r));
	r = TALLY_SPARSE_ADD(0.66666666667f, TALLY_SPARSE_MUL(z, r));
	r = TALLY_SPARSE_MUL(z, r);
	/* ln m = 2s + s * r, as f - s * (f - r): 2s = f - s * f exactly. */
	lm = TALLY_SPARSE_SUB(f, TALLY_SPARSE_MUL(s, TALLY_SPARSE_SUB(f, r)));
	return TALLY_SPARSE_ADD(TALLY_SPARSE_MUL((float)e, 0.693145752f),
		TALLY_SPARSE_ADD(lm, TALLY_SPARSE_MUL((float)e,
			1.42860677e-6f)));
}

/* ln y when y > 0, else 0 (the masked elements of a fit). */
static inline TALLY_HD float
tally_sparse_log0(float y)
{
	uint32_t pos = (uint32_t)(y > 0.0f);
	float l = tally_sparse_log(tally_hd_u2f((tally_hd_f2u(y) &
		(0u - pos)) | (0x3f800000u & (pos - 1u))));

	return tally_hd_u2f(tally_hd_f2u(l) & (0u - pos));
}

/* splitmix64's output number j of the stream of seed. */
static inline TALLY_HD uint64_t
tally_sparse_mix(uint64_t seed, uint64_t j)
{
	uint64_t z = seed + (j + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * DGC's sample: element j of it is the one drawn from stratum j, the
 * elements [j * stride, min((j + 1) * stride, n)), uniformly from seed
 * (stride < 2^32).
 */
static inline TALLY_HD size_t
tally_sparse_sample_pos(uint64_t seed, size_t j, size_t stride, size_t n)
{
	size_t lo = j * stride;
	uint64_t len = n - lo < stride ? n - lo : stride;
	uint64_t r = tally_sparse_mix(seed, j) >> 32;

	return lo + (size_t)((r * len) >> 32);
}

/* Runs of SIDCo's sample in n elements (<tally/sparse.h>). */
#define TALLY_SPARSE_SIDCO_RUNS(n)	\
	(((n) + TALLY_SPARSE_SIDCO_RUN - 1) / TALLY_SPARSE_SIDCO_RUN)

/*
 * Where element v of SIDCo's sample lies in the tensor (n elements): in
 * run r = v / TALLY_SPARSE_SIDCO_RUN of the sample, which is the run
 * drawn from stratum r (stride runs) by tally_sparse_sample_pos(). n (no
 * element) past the sample's m runs or past the tensor's end.
 */
static inline TALLY_HD size_t
tally_sparse_sample_elem(uint64_t seed, size_t v, size_t stride, size_t m,
	size_t n)
{
	size_t r = v / TALLY_SPARSE_SIDCO_RUN, p;

	if (r >= m)
		return n;
	p = tally_sparse_sample_pos(seed, r, stride,
		TALLY_SPARSE_SIDCO_RUNS(n)) * TALLY_SPARSE_SIDCO_RUN +
		v % TALLY_SPARSE_SIDCO_RUN;
	return p < n ? p : n;
}

#ifndef __CUDA_ARCH__
/*
 * Sum of t[0..256) in the fixed tree (see the head of this file); t is
 * overwritten. The CPU side of every block sum.
 */
static inline float
tally_sparse_tree256(float *t)
{
	for (int i = 0; i < 128; i++)
		t[i] += t[i + 128];
	for (int i = 0; i < 64; i++)
		t[i] += t[i + 64];
	for (int i = 0; i < 32; i++)
		t[i] += t[i + 32];
	for (int i = 0; i < 16; i++)
		t[i] += t[i + 16];
	for (int i = 0; i < 8; i++)
		t[i] += t[i + 8];
	for (int i = 0; i < 4; i++)
		t[i] += t[i + 4];
	t[0] += t[2];
	t[1] += t[3];
	return t[0] + t[1];
}
#endif

#endif /* TALLY_GPU_CODEC_SPARSE_MATH_H */
