/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the 16-bit fixed-point codec: thin grid-stride loops
 * over fixp16_math.h (what the CPU's scalar loops run), and the C entry
 * points of <tally/fixp16_cuda.h> that launch them.
 */
#include <errno.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include <tally/fixp.h>
#include <tally/fixp16_cuda.h>

#include "fixp16_math.h"

#define F16_BLOCK	256	/* threads per block, a multiple of 32 */
#define F16_GRID_MAX	4096	/* blocks of an element-wise kernel */

/* The exactly widened element i of type f16 (else bf16). */
static __device__ float
widen(int f16, uint16_t h)
{
	return f16 ? tally_fixp16_f16_f32(h) : tally_fixp16_bf16_f32(h);
}

static __global__ void
enc32_kernel(int f16, const uint16_t *__restrict__ x,
	int32_t *__restrict__ q, size_t n, float s1, float s2)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		q[i] = tally_fixp_enc1(widen(f16, x[i]), s1, s2);
}

static __global__ void
enc16_kernel(int f16, const uint16_t *__restrict__ x,
	int16_t *__restrict__ q, size_t n, float s1, float s2)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		q[i] = tally_fixp16_enc16(widen(f16, x[i]), s1, s2);
}

/* Sums of width T (int32_t or int16_t) to results; x may be q for 16. */
template <typename T>
static __global__ void
dec_kernel(const T *q, uint16_t *x, size_t n, int e,
	struct tally_fixp16_fmt f)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		x[i] = tally_fixp16_dec1(q[i], e, f);
}

/*
 * *out = max(*out, bits of the widened |x[i]|): non-negative floats
 * order as their bits, so an integer atomicMax a block does it.
 */
static __global__ void
absmax_kernel(int f16, const uint16_t *__restrict__ x, size_t n,
	unsigned int *out)
{
	__shared__ unsigned int part[F16_BLOCK / 32];
	size_t stride = (size_t)gridDim.x * blockDim.x;
	uint16_t inf = f16 ? 0x7c00u : 0x7f80u;
	unsigned int m = 0;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride) {
		unsigned int a = tally_hd_f2u(widen(f16,
			tally_fixp16_abs_bits(x[i], inf)));

		m = a > m ? a : m;
	}
	for (int off = 16; off > 0; off >>= 1) {
		unsigned int o = __shfl_down_sync(0xffffffffu, m, off);

		m = o > m ? o : m;
	}
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = m;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < F16_BLOCK / 32; w++)
			m = part[w] > m ? part[w] : m;
		if (m != 0)
			atomicMax(out, m);
	}
}

/* A CUDA error as 0 or -errno: no usable device, or -EIO. */
static int
f16_errno(cudaError_t err)
{
	if (err == cudaSuccess)
		return 0;
	if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
			err == cudaErrorStubLibrary)
		return -ENODEV;
	return -EIO;
}

static unsigned int
f16_grid(size_t n)
{
	size_t g = (n + F16_BLOCK - 1) / F16_BLOCK;

	return g < F16_GRID_MAX ? (unsigned int)g : F16_GRID_MAX;
}

/* Checks shared by the entry points: 1 to launch, 0 for n 0, -EINVAL. */
static int
f16_check(enum tally_dtype dt, const void *a, const void *b,
	unsigned int bits, size_t n, int exp)
{
	if (dt != TALLY_DT_BF16 && dt != TALLY_DT_F16)
		return -EINVAL;
	if ((bits != 16 && bits != 32) || exp < TALLY_FIXP_EXP_MIN ||
			exp > TALLY_FIXP_EXP_MAX)
		return -EINVAL;
	if (n == 0)
		return 0;
	return a == NULL || b == NULL ? -EINVAL : 1;
}

int
tally_fixp16_absmax_cuda(enum tally_dtype dt, const uint16_t *d_x,
	size_t n, float *d_out, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	int rc = f16_check(dt, d_out, d_out, 32, 1, 0);

	if (rc < 0 || (d_x == NULL && n > 0))
		return -EINVAL;
	rc = f16_errno(cudaMemsetAsync(d_out, 0, sizeof(*d_out), s));
	if (rc < 0 || n == 0)
		return rc;
	absmax_kernel<<<f16_grid(n) < 1024 ? f16_grid(n) : 1024, F16_BLOCK,
		0, s>>>(dt == TALLY_DT_F16, d_x, n, (unsigned int *)d_out);
	return f16_errno(cudaGetLastError());
}

int
tally_fixp16_encode_cuda(enum tally_dtype dt, const uint16_t *d_x,
	void *d_q, unsigned int lanes, size_t n, int exp, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	int rc = f16_check(dt, d_x, d_q, lanes, n, exp);
	int f16 = dt == TALLY_DT_F16;

	if (rc <= 0)
		return rc;
	if (lanes == 32)
		enc32_kernel<<<f16_grid(n), F16_BLOCK, 0, s>>>(f16, d_x,
			(int32_t *)d_q, n, tally_fixp_scale1(exp),
			tally_fixp_scale2(exp));
	else
		enc16_kernel<<<f16_grid(n), F16_BLOCK, 0, s>>>(f16, d_x,
			(int16_t *)d_q, n, tally_fixp_scale1(exp),
			tally_fixp_scale2(exp));
	return f16_errno(cudaGetLastError());
}

int
tally_fixp16_decode_cuda(enum tally_dtype dt, const void *d_q,
	unsigned int sum_bits, uint16_t *d_x, size_t n, int exp, void *stream)
{
	const struct tally_fixp16_fmt bf = TALLY_FIXP16_FMT_BF16;
	const struct tally_fixp16_fmt hf = TALLY_FIXP16_FMT_F16;
	cudaStream_t s = (cudaStream_t)stream;
	int rc = f16_check(dt, d_q, d_x, sum_bits, n, exp);
	struct tally_fixp16_fmt f = dt == TALLY_DT_F16 ? hf : bf;

	if (rc <= 0)
		return rc;
	if (sum_bits == 32)
		dec_kernel<int32_t><<<f16_grid(n), F16_BLOCK, 0, s>>>(
			(const int32_t *)d_q, d_x, n, exp, f);
	else
		dec_kernel<int16_t><<<f16_grid(n), F16_BLOCK, 0, s>>>(
			(const int16_t *)d_q, d_x, n, exp, f);
	return f16_errno(cudaGetLastError());
}
