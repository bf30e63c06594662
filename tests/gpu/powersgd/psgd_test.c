/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of PowerSGD (<tally/powersgd.h>): the shape rule and its
 * refusals; the draws of Q (the same every call and in any layout, the
 * documented formula against a model with libm's log, the logarithm
 * itself, and the distribution: mean, variance, fourth moment, two
 * quantiles); P = M Q and Q = M^T P against a model in long double (an
 * error bound) and, bit for bit, against a straightforward implementation
 * of the documented orders written here; the same for the
 * orthonormalization (P^T P = I, the span kept, rank > rows, zero,
 * duplicate and non-finite columns) and M_hat = P Q^T; padding (n not a
 * multiple of cols, empty rows) against the zero-padded matrix; round
 * trips that recover low-rank matrices, with several workers too; the
 * per-element functions the CUDA kernels run against the CPU loops; and
 * refused arguments, which write nothing.
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

#include <tally/powersgd.h>

#include "codec/powersgd/psgd_math.h"
#include "../feedback/fb_test.h"

/* (n, rows_hint) of the matrix tests: square, odd, padded, thin, wide. */
static const struct {
	size_t n;
	uint32_t hint;
} shapes[] = {
	{ 1, 0 }, { 2, 0 }, { 7, 0 }, { 10, 0 }, { 64, 0 }, { 1000, 0 },
	{ 1001, 0 }, { 4099, 0 }, { 65537, 0 }, { 100, 7 }, { 5, 4 },
	{ 1000, 1 }, { 1000, 1000 }, { 700, 300 }, { 200003, 0 },
};
#define N_SHAPES	(sizeof(shapes) / sizeof(shapes[0]))

static const unsigned int ranks[] = {
	1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 24, 32,
};
#define N_RANKS		(sizeof(ranks) / sizeof(ranks[0]))

static float *
fmalloc(size_t cnt)
{
	float *x = malloc((cnt ? cnt : 1) * sizeof(float));

	assert_non_null(x);
	return x;
}

/* Uniform in [-1, 1), scaled by 2^e with e in -8 .. 7 now and then. */
static void
fill(float *x, size_t cnt, uint64_t *s)
{
	for (size_t i = 0; i < cnt; i++) {
		float u = rnd_unit(s);

		x[i] = (i % 5 == 0) ? ldexpf(u, (int)(rnd_next(s) % 16) - 8) : u;
	}
}

static uint32_t
canon_bits(float x)
{
	return x != x ? 0x7fffffffu : to_bits(x);
}

/* Asserts that a and b have the same bits (cnt floats). */
static void
same_bits(const float *a, const float *b, size_t cnt, const char *what)
{
	for (size_t i = 0; i < cnt; i++)
		if (to_bits(a[i]) != to_bits(b[i]))
			fail_msg("%s: element %zu: %a (%08x) != %a (%08x)", what,
				i, (double)a[i], to_bits(a[i]), (double)b[i],
				to_bits(b[i]));
}

/* ---- the documented orders, written out plainly ---------------------- */

/* p[i][k] = sum over j ascending, i * cols + j < n, double from +0. */
static void
ref_p(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *q, unsigned int rank, float *p)
{
	for (uint32_t i = 0; i < rows; i++)
		for (unsigned int k = 0; k < rank; k++) {
			double acc = 0.0;

			for (uint32_t j = 0; j < cols; j++) {
				size_t at = (size_t)i * cols + j;

				if (at < n)
					acc += (double)m[at] *
						(double)q[(size_t)j * rank + k];
			}
			p[(size_t)i * rank + k] = from_bits(canon_bits((float)acc));
		}
}

/* q[j][k] = sum over i ascending, i * cols + j < n, double from +0. */
static void
ref_q(const float *m, size_t n, uint32_t rows, uint32_t cols,
	const float *p, unsigned int rank, float *q)
{
	for (uint32_t j = 0; j < cols; j++)
		for (unsigned int k = 0; k < rank; k++) {
			double acc = 0.0;

			for (uint32_t i = 0; i < rows; i++) {
				size_t at = (size_t)i * cols + j;

				if (at < n)
					acc += (double)m[at] *
						(double)p[(size_t)i * rank + k];
			}
			q[(size_t)j * rank + k] = from_bits(canon_bits((float)acc));
		}
}

/* m[t] = (sum over k ascending of p[i][k] q[j][k]) * scale, in double. */
static void
ref_dec(const float *p, const float *q, uint32_t cols, unsigned int rank,
	float scale, float *m, size_t n)
{
	for (size_t t = 0; t < n; t++) {
		size_t i = t / cols, j = t % cols;
		double acc = 0.0;

		for (unsigned int k = 0; k < rank; k++)
			acc += (double)p[i * rank + k] * (double)q[j * rank + k];
		m[t] = from_bits(canon_bits((float)(acc * (double)scale)));
	}
}

/* 256 lanes over rows i = l (mod 256), then the halving tree. */
static double
ref_dot(const float *p, uint32_t rows, unsigned int rank, unsigned int a,
	unsigned int b)
{
	double lane[256];

	for (unsigned int l = 0; l < 256; l++) {
		lane[l] = 0.0;
		for (uint32_t i = l; i < rows; i += 256)
			lane[l] += (double)p[(size_t)i * rank + a] *
				(double)p[(size_t)i * rank + b];
	}
	for (unsigned int w = 128; w >= 1; w /= 2)
		for (unsigned int l = 0; l < w; l++)
			lane[l] += lane[l + w];
	return lane[0];
}

static float
ref_round(double x)
{
	return from_bits(canon_bits((float)x));
}

