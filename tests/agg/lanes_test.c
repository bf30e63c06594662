/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lane kernels against a scalar reference written independently here,
 * for every encoding, lengths 1..300 (vector bodies and tails) and
 * payloads at every alignment.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <tally/proto.h>

#include "agg/lanes.h"

#define MAXN 300
#define K 5	/* contributions */

static uint64_t rng = 42;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

/* Element i of an encoded payload, widened. */
static int32_t
elem(const uint8_t *p, unsigned int enc, unsigned int i)
{
	int16_t s;
	int32_t w;

	switch (enc) {
	case TALLY_ENC_I32:
		memcpy(&w, p + 4 * i, 4);
		return w;
	case TALLY_ENC_I16:
		memcpy(&s, p + 2 * i, 2);
		return s;
	case TALLY_ENC_I8:
		return (int8_t)p[i];
	case TALLY_ENC_I4: {
		int v = i % 2 ? p[i / 2] >> 4 : p[i / 2] & 0xf;

		return v >= 8 ? v - 16 : v;
	}
	case TALLY_ENC_SIGN:
		return (p[i / 8] >> (i % 8)) & 1;
	}
	return 0;
}

static int32_t
clamp(int64_t v, int64_t lo, int64_t hi)
{
	return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

/* The reference result, encoded as res_enc, into out; returns bytes. */
static size_t
reference(uint8_t pay[K][MAXN * 4], unsigned int enc, unsigned int res,
	unsigned int n, uint8_t *out)
{
	memset(out, 0, MAXN * 4);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t sum = 0;
		int32_t v;

		for (int k = 0; k < K; k++)
			sum += (uint32_t)elem(pay[k], enc, i);
		v = (int32_t)sum;
		switch (res) {
		case TALLY_ENC_I32:
			memcpy(out + 4 * i, &v, 4);
			break;
		case TALLY_ENC_I16: {
			int16_t s = (int16_t)clamp(v, INT16_MIN, INT16_MAX);

			memcpy(out + 2 * i, &s, 2);
			break;
		}
		case TALLY_ENC_I8:
			out[i] = (uint8_t)clamp(v, INT8_MIN, INT8_MAX);
			break;
		case TALLY_ENC_I4:
			out[i / 2] |= (uint8_t)((clamp(v, -8, 7) & 0xf) <<
				(4 * (i % 2)));
			break;
		case TALLY_ENC_SIGN:
			out[i / 8] |= (uint8_t)((2 * v > K) << (i % 8));
			break;
		}
	}
	return tally_enc_payload_len(res, n);
}

static void
check_enc(unsigned int enc, int narrow)
{
	static uint8_t pay[K][MAXN * 4], raw[MAXN * 4 + 8], want[MAXN * 4];
	static uint32_t lanes[MAXN + 16];
	unsigned int res = tally_enc_result(enc, narrow);

	for (unsigned int n = 1; n <= MAXN; n += (n < 70 ? 1 : 23)) {
		size_t plen = tally_enc_payload_len(enc, n), len;

		for (int k = 0; k < K; k++) {
			for (size_t b = 0; b < plen; b++)
				pay[k][b] = (uint8_t)rnd();
			/* Keep the pad nibble of odd i4 counts zero. */
			if (enc == TALLY_ENC_I4 && n % 2)
				pay[k][plen - 1] &= 0x0f;
		}
		for (int k = 0; k < K; k++) {
			unsigned int align = (unsigned int)(k + n) % 4 + 1;

			memcpy(raw + align, pay[k], plen);
			if (k == 0)
				tally_lanes_init(lanes, raw + align, TALLY_OP_SUM,
					enc, n);
			else
				tally_lanes_fold(lanes, raw + align, TALLY_OP_SUM,
					enc, n);
		}
		len = tally_lanes_finish(lanes, res, n, K);
		assert_int_equal(len, reference(pay, enc, res, n, want));
		if (memcmp(lanes, want, len) != 0)
			fail_msg("%s narrow=%d n=%u differs", tally_enc_name(enc),
				narrow, n);
	}
}

static void
integer_sums(void **state)
{
	(void)state;
	for (unsigned int e = TALLY_ENC_I32; e < TALLY_ENC_MAX_; e++) {
		check_enc(e, 0);
		check_enc(e, 1);
	}
}

