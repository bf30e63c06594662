/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of error feedback: v = g + r and r' = v - sent against a model
 * in double precision, the count of inexact residuals, and the exact
 * conservation sent + r' == v for the sent values of the codecs that
 * promise it (fixed point, 2-bit, DGC and random-k taking) on adversarial
 * data: every magnitude from subnormals to FLT_MAX, mixed signs.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <tally/feedback.h>
#include <tally/fixp.h>

#include "codec/feedback/ef_math.h"
#include "fb_test.h"

#define N	4099

/* The float code's bits for a + b or a - b, modelled in double (double
 * rounding is harmless for + and -: 53 >= 2 * 24 + 2), NaN canonical. */
static uint32_t
model_sum(float a, float b)
{
	float s = (float)((double)a + (double)b);

	return s != s ? 0x7fffffffu : to_bits(s);
}

/* 1 when r = v - sent keeps sent + r == v, as <tally/feedback.h> says. */
static int
model_exact(float v, float sent, float r)
{
	if (isinf(v) && isfinite(sent))
		return 1;
	return isfinite(v) && isfinite(sent) && isfinite(r) &&
		exact_sum(sent, r, v);
}

/* Small values by hand. */
static void
known_values(void **state)
{
	const float g[4] = { 1.0f, -0.5f, 0x1p-149f, 3.0f };
	const float r[4] = { 0.25f, 0.5f, -0x1p-149f, 0x1p-30f };
	const float sent[4] = { 1.0f, 1.0f, 0.0f, 3.0f };
	const float v2[2] = { 1.0f, 0x1p-30f }, s2[2] = { 0.0f, 1.0f };
	float v[4], r2[4];

	(void)state;
	tally_ef_apply(v, g, r, 4);
	assert_true(v[0] == 1.25f && v[1] == 0.0f && v[2] == 0.0f);
	/* 3 + 2^-30 is not a float: rounds to 3. */
	assert_true(v[3] == 3.0f);
	assert_int_equal(tally_ef_update(r2, v, sent, 4), 0);
	assert_true(r2[0] == 0.25f && r2[1] == -1.0f && r2[2] == 0.0f &&
		r2[3] == 0.0f);
	/* 2^-30 - 1 is not a float: the residual rounds, and is counted. */
	assert_int_equal(tally_ef_update(r2, v2, s2, 2), 1);
	assert_true(r2[0] == 1.0f && r2[1] == -1.0f);
}

/* Any bits: residuals and the inexact count against the model. */
static void
any_bits(void **state)
{
	float *v = malloc(N * sizeof(float)), *s = malloc(N * sizeof(float));
	float *r = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
	uint64_t seed = 1;

	(void)state;
	assert_non_null(v);
	assert_non_null(s);
	assert_non_null(r);
	assert_non_null(g);
	for (int round = 0; round < 20; round++) {
		size_t want = 0;

		for (size_t i = 0; i < N; i++) {
			g[i] = rnd_any(&seed, 1);
			r[i] = rnd_any(&seed, 1);
			/* Often near v, so that many residuals are exact. */
			s[i] = (i & 1) ? rnd_any(&seed, 1) :
				g[i] * (1.0f + rnd_unit(&seed) / 8);
		}
		tally_ef_apply(v, g, r, N);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(to_bits(v[i]), model_sum(g[i], r[i]));
		for (size_t i = 0; i < N; i++)
			want += !model_exact(v[i], s[i],
				(float)((double)v[i] - (double)s[i]));
		assert_int_equal(tally_ef_update(r, v, s, N), want);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(to_bits(r[i]), model_sum(v[i], -s[i]));
	}
	free(v);
	free(s);
	free(r);
	free(g);
}

/*
 * Adversarial data: magnitudes from 2^-149 to FLT_MAX in one tensor,
 * mixed signs, or all tiny, or all huge.
 */
static void
adversarial(float *x, size_t n, int kind, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++) {
		float a = rnd_any(seed, 0);

		switch (kind) {
		case 0:
			x[i] = a;
			break;
		case 1:	/* subnormal or the smallest normals */
			x[i] = from_bits((to_bits(a) & 0x80ffffffu));
			break;
		case 2:	/* huge: exponent 250 .. 254 */
			x[i] = from_bits((to_bits(a) & 0x807fffffu) |
				((uint32_t)(250 + rnd_next(seed) % 5) << 23));
			break;
		default:	/* one scale, mixed signs, exact halves */
			x[i] = rnd_unit(seed) * 1e3f;
			break;
		}
	}
	x[0] = FLT_MAX;
	x[1] = -FLT_MAX;
	x[2] = 0x1p-149f;
	x[3] = -0.0f;
}

/* sent + r == v exactly, and tally_ef_update() counts no inexact one. */
static void
check_conserved(const float *v, const float *sent, float *r, size_t n)
{
	assert_int_equal(tally_ef_update(r, v, sent, n), 0);
	for (size_t i = 0; i < n; i++)
		if (!exact_sum(sent[i], r[i], v[i]))
			fail_msg("element %zu: %a + %a != %a", i,
				(double)sent[i], (double)r[i], (double)v[i]);
}

