/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_allreduce_typed() of bf16 and f16 against the real engine
 * (loopagg: tally_agg_process() behind UDP sockets on 127.0.0.1), one
 * thread and one context per rank, worlds 1, 2, 4 and 7, sizes 0, 1,
 * 257, a prime and 64 MiB, 32-bit and 16-bit lanes, wide and narrow
 * jobs, with and without loss. Every rank's result must be, bit for
 * bit, the reference computed here with no code of the library: the
 * global max |x| and the exponent from it (<tally/fixp16.h>'s rule),
 * each rank's elements scaled and rounded to integers in double, the
 * integers summed, and the sum times 2^-e rounded once to the type by
 * a search over a table of all its finite values. An infinity gives
 * -ERANGE on every rank and leaves the contexts usable; f32 and i32 go
 * the ways of tally_allreduce_f32() and _i32(); bad arguments are
 * refused.
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

#include <tally/tally.h>

#include "loopagg.h"

#define JOB	11
#define TOKEN	UINT64_C(0x1616161616161616)
#define WMAX	7
#define MAXSTEP	8
#define BIG	(32u << 20)	/* 64 MiB of 16-bit elements */

struct table {
	double v[0x7f80];
	unsigned int n;
	uint16_t inf;
};

static struct table tabs[2];	/* bf16, f16 */

struct rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	enum tally_dtype dt;
	unsigned int lanes;		/* tally_ctx_set_lanes() */
	const size_t *sizes;
	unsigned int nsteps;
	uint16_t *buf[MAXSTEP];
	int rc[MAXSTEP];
	char err[256];
	struct tally_ctx_stats st;
	unsigned int used_lanes;
};

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
value(int f16, uint16_t h)
{
	int mb = f16 ? 10 : 7, eb = f16 ? 5 : 8, bias = (1 << (eb - 1)) - 1;
	unsigned int ex = (h >> mb) & ((1u << eb) - 1), man = h & ((1u << mb) - 1);
	double s = (h & 0x8000) ? -1.0 : 1.0;

	if (ex == (1u << eb) - 1)
		return man ? NAN : s * INFINITY;
	if (ex == 0)
		return s * ldexp(man, 1 - bias - mb);
	return s * ldexp(man + (1u << mb), (int)ex - bias - mb);
}

/* v (exact, finite) rounded once to the type, ties to even. */
static uint16_t
nearest(const struct table *t, double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	unsigned int lo = 0, hi = t->n - 1;
	double a = fabs(v), d1, d2;

	if (a >= t->v[hi])
		return (uint16_t)(sign | (a >= t->v[hi] + (t->v[hi] -
			t->v[hi - 1]) / 2 ? t->inf : hi));
	while (hi - lo > 1) {
		unsigned int mid = (lo + hi) / 2;

		if (t->v[mid] <= a)
			lo = mid;
		else
			hi = mid;
	}
	d1 = a - t->v[lo];
	d2 = t->v[hi] - a;
	return (uint16_t)(sign | (d1 < d2 || (d1 == d2 && lo % 2 == 0) ?
		lo : hi));
}

static int
setup(void **state)
{
	(void)state;
	for (int f = 0; f < 2; f++) {
		tabs[f].inf = f ? 0x7c00 : 0x7f80;
		tabs[f].n = tabs[f].inf;
		for (unsigned int i = 0; i < tabs[f].n; i++)
			tabs[f].v[i] = value(f, (uint16_t)i);
	}
	return 0;
}

/*
 * Rank r's elements at step s: finite patterns over a few binades below
 * a top that varies by rank, zeros of both signs, subnormals, NaNs; with
 * inf set, rank world - 1 holds an infinity.
 */
