/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of error feedback: grid-stride loops over the element math
 * of ef_math.h (the code ef.c runs), and their entry points of
 * <tally/feedback_cuda.h>.
 */
#include <stddef.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>

#include "ef_math.h"
#include "fb_cuda.h"

/* v = g + r (v may be g or r: no __restrict__). */
static __global__ void
ef_apply_kernel(float *v, const float *g, const float *r, size_t n)
{
	FB_FOR(i, n)
		v[i] = tally_ef_apply1(g[i], r[i]);
}

/* r = v - sent, counting inexact residuals into *bad when bad is set. */
static __global__ void
ef_update_kernel(float *r, const float *v, const float *sent, size_t n,
	unsigned long long *bad)
{
	unsigned int c = 0;

	FB_FOR(i, n) {
		float vi = v[i], si = sent[i];
		float ri = tally_ef_update1(vi, si);

		c += tally_ef_inexact1(vi, si, ri);
		r[i] = ri;
	}
	if (bad != NULL)
		fb_count_add(bad, c);
}

int
tally_ef_apply_cuda(float *d_v, const float *d_g, const float *d_r, size_t n,
	void *stream)
{
	if (n == 0)
		return 0;
	if (d_v == NULL || d_g == NULL || d_r == NULL)
		return -EINVAL;
	ef_apply_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_v,
		d_g, d_r, n);
	return fb_launched();
}

int
tally_ef_update_cuda(float *d_r, const float *d_v, const float *d_sent,
	size_t n, unsigned long long *d_inexact, void *stream)
{
	if (n == 0)
		return 0;
	if (d_r == NULL || d_v == NULL || d_sent == NULL)
		return -EINVAL;
	ef_update_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_r, d_v, d_sent, n, d_inexact);
	return fb_launched();
}
