/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA kernels of the feedback family (<tally/feedback.h>). They give the
 * very bits of the CPU functions of the same name without _cuda: both run
 * the element math of the *_math.h headers in gpu/codec/feedback/.
 *
 * Plain C over device pointers (d_ names); no CUDA header needed to
 * include this. stream is a cudaStream_t (NULL: the legacy default
 * stream). The calls only enqueue work on stream and return: results are
 * there once the stream has been synchronized, and an error of a kernel
 * that failed while running shows up at that synchronization, not here.
 * Packed outputs (i4 bytes, sign and mask bits) are written a whole byte
 * per thread, so chunks that start on a byte (an even element for i4, a
 * multiple of 8 for bits) never share a byte.
 *
 * Every call returns 0, -EINVAL (a NULL pointer where n or cnt > 0, or an
 * argument the CPU function refuses), -ENODEV (no usable device) or -EIO
 * (the launch failed). n == 0 (cnt == 0) enqueues nothing and returns 0.
 * tally_cuda_device_count() of <tally/fixp_cuda.h> says whether a device
 * is there.
 *
 * Present in libtally when it was built with CUDA (TALLY_HAVE_CUDA in
 * tally_config.h).
 */
#ifndef TALLY_FEEDBACK_CUDA_H
#define TALLY_FEEDBACK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As tally_ef_apply(); d_v may be d_g or d_r. */
int tally_ef_apply_cuda(float *d_v, const float *d_g, const float *d_r,
	size_t n, void *stream);

/*
 * As tally_ef_update(); d_r may be d_v or d_sent. When d_inexact is not
 * NULL, the number of inexact residuals is added to the counter there
 * (device memory, the caller zeroes it).
 */
int tally_ef_update_cuda(float *d_r, const float *d_v, const float *d_sent,
	size_t n, unsigned long long *d_inexact, void *stream);

/* As tally_dgc_accumulate(). */
int tally_dgc_accumulate_cuda(float *d_u, float *d_v, const float *d_g,
	size_t n, float momentum, void *stream);

/*
 * As tally_dgc_select(): writes (n + 7) / 8 mask bytes; when d_count is
 * not NULL, the number of bits set is added to the counter there.
 */
int tally_dgc_select_cuda(const float *d_v, uint8_t *d_mask, size_t n,
	float thr, unsigned long long *d_count, void *stream);

/* As tally_dgc_take(). */
int tally_dgc_take_cuda(float *d_v, float *d_u, float *d_sent,
	const uint8_t *d_mask, size_t n, void *stream);

/* As tally_2bit_encode_i4(); d_g may be NULL (v = r). */
int tally_2bit_encode_i4_cuda(float *d_r, const float *d_g, uint8_t *d_q4,
	size_t n, int exp, void *stream);

/* As tally_2bit_encode_i8(); d_g may be NULL (v = r). */
int tally_2bit_encode_i8_cuda(float *d_r, const float *d_g, int8_t *d_q8,
	size_t n, int exp, void *stream);

/* As tally_tern_encode_i4() (-EINVAL for a scale it refuses). */
int tally_tern_encode_i4_cuda(const float *d_g, uint8_t *d_q4, size_t n,
	float scale, uint64_t seed, uint64_t offset, void *stream);

/* As tally_tern_encode_i8(). */
int tally_tern_encode_i8_cuda(const float *d_g, int8_t *d_q8, size_t n,
	float scale, uint64_t seed, uint64_t offset, void *stream);

/* As tally_tern_decode_i32(). */
int tally_tern_decode_i32_cuda(const int32_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);

/* As tally_tern_decode_i8(). */
int tally_tern_decode_i8_cuda(const int8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);

/* As tally_tern_decode_i4(). */
int tally_tern_decode_i4_cuda(const uint8_t *d_sum, float *d_x, size_t n,
	float scale, void *stream);

/* As tally_sign_encode(). */
int tally_sign_encode_cuda(const float *d_x, uint8_t *d_bits, size_t n,
	void *stream);

/* As tally_sign_decode_votes(). */
int tally_sign_decode_votes_cuda(const int8_t *d_votes, float *d_x, size_t n,
	unsigned int world, float scale, void *stream);

/* As tally_sign_decode_bits(). */
int tally_sign_decode_bits_cuda(const uint8_t *d_bits, float *d_x, size_t n,
	float scale, void *stream);

/* As tally_randk_indices() (-EINVAL when first + cnt > n). */
int tally_randk_indices_cuda(uint64_t *d_idx, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, void *stream);

/* As tally_randk_gather(). */
int tally_randk_gather_cuda(const float *d_x, float *d_y, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed, void *stream);

/* As tally_randk_take(). */
int tally_randk_take_cuda(float *d_x, float *d_y, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, void *stream);

/* As tally_randk_scatter(). */
int tally_randk_scatter_cuda(const float *d_y, float *d_x, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed, float scale, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FEEDBACK_CUDA_H */
