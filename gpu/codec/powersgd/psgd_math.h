/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of PowerSGD (<tally/powersgd.h>), shared by psgd.c (the
 * CPU reference) and psgd.cu (the CUDA kernels), so the CPU suite checks
 * the code the GPU runs.
 *
 * Sums are in double: a product of two floats is exact in double (24 + 24
 * significant bits <= 53), so each term of a dot product is exact, only
 * the additions round, and the sum of a few thousand terms keeps far more
 * than float precision before it is rounded once to float. Every
 * operation is a correctly rounded IEEE one (to nearest even), written as
 * the _rn intrinsics on the device, which nvcc never contracts into an
 * FMA; the C side is built with -ffp-contract=off and nvcc with
 * --fmad=false. No libm function whose rounding differs between the two
 * sides is used: the one logarithm (of the normal draws) is built here
 * from + - * /. As for fb_math.h: the host runs in the default floating
 * point environment (round to nearest, no flush-to-zero), and nothing is
 * built with fast-math.
 */
#ifndef TALLY_GPU_CODEC_POWERSGD_PSGD_MATH_H
#define TALLY_GPU_CODEC_POWERSGD_PSGD_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifndef __CUDA_ARCH__
#include <math.h>
#endif

#include "codec/feedback/fb_math.h"
#include "codec/hd.h"

/* Lanes of orthonormalization's dot products: one CUDA block's threads. */
#define TALLY_PSGD_LANES	256

/* Attempts of the polar method per draw (each accepted with p = pi/4). */
#define TALLY_PSGD_TRIES	64

/* Mixed into the seed: init_q's draws differ from the family's others. */
#define TALLY_PSGD_SEED_SALT	0x5053474451303031ull	/* "PSGDQ001" */

/* a + b in double, rounded to nearest even. */
static inline TALLY_HD double
tally_psgd_dadd(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __dadd_rn(a, b);
#else
	return a + b;
#endif
}

/* a - b in double, rounded to nearest even. */
static inline TALLY_HD double
tally_psgd_dsub(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __dsub_rn(a, b);
#else
	return a - b;
#endif
}

/* a * b in double, rounded to nearest even. */
static inline TALLY_HD double
tally_psgd_dmul(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __dmul_rn(a, b);
#else
	return a * b;
#endif
}

/* a / b in double, rounded to nearest even. */
static inline TALLY_HD double
tally_psgd_ddiv(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __ddiv_rn(a, b);
#else
	return a / b;
#endif
}

/* sqrt(a) in double, correctly rounded on both sides (IEEE requires it). */
static inline TALLY_HD double
tally_psgd_dsqrt(double a)
{
#ifdef __CUDA_ARCH__
	return __dsqrt_rn(a);
#else
	return sqrt(a);
#endif
}

/* The bits of d. */
static inline TALLY_HD uint64_t
tally_psgd_d2u(double d)
{
#ifdef __CUDA_ARCH__
	return (uint64_t)__double_as_longlong(d);
#else
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
#endif
}

/* The double whose bits are u. */
static inline TALLY_HD double
tally_psgd_u2d(uint64_t u)
{
#ifdef __CUDA_ARCH__
	return __longlong_as_double((long long)u);
#else
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
#endif
}

/* x rounded to float (nearest even), a NaN as the canonical one. */
static inline TALLY_HD float
tally_psgd_f32(double x)
{
#ifdef __CUDA_ARCH__
	return tally_fb_canon(__double2float_rn(x));
#else
	return tally_fb_canon((float)x);
#endif
}

/* acc + a b: the product is exact, the addition rounds once. */
static inline TALLY_HD double
tally_psgd_madd(double acc, float a, float b)
{
	return tally_psgd_dadd(acc, tally_psgd_dmul((double)a, (double)b));
}

/*
 * Elements of row i of the rows x cols view of n elements: cols, fewer
 * for the row holding element n - 1, 0 for rows past it.
 */
