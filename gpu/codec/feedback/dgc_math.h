/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of DGC momentum correction and momentum factor masking
 * (<tally/feedback.h>), shared by dgc.c and dgc.cu.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_DGC_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_DGC_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "fb_math.h"

/* u' = m * u + g (two roundings: never fused). */
static inline TALLY_HD float
tally_dgc_mom1(float u, float g, float m)
{
	return tally_fb_canon(tally_fb_add(tally_fb_mul(m, u), g));
}

/* v' = v + u' (the velocity accumulates the corrected momentum). */
static inline TALLY_HD float
tally_dgc_acc1(float v, float u)
{
	return tally_fb_canon(tally_fb_add(v, u));
}

/* 1 when |v| >= thr (never for a NaN v or thr). */
static inline TALLY_HD unsigned int
tally_dgc_sel1(float v, float thr)
{
	return fabsf(v) >= thr;
}

/*
 * Mask byte of elements v[0 .. cnt), cnt in 1..8: bit i set when element
 * i is selected; the bits past cnt are 0.
 */
static inline TALLY_HD uint8_t
tally_dgc_sel8(const float *v, unsigned int cnt, float thr)
{
	unsigned int b = 0;

	for (unsigned int i = 0; i < 8; i++)
		if (i < cnt)
			b |= tally_dgc_sel1(v[i], thr) << i;
	return (uint8_t)b;
}

/*
 * Taking, by bits rather than branches (the mask bits are random): x when
 * b is 1, else +0 (pick); +0 when b is 1, else x (keep).
 */
static inline TALLY_HD float
tally_dgc_pick(float x, unsigned int b)
{
	return tally_hd_u2f(tally_hd_f2u(x) & (0u - b));
}

static inline TALLY_HD float
tally_dgc_keep(float x, unsigned int b)
{
	return tally_hd_u2f(tally_hd_f2u(x) & (b - 1u));
}

/* Bit i of a mask (bit i mod 8 of byte i / 8). */
static inline TALLY_HD unsigned int
tally_dgc_bit(const uint8_t *mask, size_t i)
{
	return (mask[i >> 3] >> (i & 7)) & 1u;
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_DGC_MATH_H */