/* Modified Gram-Schmidt, twice, and the keep rule, as documented. */
static void
ref_orth(float *p, uint32_t rows, unsigned int rank)
{
	for (unsigned int k = 0; k < rank; k++) {
		double s0 = ref_dot(p, rows, rank, k, k), s1;

		for (int pass = 0; pass < 2; pass++)
			for (unsigned int l = 0; l < k; l++) {
				double c = ref_dot(p, rows, rank, l, k);

				for (uint32_t i = 0; i < rows; i++) {
					float *e = p + (size_t)i * rank;

					e[k] = ref_round((double)e[k] -
						c * (double)e[l]);
				}
			}
		s1 = ref_dot(p, rows, rank, k, k);
		for (uint32_t i = 0; i < rows; i++) {
			float *e = p + (size_t)i * rank + k;

			if (isfinite(s0) && isfinite(s1) &&
			    s1 > s0 * 0x1p-32)
				*e = ref_round((double)*e / sqrt(s1));
			else
				*e = 0.0f;
		}
	}
}

/* ---- shape ----------------------------------------------------------- */

static void
shape_one(size_t n, uint32_t hint, uint32_t want_rows, uint32_t want_cols)
{
	uint32_t rows = 0, cols = 0;

	assert_int_equal(tally_psgd_shape(n, hint, &rows, &cols), 0);
	if (rows != want_rows || cols != want_cols)
		fail_msg("n %zu hint %u: %u x %u, want %u x %u", n, hint, rows,
			cols, want_rows, want_cols);
}

/* The rule by hand, by property over a range, at the edges; refusals. */
static void
shape(void **state)
{
	uint32_t rows = 77, cols = 88;

	(void)state;
	shape_one(1, 0, 1, 1);
	shape_one(2, 0, 2, 1);
	shape_one(3, 0, 2, 2);
	shape_one(4, 0, 2, 2);
	shape_one(5, 0, 3, 2);
	shape_one(10, 0, 4, 3);
	shape_one(25000000, 0, 5000, 5000);
	shape_one(25000001, 0, 5001, 5000);
	shape_one(24999999, 0, 5000, 5000);
	shape_one(5, 4, 4, 2);		/* the last row is padding */
	shape_one(5, 5, 5, 1);
	shape_one(5, 1, 1, 5);
	shape_one(100, 7, 7, 15);
	shape_one(4294836225u, 0, 65535, 65535);	/* 65535^2 */
	shape_one(UINT32_MAX, 1, 1, UINT32_MAX);
	shape_one(UINT32_MAX, UINT32_MAX, UINT32_MAX, 1);
	shape_one(4294901760u, 0, 65536, 65535);	/* 65536 * 65535 */
	shape_one(UINT32_MAX, 65537, 65537, 65535);	/* exactly */
	shape_one(UINT32_MAX, 3, 3, 1431655765);	/* exactly */
	/* rows = the smallest r with r^2 >= n, cols the smallest c with
	 * r c >= n, for every n up to 70000 */
	for (size_t n = 1; n <= 70000; n++) {
		uint64_t r, c;
		uint32_t hint;

		assert_int_equal(tally_psgd_shape(n, 0, &rows, &cols), 0);
		r = rows;
		c = cols;
		if (!(r * r >= n && (r - 1) * (r - 1) < n && r * c >= n &&
		      r * (c - 1) < n && c <= r))
			fail_msg("n %zu: %u x %u", n, rows, cols);
		/* and with a hint: rows as given */
		hint = (uint32_t)(n % 97 + 1);
		hint = hint > n ? (uint32_t)n : hint;
		assert_int_equal(tally_psgd_shape(n, hint, &rows, &cols), 0);
		r = rows;
		c = cols;
		assert_true(r == hint && r * c >= n && r * (c - 1) < n);
	}
	/* refusals leave the outputs alone */
	rows = 77;
	cols = 88;
	assert_int_equal(tally_psgd_shape(0, 0, &rows, &cols), -EINVAL);
	assert_int_equal(tally_psgd_shape(5, 6, &rows, &cols), -EINVAL);
	assert_int_equal(tally_psgd_shape(5, 0, NULL, &cols), -EINVAL);
	assert_int_equal(tally_psgd_shape(5, 0, &rows, NULL), -EINVAL);
	/* 65536 x 65536 > UINT32_MAX */
	assert_int_equal(tally_psgd_shape(UINT32_MAX, 0, &rows, &cols),
		-EINVAL);
	assert_int_equal(tally_psgd_shape(4294901761u, 0, &rows, &cols),
		-EINVAL);
	/* 65536 rows of 65536 */
	assert_int_equal(tally_psgd_shape(UINT32_MAX, 65536, &rows, &cols),
		-EINVAL);
	if (sizeof(size_t) > 4) {
		assert_int_equal(tally_psgd_shape((size_t)UINT32_MAX + 1, 1,
			&rows, &cols), -EINVAL);
		assert_int_equal(tally_psgd_shape(SIZE_MAX, 0, &rows, &cols),
			-EINVAL);
	}
	assert_int_equal(rows, 77);
	assert_int_equal(cols, 88);

	assert_int_equal(tally_psgd_check(10, 4, 3, 1), 0);
	assert_int_equal(tally_psgd_check(12, 4, 3, TALLY_PSGD_RANK_MAX), 0);
	assert_int_equal(tally_psgd_check(0, 4, 3, 2), 0);
	assert_int_equal(tally_psgd_check(13, 4, 3, 1), -EINVAL);
	assert_int_equal(tally_psgd_check(10, 4, 3, 0), -EINVAL);
	assert_int_equal(tally_psgd_check(10, 4, 3, TALLY_PSGD_RANK_MAX + 1),
		-EINVAL);
	assert_int_equal(tally_psgd_check(0, 0, 3, 1), -EINVAL);
	assert_int_equal(tally_psgd_check(0, 3, 0, 1), -EINVAL);

	/* row lengths of 10 elements as 4 x 3: 3 3 3 1, then 0 */
	assert_int_equal(tally_psgd_row_len(10, 3, 0), 3);
	assert_int_equal(tally_psgd_row_len(10, 3, 2), 3);
	assert_int_equal(tally_psgd_row_len(10, 3, 3), 1);
	assert_int_equal(tally_psgd_row_len(10, 3, 4), 0);
	assert_int_equal(tally_psgd_row_len(5, 2, 3), 0);
}

/* ---- the draws of Q -------------------------------------------------- */