static void
f32_sum_and_max(void **state)
{
	static float a[MAXN], b[MAXN];
	static uint8_t raw[MAXN * 4 + 4];
	static uint32_t lanes[MAXN];
	const float *l = (const float *)lanes;

	(void)state;
	for (unsigned int n = 1; n <= MAXN; n++) {
		for (unsigned int i = 0; i < n; i++) {
			a[i] = (float)((int)(rnd() % 2001) - 1000) / 8;
			b[i] = (float)((int)(rnd() % 2001) - 1000) / 8;
		}
		tally_lanes_init(lanes, a, TALLY_OP_SUM, TALLY_ENC_F32, n);
		memcpy(raw + 3, b, n * 4);
		tally_lanes_fold(lanes, raw + 3, TALLY_OP_SUM, TALLY_ENC_F32, n);
		for (unsigned int i = 0; i < n; i++)
			assert_true(l[i] == a[i] + b[i]);
		tally_lanes_init(lanes, a, TALLY_OP_MAX, TALLY_ENC_F32, n);
		tally_lanes_fold(lanes, raw + 3, TALLY_OP_MAX, TALLY_ENC_F32, n);
		for (unsigned int i = 0; i < n; i++)
			assert_true(l[i] == (a[i] > b[i] ? a[i] : b[i]));
		assert_int_equal(tally_lanes_finish(lanes, TALLY_ENC_F32, n, 2),
			n * 4);
	}
}

static void
i32_max(void **state)
{
	static int32_t a[MAXN], b[MAXN];
	static uint8_t raw[MAXN * 4 + 4];
	static uint32_t lanes[MAXN];
	const int32_t *l = (const int32_t *)lanes;

	(void)state;
	for (unsigned int n = 1; n <= MAXN; n += 7) {
		for (unsigned int i = 0; i < n; i++) {
			a[i] = (int32_t)rnd();
			b[i] = (int32_t)rnd();
		}
		memcpy(raw + 1, a, n * 4);
		tally_lanes_init(lanes, raw + 1, TALLY_OP_MAX, TALLY_ENC_I32, n);
		tally_lanes_fold(lanes, b, TALLY_OP_MAX, TALLY_ENC_I32, n);
		for (unsigned int i = 0; i < n; i++)
			assert_int_equal(l[i], a[i] > b[i] ? a[i] : b[i]);
	}
}

/* f32 maxima follow the total order, so arrival order cannot matter. */
static void
f32_max_total_order(void **state)
{
	static const uint32_t v[] = {
		0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000,
		0xff800000, 0x7fc00000, 0xffc00000, 0x00000001, 0x80000001,
	};
	const size_t n = sizeof(v) / sizeof(v[0]);
	uint32_t lane, again;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			tally_lanes_init(&lane, &v[i], TALLY_OP_MAX,
				TALLY_ENC_F32, 1);
			tally_lanes_fold(&lane, &v[j], TALLY_OP_MAX,
				TALLY_ENC_F32, 1);
			tally_lanes_init(&again, &v[j], TALLY_OP_MAX,
				TALLY_ENC_F32, 1);
			tally_lanes_fold(&again, &v[i], TALLY_OP_MAX,
				TALLY_ENC_F32, 1);
			assert_int_equal(lane, again);
			/* The list is in no order, but each is itself. */
			assert_true(lane == v[i] || lane == v[j]);
		}
	}
	/* -0 < +0, and any finite value < +inf < +NaN. */
	tally_lanes_init(&lane, &v[1], TALLY_OP_MAX, TALLY_ENC_F32, 1);
	tally_lanes_fold(&lane, &v[0], TALLY_OP_MAX, TALLY_ENC_F32, 1);
	assert_int_equal(lane, 0x00000000);
	tally_lanes_fold(&lane, &v[4], TALLY_OP_MAX, TALLY_ENC_F32, 1);
	assert_int_equal(lane, 0x7f800000);
	tally_lanes_fold(&lane, &v[6], TALLY_OP_MAX, TALLY_ENC_F32, 1);
	assert_int_equal(lane, 0x7fc00000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(integer_sums),
		cmocka_unit_test(f32_sum_and_max),
		cmocka_unit_test(i32_max),
		cmocka_unit_test(f32_max_total_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
