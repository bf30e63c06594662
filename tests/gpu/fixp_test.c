/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of the shared-scale fixed-point codec: the exponent's
 * derivation and bounds, and the element math of gpu/codec/fixp_math.h,
 * which the CUDA kernels run too, checked against an independent model in
 * double precision.
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

#include <tally/fixp.h>

#include "codec/fixp_math.h"
#include "fixp_bound.h"

static const unsigned int worlds[] = {
	1, 2, 3, 4, 5, 7, 8, 16, 31, 33, 63, 64,
};

/* Deterministic generator (splitmix64): the tests give the same data. */
static uint64_t
rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1), multiples of 2^-24. */
static float
rnd_unit(uint64_t *s)
{
	return (float)((int64_t)(rnd_next(s) >> 39) - (1 << 24)) / 0x1p24f;
}

static float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t
to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* The b of the derivation, found another way: largest b, world*2^b < 2^31. */
static int
model_b(unsigned int world)
{
	int b = 0;

	while ((int64_t)world << (b + 1) <= INT32_MAX)
		b++;
	return b;
}

/* Encoding of one element, modelled in double (exact there). */
static int32_t
model_enc(float x, int e)
{
	double y;

	if (isnan(x))
		return 0;
	y = ldexp((double)x, e);
	if (y <= -2147483648.0)
		return INT32_MIN;
	if (y >= 2147483520.0)
		return 2147483520;
	return (int32_t)nearbyint(y);
}

/* Decoding of one element, modelled in double: one rounding to float. */
static float
model_dec(int32_t q, int e)
{
	return (float)ldexp((double)q, -e);
}

static int
exponent_of(float absmax, unsigned int world)
{
	int e = 12345;

	assert_int_equal(tally_fixp_exponent(absmax, world, &e), 0);
	return e;
}

/* Known values: absmax 1 = 0.5 * 2^1, so e = b - 1. */
static void
exponent_known(void **state)
{
	(void)state;
	assert_int_equal(exponent_of(1.0f, 1), 29);
	assert_int_equal(exponent_of(1.0f, 2), 28);
	assert_int_equal(exponent_of(1.0f, 3), 28);
	assert_int_equal(exponent_of(1.0f, 4), 27);
	assert_int_equal(exponent_of(1.0f, 64), 23);
	assert_int_equal(exponent_of(0.75f, 1), 30);
	assert_int_equal(exponent_of(0x1.fffffep-1f, 4), 28);
	assert_int_equal(exponent_of(3.0f, 64), 22);
	assert_int_equal(exponent_of(1e-3f, 1), 39);
}

/* Every world size: e = b - k with b from the independent model. */
static void
exponent_worlds(void **state)
{
	(void)state;
	for (unsigned int w = 1; w <= TALLY_FIXP_WORLD_MAX; w++) {
		assert_int_equal(exponent_of(1.0f, w), model_b(w) - 1);
		assert_int_equal(exponent_of(0x1p-20f, w), model_b(w) + 19);
		assert_int_equal(exponent_of(0x1p100f, w), model_b(w) - 101);
	}
	assert_int_equal(model_b(1), 30);
	assert_int_equal(model_b(4), 28);
	assert_int_equal(model_b(64), 24);
}

/* absmax 0 (either sign) gives 0. */
static void
exponent_zero(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
		assert_int_equal(exponent_of(0.0f, worlds[i]), 0);
		assert_int_equal(exponent_of(-0.0f, worlds[i]), 0);
	}
}

/*
 * Tiny absmax, subnormals included: e = b - k, no clamp, up to
 * TALLY_FIXP_EXP_MAX for the smallest subnormal alone.
 */
