/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU reference of PowerSGD (<tally/powersgd.h>): loops over the element
 * math of psgd_math.h, which psgd.cu runs too, arranged for the caches.
 * Each loop keeps, for every output element, the one summation order
 * the header documents (it only interleaves independent sums), so the
 * bits are those of the per-element functions the kernels call.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tally/powersgd.h>

#include "psgd_math.h"

/*
 * Clones of the streaming loops for AVX-512, AVX2 and the baseline,
 * picked at load time (as the other families do).
 */
#if defined(__x86_64__) && !defined(TALLY_NO_MULTIVERSION)
#define PSGD_MV \
	__attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PSGD_MV
#endif

/* Inlined with constant ranks, so that the k loops unroll. */
#define PSGD_INLINE	static inline __attribute__((always_inline))

/* Double accumulators of tally_psgd_q() on the stack (16 KiB). */
#define Q_ACC		2048

/* Doubles of Q, transposed, of tally_psgd_decompress() (16 KiB). */
#define DEC_BUF		2048

/*
 * Four doubles: GCC's vector extension (GCC and clang), so that the loops
 * below run four sums at once whatever the compiler's vectorizer does.
 * Each lane is computed with the very operations of the scalar element
 * math (a product of two floats converted to double, then an addition),
 * so the bits are the same; -ffp-contract=off keeps the two apart.
 */
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/*
 * x[0 .. 3] = v rounded to float, NaN as the canonical one: the lanes of
 * tally_psgd_f32() (the conversion rounds to nearest even, as the scalar
 * one does).
 */
PSGD_INLINE void
store4(float *x, const v4d *v)
{
	v4f f = __builtin_convertvector(*v, v4f);
	v4i nan = f != f, b;

	memcpy(&b, &f, sizeof(b));
	b = (b & ~nan) | ((v4i){ 0x7fffffff, 0x7fffffff, 0x7fffffff,
		0x7fffffff } & nan);
	memcpy(x, &b, sizeof(b));
}

/*
 * *v = x[0 .. 3], converted to double (through a pointer: a vector
 * return value would change the ABI of the baseline clone).
 */
PSGD_INLINE void
load4(v4d *v, const float *x)
{
	v4f f;

	memcpy(&f, x, sizeof(f));
	*v = __builtin_convertvector(f, v4d);
}

/* The ceiling of the square root of n (n < 2^64), exactly. */
static uint64_t
ceil_sqrt(uint64_t n)
{
	uint64_t r = 0;

	/* Bit by bit: the largest r with r * r <= n (r < 2^32). */
	for (int b = 31; b >= 0; b--) {
		uint64_t t = r | (1ull << b);

		if (t * t <= n)
			r = t;
	}
	return r * r == n ? r : r + 1;
}

int
tally_psgd_shape(size_t n, uint32_t rows_hint, uint32_t *rows,
	uint32_t *cols)
{
	uint64_t r, c;

	if (n == 0 || rows == NULL || cols == NULL || rows_hint > n ||
	    (uint64_t)n > UINT32_MAX)
		return -EINVAL;
	r = rows_hint != 0 ? rows_hint : ceil_sqrt(n);
	c = ((uint64_t)n + r - 1) / r;
	if (r * c > UINT32_MAX)
		return -EINVAL;
	*rows = (uint32_t)r;
	*cols = (uint32_t)c;
	return 0;
}

int
tally_psgd_check(size_t n, uint32_t rows, uint32_t cols, unsigned int rank)
{
	if (rank == 0 || rank > TALLY_PSGD_RANK_MAX || rows == 0 ||
	    cols == 0 || (uint64_t)n > (uint64_t)rows * cols)
		return -EINVAL;
	return 0;
}

void
tally_psgd_init_q(float *q, uint32_t cols, unsigned int rank, uint64_t seed)
{
	uint64_t key = tally_psgd_key(seed);
	size_t cnt = (size_t)cols * rank;

	if (rank == 0 || rank > TALLY_PSGD_RANK_MAX)
		return;
	for (size_t c = 0; c < cnt; c++)
		q[c] = tally_psgd_normal(key, c);
}

/*
 * nr full rows of P (rows of M at m, each cols long), rank = 4 kv: the
 * nr * rank sums interleave, each over j ascending, four k at a time.
 * nr and kv are constants where inlined, so that acc stays in registers.
 */
