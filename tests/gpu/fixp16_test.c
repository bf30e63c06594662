/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The 16-bit fixed-point codec (<tally/fixp16.h>) against references
 * computed here in exact double and integer arithmetic, on its scalar
 * loops and on its vectorized ones (where the CPU has AVX2 and F16C;
 * else that half says it skips), which must give the same bits:
 * - widening: every bf16 and f16 pattern (normals, subnormals, zeros of
 *   both signs, largest finite, infinities, NaNs);
 * - absmax over every pattern class, on both paths (their speeds are
 *   printed, not checked: timed checks have no place in unit tests on
 *   a shared machine; docs/codecs/fixp16.md has the figures);
 * - encoding every pattern at exponents across the whole range, to i32
 *   and i16 lanes (NaN 0, saturation, ties to even);
 * - decoding sums at every exponent: the nearest value of the type by
 *   search over a table of all its finite values (ties to even, +-inf
 *   past the largest), i.e. rounded once, including the sums where
 *   rounding to binary32 first would give another answer;
 * - the lane rule and the exponent's headroom, and the error bound the
 *   header states, over random tensors summed over worlds 1..64.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/fixp.h>
#include <tally/fixp16.h>

/* Every finite non-negative value of a type, by bits (bits = index). */
struct table {
	double v[0x7f80];
	unsigned int n;		/* finite non-negative patterns */
	uint16_t inf;
};

static struct table tab_bf16, tab_f16;

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* The value of a 16-bit pattern from its fields (NaN for NaN). */
static double
value(enum tally_dtype dt, uint16_t h)
{
	int f16 = dt == TALLY_DT_F16, mb = f16 ? 10 : 7, eb = f16 ? 5 : 8;
	int bias = (1 << (eb - 1)) - 1;
	unsigned int ex = (h >> mb) & ((1u << eb) - 1), man = h & ((1u << mb) - 1);
	double s = (h & 0x8000) ? -1.0 : 1.0;

	if (ex == (1u << eb) - 1)
		return man ? NAN : s * INFINITY;
	if (ex == 0)
		return s * ldexp(man, 1 - bias - mb);
	return s * ldexp(man + (1u << mb), (int)ex - bias - mb);
}

static void
table_init(struct table *t, enum tally_dtype dt)
{
	t->inf = dt == TALLY_DT_F16 ? 0x7c00 : 0x7f80;
	t->n = t->inf;
	for (unsigned int i = 0; i < t->n; i++)
		t->v[i] = value(dt, (uint16_t)i);
}

/* v (exact, finite) rounded once to the table's type, ties to even. */
static uint16_t
nearest(const struct table *t, double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	unsigned int lo = 0, hi = t->n - 1;
	double a = fabs(v), top, d1, d2;

	if (a >= t->v[hi]) {
		top = t->v[hi] + (t->v[hi] - t->v[hi - 1]) / 2;
		/* A tie goes to the even pattern: inf. */
		return (uint16_t)(sign | (a >= top ? t->inf : hi));
	}
	while (hi - lo > 1) {
		unsigned int mid = (lo + hi) / 2;

		if (t->v[mid] <= a)
			lo = mid;
		else
			hi = mid;
	}
	d1 = a - t->v[lo];
	d2 = t->v[hi] - a;
	if (d1 < d2 || (d1 == d2 && lo % 2 == 0))
		return (uint16_t)(sign | lo);
	return (uint16_t)(sign | hi);
}

/* Runs f on the scalar path, then on the vectorized one where there is one. */
static int
both_paths(void (*f)(int simd))
{
	int have;

	tally_fixp16_simd(0);
	f(0);
	have = tally_fixp16_simd(1);
	if (have)
		f(1);
	else
		print_message("# no AVX2+F16C here: vectorized path not run\n");
	tally_fixp16_simd(1);
	return have;
}

static const enum tally_dtype types[] = { TALLY_DT_BF16, TALLY_DT_F16 };

