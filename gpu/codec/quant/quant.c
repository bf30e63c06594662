/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of the shared-scale stochastic quantizers
 * (<tally/quant.h>): plain loops over the element math of quant_math.h,
 * which the CUDA kernels run too. The loops vectorize; on x86-64 they are
 * cloned for x86-64-v4 (AVX-512 with 64-bit multiplies, which the hash
 * wants) and v3 (AVX2) and picked at load time.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include <tally/proto.h>
#include <tally/quant.h>

#include "quant_math.h"

_Static_assert(TALLY_QUANT_WORLD_MAX == TALLY_MAX_WORKERS,
	"quant world bound must match the wire's worker bound");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"i16 payloads are little-endian, written as native int16_t");

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("arch=x86-64-v4", \
	"arch=x86-64-v3", "default")))
#else
#define TALLY_MV
#endif

/* Levels for bits over world workers, narrow or wide; <tally/quant.h>. */
int
tally_quant_levels(unsigned int bits, unsigned int world, int narrow,
	unsigned int *levels)
{
	unsigned int max;

	if (levels == NULL || world == 0 || world > TALLY_QUANT_WORLD_MAX)
		return -EINVAL;
	switch (bits) {
	case 16:
		max = TALLY_QUANT_I16_LEVELS;
		break;
	case 8:
		max = TALLY_QUANT_I8_LEVELS;
		break;
	case 4:
		max = TALLY_QUANT_I4_LEVELS;
		break;
	default:
		return -EINVAL;
	}
	if (narrow)
		max /= world;
	if (max == 0)
		return -ERANGE;
	*levels = max;
	return 0;
}

/* levels / absmax; see <tally/quant.h>. Writes *scale only on success. */
int
tally_quant_scale(float absmax, unsigned int levels, float *scale)
{
	float s;

	if (scale == NULL || levels == 0 || levels > TALLY_QUANT_I16_LEVELS)
		return -EINVAL;
	if (!isfinite(absmax) || absmax < 0.0f)
		return -EINVAL;
	if (absmax == 0.0f)
		absmax = 1.0f;
	s = (float)levels / absmax;
	*scale = isinf(s) ? FLT_MAX : s;
	return 0;
}

/* A worker's seed for a step: a chain of bijections of each input. */
uint64_t
tally_quant_seed(uint64_t job_seed, unsigned int rank, uint64_t step)
{
	uint64_t h = tally_quant_mix64(job_seed ^ 0x243f6a8885a308d3ull);

	h = tally_quant_mix64(h ^ (uint64_t)rank);
	return tally_quant_mix64(h ^ step ^ 0x13198a2e03707344ull);
}

/*
 * The encoders run pairs of elements aligned in the tensor (global
 * indices 2p, 2p + 1: one hash each); a chunk at an odd offset starts
 * with a lone element, and an odd end leaves one.
 */

/* q[0..n) = encode(x[0..n)) at global index g; n even, g even. */
TALLY_MV static void
enc16_pairs(const float *restrict x, int16_t *restrict q, size_t n,
	float s, float lim, uint64_t key, uint64_t g)
{
	for (size_t k = 0; k < n / 2; k++) {
		int32_t q0, q1;

		tally_quant_enc_pair(x[2 * k], x[2 * k + 1], s, lim, key,
			g / 2 + k, &q0, &q1);
		q[2 * k] = (int16_t)q0;
		q[2 * k + 1] = (int16_t)q1;
	}
}

/* As enc16_pairs(), to i8. */
TALLY_MV static void
enc8_pairs(const float *restrict x, int8_t *restrict q, size_t n,
	float s, float lim, uint64_t key, uint64_t g)
{
	for (size_t k = 0; k < n / 2; k++) {
		int32_t q0, q1;

		tally_quant_enc_pair(x[2 * k], x[2 * k + 1], s, lim, key,
			g / 2 + k, &q0, &q1);
		q[2 * k] = (int8_t)q0;
		q[2 * k + 1] = (int8_t)q1;
	}
}

/* As enc16_pairs(), to i4: byte k holds the pair k. */
TALLY_MV static void
enc4_pairs(const float *restrict x, uint8_t *restrict q, size_t n,
	float s, float lim, uint64_t key, uint64_t g)
{
	for (size_t k = 0; k < n / 2; k++) {
		int32_t q0, q1;

		tally_quant_enc_pair(x[2 * k], x[2 * k + 1], s, lim, key,
			g / 2 + k, &q0, &q1);
		q[k] = tally_quant_pack4(q0, q1);
	}
}

/*
 * i4 for a chunk at an odd global index g: each byte's two elements
 * belong to two different pairs, so each element draws on its own.
 */