PSGD_INLINE void
p_rows_v(const float *m, uint32_t cols, const float *q, unsigned int kv,
	float *p, unsigned int nr)
{
	unsigned int rank = 4 * kv;
	v4d acc[8][8];

	for (unsigned int r = 0; r < nr; r++)
		for (unsigned int c = 0; c < kv; c++)
			acc[r][c] = (v4d){ 0.0, 0.0, 0.0, 0.0 };
	for (uint32_t j = 0; j < cols; j++) {
		const float *qj = q + (size_t)j * rank;
		v4d qv[8];

		for (unsigned int c = 0; c < kv; c++)
			load4(&qv[c], qj + 4 * c);
		for (unsigned int r = 0; r < nr; r++) {
			double mr = (double)m[(size_t)r * cols + j];

			for (unsigned int c = 0; c < kv; c++)
				acc[r][c] = acc[r][c] + mr * qv[c];
		}
	}
	for (unsigned int r = 0; r < nr; r++)
		for (unsigned int c = 0; c < kv; c++)
			for (unsigned int l = 0; l < 4; l++)
				p[r * rank + 4 * c + l] =
					tally_psgd_f32(acc[r][c][l]);
}

/* As p_rows_v() for any rank, one sum at a time (nr <= 8). */
PSGD_INLINE void
p_rows_s(const float *m, uint32_t cols, const float *q, unsigned int rank,
	float *p, unsigned int nr)
{
	double acc[8][TALLY_PSGD_RANK_MAX];

	for (unsigned int r = 0; r < nr; r++)
		for (unsigned int k = 0; k < rank; k++)
			acc[r][k] = 0.0;
	for (uint32_t j = 0; j < cols; j++) {
		const float *qj = q + (size_t)j * rank;

		for (unsigned int r = 0; r < nr; r++) {
			float mr = m[(size_t)r * cols + j];

			for (unsigned int k = 0; k < rank; k++)
				acc[r][k] = tally_psgd_madd(acc[r][k], mr,
					qj[k]);
		}
	}
	for (unsigned int r = 0; r < nr; r++)
		for (unsigned int k = 0; k < rank; k++)
			p[r * rank + k] = tally_psgd_f32(acc[r][k]);
}

/*
 * tally_psgd_p() in blocks of nr full rows (rank = 4 kv when kv is not
 * 0, else scalar), then the rest (the partial and empty rows) one row at a
 * time by the element function the kernel runs.
 */
PSGD_INLINE void
p_all(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *q, unsigned int rank, float *p, unsigned int nr,
	unsigned int kv)
{
	uint32_t i = 0;

	for (; (uint64_t)i + nr <= rows &&
	     ((uint64_t)i + nr) * cols <= (uint64_t)n; i += nr) {
		if (kv != 0)
			p_rows_v(m + (size_t)i * cols, cols, q, kv,
				p + (size_t)i * rank, nr);
		else
			p_rows_s(m + (size_t)i * cols, cols, q, rank,
				p + (size_t)i * rank, nr);
	}
	for (; i < rows; i++)
		for (unsigned int k = 0; k < rank; k++)
			p[(size_t)i * rank + k] = tally_psgd_p1(m, n, cols, q,
				rank, i, k);
}

/*
 * Rows of M stream together: 8 for ranks up to 4 (so that enough sums are
 * in flight to hide the latency of an addition), fewer for larger ranks
 * (as many sums as the vector registers hold: rank 32 takes 2 rows, 64
 * sums). Ranks that are not multiples of 4 run one sum at a time.
 */
