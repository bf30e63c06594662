/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of the shared-scale stochastic quantizers (<tally/quant.h>):
 * levels and scale, the element math of gpu/codec/quant/quant_math.h
 * (which the CUDA kernels run too) against an independent model in double
 * precision with the published SplitMix64, the packings byte for byte,
 * round trips, chunked encoding, unbiasedness over many seeds (and a
 * check that the unbiasedness test fails for round-to-nearest), narrow
 * and wide sums of many workers, determinism; and, last, the CPU
 * throughput of each function, printed as TAP comments.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <setjmp.h>
#include <cmocka.h>

#include <tally/fixp.h>
#include <tally/quant.h>

#include "codec/quant/quant_math.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static const unsigned int widths[] = { 16, 8, 4 };

/* Deterministic generator (splitmix64): the tests give the same data. */
static uint64_t
rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1), multiples of 2^-24. */
static float
rnd_unit(uint64_t *s)
{
	return (float)((int64_t)(rnd_next(s) >> 39) - (1 << 24)) / 0x1p24f;
}

/* Uniform integer in [0, n). */
static size_t
rnd_below(uint64_t *s, size_t n)
{
	return (size_t)(rnd_next(s) % n);
}

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	assert_non_null(p);
	return p;
}

/*
 * The draw of element g under seed, from the definition in
 * docs/codecs/quant.md: SplitMix64 with state key + (g / 2 + 1) * gamma,
 * key = mix(seed ^ salt); the top 24 bits of the low (g even) or high
 * (g odd) 32 bits.
 */
static uint32_t
model_u24(uint64_t seed, uint64_t g)
{
	uint64_t s = (seed ^ 0xbb67ae8584caa73bull) - 0x9e3779b97f4a7c15ull;
	uint64_t key = rnd_next(&s);
	uint64_t h;

	s = key + (g / 2) * 0x9e3779b97f4a7c15ull;
	h = rnd_next(&s);
	return (uint32_t)(g & 1 ? h >> 32 : h) >> 8;
}

/* One element's encoding, modelled in double (exact there). */
static int32_t
model_enc(float x, float scale, unsigned int levels, uint32_t u24)
{
	double y, fl, frac;

	if (isnan(x))
		return 0;
	/* The product is exact in double; one rounding to float. */
	y = (double)(float)((double)x * (double)scale);
	if (isnan(y))
		return 0;
	y = y < -(double)levels ? -(double)levels : y;
	y = y > (double)levels ? (double)levels : y;
	fl = floor(y);
	/* The float subtraction: the exact difference, rounded once. */
	frac = (double)(float)(y - fl);
	return (int32_t)fl + (frac > (double)u24 / 16777216.0);
}

/* One sum's decoding: double rounding of a quotient is innocuous here. */
static float
model_dec(int32_t sum, float scale)
{
	return (float)((double)sum / (double)scale);
}

/* The largest level count of a width. */
static unsigned int
width_max(unsigned int bits)
{
	return bits == 16 ? TALLY_QUANT_I16_LEVELS :
		bits == 8 ? TALLY_QUANT_I8_LEVELS : TALLY_QUANT_I4_LEVELS;
}

/* Bytes of n elements of a width. */
static size_t
width_bytes(unsigned int bits, size_t n)
{
	return bits == 4 ? (n + 1) / 2 : n * bits / 8;
}

/* Encodes x[0..n) at offset to the packed buffer p of the width. */
static void
encode_w(unsigned int bits, const float *x, void *p, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset)
{
	if (bits == 16)
		tally_quant_encode_i16(x, p, n, scale, levels, seed, offset);
	else if (bits == 8)
		tally_quant_encode_i8(x, p, n, scale, levels, seed, offset);
	else
		tally_quant_encode_i4(x, p, n, scale, levels, seed, offset);
}

/* Decodes n narrow sums packed in p. */
static void
decode_w(unsigned int bits, const void *p, float *x, size_t n, float scale)
{
	if (bits == 16)
		tally_quant_decode_i16(p, x, n, scale);
	else if (bits == 8)
		tally_quant_decode_i8(p, x, n, scale);
	else
		tally_quant_decode_i4(p, x, n, scale);
}

/* Element i of a packed buffer of the width, as an int. */
static int32_t
unpack1(unsigned int bits, const void *p, size_t i)
{
	const uint8_t *b = p;
	int16_t v16;

	if (bits == 16) {
		memcpy(&v16, b + 2 * i, sizeof(v16));
		return v16;
	}
	if (bits == 8)
		return (int8_t)b[i];
	return (int32_t)(((b[i / 2] >> (i & 1 ? 4 : 0)) & 0xfu) ^ 0x8u) - 8;
}

/* Stores v as element i of a packed buffer of the width (in range). */
static void
pack1(unsigned int bits, void *p, size_t i, int32_t v)
{
	uint8_t *b = p;
	int16_t v16 = (int16_t)v;

	if (bits == 16) {
		memcpy(b + 2 * i, &v16, sizeof(v16));
	} else if (bits == 8) {
		b[i] = (uint8_t)(int8_t)v;
	} else {
		unsigned int sh = i & 1 ? 4 : 0;

		b[i / 2] = (uint8_t)((b[i / 2] & ~(0xfu << sh)) |
			(((uint32_t)v & 0xfu) << sh));
	}
}

