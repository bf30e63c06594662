/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of shared-seed random-k (<tally/feedback.h>): loops over
 * the index math of randk_math.h, which randk.cu runs too.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <tally/feedback.h>

#include "randk_math.h"

#define RANDK_BLOCK	256	/* indices computed before their loads */

/*
 * d n rounded to nearest (not up: 0.07 * 100 is 7.000000000000001 in
 * doubles), at least 1 when n > 0; 0 for a density outside (0, 1].
 */
uint64_t
tally_randk_k(uint64_t n, double density)
{
	double k;

	if (n == 0 || !(density > 0.0) || density > 1.0)
		return 0;
	k = nearbyint(density * (double)n);
	if (k < 1.0)
		return 1;
	return k >= (double)n ? n : (uint64_t)k;
}

/* first + cnt <= n, without overflow. */
static int
range_ok(uint64_t first, size_t cnt, uint64_t n)
{
	return first <= n && (uint64_t)cnt <= n - first;
}

/* idx[j] = index first + j. */
int
tally_randk_indices(uint64_t *idx, uint64_t first, size_t cnt, uint64_t n,
	uint64_t seed)
{
	struct tally_randk_key key = tally_randk_key(seed, n);

	if (!range_ok(first, cnt, n))
		return -EINVAL;
	for (size_t j = 0; j < cnt; j++)
		idx[j] = tally_randk_index(&key, first + j);
	return 0;
}

/*
 * y[j] = x[index first + j]. The indices of a block first, then the
 * loads in a tight loop: many misses in flight instead of one per index
 * computation.
 */
int
tally_randk_gather(const float *restrict x, float *restrict y, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed)
{
	struct tally_randk_key key = tally_randk_key(seed, n);
	uint64_t idx[RANDK_BLOCK];

	if (!range_ok(first, cnt, n))
		return -EINVAL;
	for (size_t at = 0; at < cnt; at += RANDK_BLOCK) {
		size_t l = cnt - at < RANDK_BLOCK ? cnt - at : RANDK_BLOCK;

		for (size_t j = 0; j < l; j++)
			idx[j] = tally_randk_index(&key, first + at + j);
		for (size_t j = 0; j < l; j++)
			y[at + j] = x[idx[j]];
	}
	return 0;
}

/* y[j] = x[index first + j], then that element of x = 0; by blocks. */
int
tally_randk_take(float *restrict x, float *restrict y, uint64_t first,
	size_t cnt, uint64_t n, uint64_t seed)
{
	struct tally_randk_key key = tally_randk_key(seed, n);
	uint64_t idx[RANDK_BLOCK];

	if (!range_ok(first, cnt, n))
		return -EINVAL;
	for (size_t at = 0; at < cnt; at += RANDK_BLOCK) {
		size_t l = cnt - at < RANDK_BLOCK ? cnt - at : RANDK_BLOCK;

		for (size_t j = 0; j < l; j++)
			idx[j] = tally_randk_index(&key, first + at + j);
		for (size_t j = 0; j < l; j++) {
			y[at + j] = x[idx[j]];
			x[idx[j]] = 0.0f;
		}
	}
	return 0;
}

/* x[index first + j] = y[j] * scale. */
int
tally_randk_scatter(const float *restrict y, float *restrict x,
	uint64_t first, size_t cnt, uint64_t n, uint64_t seed, float scale)
{
	struct tally_randk_key key = tally_randk_key(seed, n);

	if (!range_ok(first, cnt, n))
		return -EINVAL;
	for (size_t j = 0; j < cnt; j++)
		x[tally_randk_index(&key, first + j)] =
			tally_fb_canon(tally_fb_mul(y[j], scale));
	return 0;
}
