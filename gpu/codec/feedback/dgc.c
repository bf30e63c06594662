/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of DGC momentum correction and masking
 * (<tally/feedback.h>): loops over the element math of dgc_math.h, which
 * dgc.cu runs too.
 */
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>

#include "dgc_math.h"
#include "fb_mv.h"

/* u = m u + g; v = v + u. Borrows g; u and v are the caller's state. */
TALLY_FB_MV void
tally_dgc_accumulate(float *u, float *v, const float *g, size_t n,
	float momentum)
{
	for (size_t i = 0; i < n; i++) {
		float ui = tally_dgc_mom1(u[i], g[i], momentum);

		u[i] = ui;
		v[i] = tally_dgc_acc1(v[i], ui);
	}
}

/* mask = (|v| >= thr), 8 elements a byte; returns the bits set. */
TALLY_FB_MV size_t
tally_dgc_select(const float *restrict v, uint8_t *restrict mask, size_t n,
	float thr)
{
	size_t full = n / 8, cnt = 0;

	for (size_t b = 0; b < full; b++) {
		uint8_t m = tally_dgc_sel8(v + 8 * b, 8, thr);

		mask[b] = m;
		cnt += (size_t)__builtin_popcount(m);
	}
	if (n % 8 != 0) {
		uint8_t m = tally_dgc_sel8(v + 8 * full, (unsigned int)(n % 8),
			thr);

		mask[full] = m;
		cnt += (size_t)__builtin_popcount(m);
	}
	return cnt;
}

/* Element i of a take, its mask bit given. */
static inline void
take1(float *restrict v, float *restrict u, float *restrict sent, size_t i,
	unsigned int b)
{
	float vi = v[i];

	sent[i] = tally_dgc_pick(vi, b);
	v[i] = tally_dgc_keep(vi, b);
	u[i] = tally_dgc_keep(u[i], b);
}

/*
 * sent = v where masked (else 0); v and u zeroed where masked. A mask
 * byte, eight elements, at a time (so that the loop vectorizes).
 */
TALLY_FB_MV void
tally_dgc_take(float *restrict v, float *restrict u, float *restrict sent,
	const uint8_t *restrict mask, size_t n)
{
	size_t full = n / 8;

	for (size_t b = 0; b < full; b++) {
		unsigned int m = mask[b];

		for (unsigned int j = 0; j < 8; j++)
			take1(v, u, sent, 8 * b + j, (m >> j) & 1u);
	}
	for (size_t i = 8 * full; i < n; i++)
		take1(v, u, sent, i, tally_dgc_bit(mask, i));
}
