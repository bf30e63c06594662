/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared-scale fixed-point codec: tally's default f32 allreduce encoding.
 *
 * Every worker takes tally_fixp_absmax() of its data, the aggregator
 * takes the MAX over workers (one small round), and every worker then
 * derives the same exponent e from that global maximum and the world size
 * with tally_fixp_exponent(). Each element is encoded as
 * q = round_half_even(x * 2^e) into an int32; the aggregator sums the
 * int32s exactly (so the order of arrival does not matter), and workers
 * decode sum * 2^-e. Every worker and every run gets the same bits.
 *
 * Element rules (the CUDA kernels of <tally/fixp_cuda.h> give the same
 * bits; both run the same code, gpu/codec/fixp_math.h). Each is defined
 * on exact values, with one rounding where it says so:
 * - encode: NaN -> 0; y = x * 2^e exactly (computed as two products by
 *   powers of two, each exact where it matters); y is clamped to
 *   [TALLY_FIXP_SAT_MIN, TALLY_FIXP_SAT_MAX] (infinities saturate), then
 *   rounded to the nearest integer, ties to even.
 * - decode: q * 2^-e rounded once to the nearest binary32, ties to even
 *   (subnormal results included; +-inf past FLT_MAX).
 * - absmax: max |x|, a NaN counting as 0; an infinity is kept (and then
 *   refused by tally_fixp_exponent()).
 *
 * Precision: with A the global max |x| and b as in tally_fixp_exponent(),
 * every element of a decoded sum r of world members whose exact sum is S
 * (NaN counting as 0) satisfies
 *     |r - S| <= E + 2^-24 (|S| + E) + 2^-150,   E = world * 2^-b * A,
 * over the whole binary32 range, subnormals included, unless S is so
 * close to the top of the range that r rounds to +-inf. E <= world^2 *
 * 2^-30 * A: 2^-30 A for one member, 2^-24 A for 8, 2^-18 A for 64. E
 * bounds the encoding's roundings (half a step 2^-e each, and 2^-e <=
 * 2^(1-b) A); the rest is the one rounding of the decoding. When
 * e >= 149 (A < 2^(b-149): 2^-119 for one member, 2^-125 for 64), every
 * float is a multiple of 2^-e, the encoding is exact, and r is S rounded
 * once to binary32.
 */
#ifndef TALLY_FIXP_H
#define TALLY_FIXP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The exponents the encoding and decoding take. tally_fixp_exponent()
 * returns e in [24 - 128, 30 + 148] = [-104, 178]: from FLT_MAX at 64
 * members to the smallest subnormal 2^-149 alone.
 */
#define TALLY_FIXP_EXP_MIN	(-126)
#define TALLY_FIXP_EXP_MAX	178
/* Largest world size (= TALLY_MAX_WORKERS of <tally/proto.h>). */
#define TALLY_FIXP_WORLD_MAX	64
/*
 * Saturation bounds of x * 2^e before rounding: INT32_MIN, and the largest
 * float below 2^31 (INT32_MAX is not a float). Encoded values therefore lie
 * in [-2147483648, 2147483520].
 */
#define TALLY_FIXP_SAT_MIN	(-2147483648.0f)
#define TALLY_FIXP_SAT_MAX	2147483520.0f

/*
 * Picks the exponent for a tensor whose global max |x| is absmax, summed
 * over world workers: with 2^b the largest power of two such that
 * world * 2^b <= 2^31 - 1 (b = 30 - floor(log2(world)): 30 for 1, 29 for
 * 2 and 3, 28 for 4 to 7, ..., 24 for 64), and absmax = m * 2^k with m in
 * [0.5, 1) (frexpf; subnormals too), writes e = b - k into *exp. Then
 * |round(x * 2^e)| <= 2^b for |x| <= absmax, and world of them sum within
 * int32. absmax 0 gives e = 0. e is always in [-104, 178], within
 * [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]: no clamp. Returns 0, or
 * -EINVAL when absmax is negative, infinite or NaN, world is 0 or above
 * TALLY_FIXP_WORLD_MAX, or exp is NULL (*exp untouched then).
 */
int tally_fixp_exponent(float absmax, unsigned int world, int *exp);

/* Ranks of a two-tier job: 64 leaves of 64 (docs/scale-out.md). */
#define TALLY_FIXP_TIER_WORLD_MAX	4096

/*
 * tally_fixp_exponent() for the total world of a two-tier job, 1 ..
 * TALLY_FIXP_TIER_WORLD_MAX: the same rule (b = floor(log2((2^31 - 1) /
 * world)): 24 for 64 .. 127, 23 for 128 .. 255, ..., 18 for 4096), so
 * the spine's int32 sum of every rank cannot overflow; the same e as
 * tally_fixp_exponent() for a world of up to 64. Returns 0 or -EINVAL.
 */
int tally_fixp_exponent_total(float absmax, unsigned int world, int *exp);

/* Max |x[i]| over n elements (NaN counts as 0); 0 when n is 0. Borrows x. */
float tally_fixp_absmax(const float *x, size_t n);

/*
 * q[i] = encode(x[i]) with exponent exp, for n elements. Borrows x, writes
 * q (caller's); the two must not overlap. exp is clamped to
 * [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX].
 */
void tally_fixp_encode(const float *x, int32_t *q, size_t n, int exp);

/*
 * x[i] = decode(q[i]) with exponent exp (the one the values were encoded
 * with, also for their sums), for n elements. Borrows q, writes x; the two
 * must not overlap. exp is clamped as for tally_fixp_encode().
 */
void tally_fixp_decode(const int32_t *q, float *x, size_t n, int exp);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FIXP_H */
