/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of the ternary codecs: 2-bit (threshold exponent, exact bytes
 * of small inputs, residuals carried across steps, the element rule and
 * exact residuals on any float, chunks), TernGrad (exact bytes where p is
 * 0 or 1, the documented draw, chunks, unbiasedness over many seeds) and
 * the decoding of wide and narrow sums.
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

#include <tally/feedback.h>

#include "fb_test.h"

#define N	2053

static const int exps[] = {
	TALLY_TERN_EXP_MIN, -130, -100, -20, -1, 0, 7, 60, 103, 104,
	TALLY_TERN_EXP_MAX, 200,
};
#define N_EXPS	(sizeof(exps) / sizeof(exps[0]))

/* i4 value of element i of a packed array. */
static int
nib(const uint8_t *q4, size_t i)
{
	int v = (q4[i / 2] >> (4 * (i & 1))) & 0xf;

	return v >= 8 ? v - 16 : v;
}

static void
exponent(void **state)
{
	int e = 99;

	(void)state;
	assert_int_equal(tally_2bit_exponent(0.5f, &e), 0);
	assert_int_equal(e, -1);
	assert_int_equal(tally_2bit_exponent(0.75f, &e), 0);
	assert_int_equal(e, -1);
	assert_int_equal(tally_2bit_exponent(1.0f, &e), 0);
	assert_int_equal(e, 0);
	assert_int_equal(tally_2bit_exponent(3.0f, &e), 0);
	assert_int_equal(e, 1);
	assert_int_equal(tally_2bit_exponent(FLT_MAX, &e), 0);
	assert_int_equal(e, TALLY_TERN_EXP_MAX);
	assert_int_equal(tally_2bit_exponent(0x1p-149f, &e), 0);
	assert_int_equal(e, TALLY_TERN_EXP_MIN);
	e = 99;
	assert_int_equal(tally_2bit_exponent(0.0f, &e), -EINVAL);
	assert_int_equal(tally_2bit_exponent(-1.0f, &e), -EINVAL);
	assert_int_equal(tally_2bit_exponent(NAN, &e), -EINVAL);
	assert_int_equal(tally_2bit_exponent(INFINITY, &e), -EINVAL);
	assert_int_equal(tally_2bit_exponent(1.0f, NULL), -EINVAL);
	assert_int_equal(e, 99);
	assert_true(tally_2bit_threshold(-1) == 0.5f);
	assert_true(tally_2bit_threshold(200) == 0x1p126f);
	assert_true(tally_2bit_threshold(-200) == 0x1p-126f);
}

/* Two steps of seven elements, t = 0.5, by hand (i4 and i8 alike). */
static void
twobit_by_hand(void **state)
{
	static const float g1[7] = {
		0.5f, -0.5f, 0.25f, -0.75f, 1.0f, 0.0f, -0.25f,
	};
	static const float g2[7] = {
		0.0f, 0.0f, 0.25f, -0.25f, 0.0f, 0.5f, 0.0f,
	};
	static const float r1[7] = {
		0.0f, 0.0f, 0.25f, -0.25f, 0.5f, 0.0f, -0.25f,
	};
	static const float r2[7] = {
		0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.25f,
	};
	static const uint8_t q4_1[4] = { 0xf1, 0xf0, 0x01, 0x00 };
	static const uint8_t q4_2[4] = { 0x00, 0xf1, 0x11, 0x00 };
	static const int8_t q8_1[7] = { 1, -1, 0, -1, 1, 0, 0 };
	static const int8_t q8_2[7] = { 0, 0, 1, -1, 1, 1, 0 };
	float r[7] = { 0 }, rb[7] = { 0 };
	uint8_t q4[4];
	int8_t q8[7];

	(void)state;
	tally_2bit_encode_i4(r, g1, q4, 7, -1);
	tally_2bit_encode_i8(rb, g1, q8, 7, -1);
	assert_memory_equal(q4, q4_1, 4);
	assert_memory_equal(q8, q8_1, 7);
	assert_memory_equal(r, r1, sizeof(r));
	assert_memory_equal(rb, r1, sizeof(rb));
	tally_2bit_encode_i4(r, g2, q4, 7, -1);
	tally_2bit_encode_i8(rb, g2, q8, 7, -1);
	assert_memory_equal(q4, q4_2, 4);
	assert_memory_equal(q8, q8_2, 7);
	assert_memory_equal(r, r2, sizeof(r));
	assert_memory_equal(rb, r2, sizeof(rb));
}

