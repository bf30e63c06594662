/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the shared-scale stochastic quantizers
 * (<tally/quant.h>). They give the very bits of the CPU functions: both
 * run the element math of gpu/codec/quant/quant_math.h, with the same
 * counter-based draws, so a chunk encoded on the GPU equals the same
 * chunk encoded on the CPU.
 *
 * Plain C over device pointers (or device-mapped pinned host memory: the
 * encoders may write a packet's payload straight into a staging buffer);
 * no CUDA header needed to include this. stream is a cudaStream_t (NULL:
 * the legacy default stream). The calls only enqueue work on stream and
 * return: their results are there once the stream has been synchronized,
 * and an error of a kernel that failed while running shows up at that
 * synchronization, not here. tally_cuda_device_count() is in
 * <tally/fixp_cuda.h>.
 *
 * The kernels take four elements per thread: 16-byte loads of the floats
 * and whole-word stores of the packed integers when the buffers are
 * aligned so (cudaMalloc's are), element-wise accesses otherwise.
 *
 * Present in libtally when it was built with CUDA (TALLY_HAVE_CUDA in
 * tally_config.h).
 */
#ifndef TALLY_QUANT_CUDA_H
#define TALLY_QUANT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * d_q = encode(d_x) for the n elements of the chunk at element offset of
 * the tensor, as tally_quant_encode_i16() / _i8() / _i4() (the same
 * bits). Borrows d_x, writes d_q (device memory, caller's, not
 * overlapping: n elements, (n + 1) / 2 bytes for i4). Returns 0, -EINVAL
 * (NULL pointer with n > 0, levels 0 or above the width's maximum, scale
 * not finite and positive), -ENODEV (no usable device) or -EIO (the
 * launch failed).
 */
int tally_quant_encode_i16_cuda(const float *d_x, int16_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream);
int tally_quant_encode_i8_cuda(const float *d_x, int8_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream);
int tally_quant_encode_i4_cuda(const float *d_x, uint8_t *d_q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset,
	void *stream);

/*
 * d_x[i] = d_sum[i] / scale for n sums, as tally_quant_decode_i32() /
 * _i16() / _i8() / _i4(). Borrows d_sum, writes d_x (device memory,
 * caller's, not overlapping). Returns 0, -EINVAL (NULL pointer with
 * n > 0, scale not finite and positive), -ENODEV or -EIO.
 */
int tally_quant_decode_i32_cuda(const int32_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);
int tally_quant_decode_i16_cuda(const int16_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);
int tally_quant_decode_i8_cuda(const int8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);
int tally_quant_decode_i4_cuda(const uint8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_QUANT_CUDA_H */
