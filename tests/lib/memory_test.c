/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Codecs with memory (error feedback, 2-bit, DGC momentum, PowerSGD)
 * through tally_allreduce() and tally_allreduce_state() against the real
 * engine behind loopagg: over several calls with new gradients each
 * time, every rank's result equals bit for bit the CPU reference
 * (tests/bench/codec_ref.c), which carries every rank's memory from call
 * to call as libtally should; with loss as well. And the state API's
 * refusals, a refused scale round that keeps the gradient in the
 * residual, tally_allreduce()'s own memory starting afresh for a new
 * tensor length, and tally_allreduce_mean() giving the bits of reducing
 * x * (1/world). A powersgd state of its own shape
 * (tally_state_new_rows()) gives the bits of a job whose rows key is
 * that shape, and bad shapes are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/codec.h>
#include <tally/tally.h>

#include "../bench/codec_ref.h"
#include "loopagg.h"

#define JOB	9
#define TOKEN	UINT64_C(0x9999000099990000)
#define WORLD	3
#define N	(256 * 37 + 24)	/* a short last block; a multiple of 8 */
#define CALLS	4

/* What the generator draws from: the call, and which rank has an inf. */
struct gen_arg {
	unsigned int call;
	int inf_rank;		/* -1: none */
};

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	const char *spec;
	unsigned int r;
	int use_state;		/* tally_allreduce_state(), else the ctx's */
	uint32_t rows;		/* the state's rows (tally_state_new_rows) */
	float *out[CALLS];	/* each call's result */
	int rc[CALLS];
	char err[256];
	struct gen_arg *ga;	/* [CALLS], shared */
	const size_t *lens;	/* [CALLS] elements of each call */
};

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Rank r's gradient at a call: noise of mixed magnitudes, larger in
 * some blocks (which depends on the rank and the call), low-rank
 * structure for PowerSGD (a smooth function of the row and column), and
 * an infinity in the rank named by inf_rank.
 */
