/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Block selection (<tally/sparse.h>) against a plain model: a block is
 * selected iff one of its elements has magnitude >= threshold, no other;
 * bitmap, list and counts agree; block maxima; block-level exact top-k;
 * the moments against double sums, and their fixed order (the same bits
 * every time).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <tally/sparse.h>

#include "synth.h"

#define B	TALLY_SPARSE_BLOCK

static const size_t sizes[] = {
	0, 1, 31, 255, 256, 257, 8191, 8192 + 7, 32 * 256 * 5 + 1,
	(1u << 20) + 3,
};
#define N_MAX	((1u << 20) + 3)

/* Magnitude as the rule reads it: NaN 0. */
static float
mag(float x)
{
	return isnan(x) ? 0.0f : fabsf(x);
}

/* n Student-t values, with NaN, infinities and zero runs mixed in. */
static float *
data(size_t n, uint64_t seed)
{
	float *x = malloc((n > 0 ? n : 1) * sizeof(*x));
	uint64_t s = seed;

	assert_non_null(x);
	synth_fill(x, n, SYNTH_STUDENT3, 0, 1.0, seed);
	for (size_t i = 0; i < n; i++) {
		uint64_t r = synth_next(&s) % 4096;

		if (r == 0)
			x[i] = NAN;
		else if (r == 1)
			x[i] = (i & 1) ? INFINITY : -INFINITY;
	}
	/* A few blocks of zeros, and of tiny values. */
	for (size_t b = 3; b * B < n; b += 7)
		for (size_t i = b * B; i < n && i < (b + 1) * B; i++)
			x[i] = (b % 2) ? 0.0f : x[i] * 1e-6f;
	return x;
}

/* Checks tally_sparse_select(x, n, t) against the model. */
static void
check_select(const float *x, size_t n, float t)
{
	size_t nb = TALLY_SPARSE_NBLOCKS(n), nw = TALLY_SPARSE_BITMAP_WORDS(n);
	uint32_t *bitmap = malloc((nw + 1) * sizeof(*bitmap));
	uint32_t *blocks = malloc((nb + 1) * sizeof(*blocks));
	struct tally_sparse_sel sel, sel2;
	size_t elems = 0, nsel = 0;

	assert_non_null(bitmap);
	assert_non_null(blocks);
	memset(bitmap, 0xa5, (nw + 1) * sizeof(*bitmap));
	assert_int_equal(tally_sparse_select(x, n, t, bitmap, blocks, &sel), 0);
	for (size_t b = 0; b < nb; b++) {
		int want = 0;

		for (size_t i = b * B; i < n && i < (b + 1) * B; i++) {
			want |= mag(x[i]) >= t;
			elems += mag(x[i]) >= t;
		}
		assert_int_equal((bitmap[b / 32] >> (b % 32)) & 1, want);
		if (want) {
			assert_int_equal(blocks[nsel], b);
			nsel++;
		}
	}
	/* Bits past the last block are 0; the word past the map untouched. */
	if (nb % 32 != 0)
		assert_int_equal(bitmap[nw - 1] >> (nb % 32), 0);
	assert_int_equal(bitmap[nw], 0xa5a5a5a5u);
	assert_int_equal(sel.elems, elems);
	assert_int_equal(sel.blocks, nsel);
	assert_true(sel.elem_density == (n ? (double)elems / n : 0.0));
	assert_true(sel.block_density == (nb ? (double)nsel / nb : 0.0));
	/* Outputs are optional. */
	assert_int_equal(tally_sparse_select(x, n, t, NULL, NULL, &sel2), 0);
	assert_int_equal(sel2.elems, elems);
	assert_int_equal(tally_sparse_select(x, n, t, NULL, NULL, NULL), 0);
	free(bitmap);
	free(blocks);
}

static void
invariants(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		float *x = data(n, 20 + i);
		const float ts[] = { FLT_TRUE_MIN, 1e-6f, 0.5f, 3.0f, 10.0f,
			FLT_MAX, INFINITY };

		for (size_t j = 0; j < sizeof(ts) / sizeof(ts[0]); j++)
			check_select(x, n, ts[j]);
		for (int e = 0; e < TALLY_SPARSE_EST_MAX_; e++) {
			float t;

			assert_int_equal(tally_sparse_threshold(x, n, 0.01, e,
				NULL, &t), 0);
			check_select(x, n, t);
		}
		free(x);
	}
}

static void
select_args(void **state)
{
	float x[4] = { 1, 2, 3, 4 };
	uint32_t bm;

	(void)state;
	assert_int_equal(tally_sparse_select(x, 4, 0.0f, &bm, NULL, NULL),
		-EINVAL);
	assert_int_equal(tally_sparse_select(x, 4, -1.0f, &bm, NULL, NULL),
		-EINVAL);
	assert_int_equal(tally_sparse_select(x, 4, NAN, &bm, NULL, NULL),
		-EINVAL);
	assert_int_equal(tally_sparse_select(NULL, 4, 1.0f, &bm, NULL, NULL),
		-EINVAL);
	assert_int_equal(tally_sparse_select(x, TALLY_SPARSE_N_MAX + 1, 1.0f,
		&bm, NULL, NULL), -EINVAL);
	assert_int_equal(tally_sparse_select(NULL, 0, 1.0f, NULL, NULL, NULL),
		0);
}

