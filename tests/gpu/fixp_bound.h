/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test helpers for the precision of shared-scale fixed point
 * (<tally/fixp.h>): an exact sum of binary32 values, and the bound the
 * header documents for a decoded sum. Written from the documentation,
 * independent of the code under test. Shared by tests/gpu/fixp_test.c
 * (the CPU math) and tests/lib/allreduce_test.c (through the engine).
 */
#ifndef TALLY_TESTS_FIXP_BOUND_H
#define TALLY_TESTS_FIXP_BOUND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/*
 * An exact sum of floats: fixed point in units of 2^-160, in 32-bit limbs
 * kept in int64 (limb i weighs 2^(32 i - 160)), so every binary32 (a
 * 24-bit integer times 2^p, -149 <= p <= 104) adds without rounding, and
 * millions of them before a limb could overflow.
 */
#define XSUM_LIMBS	10

struct xsum {
	int64_t l[XSUM_LIMBS];
};

/* s += sign * x exactly; x finite (NaN and infinities are not added). */
static inline void
xsum_add(struct xsum *s, float x, int sign)
{
	uint32_t u, ex;
	uint64_t m, v;
	int off;

	memcpy(&u, &x, sizeof(u));
	ex = u >> 23 & 0xff;
	if (ex == 0xff)
		return;
	m = u & 0x7fffffu;
	if (ex != 0)
		m |= 0x800000u;
	off = (ex != 0 ? (int)ex - 150 : -149) + 160;
	v = m << (off % 32);
	if (u >> 31)
		sign = -sign;
	s->l[off / 32] += sign * (int64_t)(v & 0xffffffffu);
	s->l[off / 32 + 1] += sign * (int64_t)(v >> 32);
}

/*
 * The sum as a double: the limbs normalized to one sign, then added from
 * the top, so the result is within a few units of 2^-53 of the exact
 * value (relative).
 */
static inline double
xsum_double(const struct xsum *s)
{
	int64_t l[XSUM_LIMBS], carry = 0;
	double d = 0.0, sign = 1.0;
	int i;

	memcpy(l, s->l, sizeof(l));
	for (i = 0; i < XSUM_LIMBS - 1; i++) {
		l[i] += carry;
		carry = l[i] >> 32;		/* floor division */
		l[i] -= carry * ((int64_t)1 << 32);
	}
	l[XSUM_LIMBS - 1] += carry;
	if (l[XSUM_LIMBS - 1] < 0) {
		/* -(value): negate every limb, then borrow again. */
		sign = -1.0;
		carry = 0;
		for (i = 0; i < XSUM_LIMBS; i++)
			l[i] = -l[i];
		for (i = 0; i < XSUM_LIMBS - 1; i++) {
			l[i] += carry;
			carry = l[i] >> 32;
			l[i] -= carry * ((int64_t)1 << 32);
		}
		l[XSUM_LIMBS - 1] += carry;
	}
	for (i = XSUM_LIMBS - 1; i >= 0; i--)
		d += ldexp((double)l[i], 32 * i - 160);
	return sign * d;
}

/* b of <tally/fixp.h>: 30 - floor(log2(world)). */
static inline int
fixp_doc_b(unsigned int world)
{
	int lg = 0;

	while ((world >> (lg + 1)) != 0)
		lg++;
	return 30 - lg;
}

/*
 * The exponent rule of <tally/fixp.h> and docs/protocol.md, from the
 * documentation: e = b - k with absmax = m * 2^k, m in [0.5, 1); 0 for
 * absmax 0.
 */
static inline int
fixp_doc_exponent(float absmax, unsigned int world)
{
	int k;

	if (absmax == 0.0f)
		return 0;
	(void)frexp((double)absmax, &k);
	return fixp_doc_b(world) - k;
}

/*
 * The documented bound on |r - S| for a decoded sum r of world members
 * whose exact sum is S and whose global max |x| is absmax:
 * E + 2^-24 (|S| + E) + 2^-150 with E = world * 2^-b * absmax. A hair
 * of slack covers this double arithmetic.
 */
static inline double
fixp_doc_bound(double s, float absmax, unsigned int world)
{
	double e = (double)world * ldexp((double)absmax, -fixp_doc_b(world));

	return (e + ldexp(fabs(s) + e, -24) + 0x1p-150) * (1.0 + 0x1p-40);
}

#endif /* TALLY_TESTS_FIXP_BOUND_H */
