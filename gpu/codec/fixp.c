/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of the shared-scale fixed-point codec (<tally/fixp.h>):
 * plain loops over the element math of fixp_math.h, which the CUDA
 * kernels run too. The loops vectorize; on x86-64 they are cloned for
 * AVX-512 and AVX2 and picked at load time (rintf becomes vroundps there).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <tally/fixp.h>
#include <tally/proto.h>

#include "fixp_math.h"

_Static_assert(TALLY_FIXP_WORLD_MAX == TALLY_MAX_WORKERS,
	"fixp world bound must match the wire's worker bound");

#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define TALLY_MV __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TALLY_MV
#endif

/*
 * Exponent for a global max |x| of absmax over world workers; see
 * <tally/fixp.h> for the derivation. Writes *exp only on success.
 */
int
tally_fixp_exponent(float absmax, unsigned int world, int *exp)
{
	uint32_t lim;
	int b, k, e;

	if (exp == NULL || world == 0 || world > TALLY_FIXP_WORLD_MAX)
		return -EINVAL;
	if (!isfinite(absmax) || absmax < 0.0f)
		return -EINVAL;
	if (absmax == 0.0f) {
		*exp = 0;
		return 0;
	}
	/* b = floor(log2(L)), L = (2^31 - 1) / world >= 2^25 - 1. */
	lim = (uint32_t)INT32_MAX / world;
	for (b = 0; lim > 1; lim >>= 1)
		b++;
	/*
	 * absmax = m * 2^k, m in [0.5, 1): absmax < 2^k (subnormals too).
	 * k is in [-148, 128] and b in [24, 30], so e in [-104, 178]: no
	 * clamp, the encoding takes every such e.
	 */
	(void)frexpf(absmax, &k);
	e = b - k;
	*exp = e;
	return 0;
}

/*
 * tally_fixp_exponent() past 64 ranks (two tiers): e for one rank, less
 * what the bigger world takes off b. Writes *exp only on success.
 */
int
tally_fixp_exponent_total(float absmax, unsigned int world, int *exp)
{
	uint32_t lim;
	int b, e;

	if (world <= TALLY_FIXP_WORLD_MAX)
		return tally_fixp_exponent(absmax, world, exp);
	if (world > TALLY_FIXP_TIER_WORLD_MAX ||
			tally_fixp_exponent(absmax, 1, &e) != 0)
		return -EINVAL;
	lim = (uint32_t)INT32_MAX / world;
	for (b = 0; lim > 1; lim >>= 1)
		b++;
	*exp = absmax == 0.0f ? 0 : e - (30 - b);
	return 0;
}

/* The floats' bits, read in place (so that the max loop vectorizes). */
typedef uint32_t f32bits __attribute__((may_alias));

/* Max of tally_fixp_abs_bits() over x[0..n); borrows x. */
TALLY_MV static uint32_t
absmax_bits(const float *restrict x, size_t n)
{
	const f32bits *u = (const f32bits *)x;
	uint32_t m = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t a = tally_fixp_abs_bits_u(u[i]);

		m = a > m ? a : m;
	}
	return m;
}

/* Max |x[i]|, NaN as 0. Borrows x. */
float
tally_fixp_absmax(const float *x, size_t n)
{
	return tally_hd_u2f(absmax_bits(x, n));
}

/* q[0..n) = enc1(x[0..n)); borrows x, writes the caller's q. */
TALLY_MV static void
encode_loop(const float *restrict x, int32_t *restrict q, size_t n,
	float s1, float s2)
{
	for (size_t i = 0; i < n; i++)
		q[i] = tally_fixp_enc1(x[i], s1, s2);
}

/*
 * encode_loop() for e <= 126, where the second factor is 1: the product
 * by 1 is exact, so the compiler drops it and the loop is as fast as a
 * single scaling.
 */
TALLY_MV static void
encode_loop1(const float *restrict x, int32_t *restrict q, size_t n,
	float s1)
{
	for (size_t i = 0; i < n; i++)
		q[i] = tally_fixp_enc1(x[i], s1, 1.0f);
}

/* x[0..n) = dec1(q[0..n)); borrows q, writes the caller's x. */
TALLY_MV static void
decode_loop(const int32_t *restrict q, float *restrict x, size_t n,
	float iscale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_fixp_dec1(q[i], iscale);
}

/* x[0..n) = dec1_tiny(q[0..n)), for e > 126; as decode_loop(). */
TALLY_MV static void
decode_tiny_loop(const int32_t *restrict q, float *restrict x, size_t n,
	double iscale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = tally_fixp_dec1_tiny(q[i], iscale);
}

/* Encodes n elements with exponent exp (clamped). Borrows x, writes q. */
void
tally_fixp_encode(const float *x, int32_t *q, size_t n, int exp)
{
	float s2 = tally_fixp_scale2(exp);

	if (s2 == 1.0f)
		encode_loop1(x, q, n, tally_fixp_scale1(exp));
	else
		encode_loop(x, q, n, tally_fixp_scale1(exp), s2);
}

/*
 * Decodes n elements with exponent exp (clamped): the float path up to
 * 126, the binary64 one above (where results can be subnormal). Borrows
 * q, writes x.
 */
void
tally_fixp_decode(const int32_t *q, float *x, size_t n, int exp)
{
	if (tally_fixp_dec_tiny(exp))
		decode_tiny_loop(q, x, n, tally_fixp_iscale_tiny(exp));
	else
		decode_loop(q, x, n, tally_fixp_iscale(exp));
}
