/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The feedback family of codecs: error feedback (residual memory), DGC
 * momentum correction with momentum factor masking, ternary codecs
 * (MXNet-style 2-bit with a shared threshold and a residual; TernGrad's
 * stochastic ternary with a shared scale), sign votes with a majority
 * (signSGD) and shared-seed random-k. docs/codecs/feedback.md has the
 * math, the wire forms and the measured speeds.
 *
 * Every function is element-wise or index-wise: a chunk of a tensor is
 * processed on its own and gives the bytes of the same range of the whole
 * tensor, provided that
 * - i4 outputs (two elements a byte) start at an even element,
 * - sign and mask outputs (eight a byte) start at a multiple of 8,
 * - random draws are given the chunk's global position (offset, first).
 *
 * The CUDA kernels of <tally/feedback_cuda.h> give the very bits of these
 * functions: both run the element math of the *_math.h headers in
 * gpu/codec/feedback/.
 * Float results carry one NaN, 0x7fffffff, whatever NaN went in.
 *
 * Buffers are the caller's; a function borrows its inputs and writes its
 * outputs, which must not overlap its inputs unless said otherwise.
 */
#ifndef TALLY_FEEDBACK_H
#define TALLY_FEEDBACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Error feedback (residual memory). Each step offers the compressor
 * v = g + r, and keeps r' = v - sent, the part of v that was not sent
 * (sent = what the compressor's wire form decodes to on this worker,
 * before any sum). Conservation: sent + r' == v exactly, as real numbers,
 * whenever v - sent is a float; it is for every codec of this family
 * whose residual is kept (2-bit, DGC masking, random-k take: see those)
 * and for shared-scale fixed point without saturation. The rounding of
 * v = g + r is the one loss of the scheme, as in any f32 accumulation.
 */

/* v[i] = g[i] + r[i]. v may be g or r (in place); borrows the others. */
void tally_ef_apply(float *v, const float *g, const float *r, size_t n);

/*
 * r[i] = v[i] - sent[i]. r may be v or sent (in place). Returns the
 * number of elements whose residual is not exact (sent + r differs from
 * v as real numbers: v - sent was not a float, or a NaN, an infinite
 * sent or an overflow): 0 for the codecs named above; an element with an
 * infinite v and a finite sent keeps r = v and counts as exact.
 */
size_t tally_ef_update(float *r, const float *v, const float *sent, size_t n);

/*
 * DGC momentum correction and momentum factor masking. Per step:
 * tally_dgc_accumulate() (u = m * u + g, then v = v + u, two roundings
 * each, never fused), tally_dgc_select() by the caller's threshold (or
 * the caller's own mask), then tally_dgc_take(): sent = v where selected,
 * 0 elsewhere; v and u zeroed where selected. Taking is exact: the
 * selected v go to sent unchanged, so sent + v' == v element by element.
 *
 * Masks: bit (i mod 8) of byte i / 8 is element i, (n + 7) / 8 bytes,
 * bits past n zero (the layout of the wire's sign encoding).
 */

/* u[i] = momentum * u[i] + g[i]; v[i] = v[i] + u[i]. Borrows g. */
void tally_dgc_accumulate(float *u, float *v, const float *g, size_t n,
	float momentum);

/*
 * Writes the mask of |v[i]| >= thr ((n + 7) / 8 bytes) and returns how
 * many bits it set. A NaN v (or thr) is never selected. Borrows v.
 */
size_t tally_dgc_select(const float *v, uint8_t *mask, size_t n, float thr);

/*
 * For the elements set in mask: sent[i] = v[i], then v[i] = u[i] = 0;
 * elsewhere sent[i] = 0 and v, u stay. Borrows mask; sent is written
 * whole (a dense f32 array for the sum).
 */
void tally_dgc_take(float *v, float *u, float *sent, const uint8_t *mask,
	size_t n);

/*
 * Ternary codecs. Values q in {-1, 0, +1} travel as the wire's i4 (two's
 * complement nibbles, element 2k in the low nibble of byte k, an odd n
 * leaving the last high nibble 0: (n + 1) / 2 bytes) or i8 (n bytes); the
 * aggregator sums them exactly in its 32-bit lanes and returns the sums
 * wide (i32) or narrow (i8, or i4 saturated to -8..7), which decode as
 * sum * scale.
 *
 * 2-bit (MXNet): a shared threshold t = 2^exp (a power of two, so that
 * residuals are exact); every worker keeps a residual r. Per element,
 * v = g + r; q = +1 when t <= v < 2^24 t, -1 when -2^24 t < v <= -t,
 * else 0; r' = v - q t. Exact: for t <= v < 2^24 t, v and t are multiples
 * of ulp(v), and 0 <= v - t < v, so v - t has at most 24 significant bits
 * (symmetrically for negative v). Past 2^24 t an element is not sent
 * (v - t would round); it stays in the residual, as do NaN and infinities.
 * Decode with scale tally_2bit_threshold(exp).
 *
 * TernGrad: a shared scale s (the MAX over workers of max |g|, e.g.
 * tally_fixp_absmax() through the aggregator's MAX round); per element at
 * global index i, p = min(|g| / s, 1) and q = sign(g) with probability p,
 * else 0, drawn from a counter-based hash of (seed, i): the same bits on
 * every side and in any chunk. Unbiased: |E[q] s - g| < 2^-23 s (p is
 * rounded once, then compared with a uniform of 24 bits).
 */

