/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The element math of block-sparse selection (gpu/codec/sparse/
 * sparse_math.h, which the CUDA kernels run too) against libm and plain
 * definitions, the host math of SIDCo-G (the regularized incomplete
 * gamma and its inverse against closed forms), and SIDCo's sample: its
 * plan, and the CPU's gather against the element map the GPU reads by.
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

#include "codec/sparse/sparse_int.h"
#include "codec/sparse/sparse_math.h"
#include "synth.h"

static float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * ln y within 4e-7 relative (or 1e-12 absolute near y = 1) over every
 * exponent, subnormals included, and at the edges of the mantissa range.
 */
static void
log_accuracy(void **state)
{
	uint64_t s = 1;
	double worst = 0;

	(void)state;
	for (int i = 0; i < 2000000; i++) {
		uint32_t u = (uint32_t)(synth_next(&s) >> 33) % 0x7f800000u;
		float y;
		double want, got, err;

		if (u == 0)
			continue;
		y = from_bits(u);
		want = log((double)y);
		got = tally_sparse_log(y);
		err = fabs(got - want);
		if (fabs(want) > 1e-3)
			err /= fabs(want);
		else
			err = err > 1e-12 ? err / 1e-3 : 0;
		worst = err > worst ? err : worst;
	}
	assert_true(worst < 4e-7);
	assert_true(tally_sparse_log(1.0f) == 0.0f);
	assert_true(fabs(tally_sparse_log(FLT_TRUE_MIN) - log(FLT_TRUE_MIN)) <
		1e-4);
	assert_true(fabs(tally_sparse_log(FLT_MAX) - log(FLT_MAX)) < 1e-4);
	/* log0 masks what is not positive. */
	assert_true(tally_sparse_log0(0.0f) == 0.0f);
	assert_true(tally_sparse_log0(-1.0f) == 0.0f);
}

/* Keys: |x|'s bits, NaN 0, infinities the largest. */
static void
keys(void **state)
{
	(void)state;
	assert_int_equal(tally_sparse_key(-0.0f), 0);
	assert_int_equal(tally_sparse_key(NAN), 0);
	assert_int_equal(tally_sparse_key(-NAN), 0);
	assert_int_equal(tally_sparse_key(from_bits(0xffc12345u)), 0);
	assert_int_equal(tally_sparse_key(-INFINITY), TALLY_SPARSE_KEY_INF);
	assert_int_equal(tally_sparse_key(-2.0f), 0x40000000u);
	assert_int_equal(tally_sparse_key(FLT_TRUE_MIN), 1);
	assert_int_equal(tally_sparse_thr_key(0.0f), 1);
	assert_int_equal(tally_sparse_thr_key(1.0f), 0x3f800000u);
	/* Keys order as magnitudes. */
	assert_true(tally_sparse_key(-3.0f) > tally_sparse_key(2.5f));
	assert_true(tally_sparse_key(FLT_MAX) < tally_sparse_key(INFINITY));
}

/* Exceedances: |x| - t for finite |x| > t, else 0. */
static void
exceedances(void **state)
{
	(void)state;
	assert_true(tally_sparse_exceed(-3.0f, 1.0f) == 2.0f);
	assert_true(tally_sparse_exceed(3.0f, 0.0f) == 3.0f);
	assert_true(tally_sparse_exceed(1.0f, 1.0f) == 0.0f);
	assert_true(tally_sparse_exceed(0.5f, 1.0f) == 0.0f);
	assert_true(tally_sparse_exceed(0.0f, 0.0f) == 0.0f);
	assert_true(tally_sparse_exceed(-0.0f, 0.0f) == 0.0f);
	assert_true(tally_sparse_exceed(NAN, 0.0f) == 0.0f);
	assert_true(tally_sparse_exceed(INFINITY, 0.0f) == 0.0f);
	assert_true(tally_sparse_exceed(-INFINITY, 1.0f) == 0.0f);
	assert_true(tally_sparse_exceed(FLT_MAX, 0.0f) == FLT_MAX);
	/* Neighbours: the difference is one ulp, never 0. */
	assert_true(tally_sparse_exceed(nextafterf(1.0f, 2.0f), 1.0f) > 0.0f);
	assert_true(tally_sparse_exceed(2 * FLT_TRUE_MIN, FLT_TRUE_MIN) ==
		FLT_TRUE_MIN);
}