static void
gen(int f16, unsigned int r, unsigned int s, size_t n, int inf,
	unsigned int world, uint16_t *x)
{
	unsigned int top = f16 ? 16 + r % 8 : 120 + r % 8;
	unsigned int mb = f16 ? 10 : 7;

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix((uint64_t)r << 56 ^ (uint64_t)s << 48 ^ i ^
			(uint64_t)f16 << 40);
		uint16_t sign = (uint16_t)((h >> 20) & 0x8000);
		unsigned int ex = top - (unsigned int)(h >> 8) % 12;

		switch (h % 64) {
		case 0:
			x[i] = sign;
			break;
		case 1:		/* subnormal */
			x[i] = (uint16_t)(sign | ((h >> 30) &
				((1u << mb) - 1)));
			break;
		case 2:		/* NaN */
			x[i] = (uint16_t)(sign | (f16 ? 0x7e00 : 0x7fc0) |
				(h >> 40 & 0x3f));
			break;
		default:
			x[i] = (uint16_t)(sign | ex << mb |
				((h >> 30) & ((1u << mb) - 1)));
			break;
		}
	}
	if (inf && r == world - 1 && n > 0)
		x[n / 2] = f16 ? 0xfc00 : 0x7f80;
}

/* The reference of one step over world ranks into ref. */
static void
reference(int f16, unsigned int world, unsigned int lanes, int narrow,
	unsigned int s, size_t n, uint16_t *ref)
{
	uint16_t *x[WMAX];
	double amax = 0.0;
	int64_t *sum = calloc(n + 1, sizeof(*sum));
	int k = 0, b, e, lw = 0;

	assert_non_null(sum);
	for (unsigned int r = 0; r < world; r++) {
		x[r] = malloc((n + 1) * 2);
		assert_non_null(x[r]);
		gen(f16, r, s, n, 0, world, x[r]);
		for (size_t i = 0; i < n; i++) {
			double a = fabs(value(f16, x[r][i]));

			if (!isnan(a) && a > amax)
				amax = a;
		}
	}
	while ((1u << (lw + 1)) <= world)
		lw++;
	b = lanes == 32 ? 30 - lw : narrow ? 14 - lw : 14;
	if (amax > 0)
		(void)frexp(amax, &k);
	e = amax > 0 ? b - k : 0;
	for (unsigned int r = 0; r < world; r++) {
		for (size_t i = 0; i < n; i++) {
			double v = value(f16, x[r][i]);

			if (!isnan(v))
				sum[i] += (int64_t)nearbyint(ldexp(v, e));
		}
		free(x[r]);
	}
	for (size_t i = 0; i < n; i++)
		ref[i] = sum[i] == 0 ? 0 : nearest(&tabs[f16],
			ldexp((double)sum[i], -e));
	free(sum);
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	struct tally_ctx *ctx;
	int rc = tally_ctx_open(&k->o, &ctx);

	if (rc != 0) {
		k->rc[0] = rc;
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	if (k->lanes != 0)
		assert_int_equal(tally_ctx_set_lanes(ctx, k->lanes), 0);
	k->used_lanes = tally_ctx_lanes(ctx, k->dt);
	for (unsigned int s = 0; s < k->nsteps; s++) {
		k->rc[s] = tally_allreduce_typed(ctx, k->buf[s], k->sizes[s],
			k->dt);
		if (k->rc[s] != 0)
			snprintf(k->err, sizeof(k->err), "%s",
				tally_ctx_error(ctx));
	}
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * One job of world ranks running the steps (sizes) with dt, lanes
 * (0: the rule) and narrow results; with inf, the step of index 1 holds
 * an infinity. Checks every rank against the reference. Returns the
 * lanes the ranks used; bytes (if not NULL) gets rank 0's bytes sent.
 */
static unsigned int
run(enum tally_dtype dt, unsigned int world, unsigned int lanes, int narrow,
	const size_t *sizes, unsigned int nsteps, double loss, int inf,
	uint64_t *bytes)
{
	int f16 = dt == TALLY_DT_F16;
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = (uint8_t)world,
		.window = 32, .max_elems = 1024, .narrow = (uint8_t)narrow,
		.loss_up = loss, .loss_down = loss, .seed = world * 31 + lanes,
	};
	struct loopagg *a = loopagg_start(&ac);
	static struct rank k[WMAX];
	unsigned int used;

	assert_non_null(a);
	for (unsigned int r = 0; r < world; r++) {
		k[r] = (struct rank){
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = (uint8_t)world, .window = 32,
				.elems = 1024, .narrow = (uint8_t)narrow,
				.rto_us = 2000, .timeout_ms = 20000 },
			.dt = dt, .lanes = lanes, .sizes = sizes,
			.nsteps = nsteps,
		};
		for (unsigned int s = 0; s < nsteps; s++) {
			k[r].buf[s] = malloc(sizes[s] * 2 + 2);
			assert_non_null(k[r].buf[s]);
			gen(f16, r, s, sizes[s], inf && s == 1, world,
				k[r].buf[s]);
		}
		assert_int_equal(pthread_create(&k[r].thread, NULL, rank_main,
			&k[r]), 0);
	}
	for (unsigned int r = 0; r < world; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, NULL);
	used = k[0].used_lanes;
	for (unsigned int s = 0; s < nsteps; s++) {
		uint16_t *ref = malloc(sizes[s] * 2 + 2);

		assert_non_null(ref);
		if (!(inf && s == 1))
			reference(f16, world, used, narrow, s, sizes[s], ref);
		for (unsigned int r = 0; r < world; r++) {
			if (inf && s == 1) {
				if (k[r].rc[s] != -ERANGE)
					fail_msg("rank %u: %d, not -ERANGE",
						r, k[r].rc[s]);
			} else if (k[r].rc[s] != 0) {
				fail_msg("%s world %u lanes %u step %u rank "
					"%u: %d (%s)", f16 ? "f16" : "bf16",
					world, used, s, r, k[r].rc[s],
					k[r].err);
			} else if (memcmp(k[r].buf[s], ref, sizes[s] * 2)) {
				for (size_t i = 0; i < sizes[s]; i++)
					if (k[r].buf[s][i] != ref[i])
						fail_msg("%s world %u lanes %u "
							"%s n %zu rank %u: "
							"[%zu] %04x, want "
							"%04x", f16 ? "f16" :
							"bf16", world, used,
							narrow ? "narrow" :
							"wide", sizes[s], r, i,
							k[r].buf[s][i],
							ref[i]);
			}
			assert_int_equal(k[r].used_lanes, used);
			free(k[r].buf[s]);
		}
		free(ref);
	}
	if (bytes != NULL)
		*bytes = k[0].st.bytes_sent;
	return used;
}