/* Block maxima against the model; block top-k selects exactly kb. */
static void
block_max_topk(void **state)
{
	static const double ds[] = { 0.5, 0.1, 0.01, 1e-9 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], nb = TALLY_SPARSE_NBLOCKS(n);
		float *x = data(n, 40 + i);
		float *bmax = malloc((nb + 1) * sizeof(*bmax));

		assert_non_null(bmax);
		tally_sparse_block_max(x, n, bmax);
		for (size_t b = 0; b < nb; b++) {
			float m = 0;

			for (size_t k = b * B; k < n && k < (b + 1) * B; k++)
				m = mag(x[k]) > m ? mag(x[k]) : m;
			assert_memory_equal(&bmax[b], &m, sizeof(m));
		}
		for (size_t j = 0; n > 0 && j < sizeof(ds) / sizeof(ds[0]);
		     j++) {
			size_t kb = (size_t)floor(ds[j] * nb + 0.5), gt = 0;
			struct tally_sparse_sel sel;
			float t;

			kb = kb < 1 ? 1 : kb;
			assert_int_equal(tally_sparse_block_topk(x, n, ds[j],
				&t), 0);
			assert_int_equal(tally_sparse_select(x, n, t, NULL,
				NULL, &sel), 0);
			for (size_t b = 0; b < nb; b++)
				gt += bmax[b] > t;
			/* kb-th largest block maximum (ties all kept). */
			assert_true(gt < kb && kb <= sel.blocks);
			if (bmax != NULL && t > 0.0f)
				check_select(x, n, t);
		}
		free(bmax);
		free(x);
	}
	{
		float t;

		assert_int_equal(tally_sparse_block_topk(NULL, 1, 0.1, &t),
			-EINVAL);
		assert_int_equal(tally_sparse_block_topk(NULL, 0, 0.1, &t), 0);
		assert_true(t == FLT_TRUE_MIN);
	}
}

/* Moments against double sums; the same bits on every call. */
static void
moments(void **state)
{
	static const float ts[] = { 0.0f, 0.5f, 2.0f, 1e30f };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		float *x = data(n, 60 + i);

		for (size_t j = 0; j < sizeof(ts) / sizeof(ts[0]); j++) {
			struct tally_sparse_moments m, m2;
			double s = 0, s2 = 0, sl = 0;
			uint64_t c = 0;

			for (size_t k = 0; k < n; k++) {
				double a = fabs((double)x[k]), y;

				if (!isfinite(x[k]) || !(a > ts[j]))
					continue;
				y = (double)(float)(a - ts[j]);
				c++;
				s += y;
				s2 += y * y;
				sl += log(y);
			}
			assert_int_equal(tally_sparse_moments(x, n, ts[j],
				TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG, &m), 0);
			assert_int_equal(m.count, c);
			assert_true(fabs(m.sum - s) <= 1e-5 * s + 1e-30);
			assert_true(fabs(m.sum2 - s2) <= 1e-5 * s2 + 1e-30);
			assert_true(fabs(m.sumlog - sl) <= 1e-5 * fabs(sl) +
				1e-6 * c + 1e-30);
			assert_int_equal(tally_sparse_moments(x, n, ts[j],
				TALLY_SPARSE_M_SQ | TALLY_SPARSE_M_LOG, &m2), 0);
			assert_memory_equal(&m, &m2, sizeof(m));
			/* Unwanted fields are 0; wanted ones the same bits. */
			assert_int_equal(tally_sparse_moments(x, n, ts[j], 0,
				&m2), 0);
			assert_true(m2.sum2 == 0 && m2.sumlog == 0);
			assert_memory_equal(&m2.sum, &m.sum, sizeof(m.sum));
			assert_int_equal(m2.count, m.count);
			assert_int_equal(tally_sparse_moments(x, n, ts[j],
				TALLY_SPARSE_M_LOG, &m2), 0);
			assert_memory_equal(&m2.sumlog, &m.sumlog,
				sizeof(m.sumlog));
			assert_true(m2.sum2 == 0);
		}
		free(x);
	}
}

static void
moments_args(void **state)
{
	struct tally_sparse_moments m;
	float x[2] = { 1, 2 };

	(void)state;
	assert_int_equal(tally_sparse_moments(x, 2, -1.0f, 0, &m), -EINVAL);
	assert_int_equal(tally_sparse_moments(x, 2, NAN, 0, &m), -EINVAL);
	assert_int_equal(tally_sparse_moments(x, 2, INFINITY, 0, &m), -EINVAL);
	assert_int_equal(tally_sparse_moments(x, 2, 0.0f, 4, &m), -EINVAL);
	assert_int_equal(tally_sparse_moments(NULL, 2, 0.0f, 0, &m), -EINVAL);
	assert_int_equal(tally_sparse_moments(x, 2, 0.0f, 0, NULL), -EINVAL);
	assert_int_equal(tally_sparse_moments(NULL, 0, 0.0f, 0, &m), 0);
	assert_int_equal(m.count, 0);
	assert_true(m.sum == 0.0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(invariants),
		cmocka_unit_test(select_args),
		cmocka_unit_test(block_max_topk),
		cmocka_unit_test(moments),
		cmocka_unit_test(moments_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
