/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_allreduce_enc(): every integer encoding (i32, i16, i8, i4, sign)
 * summed by the real engine behind loopagg, with wide and narrow results,
 * with loss both ways, against a reference computed here from the wire
 * rules of docs/protocol.md ("Encodings", "Result encodings"); and the
 * argument checks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/proto.h>
#include <tally/tally.h>

#include "loopagg.h"

#define JOB	5
#define TOKEN	UINT64_C(0x5555aaaa5555aaaa)
#define WORLD	3
#define ELEMS	200	/* a multiple of 8, not of 256 */
#define N	5003	/* 26 chunks, the last one short and odd */

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	unsigned int enc;
	uint8_t *src;
	uint8_t *dst;
	int rc;
	char err[256];
};

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Element i of an encoding's packed array, as a signed value (sign: 0/1). */
static int32_t
get(unsigned int enc, const uint8_t *p, size_t i)
{
	switch (enc) {
	case TALLY_ENC_I32: {
		int32_t v;

		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	case TALLY_ENC_I16: {
		int16_t v;

		memcpy(&v, p + 2 * i, 2);
		return v;
	}
	case TALLY_ENC_I8:
		return (int8_t)p[i];
	case TALLY_ENC_I4: {
		int v = (p[i / 2] >> (i % 2 ? 4 : 0)) & 0xf;

		return v >= 8 ? v - 16 : v;
	}
	default:	/* sign */
		return (p[i / 8] >> (i % 8)) & 1;
	}
}

static void
put(unsigned int enc, uint8_t *p, size_t i, int32_t v)
{
	switch (enc) {
	case TALLY_ENC_I32:
		memcpy(p + 4 * i, &v, 4);
		break;
	case TALLY_ENC_I16: {
		int16_t x = (int16_t)v;

		memcpy(p + 2 * i, &x, 2);
		break;
	}
	case TALLY_ENC_I8:
		p[i] = (uint8_t)v;
		break;
	case TALLY_ENC_I4:
		p[i / 2] = (uint8_t)((p[i / 2] & (i % 2 ? 0x0f : 0xf0)) |
			((v & 0xf) << (i % 2 ? 4 : 0)));
		break;
	default:
		p[i / 8] = (uint8_t)((p[i / 8] & ~(1u << (i % 8))) |
			((v & 1u) << (i % 8)));
		break;
	}
}

/* Rank r's input: random values of enc's full range. */
static uint8_t *
input(unsigned int enc, unsigned int r)
{
	uint8_t *p = calloc(tally_enc_payload_len(enc, N) + 8, 1);

	assert_non_null(p);
	for (size_t i = 0; i < N; i++)
		put(enc, p, i, (int32_t)mix((uint64_t)r << 32 ^ i ^
			(uint64_t)enc << 48));
	return p;
}

static int32_t
sat(int64_t v, int bits)
{
	int64_t hi = (INT64_C(1) << (bits - 1)) - 1, lo = -hi - 1;

	return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

/* What every rank should get: the sums as docs/protocol.md has them. */
static uint8_t *
reference(unsigned int enc, int narrow)
{
	unsigned int res = tally_enc_result(enc, narrow);
	uint8_t *in[WORLD], *out;

	out = calloc(tally_enc_payload_len(res, N) + 8, 1);
	assert_non_null(out);
	for (unsigned int r = 0; r < WORLD; r++)
		in[r] = input(enc, r);
	for (size_t i = 0; i < N; i++) {
		int64_t sum = 0;

		for (unsigned int r = 0; r < WORLD; r++)
			sum += get(enc, in[r], i);
		switch (res) {
		case TALLY_ENC_I32:
			/* 32-bit lanes wrap. */
			put(res, out, i, (int32_t)(uint32_t)(uint64_t)sum);
			break;
		case TALLY_ENC_I16:
			put(res, out, i, sat(sum, 16));
			break;
		case TALLY_ENC_I8:	/* narrow i8, or wide sign counts */
			put(res, out, i, enc == TALLY_ENC_SIGN ? (int32_t)sum :
				sat(sum, 8));
			break;
		case TALLY_ENC_I4:
			put(res, out, i, sat(sum, 4));
			break;
		default:	/* narrow sign: more than half voted + */
			put(res, out, i, 2 * sum > WORLD);
			break;
		}
	}
	for (unsigned int r = 0; r < WORLD; r++)
		free(in[r]);
	return out;
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx *ctx;

	k->rc = tally_ctx_open(&k->o, &ctx);
	if (k->rc != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	k->rc = tally_allreduce_enc(ctx, k->enc, k->src, k->dst, N);
	snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	tally_ctx_close(ctx);
	return NULL;
}

static void
one(unsigned int enc, int narrow, double loss)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = WORLD, .window = 16,
		.max_elems = ELEMS, .narrow = (uint8_t)narrow,
		.loss_up = loss, .loss_down = loss, .seed = 7 + enc,
	};
	unsigned int res = tally_enc_result(enc, narrow);
	size_t out_len = tally_enc_payload_len(res, N);
	struct loopagg *a = loopagg_start(&ac);
	struct rank k[WORLD];
	uint8_t *ref = reference(enc, narrow);

	assert_non_null(a);
	for (unsigned int r = 0; r < WORLD; r++) {
		k[r] = (struct rank){
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = WORLD, .window = 16, .elems = ELEMS,
				.narrow = (uint8_t)narrow, .rto_us = 500,
				.timeout_ms = 5000 },
			.enc = enc,
			.src = input(enc, r),
			.dst = calloc(out_len + 8, 1),
		};
		assert_non_null(k[r].dst);
		assert_int_equal(pthread_create(&k[r].thread, NULL, rank_main,
			&k[r]), 0);
	}
	for (unsigned int r = 0; r < WORLD; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, NULL);
	for (unsigned int r = 0; r < WORLD; r++) {
		if (k[r].rc != 0)
			fail_msg("%s %s: rank %u: %d (%s)", tally_enc_name(enc),
				narrow ? "narrow" : "wide", r, k[r].rc,
				k[r].err);
		if (memcmp(k[r].dst, ref, out_len) != 0)
			fail_msg("%s %s: rank %u differs from the reference",
				tally_enc_name(enc), narrow ? "narrow" : "wide",
				r);
		free(k[r].src);
		free(k[r].dst);
	}
	free(ref);
}