/* SplitMix64's output function, from the documentation. */
static uint64_t
model_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Draw c of seed by the documented polar method, with libm's log. */
static double
model_normal(uint64_t seed, uint64_t c)
{
	uint64_t key = model_mix(seed ^ 0x5053474451303031ull ^
		0x6a09e667f3bcc909ull);

	for (uint64_t a = 0; a < 64; a++) {
		uint64_t h = model_mix(key + (c * 64 + a + 1) *
			0x9e3779b97f4a7c15ull);
		double u = ((double)(uint32_t)(h >> 32) + 0.5) / 2147483648.0 - 1;
		double v = ((double)(uint32_t)h + 0.5) / 2147483648.0 - 1;
		double s = u * u + v * v;

		if (s < 1)
			return u * sqrt(-2 * log(s) / s);
	}
	return 0;
}

/* The logarithm from + - * / against libm's. */
static void
logarithm(void **state)
{
	uint64_t s = 11;

	(void)state;
	assert_true(tally_psgd_ln(1.0) == 0.0);
	assert_true(tally_psgd_ln(0.5) == -0.69314718055994530942);
	for (int i = 0; i < 200000; i++) {
		/* (0, 1): any exponent down to 2^-70, and near 1 */
		double x = (double)(rnd_next(&s) >> 11) * 0x1p-53;

		if (i % 3 == 0)
			x = ldexp(x, -(int)(rnd_next(&s) % 64));
		if (i % 3 == 1)
			x = 1.0 - x * 0x1p-20;
		if (x <= 0)
			continue;
		if (fabs(tally_psgd_ln(x) - log(x)) > 1e-15 * fmax(1.0,
		    fabs(log(x))))
			fail_msg("ln(%a) = %a, libm %a", x, tally_psgd_ln(x),
				log(x));
	}
}

/* The same draws every call, in any layout; the documented formula. */
static void
init_q_formula(void **state)
{
	float *a = fmalloc(40 * 32), *b = fmalloc(40 * 32);
	/* Draws 0 .. 3 of seed 42, rounded: pinned so that they never
	 * change under a worker that upgrades. */
	static const uint32_t seed42[4] = {
		0x3e890a7du, 0xbf69377cu, 0x3e55e79eu, 0x3e0da527u,
	};

	(void)state;
	tally_psgd_init_q(a, 10, 4, 42);
	tally_psgd_init_q(b, 10, 4, 42);
	same_bits(a, b, 40, "again");
	tally_psgd_init_q(b, 40, 1, 42);	/* flat: draws 0 .. 39 */
	same_bits(a, b, 40, "layout");
	tally_psgd_init_q(b, 1, 32, 42);
	same_bits(a, b, 32, "layout 32");
	for (int i = 0; i < 4; i++)
		if (to_bits(a[i]) != seed42[i])
			fail_msg("seed 42 draw %d: %08x, pinned %08x", i,
				to_bits(a[i]), seed42[i]);
	tally_psgd_init_q(b, 10, 4, 43);
	for (int i = 0; i < 40; i++)
		assert_true(to_bits(a[i]) != to_bits(b[i]));
	for (uint64_t seed = 0; seed < 50; seed++) {
		tally_psgd_init_q(a, 40, 32, seed);
		for (size_t c = 0; c < 40 * 32; c++) {
			double z = model_normal(seed, c);

			assert_true(isfinite(a[c]));
			/* one float rounding, and libm's log */
			if (fabs(a[c] - z) > 0x1p-23 * fabs(z) + 1e-30)
				fail_msg("seed %llu draw %zu: %a, model %a",
					(unsigned long long)seed, c,
					(double)a[c], z);
			/* the element function the kernel runs */
			assert_int_equal(to_bits(tally_psgd_normal(
				tally_psgd_key(seed), c)), to_bits(a[c]));
		}
	}
	/* a rank it refuses writes nothing */
	memset(a, 0x55, 40 * sizeof(float));
	tally_psgd_init_q(a, 10, 0, 1);
	tally_psgd_init_q(a, 1, TALLY_PSGD_RANK_MAX + 1, 1);
	for (int i = 0; i < 40; i++)
		assert_int_equal(to_bits(a[i]), 0x55555555u);
	free(a);
	free(b);
}

/*
 * 2^21 draws: mean within 5 standard errors of 0 (5 / sqrt(N) = 0.0035),
 * variance within 5 of 1 (5 sqrt(2 / N) = 0.0049), E z^4 within 5 of 3
 * (5 sqrt(96 / N) = 0.034), P(|z| < 1) and P(|z| < 2) within 5 of
 * 0.682689 and 0.954500 (0.0016 and 0.00072).
 */
static void
init_q_distribution(void **state)
{
	const uint32_t cols = 1u << 19;
	const unsigned int rank = 4;
	const double cnt = (double)cols * rank;
	float *q = fmalloc((size_t)cols * rank);
	double s1 = 0, s2 = 0, s4 = 0, in1 = 0, in2 = 0;

	(void)state;
	tally_psgd_init_q(q, cols, rank, 7);
	for (size_t c = 0; c < (size_t)cols * rank; c++) {
		double z = q[c];

		s1 += z;
		s2 += z * z;
		s4 += z * z * z * z;
		in1 += fabs(z) < 1;
		in2 += fabs(z) < 2;
	}
	s1 /= cnt;
	s2 /= cnt;
	s4 /= cnt;
	if (fabs(s1) > 5 / sqrt(cnt) || fabs(s2 - 1) > 5 * sqrt(2 / cnt) ||
	    fabs(s4 - 3) > 5 * sqrt(96 / cnt) ||
	    fabs(in1 / cnt - 0.682689) > 5 * sqrt(0.2167 / cnt) ||
	    fabs(in2 / cnt - 0.954500) > 5 * sqrt(0.0434 / cnt))
		fail_msg("mean %g var %g m4 %g P1 %g P2 %g", s1, s2, s4,
			in1 / cnt, in2 / cnt);
	free(q);
}

/* ---- P = M Q, Q = M^T P ---------------------------------------------- */

/*
 * |x - exact| <= 2^-24 |exact| + len 2^-52 sum |terms|: one float
 * rounding after a double sum of len terms (and the model's own error in
 * long double, far below that).
 */
