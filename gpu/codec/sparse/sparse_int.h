/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the sparse codec's CPU files and its CUDA driver share: the
 * estimators' host math, written once and driven by either side's
 * moments or histograms, so that a GPU and a CPU pick the same threshold
 * from the same data.
 */
#ifndef TALLY_GPU_CODEC_SPARSE_INT_H
#define TALLY_GPU_CODEC_SPARSE_INT_H

#include <stddef.h>
#include <stdint.h>

#include <tally/sparse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Radix select: three digits of the 31-bit key, 11, 11 and 9 bits. */
#define SPARSE_RADIX_BINS	2048

/* The parameters with defaults filled in and ranges checked. */
struct sparse_knobs {
	unsigned int stages;
	double first_density;
	double stage_density;
	double sample;		/* DGC's, default filled in */
	double sidco_sample;	/* SIDCo's: 0 (automatic) or [1e-6, 1] */
	uint64_t seed;
};

/* Fills k from p (NULL: defaults). Returns 0 or -EINVAL (out of range). */
int sparse_knobs_of(const struct tally_sparse_params *p,
	struct sparse_knobs *k);

/* Checks the arguments every estimator shares; 0 or -EINVAL. */
int sparse_check_args(const void *g, size_t n, double density,
	enum tally_sparse_est est, const float *threshold);

/*
 * What SIDCo's fits see: a stratified sample of runs of
 * TALLY_SPARSE_SIDCO_RUN elements of a tensor of n elements, run r of it
 * (0 <= r < m) being run tally_sparse_sample_pos(seed, r, stride,
 * TALLY_SPARSE_SIDCO_RUNS(n)) of the tensor (sparse_math.h). The fits see
 * the tensor made of these runs one after the other (the CPU gathers it,
 * the GPU reads it in place), and its moments in the fixed order (block
 * trees, segments, their total). stride 1 is every run in order: the
 * tensor itself.
 */
struct sparse_sample {
	size_t n;		/* elements of the tensor */
	size_t stride;		/* runs a stratum */
	size_t m;		/* runs sampled */
	size_t elems;		/* elements in them */
	uint64_t seed;
};

/*
 * SIDCo's sample of n elements for sample (0: automatic) and seed, by
 * the rule of <tally/sparse.h>.
 */
void sparse_sidco_sample(size_t n, double sample, uint64_t seed,
	struct sparse_sample *ss);

/*
 * out[0..ss->elems) = the sample ss of x (a tensor of ss->n elements):
 * its runs one after the other, element v being
 * x[tally_sparse_sample_elem(ss->seed, v, ss->stride, ss->m, ss->n)].
 * Borrows x and ss, writes the caller's out.
 */
void sparse_sample_gather(const float *x, const struct sparse_sample *ss,
	float *out);

/* Moments of the exceedances over t, from either side; 0 or -errno. */
typedef int (*sparse_moments_fn)(void *arg, float t, unsigned int want,
	struct tally_sparse_moments *m);

/*
 * SIDCo's stages for est (one of the three SIDCo ones) over n elements
 * (those the fits see: the sample's) at density, with moments from
 * fn(arg, ...). Writes the threshold. Returns 0 or what fn returned.
 */
int sparse_sidco(sparse_moments_fn fn, void *arg, size_t n, double density,
	enum tally_sparse_est est, const struct sparse_knobs *k,
	float *threshold);

/*
 * Histogram of one radix digit, from either side: h[0..nbins) (zeroed by
 * the callee) counts the elements whose key >> pshift == prefix (every
 * element when pshift is 32), by (key >> shift) & (nbins - 1).
 */
typedef int (*sparse_hist_fn)(void *arg, uint32_t prefix, unsigned int pshift,
	unsigned int shift, unsigned int nbins, uint64_t *h);

/*
 * The k-th largest key (1 <= k <= n) of n elements, by three histogram
 * passes of fn. Returns 0 or what fn returned.
 */
int sparse_kth_key_hist(sparse_hist_fn fn, void *arg, uint64_t k,
	uint32_t *key);

/*
 * The k-th largest key (1 <= k <= n) of x[0..n): one histogram pass over
 * x, then the candidates of the bin copied out and finished there.
 * Returns 0 or -ENOMEM.
 */
int sparse_kth_key(const float *x, size_t n, uint64_t k, uint32_t *key);

/* How many elements exact top-k keeps at density: round(d * n), >= 1. */
uint64_t sparse_topk_k(size_t n, double density);

/* The threshold of a k-th largest key: the key as a float, >= 1 ulp. */
float sparse_key_threshold(uint32_t key);

/* DGC's stride and sample size for n elements at fraction sample. */
void sparse_dgc_plan(size_t n, double sample, size_t *stride, size_t *m);

/*
 * The upper quantile of the gamma distribution of shape a > 0 and scale
 * 1: x with Q(a, x) = q (the regularized upper incomplete gamma), for
 * q in (0, 1). Halley's method from a Wilson-Hilferty or small-shape
 * start, relative accuracy about 1e-12.
 */
double sparse_gamma_q_inv(double a, double q);

/* Q(a, x), the regularized upper incomplete gamma, a > 0, x >= 0. */
double sparse_gamma_q(double a, double x);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_GPU_CODEC_SPARSE_INT_H */
