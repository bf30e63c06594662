/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of shared-seed random-k: grid-stride loops over the index
 * math of randk_math.h (the code randk.c runs), one selected index a
 * thread, and their entry points of <tally/feedback_cuda.h>. The key is
 * derived once on the host and passed by value.
 */
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>

#include "fb_cuda.h"
#include "randk_math.h"

static __global__ void
randk_indices_kernel(uint64_t *__restrict__ idx, uint64_t first, size_t cnt,
	struct tally_randk_key key)
{
	FB_FOR(j, cnt)
		idx[j] = tally_randk_index(&key, first + j);
}

static __global__ void
randk_gather_kernel(const float *__restrict__ x, float *__restrict__ y,
	uint64_t first, size_t cnt, struct tally_randk_key key)
{
	FB_FOR(j, cnt)
		y[j] = x[tally_randk_index(&key, first + j)];
}

/* The indices are distinct: no two threads touch the same element of x. */
static __global__ void
randk_take_kernel(float *__restrict__ x, float *__restrict__ y,
	uint64_t first, size_t cnt, struct tally_randk_key key)
{
	FB_FOR(j, cnt) {
		uint64_t i = tally_randk_index(&key, first + j);

		y[j] = x[i];
		x[i] = 0.0f;
	}
}

static __global__ void
randk_scatter_kernel(const float *__restrict__ y, float *__restrict__ x,
	uint64_t first, size_t cnt, struct tally_randk_key key, float scale)
{
	FB_FOR(j, cnt)
		x[tally_randk_index(&key, first + j)] =
			tally_fb_canon(tally_fb_mul(y[j], scale));
}

/* first + cnt <= n, without overflow. */
static int
range_ok(uint64_t first, size_t cnt, uint64_t n)
{
	return first <= n && (uint64_t)cnt <= n - first;
}

int
tally_randk_indices_cuda(uint64_t *d_idx, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, void *stream)
{
	if (!range_ok(first, cnt, n))
		return -EINVAL;
	if (cnt == 0)
		return 0;
	if (d_idx == NULL)
		return -EINVAL;
	randk_indices_kernel<<<fb_grid(cnt), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_idx, first, cnt,
		tally_randk_key(seed, n));
	return fb_launched();
}

int
tally_randk_gather_cuda(const float *d_x, float *d_y, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed, void *stream)
{
	if (!range_ok(first, cnt, n))
		return -EINVAL;
	if (cnt == 0)
		return 0;
	if (d_x == NULL || d_y == NULL)
		return -EINVAL;
	randk_gather_kernel<<<fb_grid(cnt), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_x, d_y, first, cnt,
		tally_randk_key(seed, n));
	return fb_launched();
}

int
tally_randk_take_cuda(float *d_x, float *d_y, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, void *stream)
{
	if (!range_ok(first, cnt, n))
		return -EINVAL;
	if (cnt == 0)
		return 0;
	if (d_x == NULL || d_y == NULL)
		return -EINVAL;
	randk_take_kernel<<<fb_grid(cnt), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_x, d_y, first, cnt,
		tally_randk_key(seed, n));
	return fb_launched();
}

int
tally_randk_scatter_cuda(const float *d_y, float *d_x, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed, float scale, void *stream)
{
	if (!range_ok(first, cnt, n))
		return -EINVAL;
	if (cnt == 0)
		return 0;
	if (d_y == NULL || d_x == NULL)
		return -EINVAL;
	randk_scatter_kernel<<<fb_grid(cnt), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_y, d_x, first, cnt,
		tally_randk_key(seed, n), scale);
	return fb_launched();
}