static void
near_model(float x, long double exact, long double abssum, uint32_t len,
	const char *what, size_t at)
{
	long double tol = 0x1p-24L * fabsl(exact) +
		(long double)len * 0x1p-52L * abssum + 1e-40L;

	if (fabsl((long double)x - exact) > tol)
		fail_msg("%s %zu: %a, model %La (tolerance %Lg)", what, at,
			(double)x, exact, tol);
}

/* Every shape and rank: models, orders, the kernels' element functions. */
static void
p_and_q(void **state)
{
	uint64_t s = 21;

	(void)state;
	for (size_t t = 0; t < N_SHAPES; t++) {
		size_t n = shapes[t].n;
		uint32_t rows, cols;
		float *m;

		assert_int_equal(tally_psgd_shape(n, shapes[t].hint, &rows,
			&cols), 0);
		m = fmalloc(n);
		fill(m, n, &s);
		for (size_t r = 0; r < N_RANKS; r++) {
			unsigned int rank = ranks[r];
			float *q = fmalloc((size_t)cols * rank);
			float *p = fmalloc((size_t)rows * rank);
			float *want = fmalloc((size_t)(rows > cols ? rows :
				cols) * rank);

			if (n > 100000 && rank > 5)
				goto next;
			fill(q, (size_t)cols * rank, &s);
			tally_psgd_p(m, n, rows, cols, q, rank, p);
			ref_p(m, n, rows, cols, q, rank, want);
			same_bits(p, want, (size_t)rows * rank, "p order");
			for (uint32_t i = 0; i < rows; i += 1 + rows / 64)
				for (unsigned int k = 0; k < rank; k++) {
					long double e = 0, a = 0;
					uint32_t len = 0;

					for (uint32_t j = 0; j < cols; j++) {
						size_t at = (size_t)i * cols + j;
						long double tm;

						if (at >= n)
							break;
						tm = (long double)m[at] *
							q[(size_t)j * rank + k];
						e += tm;
						a += fabsl(tm);
						len++;
					}
					near_model(p[(size_t)i * rank + k], e, a,
						len, "p", (size_t)i * rank + k);
					assert_int_equal(to_bits(tally_psgd_p1(m,
						n, cols, q, rank, i, k)),
						to_bits(p[(size_t)i * rank + k]));
				}

			/* Q = M^T P, from this P */
			tally_psgd_q(m, n, rows, cols, p, rank, q);
			ref_q(m, n, rows, cols, p, rank, want);
			same_bits(q, want, (size_t)cols * rank, "q order");
			for (uint32_t j = 0; j < cols; j += 1 + cols / 64)
				for (unsigned int k = 0; k < rank; k++) {
					long double e = 0, a = 0;
					uint32_t len = 0;

					for (uint32_t i = 0; i < rows; i++) {
						size_t at = (size_t)i * cols + j;
						long double tm;

						if (at >= n)
							break;
						tm = (long double)m[at] *
							p[(size_t)i * rank + k];
						e += tm;
						a += fabsl(tm);
						len++;
					}
					near_model(q[(size_t)j * rank + k], e, a,
						len, "q", (size_t)j * rank + k);
					assert_int_equal(to_bits(tally_psgd_q1(m,
						n, rows, cols, p, rank, j, k)),
						to_bits(q[(size_t)j * rank + k]));
				}
next:
			free(q);
			free(p);
			free(want);
		}
		free(m);
	}
}

/* NaN and infinities propagate (one NaN), the same as the plain order. */
static void
p_and_q_specials(void **state)
{
	const size_t n = 3001;
	uint32_t rows, cols;
	float *m = fmalloc(n), *q, *p, *want;
	uint64_t s = 22;

	(void)state;
	assert_int_equal(tally_psgd_shape(n, 0, &rows, &cols), 0);
	q = fmalloc((size_t)cols * 4);
	p = fmalloc((size_t)rows * 4);
	want = fmalloc((size_t)rows * 4);
	for (size_t i = 0; i < n; i++)
		m[i] = (i % 17 == 0) ? rnd_any(&s, 1) : rnd_unit(&s);
	fill(q, (size_t)cols * 4, &s);
	q[5] = INFINITY;
	tally_psgd_p(m, n, rows, cols, q, 4, p);
	ref_p(m, n, rows, cols, q, 4, want);
	same_bits(p, want, (size_t)rows * 4, "p specials");
	for (size_t i = 0; i < (size_t)rows * 4; i++)
		assert_true(p[i] == p[i] || to_bits(p[i]) == 0x7fffffffu);
	fill(p, (size_t)rows * 4, &s);
	tally_psgd_q(m, n, rows, cols, p, 4, q);
	ref_q(m, n, rows, cols, p, 4, want);
	same_bits(q, want, (size_t)cols * 4, "q specials");
	free(m);
	free(q);
	free(p);
	free(want);
}

/*
 * n not a multiple of cols, and empty rows: the same bits as the matrix
 * padded with zeros to rows x cols (terms past n contribute nothing, and
 * a +0 or -0 term does not change a sum that started at +0).
 */