static inline TALLY_HD uint32_t
tally_psgd_row_len(size_t n, uint32_t cols, uint32_t i)
{
	uint64_t first = (uint64_t)i * cols;

	if (first >= n)
		return 0;
	return (uint64_t)n - first < cols ? (uint32_t)((uint64_t)n - first) :
		cols;
}

/* p[i][k] = sum over j ascending of m[i][j] q[j][k] (one element of P). */
static inline TALLY_HD float
tally_psgd_p1(const float *m, size_t n, uint32_t cols, const float *q,
	unsigned int rank, uint32_t i, unsigned int k)
{
	const float *row = m + (size_t)i * cols;
	uint32_t len = tally_psgd_row_len(n, cols, i);
	double acc = 0.0;

	for (uint32_t j = 0; j < len; j++)
		acc = tally_psgd_madd(acc, row[j], q[(size_t)j * rank + k]);
	return tally_psgd_f32(acc);
}

/* q[j][k] = sum over i ascending of m[i][j] p[i][k] (one element of Q). */
static inline TALLY_HD float
tally_psgd_q1(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *p, unsigned int rank, uint32_t j, unsigned int k)
{
	double acc = 0.0;

	for (uint32_t i = 0; i < rows; i++) {
		size_t at = (size_t)i * cols + j;

		if (at >= n)
			break;
		acc = tally_psgd_madd(acc, m[at], p[(size_t)i * rank + k]);
	}
	return tally_psgd_f32(acc);
}

/*
 * Element at (row of pi, row of qj) of scale * P Q^T: pi and qj are rows
 * of P and Q (rank elements each). The sum over k ascending, then one
 * multiplication by scale, in double.
 */
static inline TALLY_HD float
tally_psgd_dec1(const float *pi, const float *qj, unsigned int rank,
	double scale)
{
	double acc = 0.0;

	for (unsigned int k = 0; k < rank; k++)
		acc = tally_psgd_madd(acc, pi[k], qj[k]);
	return tally_psgd_f32(tally_psgd_dmul(acc, scale));
}

/*
 * Lane l of the dot product of columns a and b of p (rows x rank): the
 * sum over rows i = l, l + TALLY_PSGD_LANES, ... ascending, from +0.
 */
static inline TALLY_HD double
tally_psgd_lane(const float *p, uint32_t rows, unsigned int rank,
	unsigned int a, unsigned int b, uint32_t l)
{
	double acc = 0.0;

	for (uint64_t i = l; i < rows; i += TALLY_PSGD_LANES)
		acc = tally_psgd_madd(acc, p[(size_t)i * rank + a],
			p[(size_t)i * rank + b]);
	return acc;
}

/*
 * One level of the lanes' tree: s[l] += s[l + w] for l < w, with w =
 * TALLY_PSGD_LANES / 2, ..., 2, 1 in turn; the dot product ends in s[0].
 */
static inline TALLY_HD void
tally_psgd_tree1(double *s, unsigned int l, unsigned int w)
{
	s[l] = tally_psgd_dadd(s[l], s[l + w]);
}

/* x - c y: one projection step of Gram-Schmidt on one element. */
static inline TALLY_HD float
tally_psgd_proj1(float x, double c, float y)
{
	return tally_psgd_f32(tally_psgd_dsub((double)x,
		tally_psgd_dmul(c, (double)y)));
}

/* x / nrm: one element of a column normalized. */
static inline TALLY_HD float
tally_psgd_norm1(float x, double nrm)
{
	return tally_psgd_f32(tally_psgd_ddiv((double)x, nrm));
}

/*
 * 1 when a column whose squared norm was s0 before projection and s1
 * after is kept (normalized), 0 when it is zeroed: kept when
 * s1 > 2^-32 s0 and s1 is finite. NaN compares false; an infinite s0
 * never keeps; s0 == 0 never keeps.
 */