TALLY_MV static void
enc4_odd(const float *restrict x, uint8_t *restrict q, size_t n,
	float s, float lim, uint64_t key, uint64_t g)
{
	for (size_t k = 0; k < n / 2; k++) {
		int32_t q0 = tally_quant_enc1(x[2 * k], s, lim,
			tally_quant_draw(key, g + 2 * k));
		int32_t q1 = tally_quant_enc1(x[2 * k + 1], s, lim,
			tally_quant_draw(key, g + 2 * k + 1));

		q[k] = tally_quant_pack4(q0, q1);
	}
}

/* Encodes the lone element x at global index g. */
static int32_t
enc_one(float x, float s, float lim, uint64_t key, uint64_t g)
{
	return tally_quant_enc1(x, s, lim, tally_quant_draw(key, g));
}

/* To i16; see <tally/quant.h>. Borrows x, writes q. */
void
tally_quant_encode_i16(const float *x, int16_t *q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset)
{
	float lim = tally_quant_limit(levels, TALLY_QUANT_I16_LEVELS);
	uint64_t key = tally_quant_key(seed);

	if (n > 0 && (offset & 1)) {
		q[0] = (int16_t)enc_one(x[0], scale, lim, key, offset);
		x++, q++, n--, offset++;
	}
	enc16_pairs(x, q, n & ~(size_t)1, scale, lim, key, offset);
	if (n & 1)
		q[n - 1] = (int16_t)enc_one(x[n - 1], scale, lim, key,
			offset + n - 1);
}

/* To i8; see <tally/quant.h>. Borrows x, writes q. */
void
tally_quant_encode_i8(const float *x, int8_t *q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset)
{
	float lim = tally_quant_limit(levels, TALLY_QUANT_I8_LEVELS);
	uint64_t key = tally_quant_key(seed);

	if (n > 0 && (offset & 1)) {
		q[0] = (int8_t)enc_one(x[0], scale, lim, key, offset);
		x++, q++, n--, offset++;
	}
	enc8_pairs(x, q, n & ~(size_t)1, scale, lim, key, offset);
	if (n & 1)
		q[n - 1] = (int8_t)enc_one(x[n - 1], scale, lim, key,
			offset + n - 1);
}

/* To i4 nibbles, the chunk packed on its own. Borrows x, writes q. */
void
tally_quant_encode_i4(const float *x, uint8_t *q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset)
{
	float lim = tally_quant_limit(levels, TALLY_QUANT_I4_LEVELS);
	uint64_t key = tally_quant_key(seed);

	if (offset & 1)
		enc4_odd(x, q, n, scale, lim, key, offset);
	else
		enc4_pairs(x, q, n, scale, lim, key, offset);
	if (n & 1)
		q[n / 2] = tally_quant_pack4(enc_one(x[n - 1], scale, lim, key,
			offset + n - 1), 0);
}

/* x[0..n) = dec1(sum[0..n)); borrows sum, writes the caller's x. */
TALLY_MV static void
dec32_loop(const int32_t *restrict sum, float *restrict x, size_t n,
	float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_quant_dec1(sum[i], scale);
}

/* As dec32_loop(), from i16. */
TALLY_MV static void
dec16_loop(const int16_t *restrict sum, float *restrict x, size_t n,
	float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_quant_dec1(sum[i], scale);
}

/* As dec32_loop(), from i8. */
TALLY_MV static void
dec8_loop(const int8_t *restrict sum, float *restrict x, size_t n,
	float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_quant_dec1(sum[i], scale);
}

/* Wide i32 sums; borrows sum, writes x. */
void
tally_quant_decode_i32(const int32_t *sum, float *x, size_t n, float scale)
{
	dec32_loop(sum, x, n, scale);
}

/* Narrow i16 sums; borrows sum, writes x. */
void
tally_quant_decode_i16(const int16_t *sum, float *x, size_t n, float scale)
{
	dec16_loop(sum, x, n, scale);
}

/* Narrow i8 sums; borrows sum, writes x. */
void
tally_quant_decode_i8(const int8_t *sum, float *x, size_t n, float scale)
{
	dec8_loop(sum, x, n, scale);
}

/* As dec32_loop(), from i4 nibbles: byte k holds elements 2k, 2k + 1. */
TALLY_MV static void
dec4_pairs(const uint8_t *restrict sum, float *restrict x, size_t n,
	float scale)
{
	for (size_t k = 0; k < n / 2; k++) {
		x[2 * k] = tally_quant_dec1(tally_quant_nib(sum[k], 0), scale);
		x[2 * k + 1] = tally_quant_dec1(tally_quant_nib(sum[k], 1),
			scale);
	}
}

/* Narrow i4 sums; borrows sum ((n + 1) / 2 bytes), writes x. */
void
tally_quant_decode_i4(const uint8_t *sum, float *x, size_t n, float scale)
{
	dec4_pairs(sum, x, n, scale);
	if (n & 1)
		x[n - 1] = tally_quant_dec1(tally_quant_nib(sum[n / 2], 0),
			scale);
}