static void
padding(void **state)
{
	static const struct {
		size_t n;
		uint32_t hint;
	} pads[] = { { 10, 0 }, { 1001, 0 }, { 5, 4 }, { 97, 10 }, { 33, 30 } };
	uint64_t s = 23;

	(void)state;
	for (size_t t = 0; t < sizeof(pads) / sizeof(pads[0]); t++) {
		size_t n = pads[t].n, full;
		uint32_t rows, cols;
		unsigned int rank = 3;
		float *m, *mz, *q, *p, *pz, *qz, *d, *dz;

		assert_int_equal(tally_psgd_shape(n, pads[t].hint, &rows,
			&cols), 0);
		full = (size_t)rows * cols;
		assert_true(full > n);
		m = fmalloc(n);
		mz = fmalloc(full);
		q = fmalloc((size_t)cols * rank);
		qz = fmalloc((size_t)cols * rank);
		p = fmalloc((size_t)rows * rank);
		pz = fmalloc((size_t)rows * rank);
		d = fmalloc(full + 8);
		dz = fmalloc(full);
		fill(m, n, &s);
		memcpy(mz, m, n * sizeof(float));
		for (size_t i = n; i < full; i++)
			mz[i] = (i & 1) ? -0.0f : 0.0f;
		tally_psgd_init_q(q, cols, rank, t);
		tally_psgd_p(m, n, rows, cols, q, rank, p);
		tally_psgd_p(mz, full, rows, cols, q, rank, pz);
		same_bits(p, pz, (size_t)rows * rank, "p padded");
		/* an empty row gives +0 */
		for (uint32_t i = 0; i < rows; i++)
			if (tally_psgd_row_len(n, cols, i) == 0)
				for (unsigned int k = 0; k < rank; k++)
					assert_int_equal(to_bits(
						p[(size_t)i * rank + k]), 0);
		tally_psgd_orthonormalize(p, rows, rank);
		tally_psgd_q(m, n, rows, cols, p, rank, q);
		tally_psgd_q(mz, full, rows, cols, p, rank, qz);
		same_bits(q, qz, (size_t)cols * rank, "q padded");
		/* decompress writes n elements, the same as the full ones */
		for (size_t i = 0; i < full + 8; i++)
			d[i] = from_bits(0x7f8a5a5au);
		tally_psgd_decompress(p, q, rows, cols, rank, 0.5f, d, n);
		tally_psgd_decompress(p, q, rows, cols, rank, 0.5f, dz, full);
		same_bits(d, dz, n, "decompress padded");
		for (size_t i = n; i < full + 8; i++)
			assert_int_equal(to_bits(d[i]), 0x7f8a5a5au);
		free(m);
		free(mz);
		free(q);
		free(qz);
		free(p);
		free(pz);
		free(d);
		free(dz);
	}
}

/* ---- orthonormalization ---------------------------------------------- */

/* max |(P^T P)[a][b] - I[a][b]| over the columns, zero ones as 0 rows. */
static double
gram_error(const float *p, uint32_t rows, unsigned int rank,
	const int *zero)
{
	double worst = 0;

	for (unsigned int a = 0; a < rank; a++)
		for (unsigned int b = 0; b < rank; b++) {
			double g = 0, want;

			for (uint32_t i = 0; i < rows; i++)
				g += (double)p[(size_t)i * rank + a] *
					p[(size_t)i * rank + b];
			want = (a == b && !(zero != NULL && zero[a])) ? 1 : 0;
			worst = fmax(worst, fabs(g - want));
		}
	return worst;
}

/* Runs the CPU function and the independent order, and compares. */
static void
orth_both(float *p, uint32_t rows, unsigned int rank, const char *what)
{
	size_t cnt = (size_t)rows * rank;
	float *want = fmalloc(cnt);

	memcpy(want, p, cnt * sizeof(float));
	ref_orth(want, rows, rank);
	tally_psgd_orthonormalize(p, rows, rank);
	same_bits(p, want, cnt, what);
	free(want);
}

/*
 * The kernel's structure on the CPU: each lane by tally_psgd_lane() (one
 * thread's loop), the tree by tally_psgd_tree1() level by level.
 */
static double
kernel_dot(const float *p, uint32_t rows, unsigned int rank, unsigned int a,
	unsigned int b)
{
	double s[TALLY_PSGD_LANES];

	for (uint32_t l = 0; l < TALLY_PSGD_LANES; l++)
		s[l] = tally_psgd_lane(p, rows, rank, a, b, l);
	for (unsigned int w = TALLY_PSGD_LANES / 2; w > 0; w /= 2)
		for (unsigned int l = 0; l < w; l++)
			tally_psgd_tree1(s, l, w);
	return s[0];
}

static void
kernel_orth(float *p, uint32_t rows, unsigned int rank)
{
	for (unsigned int k = 0; k < rank; k++) {
		double s0 = kernel_dot(p, rows, rank, k, k), s1;

		for (int pass = 0; pass < 2; pass++)
			for (unsigned int c = 0; c < k; c++) {
				double co = kernel_dot(p, rows, rank, c, k);

				for (uint32_t i = 0; i < rows; i++)
					p[(size_t)i * rank + k] =
						tally_psgd_proj1(
						p[(size_t)i * rank + k], co,
						p[(size_t)i * rank + c]);
			}
		s1 = kernel_dot(p, rows, rank, k, k);
		for (uint32_t i = 0; i < rows; i++)
			p[(size_t)i * rank + k] = tally_psgd_keep(s0, s1) ?
				tally_psgd_norm1(p[(size_t)i * rank + k],
				tally_psgd_dsqrt(s1)) : 0.0f;
	}
}

/* Random P: orthonormal, the span kept, the documented order's bits. */
static void
orth_random(void **state)
{
	static const uint32_t rowss[] = {
		1, 2, 5, 31, 255, 256, 257, 1000, 5000, 70001,
	};
	uint64_t s = 31;

	(void)state;
	for (size_t t = 0; t < sizeof(rowss) / sizeof(rowss[0]); t++)
		for (size_t r = 0; r < N_RANKS; r++) {
			uint32_t rows = rowss[t];
			unsigned int rank = ranks[r];
			size_t cnt = (size_t)rows * rank;
			float *p = fmalloc(cnt), *orig = fmalloc(cnt);
			float *k2 = fmalloc(cnt);
			int zero[TALLY_PSGD_RANK_MAX] = { 0 };

			if (rows > 10000 && rank > 4)
				goto next;
			fill(p, cnt, &s);
			memcpy(orig, p, cnt * sizeof(float));
			memcpy(k2, p, cnt * sizeof(float));
			orth_both(p, rows, rank, "orth order");
			kernel_orth(k2, rows, rank);
			same_bits(k2, p, cnt, "orth kernel math");
			/* columns past rows are in the span of the first
			 * rows: zero */
			for (unsigned int k = 0; k < rank; k++) {
				zero[k] = k >= rows;
				if (zero[k])
					for (uint32_t i = 0; i < rows; i++)
						assert_int_equal(to_bits(
							p[(size_t)i * rank + k]),
							0);
			}
			if (gram_error(p, rows, rank, zero) > 1e-6)
				fail_msg("rows %u rank %u: P^T P - I = %g", rows,
					rank, gram_error(p, rows, rank, zero));
			/* column k of the input lies in the span of output
			 * columns 0 .. k */
			for (unsigned int k = 0; k < rank && k < rows; k++) {
				double res = 0, nrm = 0;
				double c[TALLY_PSGD_RANK_MAX];

				for (unsigned int l = 0; l <= k; l++) {
					c[l] = 0;
					for (uint32_t i = 0; i < rows; i++)
						c[l] += (double)p[(size_t)i * rank + l] *
							orig[(size_t)i * rank + k];
				}
				for (uint32_t i = 0; i < rows; i++) {
					double x = orig[(size_t)i * rank + k];

					for (unsigned int l = 0; l <= k; l++)
						x -= c[l] * p[(size_t)i * rank + l];
					res += x * x;
					nrm += (double)orig[(size_t)i * rank + k] *
						orig[(size_t)i * rank + k];
				}
				if (sqrt(res) > 1e-5 * sqrt(nrm))
					fail_msg("rows %u rank %u col %u: off the "
						"span by %g", rows, rank, k,
						sqrt(res / nrm));
			}
next:
			free(p);
			free(orig);
			free(k2);
		}
}

