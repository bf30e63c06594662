/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of the moments SIDCo fits (tally_sparse_moments()), in
 * the fixed order of sparse_math.h that the CUDA kernels follow: element
 * values as floats, a block's 256 in the fixed tree, block sums in double
 * a segment of 1024 blocks at a time, the segments' sums one after the
 * other. The block loops vectorize; on x86-64 they are cloned for AVX-512
 * and AVX2 (the library is built with -ffp-contract=off, so that no clone
 * fuses a multiply and an add that the device keeps apart). SIDCo's
 * sample (estimate.c) is gathered into a tensor of its own first.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <tally/sparse.h>

#include "sparse_math.h"

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TALLY_MV
#endif

#define B	TALLY_SPARSE_BLOCK

/* A block's sums: y, y^2, ln y (as wanted) and the count. */
struct block_sums {
	float s, s2, sl;
	uint32_t c;
};

/*
 * The sums of block x[0..len) (len <= 256; the rest counts as 0) over t,
 * want being a constant where this is inlined, so that each variant
 * computes only what it needs.
 */
static inline __attribute__((always_inline)) struct block_sums
block_moments(const float *restrict x, size_t len, float t, unsigned int want)
{
	float y[B], y2[B], ly[B];
	struct block_sums r = { 0 };
	uint32_t c = 0;

	if (len == B) {
		for (int i = 0; i < B; i++)
			y[i] = tally_sparse_exceed(x[i], t);
	} else {
		for (size_t i = 0; i < B; i++)
			y[i] = i < len ? tally_sparse_exceed(x[i], t) : 0.0f;
	}
	for (int i = 0; i < B; i++)
		c += y[i] > 0.0f;
	if (want & TALLY_SPARSE_M_SQ) {
		for (int i = 0; i < B; i++)
			y2[i] = y[i] * y[i];
		r.s2 = tally_sparse_tree256(y2);
	}
	if (want & TALLY_SPARSE_M_LOG) {
		for (int i = 0; i < B; i++)
			ly[i] = tally_sparse_log0(y[i]);
		r.sl = tally_sparse_tree256(ly);
	}
	r.s = tally_sparse_tree256(y);
	r.c = c;
	return r;
}

/* Totals over the blocks of x (n elements), in the fixed order. */
static inline __attribute__((always_inline)) void
moments_loop(const float *restrict x, size_t n, float t, unsigned int want,
	struct tally_sparse_moments *m)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n);
	double s = 0, s2 = 0, sl = 0;
	uint64_t c = 0;

	for (size_t seg = 0; seg < nb; seg += TALLY_SPARSE_SEGMENT) {
		size_t end = seg + TALLY_SPARSE_SEGMENT < nb ?
			seg + TALLY_SPARSE_SEGMENT : nb;
		double gs = 0, gs2 = 0, gsl = 0;

		for (size_t b = seg; b < end; b++) {
			size_t off = b * B, len = n - off < B ? n - off : B;
			struct block_sums r = block_moments(x + off, len, t,
				want);

			gs += r.s;
			gs2 += r.s2;
			gsl += r.sl;
			c += r.c;
		}
		s += gs;
		s2 += gs2;
		sl += gsl;
	}
	m->count = c;
	m->sum = s;
	m->sum2 = s2;
	m->sumlog = sl;
}

TALLY_MV static void
moments_plain(const float *restrict x, size_t n, float t,
	struct tally_sparse_moments *m)
{
	moments_loop(x, n, t, 0, m);
}

TALLY_MV static void
moments_sq(const float *restrict x, size_t n, float t,
	struct tally_sparse_moments *m)
{
	moments_loop(x, n, t, TALLY_SPARSE_M_SQ, m);
}

TALLY_MV static void
moments_log(const float *restrict x, size_t n, float t,
	struct tally_sparse_moments *m)
{
	moments_loop(x, n, t, TALLY_SPARSE_M_LOG, m);
}

TALLY_MV static void
moments_all(const float *restrict x, size_t n, float t,
	struct tally_sparse_moments *m)
{
	moments_loop(x, n, t, TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG, m);
}

/* See <tally/sparse.h>. Borrows g, writes *m. */
int
tally_sparse_moments(const float *g, size_t n, float t, unsigned int want,
	struct tally_sparse_moments *m)
{
	if (m == NULL || (g == NULL && n > 0))
		return -EINVAL;
	if (!(t >= 0.0f && t <= 3.40282347e38f))
		return -EINVAL;
	if (want & ~(TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG))
		return -EINVAL;
	switch (want) {
	case 0:
		moments_plain(g, n, t, m);
		break;
	case TALLY_SPARSE_M_SQ:
		moments_sq(g, n, t, m);
		break;
	case TALLY_SPARSE_M_LOG:
		moments_log(g, n, t, m);
		break;
	default:
		moments_all(g, n, t, m);
		break;
	}
	return 0;
}
