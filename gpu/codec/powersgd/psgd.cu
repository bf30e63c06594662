/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of PowerSGD: thin grid-stride loops over the element math
 * of psgd_math.h (the code the CPU reference runs), and the entry points
 * of <tally/powersgd_cuda.h> that launch them.
 *
 * P, Q, M_hat and the draws of Q: one thread per output element, summing
 * on its own in the documented order (j ascending for P, i ascending for
 * Q, k ascending for M_hat). Threads next to each other take the next k
 * of a row, then the next row (P) or column (Q), so a warp's loads of M
 * hit few lines (P) or consecutive addresses (Q). Orthonormalization is
 * one block of TALLY_PSGD_LANES threads: thread l owns the rows
 * l, l + LANES, ..., sums its lane of every dot product over them and
 * updates them, and the block adds the lanes by the tree in shared
 * memory; only the tree crosses threads.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/powersgd.h>
#include <tally/powersgd_cuda.h>

#include "psgd_math.h"
#include "codec/feedback/fb_cuda.h"

static __global__ void
init_q_kernel(float *q, size_t cnt, uint64_t key)
{
	FB_FOR(c, cnt)
		q[c] = tally_psgd_normal(key, c);
}

static __global__ void
p_kernel(const float *__restrict__ m, size_t n, uint32_t rows,
	uint32_t cols, const float *__restrict__ q, unsigned int rank,
	float *__restrict__ p)
{
	FB_FOR(t, (size_t)rows * rank)
		p[t] = tally_psgd_p1(m, n, cols, q, rank, (uint32_t)(t / rank),
			(unsigned int)(t % rank));
}

static __global__ void
q_kernel(const float *__restrict__ m, size_t n, uint32_t rows,
	uint32_t cols, const float *__restrict__ p, unsigned int rank,
	float *__restrict__ q)
{
	FB_FOR(t, (size_t)cols * rank)
		q[t] = tally_psgd_q1(m, n, rows, cols, p, rank,
			(uint32_t)(t / rank), (unsigned int)(t % rank));
}

static __global__ void
dec_kernel(const float *__restrict__ p, const float *__restrict__ q,
	uint32_t cols, unsigned int rank, double scale, float *__restrict__ m,
	size_t n)
{
	/* n <= rows * cols <= UINT32_MAX: 32-bit division. */
	FB_FOR(t, n) {
		uint32_t i = (uint32_t)t / cols, j = (uint32_t)t % cols;

		m[t] = tally_psgd_dec1(p + (size_t)i * rank,
			q + (size_t)j * rank, rank, scale);
	}
}

/*
 * The dot product of columns a and b of p, in every thread of the block:
 * this thread's lane, then the tree over s (shared, TALLY_PSGD_LANES).
 * Every thread of the block must call it.
 */
static __device__ double
block_dot(const float *p, uint32_t rows, unsigned int rank, unsigned int a,
	unsigned int b, double *s)
{
	unsigned int l = threadIdx.x;
	double r;

	s[l] = tally_psgd_lane(p, rows, rank, a, b, l);
	__syncthreads();
	for (unsigned int w = TALLY_PSGD_LANES / 2; w > 0; w /= 2) {
		if (l < w)
			tally_psgd_tree1(s, l, w);
		__syncthreads();
	}
	r = s[0];
	__syncthreads();	/* s is rewritten by the next call */
	return r;
}

/* tally_psgd_orthonormalize(): one block of TALLY_PSGD_LANES threads. */
static __global__ void
orth_kernel(float *p, uint32_t rows, unsigned int rank)
{
	__shared__ double s[TALLY_PSGD_LANES];
	uint32_t l = threadIdx.x;

	for (unsigned int k = 0; k < rank; k++) {
		double s0 = block_dot(p, rows, rank, k, k, s), s1;

		for (int pass = 0; pass < 2; pass++) {
			for (unsigned int c = 0; c < k; c++) {
				double co = block_dot(p, rows, rank, c, k, s);

				for (uint64_t i = l; i < rows;
				     i += TALLY_PSGD_LANES) {
					float *e = p + (size_t)i * rank;

					e[k] = tally_psgd_proj1(e[k], co, e[c]);
				}
			}
		}
		s1 = block_dot(p, rows, rank, k, k, s);
		if (tally_psgd_keep(s0, s1)) {
			double nrm = tally_psgd_dsqrt(s1);

			for (uint64_t i = l; i < rows; i += TALLY_PSGD_LANES)
				p[(size_t)i * rank + k] = tally_psgd_norm1(
					p[(size_t)i * rank + k], nrm);
		} else {
			for (uint64_t i = l; i < rows; i += TALLY_PSGD_LANES)
				p[(size_t)i * rank + k] = 0.0f;
		}
	}
}

int
tally_psgd_init_q_cuda(float *d_q, uint32_t cols, unsigned int rank,
	uint64_t seed, void *stream)
{
	size_t cnt = (size_t)cols * rank;

	if (tally_psgd_check(0, 1, cols, rank) != 0 || d_q == NULL)
		return -EINVAL;
	init_q_kernel<<<fb_grid(cnt), FB_BLOCK, 0, (cudaStream_t)stream>>>(
		d_q, cnt, tally_psgd_key(seed));
	return fb_launched();
}

int
tally_psgd_p_cuda(const float *d_m, size_t n, uint32_t rows, uint32_t cols,
	const float *d_q, unsigned int rank, float *d_p, void *stream)
{
	size_t cnt = (size_t)rows * rank;

	if (tally_psgd_check(n, rows, cols, rank) != 0 || d_q == NULL ||
	    d_p == NULL || (d_m == NULL && n > 0))
		return -EINVAL;
	p_kernel<<<fb_grid(cnt), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_m, n,
		rows, cols, d_q, rank, d_p);
	return fb_launched();
}

int
tally_psgd_orthonormalize_cuda(float *d_p, uint32_t rows, unsigned int rank,
	void *stream)
{
	if (tally_psgd_check(0, rows, 1, rank) != 0 || d_p == NULL)
		return -EINVAL;
	orth_kernel<<<1, TALLY_PSGD_LANES, 0, (cudaStream_t)stream>>>(d_p, rows,
		rank);
	return fb_launched();
}

int
tally_psgd_q_cuda(const float *d_m, size_t n, uint32_t rows, uint32_t cols,
	const float *d_p, unsigned int rank, float *d_q, void *stream)
{
	size_t cnt = (size_t)cols * rank;

	if (tally_psgd_check(n, rows, cols, rank) != 0 || d_p == NULL ||
	    d_q == NULL || (d_m == NULL && n > 0))
		return -EINVAL;
	q_kernel<<<fb_grid(cnt), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_m, n,
		rows, cols, d_p, rank, d_q);
	return fb_launched();
}

int
tally_psgd_decompress_cuda(const float *d_p, const float *d_q, uint32_t rows,
	uint32_t cols, unsigned int rank, float scale, float *d_m, size_t n,
	void *stream)
{
	if (tally_psgd_check(n, rows, cols, rank) != 0 || d_p == NULL ||
	    d_q == NULL || (d_m == NULL && n > 0))
		return -EINVAL;
	if (n == 0)
		return 0;
	dec_kernel<<<fb_grid(n), FB_BLOCK, 0, (cudaStream_t)stream>>>(d_p, d_q,
		cols, rank, (double)scale, d_m, n);
	return fb_launched();
}
