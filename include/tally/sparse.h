/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block-sparse selection: which blocks of TALLY_SPARSE_BLOCK (256)
 * elements of a gradient a worker sends, from a magnitude threshold that
 * an estimator picks for a target density d (the fraction of elements
 * kept). docs/codecs/sparse.md has the math and measured results.
 *
 * Magnitudes. The magnitude of x is |x|, NaN counting as 0 (as in
 * tally_fixp_absmax()) and +-inf as +inf.
 *
 * Rule. An element is kept iff its magnitude >= threshold. Thresholds are
 * never below FLT_TRUE_MIN, so zeros and NaNs are never kept; infinities
 * always are. A block (the last one may be partial) is selected iff it
 * holds a kept element, i.e. iff its largest magnitude >= threshold.
 *
 * Estimators (enum tally_sparse_est; the values are those of
 * enum tally_codec_est in <tally/codec.h>):
 * - SIDCo (exponential, generalized Pareto, gamma): fit the distribution
 *   of the non-zero finite magnitudes, take its upper quantile, then refine
 *   on the exceedances over that first threshold, stage after stage
 *   (the multi-stage scheme of SIDCo; struct tally_sparse_params). On a
 *   large tensor the fits see, by default, a seeded stratified sample of
 *   runs of 16 elements, about TALLY_SPARSE_SIDCO_SAMPLE elements in
 *   all; sample = 1 makes them see every element.
 * - DGC: exact top-k on a random (stratified) sample of the elements.
 * - exact top-k: the k-th largest magnitude, k = d * n rounded (at least
 *   1), by a radix select over the floats' bits: O(n), no copy of the
 *   input, exact; ties at the k-th value are all kept.
 * The fits see only the finite non-zero elements (a zero, a NaN or an
 * infinity is no sample of the gradient's distribution): with c such
 * elements, they aim at d * n / c of them.
 *
 * Everything here is a plain function of its arguments, safe to call from
 * several threads at once; the CUDA kernels (<tally/sparse_cuda.h>) run
 * the same element math and give the same bits.
 */
#ifndef TALLY_SPARSE_H
#define TALLY_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements a block. */
#define TALLY_SPARSE_BLOCK	256
/* Blocks of n elements, and 32-bit words of their bitmap. */
#define TALLY_SPARSE_NBLOCKS(n)	\
	(((n) + TALLY_SPARSE_BLOCK - 1) / TALLY_SPARSE_BLOCK)
#define TALLY_SPARSE_BITMAP_WORDS(n)	((TALLY_SPARSE_NBLOCKS(n) + 31) / 32)
/* Largest n: block indices are 32-bit (as next_block on the wire). */
#define TALLY_SPARSE_N_MAX	((size_t)UINT32_MAX * TALLY_SPARSE_BLOCK)
/* Most SIDCo stages. */
#define TALLY_SPARSE_STAGES_MAX	16
/* DGC: fewest elements sampled (or all of them, when n is smaller). */
#define TALLY_SPARSE_DGC_MIN_SAMPLE	16384
/*
 * SIDCo's sample is made of runs of TALLY_SPARSE_SIDCO_RUN consecutive
 * elements (64 bytes), one run from each stratum of stride runs, at a
 * position drawn from the seed. sample left at 0: stride = runs /
 * (TALLY_SPARSE_SIDCO_SAMPLE / TALLY_SPARSE_SIDCO_RUN), rounded down, so
 * the fits see between TALLY_SPARSE_SIDCO_SAMPLE and twice as many
 * elements, or every element of a tensor of fewer runs than twice that
 * (n <= 2^21 - 16). sample given: stride = round(1 / sample), but at
 * least TALLY_SPARSE_SIDCO_MIN_SAMPLE elements in all (or every element).
 */
#define TALLY_SPARSE_SIDCO_RUN		16
#define TALLY_SPARSE_SIDCO_SAMPLE	(1u << 20)
#define TALLY_SPARSE_SIDCO_MIN_SAMPLE	16384

enum tally_sparse_est {
	TALLY_SPARSE_SIDCO_EXP = 0,	/* SIDCo-E: exponential */
	TALLY_SPARSE_SIDCO_GPD,		/* SIDCo-GP: generalized Pareto */
	TALLY_SPARSE_SIDCO_GAMMA,	/* SIDCo-G: gamma, then GP stages */
	TALLY_SPARSE_DGC,		/* DGC: top-k of a sample */
	TALLY_SPARSE_TOPK,		/* exact top-k (radix select) */
	TALLY_SPARSE_EST_MAX_,
};

/*
 * Knobs of the estimators; a field left 0 takes its default, and a NULL
 * struct means every default.
 */
struct tally_sparse_params {
	/*
	 * SIDCo stages M (1..TALLY_SPARSE_STAGES_MAX); 0 (default): as many
	 * as the automatic rule gives (below).
	 */
	unsigned int stages;
	/* SIDCo: density of the first stage (0, 1); default 0.25. */
	double first_density;
	/*
	 * SIDCo, automatic stages: density of each later stage but the last,
	 * (0, 1); default 0.25. With r = d' / first_density (d' the target
	 * among non-zeros), the stages after the first are
	 * L = ceil(log r / log stage_density), each at stage_density but the
	 * last, which takes what is left. With stages = M >= 2 given, each of
	 * the M - 1 later stages is at r^(1 / (M - 1)).
	 */
	double stage_density;
	/*
	 * Fraction of the elements an estimator looks at, [1e-6, 1]; 1:
	 * every element.
	 * DGC: one element of every round(1 / sample) (at least
	 * TALLY_SPARSE_DGC_MIN_SAMPLE in all), at a position drawn from
	 * seed; default (0) 0.01.
	 * SIDCo: runs of TALLY_SPARSE_SIDCO_RUN elements, one of every
	 * round(1 / sample) runs (at least TALLY_SPARSE_SIDCO_MIN_SAMPLE
	 * elements in all), at a position drawn from seed; every stage fits
	 * that sample. Default (0): about TALLY_SPARSE_SIDCO_SAMPLE elements
	 * (see there), every element of a tensor of up to 2^21 - 16.
	 */
	double sample;
	/* DGC, SIDCo: the sample's seed (the same seed, the same sample). */
	uint64_t seed;
};

/*
 * Picks the threshold that keeps about density * n of the n elements of
 * g with estimator est, and writes it to *threshold (>= FLT_TRUE_MIN; at
 * FLT_TRUE_MIN every non-zero element is kept: so for n == 0, for all
 * zeros, or when the budget covers every non-zero element). density is in
 * (0, 1]; 1 keeps every non-zero element. Borrows g and p (NULL: the
 * defaults). Returns 0, -EINVAL (g or threshold NULL with n > 0, density
 * outside (0, 1] or NaN, est unknown, a field of p out of range, or n above
 * TALLY_SPARSE_N_MAX) or -ENOMEM (the exact and DGC estimators allocate a
 * little scratch, SIDCo its sample: 4 bytes an element of it); *threshold
 * is untouched on error.
 */
int tally_sparse_threshold(const float *g, size_t n, double density,
	enum tally_sparse_est est, const struct tally_sparse_params *p,
	float *threshold);

/* What a selection kept. */
struct tally_sparse_sel {
	size_t elems;		/* elements >= threshold */
	size_t blocks;		/* blocks selected */
	double elem_density;	/* elems / n (0 when n is 0) */
	double block_density;	/* blocks / TALLY_SPARSE_NBLOCKS(n) */
};

/*
 * Selects the blocks of g (n elements) that hold an element whose
 * magnitude >= threshold. Writes, each when not NULL: bitmap (all
 * TALLY_SPARSE_BITMAP_WORDS(n) words; bit b % 32 of word b / 32 set iff
 * block b is selected, bits past the last block 0), blocks (the selected
 * block indices, ascending; room for TALLY_SPARSE_NBLOCKS(n)) and *sel.
 * Borrows g; the outputs are the caller's. Returns 0, or -EINVAL (g NULL
 * with n > 0, threshold NaN or not above 0, n above TALLY_SPARSE_N_MAX).
 */
int tally_sparse_select(const float *g, size_t n, float threshold,
	uint32_t *bitmap, uint32_t *blocks, struct tally_sparse_sel *sel);

/*
 * bmax[b] = the largest magnitude of block b of g (n elements; NaN as 0,
 * +-inf as +inf), for the TALLY_SPARSE_NBLOCKS(n) blocks. Borrows g,
 * writes the caller's bmax.
 */
void tally_sparse_block_max(const float *g, size_t n, float *bmax);

/*
 * Exact block-level top-k: writes to *threshold the kb-th largest block
 * maximum, kb = block_density * TALLY_SPARSE_NBLOCKS(n) rounded (at least
 * 1), so that tally_sparse_select() with it selects those kb blocks (and
 * any tied with the last). Blocks scored by their largest magnitude, this
 * is the exact baseline of block selection. Returns as
 * tally_sparse_threshold() (-ENOMEM: it allocates the block maxima).
 */
int tally_sparse_block_topk(const float *g, size_t n, double block_density,
	float *threshold);

/* tally_sparse_moments() computes these as well as the count and sum. */
#define TALLY_SPARSE_M_SQ	0x1u	/* sum2 */
#define TALLY_SPARSE_M_LOG	0x2u	/* sumlog */

/*
 * The moments SIDCo fits: over the finite elements x of g whose |x| > t,
 * the exceedances y = |x| - t (> 0).
 */
struct tally_sparse_moments {
	uint64_t count;		/* how many */
	double sum;		/* sum of y */
	double sum2;		/* sum of y^2, with TALLY_SPARSE_M_SQ */
	double sumlog;		/* sum of ln y, with TALLY_SPARSE_M_LOG */
};

/*
 * The moments of the exceedances of g (n elements) over t (t = 0: the
 * non-zero finite elements), in a fixed order that the CUDA kernels
 * follow: y, y^2 and ln y as floats, summed by block of 256 in a fixed
 * pairwise tree, the block sums then added in double, 1024 blocks a
 * segment, segment after segment. Fields not wanted are 0. Borrows g.
 * Returns 0, or -EINVAL (g or m NULL with n > 0, m NULL, t negative or not
 * finite, want with unknown bits).
 */
int tally_sparse_moments(const float *g, size_t n, float t, unsigned int want,
	struct tally_sparse_moments *m);

/* "sidco-exp", "sidco-gpd", "sidco-gamma", "dgc", "topk"; "?" otherwise. */
const char *tally_sparse_est_name(enum tally_sparse_est est);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_SPARSE_H */
