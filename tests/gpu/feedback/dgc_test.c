/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU tests of DGC momentum correction and momentum factor masking: a
 * short sequence computed by hand, the element math against a model in
 * double precision, masks (bits, counts, chunks), and conservation over
 * many steps: what entered the velocity equals what was sent plus what
 * remains, exactly.
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

#define N	1031

/* One step: accumulate, select, take. Returns the count selected. */
static size_t
step(float *u, float *v, float *sent, uint8_t *mask, const float *g,
	size_t n, float m, float thr)
{
	size_t c;

	tally_dgc_accumulate(u, v, g, n, m);
	c = tally_dgc_select(v, mask, n, thr);
	tally_dgc_take(v, u, sent, mask, n);
	return c;
}

/* Three steps of four elements, momentum 0.5, threshold 1, by hand. */
static void
by_hand(void **state)
{
	static const float g[3][4] = {
		{ 0.5f, -1.5f, 0.25f, 2.0f },
		{ 0.5f, 0.5f, -0.5f, -0.25f },
		{ 0.0f, 0.75f, 0.0f, -1.0f },
	};
	static const float want_sent[3][4] = {
		{ 0.0f, -1.5f, 0.0f, 2.0f },
		{ 1.25f, 0.0f, 0.0f, 0.0f },
		{ 0.0f, 1.5f, 0.0f, -1.375f },
	};
	static const float want_v[3][4] = {
		{ 0.5f, 0.0f, 0.25f, 0.0f },
		{ 0.0f, 0.5f, -0.125f, -0.25f },
		{ 0.0f, 0.0f, -0.3125f, 0.0f },
	};
	static const float want_u[3][4] = {
		{ 0.5f, 0.0f, 0.25f, 0.0f },
		{ 0.0f, 0.5f, -0.375f, -0.25f },
		{ 0.0f, 0.0f, -0.1875f, 0.0f },
	};
	static const uint8_t want_mask[3] = { 0x0a, 0x01, 0x0a };
	static const size_t want_cnt[3] = { 2, 1, 2 };
	float u[4] = { 0 }, v[4] = { 0 }, sent[4];
	uint8_t mask;

	(void)state;
	for (int t = 0; t < 3; t++) {
		assert_int_equal(step(u, v, sent, &mask, g[t], 4, 0.5f, 1.0f),
			want_cnt[t]);
		assert_int_equal(mask, want_mask[t]);
		assert_memory_equal(sent, want_sent[t], sizeof(sent));
		assert_memory_equal(v, want_v[t], sizeof(v));
		assert_memory_equal(u, want_u[t], sizeof(u));
	}
}

/* accumulate against the model: fl(fl(m u) + g), then fl(v + u). */
static void
accumulate_model(void **state)
{
	float *u = malloc(N * sizeof(float)), *v = malloc(N * sizeof(float));
	float *g = malloc(N * sizeof(float)), *u0 = malloc(N * sizeof(float));
	float *v0 = malloc(N * sizeof(float));
	static const float ms[] = { 0.0f, 0.5f, 0.9f, 0.99f, 1.0f };
	uint64_t seed = 5;

	(void)state;
	assert_non_null(u);
	assert_non_null(v);
	assert_non_null(g);
	assert_non_null(u0);
	assert_non_null(v0);
	for (size_t k = 0; k < sizeof(ms) / sizeof(ms[0]); k++) {
		for (size_t i = 0; i < N; i++) {
			u0[i] = u[i] = rnd_any(&seed, 1);
			v0[i] = v[i] = rnd_any(&seed, 1);
			g[i] = (i % 3) ? rnd_any(&seed, 1) : rnd_unit(&seed);
		}
		tally_dgc_accumulate(u, v, g, N, ms[k]);
		for (size_t i = 0; i < N; i++) {
			float mu = (float)((double)ms[k] * u0[i]);
			float wu = (float)((double)mu + g[i]);
			float wv = (float)((double)v0[i] + wu);

			wu = wu != wu ? from_bits(0x7fffffffu) : wu;
			wv = wv != wv ? from_bits(0x7fffffffu) : wv;
			assert_int_equal(to_bits(u[i]), to_bits(wu));
			assert_int_equal(to_bits(v[i]), to_bits(wv));
		}
	}
	free(u);
	free(v);
	free(g);
	free(u0);
	free(v0);
}

/* Masks: bits by the rule, counts, zero tail, chunks of 8k elements. */
static void
select_mask(void **state)
{
	float *v = malloc(N * sizeof(float));
	uint8_t *m = malloc((N + 7) / 8), *mc = malloc((N + 7) / 8);
	uint64_t seed = 6;

	(void)state;
	assert_non_null(v);
	assert_non_null(m);
	assert_non_null(mc);
	for (size_t n = 1; n <= N; n += (n < 40 ? 1 : 97)) {
		float thr = (float)(n % 5) / 4;
		size_t cnt = 0, at = 0;

		for (size_t i = 0; i < n; i++)
			v[i] = (i % 7 == 3) ? rnd_any(&seed, 1) : rnd_unit(&seed);
		for (size_t i = 0; i < n; i++)
			cnt += fabsf(v[i]) >= thr;
		assert_int_equal(tally_dgc_select(v, m, n, thr), cnt);
		for (size_t i = 0; i < n; i++)
			assert_int_equal((m[i / 8] >> (i % 8)) & 1,
				fabsf(v[i]) >= thr);
		if (n % 8 != 0)
			assert_int_equal(m[n / 8] >> (n % 8), 0);
		/* Chunks of 8, 16, 24, ... elements give the same bytes. */
		memset(mc, 0xa5, (n + 7) / 8);
		for (size_t len = 8; at < n; len += 8) {
			size_t l = n - at < len ? n - at : len;

			cnt -= tally_dgc_select(v + at, mc + at / 8, l, thr);
			at += l;
		}
		assert_int_equal(cnt, 0);
		assert_memory_equal(mc, m, (n + 7) / 8);
	}
	free(v);
	free(m);
	free(mc);
}

