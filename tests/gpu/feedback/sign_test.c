/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of sign votes with a majority: the bytes of small inputs
 * (zeros, NaN, infinities), the zero tail, chunks of 8k elements, and the
 * decoding of wide counts and narrow majority bits for odd and even
 * worlds, ties included, against worlds of simulated workers.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <tally/feedback.h>

#include "fb_test.h"

#define N	1029

static void
by_hand(void **state)
{
	const float x[9] = {
		1.0f, -1.0f, 0.0f, -0.0f, NAN, -INFINITY, INFINITY,
		-0x1p-149f, 2.0f,
	};
	uint8_t b[2] = { 0xff, 0xff };

	(void)state;
	tally_sign_encode(x, b, 9);
	/* + - + + + - + -, then + */
	assert_int_equal(b[0], 0x5d);
	assert_int_equal(b[1], 0x01);
	tally_sign_encode(x, b, 0);
	assert_int_equal(b[0], 0x5d);
}

/* Bits by the rule, zero tail, chunks of 8, 16, ... elements. */
static void
bits_and_chunks(void **state)
{
	float *x = malloc(N * sizeof(float));
	uint8_t *b = malloc((N + 7) / 8), *bc = malloc((N + 7) / 8);
	uint64_t seed = 14;

	(void)state;
	assert_non_null(x);
	assert_non_null(b);
	assert_non_null(bc);
	for (size_t n = 1; n <= N; n += (n < 40 ? 1 : 101)) {
		size_t at = 0;

		for (size_t i = 0; i < n; i++)
			x[i] = rnd_any(&seed, 1);
		tally_sign_encode(x, b, n);
		for (size_t i = 0; i < n; i++)
			assert_int_equal((b[i / 8] >> (i % 8)) & 1, !(x[i] < 0));
		if (n % 8 != 0)
			assert_int_equal(b[n / 8] >> (n % 8), 0);
		memset(bc, 0xa5, (n + 7) / 8);
		for (size_t len = 8; at < n; len += 8) {
			size_t l = n - at < len ? n - at : len;

			tally_sign_encode(x + at, bc + at / 8, l);
			at += l;
		}
		assert_memory_equal(bc, b, (n + 7) / 8);
	}
	free(x);
	free(b);
	free(bc);
}

/* World 4: counts 0 .. 4 decode to -s -s 0 s s; narrow bits to +-s. */
static void
decode_known(void **state)
{
	static const int8_t c[5] = { 0, 1, 2, 3, 4 };
	static const float want[5] = { -0.5f, -0.5f, 0.0f, 0.5f, 0.5f };
	const uint8_t bits[1] = { 0x18 };
	static const float want_b[5] = { -0.5f, -0.5f, -0.5f, 0.5f, 0.5f };
	float x[5];

	(void)state;
	tally_sign_decode_votes(c, x, 5, 4, 0.5f);
	assert_memory_equal(x, want, sizeof(x));
	tally_sign_decode_votes(c, x, 5, 5, 0.5f);
	assert_true(x[2] == -0.5f && x[3] == 0.5f);
	tally_sign_decode_bits(bits, x, 5, 0.5f);
	assert_memory_equal(x, want_b, sizeof(x));
}

/*
 * Worlds 1 .. 64 of workers with random data: the aggregator's wide count
 * and narrow bit per element (as docs/protocol.md defines them), decoded,
 * against sign(2c - world) (0 on a tie) and the bit; even worlds are
 * made to tie on some elements.
 */
static void
majority(void **state)
{
	enum { n = 203 };
	float x[n], xw[n], xn[n];
	uint8_t b[(n + 7) / 8], nb[(n + 7) / 8];
	int8_t cnt[n];
	uint64_t seed = 15;

	(void)state;
	for (unsigned int world = 1; world <= 64; world++) {
		size_t ties = 0;

		memset(cnt, 0, sizeof(cnt));
		for (unsigned int w = 0; w < world; w++) {
			for (size_t i = 0; i < n; i++) {
				x[i] = rnd_unit(&seed);
				/* Element i % 3 == 0: half the workers +. */
				if (i % 3 == 0)
					x[i] = (w % 2) ? -1.0f : 1.0f;
			}
			tally_sign_encode(x, b, n);
			for (size_t i = 0; i < n; i++)
				cnt[i] += (b[i / 8] >> (i % 8)) & 1;
		}
		memset(nb, 0, sizeof(nb));
		for (size_t i = 0; i < n; i++)
			if (2 * cnt[i] > (int)world)
				nb[i / 8] |= (uint8_t)(1u << (i % 8));
		tally_sign_decode_votes(cnt, xw, n, world, 2.0f);
		tally_sign_decode_bits(nb, xn, n, 2.0f);
		for (size_t i = 0; i < n; i++) {
			int d = 2 * cnt[i] - (int)world;

			assert_true(xw[i] == (d > 0 ? 2.0f : d < 0 ? -2.0f :
				0.0f));
			assert_true(xn[i] == (d > 0 ? 2.0f : -2.0f));
			ties += d == 0;
		}
		/* Odd worlds never tie; even ones do where half voted +. */
		if (world % 2)
			assert_int_equal(ties, 0);
		else
			assert_true(ties >= (n + 2) / 3);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(by_hand),
		cmocka_unit_test(bits_and_chunks),
		cmocka_unit_test(decode_known),
		cmocka_unit_test(majority),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
