/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element math of error feedback (<tally/feedback.h>), shared by ef.c and
 * ef.cu.
 */
#ifndef TALLY_GPU_CODEC_FEEDBACK_EF_MATH_H
#define TALLY_GPU_CODEC_FEEDBACK_EF_MATH_H

#include "fb_math.h"

/* v = g + r: what is offered to the compressor. */
static inline TALLY_HD float
tally_ef_apply1(float g, float r)
{
	return tally_fb_canon(tally_fb_add(g, r));
}

/* r' = v - sent: the part of v that was not sent. */
static inline TALLY_HD float
tally_ef_update1(float v, float sent)
{
	return tally_fb_canon(tally_fb_sub(v, sent));
}

/*
 * 0 when sent + r == v holds exactly (as real numbers) for r =
 * tally_ef_update1(v, sent), else 1. Knuth's TwoSum of v and -sent gives
 * the rounding error of the subtraction exactly, (v - sent) - r = err,
 * so the residual is exact when err is 0. A NaN anywhere makes err NaN
 * (counted); v = +-inf with a finite sent leaves r = v, which counts as
 * conserved (sent + r is v); an infinite sent or an overflowing
 * difference does not.
 */
static inline TALLY_HD unsigned int
tally_ef_inexact1(float v, float sent, float r)
{
	float ns = -sent;
	float bb = tally_fb_sub(r, v);
	float err = tally_fb_add(tally_fb_sub(v, tally_fb_sub(r, bb)),
		tally_fb_sub(ns, bb));
	unsigned int ok = err == 0.0f;

	ok |= tally_fb_isinf(v) & tally_fb_isfinite(sent);
	return ok ^ 1u;
}

#endif /* TALLY_GPU_CODEC_FEEDBACK_EF_MATH_H */
