/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch helpers of the feedback family's CUDA files (included by .cu
 * files only): block and grid sizes, the grid-stride loop, the mapping of
 * CUDA errors to -errno, and a per-block count added to a device counter.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_FB_CUDA_H
#define TALLY_GPU_CODEC_FEEDBACK_FB_CUDA_H

#include <errno.h>
#include <stddef.h>

#include <cuda_runtime.h>

#define FB_BLOCK	256	/* threads per block, a multiple of 32 */
#define FB_GRID_MAX	4096	/* blocks of a kernel; grid-stride past that */

/* for (i = this thread's first; i < n; i += the grid's threads) */
#define FB_FOR(i, n) \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, \
	     fb_stride_ = (size_t)gridDim.x * blockDim.x; i < (n); \
	     i += fb_stride_)

/* Maps a CUDA error to 0 or -errno: no usable device/driver, or -EIO. */
static inline int
fb_cuda_errno(cudaError_t err)
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

/* The error of the launch just made, as 0 or -errno. */
static inline int
fb_launched(void)
{
	return fb_cuda_errno(cudaGetLastError());
}

/* Blocks for n work items, at most FB_GRID_MAX. */
static inline unsigned int
fb_grid(size_t n)
{
	size_t g = (n + FB_BLOCK - 1) / FB_BLOCK;

	return g < FB_GRID_MAX ? (unsigned int)g : FB_GRID_MAX;
}

/*
 * Adds every thread's c to *count: a warp sum, then one atomic a warp.
 * Every thread of the block must call it (after its grid-stride loop).
 */
static __device__ inline void
fb_count_add(unsigned long long *count, unsigned int c)
{
	for (int off = 16; off > 0; off >>= 1)
		c += __shfl_down_sync(0xffffffffu, c, off);
	if ((threadIdx.x & 31) == 0 && c != 0)
		atomicAdd(count, (unsigned long long)c);
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_FB_CUDA_H */