PSGD_MV void
tally_psgd_p(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *q, unsigned int rank, float *p)
{
	if (tally_psgd_check(n, rows, cols, rank) != 0)
		return;
	switch (rank) {
	case 1:
		p_all(m, n, rows, cols, q, 1, p, 8, 0);
		break;
	case 2:
		p_all(m, n, rows, cols, q, 2, p, 8, 0);
		break;
	case 4:
		p_all(m, n, rows, cols, q, 4, p, 8, 1);
		break;
	case 8:
		p_all(m, n, rows, cols, q, 8, p, 4, 2);
		break;
	case 12:
		p_all(m, n, rows, cols, q, 12, p, 2, 3);
		break;
	case 16:
		p_all(m, n, rows, cols, q, 16, p, 4, 4);
		break;
	case 24:
		p_all(m, n, rows, cols, q, 24, p, 2, 6);
		break;
	case 32:
		p_all(m, n, rows, cols, q, 32, p, 2, 8);
		break;
	case 3:
		p_all(m, n, rows, cols, q, 3, p, 8, 0);
		break;
	case 5:
		p_all(m, n, rows, cols, q, 5, p, 4, 0);
		break;
	case 6:
		p_all(m, n, rows, cols, q, 6, p, 4, 0);
		break;
	case 7:
		p_all(m, n, rows, cols, q, 7, p, 3, 0);
		break;
	default:
		p_all(m, n, rows, cols, q, rank, p, 4, 0);
		break;
	}
}

/*
 * The dot product of columns a and b of p: every lane's sum (rows
 * l, l + LANES, ... ascending: a block of LANES rows at a time, which
 * leaves each lane's order as it is), then the tree.
 */
static double
dot(const float *p, uint32_t rows, unsigned int rank, unsigned int a,
	unsigned int b)
{
	double s[TALLY_PSGD_LANES];

	for (unsigned int l = 0; l < TALLY_PSGD_LANES; l++)
		s[l] = 0.0;
	for (uint64_t i0 = 0; i0 < rows; i0 += TALLY_PSGD_LANES) {
		uint32_t cnt = rows - i0 < TALLY_PSGD_LANES ?
			(uint32_t)(rows - i0) : TALLY_PSGD_LANES;
		const float *blk = p + (size_t)i0 * rank;

		for (uint32_t l = 0; l < cnt; l++)
			s[l] = tally_psgd_madd(s[l], blk[(size_t)l * rank + a],
				blk[(size_t)l * rank + b]);
	}
	for (unsigned int w = TALLY_PSGD_LANES / 2; w > 0; w /= 2)
		for (unsigned int l = 0; l < w; l++)
			tally_psgd_tree1(s, l, w);
	return s[0];
}

void
tally_psgd_orthonormalize(float *p, uint32_t rows, unsigned int rank)
{
	if (rank == 0 || rank > TALLY_PSGD_RANK_MAX || rows == 0)
		return;
	for (unsigned int k = 0; k < rank; k++) {
		double s0 = dot(p, rows, rank, k, k), s1;

		for (int pass = 0; pass < 2; pass++) {
			for (unsigned int l = 0; l < k; l++) {
				double c = dot(p, rows, rank, l, k);

				for (uint32_t i = 0; i < rows; i++) {
					float *e = p + (size_t)i * rank;

					e[k] = tally_psgd_proj1(e[k], c, e[l]);
				}
			}
		}
		s1 = dot(p, rows, rank, k, k);
		if (tally_psgd_keep(s0, s1)) {
			double nrm = tally_psgd_dsqrt(s1);

			for (uint32_t i = 0; i < rows; i++)
				p[(size_t)i * rank + k] = tally_psgd_norm1(
					p[(size_t)i * rank + k], nrm);
		} else {
			for (uint32_t i = 0; i < rows; i++)
				p[(size_t)i * rank + k] = 0.0f;
		}
	}
}

/*
 * Adds row i of M's columns j0 .. j0 + w - 1 (seg, wl <= w of them inside
 * n) times p's row pi into the accumulators acc[k * w + j]: each sum
 * takes its next i, so the order over i stays ascending.
 */
PSGD_INLINE void
q_row(double *acc, const float *seg, uint32_t w, uint32_t wl,
	const float *pi, unsigned int rank)
{
	for (unsigned int k = 0; k < rank; k++) {
		double *a = acc + (size_t)k * w;
		float pk = pi[k];

		for (uint32_t j = 0; j < wl; j++)
			a[j] = tally_psgd_madd(a[j], seg[j], pk);
	}
}

/*
 * As q_row() for the four full rows at seg, seg + cols, ... (w of their
 * columns each): every accumulator takes the rows' four terms in order, i
 * ascending, between one load and one store, four columns at a time.
 */