/* n floats: uniform in [-a, a), with specials when specials is set. */
static void
fill(float *x, size_t n, float a, int specials, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd_next(s);

		switch (specials ? r % 16 : 15) {
		case 0:
			x[i] = NAN;
			break;
		case 1:
			x[i] = (r & 0x100) ? INFINITY : -INFINITY;
			break;
		case 2:
			x[i] = (r & 0x100) ? 0.0f : -0.0f;
			break;
		case 3:
			x[i] = 3.0f * a * rnd_unit(s);	/* beyond absmax */
			break;
		case 4:
			x[i] = 0x1p-140f * rnd_unit(s);	/* subnormal */
			break;
		default:
			x[i] = a * rnd_unit(s);
			break;
		}
	}
}

static unsigned int
levels_of(unsigned int bits, unsigned int world, int narrow)
{
	unsigned int l = 0;

	assert_int_equal(tally_quant_levels(bits, world, narrow, &l), 0);
	return l;
}

static float
scale_of(float absmax, unsigned int levels)
{
	float s = -1.0f;

	assert_int_equal(tally_quant_scale(absmax, levels, &s), 0);
	return s;
}

/* Known level counts, every world, and the errors. */
static void
levels_table(void **state)
{
	unsigned int l = 12345;

	(void)state;
	assert_int_equal(levels_of(16, 1, 0), 32767);
	assert_int_equal(levels_of(8, 64, 0), 127);
	assert_int_equal(levels_of(4, 64, 0), 7);
	assert_int_equal(levels_of(16, 64, 1), 511);
	assert_int_equal(levels_of(8, 2, 1), 63);
	assert_int_equal(levels_of(8, 64, 1), 1);
	assert_int_equal(levels_of(4, 1, 1), 7);
	assert_int_equal(levels_of(4, 2, 1), 3);
	assert_int_equal(levels_of(4, 3, 1), 2);
	assert_int_equal(levels_of(4, 7, 1), 1);
	for (unsigned int w = 1; w <= TALLY_QUANT_WORLD_MAX; w++) {
		for (size_t i = 0; i < ARRAY_SIZE(widths); i++) {
			unsigned int m = width_max(widths[i]);

			assert_int_equal(levels_of(widths[i], w, 0), m);
			if (m / w == 0) {
				assert_int_equal(tally_quant_levels(widths[i],
					w, 1, &l), -ERANGE);
				continue;
			}
			/* world sums of +-L fit the narrow width. */
			assert_int_equal(levels_of(widths[i], w, 1), m / w);
			assert_true((m / w) * w <= m);
			assert_true((m / w + 1) * w > m);
		}
	}
	assert_int_equal(tally_quant_levels(4, 8, 1, &l), -ERANGE);
	assert_int_equal(tally_quant_levels(4, 64, 1, &l), -ERANGE);
	assert_int_equal(tally_quant_levels(2, 1, 0, &l), -EINVAL);
	assert_int_equal(tally_quant_levels(32, 1, 0, &l), -EINVAL);
	assert_int_equal(tally_quant_levels(0, 1, 0, &l), -EINVAL);
	assert_int_equal(tally_quant_levels(8, 0, 0, &l), -EINVAL);
	assert_int_equal(tally_quant_levels(8, 65, 0, &l), -EINVAL);
	assert_int_equal(tally_quant_levels(8, 1, 0, NULL), -EINVAL);
	assert_int_equal(l, 12345);
}

