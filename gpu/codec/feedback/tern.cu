/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the ternary codecs (2-bit with a residual, TernGrad,
 * decoding of sums): grid-stride loops over the element math of
 * tern_math.h (the code tern.c runs), and their entry points of
 * <tally/feedback_cuda.h>. i4 bytes are written whole, one a thread.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>

#include "fb_cuda.h"
#include "tern_math.h"

/* v of element i: g[i] + r[i], or r[i] without a g. */
static __device__ inline float
v_of(const float *__restrict__ g, const float *__restrict__ r, size_t i)
{
	return g != NULL ? tally_fb_add(g[i], r[i]) : r[i];
}

/* 2-bit steps: i4 byte b from elements 2b and 2b + 1. */
static __global__ void
twobit_i4_kernel(float *__restrict__ r, const float *__restrict__ g,
	uint8_t *__restrict__ q4, size_t n, float t, float lim)
{
	FB_FOR(b, (n + 1) / 2) {
		size_t i = 2 * b;
		int q0 = tally_2bit_step1(v_of(g, r, i), t, lim, &r[i]);
		int q1 = 0;

		if (i + 1 < n)
			q1 = tally_2bit_step1(v_of(g, r, i + 1), t, lim,
				&r[i + 1]);
		q4[b] = tally_tern_pack2(q0, q1);
	}
}

/* 2-bit steps into i8 values. */
static __global__ void
twobit_i8_kernel(float *__restrict__ r, const float *__restrict__ g,
	int8_t *__restrict__ q8, size_t n, float t, float lim)
{
	FB_FOR(i, n)
		q8[i] = (int8_t)tally_2bit_step1(v_of(g, r, i), t, lim, &r[i]);
}

/* TernGrad: i4 byte b from elements 2b and 2b + 1. */
static __global__ void
tern_i4_kernel(const float *__restrict__ g, uint8_t *__restrict__ q4,
	size_t n, float s, uint64_t key, uint64_t offset)
{
	FB_FOR(b, (n + 1) / 2) {
		size_t i = 2 * b;
		int q0 = tally_tern_q1(g[i], s, key, offset + i);
		int q1 = 0;

		if (i + 1 < n)
			q1 = tally_tern_q1(g[i + 1], s, key, offset + i + 1);
		q4[b] = tally_tern_pack2(q0, q1);
	}
}

/* TernGrad into i8 values. */
static __global__ void
tern_i8_kernel(const float *__restrict__ g, int8_t *__restrict__ q8,
	size_t n, float s, uint64_t key, uint64_t offset)
{
	FB_FOR(i, n)
		q8[i] = (int8_t)tally_tern_q1(g[i], s, key, offset + i);
}

static __global__ void
dec_i32_kernel(const int32_t *__restrict__ sum, float *__restrict__ x,
	size_t n, float s)
{
	FB_FOR(i, n)
		x[i] = tally_tern_dec1(sum[i], s);
}

static __global__ void
dec_i8_kernel(const int8_t *__restrict__ sum, float *__restrict__ x,
	size_t n, float s)
{
	FB_FOR(i, n)
		x[i] = tally_tern_dec1(sum[i], s);
}

static __global__ void
dec_i4_kernel(const uint8_t *__restrict__ sum, float *__restrict__ x,
	size_t n, float s)
{
	FB_FOR(i, n)
		x[i] = tally_tern_dec1(tally_tern_nib(sum[i / 2],
			(unsigned int)(i & 1)), s);
}

/* A scale TernGrad can divide by. */
static int
scale_ok(float s)
{
	return isfinite(s) && s > 0.0f;
}

int
tally_2bit_encode_i4_cuda(float *d_r, const float *d_g, uint8_t *d_q4,
	size_t n, int exp, void *stream)
{
	if (n == 0)
		return 0;
	if (d_r == NULL || d_q4 == NULL)
		return -EINVAL;
	twobit_i4_kernel<<<fb_grid((n + 1) / 2), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_r, d_g, d_q4, n, tally_2bit_t(exp),
		tally_2bit_lim(exp));
	return fb_launched();
}

int
tally_2bit_encode_i8_cuda(float *d_r, const float *d_g, int8_t *d_q8,
	size_t n, int exp, void *stream)
{
	if (n == 0)
		return 0;
	if (d_r == NULL || d_q8 == NULL)
		return -EINVAL;
	twobit_i8_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_r, d_g, d_q8, n, tally_2bit_t(exp), tally_2bit_lim(exp));
	return fb_launched();
}

int
tally_tern_encode_i4_cuda(const float *d_g, uint8_t *d_q4, size_t n,
	float scale, uint64_t seed, uint64_t offset, void *stream)
{
	if (!scale_ok(scale))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_g == NULL || d_q4 == NULL)
		return -EINVAL;
	tern_i4_kernel<<<fb_grid((n + 1) / 2), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_g, d_q4, n, scale,
		tally_fb_key(seed), offset);
	return fb_launched();
}

int
tally_tern_encode_i8_cuda(const float *d_g, int8_t *d_q8, size_t n,
	float scale, uint64_t seed, uint64_t offset, void *stream)
{
	if (!scale_ok(scale))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_g == NULL || d_q8 == NULL)
		return -EINVAL;
	tern_i8_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_g,
		d_q8, n, scale, tally_fb_key(seed), offset);
	return fb_launched();
}

int
tally_tern_decode_i32_cuda(const int32_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	if (n == 0)
		return 0;
	if (d_sum == NULL || d_x == NULL)
		return -EINVAL;
	dec_i32_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_sum, d_x, n, scale);
	return fb_launched();
}

int
tally_tern_decode_i8_cuda(const int8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	if (n == 0)
		return 0;
	if (d_sum == NULL || d_x == NULL)
		return -EINVAL;
	dec_i8_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_sum, d_x, n, scale);
	return fb_launched();
}

int
tally_tern_decode_i4_cuda(const uint8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	if (n == 0)
		return 0;
	if (d_sum == NULL || d_x == NULL)
		return -EINVAL;
	dec_i4_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_sum, d_x, n, scale);
	return fb_launched();
}
