/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the shared-scale fixed-point codec (<tally/fixp.h>).
 * They give the very bits of the CPU functions: both run the element math
 * of gpu/codec/fixp_math.h.
 *
 * Plain C over device pointers; no CUDA header needed to include this.
 * stream is a cudaStream_t (NULL: the legacy default stream). The calls
 * only enqueue work on stream and return: their results are there once
 * the stream has been synchronized, and an error of a kernel that failed
 * while running shows up at that synchronization, not here.
 *
 * Present in libtally when it was built with CUDA (TALLY_HAVE_CUDA in
 * tally_config.h).
 */
#ifndef TALLY_FIXP_CUDA_H
#define TALLY_FIXP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Number of CUDA devices this process can use, or -ENODEV when there is
 * none (no device, no driver, or a driver too old for the runtime).
 */
int tally_cuda_device_count(void);

/*
 * d_q[i] = encode(d_x[i]) with exponent exp, n elements, as
 * tally_fixp_encode(). Borrows d_x, writes d_q (device memory, caller's,
 * not overlapping). Returns 0, -EINVAL (NULL pointer with n > 0, or exp
 * outside [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]), -ENODEV (no usable
 * device) or -EIO (the launch failed).
 */
int tally_fixp_encode_cuda(const float *d_x, int32_t *d_q, size_t n, int exp,
	void *stream);

/*
 * d_x[i] = decode(d_q[i]) with exponent exp, n elements, as
 * tally_fixp_decode(). Borrows d_q, writes d_x (device memory, caller's,
 * not overlapping). Returns as tally_fixp_encode_cuda().
 */
int tally_fixp_decode_cuda(const int32_t *d_q, float *d_x, size_t n, int exp,
	void *stream);

/*
 * *d_out = max |d_x[i]| over n elements, as tally_fixp_absmax() (0 when n
 * is 0). Borrows d_x, overwrites the one float at d_out (device memory,
 * caller's, 4-byte aligned). Returns 0, -EINVAL (NULL d_out, or NULL d_x
 * with n > 0), -ENODEV or -EIO.
 */
int tally_fixp_absmax_cuda(const float *d_x, size_t n, float *d_out,
	void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FIXP_CUDA_H */