/* DGC's positions: one in each stratum, deterministic, near uniform. */
static void
sample_positions(void **state)
{
	const size_t n = 1000003, stride = 100;
	size_t m = (n + stride - 1) / stride, hist[10] = { 0 };

	(void)state;
	for (size_t j = 0; j < m; j++) {
		size_t p = tally_sparse_sample_pos(7, j, stride, n);

		assert_true(p >= j * stride && p < n &&
			p < (j + 1) * stride);
		assert_true(p == tally_sparse_sample_pos(7, j, stride, n));
		if (p - j * stride < stride && j + 1 < m)
			hist[(p - j * stride) / 10]++;
	}
	/* Every tenth of the strata gets its share, within 5 %. */
	for (int i = 0; i < 10; i++)
		assert_true(fabs((double)hist[i] / ((m - 1) / 10.0) - 1.0) <
			0.05);
	/* Another seed, another sample. */
	assert_true(tally_sparse_sample_pos(7, 5, stride, n) !=
		tally_sparse_sample_pos(8, 5, stride, n) ||
		tally_sparse_sample_pos(7, 6, stride, n) !=
		tally_sparse_sample_pos(8, 6, stride, n));
}

/* The fixed tree adds up like a plain sum, within float rounding. */
static void
tree_sum(void **state)
{
	float t[TALLY_SPARSE_BLOCK];
	uint64_t s = 3;

	(void)state;
	for (int r = 0; r < 1000; r++) {
		double want = 0;

		for (int i = 0; i < TALLY_SPARSE_BLOCK; i++) {
			t[i] = (float)synth_unif(&s);
			want += t[i];
		}
		assert_true(fabs(tally_sparse_tree256(t) - want) < 1e-4);
	}
	for (int i = 0; i < TALLY_SPARSE_BLOCK; i++)
		t[i] = 1.0f;
	assert_true(tally_sparse_tree256(t) == 256.0f);
}

/* Q(a, x) against closed forms: a = 1, 2, 3 and 1/2. */
static void
gamma_q(void **state)
{
	static const double xs[] = { 0.0, 1e-6, 0.01, 0.3, 1.0, 2.5, 7.0,
		20.0, 60.0 };

	(void)state;
	for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
		double x = xs[i], e = exp(-x);

		assert_true(fabs(sparse_gamma_q(1.0, x) - e) <= 1e-13 + 1e-12 * e);
		assert_true(fabs(sparse_gamma_q(2.0, x) - (1 + x) * e) <=
			1e-13 + 1e-12 * (1 + x) * e);
		assert_true(fabs(sparse_gamma_q(3.0, x) -
			(1 + x + x * x / 2) * e) <= 1e-13 + 1e-11 *
			(1 + x + x * x / 2) * e);
		assert_true(fabs(sparse_gamma_q(0.5, x) - erfc(sqrt(x))) <=
			1e-13 + 1e-11 * erfc(sqrt(x)));
	}
}

/* The inverse: Q(a, inv(a, q)) = q over shapes and tails. */
static void
gamma_q_inverse(void **state)
{
	static const double as[] = { 0.02, 0.1, 0.3, 0.5, 0.9, 1.0, 1.5, 3.0,
		10.0, 50.0 };
	static const double qs[] = { 0.9, 0.5, 0.25, 0.1, 0.01, 1e-3, 1e-4,
		1e-6 };

	(void)state;
	for (size_t i = 0; i < sizeof(as) / sizeof(as[0]); i++) {
		for (size_t j = 0; j < sizeof(qs) / sizeof(qs[0]); j++) {
			double x = sparse_gamma_q_inv(as[i], qs[j]);

			assert_true(x > 0.0);
			assert_true(fabs(sparse_gamma_q(as[i], x) - qs[j]) <=
				1e-9 * qs[j]);
		}
	}
	/* Exponential: -ln q. */
	assert_true(fabs(sparse_gamma_q_inv(1.0, 0.01) - log(100.0)) < 1e-10);
}

/* Counting helpers: k and the key's threshold. */
static void
topk_helpers(void **state)
{
	size_t stride, m;

	(void)state;
	assert_int_equal(sparse_topk_k(1000, 0.01), 10);
	assert_int_equal(sparse_topk_k(1000, 0.0001), 1);
	assert_int_equal(sparse_topk_k(1000, 1.0), 1000);
	assert_int_equal(sparse_topk_k(1001, 0.5), 501);
	assert_true(sparse_key_threshold(0) == FLT_TRUE_MIN);
	assert_true(sparse_key_threshold(0x3f800000u) == 1.0f);
	sparse_dgc_plan(25000000, 0.01, &stride, &m);
	assert_int_equal(stride, 100);
	assert_int_equal(m, 250000);
	/* Small tensors: at least TALLY_SPARSE_DGC_MIN_SAMPLE, or all. */
	sparse_dgc_plan(100000, 0.01, &stride, &m);
	assert_true(m >= TALLY_SPARSE_DGC_MIN_SAMPLE);
	sparse_dgc_plan(1000, 0.01, &stride, &m);
	assert_int_equal(stride, 1);
	assert_int_equal(m, 1000);
}

/*
 * SIDCo's sample plan: every element of fewer runs than twice
 * TALLY_SPARSE_SIDCO_SAMPLE makes by default, between it and twice it
 * above; a given fraction as the
 * stride of runs, never below TALLY_SPARSE_SIDCO_MIN_SAMPLE elements
 * (or all); the elements counted with a short last run.
 */
