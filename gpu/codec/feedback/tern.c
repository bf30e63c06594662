/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of the ternary codecs (<tally/feedback.h>): 2-bit with a
 * shared threshold and a residual, TernGrad, and the decoding of their
 * sums. Loops over the element math of tern_math.h, which tern.cu runs
 * too. The i4 encoders go through blocks of i8 values, then pack: both
 * passes vectorize, and the bytes are those of tally_tern_pack2() of the
 * same values, as on the GPU.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>

#include "fb_mv.h"
#include "tern_math.h"

#define TERN_BLOCK	512	/* elements of an i8 block before packing */

/* Largest e with 2^e <= thr, clamped. */
int
tally_2bit_exponent(float thr, int *exp)
{
	int k;

	if (exp == NULL || !isfinite(thr) || !(thr > 0.0f))
		return -EINVAL;
	/* thr = m 2^k, m in [0.5, 1): 2^(k-1) <= thr < 2^k. */
	(void)frexpf(thr, &k);
	k -= 1;
	k = k < TALLY_TERN_EXP_MIN ? TALLY_TERN_EXP_MIN : k;
	k = k > TALLY_TERN_EXP_MAX ? TALLY_TERN_EXP_MAX : k;
	*exp = k;
	return 0;
}

/* 2^exp, exp clamped. */
float
tally_2bit_threshold(int exp)
{
	return tally_2bit_t(exp);
}

/* Packs n i8 values q8 (each -8 .. 7) into (n + 1) / 2 i4 bytes. */
TALLY_FB_MV static void
pack_i4(const int8_t *restrict q8, uint8_t *restrict q4, size_t n)
{
	for (size_t b = 0; b < n / 2; b++)
		q4[b] = tally_tern_pack2(q8[2 * b], q8[2 * b + 1]);
	if (n % 2 != 0)
		q4[n / 2] = tally_tern_pack2(q8[n - 1], 0);
}

/* 2-bit steps on v = g + r (v = r without g); r in and out. */
TALLY_FB_MV static void
twobit_loop(float *restrict r, const float *restrict g, int8_t *restrict q8,
	size_t n, float t, float lim)
{
	if (g != NULL) {
		for (size_t i = 0; i < n; i++)
			q8[i] = (int8_t)tally_2bit_step1(tally_fb_add(g[i],
				r[i]), t, lim, &r[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			q8[i] = (int8_t)tally_2bit_step1(r[i], t, lim, &r[i]);
	}
}

/* 2-bit steps into i4 bytes, a block of i8 at a time. */
void
tally_2bit_encode_i4(float *r, const float *g, uint8_t *q4, size_t n,
	int exp)
{
	float t = tally_2bit_t(exp), lim = tally_2bit_lim(exp);
	int8_t q8[TERN_BLOCK];

	for (size_t at = 0; at < n; at += TERN_BLOCK) {
		size_t l = n - at < TERN_BLOCK ? n - at : TERN_BLOCK;

		twobit_loop(r + at, g != NULL ? g + at : NULL, q8, l, t, lim);
		pack_i4(q8, q4 + at / 2, l);
	}
}

/* 2-bit steps into i8 values. */
void
tally_2bit_encode_i8(float *r, const float *g, int8_t *q8, size_t n, int exp)
{
	twobit_loop(r, g, q8, n, tally_2bit_t(exp), tally_2bit_lim(exp));
}

/* A scale TernGrad can divide by. */
static int
scale_ok(float s)
{
	return isfinite(s) && s > 0.0f;
}

/* TernGrad draws of g[0 .. n) at global indices offset + i. */
TALLY_FB_MV64 static void
tern_loop(const float *restrict g, int8_t *restrict q8, size_t n, float s,
	uint64_t key, uint64_t offset)
{
	for (size_t i = 0; i < n; i++)
		q8[i] = (int8_t)tally_tern_q1(g[i], s, key, offset + i);
}

/* TernGrad into i4 bytes, a block of i8 at a time. */
int
tally_tern_encode_i4(const float *g, uint8_t *q4, size_t n, float scale,
	uint64_t seed, uint64_t offset)
{
	uint64_t key = tally_fb_key(seed);
	int8_t q8[TERN_BLOCK];

	if (!scale_ok(scale))
		return -EINVAL;
	for (size_t at = 0; at < n; at += TERN_BLOCK) {
		size_t l = n - at < TERN_BLOCK ? n - at : TERN_BLOCK;

		tern_loop(g + at, q8, l, scale, key, offset + at);
		pack_i4(q8, q4 + at / 2, l);
	}
	return 0;
}

/* TernGrad into i8 values, element i at global index offset + i. */
int
tally_tern_encode_i8(const float *g, int8_t *q8, size_t n, float scale,
	uint64_t seed, uint64_t offset)
{
	if (!scale_ok(scale))
		return -EINVAL;
	tern_loop(g, q8, n, scale, tally_fb_key(seed), offset);
	return 0;
}

/* x = sum * scale, wide sums. */
TALLY_FB_MV void
tally_tern_decode_i32(const int32_t *restrict sum, float *restrict x,
	size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_tern_dec1(sum[i], scale);
}

/* x = sum * scale, narrow i8 sums. */
TALLY_FB_MV void
tally_tern_decode_i8(const int8_t *restrict sum, float *restrict x, size_t n,
	float scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_tern_dec1(sum[i], scale);
}

/* x = sum * scale, narrow i4 sums: a byte, two elements, at a time. */
TALLY_FB_MV void
tally_tern_decode_i4(const uint8_t *restrict sum, float *restrict x,
	size_t n, float scale)
{
	for (size_t b = 0; b < n / 2; b++) {
		x[2 * b] = tally_tern_dec1(tally_tern_nib(sum[b], 0), scale);
		x[2 * b + 1] = tally_tern_dec1(tally_tern_nib(sum[b], 1),
			scale);
	}
	if (n % 2 != 0)
		x[n - 1] = tally_tern_dec1(tally_tern_nib(sum[n / 2], 0), scale);
}