/* |value| of h, NaN as 0: what absmax takes an element as. */
static double
abs_or_0(enum tally_dtype dt, uint16_t h)
{
	double v = value(dt, h);

	return isnan(v) ? 0.0 : fabs(v);
}

/*
 * absmax on one path: every pattern alone, every pattern at each place
 * of a 37-element run of -0 (the vector body and the scalar tail), runs
 * of random patterns of every length to 70 (NaN bits above every finite
 * magnitude must not win a lane), and the classes together.
 */
static void
absmax_run(int simd)
{
	uint16_t z[70];

	(void)simd;
	for (int t = 0; t < 2; t++) {
		enum tally_dtype dt = types[t];

		for (uint32_t h = 0; h < 0x10000; h++) {
			uint16_t x = (uint16_t)h;

			assert_true((double)tally_fixp16_absmax(dt, &x, 1) ==
				abs_or_0(dt, x));
			for (int i = 0; i < 37; i++)
				z[i] = 0x8000;
			z[h % 37] = x;
			assert_true((double)tally_fixp16_absmax(dt, z, 37) ==
				abs_or_0(dt, x));
		}
		for (uint64_t k = 0; k < 4000; k++) {
			size_t n = k % 71;
			double want = 0.0;

			for (size_t i = 0; i < n; i++) {
				z[i] = (uint16_t)mix(k * 71 + i);
				want = fmax(want, abs_or_0(dt, z[i]));
			}
			assert_true((double)tally_fixp16_absmax(dt, z, n) == want);
		}
	}
	{
		/* bf16: -0, +0, subnormal, max finite, NaN: max finite. */
		uint16_t x[] = { 0x8000, 0x0000, 0x0001, 0xff7f, 0x7fc1 };
		uint16_t y[] = { 0x8000, 0x0001, 0x7c01, 0x7bff, 0xfc00 };

		assert_true(tally_fixp16_absmax(TALLY_DT_BF16, x, 5) ==
			(float)value(TALLY_DT_BF16, 0x7f7f));
		assert_true(isinf(tally_fixp16_absmax(TALLY_DT_F16, y, 5)));
		assert_true(tally_fixp16_absmax(TALLY_DT_F16, y, 4) == 65504.0f);
		assert_true(tally_fixp16_absmax(TALLY_DT_F16, y, 0) == 0.0f);
		assert_true(tally_fixp16_absmax(TALLY_DT_F32, x, 5) == 0.0f);
	}
}

/* absmax on the scalar path and on the vectorized one. */
static void
absmax_classes(void **state)
{
	(void)state;
	both_paths(absmax_run);
}

/* The encoding of v at e by its definition, in double (exact here). */
static int32_t
enc_ref(double v, int e, int lanes)
{
	double y, lo = lanes == 32 ? -2147483648.0 : -32768.0;
	double hi = lanes == 32 ? 2147483520.0 : 32767.0;

	if (isnan(v))
		return 0;
	y = v * ldexp(1.0, e);	/* exact: 11 bits at most, e bounded */
	y = y < -2147483648.0 ? -2147483648.0 : y;
	y = y > 2147483520.0 ? 2147483520.0 : y;
	y = nearbyint(y);	/* ties to even */
	y = y < lo ? lo : y > hi ? hi : y;
	return (int32_t)y;
}

static uint16_t all16[0x10000 + 5];