static void
gen(const void *arg, unsigned int r, size_t i0, size_t len, float *out)
{
	const struct gen_arg *g = arg;

	for (size_t i = 0; i < len; i++) {
		size_t k = i0 + i, b = k / 256;
		uint64_t h = mix((uint64_t)r << 48 ^ (uint64_t)g->call << 40 ^
			k);
		float x = ((float)(h & 0xffff) / 65536.0f - 0.5f) * 1e-2f;

		x += 0.25f * sinf((float)(k % 97) * 0.1f + (float)r) *
			cosf((float)(k / 97) * 0.05f);
		if ((b * 5 + r * 3 + g->call) % 13 == 0)
			x *= 50.0f;
		out[i] = x;
	}
	if ((int)r == g->inf_rank && i0 <= 100 && 100 < i0 + len)
		out[100 - i0] = INFINITY;
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_state *st = NULL;
	struct tally_ctx *ctx;
	unsigned int c;

	for (c = 0; c < CALLS; c++)
		k->rc[c] = -ECANCELED;
	if (tally_ctx_open(&k->o, &ctx) != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	if (k->use_state && tally_state_new_rows(ctx, N, k->rows, &st) != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
		goto out;
	}
	for (c = 0; c < CALLS; c++) {
		gen(&k->ga[c], k->r, 0, k->lens[c], k->out[c]);
		k->rc[c] = k->use_state ?
			tally_allreduce_state(ctx, st, k->out[c], k->lens[c]) :
			tally_allreduce(ctx, k->out[c], k->lens[c]);
		if (k->rc[c] != 0 && k->rc[c] != -ERANGE) {
			snprintf(k->err, sizeof(k->err), "call %u: %s", c,
				tally_ctx_error(ctx));
			break;
		}
	}
out:
	tally_state_free(st);
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * Runs CALLS allreduces of spec on WORLD ranks (narrow or wide sums,
 * loss both ways, an infinity in one rank at call inf_call, if any; of
 * lens[c] elements, or N when lens is NULL) and checks every rank's
 * every result against the reference. A call of another length than the
 * one before starts the reference's memory afresh, as tally_allreduce()
 * must.
 */
static void
run_shape(const char *spec, const char *ref_spec, uint32_t rows, int narrow,
	double loss, int use_state, int inf_call, const size_t *lens)
{
	static const size_t all_n[CALLS] = { N, N, N, N };
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = WORLD, .window = 8,
		.max_elems = 256, .narrow = narrow, .loss_up = loss,
		.loss_down = loss, .dup = loss, .seed = 5,
	};
	struct gen_arg ga[CALLS];
	struct bench_codec_ref cr = { .world = WORLD, .narrow = narrow,
		.gen = gen };
	struct loopagg *a = loopagg_start(&ac);
	float *ref = malloc(N * sizeof(float));
	struct rank k[WORLD];
	unsigned int r, c;

	assert_non_null(a);
	assert_non_null(ref);
	assert_int_equal(tally_codec_parse(ref_spec, &cr.codec, NULL, 0), 0);
	assert_true(tally_codec_has_memory(&cr.codec));
	cr.seed = cr.codec.seed;
	if (lens == NULL)
		lens = all_n;
	cr.n = lens[0];
	for (c = 0; c < CALLS; c++)
		ga[c] = (struct gen_arg){ .call = c,
			.inf_rank = (int)c == inf_call ? 1 : -1 };
	for (r = 0; r < WORLD; r++) {
		k[r] = (struct rank){
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = WORLD, .window = 8, .elems = 256,
				.rto_us = 500, .timeout_ms = 5000,
				.narrow = (uint8_t)narrow, .codec = spec },
			.r = r, .use_state = use_state, .rows = rows,
			.ga = ga, .lens = lens,
		};
		for (c = 0; c < CALLS; c++) {
			k[r].out[c] = malloc(N * sizeof(float));
			assert_non_null(k[r].out[c]);
		}
		assert_int_equal(pthread_create(&k[r].thread, NULL, rank_main,
			&k[r]), 0);
	}
	for (r = 0; r < WORLD; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, NULL);
	for (c = 0; c < CALLS; c++) {
		int want;

		if (lens[c] != cr.n) {
			bench_codec_ref_reset(&cr);
			cr.n = lens[c];
		}
		cr.call = c;
		cr.arg = &ga[c];
		want = bench_codec_reference(&cr, ref);
		if (want != 0 && want != -ERANGE)
			fail_msg("%s: reference of call %u: %d", spec, c, want);
		for (r = 0; r < WORLD; r++) {
			if (k[r].rc[c] != want)
				fail_msg("%s: rank %u, call %u: %d, want %d "
					"(%s)", spec, r, c, k[r].rc[c], want,
					k[r].err);
			if (want == 0 && memcmp(k[r].out[c], ref,
					lens[c] * sizeof(float)) != 0)
				fail_msg("%s: rank %u, call %u differs from "
					"the reference", spec, r, c);
		}
	}
	bench_codec_ref_reset(&cr);
	for (r = 0; r < WORLD; r++)
		for (c = 0; c < CALLS; c++)
			free(k[r].out[c]);
	free(ref);
}

/*
 * run_shape() of a job's spec, checked against the same spec's
 * reference, states (use_state) of the job's shape.
 */
static void
run_lens(const char *spec, int narrow, double loss, int use_state,
	int inf_call, const size_t *lens)
{
	run_shape(spec, spec, 0, narrow, loss, use_state, inf_call, lens);
}

static void
run(const char *spec, int narrow, double loss, int use_state, int inf_call)
{
	run_lens(spec, narrow, loss, use_state, inf_call, NULL);
}

static void
ef_quant(void **state)
{
	(void)state;
	run("q8,ef=1,seed=4", 0, 0, 0, -1);
	run("q4,ef=1", 1, 0, 1, -1);
	run("q16,ef=1", 0, 0.05, 1, -1);
}

static void
ef_votes(void **state)
{
	(void)state;
	run("ternary,ef=1,seed=8", 0, 0, 0, -1);
	run("sign,ef=1", 0, 0, 1, -1);
	run("sign,ef=1", 1, 0.05, 0, -1);
}

static void
twobit(void **state)
{
	(void)state;
	run("2bit,threshold=0.0625", 0, 0, 0, -1);
	run("2bit,threshold=0.01", 1, 0.05, 1, -1);
}

static void
ef_randk_sparse(void **state)
{
	(void)state;
	run("randk,density=0.1,ef=1,seed=2", 0, 0, 0, -1);
	run("sparse,density=0.1,est=topk,ef=1", 0, 0.05, 1, -1);
}

static void
dgc_momentum(void **state)
{
	(void)state;
	run("sparse,density=0.05,est=topk,momentum=0.9", 0, 0, 0, -1);
	run("sparse,density=0.1,est=sidco-gpd,momentum=0.5", 0, 0.05, 1, -1);
}