static void
sidco_sample_plan(void **state)
{
	static const size_t ns[] = { 0, 1, 17, 300001, 2097136, 2097137,
		2097152, 3000017, 25000000, 100000007 };
	struct sparse_sample ss;

	(void)state;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		size_t n = ns[i], nr = TALLY_SPARSE_SIDCO_RUNS(n);

		sparse_sidco_sample(n, 0.0, 9, &ss);
		if (nr < 2 * (size_t)(TALLY_SPARSE_SIDCO_SAMPLE /
		    TALLY_SPARSE_SIDCO_RUN)) {
			assert_int_equal(ss.stride, 1);
			assert_int_equal(ss.m, nr);
			assert_int_equal(ss.elems, n);
		} else {
			assert_true(ss.elems >= TALLY_SPARSE_SIDCO_SAMPLE -
				TALLY_SPARSE_SIDCO_RUN);
			assert_true(ss.elems <= 2 * (size_t)
				TALLY_SPARSE_SIDCO_SAMPLE);
		}
		assert_int_equal(ss.m, (nr + ss.stride - 1) / ss.stride);
		sparse_sidco_sample(n, 1.0, 9, &ss);
		assert_int_equal(ss.stride, 1);
		assert_int_equal(ss.elems, n);
		sparse_sidco_sample(n, 1e-6, 9, &ss);
		assert_true(ss.elems >= (n < TALLY_SPARSE_SIDCO_MIN_SAMPLE ?
			n : TALLY_SPARSE_SIDCO_MIN_SAMPLE -
			TALLY_SPARSE_SIDCO_RUN));
	}
	sparse_sidco_sample(25000000, 0.0, 9, &ss);
	assert_int_equal(ss.stride, 23);
	assert_int_equal(ss.m, 67935);
	sparse_sidco_sample(25000000, 0.25, 9, &ss);
	assert_int_equal(ss.stride, 4);
	assert_int_equal(ss.m, 390625);
	assert_int_equal(ss.elems, 6250000);
}

/*
 * The CPU gathers SIDCo's sample run by run; the GPU reads element v of
 * it at tally_sparse_sample_elem(): the same elements in the same order,
 * n (nothing) past the sample, every run in its stratum, and the sample
 * drawn anew by another seed.
 */
static void
sidco_sample_gather(void **state)
{
	static const size_t ns[] = { 5000, 4194311, 4194304 + 16 * 1000 + 3 };
	static const double samples[] = { 0.0, 0.1, 1.0, 0.3 };

	(void)state;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		size_t n = ns[i], nr = TALLY_SPARSE_SIDCO_RUNS(n);
		float *x = malloc(n * sizeof(*x)), *out;

		assert_non_null(x);
		for (size_t j = 0; j < n; j++)
			x[j] = (float)j;	/* exact below 2^24 */
		for (size_t k = 0; k < sizeof(samples) / sizeof(samples[0]);
		     k++) {
			struct sparse_sample ss, so;
			size_t end;

			sparse_sidco_sample(n, samples[k], 4 + k, &ss);
			out = malloc((ss.elems + 1) * sizeof(*out));
			assert_non_null(out);
			sparse_sample_gather(x, &ss, out);
			end = TALLY_SPARSE_NBLOCKS(ss.elems) *
				TALLY_SPARSE_BLOCK;
			for (size_t v = 0; v < end; v++) {
				size_t p = tally_sparse_sample_elem(ss.seed, v,
					ss.stride, ss.m, n);

				if (v < ss.elems)
					assert_true(p < n && out[v] == x[p]);
				else
					assert_int_equal(p, n);
			}
			for (size_t r = 0; r < ss.m; r++) {
				size_t q = tally_sparse_sample_pos(ss.seed, r,
					ss.stride, nr);

				assert_true(q >= r * ss.stride &&
					q < (r + 1) * ss.stride && q < nr);
			}
			if (ss.stride > 1) {
				int differ = 0;

				sparse_sidco_sample(n, samples[k], 99, &so);
				for (size_t r = 0; r < ss.m && !differ; r++)
					differ = tally_sparse_sample_pos(ss.seed,
						r, ss.stride, nr) !=
						tally_sparse_sample_pos(so.seed,
						r, so.stride, nr);
				assert_true(differ);
			}
			free(out);
		}
		free(x);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(log_accuracy),
		cmocka_unit_test(keys),
		cmocka_unit_test(exceedances),
		cmocka_unit_test(sample_positions),
		cmocka_unit_test(tree_sum),
		cmocka_unit_test(gamma_q),
		cmocka_unit_test(gamma_q_inverse),
		cmocka_unit_test(topk_helpers),
		cmocka_unit_test(sidco_sample_plan),
		cmocka_unit_test(sidco_sample_gather),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