/* Fixed point at the exponent of the data's own max, world 1 .. 64. */
static void
conserve_fixp(void **state)
{
	float *v = malloc(N * sizeof(float)), *s = malloc(N * sizeof(float));
	float *r = malloc(N * sizeof(float));
	int32_t *q = malloc(N * sizeof(int32_t));
	uint64_t seed = 2;

	(void)state;
	assert_non_null(v);
	assert_non_null(s);
	assert_non_null(r);
	assert_non_null(q);
	for (int kind = 0; kind < 4; kind++) {
		for (unsigned int world = 1; world <= 64; world *= 4) {
			int e;

			adversarial(v, N, kind, &seed);
			assert_int_equal(tally_fixp_exponent(
				tally_fixp_absmax(v, N), world, &e), 0);
			tally_fixp_encode(v, q, N, e);
			tally_fixp_decode(q, s, N, e);
			check_conserved(v, s, r, N);
		}
	}
	free(v);
	free(s);
	free(r);
	free(q);
}

/* 2-bit at thresholds across the range: sent = q t. */
static void
conserve_2bit(void **state)
{
	static const int exps[] = {
		TALLY_TERN_EXP_MIN, -100, -20, -1, 0, 7, 60, 103, 104,
		TALLY_TERN_EXP_MAX,
	};
	float *v = malloc(N * sizeof(float)), *s = malloc(N * sizeof(float));
	float *r = malloc(N * sizeof(float)), *r2 = malloc(N * sizeof(float));
	int8_t *q = malloc(N);
	uint64_t seed = 3;

	(void)state;
	assert_non_null(v);
	assert_non_null(s);
	assert_non_null(r);
	assert_non_null(r2);
	assert_non_null(q);
	for (int kind = 0; kind < 4; kind++) {
		for (size_t j = 0; j < sizeof(exps) / sizeof(exps[0]); j++) {
			float t = tally_2bit_threshold(exps[j]);

			adversarial(v, N, kind, &seed);
			memcpy(r, v, N * sizeof(float));
			tally_2bit_encode_i8(r, NULL, q, N, exps[j]);
			for (size_t i = 0; i < N; i++)
				s[i] = (float)q[i] * t;
			check_conserved(v, s, r2, N);
			/* The codec's own residual is that one. */
			assert_memory_equal(r, r2, N * sizeof(float));
		}
	}
	free(v);
	free(s);
	free(r);
	free(r2);
	free(q);
}

/* Selections (DGC, random-k): sent is v or 0. */
static void
conserve_select(void **state)
{
	float *v = malloc(N * sizeof(float)), *s = malloc(N * sizeof(float));
	float *r = malloc(N * sizeof(float)), *u = calloc(N, sizeof(float));
	float *y = malloc(N * sizeof(float));
	uint8_t *mask = malloc((N + 7) / 8);
	uint64_t seed = 4;

	(void)state;
	assert_non_null(v);
	assert_non_null(s);
	assert_non_null(r);
	assert_non_null(u);
	assert_non_null(y);
	assert_non_null(mask);
	for (int kind = 0; kind < 4; kind++) {
		adversarial(v, N, kind, &seed);
		memcpy(r, v, N * sizeof(float));
		(void)tally_dgc_select(r, mask, N, 1.0f);
		tally_dgc_take(r, u, s, mask, N);
		check_conserved(v, s, y, N);
		assert_memory_equal(r, y, N * sizeof(float));

		/* random-k: y = x[idx], scattered back as what was sent. */
		memcpy(r, v, N * sizeof(float));
		assert_int_equal(tally_randk_take(r, y, 0, N / 3, N, kind), 0);
		memset(s, 0, N * sizeof(float));
		assert_int_equal(tally_randk_scatter(y, s, 0, N / 3, N, kind,
			1.0f), 0);
		check_conserved(v, s, u, N);
		assert_memory_equal(r, u, N * sizeof(float));
	}
	free(v);
	free(s);
	free(r);
	free(u);
	free(y);
	free(mask);
}

/* In place: v over g or r, r over v or sent. */
static void
in_place(void **state)
{
	float g[3] = { 1.0f, 2.0f, -3.0f }, r[3] = { 0.5f, -2.0f, 1.0f };
	float sent[3] = { 1.0f, 0.0f, -2.0f };

	(void)state;
	tally_ef_apply(g, g, r, 3);
	assert_true(g[0] == 1.5f && g[1] == 0.0f && g[2] == -2.0f);
	tally_ef_apply(r, g, r, 3);
	assert_true(r[0] == 2.0f && r[1] == -2.0f && r[2] == -1.0f);
	assert_int_equal(tally_ef_update(r, r, sent, 3), 0);
	assert_true(r[0] == 1.0f && r[1] == -2.0f && r[2] == 1.0f);
	assert_int_equal(tally_ef_update(sent, r, sent, 3), 0);
	assert_true(sent[0] == 0.0f && sent[1] == -2.0f && sent[2] == 3.0f);
	tally_ef_apply(NULL, NULL, NULL, 0);
	assert_int_equal(tally_ef_update(NULL, NULL, NULL, 0), 0);
}

/* The element function's count against the model on float specials. */
static void
specials(void **state)
{
	static const float vals[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-126f, FLT_MAX,
		-FLT_MAX, INFINITY, -INFINITY, NAN, 3.0f, 0x1p100f,
	};
	size_t nv = sizeof(vals) / sizeof(vals[0]);

	(void)state;
	for (size_t i = 0; i < nv; i++) {
		for (size_t j = 0; j < nv; j++) {
			float v = vals[i], s = vals[j];
			float r = tally_ef_update1(v, s);

			assert_int_equal(tally_ef_inexact1(v, s, r),
				!model_exact(v, s, r));
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_values),
		cmocka_unit_test(any_bits),
		cmocka_unit_test(conserve_fixp),
		cmocka_unit_test(conserve_2bit),
		cmocka_unit_test(conserve_select),
		cmocka_unit_test(in_place),
		cmocka_unit_test(specials),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
