/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of shared-seed random-k: the same indices on every call, k
 * distinct indices in range (whole permutations of small and odd n),
 * prefixes, chunks, uniformity over many seeds (chi-square of the
 * per-index counts, of the first index and of ordered pairs: within 5
 * standard deviations of its mean), gather / take / scatter round trips,
 * and the unbiasedness of the n / k scaled estimate (every element's mean
 * within 4 standard errors).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <tally/feedback.h>

#include "fb_test.h"

static const uint64_t ns[] = {
	1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000, 4099,
	65536, 65537, 1000003,
};
#define N_NS	(sizeof(ns) / sizeof(ns[0]))

/* Full permutations: every index exactly once, the same every call. */
static void
permutation(void **state)
{
	uint64_t *idx = malloc(1000003 * sizeof(uint64_t));
	uint64_t *again = malloc(1000003 * sizeof(uint64_t));
	uint8_t *seen = malloc(1000003);

	(void)state;
	assert_non_null(idx);
	assert_non_null(again);
	assert_non_null(seen);
	for (size_t k = 0; k < N_NS; k++) {
		uint64_t n = ns[k];

		for (uint64_t seed = 0; seed < (n > 5000 ? 2u : 20u); seed++) {
			assert_int_equal(tally_randk_indices(idx, 0, n, n, seed),
				0);
			assert_int_equal(tally_randk_indices(again, 0, n, n,
				seed), 0);
			assert_memory_equal(idx, again, n * sizeof(uint64_t));
			memset(seen, 0, n);
			for (uint64_t j = 0; j < n; j++) {
				assert_true(idx[j] < n);
				assert_int_equal(seen[idx[j]], 0);
				seen[idx[j]] = 1;
			}
		}
	}
	free(idx);
	free(again);
	free(seen);
}

/* Small k: a prefix of the permutation; chunks give the same indices. */
static void
prefix_and_chunks(void **state)
{
	uint64_t idx[4099], part[4099];

	(void)state;
	for (size_t k = 0; k < N_NS; k++) {
		uint64_t n = ns[k] < 4099 ? ns[k] : 4099;
		uint64_t kk = n / 3 + 1;

		if (ns[k] > 4099)
			continue;
		assert_int_equal(tally_randk_indices(idx, 0, n, n, 5), 0);
		assert_int_equal(tally_randk_indices(part, 0, kk, n, 5), 0);
		assert_memory_equal(part, idx, kk * sizeof(uint64_t));
		for (uint64_t at = 0, len = 1; at < n; at += len, len += 2) {
			uint64_t l = n - at < len ? n - at : len;

			assert_int_equal(tally_randk_indices(part + at, at, l, n,
				5), 0);
		}
		assert_memory_equal(part, idx, n * sizeof(uint64_t));
	}
	/* Different seeds or sizes: different orders. */
	assert_int_equal(tally_randk_indices(idx, 0, 16, 1000, 1), 0);
	assert_int_equal(tally_randk_indices(part, 0, 16, 1000, 2), 0);
	assert_memory_not_equal(idx, part, 16 * sizeof(uint64_t));
	assert_int_equal(tally_randk_indices(part, 0, 16, 1001, 1), 0);
	assert_memory_not_equal(idx, part, 16 * sizeof(uint64_t));
}

/* Ranges past n are refused; k from a density. */
static void
arguments(void **state)
{
	uint64_t idx[4];
	float x[4] = { 0 }, y[4];

	(void)state;
	assert_int_equal(tally_randk_indices(idx, 0, 5, 4, 1), -EINVAL);
	assert_int_equal(tally_randk_indices(idx, 3, 2, 4, 1), -EINVAL);
	assert_int_equal(tally_randk_indices(idx, UINT64_MAX, 2, 4, 1),
		-EINVAL);
	assert_int_equal(tally_randk_gather(x, y, 4, 1, 4, 1), -EINVAL);
	assert_int_equal(tally_randk_take(x, y, 1, 4, 4, 1), -EINVAL);
	assert_int_equal(tally_randk_scatter(y, x, 0, 5, 4, 1, 1.0f), -EINVAL);
	assert_int_equal(tally_randk_indices(NULL, 4, 0, 4, 1), 0);
	assert_int_equal(tally_randk_indices(NULL, 0, 0, 0, 1), 0);
	assert_int_equal(tally_randk_k(1000, 0.01), 10);
	assert_int_equal(tally_randk_k(1000, 0.0101), 10);
	assert_int_equal(tally_randk_k(1000, 0.0106), 11);
	assert_int_equal(tally_randk_k(100, 0.07), 7);
	assert_int_equal(tally_randk_k(10, 1e-9), 1);
	assert_int_equal(tally_randk_k(10, 1.0), 10);
	assert_int_equal(tally_randk_k(10, 0.0), 0);
	assert_int_equal(tally_randk_k(10, 1.5), 0);
	assert_int_equal(tally_randk_k(10, NAN), 0);
	assert_int_equal(tally_randk_k(0, 0.5), 0);
}

/* chi-square of counts against a uniform expectation e per cell. */
static double
chi2(const uint32_t *c, size_t cells, double e)
{
	double x = 0;

	for (size_t i = 0; i < cells; i++)
		x += (c[i] - e) * (c[i] - e) / e;
	return x;
}

/* Within 5 standard deviations of the chi-square's mean (dof). */
static void
assert_chi2(double x, size_t dof, const char *what)
{
	double lim = (double)dof + 5 * sqrt(2.0 * (double)dof);

	if (x > lim)
		fail_msg("%s: chi-square %.1f over %.1f (dof %zu)", what, x, lim,
			dof);
}

