/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the shared-scale fixed-point codec: thin grid-stride
 * loops over the element math of fixp_math.h (the code the CPU reference
 * runs), and the C entry points of <tally/fixp_cuda.h> that launch them.
 */
#include <errno.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include <tally/fixp.h>
#include <tally/fixp_cuda.h>

#include "fixp_math.h"

#define FIXP_BLOCK	256	/* threads per block, a multiple of 32 */
#define FIXP_GRID_MAX	4096	/* blocks of an element-wise kernel */
#define ABSMAX_GRID_MAX	1024	/* blocks of the reduction: fewer atomics */

/* d_q[i] = enc1(d_x[i]) for i < n. */
static __global__ void
encode_kernel(const float *__restrict__ x, int32_t *__restrict__ q, size_t n,
	float s1, float s2)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		q[i] = tally_fixp_enc1(x[i], s1, s2);
}

/* d_x[i] = dec1(d_q[i]) for i < n. */
static __global__ void
decode_kernel(const int32_t *__restrict__ q, float *__restrict__ x, size_t n,
	float iscale)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		x[i] = tally_fixp_dec1(q[i], iscale);
}

/* d_x[i] = dec1_tiny(d_q[i]) for i < n: exponents above 126. */
static __global__ void
decode_tiny_kernel(const int32_t *__restrict__ q, float *__restrict__ x,
	size_t n, double iscale)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		x[i] = tally_fixp_dec1_tiny(q[i], iscale);
}

/* Max over the 32 lanes of a warp; every lane must take part. */
static __device__ unsigned int
warp_max(unsigned int m)
{
	for (int off = 16; off > 0; off >>= 1) {
		unsigned int o = __shfl_down_sync(0xffffffffu, m, off);

		m = o > m ? o : m;
	}
	return m;
}

/*
 * *out = max(*out, max of tally_fixp_abs_bits(x[i])). The bits of
 * non-negative floats order as their values, so an integer atomicMax per
 * block does the grid's reduction. Launched with FIXP_BLOCK threads.
 */
static __global__ void
absmax_kernel(const float *__restrict__ x, size_t n, unsigned int *out)
{
	__shared__ unsigned int part[FIXP_BLOCK / 32];
	size_t stride = (size_t)gridDim.x * blockDim.x;
	unsigned int m = 0;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride) {
		unsigned int a = tally_fixp_abs_bits(x[i]);

		m = a > m ? a : m;
	}
	m = warp_max(m);
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = m;
	__syncthreads();
	if (threadIdx.x < 32) {
		m = threadIdx.x < FIXP_BLOCK / 32 ? part[threadIdx.x] : 0;
		m = warp_max(m);
		if (threadIdx.x == 0 && m != 0)
			atomicMax(out, m);
	}
}

/* Maps a CUDA error to 0 or -errno: no usable device/driver, or -EIO. */
static int
cuda_errno(cudaError_t err)
{
	switch (err) {
	case cudaSuccess:
		return 0;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/* Blocks for n elements, at most max_grid (grid-stride loops do the rest). */
static unsigned int
grid_for(size_t n, unsigned int max_grid)
{
	size_t g = (n + FIXP_BLOCK - 1) / FIXP_BLOCK;

	return g < max_grid ? (unsigned int)g : max_grid;
}

/* Number of usable CUDA devices, or -ENODEV. */
int
tally_cuda_device_count(void)
{
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);

	if (err != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENODEV;
	}
	return count > 0 ? count : -ENODEV;
}

/* Enqueues encode of n elements on stream; borrows d_x, writes d_q. */
int
tally_fixp_encode_cuda(const float *d_x, int32_t *d_q, size_t n, int exp,
	void *stream)
{
	if (exp < TALLY_FIXP_EXP_MIN || exp > TALLY_FIXP_EXP_MAX)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_x == NULL || d_q == NULL)
		return -EINVAL;
	encode_kernel<<<grid_for(n, FIXP_GRID_MAX), FIXP_BLOCK, 0,
		(cudaStream_t)stream>>>(d_x, d_q, n, tally_fixp_scale1(exp),
		tally_fixp_scale2(exp));
	return cuda_errno(cudaGetLastError());
}

/*
 * Enqueues decode of n elements on stream (the binary64 kernel for
 * exponents above 126, as on the host); borrows d_q, writes d_x.
 */
int
tally_fixp_decode_cuda(const int32_t *d_q, float *d_x, size_t n, int exp,
	void *stream)
{
	if (exp < TALLY_FIXP_EXP_MIN || exp > TALLY_FIXP_EXP_MAX)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_q == NULL || d_x == NULL)
		return -EINVAL;
	if (tally_fixp_dec_tiny(exp))
		decode_tiny_kernel<<<grid_for(n, FIXP_GRID_MAX), FIXP_BLOCK, 0,
			(cudaStream_t)stream>>>(d_q, d_x, n,
			tally_fixp_iscale_tiny(exp));
	else
		decode_kernel<<<grid_for(n, FIXP_GRID_MAX), FIXP_BLOCK, 0,
			(cudaStream_t)stream>>>(d_q, d_x, n,
			tally_fixp_iscale(exp));
	return cuda_errno(cudaGetLastError());
}

/*
 * Enqueues *d_out = max |d_x[i]| on stream: zeroes d_out, then the
 * reduction folds into it. Borrows d_x, overwrites d_out.
 */
int
tally_fixp_absmax_cuda(const float *d_x, size_t n, float *d_out, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	int ret;

	if (d_out == NULL || (d_x == NULL && n > 0))
		return -EINVAL;
	ret = cuda_errno(cudaMemsetAsync(d_out, 0, sizeof(*d_out), s));
	if (ret < 0 || n == 0)
		return ret;
	absmax_kernel<<<grid_for(n, ABSMAX_GRID_MAX), FIXP_BLOCK, 0, s>>>(d_x,
		n, (unsigned int *)d_out);
	return cuda_errno(cudaGetLastError());
}