static void
powersgd(void **state)
{
	(void)state;
	run("powersgd", 0, 0, 0, -1);
	run("powersgd,rank=1,seed=3,ef=0", 0, 0, 1, -1);
	run("powersgd,rank=8,rows=64", 0, 0.05, 1, -1);
}

/* An infinity at call 1: every rank gets -ERANGE, keeps its gradient. */
static void
erange_keeps(void **state)
{
	(void)state;
	run("q8,ef=1", 0, 0, 1, 1);
	run("ternary,ef=1", 0, 0, 0, 1);
	run("randk,density=0.2,ef=1", 0, 0, 1, 1);
	run("sparse,density=0.1,est=topk,ef=1", 0, 0, 1, 1);
	run("powersgd,rank=2", 0, 0, 1, 1);
}

/*
 * A powersgd state of its own shape (tally_state_new_rows()) on a job
 * of the default near-square shape gives, call after call, the bits of
 * a job whose rows key is that shape: rows dividing N (8 x 1187) and
 * not (37 x 257, the last row short); with loss too.
 */
static void
powersgd_state_rows(void **state)
{
	(void)state;
	run_shape("powersgd,rank=2", "powersgd,rank=2,rows=8", 8, 0, 0, 1,
		-1, NULL);
	run_shape("powersgd,rank=2", "powersgd,rank=2,rows=37", 37, 0, 0.05,
		1, -1, NULL);
	/* A state's rows win over the job's rows key. */
	run_shape("powersgd,rank=4,rows=64", "powersgd,rank=4,rows=8", 8, 0,
		0, 1, 2, NULL);
}

/* The state API's refusals, on a context that needs no dataplane. */
static void
state_api(void **state)
{
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .dp_port = 9,
		.world = 2, .codec = "q8,ef=1", .timeout_ms = 100 };
	struct tally_ctx *ctx, *other;
	struct tally_state *st, *st2;
	float buf[16] = { 0 };

	(void)state;
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	o.codec = "q8";
	assert_int_equal(tally_ctx_open(&o, &other), 0);
	assert_int_equal(tally_state_new(NULL, 16, &st), -EINVAL);
	assert_int_equal(tally_state_new(ctx, 16, NULL), -EINVAL);
	assert_int_equal(tally_state_new(ctx, 0, &st), -EINVAL);
	assert_null(st);
	assert_int_equal(tally_state_new(ctx, 16, &st), 0);
	assert_int_equal(tally_allreduce_state(NULL, st, buf, 16), -EINVAL);
	assert_int_equal(tally_allreduce_state(ctx, NULL, buf, 16), -EINVAL);
	assert_int_equal(tally_allreduce_state(ctx, st, buf, 15), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "16 elements"));
	assert_int_equal(tally_allreduce_state(other, st, buf, 16), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(other), "another codec"));
	/* A codec without memory: the state is accepted and holds nothing. */
	assert_int_equal(tally_state_new(other, 16, &st2), 0);
	tally_state_free(st2);
	/* powersgd: more rows than elements. */
	tally_ctx_close(other);
	o.codec = "powersgd,rows=17";
	assert_int_equal(tally_ctx_open(&o, &other), 0);
	assert_int_equal(tally_state_new(other, 16, &st2), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(other), "rows"));
	/* A state's own rows: a shape that fits wins over the key's. */
	assert_int_equal(tally_state_new_rows(other, 16, 4, &st2), 0);
	tally_state_free(st2);
	assert_int_equal(tally_state_new_rows(other, 16, 16, &st2), 0);
	tally_state_free(st2);
	assert_int_equal(tally_state_new_rows(other, 16, 17, &st2), -EINVAL);
	assert_null(st2);
	assert_non_null(strstr(tally_ctx_error(other), "rows 17: more than "
		"the tensor's 16 elements"));
	assert_int_equal(tally_state_new_rows(other, 0, 1, &st2), -EINVAL);
	assert_int_equal(tally_state_new_rows(NULL, 16, 4, &st2), -EINVAL);
	assert_int_equal(tally_state_new_rows(other, 16, 4, NULL), -EINVAL);
	/* rows 0: the job's key (17 here, too many again). */
	assert_int_equal(tally_state_new_rows(other, 16, 0, &st2), -EINVAL);
	/* A codec without a matrix refuses a shape, accepts none. */
	assert_int_equal(tally_state_new_rows(ctx, 16, 4, &st2), -EINVAL);
	assert_null(st2);
	assert_non_null(strstr(tally_ctx_error(ctx), "powersgd"));
	assert_int_equal(tally_state_new_rows(ctx, 16, 0, &st2), 0);
	tally_state_free(st2);
	tally_state_free(NULL);
	tally_state_free(st);
	tally_ctx_close(other);
	tally_ctx_close(ctx);
}