/* Scale: exact known quotients, absmax 0, tiny, and the errors. */
static void
scale_edges(void **state)
{
	float s = 42.0f;

	(void)state;
	assert_true(scale_of(1.0f, 127) == 127.0f);
	assert_true(scale_of(2.0f, 127) == 63.5f);
	assert_true(scale_of(0.25f, 7) == 28.0f);
	assert_true(scale_of(3.0f, 7) == 7.0f / 3.0f);
	assert_true(scale_of(0.1f, 32767) == 32767.0f / 0.1f);
	/* absmax 0: every element is 0, any scale does; levels is used. */
	assert_true(scale_of(0.0f, 127) == 127.0f);
	assert_true(scale_of(-0.0f, 7) == 7.0f);
	/* A quotient past FLT_MAX gives FLT_MAX. */
	assert_true(scale_of(0x1p-149f, 32767) == FLT_MAX);
	assert_true(scale_of(0x1p-126f, 1) == 0x1p126f);
	assert_int_equal(tally_quant_scale(INFINITY, 127, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(-INFINITY, 127, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(NAN, 127, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(-1.0f, 127, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(1.0f, 0, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(1.0f, 32768, &s), -EINVAL);
	assert_int_equal(tally_quant_scale(1.0f, 127, NULL), -EINVAL);
	assert_true(s == 42.0f);
}

/* absmax 0 (a tensor of zeros): every q is 0, and decodes to 0. */
static void
zero_tensor(void **state)
{
	float x[33], y[33];
	uint8_t p[66];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(x); i++)
		x[i] = (i & 1) ? -0.0f : 0.0f;
	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		unsigned int l = levels_of(widths[w], 3, 1);
		float s = scale_of(tally_fixp_absmax(x, ARRAY_SIZE(x)), l);

		memset(p, 0x5a, sizeof(p));
		encode_w(widths[w], x, p, ARRAY_SIZE(x), s, l, 7, 3);
		for (size_t i = 0; i < width_bytes(widths[w], ARRAY_SIZE(x));
		     i++)
			assert_int_equal(p[i], 0);
		decode_w(widths[w], p, y, ARRAY_SIZE(x), s);
		for (size_t i = 0; i < ARRAY_SIZE(x); i++)
			assert_true(y[i] == 0.0f && !signbit(y[i]));
	}
}

/* The hash is SplitMix64: its published first outputs from state 0. */
static void
rng_known(void **state)
{
	(void)state;
	assert_true(tally_quant_hash(0, 0) == 0xe220a8397b1dcdafull);
	assert_true(tally_quant_hash(0, 1) == 0x6e789e6aa1b965f4ull);
	assert_true(tally_quant_hash(0, 2) == 0x06c45d188009454full);
	for (uint64_t g = 0; g < 1000; g++) {
		assert_int_equal(tally_quant_draw(tally_quant_key(5), g),
			model_u24(5, g));
		assert_int_equal(tally_quant_draw(tally_quant_key(~0ull),
			g << 40), model_u24(~0ull, g << 40));
	}
}

/* Distinct ranks, and distinct steps, give distinct seeds. */
static void
seeds_distinct(void **state)
{
	enum { R = 64, S = 100 };
	uint64_t *v = xcalloc(R * S, sizeof(*v));

	(void)state;
	for (unsigned int r = 0; r < R; r++)
		for (unsigned int st = 0; st < S; st++)
			v[r * S + st] = tally_quant_seed(1234, r, st);
	for (size_t i = 0; i < R * S; i++)
		for (size_t j = i + 1; j < R * S; j++)
			assert_true(v[i] != v[j]);
	assert_true(tally_quant_seed(1, 0, 0) != tally_quant_seed(2, 0, 0));
	assert_true(tally_quant_seed(1, 2, 3) == tally_quant_seed(1, 2, 3));
	free(v);
}

/*
 * Every width against the model, element by element, on random data with
 * specials (NaN, infinities, values past absmax, subnormals), random
 * seeds, offsets (odd ones too) and sizes, wide and narrow levels.
 */
static void
encode_model(void **state)
{
	enum { N = 1031 };
	float *x = xcalloc(N, sizeof(*x));
	uint8_t *p = xcalloc(2 * N, 1);
	uint64_t s = 21;

	(void)state;
	for (int round = 0; round < 60; round++) {
		size_t n = 1 + rnd_below(&s, N);
		unsigned int bits = widths[round % 3];
		unsigned int world = 1 + (unsigned int)rnd_below(&s, 7);
		unsigned int l = levels_of(bits, world, round & 4);
		float a = ldexpf(1.0f, (int)rnd_below(&s, 60) - 30);
		float sc = scale_of(a, l);
		uint64_t seed = rnd_next(&s);
		uint64_t off = round < 6 ? (uint64_t)round :
			rnd_next(&s) >> (rnd_below(&s, 64));

		fill(x, n, a, round & 1, &s);
		memset(p, 0xa5, 2 * N);
		encode_w(bits, x, p, n, sc, l, seed, off);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(unpack1(bits, p, i),
				model_enc(x[i], sc, l, model_u24(seed,
					off + i)));
		if (bits == 4 && (n & 1))
			assert_int_equal(p[n / 2] >> 4, 0);
		/* Nothing written past the packed size. */
		assert_int_equal(p[width_bytes(bits, n)], 0xa5);
	}
	free(x);
	free(p);
}

/*
 * The comparison with the draw, exactly: at scale 1, an element whose
 * fraction equals its draw u24 * 2^-24 goes down, one 2^-24 above goes
 * up; the same below zero (y = u24 * 2^-24 - 1, where the fraction is
 * 1 + y). Pins the strict comparison and the draw's 24 bits.
 */
static void
draw_boundary(void **state)
{
	enum { N = 512 };
	float x[N];
	uint8_t p[2 * N];
	uint64_t s = 22;

	(void)state;
	for (int round = 0; round < 24; round++) {
		unsigned int bits = widths[round % 3];
		uint64_t seed = rnd_next(&s), off = rnd_next(&s) >> 20;
		int32_t want[N];

		for (size_t i = 0; i < N; i++) {
			uint32_t u = model_u24(seed, off + i);
			int up = (int)(i & 1), neg = (int)((i >> 1) & 1);
			float f = (float)(u + (uint32_t)up) * 0x1p-24f;

			x[i] = neg ? f - 1.0f : f;
			want[i] = (neg ? -1 : 0) + up;
		}
		encode_w(bits, x, p, N, 1.0f, 7, seed, off);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(unpack1(bits, p, i), want[i]);
	}
}

/* NaN, infinities and saturating values; levels clamped; n 0. */
static void
specials(void **state)
{
	const float x[] = {
		NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 8.0f, -8.0f,
	};
	const int32_t want[] = { 0, 0, 7, -7, 7, -7, 7, -7 };
	uint8_t p[16];

	(void)state;
	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		unsigned int bits = widths[w];

		/* Asking for more levels than the width has: its maximum. */
		memset(p, 0, sizeof(p));
		encode_w(bits, x, p, ARRAY_SIZE(x), 1.0f, 100000, 1, 0);
		for (size_t i = 0; i < ARRAY_SIZE(x); i++)
			assert_int_equal(unpack1(bits, p, i),
				i < 2 ? 0 : (want[i] > 0 ? 1 : -1) *
				(int32_t)(i < 6 ? width_max(bits) :
				(bits == 4 ? 7 : 8)));
		/* Levels 7 clamp everything to [-7, 7]. */
		encode_w(bits, x, p, ARRAY_SIZE(x), 1.0f, 7, 1, 0);
		for (size_t i = 0; i < ARRAY_SIZE(x); i++)
			assert_int_equal(unpack1(bits, p, i), want[i]);
		/* A NaN scale makes every element 0. */
		encode_w(bits, x, p, ARRAY_SIZE(x), NAN, 7, 1, 0);
		for (size_t i = 0; i < ARRAY_SIZE(x); i++)
			assert_int_equal(unpack1(bits, p, i), 0);
		/* n 0 touches nothing. */
		memset(p, 0x77, sizeof(p));
		encode_w(bits, x, p, 0, 1.0f, 7, 1, 1);
		for (size_t i = 0; i < sizeof(p); i++)
			assert_int_equal(p[i], 0x77);
	}
}

/* The packings of small known inputs, byte for byte. */
static void
pack_known(void **state)
{
	const float x16[] = { 1, -1, 32767, -32767, 256, -40000 };
	const uint8_t b16[] = {
		0x01, 0x00, 0xff, 0xff, 0xff, 0x7f, 0x01, 0x80, 0x00, 0x01,
		0x01, 0x80,
	};
	const float x8[] = { 1, -1, 127, -127, -128, 0, 5 };
	const uint8_t b8[] = { 0x01, 0xff, 0x7f, 0x81, 0x81, 0x00, 0x05 };
	const float x4[] = { 1, -1, 7, -7, 0, -3, -8 };
	const uint8_t b4[] = { 0xf1, 0x97, 0xd0, 0x09 };
	const float half[] = { 0.5f, -0.5f, 2.5f, -2.5f, 0.5f };
	uint8_t p[16];

	(void)state;
	memset(p, 0xee, sizeof(p));
	tally_quant_encode_i16(x16, (int16_t *)p, ARRAY_SIZE(x16), 1.0f,
		32767, 9, 0);
	assert_memory_equal(p, b16, sizeof(b16));
	tally_quant_encode_i8(x8, (int8_t *)p, ARRAY_SIZE(x8), 1.0f, 127, 9,
		0);
	assert_memory_equal(p, b8, sizeof(b8));
	/* Odd count: the last high nibble 0; at any offset, odd too. */
	for (uint64_t off = 0; off < 4; off++) {
		memset(p, 0xee, sizeof(p));
		tally_quant_encode_i4(x4, p, ARRAY_SIZE(x4), 1.0f, 7, 9, off);
		assert_memory_equal(p, b4, sizeof(b4));
		assert_int_equal(p[sizeof(b4)], 0xee);
	}
	/* Scale 2: the same bytes from halves. */
	{
		float h4[ARRAY_SIZE(x4)];

		for (size_t i = 0; i < ARRAY_SIZE(x4); i++)
			h4[i] = x4[i] / 2;
		tally_quant_encode_i4(h4, p, ARRAY_SIZE(h4), 2.0f, 7, 9, 0);
		assert_memory_equal(p, b4, sizeof(b4));
	}
	/*
	 * Half-way values go up exactly when the element's draw is below
	 * 2^23: the bytes follow from the RNG's definition.
	 */
	for (uint64_t seed = 0; seed < 64; seed++) {
		uint8_t want = 0, got;

		tally_quant_encode_i4(half, p, ARRAY_SIZE(half), 1.0f, 7, seed,
			seed);
		for (size_t i = 0; i < ARRAY_SIZE(half); i++) {
			int up = model_u24(seed, seed + i) < (1u << 23);
			int32_t q = (int32_t)floorf(half[i]) + up;

			got = (uint8_t)unpack1(4, p, i);
			want = (uint8_t)q;
			assert_int_equal(got, want);
		}
	}
}

/* Narrow and wide decodings of known sums. */
static void
decode_known(void **state)
{
	const int32_t s32[] = { 0, 1, -1, 2147483, -2147483, 64 * 32767 };
	const int16_t s16[] = { 0, 1, -1, 32767, -32768 };
	const int8_t s8[] = { 0, 1, -1, 127, -128 };
	const uint8_t s4[] = { 0xf1, 0x87, 0x09 };
	const float f4[] = { 1, -1, 7, -8, -7 };
	float y[8];

	(void)state;
	tally_quant_decode_i32(s32, y, ARRAY_SIZE(s32), 2.0f);
	for (size_t i = 0; i < ARRAY_SIZE(s32); i++)
		assert_true(y[i] == (float)s32[i] / 2.0f);
	tally_quant_decode_i32(s32, y, ARRAY_SIZE(s32), 3.0f);
	for (size_t i = 0; i < ARRAY_SIZE(s32); i++)
		assert_true(y[i] == model_dec(s32[i], 3.0f));
	tally_quant_decode_i16(s16, y, ARRAY_SIZE(s16), 0.5f);
	for (size_t i = 0; i < ARRAY_SIZE(s16); i++)
		assert_true(y[i] == (float)s16[i] * 2.0f);
	tally_quant_decode_i8(s8, y, ARRAY_SIZE(s8), 4.0f);
	for (size_t i = 0; i < ARRAY_SIZE(s8); i++)
		assert_true(y[i] == (float)s8[i] / 4.0f);
	y[5] = 99.0f;
	tally_quant_decode_i4(s4, y, ARRAY_SIZE(f4), 2.0f);
	for (size_t i = 0; i < ARRAY_SIZE(f4); i++)
		assert_true(y[i] == f4[i] / 2.0f);
	assert_true(y[5] == 99.0f);
}

/*
 * decode(encode(x)) is within one step 1/s of x (plus the roundings of
 * x * s, of s itself and of the quotient: 2^-21 absmax covers them), for
 * every width, wide and narrow, at many magnitudes.
 */
static void
round_trip_bound(void **state)
{
	enum { N = 4099 };
	float *x = xcalloc(N, sizeof(*x)), *y = xcalloc(N, sizeof(*y));
	uint8_t *p = xcalloc(2 * N, 1);
	uint64_t s = 31;

	(void)state;
	for (int round = 0; round < 36; round++) {
		unsigned int bits = widths[round % 3];
		unsigned int l = levels_of(bits, 1 + round % 7, round & 8);
		float a = ldexpf(1.0f + rnd_unit(&s) / 2, (int)rnd_below(&s,
			80) - 40);
		float sc, tol;

		fill(x, N, a, 0, &s);
		x[0] = a;
		x[1] = -a;
		sc = scale_of(tally_fixp_absmax(x, N), l);
		tol = 1.0f / sc + ldexpf(a, -21);
		encode_w(bits, x, p, N, sc, l, (uint64_t)round, 77);
		decode_w(bits, p, y, N, sc);
		for (size_t i = 0; i < N; i++)
			assert_true(fabsf(y[i] - x[i]) <= tol);
	}
	free(x);
	free(y);
	free(p);
}

/*
 * Values already on the grid, x = k / s (as floats) with x * s == k,
 * decode to themselves, bit for bit, whatever the seed.
 */
static void
round_trip_grid(void **state)
{
	enum { N = 2048 };
	float *x = xcalloc(N, sizeof(*x)), *y = xcalloc(N, sizeof(*y));
	uint8_t *p = xcalloc(2 * N, 1);
	uint64_t s = 41;

	(void)state;
	for (int round = 0; round < 30; round++) {
		unsigned int bits = widths[round % 3];
		unsigned int l = levels_of(bits, 1 + round % 5, round & 4);
		/* Power-of-two scales, then arbitrary ones. */
		float a = round < 15 ? ldexpf((float)l, round - 7) :
			ldexpf(1.0f + rnd_unit(&s) / 2, round - 22);
		float sc = scale_of(a, l);
		size_t m = 0;

		for (size_t i = 0; m < N && i < 8 * N; i++) {
			int32_t k = (int32_t)rnd_below(&s, 2 * l + 1) -
				(int32_t)l;
			float v = (float)k / sc;

			if (v * sc == (float)k)
				x[m++] = v;
		}
		assert_true(m > N / 2);
		encode_w(bits, x, p, m, sc, l, rnd_next(&s), 3);
		decode_w(bits, p, y, m, sc);
		assert_memory_equal(y, x, m * sizeof(float));
	}
	free(x);
	free(y);
	free(p);
}

/*
 * Chunks encoded alone (offset = their start in the tensor) equal the
 * whole tensor's encoding; i4 chunks are packed on their own, so they are
 * compared element by element at odd starts.
 */
static void
chunked(void **state)
{
	enum { N = 3001 };
	float *x = xcalloc(N, sizeof(*x));
	uint8_t *whole = xcalloc(2 * N, 1), *part = xcalloc(2 * N, 1);
	uint64_t s = 51;

	(void)state;
	fill(x, N, 3.0f, 1, &s);
	for (int round = 0; round < 24; round++) {
		unsigned int bits = widths[round % 3];
		unsigned int l = width_max(bits);
		float sc = scale_of(3.0f, l);
		uint64_t seed = rnd_next(&s), base = rnd_below(&s, 1000);
		size_t start = 0;

		encode_w(bits, x, whole, N, sc, l, seed, base);
		while (start < N) {
			size_t len = 1 + rnd_below(&s, round < 12 ? 17 : 700);

			len = len > N - start ? N - start : len;
			memset(part, 0xcc, width_bytes(bits, len) + 1);
			encode_w(bits, x + start, part, len, sc, l, seed,
				base + start);
			/* Whole bytes where the chunk's packing lines up. */
			if (bits != 4 || (start & 1) == 0)
				assert_memory_equal(part, whole +
					width_bytes(bits, start),
					bits == 4 ? len / 2 :
					width_bytes(bits, len));
			for (size_t i = 0; i < len; i++)
				assert_int_equal(unpack1(bits, part, i),
					unpack1(bits, whole, start + i));
			if (bits == 4 && (len & 1))
				assert_int_equal(part[len / 2] >> 4, 0);
			assert_int_equal(part[width_bytes(bits, len)], 0xcc);
			start += len;
		}
	}
	free(x);
	free(whole);
	free(part);
}

/* Quantizer under test: q[0..n) unpacked to int32s. */
typedef void quantizer(unsigned int bits, const float *x, int32_t *q,
	size_t n, float scale, unsigned int levels, uint64_t seed);

/* The library's, through the packed encoding. */
static void
quant_lib(unsigned int bits, const float *x, int32_t *q, size_t n,
	float scale, unsigned int levels, uint64_t seed)
{
	uint8_t *p = xcalloc(2 * n, 1);

	encode_w(bits, x, p, n, scale, levels, seed, 0);
	for (size_t i = 0; i < n; i++)
		q[i] = unpack1(bits, p, i);
	free(p);
}

/* Deterministic round to nearest: what the unbiasedness test must catch. */
static void
quant_nearest(unsigned int bits, const float *x, int32_t *q, size_t n,
	float scale, unsigned int levels, uint64_t seed)
{
	(void)bits;
	(void)seed;
	for (size_t i = 0; i < n; i++) {
		float y = fminf(fmaxf(x[i] * scale, -(float)levels),
			(float)levels);

		q[i] = (int32_t)rintf(y);
	}
}

/*
 * Mean error of decode(encode(x)) over M seeds, per element and over
 * all. The error q - y of one draw is -f or 1 - f (f = frac(y)), so its
 * standard deviation is sqrt(f (1 - f)) <= 1/2 step: the mean of M
 * independent draws has sigma <= 0.5 / (s sqrt(M)) (per element) and
 * 0.5 / (s sqrt(nM)) (over all). Tolerance: 5 sigma (a false alarm has
 * probability 6e-7 per check; the seeds are fixed, so the test is
 * deterministic anyway), plus the deterministic part: the draw's 2^-24
 * grid and the roundings of x * s and of the quotient (2^-21 (|x| + 1/s)
 * covers them). Returns the number of checks that fail.
 */
static unsigned int
unbias_failures(quantizer *qz, unsigned int bits, const float *x, size_t n,
	float sc, unsigned int levels, unsigned int M)
{
	double *acc = xcalloc(n, sizeof(*acc));
	int32_t *q = xcalloc(n, sizeof(*q));
	float *y = xcalloc(n, sizeof(*y));
	double step = 1.0 / sc, all = 0.0, allow_max = 0.0;
	unsigned int fails = 0;

	for (unsigned int m = 0; m < M; m++) {
		qz(bits, x, q, n, sc, levels, tally_quant_seed(0x5eed, 0, m));
		tally_quant_decode_i32(q, y, n, sc);
		for (size_t i = 0; i < n; i++)
			acc[i] += (double)y[i] - (double)x[i];
	}
	for (size_t i = 0; i < n; i++) {
		double allow = ldexp(fabs(x[i]) + step, -21);
		double tol = 5.0 * 0.5 * step / sqrt(M) + allow;

		all += acc[i];
		allow_max = allow > allow_max ? allow : allow_max;
		if (fabs(acc[i] / M) > tol)
			fails++;
	}
	if (fabs(all / ((double)n * M)) >
	    5.0 * 0.5 * step / sqrt((double)n * M) + allow_max)
		fails++;
	free(acc);
	free(q);
	free(y);
	return fails;
}

/*
 * Inputs at fixed fractions of a step (0.25, 0.5, 0.75, 0.01, 0.99,
 * either sign, tiny negatives) and random ones, k steps from zero.
 */
static void
unbias_inputs(float *x, size_t n, float sc, unsigned int levels,
	uint64_t *s)
{
	static const float fr[] = {
		0.25f, 0.5f, 0.75f, 0.01f, 0.99f, 0.001f, 0.3f,
	};

	for (size_t i = 0; i < n; i++) {
		float k = (float)rnd_below(s, levels);
		float f = i % 8 == 7 ? (rnd_unit(s) + 1) / 2 :
			fr[i % 8 % ARRAY_SIZE(fr)];
		float v = (k + f) / sc;

		if (k + f > (float)levels)
			v = (k - 1 + f) / sc;
		x[i] = (i & 1) ? -v : v;
		if (i % 16 == 5)
			x[i] = -0.001f / sc;	/* y in (-1, 0) */
	}
}

/* The library's quantizers are unbiased: every width, wide and narrow. */
static void
unbiased(void **state)
{
	enum { N = 256, M = 2000 };
	float x[N];
	uint64_t s = 61;

	(void)state;
	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		for (int narrow = 0; narrow < 2; narrow++) {
			unsigned int l = levels_of(widths[w], 3, narrow);
			float sc = scale_of(0.7f, l);

			unbias_inputs(x, N, sc, l, &s);
			assert_int_equal(unbias_failures(quant_lib, widths[w],
				x, N, sc, l, M), 0);
		}
	}
}

/*
 * The same test fails for deterministic round-to-nearest on values a
 * quarter of a step above the grid (error 0.25 step, against a tolerance
 * of 0.056 step per element): the test can fail.
 */
static void
unbiased_catches_nearest(void **state)
{
	enum { N = 64, M = 2000 };
	float x[N];
	unsigned int l = levels_of(8, 1, 0);
	float sc = scale_of(1.0f, l);

	(void)state;
	for (size_t i = 0; i < N; i++)
		x[i] = ((float)(i % l) + 0.25f) / sc;
	assert_int_equal(unbias_failures(quant_nearest, 8, x, N, sc, l, M),
		N + 1);
	assert_int_equal(unbias_failures(quant_lib, 8, x, N, sc, l, M), 0);
}

/*
 * world workers (each its own data and seed) encode narrow; the sums as
 * the aggregator takes them (int32 adds, then saturation to the width,
 * which never bites: world * L fits) decode to within world steps of the
 * true sum, and to the same bits as the wide decoding of the int32 sums.
 * Wide levels: the int32 sums decode within world steps too.
 */
static void
narrow_sums(void **state)
{
	enum { N = 513, W_MAX = 64 };
	static const unsigned int worlds[] = { 1, 2, 3, 5, 7, 16, 64 };
	float *x = xcalloc((size_t)N * W_MAX, sizeof(*x));
	float *y = xcalloc(N, sizeof(*y)), *yw = xcalloc(N, sizeof(*yw));
	int32_t *sum = xcalloc(N, sizeof(*sum));
	uint8_t *p = xcalloc(2 * N, 1), *res = xcalloc(2 * N, 1);
	uint64_t s = 71;

	(void)state;
	for (size_t w = 0; w < ARRAY_SIZE(worlds); w++) {
		for (size_t b = 0; b < ARRAY_SIZE(widths); b++) {
			unsigned int bits = widths[b], world = worlds[w];
			unsigned int max = width_max(bits);

			for (int narrow = 1; narrow >= 0; narrow--) {
				unsigned int l;
				float a = 0.0f, sc;

				if (tally_quant_levels(bits, world, narrow,
				    &l) == -ERANGE) {
					assert_true(bits == 4 && world > 7);
					continue;
				}
				fill(x, (size_t)N * world, 2.5f, 0, &s);
				for (unsigned int r = 0; r < world; r++)
					a = fmaxf(a, tally_fixp_absmax(x +
						(size_t)r * N, N));
				sc = scale_of(a, l);
				memset(sum, 0, N * sizeof(*sum));
				for (unsigned int r = 0; r < world; r++) {
					encode_w(bits, x + (size_t)r * N, p, N,
						sc, l, tally_quant_seed(9, r, w),
						0);
					for (size_t i = 0; i < N; i++)
						sum[i] += unpack1(bits, p, i);
				}
				tally_quant_decode_i32(sum, yw, N, sc);
				if (narrow) {
					memset(res, 0, 2 * N);
					for (size_t i = 0; i < N; i++) {
						int32_t v = sum[i];

						assert_true(v <= (int32_t)max &&
							v >= -(int32_t)max);
						pack1(bits, res, i, v);
					}
					decode_w(bits, res, y, N, sc);
					assert_memory_equal(y, yw,
						N * sizeof(float));
				}
				for (size_t i = 0; i < N; i++) {
					double t = 0.0;

					for (unsigned int r = 0; r < world; r++)
						t += x[(size_t)r * N + i];
					assert_true(fabs(yw[i] - t) <=
						world * (1.0 / sc +
						ldexp(a, -21)));
				}
			}
		}
	}
	free(x);
	free(y);
	free(yw);
	free(sum);
	free(p);
	free(res);
}

/*
 * The CUDA kernels' work on the CPU: every group of a chunk through
 * tally_quant_enc_group() / _store_group() (in a scrambled order, as a
 * grid's threads would), then the tail through tally_quant_enc_tail(),
 * with the vector and the element-wise accesses, at even and odd offsets,
 * equals the CPU reference byte for byte; the same for decoding. Only the
 * device's typed loads and stores and its _rn intrinsics are not run here.
 */
static void
kernel_groups(void **state)
{
	enum { N = 1200 };
	static const unsigned int dbits[] = { 32, 16, 8, 4 };
	float *x = xcalloc(N, sizeof(*x));
	float *y = xcalloc(N, sizeof(*y)), *yk = xcalloc(N, sizeof(*yk));
	uint8_t *want = xcalloc(4 * N + 8, 1), *got = xcalloc(4 * N + 8, 1);
	size_t *order = xcalloc(N / TALLY_QUANT_GROUP, sizeof(*order));
	uint64_t s = 101;

	(void)state;
	for (int round = 0; round < 400; round++) {
		size_t n = rnd_below(&s, round < 40 ? 12 : N);
		unsigned int bits = widths[round % 3];
		unsigned int l = 1 + (unsigned int)rnd_below(&s,
			width_max(bits));
		float sc = scale_of(2.0f, l);
		uint64_t seed = rnd_next(&s);
		uint64_t off = rnd_next(&s) >> rnd_below(&s, 64);
		uint64_t key = tally_quant_key(seed);
		float lim = tally_quant_limit(l, width_max(bits));
		size_t groups = n / TALLY_QUANT_GROUP;
		int vec = round & 1;
		unsigned int db = dbits[rnd_below(&s, 4)];
		size_t len = db == 32 ? 4 * n : width_bytes(db, n);

		/* The groups in a random order (Fisher-Yates). */
		for (size_t i = 0; i < groups; i++)
			order[i] = i;
		for (size_t i = groups; i > 1; i--) {
			size_t j = rnd_below(&s, i), t = order[i - 1];

			order[i - 1] = order[j];
			order[j] = t;
		}
		fill(x, n, 2.0f, round % 5 == 0, &s);
		memset(want, 0xcc, 4 * N + 8);
		memset(got, 0xcc, 4 * N + 8);
		encode_w(bits, x, want, n, sc, l, seed, off);
		for (size_t i = 0; i < groups; i++) {
			int32_t r[TALLY_QUANT_GROUP];

			tally_quant_enc_group(x, order[i], vec, (int)(off & 1),
				sc, lim, key, off, r);
			tally_quant_store_group(got, order[i], bits, vec, r);
		}
		tally_quant_enc_tail(x, got, n, bits, sc, lim, key, off);
		assert_memory_equal(got, want, width_bytes(bits, n) + 1);

		/* Decode: random packed sums of a random width. */
		for (size_t i = 0; i < len; i++)
			want[i] = (uint8_t)rnd_next(&s);
		if (db == 32)
			tally_quant_decode_i32((const int32_t *)(void *)want, y,
				n, sc);
		else
			decode_w(db, want, y, n, sc);
		memset(yk, 0xee, N * sizeof(*yk));
		for (size_t i = 0; i < groups; i++)
			tally_quant_dec_group(want, yk, order[i], db, vec, sc);
		tally_quant_dec_tail(want, yk, n, db, sc);
		assert_memory_equal(yk, y, n * sizeof(float));
	}
	free(x);
	free(y);
	free(yk);
	free(want);
	free(got);
	free(order);
}

/* The same (seed, offset) gives the same bits; another seed does not. */
static void
determinism(void **state)
{
	enum { N = 1000 };
	float x[N];
	uint8_t p1[2 * N], p2[2 * N];
	uint64_t s = 81;

	(void)state;
	fill(x, N, 1.0f, 0, &s);
	for (size_t w = 0; w < ARRAY_SIZE(widths); w++) {
		unsigned int bits = widths[w], l = width_max(bits);
		size_t len = width_bytes(bits, N);
		float sc = scale_of(1.0f, l);

		encode_w(bits, x, p1, N, sc, l, 1, 10);
		encode_w(bits, x, p2, N, sc, l, 1, 10);
		assert_memory_equal(p1, p2, len);
		encode_w(bits, x, p2, N, sc, l, 2, 10);
		assert_memory_not_equal(p1, p2, len);
		encode_w(bits, x, p2, N, sc, l, 1, 12);
		assert_memory_not_equal(p1, p2, len);
	}
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * CPU throughput, one core, GB/s of f32 (input of the encoders, output of
 * the decoders), each function run for about 0.2 s on 8 Mi elements
 * (32 MiB of floats: out of the caches). Printed as TAP comments; not a
 * check.
 */
static void
throughput(void **state)
{
	enum { N = 1 << 23 };
	static const char *const names[] = {
		"encode_i16", "encode_i8", "encode_i4",
		"decode_i32", "decode_i16", "decode_i8", "decode_i4",
	};
	float *x = xcalloc(N, sizeof(*x)), *y = xcalloc(N, sizeof(*y));
	void *q = xcalloc(N, sizeof(int32_t));
	uint64_t s = 91;

	(void)state;
	fill(x, N, 1.0f, 0, &s);
	for (size_t f = 0; f < ARRAY_SIZE(names); f++) {
		double t0 = now_s(), t;
		unsigned int reps = 0;

		do {
			uint64_t seed = reps;

			switch (f) {
			case 0:
				tally_quant_encode_i16(x, q, N, 127.0f,
					32767, seed, 0);
				break;
			case 1:
				tally_quant_encode_i8(x, q, N, 127.0f,
					127, seed, 0);
				break;
			case 2:
				tally_quant_encode_i4(x, q, N, 7.0f,
					7, seed, 0);
				break;
			case 3:
				tally_quant_decode_i32(q, y, N, 127.0f);
				break;
			case 4:
				tally_quant_decode_i16(q, y, N, 1.0f);
				break;
			case 5:
				tally_quant_decode_i8(q, y, N, 1.0f);
				break;
			default:
				tally_quant_decode_i4(q, y, N, 1.0f);
				break;
			}
			reps++;
			t = now_s() - t0;
		} while (t < 0.2);
		printf("# cpu %s: %.2f GB/s of f32 (%u x %d elements, "
			"%.3f s)\n", names[f], (double)reps * N * 4 / t / 1e9,
			reps, N, t);
	}
	free(x);
	free(y);
	free(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(levels_table),
		cmocka_unit_test(scale_edges),
		cmocka_unit_test(zero_tensor),
		cmocka_unit_test(rng_known),
		cmocka_unit_test(seeds_distinct),
		cmocka_unit_test(encode_model),
		cmocka_unit_test(draw_boundary),
		cmocka_unit_test(specials),
		cmocka_unit_test(pack_known),
		cmocka_unit_test(decode_known),
		cmocka_unit_test(round_trip_bound),
		cmocka_unit_test(round_trip_grid),
		cmocka_unit_test(chunked),
		cmocka_unit_test(unbiased),
		cmocka_unit_test(unbiased_catches_nearest),
		cmocka_unit_test(narrow_sums),
		cmocka_unit_test(kernel_groups),
		cmocka_unit_test(determinism),
		cmocka_unit_test(throughput),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