/* The documented rule on one element, modelled in double. */
static int
model_2bit(float v, int e, float *r)
{
	double t = ldexp(1.0, e < -126 ? -126 : (e > 126 ? 126 : e));
	double lim = t * 0x1p24;
	int q = 0;

	if (v >= t && v < lim)
		q = 1;
	else if (v <= -t && v > -lim)
		q = -1;
	*r = (float)((double)v - q * t);
	if (*r != *r)
		*r = from_bits(0x7fffffffu);
	return q;
}

/* Any float, any threshold: q and r by the rule; residuals exact. */
static void
twobit_rule(void **state)
{
	float *g = malloc(N * sizeof(float)), *r = malloc(N * sizeof(float));
	float *r8 = malloc(N * sizeof(float)), *v = malloc(N * sizeof(float));
	uint8_t *q4 = malloc((N + 1) / 2);
	int8_t *q8 = malloc(N);
	uint64_t seed = 9;

	(void)state;
	assert_non_null(g);
	assert_non_null(r);
	assert_non_null(r8);
	assert_non_null(v);
	assert_non_null(q4);
	assert_non_null(q8);
	for (size_t k = 0; k < N_EXPS; k++) {
		float t = tally_2bit_threshold(exps[k]);

		for (size_t i = 0; i < N; i++) {
			g[i] = rnd_any(&seed, 1);
			/* residuals near the threshold and around 2^24 t */
			r[i] = (i % 4 == 0) ? rnd_any(&seed, 1) :
				t * (float)(i % 4 == 1 ? 0x1p24 : 1.0) *
				(1.0f + rnd_unit(&seed));
			if (i % 2)
				g[i] = 0.0f;
			v[i] = (float)((double)g[i] + r[i]);
			v[i] = v[i] != v[i] ? from_bits(0x7fffffffu) : v[i];
		}
		memcpy(r8, r, N * sizeof(float));
		tally_2bit_encode_i4(r, g, q4, N, exps[k]);
		tally_2bit_encode_i8(r8, g, q8, N, exps[k]);
		assert_memory_equal(r, r8, N * sizeof(float));
		assert_int_equal(q4[N / 2] >> 4, 0);
		for (size_t i = 0; i < N; i++) {
			float wr;
			int q = model_2bit(v[i], exps[k], &wr);

			assert_int_equal(q8[i], q);
			assert_int_equal(nib(q4, i), q);
			assert_int_equal(to_bits(r[i]), to_bits(wr));
			if (isfinite(v[i]))
				assert_true(exact_sum(q * t, r[i], v[i]));
		}
	}
	free(g);
	free(r);
	free(r8);
	free(v);
	free(q4);
	free(q8);
}

/* Without g, v is r itself (-0 stays -0). */
static void
twobit_no_g(void **state)
{
	float r[3] = { -0.0f, 0.75f, -2.0f };
	int8_t q8[3];
	uint8_t q4[2];

	(void)state;
	tally_2bit_encode_i8(r, NULL, q8, 3, -1);
	assert_int_equal(to_bits(r[0]), 0x80000000u);
	assert_true(r[1] == 0.25f && r[2] == -1.5f);
	assert_true(q8[0] == 0 && q8[1] == 1 && q8[2] == -1);
	tally_2bit_encode_i4(r, NULL, q4, 3, -2);
	assert_true(q4[0] == 0x10 && q4[1] == 0x0f);
	assert_true(r[1] == 0.0f && r[2] == -1.25f);
}