/* Zero, dependent and non-finite columns are zeroed; the rest are fine. */
static void
orth_special(void **state)
{
	const uint32_t rows = 300;
	const unsigned int rank = 8;
	size_t cnt = (size_t)rows * rank;
	float *p = fmalloc(cnt), *keep = fmalloc(cnt);
	int zero[8] = { 0, 1, 0, 1, 1, 0, 1, 1 };
	uint64_t s = 32;

	(void)state;
	fill(p, cnt, &s);
	for (uint32_t i = 0; i < rows; i++) {
		float *e = p + (size_t)i * rank;

		e[1] = 0.0f;			/* zero */
		e[3] = e[0];			/* a copy of column 0 */
		e[4] = 2 * e[2] + e[0];		/* in the span (rounded) */
	}
	p[(size_t)17 * rank + 6] = NAN;		/* non-finite */
	p[(size_t)299 * rank + 7] = -INFINITY;
	memcpy(keep, p, cnt * sizeof(float));
	orth_both(p, rows, rank, "orth special");
	for (unsigned int k = 0; k < rank; k++)
		for (uint32_t i = 0; i < rows; i++)
			if (zero[k])
				assert_int_equal(to_bits(p[(size_t)i * rank + k]),
					0);
	assert_true(gram_error(p, rows, rank, zero) < 1e-6);
	/* column 0 is column 0 of the input, normalized */
	{
		double nrm = 0;

		for (uint32_t i = 0; i < rows; i++)
			nrm += (double)keep[(size_t)i * rank] *
				keep[(size_t)i * rank];
		for (uint32_t i = 0; i < rows; i++)
			assert_true(fabs(p[(size_t)i * rank] -
				keep[(size_t)i * rank] / sqrt(nrm)) < 1e-7);
	}

	/* A tiny but independent column is kept: scale does not matter. */
	fill(p, cnt, &s);
	for (uint32_t i = 0; i < rows; i++)
		p[(size_t)i * rank + 3] *= 0x1p-100f;
	orth_both(p, rows, rank, "orth tiny");
	assert_true(gram_error(p, rows, rank, NULL) < 1e-6);

	/* All NaN: all zero. */
	for (size_t i = 0; i < cnt; i++)
		p[i] = NAN;
	orth_both(p, rows, rank, "orth nan");
	for (size_t i = 0; i < cnt; i++)
		assert_int_equal(to_bits(p[i]), 0);

	/* Huge values do not overflow the double sums. */
	fill(p, cnt, &s);
	for (size_t i = 0; i < cnt; i++)
		p[i] *= 0x1p110f;	/* fill() goes up to 2^7 */
	orth_both(p, rows, rank, "orth huge");
	assert_true(gram_error(p, rows, rank, NULL) < 1e-6);

	/* One row: rank 3 gives +-1, 0, 0. */
	p[0] = -3.0f;
	p[1] = 5.0f;
	p[2] = 0.5f;
	tally_psgd_orthonormalize(p, 1, 3);
	assert_true(p[0] == -1.0f && to_bits(p[1]) == 0 && to_bits(p[2]) == 0);

	/* Refused arguments write nothing. */
	memcpy(p, keep, cnt * sizeof(float));
	tally_psgd_orthonormalize(p, rows, 0);
	tally_psgd_orthonormalize(p, rows, TALLY_PSGD_RANK_MAX + 1);
	tally_psgd_orthonormalize(p, 0, 4);
	same_bits(p, keep, cnt, "refused");
	free(p);
	free(keep);
}

/*
 * Near the threshold: column 1 = column 0 + e x, x random, for e around
 * 2^-16: dropped below, kept above, and the bits of the documented order
 * on every side of it.
 */
static void
orth_threshold(void **state)
{
	const uint32_t rows = 512;
	float *p = fmalloc((size_t)rows * 2), *x = fmalloc(rows);
	uint64_t s = 33;

	(void)state;
	fill(x, rows, &s);
	for (int e = -30; e <= -4; e++) {
		int kept = 0;

		for (uint32_t i = 0; i < rows; i++) {
			p[2 * i] = x[(i * 7) % rows];
			p[2 * i + 1] = p[2 * i] + ldexpf(x[i], e);
		}
		orth_both(p, rows, 2, "orth threshold");
		for (uint32_t i = 0; i < rows; i++)
			kept |= to_bits(p[2 * i + 1]) != 0;
		/* well below 2^-16 dropped, well above kept */
		if ((e <= -20 && kept) || (e >= -12 && !kept))
			fail_msg("column 0 + 2^%d x: kept %d", e, kept);
	}
	free(p);
	free(x);
}

/* ---- decompression, round trips -------------------------------------- */