static inline TALLY_HD unsigned int
tally_psgd_keep(double s0, double s1)
{
	return s1 > tally_psgd_dmul(s0, 0x1p-32) && s1 <= 0x1.fffffffffffffp+1023;
}

/*
 * ln(s) for a positive normal double s, from + - * / only (no libm):
 * s = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(f) with
 * f = (m - 1) / (m + 1), |f| <= 0.1716, as the series
 * 2 (f + f^3/3 + ... + f^17/17) (relative error below 1e-15), plus
 * e ln 2. Only the init_q draws use it, for which accuracy to double
 * rounding is not needed, but bits that are the same on both sides are.
 */
static inline TALLY_HD double
tally_psgd_ln(double s)
{
	uint64_t b = tally_psgd_d2u(s);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	double m = tally_psgd_u2d((b & 0x000fffffffffffffull) |
		0x3ff0000000000000ull);
	double f, w, c;

	if (m > 1.4142135623730951) {
		m = tally_psgd_dmul(m, 0.5);
		e++;
	}
	f = tally_psgd_ddiv(tally_psgd_dsub(m, 1.0), tally_psgd_dadd(m, 1.0));
	w = tally_psgd_dmul(f, f);
	c = 0.058823529411764705882;	/* 1/17 */
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.066666666666666666667);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.076923076923076923077);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.090909090909090909091);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.11111111111111111111);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.14285714285714285714);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.2);
	c = tally_psgd_dadd(tally_psgd_dmul(c, w), 0.33333333333333333333);
	/* 2 f + 2 f w c */
	f = tally_psgd_dmul(2.0, f);
	f = tally_psgd_dadd(f, tally_psgd_dmul(tally_psgd_dmul(f, w), c));
	return tally_psgd_dadd(tally_psgd_dmul((double)e,
		0.69314718055994530942), f);
}

/* The stream key of init_q's draws for seed. */
static inline TALLY_HD uint64_t
tally_psgd_key(uint64_t seed)
{
	return tally_fb_key(seed ^ TALLY_PSGD_SEED_SALT);
}

/* A uniform in (-1, 1) from 32 bits: (2 x + 1) 2^-32 - 1, exact. */
static inline TALLY_HD double
tally_psgd_sym(uint32_t x)
{
	return tally_psgd_dsub(tally_psgd_dmul(tally_psgd_dadd((double)x, 0.5),
		0x1p-31), 1.0);
}

/*
 * Standard normal draw number c of the stream key: Marsaglia's polar
 * method. Attempt a (0 .. TALLY_PSGD_TRIES - 1) hashes counter
 * c * TALLY_PSGD_TRIES + a into u, v uniform in (-1, 1) (the high and low
 * 32 bits); the first with s = u^2 + v^2 < 1 gives u sqrt(-2 ln(s) / s),
 * in double, rounded once to float. s > 0 always (|u| >= 2^-32). When
 * all attempts miss (probability (1 - pi/4)^64, about 1e-43): 0.
 */
static inline TALLY_HD float
tally_psgd_normal(uint64_t key, uint64_t c)
{
	for (unsigned int a = 0; a < TALLY_PSGD_TRIES; a++) {
		uint64_t h = tally_fb_hash(key, c * TALLY_PSGD_TRIES + a);
		double u = tally_psgd_sym((uint32_t)(h >> 32));
		double v = tally_psgd_sym((uint32_t)h);
		double s = tally_psgd_dadd(tally_psgd_dmul(u, u),
			tally_psgd_dmul(v, v));

		if (s < 1.0) {
			double t = tally_psgd_ddiv(tally_psgd_dmul(-2.0,
				tally_psgd_ln(s)), s);

			return tally_psgd_f32(tally_psgd_dmul(u,
				tally_psgd_dsqrt(t)));
		}
	}
	return 0.0f;
}

#endif /* TALLY_GPU_CODEC_POWERSGD_PSGD_MATH_H */
