/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PowerSGD (Vogels et al., 2019): a gradient of n floats, viewed as a
 * rows x cols matrix M, is compressed to rank r by one step of power
 * iteration shared by all workers:
 *
 *   P = M Q          (rows x r)   allreduce(P)
 *   P = orth(P)                   the same on every worker
 *   Q = M^T P        (cols x r)   allreduce(Q)
 *   M_hat = P Q^T                 (times 1 / world for a mean)
 *
 * Q is warm-started from the previous step; the first Q is drawn from a
 * seed shared by the workers (tally_psgd_init_q()). The caller keeps the
 * error feedback (residual = M - M_hat, see <tally/feedback.h>) and does
 * the allreduces. docs/codecs/powersgd.md has the math and the speeds.
 *
 * Layouts: M is the flat m[0 .. n) read row-major (element i is
 * M[i / cols][i % cols]); elements past n (the end of the last row, and
 * whole rows when rows * cols - n >= cols) read as 0 and contribute
 * nothing. P is rows x rank and Q is cols x rank, both row-major:
 * p[i * rank + k], q[j * rank + k].
 *
 * Reproducible: every sum is taken in one fixed order with double
 * accumulators, no FMA contraction, and results rounded once to float
 * (to nearest even), so every function is a pure function of its
 * inputs' bits: the same on every worker, and the same as the CUDA
 * kernels of <tally/powersgd_cuda.h>, which run the same element math
 * (gpu/codec/powersgd/psgd_math.h). The orders:
 * - P = M Q: p[i][k] = sum over j ascending of m[i][j] q[j][k];
 * - Q = M^T P: q[j][k] = sum over i ascending of m[i][j] p[i][k];
 * - M_hat: m[i][j] = scale * (sum over k ascending of p[i][k] q[j][k]);
 * - orthonormalization's dot products: 256 lanes, lane l summing rows
 *   i = l, l + 256, ... ascending, then a fixed pairwise tree.
 * Each sum starts from +0; products of two floats are exact in double,
 * so each term is exact and only the additions round. Float results that
 * are NaN carry one NaN, 0x7fffffff (the GPU's).
 *
 * NaN and infinities in M propagate through P and Q as IEEE arithmetic
 * says; orthonormalization zeroes a column that holds one (see there).
 *
 * Arguments: rank is 1 .. TALLY_PSGD_RANK_MAX, rows and cols are at least
 * 1 and n <= rows * cols; tally_psgd_check() says so. The void functions
 * do nothing (write nothing) when that does not hold. Buffers are the
 * caller's; a function borrows its inputs and writes its output, which
 * must not overlap its inputs.
 */
#ifndef TALLY_POWERSGD_H
#define TALLY_POWERSGD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_PSGD_RANK_MAX	32

/*
 * The matrix a flat tensor of n elements is viewed as: rows x cols,
 * row-major (element i is M[i / cols][i % cols]); elements past n read as
 * 0. rows_hint 0 picks rows = ceil(sqrt(n)) (a near-square view, cols <=
 * rows), otherwise rows = rows_hint (1 .. n); cols = ceil(n / rows).
 * Returns 0, or -EINVAL (*rows and *cols untouched) when n == 0,
 * rows_hint > n, rows or cols is NULL, or the shape's rows * cols (and so
 * n) exceeds UINT32_MAX.
 */
int tally_psgd_shape(size_t n, uint32_t rows_hint, uint32_t *rows,
	uint32_t *cols);

/*
 * 0 when (n, rows, cols, rank) are arguments the functions below accept:
 * 1 <= rank <= TALLY_PSGD_RANK_MAX, rows >= 1, cols >= 1 and
 * n <= rows * cols (n == 0 is accepted: nothing to read). Else -EINVAL.
 */
int tally_psgd_check(size_t n, uint32_t rows, uint32_t cols,
	unsigned int rank);

/*
 * q (cols x rank, row-major: q[j * rank + k]) = standard normal draws,
 * draw c = j * rank + k from a counter-based hash of (seed, c): the same
 * on every worker, on the CPU and the GPU, and in any chunk (the flat
 * array q[0 .. cols * rank) is draws 0, 1, 2, ...). Marsaglia's polar
 * method over the hash's uniforms, in double, with a logarithm of plain
 * IEEE operations (psgd_math.h); rounded once to float. Writes nothing
 * for a rank outside 1 .. TALLY_PSGD_RANK_MAX.
 */
void tally_psgd_init_q(float *q, uint32_t cols, unsigned int rank,
	uint64_t seed);

/*
 * p (rows x rank, row-major) = M q, M the flat m[0 .. n) viewed rows x
 * cols: p[i][k] = sum over j ascending (j < the row's length) of
 * m[i * cols + j] q[j][k], in double from +0, rounded once. Rows past n
 * give 0. Borrows m and q; writes all of p.
 */
void tally_psgd_p(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *q, unsigned int rank, float *p);

/*
 * Orthonormalizes the rank columns of p (rows x rank) in place: modified
 * Gram-Schmidt, columns k = 0, 1, ... in order, each projected twice
 * ("twice is enough") against the columns before it, l ascending:
 *   s0 = <p_k, p_k>
 *   two passes: for l < k: c = <p_l, p_k>; p_k = p_k - c p_l
 *   s1 = <p_k, p_k>
 *   p_k = p_k / sqrt(s1), or p_k = 0 (every element +0) when not
 *   s1 > 2^-32 s0 (the norm fell by 2^16 or more: rounding noise of a
 *   column in the span of the earlier ones, or too close to it to
 *   normalize; this includes s0 == 0) or when s0 or s1 is not finite
 *   (a NaN or an infinity in the column).
 * Dot products: double, 256 lanes (lane l sums rows l, l + 256, ...
 * ascending), lanes added by a pairwise tree (lane l += lane l + w for
 * w = 128, 64, ..., 1). Updates p - c p and p / sqrt(s1) in double,
 * rounded once to float. So a kept column has norm 1 (to float rounding)
 * and is orthogonal to the earlier ones; a zero column projects nothing
 * out of later ones; columns beyond rank(P) (rank > rows, say) are 0.
 */
void tally_psgd_orthonormalize(float *p, uint32_t rows, unsigned int rank);

/*
 * q (cols x rank, row-major) = M^T p: q[j][k] = sum over i ascending
 * (i * cols + j < n) of m[i * cols + j] p[i][k], in double from +0,
 * rounded once. Borrows m and p; writes all of q.
 */
void tally_psgd_q(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *p, unsigned int rank, float *q);

/*
 * m[i] = scale * (p q^T)[i / cols][i % cols] for i < n (the padding is not
 * written): the dot product over k ascending in double from +0, times
 * scale in double, rounded once to float. Borrows p and q.
 */
void tally_psgd_decompress(const float *p, const float *q, uint32_t rows,
	uint32_t cols, unsigned int rank, float scale, float *m, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_POWERSGD_H */