static const size_t sizes[] = { 0, 1, 257, 100003, 1, 4096 };
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

/* Worlds 1, 2, 4, 7; both types; the rule's lanes, both job kinds. */
static void
worlds_and_sizes(void **state)
{
	static const unsigned int worlds[] = { 1, 2, 4, 7 };

	(void)state;
	for (size_t w = 0; w < 4; w++)
		for (int t = 0; t < 2; t++)
			for (int narrow = 0; narrow <= 1; narrow++) {
				enum tally_dtype dt = t ? TALLY_DT_F16 :
					TALLY_DT_BF16;
				unsigned int used = run(dt, worlds[w], 0,
					narrow, sizes, NSIZES, 0, 0, NULL);

				/* The rule of <tally/fixp16.h>. */
				assert_int_equal(used, narrow &&
					worlds[w] <= (t ? 2u : 7u) ? 16 : 32);
			}
}

/* Lanes forced both ways, at a world where the rule says the other. */
static void
forced_lanes(void **state)
{
	uint64_t b16, b32;

	(void)state;
	assert_int_equal(run(TALLY_DT_BF16, 4, 32, 1, sizes, NSIZES, 0, 0,
		&b32), 32);
	assert_int_equal(run(TALLY_DT_BF16, 4, 16, 1, sizes, NSIZES, 0, 0,
		&b16), 16);
	/* Half the payload bytes, plus the same headers. */
	assert_true(b16 < b32 * 6 / 10);
	assert_int_equal(run(TALLY_DT_F16, 7, 16, 1, sizes, NSIZES, 0, 0,
		NULL), 16);
	assert_int_equal(run(TALLY_DT_F16, 7, 16, 0, sizes, NSIZES, 0, 0,
		NULL), 16);
	assert_int_equal(run(TALLY_DT_BF16, 2, 32, 0, sizes, NSIZES, 0, 0,
		NULL), 32);
}

