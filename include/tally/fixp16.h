/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bf16 and f16 tensors through the shared-scale fixed point of
 * <tally/fixp.h>, summed exactly and rounded once to the input type.
 *
 * The procedure is tally_allreduce_f32()'s: every rank takes
 * tally_fixp16_absmax() of its tensor, the MAX round gives the global A,
 * every rank derives the same exponent e with tally_fixp16_exponent(),
 * encodes each element straight from its 16 bits (no float32 copy of the
 * tensor: each element is widened in a register, exactly) to
 * q = round_half_even(x * 2^e), the aggregator sums the integers
 * exactly, and each rank decodes the sum S into the input type:
 * S * 2^-e rounded ONCE to nearest, ties to even (subnormals included;
 * +-inf past the type's largest finite value). Every rank and every
 * order of arrival gives the same bits.
 *
 * Lanes: the integers go on the wire as i32 (lanes 32) or i16 (lanes 16,
 * half the bytes). With A = m 2^k (m in [0.5, 1)), e = b - k where
 *   lanes 32: b = 30 - floor(log2 world)   (as tally_fixp_exponent())
 *   lanes 16: b = 14 - floor(log2 world)   when the sums come back in
 *             16 bits (a narrow job), 14 when they come back in 32.
 * So |q| <= 2^b and world of them never saturate their lanes. Each
 * encoding rounds by at most half a step 2^-e <= 2^(1-b) A, so the
 * integer sum, decoded exactly, is within
 *     E = world * 2^-b * A
 * of the exact sum S of the inputs (NaN counting as 0), and the result r
 * (one rounding to a type of p significant bits: bf16 8, f16 11) within
 *     |r - S| <= E + 2^-p (|S| + E)
 * unless r overflows to +-inf. Bounds E / A: lanes 32: world^2 2^-30 at
 * most (2^-18 at 64 members), far below either type's rounding; lanes
 * 16, narrow: 2^-14 (1 member), 2^-12 (2), 2^-10 (4), 7 2^-12 (7), 2^-8
 * (8), ... tally_fixp16_lanes() picks 16-bit lanes where E <= 2^-(p+1) A
 * (at most half a unit in the last place of the type at the tensor's
 * largest magnitude): bf16 up to 7 members, f16 up to 2, in a narrow
 * job; 32-bit lanes otherwise.
 *
 * Element rules (scalar, vectorized and CUDA code give the same bits):
 * - absmax: max |x|, NaN counting as 0, infinities kept (and then refused
 *   by tally_fixp16_exponent(): the caller fails with -ERANGE).
 * - encode: x widened exactly to float, then tally_fixp_encode()'s rule
 *   (NaN -> 0, x 2^e clamped, rounded to nearest even), clamped to
 *   [-32768, 32767] in 16-bit lanes (never reached with the exponent
 *   above).
 * - decode: S * 2^-e rounded once to the type, ties to even; a zero sum
 *   is +0, a negative sum that rounds to zero is -0.
 *
 * The CPU functions take an AVX2 + F16C path where the CPU has both
 * (checked at run time), and scalar loops otherwise; both give the same
 * bits (tests/gpu/fixp16_test.c checks every 16-bit pattern both ways).
 */
#ifndef TALLY_FIXP16_H
#define TALLY_FIXP16_H

#include <stddef.h>
#include <stdint.h>

#include <tally/tally.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The lane width tally_allreduce_typed() uses for dt (TALLY_DT_BF16 or
 * TALLY_DT_F16) over world members, narrow being whether the job's sums
 * come back in their own width: 16 where the bound above holds (narrow,
 * and world * 2^(p+1) <= 2^(14 - floor(log2 world)): bf16 with world <= 7,
 * f16 with world <= 2), 32 otherwise (also for any other dt, and for a
 * wide job, where 16-bit lanes would halve only the way up).
 */
unsigned int tally_fixp16_lanes(enum tally_dtype dt, unsigned int world,
	int narrow);

/*
 * The exponent for global max |x| absmax, world members, lanes 32 or 16
 * and narrow as above, into *exp (in [-120, 178]). Returns 0, or
 * -EINVAL: absmax negative, infinite or NaN; world 0 or above 64; lanes
 * not 16 or 32; exp NULL (*exp untouched then).
 */
int tally_fixp16_exponent(float absmax, unsigned int world,
	unsigned int lanes, int narrow, int *exp);

/*
 * Max |x[i]| of n elements of dt (bf16 or f16 bits) as a float (exact);
 * NaN counts as 0, an infinity gives +inf; 0 when n is 0 or dt is
 * neither. Borrows x.
 */
float tally_fixp16_absmax(enum tally_dtype dt, const uint16_t *x, size_t n);

/*
 * Encodes n elements of dt at x with exponent exp (clamped to
 * [TALLY_FIXP_EXP_MIN, TALLY_FIXP_EXP_MAX]) into q: int32_t[n] for lanes
 * 32, int16_t[n] for lanes 16. Borrows x, writes q (caller's, not
 * overlapping x). Returns 0 or -EINVAL (dt not bf16/f16, lanes not
 * 16/32, NULL with n > 0).
 */
int tally_fixp16_encode(enum tally_dtype dt, const uint16_t *x, void *q,
	unsigned int lanes, size_t n, int exp);

/*
 * Decodes n sums at q (int32_t[n] for sum_bits 32, int16_t[n] for 16:
 * a narrow job's 16-bit results) encoded with exponent exp (clamped as
 * above) into dt at x, each rounded once. Borrows q, writes x (may be
 * the same memory as q for sum_bits 16). Returns 0 or -EINVAL.
 */
int tally_fixp16_decode(enum tally_dtype dt, const void *q,
	unsigned int sum_bits, uint16_t *x, size_t n, int exp);

/*
 * Whether the functions above take the vectorized path: on = 0 forces
 * the scalar loops, on = 1 the vectorized ones where the CPU has AVX2
 * and F16C (the default), on < 0 only asks. Returns 1 when the
 * vectorized path is now in use, 0 when not. For tests and benchmarks;
 * process-wide.
 */
int tally_fixp16_simd(int on);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FIXP16_H */