static void
decompress(void **state)
{
	uint64_t s = 41;

	(void)state;
	for (size_t t = 0; t < N_SHAPES; t++) {
		size_t n = shapes[t].n;
		uint32_t rows, cols;

		assert_int_equal(tally_psgd_shape(n, shapes[t].hint, &rows,
			&cols), 0);
		for (size_t r = 0; r < N_RANKS; r++) {
			unsigned int rank = ranks[r];
			float *p = fmalloc((size_t)rows * rank);
			float *q = fmalloc((size_t)cols * rank);
			float *m = fmalloc(n), *want = fmalloc(n);

			fill(p, (size_t)rows * rank, &s);
			fill(q, (size_t)cols * rank, &s);
			tally_psgd_decompress(p, q, rows, cols, rank, 0.25f, m,
				n);
			ref_dec(p, q, cols, rank, 0.25f, want, n);
			same_bits(m, want, n, "decompress order");
			for (size_t i = 0; i < n; i += 1 + n / 100) {
				long double e = 0, a = 0;

				for (unsigned int k = 0; k < rank; k++) {
					long double tm = (long double)
						p[i / cols * rank + k] *
						q[i % cols * rank + k];

					e += tm;
					a += fabsl(tm);
				}
				near_model(m[i], e / 4, a / 4, rank,
					"decompress", i);
				assert_int_equal(to_bits(tally_psgd_dec1(
					p + i / cols * rank, q + i % cols * rank,
					rank, 0.25)), to_bits(m[i]));
			}
			/* NaN in: the one NaN out */
			p[0] = NAN;
			tally_psgd_decompress(p, q, rows, cols, rank, 1.0f, m,
				n);
			assert_int_equal(to_bits(m[0]), 0x7fffffffu);
			free(p);
			free(q);
			free(m);
			free(want);
		}
	}
}

/* ||a - b||_F / ||b||_F over n elements. */
static double
rel_error(const float *a, const float *b, size_t n)
{
	double d = 0, nb = 0;

	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		nb += (double)b[i] * b[i];
	}
	return sqrt(d / nb);
}

/* M = A B^T (rows x cols, inner dimension r) + noise, padded past n. */
static void
low_rank(float *m, size_t n, uint32_t cols, unsigned int r, float noise,
	uint64_t *s)
{
	uint32_t rows = (uint32_t)((n + cols - 1) / cols);
	float *a = fmalloc((size_t)rows * r), *b = fmalloc((size_t)cols * r);

	fill(a, (size_t)rows * r, s);
	fill(b, (size_t)cols * r, s);
	for (size_t t = 0; t < n; t++) {
		double x = 0;

		for (unsigned int k = 0; k < r; k++)
			x += (double)a[t / cols * r + k] * b[t % cols * r + k];
		m[t] = (float)x + noise * rnd_unit(s);
	}
	free(a);
	free(b);
}

/* One PowerSGD step of one worker; q in, the next q out. */
static void
step(const float *m, size_t n, uint32_t rows, uint32_t cols, float *q,
	unsigned int rank, float *p, float *mhat)
{
	tally_psgd_p(m, n, rows, cols, q, rank, p);
	tally_psgd_orthonormalize(p, rows, rank);
	tally_psgd_q(m, n, rows, cols, p, rank, q);
	tally_psgd_decompress(p, q, rows, cols, rank, 1.0f, mhat, n);
}

/*
 * A matrix of rank r <= rank comes back after one step, to within float
 * rounding times the conditioning of P = M Q (Q random), and to float
 * rounding after a warm-started second step; the columns of P past r come
 * out zero. Padding adds one to the rank (the part of the last row past n
 * is cut off). A decaying spectrum (rank 4 + 0.05 rank 4 + noise),
 * compressed to rank 4, gets better with warm-started steps, towards the
 * weaker part's share.
 */
static void
round_trip(void **state)
{
	static const struct {
		size_t n;
		uint32_t hint;
		unsigned int r, rank, zeros;
	} cases[] = {
		{ 4096, 0, 1, 1, 0 }, { 4096, 0, 2, 4, 2 }, { 4096, 0, 4, 4, 0 },
		{ 10000, 0, 3, 8, 5 }, { 4096, 0, 32, 32, 0 },
		{ 4096, 0, 31, 32, 1 }, { 3000, 100, 5, 5, 0 },
		{ 4001, 0, 3, 4, 0 }, { 1000, 0, 1, TALLY_PSGD_RANK_MAX, 30 },
		{ 250000, 0, 4, 4, 0 },
	};
	uint64_t s = 51;

	(void)state;
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		size_t n = cases[t].n;
		unsigned int rank = cases[t].rank, zeros = 0;
		uint32_t rows, cols;
		float *m, *mhat, *p, *q;
		double e1, e2;

		assert_int_equal(tally_psgd_shape(n, cases[t].hint, &rows,
			&cols), 0);
		m = fmalloc(n);
		mhat = fmalloc(n);
		p = fmalloc((size_t)rows * rank);
		q = fmalloc((size_t)cols * rank);
		low_rank(m, n, cols, cases[t].r, 0.0f, &s);
		tally_psgd_init_q(q, cols, rank, t);
		step(m, n, rows, cols, q, rank, p, mhat);
		e1 = rel_error(mhat, m, n);
		for (unsigned int k = 0; k < rank; k++) {
			int zero = 1;

			for (uint32_t i = 0; i < rows; i++)
				zero &= to_bits(p[(size_t)i * rank + k]) == 0;
			zeros += zero;
		}
		step(m, n, rows, cols, q, rank, p, mhat);
		e2 = rel_error(mhat, m, n);
		if (e1 > 1e-5 || e2 > 1e-6 || zeros != cases[t].zeros)
			fail_msg("case %zu: rank-%u matrix %u x %u (n %zu), rank "
				"%u: errors %g then %g, %u zero columns", t,
				cases[t].r, rows, cols, n, rank, e1, e2, zeros);
		free(m);
		free(mhat);
		free(p);
		free(q);
	}

	{
		size_t n = 40000;
		uint32_t rows, cols;
		float *m = fmalloc(n), *m2 = fmalloc(n), *mhat = fmalloc(n);
		float *p, *q;
		double e[4];

		assert_int_equal(tally_psgd_shape(n, 0, &rows, &cols), 0);
		p = fmalloc((size_t)rows * 4);
		q = fmalloc((size_t)cols * 4);
		low_rank(m, n, cols, 4, 0.0f, &s);
		low_rank(m2, n, cols, 4, 0.0f, &s);
		for (size_t i = 0; i < n; i++)
			m[i] += 0.05f * m2[i] + 1e-4f * rnd_unit(&s);
		tally_psgd_init_q(q, cols, 4, 9);
		for (int it = 0; it < 4; it++) {
			step(m, n, rows, cols, q, 4, p, mhat);
			e[it] = rel_error(mhat, m, n);
		}
		if (getenv("PSGD_VERBOSE") != NULL)
			print_message("decaying spectrum: %g %g %g %g\n", e[0],
				e[1], e[2], e[3]);
		if (!(e[1] < e[0] && e[2] < e[1] * 1.01 && e[3] < e[2] * 1.01 &&
		      e[3] < 0.04))
			fail_msg("errors %g %g %g %g", e[0], e[1], e[2], e[3]);
		free(m);
		free(m2);
		free(mhat);
		free(p);
		free(q);
	}
}

