/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the 16-bit fixed-point codec (<tally/fixp16.h>): the
 * same bits as the CPU functions (both run gpu/codec/fixp16_math.h).
 * Plain C over device pointers; stream is a cudaStream_t (NULL: the
 * legacy default stream); the calls only enqueue work (as
 * <tally/fixp_cuda.h>'s). Present in libtally built with CUDA.
 */
#ifndef TALLY_FIXP16_CUDA_H
#define TALLY_FIXP16_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <tally/tally.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Enqueues *d_out = tally_fixp16_absmax(dt, d_x, n) (d_out: one float of
 * device memory, overwritten). Returns 0, -EINVAL (dt not bf16/f16, a
 * NULL pointer), -ENODEV or -EIO.
 */
int tally_fixp16_absmax_cuda(enum tally_dtype dt, const uint16_t *d_x,
	size_t n, float *d_out, void *stream);

/*
 * Enqueues tally_fixp16_encode() of n elements of dt at d_x into d_q
 * (int32 for lanes 32, int16 for 16). Returns 0, -EINVAL (as the CPU
 * function, or exp outside [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]),
 * -ENODEV or -EIO.
 */
int tally_fixp16_encode_cuda(enum tally_dtype dt, const uint16_t *d_x,
	void *d_q, unsigned int lanes, size_t n, int exp, void *stream);

/*
 * Enqueues tally_fixp16_decode() of n sums at d_q (int32 for sum_bits
 * 32, int16 for 16) into dt at d_x. Errors as the encoding's.
 */
int tally_fixp16_decode_cuda(enum tally_dtype dt, const void *d_q,
	unsigned int sum_bits, uint16_t *d_x, size_t n, int exp,
	void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FIXP16_CUDA_H */