/* Every pattern of both types at exponents across the range. */
static void
encode_run(int simd)
{
	static int32_t q32[0x10005];
	static int16_t q16[0x10005];
	static const int exps[] = { TALLY_FIXP_EXP_MIN, -100, -20, -1, 0,
		1, 3, 8, 14, 24, 30, 60, 126, 127, 133, 140, 149, 160,
		TALLY_FIXP_EXP_MAX };

	for (int t = 0; t < 2; t++)
		for (size_t k = 0; k < sizeof(exps) / sizeof(exps[0]); k++) {
			enum tally_dtype dt = types[t];
			int e = exps[k];

			/* n odd and not a multiple of 8 or 16: tails too. */
			assert_int_equal(tally_fixp16_encode(dt, all16, q32,
				32, 0x10003, e), 0);
			assert_int_equal(tally_fixp16_encode(dt, all16, q16,
				16, 0x10003, e), 0);
			for (uint32_t i = 0; i < 0x10003; i++) {
				double v = value(dt, all16[i]);

				if (q32[i] != enc_ref(v, e, 32) ||
						q16[i] != enc_ref(v, e, 16))
					fail_msg("%s %s %04x at e %d: %d %d, "
						"want %d %d", simd ? "simd" :
						"scalar", t ? "f16" : "bf16",
						all16[i], e, q32[i], q16[i],
						enc_ref(v, e, 32),
						enc_ref(v, e, 16));
			}
		}
}

static void
encode_every_pattern(void **state)
{
	(void)state;
	for (uint32_t i = 0; i < 0x10000 + 5; i++)
		all16[i] = (uint16_t)(i * 40503u);	/* a permutation */
	both_paths(encode_run);
}

/* A sum for the decoding tests: boundaries, halves, random widths. */
static int32_t
pick_sum(uint64_t h, unsigned int i)
{
	int bits = (int)(h >> 58) % 32;
	int32_t s;

	switch (i % 8) {
	case 0:
		s = (int32_t)(UINT32_C(1) << (bits % 31));
		break;
	case 1:	/* a half-way point of some width, +-1 */
		s = (int32_t)((UINT32_C(1) << (bits % 31)) |
			(UINT32_C(1) << (bits % 31 / 2)));
		s += (int32_t)(h % 3) - 1;
		break;
	case 2:
		s = i % 16 == 2 ? INT32_MIN : INT32_MAX;
		break;
	default:
		s = (int32_t)(uint32_t)h >> (31 - bits);
		break;
	}
	/* INT32_MIN stays itself (it has no negation in int32). */
	return (h & 1) && s != INT32_MIN ? -s : s;
}

static void
decode_run(int simd)
{
	enum { N = 1003 };
	static int32_t s32[N];
	static int16_t s16[N];
	static uint16_t x[N], y[N];

	for (int t = 0; t < 2; t++)
		for (int e = TALLY_FIXP_EXP_MIN; e <= TALLY_FIXP_EXP_MAX; e++) {
			enum tally_dtype dt = types[t];
			const struct table *tb = t ? &tab_f16 : &tab_bf16;

			for (unsigned int i = 0; i < N; i++) {
				uint64_t h = mix((uint64_t)e << 32 ^ i ^
					(uint64_t)t << 48);

				s32[i] = i == 0 ? 0 : pick_sum(h, i);
				s16[i] = (int16_t)(i == 0 ? 0 :
					(int32_t)(uint32_t)h >> (16 +
					(int)(h >> 60)));
			}
			assert_int_equal(tally_fixp16_decode(dt, s32, 32, x, N,
				e), 0);
			assert_int_equal(tally_fixp16_decode(dt, s16, 16, y, N,
				e), 0);
			for (unsigned int i = 0; i < N; i++) {
				uint16_t w = s32[i] == 0 ? 0 : nearest(tb,
					ldexp((double)s32[i], -e));
				uint16_t w16 = s16[i] == 0 ? 0 : nearest(tb,
					ldexp((double)s16[i], -e));

				if (x[i] != w || y[i] != w16)
					fail_msg("%s %s: %d, %d at e %d: %04x "
						"%04x, want %04x %04x",
						simd ? "simd" : "scalar",
						t ? "f16" : "bf16", s32[i],
						s16[i], e, x[i], y[i], w, w16);
			}
			/* In place from 16-bit sums. */
			assert_int_equal(tally_fixp16_decode(dt, s16, 16,
				(uint16_t *)s16, N, e), 0);
			assert_memory_equal(s16, y, sizeof(y));
		}
}