PSGD_INLINE void
q_rows4(double *acc, const float *seg, uint32_t cols, uint32_t w,
	const float *pi, unsigned int rank)
{
	double pd[4][TALLY_PSGD_RANK_MAX];
	uint32_t j = 0;

	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int k = 0; k < rank; k++)
			pd[r][k] = (double)pi[(size_t)r * rank + k];
	for (; j + 4 <= w; j += 4) {
		v4d m0, m1, m2, m3;

		load4(&m0, seg + j);
		load4(&m1, seg + (size_t)cols + j);
		load4(&m2, seg + 2 * (size_t)cols + j);
		load4(&m3, seg + 3 * (size_t)cols + j);
		for (unsigned int k = 0; k < rank; k++) {
			double *at = acc + (size_t)k * w + j;
			v4d a;

			memcpy(&a, at, sizeof(a));
			a = a + m0 * pd[0][k];
			a = a + m1 * pd[1][k];
			a = a + m2 * pd[2][k];
			a = a + m3 * pd[3][k];
			memcpy(at, &a, sizeof(a));
		}
	}
	for (unsigned int r = 0; r < 4; r++)
		q_row(acc + j, seg + (size_t)r * cols + j, w, w - j,
			pi + (size_t)r * rank, rank);
}

/* tally_psgd_q() for one rank (a constant where inlined with one). */
PSGD_INLINE void
q_all(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *p, unsigned int rank, float *q)
{
	double acc[Q_ACC];
	uint32_t wmax = Q_ACC / rank;

	for (uint64_t j0 = 0; j0 < cols; j0 += wmax) {
		uint32_t w = cols - j0 < wmax ? (uint32_t)(cols - j0) : wmax;
		uint32_t i = 0;

		for (size_t t = 0; t < (size_t)w * rank; t++)
			acc[t] = 0.0;
		/* four full rows at a time, then row by row */
		for (; (uint64_t)i + 4 <= rows &&
		     ((uint64_t)i + 4) * cols <= (uint64_t)n; i += 4)
			q_rows4(acc, m + (size_t)i * cols + j0, cols, w,
				p + (size_t)i * rank, rank);
		for (; i < rows; i++) {
			uint32_t len = tally_psgd_row_len(n, cols, i), wl;

			if (len <= j0)
				break;	/* this row and the later ones */
			wl = len - j0 < w ? (uint32_t)(len - j0) : w;
			q_row(acc, m + (size_t)i * cols + j0, w, wl,
				p + (size_t)i * rank, rank);
		}
		for (uint32_t j = 0; j < w; j++)
			for (unsigned int k = 0; k < rank; k++)
				q[(size_t)(j0 + j) * rank + k] =
					tally_psgd_f32(acc[(size_t)k * w + j]);
	}
}

/*
 * tally_psgd_q() by blocks of columns: the block's accumulators stay in
 * the L1 cache while M streams past, a segment of each row at a time.
 */
PSGD_MV void
tally_psgd_q(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *p, unsigned int rank, float *q)
{
	if (tally_psgd_check(n, rows, cols, rank) != 0)
		return;
	switch (rank) {
	case 1:
		q_all(m, n, rows, cols, p, 1, q);
		break;
	case 2:
		q_all(m, n, rows, cols, p, 2, q);
		break;
	case 4:
		q_all(m, n, rows, cols, p, 4, q);
		break;
	case 8:
		q_all(m, n, rows, cols, p, 8, q);
		break;
	case 16:
		q_all(m, n, rows, cols, p, 16, q);
		break;
	case 32:
		q_all(m, n, rows, cols, p, 32, q);
		break;
	default:
		q_all(m, n, rows, cols, p, rank, q);
		break;
	}
}

/*
 * Columns j0 .. j0 + len - 1 of row pi of M_hat into m, from qt (the
 * block's rows of Q transposed: qt[k * ws + j] is q[j0 + j][k]): 16,
 * then four elements at a time, each summing over k ascending, then the
 * rest one by one with the element function the kernel runs.
 */
