/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of DGC momentum correction and masking: grid-stride loops
 * over the element math of dgc_math.h (the code dgc.c runs), and their
 * entry points of <tally/feedback_cuda.h>.
 */
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>

#include "dgc_math.h"
#include "fb_cuda.h"

/* u = m u + g; v = v + u. */
static __global__ void
dgc_accumulate_kernel(float *__restrict__ u, float *__restrict__ v,
	const float *__restrict__ g, size_t n, float m)
{
	FB_FOR(i, n) {
		float ui = tally_dgc_mom1(u[i], g[i], m);

		u[i] = ui;
		v[i] = tally_dgc_acc1(v[i], ui);
	}
}

/* Mask byte b from v[8b .. 8b + 8) (fewer in the last), one a thread. */
static __global__ void
dgc_select_kernel(const float *__restrict__ v, uint8_t *__restrict__ mask,
	size_t n, float thr, unsigned long long *count)
{
	size_t nb = (n + 7) / 8;
	unsigned int c = 0;

	FB_FOR(b, nb) {
		size_t left = n - 8 * b;
		uint8_t m = tally_dgc_sel8(v + 8 * b,
			left < 8 ? (unsigned int)left : 8u, thr);

		mask[b] = m;
		c += (unsigned int)__popc(m);
	}
	if (count != NULL)
		fb_count_add(count, c);
}

/* sent = v where masked, else 0; v and u zeroed where masked. */
static __global__ void
dgc_take_kernel(float *__restrict__ v, float *__restrict__ u,
	float *__restrict__ sent, const uint8_t *__restrict__ mask, size_t n)
{
	FB_FOR(i, n) {
		unsigned int b = tally_dgc_bit(mask, i);
		float vi = v[i];

		sent[i] = tally_dgc_pick(vi, b);
		if (b) {
			v[i] = 0.0f;
			u[i] = 0.0f;
		}
	}
}

int
tally_dgc_accumulate_cuda(float *d_u, float *d_v, const float *d_g, size_t n,
	float momentum, void *stream)
{
	if (n == 0)
		return 0;
	if (d_u == NULL || d_v == NULL || d_g == NULL)
		return -EINVAL;
	dgc_accumulate_kernel<<<fb_grid(n), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_u, d_v, d_g, n, momentum);
	return fb_launched();
}

int
tally_dgc_select_cuda(const float *d_v, uint8_t *d_mask, size_t n, float thr,
	unsigned long long *d_count, void *stream)
{
	if (n == 0)
		return 0;
	if (d_v == NULL || d_mask == NULL)
		return -EINVAL;
	dgc_select_kernel<<<fb_grid((n + 7) / 8), FB_BLOCK, 0,
		(cudaStream_t)stream>>>(d_v, d_mask, n, thr, d_count);
	return fb_launched();
}

int
tally_dgc_take_cuda(float *d_v, float *d_u, float *d_sent,
	const uint8_t *d_mask, size_t n, void *stream)
{
	if (n == 0)
		return 0;
	if (d_v == NULL || d_u == NULL || d_sent == NULL || d_mask == NULL)
		return -EINVAL;
	dgc_take_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_v,
		d_u, d_sent, d_mask, n);
	return fb_launched();
}
