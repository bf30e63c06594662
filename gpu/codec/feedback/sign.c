/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of sign votes with a majority (<tally/feedback.h>): loops
 * over the element math of sign_math.h, which sign.cu runs too.
 */
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>

#include "fb_mv.h"
#include "sign_math.h"

/* The votes of x, eight a byte. */
TALLY_FB_MV void
tally_sign_encode(const float *restrict x, uint8_t *restrict bits, size_t n)
{
	size_t full = n / 8;

	for (size_t b = 0; b < full; b++)
		bits[b] = tally_sign_pack8(x + 8 * b, 8);
	if (n % 8 != 0)
		bits[full] = tally_sign_pack8(x + 8 * full,
			(unsigned int)(n % 8));
}

/* Wide results: counts of + votes out of world. */
TALLY_FB_MV void
tally_sign_decode_votes(const int8_t *restrict votes, float *restrict x,
	size_t n, unsigned int world, float scale)
{
	int32_t w = world > 255 ? 255 : (int32_t)world;

	for (size_t i = 0; i < n; i++)
		x[i] = tally_sign_votes1(votes[i], w, scale);
}

/* Narrow results: majority bits, a byte (eight elements) at a time. */
TALLY_FB_MV void
tally_sign_decode_bits(const uint8_t *restrict bits, float *restrict x,
	size_t n, float scale)
{
	size_t full = n / 8;

	for (size_t b = 0; b < full; b++)
		for (unsigned int j = 0; j < 8; j++)
			x[8 * b + j] = tally_sign_bits1(bits, 8 * b + j, scale);
	for (size_t i = 8 * full; i < n; i++)
		x[i] = tally_sign_bits1(bits, i, scale);
}
