/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared-scale stochastic quantization to i16, i8 and i4 (the q16, q8
 * and q4 codecs of <tally/codec.h>; docs/codecs/quant.md).
 *
 * Every worker takes tally_fixp_absmax() of its data, the aggregator
 * takes the MAX over workers (one small round), and every worker then
 * derives the same number of levels L (tally_quant_levels(): from the
 * width, the world size and whether the job's results are narrow) and the
 * same scale s = L / absmax (tally_quant_scale()). Each element becomes
 * an integer q in [-L, L], rounded stochastically so that E[q] = x * s;
 * the aggregator sums the integers exactly, and workers decode
 * sum / s. Given the seeds, every worker and every run gets the same bits.
 *
 * Element rules (the CUDA kernels of <tally/quant_cuda.h> give the same
 * bits; both run the same code, gpu/codec/quant/quant_math.h):
 * - encode: y = x * s (binary32 product, rounded to nearest even);
 *   NaN -> 0; y clamped to [-L, L] (infinities saturate);
 *   q = floor(y) + (y - floor(y) > u), where u in [0, 1) is a multiple of
 *   2^-24 drawn from a counter-based hash of (seed, global element index)
 *   (tally_quant_u24() of quant_math.h): any chunk encodes alone, on the
 *   CPU or the GPU, to the bits of the whole tensor.
 * - decode: (float)sum / s, one binary32 division rounded to nearest
 *   even (the int -> float conversion is exact for every sum of up to
 *   TALLY_QUANT_WORLD_MAX encodings).
 * - packing, as docs/protocol.md's encodings i16, i8 and i4: little-
 *   endian two's complement; i4 as nibbles, element 2k of the buffer in
 *   the low nibble of byte k, 2k + 1 in the high one, the last high
 *   nibble 0 for an odd count. A chunk is packed on its own (its first
 *   element in the low nibble of its first byte), whatever its offset.
 *
 * Workers must use different seeds, and a fresh seed for every call
 * (tally_quant_seed()), so that rounding errors are independent and
 * average out in the sum.
 */
#ifndef TALLY_QUANT_H
#define TALLY_QUANT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest world size (= TALLY_MAX_WORKERS of <tally/proto.h>). */
#define TALLY_QUANT_WORLD_MAX	64
/* Largest level count of each width: 2^(bits - 1) - 1. */
#define TALLY_QUANT_I16_LEVELS	32767u
#define TALLY_QUANT_I8_LEVELS	127u
#define TALLY_QUANT_I4_LEVELS	7u

/*
 * Level count L for values of the given width (16, 8 or 4 bits) summed
 * over world workers: 2^(bits - 1) - 1 for wide results (narrow 0: i32
 * sums), floor((2^(bits - 1) - 1) / world) for narrow ones (the sums come
 * back in the contributions' width; world values in [-L, L] always fit,
 * so the aggregator never saturates). Writes *levels. Returns 0, -EINVAL
 * (bits not 16, 8 or 4; world 0 or above TALLY_QUANT_WORLD_MAX; levels
 * NULL) or -ERANGE (narrow and world > 2^(bits - 1) - 1: no level left,
 * e.g. i4 beyond 7 workers); *levels untouched on error.
 */
int tally_quant_levels(unsigned int bits, unsigned int world, int narrow,
	unsigned int *levels);

/*
 * Scale for a tensor whose global max |x| is absmax: *scale = levels /
 * absmax, one binary32 division rounded to nearest even; absmax 0 (all
 * elements zero) gives levels (as absmax 1 would), and a quotient that
 * overflows (absmax tiny) gives FLT_MAX. Returns 0, or -EINVAL when absmax
 * is negative, infinite or NaN, levels is 0 or above
 * TALLY_QUANT_I16_LEVELS, or scale is NULL (*scale untouched then).
 */
int tally_quant_scale(float absmax, unsigned int levels, float *scale);

/*
 * Seed of one worker's call from the job's seed, the worker's rank and a
 * step counter (iteration, or tensor number, or both mixed by the
 * caller): distinct ranks give distinct seeds for the same job seed and
 * step, and so do distinct steps for the same rank.
 */
uint64_t tally_quant_seed(uint64_t job_seed, unsigned int rank,
	uint64_t step);

/*
 * q[i] = encode(x[i]) for the n elements of the chunk that starts at
 * element offset of the tensor (offset + i is the counter of element i's
 * draw), with scale (tally_quant_scale()), levels (tally_quant_levels();
 * clamped to the width's maximum) and seed. Borrows x, writes q (caller's,
 * n elements; for i4 (n + 1) / 2 bytes); they must not overlap.
 */
void tally_quant_encode_i16(const float *x, int16_t *q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset);
void tally_quant_encode_i8(const float *x, int8_t *q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset);
void tally_quant_encode_i4(const float *x, uint8_t *q, size_t n,
	float scale, unsigned int levels, uint64_t seed, uint64_t offset);

/*
 * x[i] = sum[i] / scale for n sums: wide results (i32), or narrow ones in
 * the width and packing of the contributions (i16, i8, i4 nibbles as
 * encoded). scale is the one the contributions were encoded with. Borrows
 * sum, writes x (caller's, n floats); they must not overlap.
 */
void tally_quant_decode_i32(const int32_t *sum, float *x, size_t n,
	float scale);
void tally_quant_decode_i16(const int16_t *sum, float *x, size_t n,
	float scale);
void tally_quant_decode_i8(const int8_t *sum, float *x, size_t n,
	float scale);
void tally_quant_decode_i4(const uint8_t *sum, float *x, size_t n,
	float scale);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_QUANT_H */
