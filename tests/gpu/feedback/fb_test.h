/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers of the feedback family's CPU suites: a deterministic generator,
 * float bits, an exactness check in double precision (an independent
 * model of the float code under test) and data with every class of
 * float in it.
 */
#ifndef TALLY_TESTS_GPU_FEEDBACK_FB_TEST_H
#define TALLY_TESTS_GPU_FEEDBACK_FB_TEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Deterministic generator (splitmix64): the tests give the same data. */
static inline uint64_t
rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1), multiples of 2^-24. */
static inline float
rnd_unit(uint64_t *s)
{
	return (float)((int64_t)(rnd_next(s) >> 39) - (1 << 24)) / 0x1p24f;
}

static inline float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t
to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/*
 * 1 when a + b == c exactly as real numbers (a, b, c finite floats):
 * TwoSum in double gives a + b = s + e exactly (no overflow in double),
 * so the sum is c exactly when e is 0 and s is c.
 */
static inline int
exact_sum(float a, float b, float c)
{
	double da = a, db = b;
	double s = da + db, bb = s - da;
	double e = (da - (s - bb)) + (db - bb);

	return e == 0.0 && s == (double)c;
}

/*
 * A float of any class: mostly finite values of every magnitude (random
 * exponent, subnormals included), with zeros, infinities and NaNs mixed
 * in when specials is set.
 */
static inline float
rnd_any(uint64_t *s, int specials)
{
	uint64_t r = rnd_next(s);
	uint32_t sign = (r & 1) ? 0x80000000u : 0;

	switch (specials ? (r >> 1) % 16 : 15) {
	case 0:
		return from_bits(0x7fc00000u | (uint32_t)(r >> 42) | sign);
	case 1:
		return from_bits(0x7f800000u | sign);
	case 2:
		return from_bits(sign);
	case 3:	/* subnormal */
		return from_bits(((uint32_t)(r >> 41) & 0x7fffffu) | sign);
	default:	/* finite, exponent 1 .. 254 */
		return from_bits((((uint32_t)(r >> 8) % 254 + 1) << 23) |
			((uint32_t)(r >> 40) & 0x7fffffu) | sign);
	}
}

#endif /* TALLY_TESTS_GPU_FEEDBACK_FB_TEST_H */