/* 1% loss both ways, both lane widths. */
static void
with_loss(void **state)
{
	static const size_t s[] = { 100003, 257 };

	(void)state;
	run(TALLY_DT_BF16, 4, 0, 1, s, 2, 0.01, 0, NULL);
	run(TALLY_DT_F16, 4, 0, 1, s, 2, 0.01, 0, NULL);
}

/* An infinity on one rank: -ERANGE everywhere, the next call works. */
static void
infinity(void **state)
{
	static const size_t s[] = { 257, 1000, 257 };

	(void)state;
	run(TALLY_DT_BF16, 4, 0, 1, s, 3, 0, 1, NULL);
	run(TALLY_DT_F16, 2, 32, 0, s, 3, 0, 1, NULL);
}

/* 64 MiB of bf16 and of f16 over two ranks, in each lane width. */
static void
big(void **state)
{
	static const size_t s[] = { BIG };

	(void)state;
	run(TALLY_DT_BF16, 2, 0, 1, s, 1, 0, 0, NULL);
	run(TALLY_DT_F16, 2, 32, 1, s, 1, 0, 0, NULL);
}

/* f32 and i32 through the typed call; bad arguments. */
static void
other_types(void **state)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = 1, .window = 4,
		.max_elems = 256, .seed = 1,
	};
	struct loopagg *a = loopagg_start(&ac);
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .job = JOB,
		.token = TOKEN, .world = 1, .window = 4 };
	struct tally_ctx *ctx;
	float f[3] = { 1.5f, -2.25f, 0.0f };
	int32_t i[2] = { INT32_MAX, -7 };
	uint16_t h[2] = { 0x3f80, 0xc000 };	/* bf16 1, -2 */
	struct tally_ctx_info info;

	(void)state;
	assert_non_null(a);
	o.dp_port = loopagg_port(a);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	assert_int_equal(tally_allreduce_typed(ctx, f, 3, TALLY_DT_F32), 0);
	assert_true(f[0] == 1.5f && f[1] == -2.25f && f[2] == 0.0f);
	assert_int_equal(tally_allreduce_typed(ctx, i, 2, TALLY_DT_I32), 0);
	assert_int_equal(i[0], INT32_MAX);
	assert_int_equal(i[1], -7);
	assert_int_equal(tally_allreduce_typed(ctx, h, 2, TALLY_DT_BF16), 0);
	assert_int_equal(h[0], 0x3f80);
	assert_int_equal(h[1], 0xc000);
	assert_int_equal(tally_allreduce_typed(ctx, h, 2, 9), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "element type"));
	assert_int_equal(tally_allreduce_typed(NULL, h, 2, TALLY_DT_BF16),
		-EINVAL);
	assert_int_equal(tally_allreduce_typed(ctx, NULL, 2, TALLY_DT_F16),
		-EINVAL);
	assert_int_equal(tally_allreduce_typed(ctx, NULL, 0, TALLY_DT_F16), 0);
	assert_int_equal(tally_ctx_set_lanes(ctx, 8), -EINVAL);
	assert_int_equal(tally_ctx_set_lanes(NULL, 16), -EINVAL);
	tally_ctx_info(ctx, &info);
	assert_int_equal(info.lanes_bf16, 32);	/* a wide job */
	assert_int_equal(tally_ctx_set_lanes(ctx, 16), 0);
	tally_ctx_info(ctx, &info);
	assert_int_equal(info.lanes_bf16, 16);
	assert_int_equal(info.lanes_f16, 16);
	assert_int_equal(tally_ctx_lanes(ctx, TALLY_DT_F32), 32);
	/* Still usable after the refusals. */
	assert_int_equal(tally_allreduce_typed(ctx, h, 2, TALLY_DT_BF16), 0);
	assert_int_equal(h[1], 0xc000);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(other_types),
		cmocka_unit_test(worlds_and_sizes),
		cmocka_unit_test(forced_lanes),
		cmocka_unit_test(with_loss),
		cmocka_unit_test(infinity),
		cmocka_unit_test(big),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
