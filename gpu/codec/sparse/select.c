/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block selection (<tally/sparse.h>): a block of 256 travels iff its
 * largest key reaches the threshold's key. One pass: per block, the
 * largest key and the count of kept elements (integer operations over
 * the keys of sparse_math.h, as the CUDA kernels do), then the bitmap
 * word and the index list.
 */
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tally/sparse.h>

#include "sparse_int.h"
#include "sparse_math.h"

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TALLY_MV
#endif

#define B	TALLY_SPARSE_BLOCK

/* Largest key of x[0..len), and in *kept how many keys are >= tk. */
static inline __attribute__((always_inline)) uint32_t
block_scan(const float *restrict x, size_t len, uint32_t tk, uint32_t *kept)
{
	uint32_t mx = 0, c = 0;

	for (size_t i = 0; i < len; i++) {
		uint32_t k = tally_sparse_key(x[i]);

		mx = k > mx ? k : mx;
		c += k >= tk;
	}
	*kept = c;
	return mx;
}

/*
 * Per block b of x (n elements): sel[b] = 1 iff selected; returns the
 * kept elements. Whole blocks through the fixed-length loop.
 */
TALLY_MV static size_t
select_loop(const float *restrict x, size_t n, uint32_t tk,
	uint8_t *restrict sel)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n), elems = 0;

	for (size_t b = 0; b < nb; b++) {
		size_t off = b * B, len = n - off < B ? n - off : B;
		uint32_t kept, mx;

		mx = len == B ? block_scan(x + off, B, tk, &kept) :
			block_scan(x + off, len, tk, &kept);
		sel[b] = mx >= tk;
		elems += kept;
	}
	return elems;
}

/* Block maxima keys of x (n elements) into bmax as floats. */
TALLY_MV static void
block_max_loop(const float *restrict x, size_t n, float *restrict bmax)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n);

	for (size_t b = 0; b < nb; b++) {
		size_t off = b * B, len = n - off < B ? n - off : B;
		uint32_t kept, mx;

		mx = len == B ? block_scan(x + off, B, 0, &kept) :
			block_scan(x + off, len, 0, &kept);
		bmax[b] = tally_hd_u2f(mx);
	}
}

void
tally_sparse_block_max(const float *g, size_t n, float *bmax)
{
	block_max_loop(g, n, bmax);
}

/* Selection chunk: block flags are built this many blocks at a time. */
#define SEL_CHUNK	4096

int
tally_sparse_select(const float *g, size_t n, float threshold,
	uint32_t *bitmap, uint32_t *blocks, struct tally_sparse_sel *sel)
{
	uint8_t flags[SEL_CHUNK];
	size_t nb = TALLY_SPARSE_NBLOCKS(n), elems = 0, nsel = 0;
	uint32_t tk;

	if ((g == NULL && n > 0) || !(threshold > 0.0f) ||
	    n > TALLY_SPARSE_N_MAX)
		return -EINVAL;
	tk = tally_sparse_thr_key(threshold);
	if (bitmap != NULL)
		memset(bitmap, 0, TALLY_SPARSE_BITMAP_WORDS(n) *
			sizeof(*bitmap));
	for (size_t b0 = 0; b0 < nb; b0 += SEL_CHUNK) {
		size_t cnb = nb - b0 < SEL_CHUNK ? nb - b0 : SEL_CHUNK;
		size_t off = b0 * B, cn = n - off < cnb * B ? n - off : cnb * B;

		elems += select_loop(g + off, cn, tk, flags);
		for (size_t i = 0; i < cnb; i++) {
			if (!flags[i])
				continue;
			if (bitmap != NULL)
				bitmap[(b0 + i) / 32] |= 1u << ((b0 + i) % 32);
			if (blocks != NULL)
				blocks[nsel] = (uint32_t)(b0 + i);
			nsel++;
		}
	}
	if (sel != NULL) {
		sel->elems = elems;
		sel->blocks = nsel;
		sel->elem_density = n > 0 ? (double)elems / (double)n : 0.0;
		sel->block_density = nb > 0 ? (double)nsel / (double)nb : 0.0;
	}
	return 0;
}

int
tally_sparse_block_topk(const float *g, size_t n, double block_density,
	float *threshold)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n);
	uint32_t key;
	float *bmax;
	int ret;

	ret = sparse_check_args(g, n, block_density, TALLY_SPARSE_TOPK,
		threshold);
	if (ret < 0)
		return ret;
	if (n == 0 || block_density == 1.0) {
		*threshold = FLT_TRUE_MIN;
		return 0;
	}
	bmax = malloc(nb * sizeof(*bmax));
	if (bmax == NULL)
		return -ENOMEM;
	tally_sparse_block_max(g, n, bmax);
	ret = sparse_kth_key(bmax, nb, sparse_topk_k(nb, block_density), &key);
	free(bmax);
	if (ret < 0)
		return ret;
	*threshold = sparse_key_threshold(key);
	return 0;
}