/* Chunks at even offsets (i4) or any (i8) give the whole's bytes. */
static void
chunks(void **state)
{
	float *g = malloc(N * sizeof(float)), *r = malloc(N * sizeof(float));
	float *rc = malloc(N * sizeof(float));
	uint8_t *q4 = malloc((N + 1) / 2), *q4c = malloc((N + 1) / 2);
	int8_t *q8 = malloc(N), *q8c = malloc(N);
	uint64_t seed = 10;

	(void)state;
	assert_non_null(g);
	assert_non_null(r);
	assert_non_null(rc);
	assert_non_null(q4);
	assert_non_null(q4c);
	assert_non_null(q8);
	assert_non_null(q8c);
	for (size_t i = 0; i < N; i++) {
		g[i] = rnd_unit(&seed);
		r[i] = rnd_unit(&seed) / 2;
	}
	memcpy(rc, r, N * sizeof(float));
	tally_2bit_encode_i4(r, g, q4, N, -2);
	for (size_t at = 0, len = 2; at < N; at += len, len += 6) {
		size_t l = N - at < len ? N - at : len;

		tally_2bit_encode_i4(rc + at, g + at, q4c + at / 2, l, -2);
	}
	assert_memory_equal(q4c, q4, (N + 1) / 2);
	assert_memory_equal(rc, r, N * sizeof(float));

	assert_int_equal(tally_tern_encode_i4(g, q4, N, 1.0f, 77, 1000), 0);
	assert_int_equal(tally_tern_encode_i8(g, q8, N, 1.0f, 77, 1000), 0);
	for (size_t at = 0, len = 4; at < N; at += len, len += 10) {
		size_t l = N - at < len ? N - at : len;

		assert_int_equal(tally_tern_encode_i4(g + at, q4c + at / 2, l,
			1.0f, 77, 1000 + at), 0);
	}
	for (size_t at = 0, len = 1; at < N; at += len, len += 3) {
		size_t l = N - at < len ? N - at : len;

		assert_int_equal(tally_tern_encode_i8(g + at, q8c + at, l,
			1.0f, 77, 1000 + at), 0);
	}
	assert_memory_equal(q4c, q4, (N + 1) / 2);
	assert_memory_equal(q8c, q8, N);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(nib(q4, i), q8[i]);
	free(g);
	free(r);
	free(rc);
	free(q4);
	free(q4c);
	free(q8);
	free(q8c);
}

/* Where p is 0 or 1 the draw does not matter: bytes by hand. */
static void
tern_by_hand(void **state)
{
	const float g[8] = {
		2.0f, -2.0f, 0.0f, -0.0f, NAN, 5.0f, -3.0f, INFINITY,
	};
	static const int8_t want8[8] = { 1, -1, 0, 0, 0, 1, -1, 1 };
	static const uint8_t want4[4] = { 0xf1, 0x00, 0x10, 0x1f };
	int8_t q8[8];
	uint8_t q4[4];

	(void)state;
	for (uint64_t seed = 0; seed < 100; seed++) {
		assert_int_equal(tally_tern_encode_i8(g, q8, 8, 2.0f, seed,
			seed * 1000), 0);
		assert_int_equal(tally_tern_encode_i4(g, q4, 8, 2.0f, seed,
			seed * 1000), 0);
		assert_memory_equal(q8, want8, 8);
		assert_memory_equal(q4, want4, 4);
	}
}

/*
 * The draw as docs/codecs/feedback.md states it: key = mix(seed ^
 * 0x6a09e667f3bcc909), h = mix(key + (i + 1) * 0x9e3779b97f4a7c15) with
 * mix SplitMix64's output function, u = (h >> 40) / 2^24, q = sign(g)
 * when u < fl(|g| / s) (clamped to 1).
 */
static uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int
model_tern(float g, float s, uint64_t seed, uint64_t i)
{
	uint64_t key = mix(seed ^ 0x6a09e667f3bcc909ull);
	uint64_t h = mix(key + (i + 1) * 0x9e3779b97f4a7c15ull);
	double u = (double)(h >> 40) / 0x1p24;
	float p = fabsf(g) / s;

	p = p > 1.0f ? 1.0f : p;
	return u < p ? (g < 0 ? -1 : 1) : 0;
}

static void
tern_draw(void **state)
{
	float *g = malloc(N * sizeof(float));
	int8_t *q8 = malloc(N);
	/* Known answer: seed 42, offset 0, g = 0.5, s = 1 (a wire format). */
	static const int8_t kat[16] = {
		0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1,
	};
	const float half[16] = {
		0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,
		0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,
	};
	uint64_t seed = 11;

	(void)state;
	assert_non_null(g);
	assert_non_null(q8);
	for (int k = 0; k < 8; k++) {
		float s = k < 4 ? 1.0f : 0.3f + (float)k;
		uint64_t sd = rnd_next(&seed), off = rnd_next(&seed) >> 8;

		for (size_t i = 0; i < N; i++)
			g[i] = (i % 5 == 0) ? rnd_any(&seed, 1) :
				s * rnd_unit(&seed);
		assert_int_equal(tally_tern_encode_i8(g, q8, N, s, sd, off), 0);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(q8[i], model_tern(g[i], s, sd, off + i));
	}
	assert_int_equal(tally_tern_encode_i8(half, q8, 16, 1.0f, 42, 0), 0);
	assert_memory_equal(q8, kat, 16);
	free(g);
	free(q8);
}

/* A scale that is not positive and finite is refused; nothing written. */
static void
tern_bad_scale(void **state)
{
	const float g[3] = { 1.0f, -1.0f, 0.5f };
	const float bad[] = { 0.0f, -0.0f, -1.0f, NAN, INFINITY, -INFINITY };
	int8_t q8[3] = { 5, 5, 5 };
	uint8_t q4[2] = { 5, 5 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tally_tern_encode_i8(g, q8, 3, bad[i], 1, 0),
			-EINVAL);
		assert_int_equal(tally_tern_encode_i4(g, q4, 3, bad[i], 1, 0),
			-EINVAL);
	}
	assert_true(q8[0] == 5 && q8[2] == 5 && q4[0] == 5 && q4[1] == 5);
	assert_int_equal(tally_tern_encode_i4(g, q4, 0, 1.0f, 1, 0), 0);
	assert_int_equal(tally_tern_encode_i4(NULL, NULL, 0, 1.0f, 1, 0), 0);
}

/*
 * Unbiased: over S seeds, the mean of q s for each of 64 elements is
 * within 4 standard errors (s sqrt(p (1 - p) / S)) plus the documented
 * bias bound (2^-23 s) of g; elements with p 0 or 1 exactly.
 */
#define TERN_S	4000
#define TERN_N	64

static void
tern_unbiased(void **state)
{
	float g[TERN_N], s = 0.75f;
	double sum[TERN_N] = { 0 };
	uint8_t q4[TERN_N / 2];
	uint64_t seed = 12;

	(void)state;
	for (size_t i = 0; i < TERN_N; i++)
		g[i] = s * rnd_unit(&seed);
	g[0] = s;
	g[1] = -s;
	g[2] = 0.0f;
	g[3] = s * 0x1p-20f;
	for (uint64_t k = 0; k < TERN_S; k++) {
		assert_int_equal(tally_tern_encode_i4(g, q4, TERN_N, s, k, 0),
			0);
		for (size_t i = 0; i < TERN_N; i++)
			sum[i] += nib(q4, i) * (double)s;
	}
	for (size_t i = 0; i < TERN_N; i++) {
		double mean = sum[i] / TERN_S, p = fabs((double)g[i]) / s;
		double se = s * sqrt(p * (1 - p) / TERN_S);

		if (fabs(mean - g[i]) > 4 * se + 0x1p-23 * s)
			fail_msg("element %zu: mean %g, g %g, se %g", i, mean,
				(double)g[i], se);
	}
}

