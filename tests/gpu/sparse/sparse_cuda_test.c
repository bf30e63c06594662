/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of block-sparse selection against the CPU reference,
 * bit for bit: the moments (the same fixed order of float block trees and
 * double segments), block maxima, bitmaps, counts and index lists, and
 * every estimator's threshold (the same host math on the same moments,
 * histograms and samples, SIDCo's sample included), on data with NaN,
 * infinities and zero blocks, of sizes around a block, a bitmap word, a
 * segment and a grid. Without a CUDA device the whole program is skipped,
 * visibly (TAP "1..0 # SKIP").
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include <tally/fixp_cuda.h>
#include <tally/sparse.h>
#include <tally/sparse_cuda.h>

#include "synth.h"

static const size_t sizes[] = {
	1, 255, 256, 257, 32 * 256 + 1, 1024 * 256 + 5, 3u << 20,
	(5u << 20) + 77,
};
#define N_MAX	((5u << 20) + 77)

struct bufs {
	float *x;
	float *d_x, *d_bmax;
	uint32_t *d_bitmap, *d_blocks;
	unsigned long long *d_counts;
	void *d_ws;
	size_t ws_size;
	cudaStream_t stream;
};

static int
setup(void **state)
{
	struct bufs *b = calloc(1, sizeof(*b));
	size_t nb = TALLY_SPARSE_NBLOCKS(N_MAX);

	if (b == NULL)
		return -1;
	b->x = malloc(N_MAX * sizeof(float));
	if (b->x == NULL)
		return -1;
	/* DGC with a full sample needs the most. */
	b->ws_size = tally_sparse_cuda_ws_size(N_MAX, TALLY_SPARSE_DGC,
		&(struct tally_sparse_params){ .sample = 1.0 });
	if (cudaMalloc((void **)&b->d_x, N_MAX * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_bmax, nb * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_bitmap, (nb / 32 + 1) * 4) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_blocks, nb * 4) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_counts, 16) != cudaSuccess ||
	    cudaMalloc(&b->d_ws, b->ws_size) != cudaSuccess ||
	    cudaStreamCreate(&b->stream) != cudaSuccess)
		return -1;
	*state = b;
	return 0;
}

static int
teardown(void **state)
{
	struct bufs *b = *state;

	if (b == NULL)
		return 0;
	cudaStreamDestroy(b->stream);
	cudaFree(b->d_x);
	cudaFree(b->d_bmax);
	cudaFree(b->d_bitmap);
	cudaFree(b->d_blocks);
	cudaFree(b->d_counts);
	cudaFree(b->d_ws);
	free(b->x);
	free(b);
	return 0;
}

/* Heavy-tailed data with NaN, infinities and zero blocks; uploaded. */
static void
fill(struct bufs *b, size_t n, uint64_t seed)
{
	uint64_t s = seed;

	synth_fill(b->x, n, SYNTH_STUDENT3, 0, 1e-3, seed);
	for (size_t i = 0; i < n; i++) {
		uint64_t r = synth_next(&s) % 8192;

		b->x[i] = r == 0 ? NAN : r == 1 ? INFINITY : b->x[i];
	}
	for (size_t i = 5 * 256; i < n && i < 9 * 256; i++)
		b->x[i] = 0.0f;
	assert_int_equal(cudaMemcpy(b->d_x, b->x, n * sizeof(float),
		cudaMemcpyHostToDevice), cudaSuccess);
}

static void
moments(void **state)
{
	struct bufs *b = *state;
	static const float ts[] = { 0.0f, 1e-3f, 5e-3f, 1.0f };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		fill(b, n, 70 + i);
		for (size_t j = 0; j < sizeof(ts) / sizeof(ts[0]); j++) {
			for (unsigned int want = 0; want < 4; want++) {
				struct tally_sparse_moments c, g;

				assert_int_equal(tally_sparse_moments(b->x, n,
					ts[j], want, &c), 0);
				assert_int_equal(tally_sparse_moments_cuda(
					b->d_x, n, ts[j], want, b->d_ws,
					b->ws_size, &g, b->stream), 0);
				assert_memory_equal(&g, &c, sizeof(c));
			}
		}
	}
}