/*
 * Every 16-bit sum decoded at the exponents where the vectorized loop
 * changes roads (through binary32 up to e 110, through binary64 above)
 * and at the range's ends, out of place and in place: the nearest value
 * of the type, as decode_run() wants it.
 */
static void
decode16_every_run(int simd)
{
	static const int es[] = { TALLY_FIXP_EXP_MIN, -113, -112, -20, 0, 7,
		20, 109, 110, 111, 126, 140, TALLY_FIXP_EXP_MAX };
	static int16_t s[0x10000];
	static uint16_t y[0x10000];

	for (int t = 0; t < 2; t++)
		for (size_t k = 0; k < sizeof(es) / sizeof(es[0]); k++) {
			enum tally_dtype dt = types[t];
			const struct table *tb = t ? &tab_f16 : &tab_bf16;
			int e = es[k];

			for (uint32_t i = 0; i < 0x10000; i++)
				s[i] = (int16_t)(uint16_t)(i + 0x8000);
			assert_int_equal(tally_fixp16_decode(dt, s, 16, y,
				0x10000, e), 0);
			for (uint32_t i = 0; i < 0x10000; i++) {
				uint16_t w = s[i] == 0 ? 0 : nearest(tb,
					ldexp((double)s[i], -e));

				if (y[i] != w)
					fail_msg("%s %s: %d at e %d: %04x, want "
						"%04x", simd ? "simd" : "scalar",
						t ? "f16" : "bf16", s[i], e, y[i],
						w);
			}
			assert_int_equal(tally_fixp16_decode(dt, s, 16,
				(uint16_t *)s, 0x10000, e), 0);
			assert_memory_equal(s, y, sizeof(y));
		}
}

static void
decode_rounds_once(void **state)
{
	int32_t s = (1 << 24) + (1 << 16) + 1;
	uint16_t x;

	(void)state;
	table_init(&tab_bf16, TALLY_DT_BF16);
	table_init(&tab_f16, TALLY_DT_F16);
	/*
	 * 2^24 + 2^16 + 1: binary32 first makes it 2^24 + 2^16, a tie that
	 * bf16 breaks down to 2^24; once, it is 2^24 + 2^17.
	 */
	assert_int_equal(tally_fixp16_decode(TALLY_DT_BF16, &s, 32, &x, 1, 0),
		0);
	assert_int_equal(x, 0x4b81);
	both_paths(decode_run);
	both_paths(decode16_every_run);
}