static void
every_encoding_wide(void **state)
{
	(void)state;
	one(TALLY_ENC_I32, 0, 0);
	one(TALLY_ENC_I16, 0, 0);
	one(TALLY_ENC_I8, 0, 0);
	one(TALLY_ENC_I4, 0, 0);
	one(TALLY_ENC_SIGN, 0, 0);
}

static void
every_encoding_narrow(void **state)
{
	(void)state;
	one(TALLY_ENC_I16, 1, 0);
	one(TALLY_ENC_I8, 1, 0);
	one(TALLY_ENC_I4, 1, 0);
	one(TALLY_ENC_SIGN, 1, 0);
}

static void
narrow_with_loss(void **state)
{
	(void)state;
	one(TALLY_ENC_I8, 1, 0.05);
	one(TALLY_ENC_I4, 0, 0.05);
	one(TALLY_ENC_SIGN, 1, 0.05);
}

static void
bad_calls(void **state)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = 1, .window = 4,
		.max_elems = 256, .seed = 1,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .job = JOB,
		.token = TOKEN, .world = 1, .window = 4, .elems = 100 };
	struct tally_ctx *ctx;
	uint8_t buf[64] = { 0 };
	int32_t sums[16];

	(void)state;
	assert_non_null(a);
	o.dp_port = loopagg_port(a);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	assert_int_equal(tally_allreduce_enc(NULL, TALLY_ENC_I8, buf, buf, 4),
		-EINVAL);
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_F32, buf, buf, 4),
		-EINVAL);
	assert_int_equal(tally_allreduce_enc(ctx, 99, buf, buf, 4), -EINVAL);
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_I8, buf, NULL, 4),
		-EINVAL);
	/* elems 100 is not a multiple of 8: no i4 or sign. */
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_I4, buf, buf, 4),
		-EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "multiple of 8"));
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_SIGN, buf, buf, 4),
		-EINVAL);
	/* None of those broke the context: a real call still works. */
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_I8, buf, sums, 16),
		0);
	assert_int_equal(tally_allreduce_enc(ctx, TALLY_ENC_I8, buf, buf, 0),
		0);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_encoding_wide),
		cmocka_unit_test(every_encoding_narrow),
		cmocka_unit_test(narrow_with_loss),
		cmocka_unit_test(bad_calls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