/*
 * tally_allreduce()'s own memory follows its tensor: after a call with
 * another length, the memory starts afresh (the reference's too).
 */
static void
own_memory_new_length(void **state)
{
	static const size_t lens[CALLS] = { N, N / 2, N / 2, N };

	(void)state;
	run_lens("q8,ef=1", 0, 0, 0, -1, lens);
	run_lens("powersgd,rank=2", 0, 0, 0, -1, lens);
}

/* One rank of mean_bits(): a mean, then the sum of the products. */
struct mean_rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	unsigned int r;
	float *a, *b;
	int rc[2];
};

static void *
mean_main(void *arg)
{
	struct mean_rank *k = arg;
	struct gen_arg ga = { .call = 0, .inf_rank = -1 };
	float inv = 1.0f / (float)k->o.world;
	struct tally_ctx *ctx;

	k->rc[0] = k->rc[1] = -ECANCELED;
	if (tally_ctx_open(&k->o, &ctx) != 0)
		return NULL;
	gen(&ga, k->r, 0, N, k->a);
	for (size_t i = 0; i < N; i++)
		k->b[i] = k->a[i] * inv;
	k->rc[0] = tally_allreduce_mean(ctx, NULL, k->a, N);
	k->rc[1] = tally_allreduce(ctx, k->b, N);
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * tally_allreduce_mean() with fixp on world ranks: every rank's result
 * has the bits of tally_allreduce() of x * (1.0f / world), whether the
 * division is folded into the decoding (a power of two) or not.
 */
static void
mean_bits_world(unsigned int world)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = world, .window = 8,
		.max_elems = 256, .seed = 5,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct mean_rank k[4];
	unsigned int r;

	assert_non_null(a);
	for (r = 0; r < world; r++) {
		k[r] = (struct mean_rank){
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = (uint8_t)world, .window = 8,
				.elems = 256, .timeout_ms = 5000 },
			.r = r, .a = malloc(N * sizeof(float)),
			.b = malloc(N * sizeof(float)),
		};
		assert_non_null(k[r].a);
		assert_non_null(k[r].b);
		assert_int_equal(pthread_create(&k[r].thread, NULL, mean_main,
			&k[r]), 0);
	}
	for (r = 0; r < world; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, NULL);
	for (r = 0; r < world; r++) {
		assert_int_equal(k[r].rc[0], 0);
		assert_int_equal(k[r].rc[1], 0);
		assert_memory_equal(k[r].a, k[r].b, N * sizeof(float));
		assert_memory_equal(k[r].a, k[0].a, N * sizeof(float));
	}
	for (r = 0; r < world; r++) {
		free(k[r].a);
		free(k[r].b);
	}
}

static void
mean_bits(void **state)
{
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .dp_port = 9,
		.world = 2, .codec = "q8,ef=1", .timeout_ms = 100 };
	struct tally_ctx *ctx;
	struct tally_state *st;
	float buf[16] = { 0 };

	(void)state;
	mean_bits_world(4);
	mean_bits_world(3);
	/* Refusals before anything is sent. */
	assert_int_equal(tally_allreduce_mean(NULL, NULL, buf, 16), -EINVAL);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	assert_int_equal(tally_state_new(ctx, 16, &st), 0);
	assert_int_equal(tally_allreduce_mean(ctx, st, buf, 15), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "16 elements"));
	assert_int_equal(tally_allreduce_mean(ctx, st, buf, 0), -EINVAL);
	tally_state_free(st);
	tally_ctx_close(ctx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ef_quant),
		cmocka_unit_test(ef_votes),
		cmocka_unit_test(twobit),
		cmocka_unit_test(ef_randk_sparse),
		cmocka_unit_test(dgc_momentum),
		cmocka_unit_test(powersgd),
		cmocka_unit_test(erange_keeps),
		cmocka_unit_test(powersgd_state_rows),
		cmocka_unit_test(state_api),
		cmocka_unit_test(own_memory_new_length),
		cmocka_unit_test(mean_bits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