/* The lane rule, the exponents' headroom and the bad arguments. */
static void
lanes_and_exponent(void **state)
{
	int e, e32;

	(void)state;
	for (unsigned int w = 1; w <= 64; w++) {
		assert_int_equal(tally_fixp16_lanes(TALLY_DT_BF16, w, 1),
			w <= 7 ? 16 : 32);
		assert_int_equal(tally_fixp16_lanes(TALLY_DT_F16, w, 1),
			w <= 2 ? 16 : 32);
		assert_int_equal(tally_fixp16_lanes(TALLY_DT_BF16, w, 0), 32);
		assert_int_equal(tally_fixp16_lanes(TALLY_DT_F32, w, 1), 32);
		assert_int_equal(tally_fixp16_exponent(1.0f, w, 32, 1, &e), 0);
		assert_int_equal(tally_fixp_exponent(1.0f, w, &e32), 0);
		assert_int_equal(e, e32);
		assert_int_equal(tally_fixp16_exponent(1.0f, w, 16, 1, &e), 0);
		/*
		 * 1 = 0.5 2^1: e = b - 1, |q| <= 2^b (an A just below 2^1
		 * has the same e), and b is the largest with w 2^b < 2^15.
		 */
		assert_true((w << (e + 1)) <= 32767);
		assert_true((w << (e + 2)) > 32767);
		assert_int_equal(tally_fixp16_exponent(1.0f, w, 16, 0, &e), 0);
		assert_int_equal(e, 13);
	}
	assert_int_equal(tally_fixp16_exponent(INFINITY, 4, 16, 1, &e),
		-EINVAL);
	assert_int_equal(tally_fixp16_exponent(NAN, 4, 32, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp16_exponent(1.0f, 0, 32, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp16_exponent(1.0f, 65, 32, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp16_exponent(1.0f, 4, 8, 1, &e), -EINVAL);
	assert_int_equal(tally_fixp16_exponent(1.0f, 4, 16, 1, NULL),
		-EINVAL);
	assert_int_equal(tally_fixp16_exponent(0.0f, 4, 16, 1, &e), 0);
	assert_int_equal(e, 0);
	assert_int_equal(tally_fixp16_encode(TALLY_DT_I32, all16, all16, 16,
		1, 0), -EINVAL);
	assert_int_equal(tally_fixp16_encode(TALLY_DT_BF16, all16, all16, 8,
		1, 0), -EINVAL);
	assert_int_equal(tally_fixp16_encode(TALLY_DT_BF16, NULL, all16, 16,
		1, 0), -EINVAL);
	assert_int_equal(tally_fixp16_encode(TALLY_DT_BF16, NULL, NULL, 16,
		0, 0), 0);
	assert_int_equal(tally_fixp16_decode(TALLY_DT_F32, all16, 16, all16,
		1, 0), -EINVAL);
	assert_int_equal(tally_fixp16_decode(TALLY_DT_F16, all16, 24, all16,
		1, 0), -EINVAL);
}

/*
 * The header's bound: world random tensors (one with the largest |x|),
 * encoded, summed, the sum decoded exactly in double, within
 * E = world 2^-b A of the exact sum, for both lane widths, wide and
 * narrow; and the decoded result within E + 2^-p (|S| + E).
 */
static void
error_bound(void **state)
{
	enum { N = 4096 };
	static const unsigned int worlds[] = { 1, 2, 3, 4, 7, 8, 13, 64 };
	static uint16_t x[64][N];
	static int32_t q[N], sum[N];
	static int16_t q16[N];

	(void)state;
	for (int t = 0; t < 2; t++)
	for (size_t wi = 0; wi < sizeof(worlds) / sizeof(worlds[0]); wi++)
	for (unsigned int lanes = 16; lanes <= 32; lanes += 16)
	for (int narrow = 0; narrow <= 1; narrow++) {
		enum tally_dtype dt = types[t];
		unsigned int w = worlds[wi];
		int p = t ? 11 : 8, e, b;
		float amax = 0.0f;
		double A, E;

		for (unsigned int r = 0; r < w; r++)
			for (unsigned int i = 0; i < N; i++) {
				uint64_t h = mix((uint64_t)r << 32 | i |
					(uint64_t)wi << 48);
				/* Finite patterns of magnitude near 1. */
				uint16_t ex = t ? (uint16_t)(4 + h % 12) :
					(uint16_t)(110 + h % 18);

				x[r][i] = (uint16_t)(((h >> 20) & 0x8000) |
					(ex << (t ? 10 : 7)) |
					((h >> 30) & (t ? 0x3ff : 0x7f)));
			}
		for (unsigned int r = 0; r < w; r++) {
			float a = tally_fixp16_absmax(dt, x[r], N);

			amax = a > amax ? a : amax;
		}
		assert_int_equal(tally_fixp16_exponent(amax, w, lanes, narrow,
			&e), 0);
		memset(sum, 0, sizeof(sum));
		for (unsigned int r = 0; r < w; r++) {
			assert_int_equal(tally_fixp16_encode(dt, x[r],
				lanes == 32 ? (void *)q : (void *)q16, lanes,
				N, e), 0);
			for (unsigned int i = 0; i < N; i++)
				sum[i] += lanes == 32 ? q[i] : q16[i];
		}
		A = amax;
		b = lanes == 32 ? 30 - (int)floor(log2(w)) :
			narrow ? 14 - (int)floor(log2(w)) : 14;
		E = w * ldexp(A, -b);
		for (unsigned int i = 0; i < N; i++) {
			double S = 0.0, fx;
			uint16_t r;

			for (unsigned int k = 0; k < w; k++)
				S += value(dt, x[k][i]);	/* exact */
			fx = ldexp(sum[i], -e);
			assert_true(fabs(fx - S) <= E);
			if (lanes == 16 && narrow)
				assert_true(abs(sum[i]) <= 32767);
			assert_int_equal(tally_fixp16_decode(dt, &sum[i], 32,
				&r, 1, e), 0);
			assert_true(fabs(value(dt, r) - S) <=
				E + ldexp(fabs(S) + E, -p));
		}
		if (lanes == 16 && narrow &&
				tally_fixp16_lanes(dt, w, 1) == 16)
			assert_true(E <= ldexp(A, -(p + 1)));
	}
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The throughput of both paths on 4 Mi bf16 elements (printed, not
 * checked: the machine is shared), after checking they agree there.
 */
/*
 * absmax's speed on each path, best of three passes over n elements,
 * printed (the vectorized one is about ten times as fast: the compiler
 * does not vectorize the scalar loop); both must give the same maximum.
 */
static void
absmax_speed(const uint16_t *x, size_t n)
{
	double best[2] = { 1e9, 1e9 };
	float a[2] = { 0, 0 };

	for (int simd = 0; simd <= 1; simd++) {
		if (tally_fixp16_simd(simd) != simd)
			break;
		for (int k = 0; k < 3; k++) {
			double t0 = now_s();

			a[simd] = tally_fixp16_absmax(TALLY_DT_BF16, x, n);
			best[simd] = fmin(best[simd], now_s() - t0);
		}
		print_message("# %s: bf16 absmax %.2f Gelem/s\n", simd ?
			"avx2+f16c" : "scalar", n / best[simd] * 1e-9);
	}
	if (tally_fixp16_simd(1)) {
		assert_true(a[0] == a[1]);
	}
}

static void
throughput(void **state)
{
	enum { N = 1 << 22 };
	uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *z = malloc(N * 2);
	int32_t *q = malloc(N * 4);

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(z);
	assert_non_null(q);
	for (size_t i = 0; i < N; i++)
		x[i] = (uint16_t)(0x3c00 + mix(i) % 0x0780);
	for (int simd = 0; simd <= 1; simd++) {
		double t0, t1, t2;

		if (tally_fixp16_simd(simd) != simd)
			break;
		t0 = now_s();
		for (int k = 0; k < 4; k++)
			(void)tally_fixp16_encode(TALLY_DT_BF16, x, q, 32, N, 20);
		t1 = now_s();
		for (int k = 0; k < 4; k++)
			(void)tally_fixp16_decode(TALLY_DT_BF16, q, 32,
				simd ? z : y, N, 20);
		t2 = now_s();
		for (int k = 0; k < 4; k++)
			(void)tally_fixp16_decode(TALLY_DT_BF16, q, 16,
				(uint16_t *)(void *)q + N, N, 20);
		print_message("# %s: bf16 encode %.2f, decode %.2f, decode "
			"from i16 %.2f Gelem/s\n", simd ? "avx2+f16c" : "scalar",
			4.0 * N / (t1 - t0) * 1e-9, 4.0 * N / (t2 - t1) * 1e-9,
			4.0 * N / (now_s() - t2) * 1e-9);
	}
	if (tally_fixp16_simd(1))
		assert_memory_equal(y, z, N * 2);
	absmax_speed(x, N);
	free(x);
	free(y);
	free(z);
	free(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(absmax_classes),
		cmocka_unit_test(encode_every_pattern),
		cmocka_unit_test(decode_rounds_once),
		cmocka_unit_test(lanes_and_exponent),
		cmocka_unit_test(error_bound),
		cmocka_unit_test(throughput),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