/*
 * Over S seeds: per-index counts of k = 10 of n = 100 (and 3 of 7), the
 * first index, and ordered pairs (first, second) of n = 8.
 */
static void
uniform(void **state)
{
	enum { S = 20000 };
	static const uint64_t cases[][2] = { { 100, 10 }, { 7, 3 },
		{ 1000, 1 }, { 257, 64 } };
	uint32_t cnt[1000], first[1000], pair[64], off[56];
	uint64_t idx[64];
	size_t m = 0;

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t n = cases[c][0], k = cases[c][1];

		memset(cnt, 0, sizeof(cnt));
		memset(first, 0, sizeof(first));
		for (uint64_t seed = 0; seed < S; seed++) {
			assert_int_equal(tally_randk_indices(idx, 0, k, n,
				seed * 0x100000001ull), 0);
			for (uint64_t j = 0; j < k; j++)
				cnt[idx[j]]++;
			first[idx[0]]++;
		}
		/*
		 * k distinct of n per seed: the counts are hypergeometric,
		 * less spread than multinomial; the bound holds the more.
		 */
		assert_chi2(chi2(cnt, n, (double)S * k / n), n - 1, "counts");
		assert_chi2(chi2(first, n, (double)S / n), n - 1, "first");
	}
	memset(pair, 0, sizeof(pair));
	for (uint64_t seed = 0; seed < 56 * 1000; seed++) {
		assert_int_equal(tally_randk_indices(idx, 0, 2, 8, seed), 0);
		pair[idx[0] * 8 + idx[1]]++;
	}
	for (size_t i = 0; i < 64; i++) {
		if (i / 8 == i % 8)
			assert_int_equal(pair[i], 0);
		else
			off[m++] = pair[i];
	}
	assert_chi2(chi2(off, 56, 1000.0), 55, "pairs");
}

/* gather, take and scatter: round trips, exact. */
static void
round_trip(void **state)
{
	enum { n = 4099, k = 410 };
	float x[n], x0[n], y[k], z[n], t[n];
	uint64_t idx[k], seed = 16;

	(void)state;
	for (size_t i = 0; i < n; i++)
		x0[i] = x[i] = rnd_any(&seed, 1);
	assert_int_equal(tally_randk_indices(idx, 0, k, n, 99), 0);
	assert_int_equal(tally_randk_gather(x, y, 0, k, n, 99), 0);
	for (size_t j = 0; j < k; j++)
		assert_int_equal(to_bits(y[j]), to_bits(x[idx[j]]));
	/* scatter into zeros: x at the indices, 0 elsewhere */
	memset(z, 0, sizeof(z));
	assert_int_equal(tally_randk_scatter(y, z, 0, k, n, 99, 1.0f), 0);
	memset(t, 0, sizeof(t));
	for (size_t j = 0; j < k; j++) {
		float v = x[idx[j]];

		t[idx[j]] = v != v ? from_bits(0x7fffffffu) : v;
	}
	assert_memory_equal(z, t, sizeof(z));
	/* take leaves exactly the rest; scattering back restores x */
	assert_int_equal(tally_randk_take(x, y, 0, k, n, 99), 0);
	for (size_t j = 0; j < k; j++) {
		assert_int_equal(to_bits(x[idx[j]]), 0);
		assert_int_equal(to_bits(y[j]), to_bits(x0[idx[j]]));
	}
	for (size_t j = 0; j < k; j++)
		x[idx[j]] = y[j];
	assert_memory_equal(x, x0, sizeof(x));
	/* in chunks */
	for (size_t at = 0, len = 3; at < k; at += len, len *= 2) {
		size_t l = k - at < len ? k - at : len;

		assert_int_equal(tally_randk_take(x + 0, y + at, at, l, n, 99),
			0);
	}
	for (size_t j = 0; j < k; j++)
		assert_int_equal(to_bits(y[j]), to_bits(x0[idx[j]]));
	/* scale */
	assert_int_equal(tally_randk_scatter(y, z, 0, k, n, 99, -2.0f), 0);
	for (size_t j = 0; j < k; j++) {
		float w = (float)(y[j] * -2.0);

		w = w != w ? from_bits(0x7fffffffu) : w;
		assert_int_equal(to_bits(z[idx[j]]), to_bits(w));
	}
}

/*
 * (n / k) scatter(gather(x)) estimates x without bias over seeds: each
 * element's mean over S seeds within 4 standard errors,
 * |x| sqrt((n / k - 1) / S).
 */
static void
unbiased(void **state)
{
	enum { n = 50, k = 5, S = 20000 };
	float x[n], y[k], z[n];
	double sum[n] = { 0 };
	uint64_t seed = 17;

	(void)state;
	for (size_t i = 0; i < n; i++)
		x[i] = rnd_unit(&seed);
	for (uint64_t s = 0; s < S; s++) {
		memset(z, 0, sizeof(z));
		assert_int_equal(tally_randk_gather(x, y, 0, k, n, s), 0);
		assert_int_equal(tally_randk_scatter(y, z, 0, k, n, s,
			(float)n / k), 0);
		for (size_t i = 0; i < n; i++)
			sum[i] += z[i];
	}
	for (size_t i = 0; i < n; i++) {
		double mean = sum[i] / S;
		double se = fabs(x[i]) * sqrt(((double)n / k - 1) / S);

		if (fabs(mean - x[i]) > 4 * se)
			fail_msg("element %zu: mean %g, x %g, se %g", i, mean,
				(double)x[i], se);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(permutation),
		cmocka_unit_test(prefix_and_chunks),
		cmocka_unit_test(arguments),
		cmocka_unit_test(uniform),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(unbiased),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
