/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exact top-k by radix select over the keys (magnitudes' bits, see
 * sparse_math.h): the k-th largest key is found digit by digit, 11, 11
 * and 9 bits, each digit's histogram telling in which bin the k-th lies.
 * The CPU counts the first digit over the whole tensor, then copies the
 * few candidates of that bin out and finishes on them: one pass over the
 * data, no copy of it, O(n). The CUDA driver runs the three digits as
 * histogram kernels over the tensor through sparse_kth_key_hist(). Both
 * give the same key: the k-th largest is a fact of the data.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tally/sparse.h>

#include "sparse_int.h"
#include "sparse_math.h"

#define D1_SHIFT	20	/* digit 1: key bits 30..20 */
#define D2_SHIFT	9	/* digit 2: bits 19..9 */
#define D2_BINS		2048
#define D3_BINS		512	/* digit 3: bits 8..0 */
/* Elements counted into 32-bit histograms before they fold into 64. */
#define HIST_CHUNK	((size_t)1 << 30)

uint64_t
sparse_topk_k(size_t n, double density)
{
	double k = floor(density * (double)n + 0.5);

	if (k < 1.0)
		return 1;
	return k > (double)n ? n : (uint64_t)k;
}

float
sparse_key_threshold(uint32_t key)
{
	return tally_hd_u2f(key == 0 ? 1 : key);
}

void
sparse_dgc_plan(size_t n, double sample, size_t *stride, size_t *m)
{
	size_t s = (size_t)floor(1.0 / sample + 0.5);

	if (s < 1)
		s = 1;
	/* At least TALLY_SPARSE_DGC_MIN_SAMPLE strata (or n of 1). */
	if (n / s < TALLY_SPARSE_DGC_MIN_SAMPLE)
		s = n / TALLY_SPARSE_DGC_MIN_SAMPLE;
	if (s < 1)
		s = 1;
	*stride = s;
	*m = (n + s - 1) / s;
}

/*
 * The bin of h[0..nbins) that holds the k-th largest (1-based), from the
 * top; *k becomes the rank within that bin.
 */
static unsigned int
find_bin(const uint64_t *h, unsigned int nbins, uint64_t *k)
{
	for (unsigned int b = nbins; b-- > 0;) {
		if (h[b] >= *k)
			return b;
		*k -= h[b];
	}
	return 0;
}

int
sparse_kth_key_hist(sparse_hist_fn fn, void *arg, uint64_t k, uint32_t *key)
{
	uint64_t h[SPARSE_RADIX_BINS];
	unsigned int b1, b2, b3;
	int ret;

	ret = fn(arg, 0, 32, D1_SHIFT, SPARSE_RADIX_BINS, h);
	if (ret < 0)
		return ret;
	b1 = find_bin(h, SPARSE_RADIX_BINS, &k);
	ret = fn(arg, b1, D1_SHIFT, D2_SHIFT, D2_BINS, h);
	if (ret < 0)
		return ret;
	b2 = find_bin(h, D2_BINS, &k);
	ret = fn(arg, (b1 << 11) | b2, D2_SHIFT, 0, D3_BINS, h);
	if (ret < 0)
		return ret;
	b3 = find_bin(h, D3_BINS, &k);
	*key = (b1 << D1_SHIFT) | (b2 << D2_SHIFT) | b3;
	return 0;
}

/*
 * h[0..2048) += histogram of the first digit of x[0..n), n <= HIST_CHUNK;
 * four histograms so that runs of equal digits do not wait on each other.
 */
static void
hist_digit1(const float *restrict x, size_t n, uint64_t *h)
{
	uint32_t part[4][SPARSE_RADIX_BINS];
	size_t i = 0;

	memset(part, 0, sizeof(part));
	for (; i + 4 <= n; i += 4) {
		part[0][tally_sparse_key(x[i]) >> D1_SHIFT]++;
		part[1][tally_sparse_key(x[i + 1]) >> D1_SHIFT]++;
		part[2][tally_sparse_key(x[i + 2]) >> D1_SHIFT]++;
		part[3][tally_sparse_key(x[i + 3]) >> D1_SHIFT]++;
	}
	for (; i < n; i++)
		part[0][tally_sparse_key(x[i]) >> D1_SHIFT]++;
	for (int b = 0; b < SPARSE_RADIX_BINS; b++)
		h[b] += (uint64_t)part[0][b] + part[1][b] + part[2][b] +
			part[3][b];
}

/* The k-th largest (1-based) of keys c[0..n): digits 2 and 3, in place. */
static uint32_t
finish_keys(uint32_t *c, size_t n, uint64_t k, uint32_t b1)
{
	uint64_t h[D2_BINS];
	unsigned int b2, b3;
	size_t m = 0;

	memset(h, 0, sizeof(h));
	for (size_t i = 0; i < n; i++)
		h[(c[i] >> D2_SHIFT) & (D2_BINS - 1)]++;
	b2 = find_bin(h, D2_BINS, &k);
	for (size_t i = 0; i < n; i++)
		if (((c[i] >> D2_SHIFT) & (D2_BINS - 1)) == b2)
			c[m++] = c[i];
	memset(h, 0, sizeof(h));
	for (size_t i = 0; i < m; i++)
		h[c[i] & (D3_BINS - 1)]++;
	b3 = find_bin(h, D3_BINS, &k);
	return (b1 << D1_SHIFT) | (b2 << D2_SHIFT) | b3;
}

int
sparse_kth_key(const float *x, size_t n, uint64_t k, uint32_t *key)
{
	uint64_t h[SPARSE_RADIX_BINS] = { 0 };
	uint32_t *cand;
	size_t m = 0;
	unsigned int b1;

	for (size_t off = 0; off < n; off += HIST_CHUNK)
		hist_digit1(x + off, n - off < HIST_CHUNK ? n - off :
			HIST_CHUNK, h);
	b1 = find_bin(h, SPARSE_RADIX_BINS, &k);
	cand = malloc((h[b1] > 0 ? h[b1] : 1) * sizeof(*cand));
	if (cand == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t kk = tally_sparse_key(x[i]);

		if ((kk >> D1_SHIFT) == b1)
			cand[m++] = kk;
	}
	*key = finish_keys(cand, m, k, b1);
	free(cand);
	return 0;
}