static void
select_and_max(void **state)
{
	struct bufs *b = *state;
	size_t nbm = TALLY_SPARSE_NBLOCKS(N_MAX);
	float *bmax = malloc(nbm * sizeof(float)), *gmax = malloc(nbm * 4);
	uint32_t *bm = malloc((nbm / 32 + 1) * 4), *gbm = malloc((nbm / 32 + 1) * 4);
	uint32_t *bl = malloc(nbm * 4), *gbl = malloc(nbm * 4);

	assert_true(bmax && gmax && bm && gbm && bl && gbl);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], nb = TALLY_SPARSE_NBLOCKS(n);
		size_t nw = TALLY_SPARSE_BITMAP_WORDS(n);
		const float ts[] = { FLT_TRUE_MIN, 1e-3f, 1e-2f, FLT_MAX };

		fill(b, n, 90 + i);
		tally_sparse_block_max(b->x, n, bmax);
		assert_int_equal(tally_sparse_block_max_cuda(b->d_x, n,
			b->d_bmax, b->stream), 0);
		assert_int_equal(cudaMemcpyAsync(gmax, b->d_bmax, nb * 4,
			cudaMemcpyDeviceToHost, b->stream), cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(b->stream), cudaSuccess);
		assert_memory_equal(gmax, bmax, nb * 4);
		for (size_t j = 0; j < sizeof(ts) / sizeof(ts[0]); j++) {
			struct tally_sparse_sel sel;
			unsigned long long cnt[2];

			assert_int_equal(tally_sparse_select(b->x, n, ts[j], bm,
				bl, &sel), 0);
			assert_int_equal(tally_sparse_select_cuda(b->d_x, n,
				ts[j], b->d_bitmap, b->d_counts, b->stream), 0);
			assert_int_equal(tally_sparse_bitmap_list_cuda(
				b->d_bitmap, nb, b->d_blocks, b->stream), 0);
			assert_int_equal(cudaMemcpyAsync(gbm, b->d_bitmap,
				nw * 4, cudaMemcpyDeviceToHost, b->stream),
				cudaSuccess);
			assert_int_equal(cudaMemcpyAsync(gbl, b->d_blocks,
				sel.blocks * 4 + 4, cudaMemcpyDeviceToHost,
				b->stream), cudaSuccess);
			assert_int_equal(cudaMemcpyAsync(cnt, b->d_counts, 16,
				cudaMemcpyDeviceToHost, b->stream),
				cudaSuccess);
			assert_int_equal(cudaStreamSynchronize(b->stream),
				cudaSuccess);
			assert_memory_equal(gbm, bm, nw * 4);
			assert_memory_equal(gbl, bl, sel.blocks * 4);
			assert_int_equal(cnt[0], sel.elems);
			assert_int_equal(cnt[1], sel.blocks);
			/* Without counts too. */
			assert_int_equal(tally_sparse_select_cuda(b->d_x, n,
				ts[j], b->d_bitmap, NULL, b->stream), 0);
		}
	}
	free(bmax);
	free(gmax);
	free(bm);
	free(gbm);
	free(bl);
	free(gbl);
}

/*
 * Every estimator picks the CPU's threshold, to the bit; SIDCo on its
 * default sample (runs of 16 from 3M elements up; the CPU gathers them,
 * the GPU reads them in place), on every element, and on a given one.
 */
static void
thresholds(void **state)
{
	struct bufs *b = *state;
	static const double ds[] = { 0.1, 0.01, 0.001 };
	static const double samples[] = { 0.0, 1.0, 0.05 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		fill(b, n, 110 + i);
		for (size_t k = 0; k < sizeof(samples) / sizeof(samples[0]);
		     k++) {
			struct tally_sparse_params p = { .seed = 3,
				.sample = samples[k] };

			for (int e = 0; e < TALLY_SPARSE_EST_MAX_; e++) {
				for (size_t j = 0; j < sizeof(ds) /
				     sizeof(ds[0]); j++) {
					float c = 0, g = -1;

					assert_int_equal(tally_sparse_threshold(
						b->x, n, ds[j], e, &p, &c), 0);
					assert_int_equal(
						tally_sparse_threshold_cuda(
						b->d_x, n, ds[j], e, &p,
						b->d_ws, b->ws_size, &g,
						b->stream), 0);
					assert_memory_equal(&g, &c, sizeof(c));
				}
			}
		}
	}
}

static void
arguments(void **state)
{
	struct bufs *b = *state;
	struct tally_sparse_moments m;
	float t;

	assert_int_equal(tally_sparse_moments_cuda(b->d_x, 1000, 0.0f, 0,
		b->d_ws, 8, &m, b->stream), -EINVAL);
	assert_int_equal(tally_sparse_moments_cuda(b->d_x, 1000, -1.0f, 0,
		b->d_ws, b->ws_size, &m, b->stream), -EINVAL);
	assert_int_equal(tally_sparse_threshold_cuda(b->d_x, 1000, 0.0,
		TALLY_SPARSE_TOPK, NULL, b->d_ws, b->ws_size, &t, b->stream),
		-EINVAL);
	assert_int_equal(tally_sparse_threshold_cuda(b->d_x, 1000, 0.1,
		TALLY_SPARSE_TOPK, NULL, NULL, 0, &t, b->stream), -EINVAL);
	assert_int_equal(tally_sparse_select_cuda(b->d_x, 1000, 0.0f,
		b->d_bitmap, NULL, b->stream), -EINVAL);
	assert_int_equal(tally_sparse_select_cuda(b->d_x, 1000, 1.0f, NULL,
		NULL, b->stream), -EINVAL);
	assert_int_equal(tally_sparse_block_max_cuda(NULL, 1000, b->d_bmax,
		b->stream), -EINVAL);
	assert_int_equal(tally_sparse_bitmap_list_cuda(NULL, 10, b->d_blocks,
		b->stream), -EINVAL);
	assert_int_equal(tally_sparse_threshold_cuda(NULL, 0, 0.1,
		TALLY_SPARSE_SIDCO_EXP, NULL, b->d_ws, b->ws_size, &t,
		b->stream), 0);
	assert_true(t == FLT_TRUE_MIN);
	assert_true(tally_sparse_cuda_ws_size(1000, TALLY_SPARSE_DGC,
		&(struct tally_sparse_params){ .stages = 99 }) == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(moments),
		cmocka_unit_test(select_and_max),
		cmocka_unit_test(thresholds),
		cmocka_unit_test(arguments),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