/* NaN is never selected; a NaN threshold selects nothing; 0 takes all. */
static void
select_specials(void **state)
{
	const float v[5] = { NAN, INFINITY, -0.0f, -2.0f, 0x1p-149f };
	uint8_t m;

	(void)state;
	assert_int_equal(tally_dgc_select(v, &m, 5, 1.0f), 2);
	assert_int_equal(m, 0x0a);
	assert_int_equal(tally_dgc_select(v, &m, 5, NAN), 0);
	assert_int_equal(m, 0);
	assert_int_equal(tally_dgc_select(v, &m, 5, 0.0f), 4);
	assert_int_equal(m, 0x1e);
	assert_int_equal(tally_dgc_select(v, &m, 5, INFINITY), 1);
	assert_int_equal(m, 0x02);
}

/* take: exactly what the mask says, bits unchanged (NaN payloads too). */
static void
take_mask(void **state)
{
	float *v = malloc(N * sizeof(float)), *u = malloc(N * sizeof(float));
	float *v0 = malloc(N * sizeof(float)), *u0 = malloc(N * sizeof(float));
	float *s = malloc(N * sizeof(float));
	uint8_t *m = malloc((N + 7) / 8);
	uint64_t seed = 7;

	(void)state;
	assert_non_null(v);
	assert_non_null(u);
	assert_non_null(v0);
	assert_non_null(u0);
	assert_non_null(s);
	assert_non_null(m);
	for (size_t i = 0; i < N; i++) {
		v0[i] = v[i] = rnd_any(&seed, 1);
		u0[i] = u[i] = rnd_any(&seed, 1);
	}
	for (size_t b = 0; b < (N + 7) / 8; b++)
		m[b] = (uint8_t)rnd_next(&seed);
	tally_dgc_take(v, u, s, m, N);
	for (size_t i = 0; i < N; i++) {
		int sel = (m[i / 8] >> (i % 8)) & 1;

		assert_int_equal(to_bits(s[i]), sel ? to_bits(v0[i]) : 0);
		assert_int_equal(to_bits(v[i]), sel ? 0 : to_bits(v0[i]));
		assert_int_equal(to_bits(u[i]), sel ? 0 : to_bits(u0[i]));
	}
	free(v);
	free(u);
	free(v0);
	free(u0);
	free(s);
	free(m);
}

/*
 * 64 steps of random gradients on a grid of 2^-4 in [-2, 2), momentum
 * 0.5, the velocity cleared every 8 steps by a threshold of 0: all the
 * values stay within 24 significant bits, so the float steps are exact
 * and, per element, the sum of the u that entered v equals the sum of
 * what was sent plus the v that remains, exactly (checked in double).
 */
static void
conservation(void **state)
{
	float *u = calloc(N, sizeof(float)), *v = calloc(N, sizeof(float));
	float *g = malloc(N * sizeof(float)), *s = malloc(N * sizeof(float));
	double *in = calloc(N, sizeof(double)), *out = calloc(N, sizeof(double));
	uint8_t *m = malloc((N + 7) / 8);
	uint64_t seed = 8;
	size_t sent_total = 0;

	(void)state;
	assert_non_null(u);
	assert_non_null(v);
	assert_non_null(g);
	assert_non_null(s);
	assert_non_null(in);
	assert_non_null(out);
	assert_non_null(m);
	for (int t = 0; t < 64; t++) {
		float thr = (t % 8 == 7) ? 0.0f : 1.5f;

		for (size_t i = 0; i < N; i++)
			g[i] = (float)((int)(rnd_next(&seed) % 64) - 32) / 16;
		tally_dgc_accumulate(u, v, g, N, 0.5f);
		for (size_t i = 0; i < N; i++)
			in[i] += u[i];
		sent_total += tally_dgc_select(v, m, N, thr);
		tally_dgc_take(v, u, s, m, N);
		for (size_t i = 0; i < N; i++)
			out[i] += s[i];
	}
	assert_true(sent_total > N * 8);
	for (size_t i = 0; i < N; i++)
		assert_true(in[i] == out[i] + v[i]);
	free(u);
	free(v);
	free(g);
	free(s);
	free(in);
	free(out);
	free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(by_hand),
		cmocka_unit_test(accumulate_model),
		cmocka_unit_test(select_mask),
		cmocka_unit_test(select_specials),
		cmocka_unit_test(take_mask),
		cmocka_unit_test(conservation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