PSGD_INLINE void
dec_seg(const float *pi, const double *qt, uint32_t ws, const float *q,
	unsigned int rank, double scale, float *m, uint32_t len)
{
	double pd[TALLY_PSGD_RANK_MAX];
	uint32_t j = 0;

	/* in locals: the stores to m cannot change them */
	for (unsigned int k = 0; k < rank; k++)
		pd[k] = (double)pi[k];
	/* 16 elements: four independent chains of additions in flight */
	for (; j + 16 <= len; j += 16) {
		v4d a0 = { 0.0, 0.0, 0.0, 0.0 }, a1 = a0, a2 = a0, a3 = a0;

		for (unsigned int k = 0; k < rank; k++) {
			const double *t = qt + (size_t)k * ws + j;
			v4d q0, q1, q2, q3;

			memcpy(&q0, t, sizeof(q0));
			memcpy(&q1, t + 4, sizeof(q1));
			memcpy(&q2, t + 8, sizeof(q2));
			memcpy(&q3, t + 12, sizeof(q3));
			a0 = a0 + pd[k] * q0;
			a1 = a1 + pd[k] * q1;
			a2 = a2 + pd[k] * q2;
			a3 = a3 + pd[k] * q3;
		}
		a0 = a0 * scale;
		a1 = a1 * scale;
		a2 = a2 * scale;
		a3 = a3 * scale;
		store4(m + j, &a0);
		store4(m + j + 4, &a1);
		store4(m + j + 8, &a2);
		store4(m + j + 12, &a3);
	}
	for (; j + 4 <= len; j += 4) {
		v4d acc = { 0.0, 0.0, 0.0, 0.0 }, qk;

		for (unsigned int k = 0; k < rank; k++) {
			memcpy(&qk, qt + (size_t)k * ws + j, sizeof(qk));
			acc = acc + pd[k] * qk;
		}
		acc = acc * scale;
		store4(m + j, &acc);
	}
	for (; j < len; j++)
		m[j] = tally_psgd_dec1(pi, q + (size_t)j * rank, rank, scale);
}

/* tally_psgd_decompress() for one rank (a constant where inlined). */
PSGD_INLINE void
dec_all(const float *p, const float *q, uint32_t rows, uint32_t cols,
	unsigned int rank, double scale, float *m, size_t n)
{
	double qt[DEC_BUF];
	/*
	 * Rows of qt 4 doubles longer than the block, which is at most
	 * DEC_BUF / rank - 8 wide: their starts are not 4 KiB apart, so
	 * that the rank loads of a step do not all fall in one set of the
	 * L1 cache.
	 */
	uint32_t wmax = DEC_BUF / rank - 8;

	/* by blocks of columns, whose Q stays in the L1 cache, transposed */
	for (uint64_t j0 = 0; j0 < cols; j0 += wmax) {
		uint32_t w = cols - j0 < wmax ? (uint32_t)(cols - j0) : wmax;

		for (uint32_t j = 0; j < w; j++)
			for (unsigned int k = 0; k < rank; k++)
				qt[(size_t)k * (w + 4) + j] =
					q[(size_t)(j0 + j) * rank + k];
		for (uint32_t i = 0; i < rows; i++) {
			uint32_t len = tally_psgd_row_len(n, cols, i);

			if (len <= j0)
				break;	/* this row and the later ones */
			dec_seg(p + (size_t)i * rank, qt, w + 4,
				q + (size_t)j0 * rank, rank, scale,
				m + (size_t)i * cols + j0,
				len - j0 < w ? (uint32_t)(len - j0) : w);
		}
	}
}

PSGD_MV void
tally_psgd_decompress(const float *p, const float *q, uint32_t rows,
	uint32_t cols, unsigned int rank, float scale, float *m, size_t n)
{
	if (tally_psgd_check(n, rows, cols, rank) != 0)
		return;
	switch (rank) {
	case 1:
		dec_all(p, q, rows, cols, 1, scale, m, n);
		break;
	case 2:
		dec_all(p, q, rows, cols, 2, scale, m, n);
		break;
	case 4:
		dec_all(p, q, rows, cols, 4, scale, m, n);
		break;
	case 8:
		dec_all(p, q, rows, cols, 8, scale, m, n);
		break;
	case 16:
		dec_all(p, q, rows, cols, 16, scale, m, n);
		break;
	case 32:
		dec_all(p, q, rows, cols, 32, scale, m, n);
		break;
	default:
		dec_all(p, q, rows, cols, rank, scale, m, n);
		break;
	}
}
