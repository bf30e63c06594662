/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the shared-scale stochastic quantizers: thin
 * grid-stride loops over the element math of quant_math.h (the code the
 * CPU reference runs), and the C entry points of <tally/quant_cuda.h>
 * that launch them.
 *
 * Each thread takes a group of four elements per step
 * (tally_quant_enc_group() and the like, which the CPU tests run too):
 * one 16-byte load of floats (a warp reads 512 contiguous bytes), two
 * hashes (one per aligned pair; three when the chunk starts at an odd
 * global index), and one store of the group's packed integers (8, 4 or
 * 2 bytes). When a buffer is not aligned for that, the same loop accesses
 * elements one by one. The last n % 4 elements are done by thread 0 of
 * block 0.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include <tally/quant.h>
#include <tally/quant_cuda.h>

#include "quant_math.h"

#define QUANT_BLOCK	256	/* threads per block */
#define QUANT_GRID_MAX	4096	/* blocks; grid-stride loops do the rest */

/*
 * The chunk's encoding: x[0..n) at global index off into q, BITS 16, 8
 * or 4, ODD = off & 1. vec: x is 16-byte aligned and q aligned for the
 * group's store.
 */
template <unsigned int BITS, int ODD>
static __global__ void
encode_kernel(const float *__restrict__ x, void *__restrict__ q, size_t n,
	float s, float lim, uint64_t key, uint64_t off, int vec)
{
	size_t groups = n / TALLY_QUANT_GROUP;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	     k < groups; k += stride) {
		int32_t r[TALLY_QUANT_GROUP];

		tally_quant_enc_group(x, k, vec, ODD, s, lim, key, off, r);
		tally_quant_store_group(q, k, BITS, vec, r);
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		tally_quant_enc_tail(x, q, n, BITS, s, lim, key, off);
}

/*
 * x[0..n) = sum[0..n) / s, the sums BITS 32, 16, 8 or 4 wide. vec: x is
 * 16-byte aligned and sum aligned for the group's load.
 */
template <unsigned int BITS>
static __global__ void
decode_kernel(const void *__restrict__ sum, float *__restrict__ x, size_t n,
	float s, int vec)
{
	size_t groups = n / TALLY_QUANT_GROUP;
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	     k < groups; k += stride)
		tally_quant_dec_group(sum, x, k, BITS, vec, s);
	if (blockIdx.x == 0 && threadIdx.x == 0)
		tally_quant_dec_tail(sum, x, n, BITS, s);
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

/* Blocks for n elements' groups (at least one: the tail), at most the max. */
static unsigned int
grid_for(size_t n)
{
	size_t g = (n / TALLY_QUANT_GROUP + QUANT_BLOCK - 1) / QUANT_BLOCK;

	if (g == 0)
		return 1;
	return g < QUANT_GRID_MAX ? (unsigned int)g : QUANT_GRID_MAX;
}

/* 1 when p is a multiple of align bytes. */
static bool
aligned(const void *p, uintptr_t align)
{
	return ((uintptr_t)p & (align - 1)) == 0;
}

/* 1 when scale can have come from tally_quant_scale(). */
static bool
scale_ok(float scale)
{
	return isfinite(scale) && scale > 0.0f;
}

/*
 * Checks the arguments of an encoder of BITS bits and enqueues it.
 * Borrows d_x, writes d_q.
 */
template <unsigned int BITS>
static int
encode_launch(const float *d_x, void *d_q, size_t n, float scale,
	unsigned int levels, unsigned int max, uint64_t seed,
	uint64_t offset, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	uint64_t key = tally_quant_key(seed);
	float lim = tally_quant_limit(levels, max);
	int vec = aligned(d_x, 16) &&
		aligned(d_q, TALLY_QUANT_GROUP_BYTES(BITS));
	unsigned int grid = grid_for(n);

	if (levels == 0 || levels > max || !scale_ok(scale))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_x == NULL || d_q == NULL)
		return -EINVAL;
	if (offset & 1)
		encode_kernel<BITS, 1><<<grid, QUANT_BLOCK, 0, st>>>(d_x,
			d_q, n, scale, lim, key, offset, vec);
	else
		encode_kernel<BITS, 0><<<grid, QUANT_BLOCK, 0, st>>>(d_x,
			d_q, n, scale, lim, key, offset, vec);
	return cuda_errno(cudaGetLastError());
}

/* Checks a decoder's arguments and enqueues it; borrows d_sum, writes d_x. */
template <unsigned int BITS>
static int
decode_launch(const void *d_sum, float *d_x, size_t n, float scale,
	void *stream)
{
	int vec = aligned(d_x, 16) &&
		aligned(d_sum, TALLY_QUANT_GROUP_BYTES(BITS));

	if (!scale_ok(scale))
		return -EINVAL;
	if (n == 0)
		return 0;
	if (d_sum == NULL || d_x == NULL)
		return -EINVAL;
	decode_kernel<BITS><<<grid_for(n), QUANT_BLOCK, 0,
		(cudaStream_t)stream>>>(d_sum, d_x, n, scale, vec);
	return cuda_errno(cudaGetLastError());
}

/* Enqueues the i16 encoding of a chunk; borrows d_x, writes d_q. */
int
tally_quant_encode_i16_cuda(const float *d_x, int16_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream)
{
	return encode_launch<16>(d_x, d_q, n, scale, levels,
		TALLY_QUANT_I16_LEVELS, seed, offset, stream);
}

/* Enqueues the i8 encoding of a chunk; borrows d_x, writes d_q. */
int
tally_quant_encode_i8_cuda(const float *d_x, int8_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream)
{
	return encode_launch<8>(d_x, d_q, n, scale, levels,
		TALLY_QUANT_I8_LEVELS, seed, offset, stream);
}

/* Enqueues the i4 encoding of a chunk; borrows d_x, writes d_q. */
int
tally_quant_encode_i4_cuda(const float *d_x, uint8_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream)
{
	return encode_launch<4>(d_x, d_q, n, scale, levels,
		TALLY_QUANT_I4_LEVELS, seed, offset, stream);
}

/* Enqueues the decoding of wide sums; borrows d_sum, writes d_x. */
int
tally_quant_decode_i32_cuda(const int32_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	return decode_launch<32>(d_sum, d_x, n, scale, stream);
}

/* Enqueues the decoding of narrow i16 sums; borrows d_sum, writes d_x. */
int
tally_quant_decode_i16_cuda(const int16_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	return decode_launch<16>(d_sum, d_x, n, scale, stream);
}

/* Enqueues the decoding of narrow i8 sums; borrows d_sum, writes d_x. */
int
tally_quant_decode_i8_cuda(const int8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	return decode_launch<8>(d_sum, d_x, n, scale, stream);
}

/* Enqueues the decoding of narrow i4 sums; borrows d_sum, writes d_x. */
int
tally_quant_decode_i4_cuda(const uint8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream)
{
	return decode_launch<4>(d_sum, d_x, n, scale, stream);
}
