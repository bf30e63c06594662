/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of error feedback (<tally/feedback.h>): loops over the
 * element math of ef_math.h, which ef.cu runs too.
 */
#include <stddef.h>

#include <tally/feedback.h>

#include "ef_math.h"
#include "fb_mv.h"

/* v = g + r; v may be g or r (no restrict: in place is allowed). */
TALLY_FB_MV void
tally_ef_apply(float *v, const float *g, const float *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = tally_ef_apply1(g[i], r[i]);
}

/* r = v - sent, counting the elements whose residual is not exact. */
TALLY_FB_MV size_t
tally_ef_update(float *r, const float *v, const float *sent, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		float vi = v[i], si = sent[i];
		float ri = tally_ef_update1(vi, si);

		bad += tally_ef_inexact1(vi, si, ri);
		r[i] = ri;
	}
	return bad;
}