/* Threshold exponents: 2^exp is a normal float. */
#define TALLY_TERN_EXP_MIN	(-126)
#define TALLY_TERN_EXP_MAX	126

/*
 * Writes into *exp the largest e with 2^e <= thr, clamped to
 * [TALLY_TERN_EXP_MIN, TALLY_TERN_EXP_MAX]. Returns 0, or -EINVAL when
 * thr is not positive and finite or exp is NULL (*exp untouched).
 */
int tally_2bit_exponent(float thr, int *exp);

/* 2^exp, exp clamped as above: the threshold, and the decoding scale. */
float tally_2bit_threshold(int exp);

/*
 * One 2-bit step over n elements: v = g[i] + r[i] (v = r[i] when g is
 * NULL), q into the i4 bytes at q4 ((n + 1) / 2 of them), r[i] = v - q t.
 * exp is clamped as above. Borrows g; r is read and written.
 */
void tally_2bit_encode_i4(float *r, const float *g, uint8_t *q4, size_t n,
	int exp);

/* As tally_2bit_encode_i4(), into n i8 values at q8. */
void tally_2bit_encode_i8(float *r, const float *g, int8_t *q8, size_t n,
	int exp);

/*
 * TernGrad over g[0 .. n), the elements at global indices offset ..
 * offset + n - 1, into (n + 1) / 2 i4 bytes at q4. Returns 0, or -EINVAL
 * (nothing written) when scale is not positive and finite.
 */
int tally_tern_encode_i4(const float *g, uint8_t *q4, size_t n, float scale,
	uint64_t seed, uint64_t offset);

/* As tally_tern_encode_i4(), into n i8 values at q8. */
int tally_tern_encode_i8(const float *g, int8_t *q8, size_t n, float scale,
	uint64_t seed, uint64_t offset);

/* x[i] = sum[i] * scale, for wide (i32) sums. */
void tally_tern_decode_i32(const int32_t *sum, float *x, size_t n,
	float scale);

/* x[i] = sum[i] * scale, for narrow i8 sums. */
void tally_tern_decode_i8(const int8_t *sum, float *x, size_t n, float scale);

/* x[i] = sum[i] * scale, for narrow i4 sums ((n + 1) / 2 bytes). */
void tally_tern_decode_i4(const uint8_t *sum, float *x, size_t n,
	float scale);

/*
 * Sign votes (signSGD with a majority vote). Each worker sends one bit an
 * element in the wire's sign encoding (bit (i mod 8) of byte i / 8, 1 is
 * +, (n + 7) / 8 bytes, bits past n zero): + unless x < 0, so +0, -0 and
 * NaN vote +. The aggregator returns, per element, the count c of +
 * votes (wide, i8) or a bit set when c > world / 2 (narrow). Decoding
 * gives +scale for a strict majority of +, -scale for a strict majority
 * of -, and on a tie (even world, c == world / 2) 0 from a wide result
 * (no step: sign(sum of the votes) is 0) but -scale from a narrow one,
 * whose bit is already clear on a tie. Odd worlds never tie.
 */

/* Votes of x[0 .. n) into (n + 7) / 8 bytes at bits. */
void tally_sign_encode(const float *x, uint8_t *bits, size_t n);

/* x[i] from the wide counts votes[i] of world voters, as above. */
void tally_sign_decode_votes(const int8_t *votes, float *x, size_t n,
	unsigned int world, float scale);

/* x[i] = +scale when bit i of bits is set, else -scale. */
void tally_sign_decode_bits(const uint8_t *bits, float *x, size_t n,
	float scale);

/*
 * Shared-seed random-k. Every worker derives the same k distinct indices
 * of [0, n) from (seed, n): index j (0 <= j < k) is the image of j under
 * a keyed pseudo-random permutation of [0, n) (a Feistel network with
 * cycle walking; gpu/codec/feedback/randk_math.h). The indices of a
 * smaller k are a prefix of those of a larger one, and are in the
 * permutation's order, not sorted. The dense array y[j] = x[index j] is
 * what travels (summed as f32 or through fixp); the sums come back to
 * their indices with tally_randk_scatter(), scaled by n / k for an
 * unbiased estimate of the mean when the caller wants one. With error
 * feedback, tally_randk_take() leaves in x exactly what was not sent.
 *
 * A chunk covers indices first .. first + cnt - 1; those functions
 * return 0, or -EINVAL (nothing done) when first + cnt > n.
 */

/*
 * k for a density d in (0, 1]: d n rounded to nearest, at least 1 when
 * n > 0; 0 for a density outside (0, 1].
 */
uint64_t tally_randk_k(uint64_t n, double density);

/* idx[j] = index first + j, for j < cnt. */
int tally_randk_indices(uint64_t *idx, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed);

/* y[j] = x[index first + j], for j < cnt. x has n elements. */
int tally_randk_gather(const float *x, float *y, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed);

/* As tally_randk_gather(), and x[index first + j] = 0 after reading it. */
int tally_randk_take(float *x, float *y, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed);

/*
 * x[index first + j] = y[j] * scale, for j < cnt; the other elements of x
 * are left alone (zero x first for a plain scatter).
 */
int tally_randk_scatter(const float *y, float *x, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, float scale);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_FEEDBACK_H */