/* Decoding: every nibble, i8 and i32 edges, odd counts. */
static void
decode(void **state)
{
	static const int32_t w[7] = {
		0, 1, -1, 64, -64, (1 << 24) + 1, INT32_MIN,
	};
	static const int8_t n8[5] = { 0, 1, -1, 127, -128 };
	uint8_t n4[8];
	float x[16];

	(void)state;
	tally_tern_decode_i32(w, x, 7, 0.5f);
	for (int i = 0; i < 7; i++)
		assert_true(x[i] == (float)w[i] * 0.5f);
	assert_true(x[5] == 8388608.0f);	/* 2^24 + 1 rounds to 2^24 */
	tally_tern_decode_i8(n8, x, 5, 3.0f);
	for (int i = 0; i < 5; i++)
		assert_true(x[i] == n8[i] * 3.0f);
	for (int i = 0; i < 8; i++)
		n4[i] = (uint8_t)((2 * i) | ((2 * i + 1) << 4));
	x[15] = 99.0f;
	tally_tern_decode_i4(n4, x, 15, 2.0f);
	for (int i = 0; i < 15; i++)
		assert_true(x[i] == (float)(i >= 8 ? i - 16 : i) * 2.0f);
	assert_true(x[15] == 99.0f);
	tally_tern_decode_i32(w, x, 1, NAN);
	assert_int_equal(to_bits(x[0]), 0x7fffffffu);
}

/*
 * W workers: sums of their i8 encodings, as the aggregator forms them
 * (wide: exact; narrow i4: saturated to -8 .. 7), decode to the sums of
 * the values each sent.
 */
static void
sums(void **state)
{
	float g[N], x[N];
	int8_t q8[N];
	int32_t wide[N];
	uint8_t narrow[(N + 1) / 2];
	double want[N];
	uint64_t seed = 13;

	(void)state;
	for (unsigned int world = 1; world <= 64; world = world * 3 + 1) {
		memset(wide, 0, sizeof(wide));
		memset(want, 0, sizeof(want));
		for (unsigned int w = 0; w < world; w++) {
			for (size_t i = 0; i < N; i++)
				g[i] = rnd_unit(&seed);
			assert_int_equal(tally_tern_encode_i8(g, q8, N, 1.0f,
				1000 + w, 0), 0);
			for (size_t i = 0; i < N; i++) {
				wide[i] += q8[i];
				want[i] += q8[i] * 1.0;
			}
		}
		tally_tern_decode_i32(wide, x, N, 0.375f);
		for (size_t i = 0; i < N; i++)
			assert_true(x[i] == (float)(want[i] * 0.375));
		memset(narrow, 0, sizeof(narrow));
		for (size_t i = 0; i < N; i++) {
			int32_t s = wide[i] < -8 ? -8 : (wide[i] > 7 ? 7 :
				wide[i]);

			narrow[i / 2] |= (uint8_t)((s & 0xf) << (4 * (i & 1)));
			want[i] = s;
		}
		tally_tern_decode_i4(narrow, x, N, 0.375f);
		for (size_t i = 0; i < N; i++)
			assert_true(x[i] == (float)(want[i] * 0.375));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exponent),
		cmocka_unit_test(twobit_by_hand),
		cmocka_unit_test(twobit_rule),
		cmocka_unit_test(twobit_no_g),
		cmocka_unit_test(chunks),
		cmocka_unit_test(tern_by_hand),
		cmocka_unit_test(tern_draw),
		cmocka_unit_test(tern_bad_scale),
		cmocka_unit_test(tern_unbiased),
		cmocka_unit_test(decode),
		cmocka_unit_test(sums),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