static void
exponent_tiny(void **state)
{
	(void)state;
	/* FLT_TRUE_MIN = 2^-149 = 0.5 * 2^-148. */
	assert_int_equal(exponent_of(FLT_TRUE_MIN, 1), 30 + 148);
	assert_int_equal(exponent_of(FLT_TRUE_MIN, 1), TALLY_FIXP_EXP_MAX);
	assert_int_equal(exponent_of(FLT_TRUE_MIN, 64), 24 + 148);
	assert_int_equal(exponent_of(0x1.8p-148f, 3), 29 + 147);
	assert_int_equal(exponent_of(0x1p-130f, 1), 30 + 129);
	assert_int_equal(exponent_of(0x1.fffffcp-127f, 2), 29 + 126);
	assert_int_equal(exponent_of(FLT_MIN, 64), 24 + 125);
	assert_int_equal(exponent_of(FLT_MIN, 1), 30 + 125);
	/* Where the old clamp at 126 began to bite: 2^-96 = 0.5 * 2^-95. */
	assert_int_equal(exponent_of(0x1p-96f, 1), 125);
	assert_int_equal(exponent_of(0x1p-97f, 1), 126);
	assert_int_equal(exponent_of(0x1p-98f, 1), 127);
	assert_int_equal(exponent_of(0x1p-96f, 64), 119);
	for (unsigned int w = 1; w <= TALLY_FIXP_WORLD_MAX; w++)
		for (int k = -147; k <= 128; k++)
			assert_int_equal(exponent_of(ldexpf(0.75f, k), w),
				model_b(w) - k);
}

/* Huge absmax: far from the lower clamp. */
static void
exponent_huge(void **state)
{
	(void)state;
	assert_int_equal(exponent_of(FLT_MAX, 1), 30 - 128);
	assert_int_equal(exponent_of(FLT_MAX, 64), 24 - 128);
	assert_int_equal(exponent_of(0x1p127f, 4), 28 - 128);
	assert_int_equal(exponent_of(3e38f, 1), -98);
}

