/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of sign votes: grid-stride loops over the element math of
 * sign_math.h (the code sign.c runs), and their entry points of
 * <tally/feedback_cuda.h>. Vote bytes are written whole, one a thread.
 */
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>

#include "fb_cuda.h"
#include "sign_math.h"

/* Vote byte b from x[8b .. 8b + 8) (fewer in the last). */
static __global__ void
sign_encode_kernel(const float *__restrict__ x, uint8_t *__restrict__ bits,
	size_t n)
{
	FB_FOR(b, (n + 7) / 8) {
		size_t left = n - 8 * b;

		bits[b] = tally_sign_pack8(x + 8 * b,
			left < 8 ? (unsigned int)left : 8u);
	}
}

static __global__ void
sign_votes_kernel(const int8_t *__restrict__ votes, float *__restrict__ x,
	size_t n, int32_t world, float scale)
{
	FB_FOR(i, n)
		x[i] = tally_sign_votes1(votes[i], world, scale);
}

static __global__ void
sign_bits_kernel(const uint8_t *__restrict__ bits, float *__restrict__ x,
	size_t n, float scale)
{
	FB_FOR(i, n)
		x[i] = tally_sign_bits1(bits, i, scale);
}

int
tally_sign_encode_cuda(const float *d_x, uint8_t *d_bits, size_t n,
	void *stream)
{
	if (n == 0)
		return 0;
	if (d_x == NULL || d_bits == NULL)
		return -EINVAL;
	sign_encode_kernel<<<fb_grid((n + 7) / 8), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_x, d_bits, n);
	return fb_launched();
}

int
tally_sign_decode_votes_cuda(const int8_t *d_votes, float *d_x, size_t n,
	unsigned int world, float scale, void *stream)
{
	if (n == 0)
		return 0;
	if (d_votes == NULL || d_x == NULL)
		return -EINVAL;
	sign_votes_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_votes, d_x, n, world > 255 ? 255 : (int32_t)world, scale);
	return fb_launched();
}

int
tally_sign_decode_bits_cuda(const uint8_t *d_bits, float *d_x, size_t n,
	float scale, void *stream)
{
	if (n == 0)
		return 0;
	if (d_bits == NULL || d_x == NULL)
		return -EINVAL;
	sign_bits_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_bits, d_x, n, scale);
	return fb_launched();
}