/*
 * Several workers: P and Q summed between the phases (as the allreduce
 * does), M_hat with scale 1 / world. Workers that share a rank-r left
 * factor send matrices whose mean has rank r: recovered.
 */
static void
workers(void **state)
{
	const unsigned int world = 4, rank = 3;
	const size_t n = 5000;
	uint32_t rows, cols;
	float *m[4], *mean = fmalloc(n), *mhat = fmalloc(n);
	float *p, *psum, *q, *qsum, *a, *b;
	uint64_t s = 61;

	(void)state;
	assert_int_equal(tally_psgd_shape(n, 0, &rows, &cols), 0);
	p = fmalloc((size_t)rows * rank);
	psum = fmalloc((size_t)rows * rank);
	q = fmalloc((size_t)cols * rank);
	qsum = fmalloc((size_t)cols * rank);
	a = fmalloc((size_t)rows * 2);
	b = fmalloc((size_t)cols * 2);
	fill(a, (size_t)rows * 2, &s);
	for (unsigned int w = 0; w < world; w++) {
		m[w] = fmalloc(n);
		fill(b, (size_t)cols * 2, &s);
		for (size_t t = 0; t < n; t++)
			m[w][t] = a[t / cols * 2] * b[t % cols * 2] +
				a[t / cols * 2 + 1] * b[t % cols * 2 + 1];
	}
	for (size_t t = 0; t < n; t++) {
		double x = 0;

		for (unsigned int w = 0; w < world; w++)
			x += m[w][t];
		mean[t] = (float)(x / world);
	}
	/* every worker starts from the same Q */
	tally_psgd_init_q(qsum, cols, rank, 1234);
	memset(psum, 0, (size_t)rows * rank * sizeof(float));
	for (unsigned int w = 0; w < world; w++) {
		tally_psgd_p(m[w], n, rows, cols, qsum, rank, p);
		for (size_t i = 0; i < (size_t)rows * rank; i++)
			psum[i] += p[i];
	}
	tally_psgd_orthonormalize(psum, rows, rank);
	memset(qsum, 0, (size_t)cols * rank * sizeof(float));
	for (unsigned int w = 0; w < world; w++) {
		tally_psgd_q(m[w], n, rows, cols, psum, rank, q);
		for (size_t i = 0; i < (size_t)cols * rank; i++)
			qsum[i] += q[i];
	}
	tally_psgd_decompress(psum, qsum, rows, cols, rank, 1.0f / world,
		mhat, n);
	if (rel_error(mhat, mean, n) > 1e-5)
		fail_msg("mean of %u workers: error %g", world,
			rel_error(mhat, mean, n));
	for (unsigned int w = 0; w < world; w++)
		free(m[w]);
	free(mean);
	free(mhat);
	free(p);
	free(psum);
	free(q);
	free(qsum);
	free(a);
	free(b);
}

/* Arguments the functions refuse: nothing written. */
static void
refused(void **state)
{
	float m[12], q[40], p[40], keep[40];

	(void)state;
	for (int i = 0; i < 12; i++)
		m[i] = (float)i;
	for (int i = 0; i < 40; i++)
		q[i] = p[i] = keep[i] = 7.0f;
	tally_psgd_p(m, 13, 4, 3, q, 1, p);	/* n > rows * cols */
	tally_psgd_p(m, 12, 4, 3, q, 0, p);
	tally_psgd_p(m, 12, 4, 3, q, 33, p);
	tally_psgd_p(m, 12, 0, 3, q, 1, p);
	tally_psgd_q(m, 12, 4, 0, p, 1, q);
	tally_psgd_q(m, 13, 4, 3, p, 1, q);
	tally_psgd_decompress(p, q, 4, 3, 1, 1.0f, m, 13);
	tally_psgd_decompress(p, q, 4, 3, 0, 1.0f, m, 12);
	same_bits(p, keep, 40, "p refused");
	same_bits(q, keep, 40, "q refused");
	for (int i = 0; i < 12; i++)
		assert_true(m[i] == (float)i);
	/* n == 0: P and Q are 0, nothing decompressed */
	tally_psgd_p(m, 0, 4, 3, q, 2, p);
	for (int i = 0; i < 8; i++)
		assert_int_equal(to_bits(p[i]), 0);
	tally_psgd_decompress(p, q, 4, 3, 2, 1.0f, m, 0);
	assert_true(m[0] == 0.0f && m[11] == 11.0f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shape),
		cmocka_unit_test(logarithm),
		cmocka_unit_test(init_q_formula),
		cmocka_unit_test(init_q_distribution),
		cmocka_unit_test(p_and_q),
		cmocka_unit_test(p_and_q_specials),
		cmocka_unit_test(padding),
		cmocka_unit_test(orth_random),
		cmocka_unit_test(orth_special),
		cmocka_unit_test(orth_threshold),
		cmocka_unit_test(decompress),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(workers),
		cmocka_unit_test(refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
