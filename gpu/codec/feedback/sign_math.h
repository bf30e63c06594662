/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of sign votes with a majority (signSGD,
 * <tally/feedback.h>), shared by sign.c and sign.cu.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_SIGN_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_SIGN_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "fb_math.h"

/* The vote of x: 0 (-) when x < 0, else 1 (+): zeros and NaN vote +. */
static inline TALLY_HD unsigned int
tally_sign_bit1(float x)
{
	return !(x < 0.0f);
}

/*
 * Byte of the votes of x[0 .. cnt), cnt in 1..8: bit i is element i's;
 * the bits past cnt are 0.
 */
static inline TALLY_HD uint8_t
tally_sign_pack8(const float *x, unsigned int cnt)
{
	unsigned int b = 0;

	for (unsigned int i = 0; i < 8; i++)
		if (i < cnt)
			b |= tally_sign_bit1(x[i]) << i;
	return (uint8_t)b;
}

/*
 * A wide result decoded: c of world voted +; d = 2c - world; +scale when
 * d > 0 (a strict majority), -scale when d < 0, 0 on a tie.
 */
static inline TALLY_HD float
tally_sign_votes1(int32_t c, int32_t world, float scale)
{
	int32_t d = 2 * c - world;

	return d > 0 ? scale : (d < 0 ? -scale : 0.0f);
}

/*
 * A narrow result decoded: the majority bit, +scale when set, else
 * -scale (scale with its sign bit flipped: what negation does on both
 * sides; no branch on random bits).
 */
static inline TALLY_HD float
tally_sign_bits1(const uint8_t *bits, size_t i, float scale)
{
	uint32_t b = (bits[i >> 3] >> (i & 7)) & 1u;

	return tally_hd_u2f(tally_hd_f2u(scale) ^ ((b ^ 1u) << 31));
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_SIGN_MATH_H */
