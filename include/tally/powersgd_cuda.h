/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of PowerSGD (<tally/powersgd.h>). They give the very bits
 * of the CPU functions of the same name without _cuda: both run the
 * element math of gpu/codec/powersgd/psgd_math.h, in the same summation
 * orders.
 *
 * Plain C over device pointers (d_ names); no CUDA header needed to
 * include this. stream is a cudaStream_t (NULL: the legacy default
 * stream). The calls only enqueue work on stream and return: results are
 * there once the stream has been synchronized, and an error of a kernel
 * that failed while running shows up at that synchronization, not here.
 * Layouts, shapes and orders are those of <tally/powersgd.h>; buffers are
 * the caller's device memory, borrowed (inputs) or written (outputs), not
 * overlapping.
 *
 * Every call returns 0, -EINVAL (arguments tally_psgd_check() refuses, or
 * a NULL pointer: d_m may be NULL only when n == 0), -ENODEV (no usable
 * device) or -EIO (the launch failed).
 * tally_cuda_device_count() of <tally/fixp_cuda.h> says whether a device
 * is there.
 *
 * Parallelism: one thread per element of the output (Q's draws, P, Q,
 * M_hat), each summing in the documented order on its own; the
 * orthonormalization is one block of 256 threads, one per lane of its
 * dot products. Present in libtally when it was built with CUDA
 * (TALLY_HAVE_CUDA in tally_config.h).
 */
#ifndef TALLY_POWERSGD_CUDA_H
#define TALLY_POWERSGD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As tally_psgd_init_q(): d_q holds cols * rank floats. */
int tally_psgd_init_q_cuda(float *d_q, uint32_t cols, unsigned int rank,
	uint64_t seed, void *stream);

/* As tally_psgd_p(): d_p (rows * rank floats) = M d_q. */
int tally_psgd_p_cuda(const float *d_m, size_t n, uint32_t rows,
	uint32_t cols, const float *d_q, unsigned int rank, float *d_p,
	void *stream);

/* As tally_psgd_orthonormalize(), in place on d_p (rows * rank floats). */
int tally_psgd_orthonormalize_cuda(float *d_p, uint32_t rows,
	unsigned int rank, void *stream);

/* As tally_psgd_q(): d_q (cols * rank floats) = M^T d_p. */
int tally_psgd_q_cuda(const float *d_m, size_t n, uint32_t rows,
	uint32_t cols, const float *d_p, unsigned int rank, float *d_q,
	void *stream);

/* As tally_psgd_decompress(): d_m[0 .. n) = scale * P Q^T. */
int tally_psgd_decompress_cuda(const float *d_p, const float *d_q,
	uint32_t rows, uint32_t cols, unsigned int rank, float scale,
	float *d_m, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_POWERSGD_CUDA_H */