/* Non-finite or negative absmax, bad world, NULL: -EINVAL, *exp kept. */
static void
exponent_invalid(void **state)
{
	int e = 777;

	(void)state;
	assert_int_equal(tally_fixp_exponent(INFINITY, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(-INFINITY, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(NAN, 4, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(-NAN, 4, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(-1.0f, 4, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(-FLT_TRUE_MIN, 4, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(1.0f, 0, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(1.0f, 65, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(1.0f, 1000, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent(0.0f, 0, &e), -EINVAL);
	assert_int_equal(e, 777);
	assert_int_equal(tally_fixp_exponent(1.0f, 4, NULL), -EINVAL);
}

/* absmax values worth trying: powers of two, just below them, odd ones. */
static const float absmaxes[] = {
	1.0f, 0x1.fffffep-1f, 0.75f, 3.14159265f, 1e-3f, 0x1.fffffep+9f,
	1e30f, 0x1.fffffep+126f, FLT_MAX, FLT_MIN, 0x1.fffffep-127f,
	FLT_TRUE_MIN, 1e-40f, 0x1p-96f, 0x1.fffffep-97f, 65504.0f,
};

/*
 * world values at +absmax (and at -absmax) encoded with the exponent for
 * (absmax, world) sum without leaving int32, in any order; and the
 * exponent is close to the best: with e + 2 the sum would overflow.
 */
static void
sum_no_overflow(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
		unsigned int w = worlds[i];

		for (size_t j = 0; j < sizeof(absmaxes) / sizeof(absmaxes[0]);
		     j++) {
			float a = absmaxes[j];
			int e = exponent_of(a, w);
			int32_t q[2], sum[2] = { 0, 0 };
			float x[2] = { a, -a };

			tally_fixp_encode(x, q, 2, e);
			assert_true(q[0] == -q[1]);
			assert_true(q[0] <= (INT32_MAX / (int32_t)w));
			for (unsigned int r = 0; r < w; r++)
				for (int s = 0; s < 2; s++)
					assert_false(__builtin_add_overflow(
						sum[s], q[s], &sum[s]));
			assert_true((double)w * nearbyint(ldexp(a,
					e + 2)) > (double)INT32_MAX);
		}
	}
}

/* Random data at every world: |q| <= 2^b, and decode error <= 2^-e / 2. */
static void
roundtrip(void **state)
{
	enum { N = 4099 };
	static float x[N], y[N];
	static int32_t q[N];
	uint64_t s = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
		for (int mag = -140; mag <= 127; mag += 7) {
			float scale = ldexpf(1.0f, mag);
			float a;
			int e;

			for (size_t k = 0; k < N; k++)
				x[k] = rnd_unit(&s) * scale;
			a = tally_fixp_absmax(x, N);
			e = exponent_of(a, worlds[i]);
			tally_fixp_encode(x, q, N, e);
			tally_fixp_decode(q, y, N, e);
			for (size_t k = 0; k < N; k++) {
				double err = fabs((double)y[k] - (double)x[k]);

				assert_true(llabs((long long)q[k]) <=
					1ll << model_b(worlds[i]));
				assert_true(err <= ldexp(1.0, -e - 1));
			}
		}
	}
}

/* Out-of-range values saturate to [INT32_MIN, 2147483520]. */
static void
saturation(void **state)
{
	const float x[] = {
		3e9f, -3e9f, INFINITY, -INFINITY, 2147483520.0f,
		-2147483648.0f, 0x1p31f, -0x1p31f, FLT_MAX, -FLT_MAX,
		2147483392.0f, -2147483520.0f,
	};
	const int32_t want[] = {
		2147483520, INT32_MIN, 2147483520, INT32_MIN, 2147483520,
		INT32_MIN, 2147483520, INT32_MIN, 2147483520, INT32_MIN,
		2147483392, -2147483520,
	};
	int32_t q[sizeof(x) / sizeof(x[0])];

	(void)state;
	tally_fixp_encode(x, q, sizeof(x) / sizeof(x[0]), 0);
	for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
		assert_int_equal(q[i], want[i]);
	/* x * 2^126 overflows float: still saturates; so does 2^178. */
	tally_fixp_encode(x + 8, q, 2, 126);
	assert_int_equal(q[0], 2147483520);
	assert_int_equal(q[1], INT32_MIN);
	tally_fixp_encode(x + 8, q, 2, TALLY_FIXP_EXP_MAX);
	assert_int_equal(q[0], 2147483520);
	assert_int_equal(q[1], INT32_MIN);
	/* The first factor overflows, or only the second. */
	{
		const float y[] = { 2.0f, -2.0f, 0x1p-100f, -0x1p-100f,
			0x1.8p-148f, -0x1p-147f };
		int32_t r[6];

		tally_fixp_encode(y, r, 6, 170);
		assert_int_equal(r[0], 2147483520);
		assert_int_equal(r[1], INT32_MIN);
		assert_int_equal(r[2], 2147483520);
		assert_int_equal(r[3], INT32_MIN);
		/* 3 * 2^-149 * 2^170 = 3 * 2^21, exact. */
		assert_int_equal(r[4], 3 << 21);
		assert_int_equal(r[5], -(1 << 23));
	}
	/* Above absmax with a real exponent. */
	{
		const float big[] = { 4.0f, -4.0f };
		int e = exponent_of(1.0f, 1);

		tally_fixp_encode(big, q, 2, e);
		assert_int_equal(q[0], 2147483520);
		assert_int_equal(q[1], INT32_MIN);
	}
}

/* NaN encodes to 0 and is ignored by absmax; infinities are kept there. */
static void
nan_handling(void **state)
{
	float x[] = {
		NAN, -NAN, from_bits(0x7f800001u), from_bits(0xffc00123u),
		from_bits(0x7fffffffu), 1.5f, -2.0f,
	};
	int32_t q[sizeof(x) / sizeof(x[0])];

	(void)state;
	tally_fixp_encode(x, q, sizeof(x) / sizeof(x[0]), 3);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(q[i], 0);
	assert_int_equal(q[5], 12);
	assert_int_equal(q[6], -16);
	assert_true(tally_fixp_absmax(x, sizeof(x) / sizeof(x[0])) == 2.0f);
	assert_true(tally_fixp_absmax(x, 5) == 0.0f);
	x[0] = -INFINITY;
	assert_true(isinf(tally_fixp_absmax(x, sizeof(x) / sizeof(x[0]))));
}

/* absmax of the empty array, of zeros, and of subnormals. */
static void
absmax_basic(void **state)
{
	const float x[] = { -0.0f, 0.0f, -FLT_TRUE_MIN, 0x1p-140f, -3.0f,
		2.5f, -1e-45f };

	(void)state;
	assert_int_equal(to_bits(tally_fixp_absmax(x, 0)), 0);
	assert_int_equal(to_bits(tally_fixp_absmax(x, 2)), 0);
	assert_true(tally_fixp_absmax(x, 3) == FLT_TRUE_MIN);
	assert_true(tally_fixp_absmax(x, 4) == 0x1p-140f);
	assert_true(tally_fixp_absmax(x, 7) == 3.0f);
	assert_true(tally_fixp_absmax(x + 5, 2) == 2.5f);
}

/* Exact halves round to even, both signs, small and near 2^23. */
static void
half_even(void **state)
{
	const struct {
		float x;
		int e;
		int32_t q;
	} c[] = {
		{ 0.5f, 0, 0 }, { -0.5f, 0, 0 }, { 1.5f, 0, 2 },
		{ 2.5f, 0, 2 }, { 3.5f, 0, 4 }, { -1.5f, 0, -2 },
		{ -2.5f, 0, -2 }, { -3.5f, 0, -4 }, { 0.25f, 1, 0 },
		{ 0.75f, 1, 2 }, { 1.25f, 1, 2 }, { -1.25f, 1, -2 },
		{ 3.0f, -1, 2 }, { 5.0f, -1, 2 }, { 7.0f, -1, 4 },
		{ -5.0f, -1, -2 }, { 4194304.5f, 0, 4194304 },
		{ 4194305.5f, 0, 4194306 }, { -4194305.5f, 0, -4194306 },
		{ 0x1.000002p-126f, 126, 1 }, { 0x1p-127f, 126, 0 },
		{ 0x1.8p-126f, 126, 2 }, { 0.49999997f, 0, 0 },
		{ 0.50000006f, 0, 1 },
		/* Subnormals past the old clamp: exact halves. */
		{ 0x1p-149f, 148, 0 }, { 0x1.8p-148f, 148, 2 },
		{ 0x1p-148f, 147, 0 }, { -0x1.4p-146f, 147, -2 },
		{ 0x1.4p-146f, 149, 10 }, { 0x1p-149f, 178, 1 << 29 },
		{ 0x1.4p-146f, 147, 2 }, { 0x1.cp-146f, 147, 4 },
		{ 0x1p-149f, 149, 1 }, { 0x1.fffffcp-127f, 150, 16777214 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int32_t q;

		tally_fixp_encode(&c[i].x, &q, 1, c[i].e);
		assert_int_equal(q, c[i].q);
	}
}

/* int32 -> float rounds to nearest even; then the exact scaling. */
static void
decode_known(void **state)
{
	const struct {
		int32_t q;
		int e;
		float x;
	} c[] = {
		{ 3, 1, 1.5f }, { -3, 2, -0.75f }, { 0, 5, 0.0f },
		{ 16777217, 0, 16777216.0f }, { 16777219, 0, 16777220.0f },
		{ -16777219, 0, -16777220.0f }, { INT32_MAX, 0, 0x1p31f },
		{ INT32_MIN, 0, -0x1p31f }, { 1, 126, 0x1p-126f },
		{ 1, -126, 0x1p126f }, { INT32_MAX, -126, INFINITY },
		{ INT32_MIN, -126, -INFINITY }, { 5, -3, 40.0f },
		/* Subnormal results: one rounding, ties to even. */
		{ 1, 149, 0x1p-149f }, { 1, 150, 0.0f }, { 3, 150, 0x1p-148f },
		{ 5, 150, 0x1p-148f }, { 7, 150, 0x1p-147f },
		{ -3, 150, -0x1p-148f }, { 1, 178, 0.0f },
		{ 1 << 28, 178, 0.0f }, { (1 << 28) + 1, 178, 0x1p-149f },
		{ 3 << 28, 178, 0x1p-148f }, { INT32_MAX, 178, 0x1p-147f },
		{ INT32_MIN, 178, -0x1p-147f }, { 1, 127, 0x1p-127f },
		{ 0x7fffff, 149, 0x1.fffffcp-127f },
		{ 0x1000000, 150, 0x1p-126f },
		{ 0x1000003, 150, 0x1.000004p-126f },
		/*
		 * Just above half a subnormal step: one rounding goes up;
		 * rounding q to float first (2^28, 2^25) would leave an
		 * exact half, which goes to the even 0.
		 */
		{ (1 << 28) + 1, 178, 0x1p-149f },
		{ (1 << 25) + 1, 175, 0x1p-149f },
		{ -(1 << 25) - 1, 175, -0x1p-149f },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		float x;

		tally_fixp_decode(&c[i].q, &x, 1, c[i].e);
		assert_int_equal(to_bits(x), to_bits(c[i].x));
	}
}

/* Exponents outside the range clamp (for both directions). */
static void
exponent_clamp(void **state)
{
	const float x = 0x1p-100f;
	int32_t q, big = 1;
	float y;

	(void)state;
	assert_true(tally_fixp_pow2(1000) == 0x1p126f);
	assert_true(tally_fixp_pow2(-1000) == 0x1p-126f);
	assert_true(tally_fixp_pow2(0) == 1.0f);
	assert_int_equal(tally_fixp_clamp(1000), TALLY_FIXP_EXP_MAX);
	assert_int_equal(tally_fixp_clamp(-1000), TALLY_FIXP_EXP_MIN);
	assert_true(tally_fixp_scale1(178) == 0x1p126f);
	assert_true(tally_fixp_scale2(178) == 0x1p52f);
	assert_true(tally_fixp_scale1(-126) == 0x1p-126f);
	assert_true(tally_fixp_scale2(-126) == 1.0f);
	assert_true(tally_fixp_iscale_tiny(178) == 0x1p-178);
	assert_true(tally_fixp_iscale(-126) == 0x1p126f);
	/* 2^-100 * 2^178 = 2^78: saturates. */
	tally_fixp_encode(&x, &q, 1, 1000);
	assert_int_equal(q, 2147483520);
	{
		const float t = 0x1p-149f;

		tally_fixp_encode(&t, &q, 1, 1000);
		assert_int_equal(q, 1 << 29);
	}
	tally_fixp_decode(&big, &y, 1, INT32_MIN);
	assert_true(y == 0x1p126f);
	tally_fixp_decode(&big, &y, 1, INT32_MAX);
	assert_true(y == 0.0f);
	big = 1 << 30;
	tally_fixp_decode(&big, &y, 1, INT32_MAX);
	assert_true(y == 0x1p-148f);
}

/*
 * The element math against the double-precision model, on random bit
 * patterns (NaN, inf, subnormals included) and random in-range values,
 * at random exponents: one element at a time, and through the array
 * functions (the vectorized loops the library runs).
 */
static void
model_random(void **state)
{
	enum { N = 1031, ROUNDS = 2000 };
	static float x[N], y[N];
	static int32_t q[N], qr[N];
	uint64_t s = 42;

	(void)state;
	for (int r = 0; r < ROUNDS; r++) {
		int e = (int)(rnd_next(&s) % 305) - 126;
		float a;

		for (size_t k = 0; k < N; k++) {
			x[k] = (k & 1) ? from_bits((uint32_t)rnd_next(&s)) :
				ldexpf(rnd_unit(&s), 30 - e);
			qr[k] = (int32_t)(rnd_next(&s) >> 32);
		}
		tally_fixp_encode(x, q, N, e);
		tally_fixp_decode(qr, y, N, e);
		a = 0.0f;
		for (size_t k = 0; k < N; k++) {
			int32_t q1 = tally_fixp_enc1(x[k], tally_fixp_scale1(e),
				tally_fixp_scale2(e));
			float y1 = tally_fixp_dec_tiny(e) ?
				tally_fixp_dec1_tiny(qr[k],
					tally_fixp_iscale_tiny(e)) :
				tally_fixp_dec1(qr[k], tally_fixp_iscale(e));

			assert_int_equal(q1, model_enc(x[k], e));
			assert_int_equal(q[k], q1);
			assert_int_equal(to_bits(y1), to_bits(model_dec(qr[k],
				e)));
			assert_int_equal(to_bits(y[k]), to_bits(y1));
			assert_int_equal(tally_fixp_abs_bits(x[k]),
				isnan(x[k]) ? 0 : to_bits(fabsf(x[k])));
			if (!isnan(x[k]) && fabsf(x[k]) > a)
				a = fabsf(x[k]);
		}
		assert_int_equal(to_bits(tally_fixp_absmax(x, N)), to_bits(a));
	}
}

/*
 * The same inputs give the same bits: encoding twice, and the sum of the
 * world encoded arrays in two different orders, decoded.
 */
static void
deterministic(void **state)
{
	enum { N = 1000, W = 8 };
	static float x[W][N], y0[N], y1[N];
	static int32_t q[W][N], q2[N], s0[N], s1[N];
	uint64_t s = 7;
	float a = 0.0f;
	int e;

	(void)state;
	for (int w = 0; w < W; w++) {
		float m;

		for (int k = 0; k < N; k++)
			x[w][k] = rnd_unit(&s) * (float)(w + 1) * 1e-2f;
		m = tally_fixp_absmax(x[w], N);
		a = m > a ? m : a;
	}
	e = exponent_of(a, W);
	for (int w = 0; w < W; w++) {
		tally_fixp_encode(x[w], q[w], N, e);
		tally_fixp_encode(x[w], q2, N, e);
		assert_memory_equal(q[w], q2, sizeof(q2));
	}
	memset(s0, 0, sizeof(s0));
	memset(s1, 0, sizeof(s1));
	for (int w = 0; w < W; w++)
		for (int k = 0; k < N; k++) {
			assert_false(__builtin_add_overflow(s0[k], q[w][k],
				&s0[k]));
			assert_false(__builtin_add_overflow(s1[k],
				q[W - 1 - w][k], &s1[k]));
		}
	tally_fixp_decode(s0, y0, N, e);
	tally_fixp_decode(s1, y1, N, e);
	assert_memory_equal(y0, y1, sizeof(y0));
	for (int k = 0; k < N; k++) {
		double sum = 0.0, quant = W * ldexp(1.0, -e - 1);

		for (int w = 0; w < W; w++)
			sum += x[w][k];
		assert_true(fabs((double)y0[k] - sum) <=
			quant + (fabs(sum) + quant) * 0x1p-24 + 0x1p-60);
	}
}

/*
 * One element of the magnitude sweep, |x| <= 2^k: a 24-bit mantissa at
 * 2^(k - 24), far smaller (down to 2^(k - 87), into the subnormals and
 * below them to 0), or zero of either sign. Values round into the
 * subnormal range as ldexpf() does.
 */
static float
sweep_elem(uint64_t *s, int k)
{
	uint64_t h = rnd_next(s);
	float m = (float)((int64_t)(h >> 39) - (1 << 24));

	switch (h & 7) {
	case 0:
		return (h & 8) ? -0.0f : 0.0f;
	case 1:
		return ldexpf(m, k - 24 - (int)(h >> 3 & 63));
	default:
		return ldexpf(m, k - 24);
	}
}

/*
 * The world's tensors (xs[r], n elements each) summed as libtally does:
 * the global max |x|, the exponent, every member's encoding, the int32
 * sum (which must not overflow), the decoding. Checks the exponent
 * against the documented rule, the decoded sum against one rounding of
 * the integer sum, and each element against the exact sum within the
 * documented bound (an infinity only where the exact sum is past the
 * floats). Returns the largest |r - S| / absmax.
 */
static double
check_world_sum(float (*xs)[64], unsigned int world, size_t n)
{
	int32_t q[64];
	int64_t acc[64];
	int32_t sum[64];
	float r[64], a = 0.0f;
	double worst = 0.0;
	int e;

	for (unsigned int w = 0; w < world; w++) {
		float m = tally_fixp_absmax(xs[w], n);

		a = m > a ? m : a;
	}
	e = exponent_of(a, world);
	if (e != fixp_doc_exponent(a, world))
		fail_msg("absmax %a world %u: exponent %d, documented %d",
			(double)a, world, e, fixp_doc_exponent(a, world));
	memset(acc, 0, sizeof(acc));
	for (unsigned int w = 0; w < world; w++) {
		tally_fixp_encode(xs[w], q, n, e);
		for (size_t i = 0; i < n; i++)
			acc[i] += q[i];
	}
	for (size_t i = 0; i < n; i++) {
		assert_true(acc[i] >= INT32_MIN && acc[i] <= INT32_MAX);
		sum[i] = (int32_t)acc[i];
	}
	tally_fixp_decode(sum, r, n, e);
	for (size_t i = 0; i < n; i++) {
		struct xsum x = { { 0 } };
		double s, d, bound;

		assert_int_equal(to_bits(r[i]), to_bits(model_dec(sum[i], e)));
		for (unsigned int w = 0; w < world; w++)
			xsum_add(&x, xs[w][i], 1);
		s = xsum_double(&x);
		bound = fixp_doc_bound(s, a, world);
		if (isinf(r[i])) {
			if (fabs(s) + bound < FLT_MAX || (r[i] > 0) != (s > 0))
				fail_msg("world %u absmax %a: %a for the sum %a",
					world, (double)a, (double)r[i], s);
			continue;
		}
		xsum_add(&x, r[i], -1);
		d = fabs(xsum_double(&x));
		if (d > bound)
			fail_msg("world %u absmax %a exponent %d: element %zu "
				"is %a, the exact sum %a: error %a above the "
				"documented %a", world, (double)a, e, i,
				(double)r[i], s, d, bound);
		if (a > 0.0f && d / a > worst)
			worst = d / a;
	}
	return worst;
}

/*
 * Every magnitude of the floats: tensors whose largest |x| is exactly
 * 2^k, k from 127 down to -149 (the smallest subnormal), at several
 * world sizes, summed within the documented bound of the exact sums;
 * and ranks of very different magnitudes in one sum (rank r about
 * 2^-(37 r) of rank 0), where the bound follows the largest.
 */
static void
sweep_magnitudes(void **state)
{
	static const unsigned int ws[] = { 1, 2, 3, 8, 64 };
	static float xs[64][64];
	uint64_t s = 99;

	(void)state;
	for (size_t wi = 0; wi < sizeof(ws) / sizeof(ws[0]); wi++) {
		unsigned int world = ws[wi];
		double worst = 0.0, lim;

		for (int k = 127; k >= -149; k--) {
			for (int mixed = 0; mixed < 2; mixed++) {
				double w;

				for (unsigned int r = 0; r < world; r++)
					for (size_t i = 0; i < 64; i++)
						xs[r][i] = sweep_elem(&s, mixed ?
							k - (int)(37 * r % 150) :
							k);
				/* The largest: exactly 2^k, on some rank. */
				xs[rnd_next(&s) % (mixed ? 1 : world)]
					[rnd_next(&s) % 64] =
					ldexpf((rnd_next(&s) & 1) ? -1.0f :
						1.0f, k);
				w = check_world_sum(xs, world, 64);
				worst = w > worst ? w : worst;
			}
		}
		/* Relative to absmax: E / absmax plus the f32 rounding. */
		lim = (double)world * ldexp(1.0, -fixp_doc_b(world)) +
			ldexp((double)world + 1.0, -24) + 0x1p-40;
		print_message("# world %u: worst error %.3g of absmax "
			"(bound %.3g)\n", world, worst, lim);
		if (worst > lim)
			fail_msg("world %u: worst error %a of absmax, above %a",
				world, worst, lim);
	}
}

/* All zeros of either sign: exponent 0, every sum +0. */
static void
zero_sums(void **state)
{
	static float xs[64][64];

	(void)state;
	for (unsigned int r = 0; r < 64; r++)
		for (size_t i = 0; i < 64; i++)
			xs[r][i] = ((r + i) & 1) ? -0.0f : 0.0f;
	for (size_t wi = 0; wi < sizeof(worlds) / sizeof(worlds[0]); wi++) {
		int32_t q[64], sum[64] = { 0 };
		float y[64];

		assert_int_equal(exponent_of(0.0f, worlds[wi]), 0);
		for (unsigned int r = 0; r < worlds[wi]; r++) {
			assert_true(tally_fixp_absmax(xs[r], 64) == 0.0f);
			tally_fixp_encode(xs[r], q, 64, 0);
			for (size_t i = 0; i < 64; i++)
				sum[i] += q[i];
		}
		tally_fixp_decode(sum, y, 64, 0);
		for (size_t i = 0; i < 64; i++)
			assert_int_equal(to_bits(y[i]), 0);
	}
}

/*
 * NaN in a member's tensor: it counts as 0 in the max and in the sum
 * (the other members' values come through, within the bound); an
 * infinity leaves no exponent (-EINVAL, so libtally's -ERANGE).
 */
static void
nan_inf_sums(void **state)
{
	static float xs[64][64];
	uint64_t s = 5;
	int e;

	(void)state;
	for (unsigned int r = 0; r < 3; r++)
		for (size_t i = 0; i < 64; i++)
			xs[r][i] = sweep_elem(&s, -120);
	xs[1][3] = NAN;
	xs[2][3] = -NAN;
	xs[0][7] = from_bits(0x7f800001u);
	(void)check_world_sum(xs, 3, 64);
	xs[1][9] = INFINITY;
	assert_true(isinf(tally_fixp_absmax(xs[1], 64)));
	assert_int_equal(tally_fixp_exponent(tally_fixp_absmax(xs[1], 64),
		3, &e), -EINVAL);
}

/*
 * Two tiers: the total world's exponent is tally_fixp_exponent()'s up to
 * 64 and keeps world x 2^b within int32 up to 4096 (docs/scale-out.md).
 */
static void
exponent_total(void **state)
{
	int e = 777, e1;

	(void)state;
	for (unsigned int w = 1; w <= TALLY_FIXP_WORLD_MAX; w++) {
		assert_int_equal(tally_fixp_exponent(0.75f, w, &e1), 0);
		assert_int_equal(tally_fixp_exponent_total(0.75f, w, &e), 0);
		assert_int_equal(e, e1);
	}
	for (unsigned int w = 65; w <= TALLY_FIXP_TIER_WORLD_MAX; w++) {
		int b;

		/* 0.5 = 0.5 * 2^0: e is b itself. */
		assert_int_equal(tally_fixp_exponent_total(0.5f, w, &b), 0);
		assert_true((uint64_t)w << b <= INT32_MAX);
		assert_true((uint64_t)w << (b + 1) > INT32_MAX);
	}
	assert_int_equal(tally_fixp_exponent_total(0.5f, 66, &e), 0);
	assert_int_equal(e, 24);
	assert_int_equal(tally_fixp_exponent_total(0.5f, 4096, &e), 0);
	assert_int_equal(e, 18);
	assert_int_equal(tally_fixp_exponent_total(0.0f, 100, &e), 0);
	assert_int_equal(e, 0);
	e = 777;
	assert_int_equal(tally_fixp_exponent_total(1.0f, 4097, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent_total(NAN, 100, &e), -EINVAL);
	assert_int_equal(tally_fixp_exponent_total(1.0f, 0, &e), -EINVAL);
	assert_int_equal(e, 777);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exponent_known),
		cmocka_unit_test(exponent_worlds),
		cmocka_unit_test(exponent_total),
		cmocka_unit_test(exponent_zero),
		cmocka_unit_test(exponent_tiny),
		cmocka_unit_test(exponent_huge),
		cmocka_unit_test(exponent_invalid),
		cmocka_unit_test(exponent_clamp),
		cmocka_unit_test(sum_no_overflow),
		cmocka_unit_test(roundtrip),
		cmocka_unit_test(saturation),
		cmocka_unit_test(nan_handling),
		cmocka_unit_test(absmax_basic),
		cmocka_unit_test(half_even),
		cmocka_unit_test(decode_known),
		cmocka_unit_test(model_random),
		cmocka_unit_test(deterministic),
		cmocka_unit_test(sweep_magnitudes),
		cmocka_unit_test(zero_sums),
		cmocka_unit_test(nan_inf_sums),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
