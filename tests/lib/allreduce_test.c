/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libtally against the real engine (loopagg: tally_agg_process() behind
 * UDP sockets on 127.0.0.1), one thread and one context per rank.
 *
 * Every rank runs a plan, a sequence of allreduces on the same context,
 * over data generated from (rank, step); afterwards the main thread
 * computes the reference of every step and checks each rank's result
 * against it bit for bit: a wrapping sum for i32; for f32 the
 * shared-scale procedure (global max |x|, exponent, sum of the ranks'
 * encodings, decode); for max the element-wise maximum in IEEE 754's
 * total order. Plans mix sizes and kinds on one context, which is what
 * catches a slot round that does not carry over between calls.
 * f32 sums are also checked against the exact sums of the ranks' data
 * within the bound <tally/fixp.h> documents, over every magnitude of the
 * floats (2^127 down to the subnormal 2^-149), with ranks of very
 * different magnitudes, NaN and all-zero tensors.
 * Failures: a missing rank and a wrong token time out, a packet larger
 * than the job's is NACKed, an infinity leaves no scale, a failing
 * transport (a fake) ends the call, bad arguments are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/fixp.h>
#include <tally/tally.h>

#include "lib/ctx.h"
#include "latetp.h"
#include "loopagg.h"
#include "wraptp.h"
#include "../gpu/fixp_bound.h"

#define JOB		9
#define TOKEN		UINT64_C(0x0123456789abcdef)
#define WORLD		4
#define ELEMS		256
#define MAX_STEPS	320
#define BIG		(1u << 20)

/*
 * K_F32_MAG: f32 whose largest |x| is 2^mag (on rank 0); K_F32_MIX: the
 * same with rank r about 2^-(37 r mod 150) of it; K_F32_NAN: K_F32 with
 * NaNs; K_F32_ZERO: zeros of both signs.
 */
enum kind {
	K_I32, K_F32, K_MAX, K_F32_INF, K_F32_MAG, K_F32_MIX, K_F32_NAN,
	K_F32_ZERO,
};

struct step {
	enum kind kind;
	size_t n;
};

/* The exponent of the largest |x| of step s, for K_F32_MAG, K_F32_MIX. */
static int step_mag[MAX_STEPS];

struct plan {
	const struct step *steps;
	unsigned int nsteps;
};

#define PLAN(a) ((struct plan){ (a), sizeof(a) / sizeof((a)[0]) })

/* One rank's thread: its options, plan and what came of it. */
struct worker {
	pthread_t thread;
	struct tally_ctx_opts o;
	struct plan plan;
	int open_rc;
	int rc[MAX_STEPS];
	uint64_t ns[MAX_STEPS];		/* time each allreduce took */
	void *out[MAX_STEPS];		/* results (owned) */
	char err[MAX_STEPS][256];
	struct tally_ctx_stats st;
};

static struct worker workers[TALLY_MAX_WORKERS];

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Rank r's f32 of a K_F32_MAG or K_F32_MIX step: |x| <= 2^mag (2^(mag -
 * 37 r mod 150) for K_F32_MIX ranks), a 24-bit mantissa at the top or far
 * below it (into the subnormals, and to 0), zeros of either sign; rank
 * 0's element s % n is +-2^mag exactly, the step's largest.
 */
static void
gen_mag(enum kind k, int mag, unsigned int r, unsigned int s, size_t n,
	uint64_t seed, float *x)
{
	int top = k == K_F32_MIX ? mag - (int)(37 * r % 150) : mag;

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(seed ^ i);
		float m = (float)((int64_t)(h >> 39) - (1 << 24));

		switch (h & 7) {
		case 0:
			x[i] = (h & 8) ? -0.0f : 0.0f;
			break;
		case 1:
			x[i] = ldexpf(m, top - 24 - (int)(h >> 3 & 63));
			break;
		default:
			x[i] = ldexpf(m, top - 24);
			break;
		}
	}
	if (r == 0 && n > 0)
		x[s % n] = ldexpf((seed & 1) ? -1.0f : 1.0f, mag);
}

/*
 * Rank r's element i at step s: any bits for i32 (sums wrap), for f32
 * normal-ish values in [-1, 1] with an outlier in 512 up to 30x larger,
 * and the scale varying by step (or as gen_mag() says; NaNs or zeros).
 */
static void
gen(const struct step *st, unsigned int r, unsigned int s, void *buf)
{
	enum kind k = st->kind;
	uint64_t seed = mix((uint64_t)r << 40 | (uint64_t)s << 20 | k);
	float scale = (float)(1u << (s % 7)) / 16.0f;
	size_t i, n = st->n;

	if (k == K_F32_MAG || k == K_F32_MIX) {
		gen_mag(k, step_mag[s], r, s, n, seed, buf);
		return;
	}
	for (i = 0; i < n; i++) {
		uint64_t h = mix(seed ^ i);
		float x;

		if (k == K_I32) {
			((int32_t *)buf)[i] = (int32_t)(uint32_t)h;
			continue;
		}
		x = ((float)(h & 0xffff) + (float)(h >> 16 & 0xffff) +
			(float)(h >> 32 & 0xffff)) / 98304.0f - 1.0f;
		if ((h >> 48 & 0x1ff) == 0)
			x *= 1.0f + (float)(h >> 57);
		if (k == K_F32_ZERO)
			x = (h & 1) ? -0.0f : 0.0f;
		if (k == K_F32_NAN && (h >> 20 & 15) == 0)
			x = (h & 1) ? NAN : -NAN;
		((float *)buf)[i] = x * scale;
	}
	/* K_F32_INF: f32 with an infinity in rank 1's tensor. */
	if (k == K_F32_INF && r == 1 && n > 0)
		((float *)buf)[n / 2] = INFINITY;
}

/* Whether a kind is an f32 sum (through fixed point). */
static int
is_f32(enum kind k)
{
	return k != K_I32 && k != K_MAX;
}

/* Total-order key of a float's bits: larger key, larger float. */
static uint32_t
order_key(uint32_t u)
{
	return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* ref = what every rank should get at step s of world ranks. */
static void
reference(const struct step *st, unsigned int world, unsigned int s,
	void *ref)
{
	enum kind k = st->kind;
	size_t n = st->n;
	uint32_t *acc = calloc(n + 1, 4);
	float *x = malloc((n + 1) * 4);
	int32_t *q = malloc((n + 1) * 4);
	float amax = 0.0f;
	unsigned int r;
	size_t i;
	int e = 0;

	assert_non_null(acc);
	assert_non_null(x);
	assert_non_null(q);
	if (is_f32(k)) {
		for (r = 0; r < world; r++) {
			float a;

			gen(st, r, s, x);
			a = tally_fixp_absmax(x, n);
			amax = a > amax ? a : amax;
		}
		assert_int_equal(tally_fixp_exponent(amax, world, &e), 0);
	}
	for (r = 0; r < world; r++) {
		gen(st, r, s, x);
		if (is_f32(k))
			tally_fixp_encode(x, q, n, e);
		else
			memcpy(q, x, n * 4);
		for (i = 0; i < n; i++) {
			uint32_t u = (uint32_t)q[i];

			if (k != K_MAX)
				acc[i] += u;
			else if (r == 0 || order_key(u) > order_key(acc[i]))
				acc[i] = u;
		}
	}
	if (is_f32(k))
		tally_fixp_decode((const int32_t *)acc, ref, n, e);
	else
		memcpy(ref, acc, n * 4);
	free(acc);
	free(x);
	free(q);
}

/*
 * The f32 result res of step s against the exact sums of the ranks' data
 * (NaN as 0): within the documented bound everywhere, or an infinity
 * where the exact sum is past the floats. Returns the largest error
 * relative to the global max |x|.
 */
static double
check_precision(const struct step *st, unsigned int world, unsigned int s,
	const float *res)
{
	size_t n = st->n;
	struct xsum *sum = calloc(n + 1, sizeof(*sum));
	float *x = malloc((n + 1) * 4), amax = 0.0f;
	double worst = 0.0;
	unsigned int r;

	assert_non_null(sum);
	assert_non_null(x);
	for (r = 0; r < world; r++) {
		float a;

		gen(st, r, s, x);
		a = tally_fixp_absmax(x, n);
		amax = a > amax ? a : amax;
		for (size_t i = 0; i < n; i++)
			if (!isnan(x[i]))
				xsum_add(&sum[i], x[i], 1);
	}
	for (size_t i = 0; i < n; i++) {
		double exact = xsum_double(&sum[i]), d;
		double bound = fixp_doc_bound(exact, amax, world);

		if (isinf(res[i])) {
			if (fabs(exact) + bound < FLT_MAX ||
					(res[i] > 0) != (exact > 0))
				fail_msg("step %u: %a for the exact sum %a", s,
					(double)res[i], exact);
			continue;
		}
		xsum_add(&sum[i], res[i], -1);
		d = fabs(xsum_double(&sum[i]));
		if (d > bound)
			fail_msg("step %u (max |x| %a, world %u): element %zu "
				"is %a, the exact sum %a: error %a above %a",
				s, (double)amax, world, i, (double)res[i],
				exact, d, bound);
		if (amax > 0.0f && d / amax > worst)
			worst = d / amax;
	}
	free(sum);
	free(x);
	return worst;
}

static int
call(struct tally_ctx *ctx, enum kind k, void *buf, size_t n)
{
	switch (k) {
	case K_I32:
		return tally_allreduce_i32(ctx, buf, n);
	case K_MAX:
		return tally_allreduce_max_f32(ctx, buf, n);
	default:
		return tally_allreduce_f32(ctx, buf, n);
	}
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_ctx *ctx;
	unsigned int s;

	w->open_rc = tally_ctx_open(&w->o, &ctx);
	if (w->open_rc != 0)
		return NULL;
	for (s = 0; s < w->plan.nsteps; s++) {
		const struct step *st = &w->plan.steps[s];
		uint64_t t0;

		w->out[s] = malloc(st->n * 4 + 4);
		gen(st, w->o.rank, s, w->out[s]);
		t0 = now_ns();
		w->rc[s] = call(ctx, st->kind, w->out[s], st->n);
		w->ns[s] = now_ns() - t0;
		snprintf(w->err[s], sizeof(w->err[s]), "%s",
			tally_ctx_error(ctx));
	}
	tally_ctx_stats(ctx, &w->st);
	tally_ctx_close(ctx);
	return NULL;
}

/* Options of rank r for the aggregator a. */
static struct tally_ctx_opts
opts_for(const struct loopagg *a, unsigned int r, unsigned int world)
{
	return (struct tally_ctx_opts){
		.dp_addr = "127.0.0.1",
		.dp_port = loopagg_port(a),
		.job = JOB,
		.token = TOKEN,
		.rank = (uint8_t)r,
		.world = (uint8_t)world,
		.elems = ELEMS,
	};
}

/* Runs nthreads workers (their o already set) to the end. */
static void
run_workers(unsigned int nthreads, struct plan plan)
{
	unsigned int r;

	for (r = 0; r < nthreads; r++) {
		workers[r].plan = plan;
		assert_int_equal(pthread_create(&workers[r].thread, NULL,
			worker_main, &workers[r]), 0);
	}
	for (r = 0; r < nthreads; r++)
		pthread_join(workers[r].thread, NULL);
}

static int
teardown(void **state)
{
	unsigned int r, s;

	(void)state;
	for (r = 0; r < TALLY_MAX_WORKERS; r++)
		for (s = 0; s < MAX_STEPS; s++)
			free(workers[r].out[s]);
	memset(workers, 0, sizeof(workers));
	return 0;
}

/* Every rank succeeded at every step with the reference's bits. */
static void
check_results(unsigned int world)
{
	const struct plan *p = &workers[0].plan;
	unsigned int r, s;

	for (r = 0; r < world; r++)
		assert_int_equal(workers[r].open_rc, 0);
	for (s = 0; s < p->nsteps; s++) {
		size_t n = p->steps[s].n;
		void *ref = malloc(n * 4 + 4);

		assert_non_null(ref);
		reference(&p->steps[s], world, s, ref);
		if (is_f32(p->steps[s].kind) && p->steps[s].kind != K_F32_INF)
			(void)check_precision(&p->steps[s], world, s, ref);
		for (r = 0; r < world; r++) {
			if (workers[r].rc[s] != 0)
				fail_msg("rank %u step %u: %d (%s)", r, s,
					workers[r].rc[s], workers[r].err[s]);
			if (memcmp(workers[r].out[s], ref, n * 4) != 0)
				fail_msg("rank %u step %u (kind %d, %zu "
					"elements): result differs from the "
					"reference", r, s, p->steps[s].kind, n);
		}
		free(ref);
	}
}

/* Chunks a plan takes with elems a packet (f32: plus the MAX round). */
static uint64_t
plan_chunks(const struct plan *p, unsigned int elems)
{
	uint64_t c = 0;
	unsigned int s;

	for (s = 0; s < p->nsteps; s++) {
		c += (p->steps[s].n + elems - 1) / elems;
		if (is_f32(p->steps[s].kind) && p->steps[s].n > 0)
			c++;
	}
	return c;
}

static struct loopagg_conf
agg_conf(uint8_t world)
{
	return (struct loopagg_conf){
		.job = JOB, .token = TOKEN, .world = world, .window = 64,
		.max_elems = 1024, .seed = 1,
	};
}

/* Starts an aggregator, runs plan on world ranks, checks, stops. */
static void
run_world(const struct loopagg_conf *ac, unsigned int world,
	uint16_t window, struct plan plan, struct loopagg_stats *st)
{
	struct loopagg *a = loopagg_start(ac);
	unsigned int r;

	assert_non_null(a);
	for (r = 0; r < world; r++) {
		workers[r].o = opts_for(a, r, world);
		workers[r].o.window = window;
		workers[r].o.dp_nports = (uint16_t)ac->nports;
	}
	run_workers(world, plan);
	loopagg_stop(a, st);
	check_results(world);
}

static const struct step sizes_i32[] = {
	{ K_I32, 0 }, { K_I32, 1 }, { K_I32, ELEMS - 1 }, { K_I32, ELEMS + 1 },
	{ K_I32, BIG },
};

static void
i32_sizes(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;
	uint64_t chunks;
	unsigned int r;

	(void)state;
	run_world(&ac, WORLD, 0, PLAN(sizes_i32), &st);
	chunks = plan_chunks(&workers[0].plan, ELEMS);
	for (r = 0; r < WORLD; r++) {
		assert_int_equal(workers[r].st.results, chunks);
		assert_true(workers[r].st.packets_sent >= chunks);
		assert_true(workers[r].st.bytes_sent >=
			(BIG + 2 * ELEMS + 1) * 4);
		assert_true(workers[r].st.bytes_received >=
			(BIG + 2 * ELEMS + 1) * 4);
	}
	assert_int_equal(st.agg.completed, chunks);
	assert_int_equal(st.agg.nacks, 0);
}

static const struct step sizes_f32[] = {
	{ K_F32, 0 }, { K_F32, 1 }, { K_F32, ELEMS - 1 }, { K_F32, ELEMS + 1 },
	{ K_F32, BIG },
};

static void
f32_sizes(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	run_world(&ac, WORLD, 0, PLAN(sizes_f32), NULL);
}

/*
 * One context, many calls of different kinds and sizes: tensors shorter
 * than the window and single chunks in a row, where a round taken from
 * the chunk index instead of the slot's history gets an old sum back.
 */
static const struct step mixed[] = {
	{ K_I32, 3 * ELEMS + 5 }, { K_I32, 1 }, { K_I32, 1 }, { K_F32, 1 },
	{ K_MAX, 300 }, { K_I32, 2 }, { K_F32, 64 * ELEMS + 1 },
	{ K_I32, 70 * ELEMS }, { K_MAX, 1 }, { K_F32, 2 }, { K_I32, 1 },
	{ K_MAX, 65 * ELEMS }, { K_F32, 5 * ELEMS },
};

static void
mixed_sequence(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	run_world(&ac, WORLD, 0, PLAN(mixed), NULL);
}

static const struct step lossy[] = {
	{ K_I32, BIG }, { K_F32, 200000 }, { K_MAX, 3000 }, { K_I32, 1 },
	{ K_F32, 1 },
};

static void
loss_5_percent(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;
	uint64_t retx = 0, gap_nacks = 0, gap_resends = 0;
	unsigned int r;

	(void)state;
	ac.loss_up = 0.05;
	ac.loss_down = 0.05;
	ac.dup = 0.02;
	ac.seed = 42;
	run_world(&ac, WORLD, 0, PLAN(lossy), &st);
	for (r = 0; r < WORLD; r++) {
		retx += workers[r].st.retransmits;
		gap_nacks += workers[r].st.gap_nacks;
		gap_resends += workers[r].st.gap_resends;
	}
	/* Frames lost on the way in: most NACKed (a gap shows once the
	 * member's next frame arrives), each NACK's chunks sent again at
	 * once unless something sent them again already. */
	print_message("# lost up %llu; NACK gap %llu (%llu frames), %llu "
		"received, %llu resends on them; %llu retransmissions\n",
		(unsigned long long)st.lost_up,
		(unsigned long long)st.agg.gap_nacks,
		(unsigned long long)st.agg.gap_lost,
		(unsigned long long)gap_nacks,
		(unsigned long long)gap_resends, (unsigned long long)retx);
	assert_true(st.agg.gap_nacks > 0);
	assert_true(st.agg.gap_lost <= st.lost_up);
	assert_true(gap_nacks > 0 && gap_nacks <= st.agg.gap_nacks * 2);
	assert_true(gap_resends > 0 && gap_resends <= retx);
	assert_true(st.lost_up > 0);
	assert_true(st.lost_down > 0);
	assert_true(st.duplicated > 0);
	assert_true(st.agg.resent > 0);
	assert_true(retx > 0);
	assert_int_equal(st.agg.nacks, 0);
}

/*
 * A job sharded over two aggregators (docs/scale-out.md, "Shards"):
 * slot s at aggregator s % 2, the first with two ports, the second with
 * one; each holds the whole job and sees only its slots. The results
 * are the reference's, lossless and with 3 % loss both ways (the gap
 * sequence numbers count per aggregator and port), and each aggregator
 * completed rounds of its own.
 */
static void
run_sharded(struct loopagg_conf *ac, struct plan plan)
{
	struct loopagg_stats st[2];
	struct tally_shard sh[2];
	struct loopagg *a[2];
	unsigned int r;

	ac->nports = 2;
	a[0] = loopagg_start(ac);
	ac->nports = 1;
	ac->seed++;
	a[1] = loopagg_start(ac);
	assert_non_null(a[0]);
	assert_non_null(a[1]);
	sh[0] = (struct tally_shard){ "127.0.0.1", loopagg_port(a[0]), 2 };
	sh[1] = (struct tally_shard){ "127.0.0.1", loopagg_port(a[1]), 1 };
	for (r = 0; r < WORLD; r++) {
		workers[r].o = opts_for(a[0], r, WORLD);
		workers[r].o.dp_addr = NULL;	/* the shards say */
		workers[r].o.shards = sh;
		workers[r].o.nshards = 2;
	}
	run_workers(WORLD, plan);
	loopagg_stop(a[0], &st[0]);
	loopagg_stop(a[1], &st[1]);
	check_results(WORLD);
	print_message("# completed %llu + %llu rounds\n",
		(unsigned long long)st[0].agg.completed,
		(unsigned long long)st[1].agg.completed);
	assert_true(st[0].agg.completed > 0);
	assert_true(st[1].agg.completed > 0);
	assert_int_equal(st[0].agg.nacks + st[1].agg.nacks, 0);
}

static void
sharded_two_aggregators(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	run_sharded(&ac, PLAN(mixed));
	teardown(NULL);
	ac = agg_conf(WORLD);
	ac.loss_up = 0.03;
	ac.loss_down = 0.03;
	ac.seed = 7;
	run_sharded(&ac, PLAN(lossy));
}

/*
 * Issue 11, item 13, the worker's side: results of earlier rounds come
 * again (the aggregator replays old results, as a network holding them
 * back or an attacker would). Every step sums other tensors, and the
 * same chunk lands on the same slot every step (21 chunks, 64 slots):
 * version 1 took a result two steps old for the current one (same slot,
 * set and offset). Now each is ignored and counted as stale.
 */
static const struct step same_slots[] = {
	{ K_I32, 20 * ELEMS + 3 }, { K_I32, 20 * ELEMS + 3 },
	{ K_I32, 20 * ELEMS + 3 }, { K_I32, 20 * ELEMS + 3 },
	{ K_I32, 20 * ELEMS + 3 }, { K_I32, 20 * ELEMS + 3 },
	{ K_I32, 20 * ELEMS + 3 }, { K_I32, 20 * ELEMS + 3 },
};

static void
stale_results_dropped(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;
	uint64_t stale = 0;
	unsigned int r;

	(void)state;
	ac.replay = 0.5;
	ac.seed = 13;
	run_world(&ac, WORLD, 0, PLAN(same_slots), &st);
	for (r = 0; r < WORLD; r++)
		stale += workers[r].st.stale;
	assert_true(st.replayed > 0);
	assert_true(stale > 0);
	assert_int_equal(st.agg.nacks, 0);
}

/* Member r's keys in the tests' authenticated jobs. */
static struct tally_auth_keys test_keys[WORLD];

static void
make_test_keys(void)
{
	for (unsigned int r = 0; r < WORLD; r++)
		for (unsigned int i = 0; i < 16; i++) {
			test_keys[r].up[i] = (uint8_t)(0x10 * r + i);
			test_keys[r].down[i] = (uint8_t)(0x80 + 0x10 * r + i);
			test_keys[r].result[i] = (uint8_t)(0xf0 ^ i);
		}
}

/* run_world() for an authenticated job: every rank with its keys. */
static void
run_world_auth(struct loopagg_conf *ac, struct plan plan,
	struct loopagg_stats *st)
{
	struct loopagg *a;
	unsigned int r;

	make_test_keys();
	ac->auth = test_keys;
	a = loopagg_start(ac);
	assert_non_null(a);
	for (r = 0; r < WORLD; r++) {
		workers[r].o = opts_for(a, r, WORLD);
		workers[r].o.auth = &test_keys[r];
	}
	run_workers(WORLD, plan);
	loopagg_stop(a, st);
	check_results(WORLD);
}

/* Issue 11, item 10: an authenticated job sums exactly, every kind. */
static void
auth_job_exact(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;

	(void)state;
	run_world_auth(&ac, PLAN(mixed), &st);
	assert_int_equal(st.agg.drops[TALLY_ST_BAD_AUTH], 0);
	assert_int_equal(st.agg.nacks, 0);
	for (unsigned int r = 0; r < WORLD; r++)
		assert_int_equal(workers[r].st.forged, 0);
}

/*
 * Issue 11, item 10, the workers' side: results with a flipped payload
 * bit and NACKs made from a result (what anyone who sees one result can
 * forge), and old results replayed, under loss: every forgery is
 * dropped and counted, every sum stays exact. (The same forged NACK
 * fails a plain job's call: plain_job_believes_forged_nack.)
 */
static void
auth_forgeries_dropped(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;
	uint64_t forged = 0, stale = 0;

	(void)state;
	ac.forge = 0.2;
	ac.replay = 0.2;
	ac.loss_up = 0.02;
	ac.loss_down = 0.02;
	ac.seed = 77;
	run_world_auth(&ac, PLAN(lossy), &st);
	for (unsigned int r = 0; r < WORLD; r++) {
		forged += workers[r].st.forged;
		stale += workers[r].st.stale;
	}
	assert_true(st.forged > 0);
	assert_true(forged > 0);
	assert_true(stale > 0);
	assert_int_equal(st.agg.nacks, 0);
}

/* What auth_forgeries_dropped guards against: a plain job believes. */
static void
plain_job_believes_forged_nack(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;
	struct loopagg *a;
	unsigned int r, failed = 0;

	(void)state;
	ac.forge = 1.0;
	a = loopagg_start(&ac);
	assert_non_null(a);
	for (r = 0; r < WORLD; r++)
		workers[r].o = opts_for(a, r, WORLD);
	run_workers(WORLD, PLAN(mixed));
	loopagg_stop(a, &st);
	for (r = 0; r < WORLD; r++)
		for (unsigned int s = 0; s < workers[r].plan.nsteps; s++)
			failed += workers[r].rc[s] == -EPROTO;
	assert_true(failed > 0);
}

static const struct step small_plan[] = {
	{ K_I32, 20 * ELEMS + 3 }, { K_I32, 1 }, { K_F32, 10 * ELEMS },
	{ K_MAX, ELEMS + 1 },
};

static void
window_1(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	run_world(&ac, WORLD, 1, PLAN(small_plan), NULL);
}

static const struct step wide_plan[] = {
	{ K_I32, BIG }, { K_F32, 300 * ELEMS + 7 }, { K_I32, 3 },
};

static void
window_256(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	ac.window = 256;
	run_world(&ac, WORLD, 256, PLAN(wide_plan), NULL);
}

/* Slots steered over 3 ports (lcores), 1000-element packets. */
static void
three_ports(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg *a;
	unsigned int r;

	(void)state;
	ac.nports = 3;
	a = loopagg_start(&ac);
	assert_non_null(a);
	for (r = 0; r < WORLD; r++) {
		workers[r].o = opts_for(a, r, WORLD);
		workers[r].o.dp_nports = 3;
		workers[r].o.elems = 1000;
	}
	run_workers(WORLD, PLAN(small_plan));
	loopagg_stop(a, NULL);
	check_results(WORLD);
}

static const struct step one_step[] = {
	{ K_F32, 100 * ELEMS }, { K_I32, 5 },
};

/*
 * Runs one_step on nthreads of world ranks with timeout_ms; checks that
 * each failed with want in about timeout_ms, and that the next call on
 * the broken context is refused with -EPIPE.
 */
static void
expect_failure(const struct loopagg_conf *ac, unsigned int nthreads,
	unsigned int world, uint64_t bad_token_rank, int want,
	const char *text, struct loopagg_stats *st)
{
	struct loopagg *a = loopagg_start(ac);
	unsigned int r;

	assert_non_null(a);
	for (r = 0; r < nthreads; r++) {
		workers[r].o = opts_for(a, r, world);
		workers[r].o.timeout_ms = 300;
		if (r == bad_token_rank)
			workers[r].o.token = ~TOKEN;
	}
	run_workers(nthreads, PLAN(one_step));
	loopagg_stop(a, st);
	for (r = 0; r < nthreads; r++) {
		assert_int_equal(workers[r].open_rc, 0);
		assert_int_equal(workers[r].rc[0], want);
		if (strstr(workers[r].err[0], text) == NULL)
			fail_msg("rank %u: '%s' lacks '%s'", r,
				workers[r].err[0], text);
		if (want == -ETIMEDOUT) {
			assert_true(workers[r].ns[0] >= 300000000u);
			assert_true(workers[r].ns[0] < 1500000000u);
		}
		assert_int_equal(workers[r].rc[1], -EPIPE);
		assert_non_null(strstr(workers[r].err[1], "close it"));
	}
}

static void
missing_rank_times_out(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);

	(void)state;
	expect_failure(&ac, WORLD - 1, WORLD, UINT64_MAX, -ETIMEDOUT,
		"no result", NULL);
}

static void
wrong_token_times_out(void **state)
{
	struct loopagg_conf ac = agg_conf(WORLD);
	struct loopagg_stats st;

	(void)state;
	expect_failure(&ac, WORLD, WORLD, WORLD - 1, -ETIMEDOUT, "no result",
		&st);
	assert_true(st.agg.drops[TALLY_ST_BAD_TOKEN] > 0);
	assert_int_equal(st.agg.nacks, 0);
}

/* Packets above the job's max_elems: NACK bad_length. */
static void
nack_bad_length(void **state)
{
	struct loopagg_conf ac = agg_conf(2);
	struct loopagg_stats st;
	struct loopagg *a;
	unsigned int r;

	(void)state;
	ac.max_elems = 128;
	a = loopagg_start(&ac);
	assert_non_null(a);
	for (r = 0; r < 2; r++)
		workers[r].o = opts_for(a, r, 2);
	run_workers(2, PLAN(one_step));
	loopagg_stop(a, &st);
	for (r = 0; r < 2; r++) {
		assert_int_equal(workers[r].rc[0], -EPROTO);
		assert_non_null(strstr(workers[r].err[0], "bad_length"));
		assert_true(workers[r].st.nacks > 0);
		assert_int_equal(workers[r].rc[1], -EPIPE);
	}
	assert_true(st.agg.nacks > 0);
}

/* A window above the job's: NACK bad_slot. */
static void
nack_bad_slot(void **state)
{
	struct loopagg_conf ac = agg_conf(1);
	struct loopagg *a;

	(void)state;
	ac.window = 8;
	a = loopagg_start(&ac);
	assert_non_null(a);
	workers[0].o = opts_for(a, 0, 1);
	workers[0].o.window = 16;
	run_workers(1, PLAN(one_step));
	loopagg_stop(a, NULL);
	assert_int_equal(workers[0].rc[0], -EPROTO);
	assert_non_null(strstr(workers[0].err[0], "bad_slot"));
}

/*
 * An infinity anywhere leaves no fixed-point scale: every rank gets
 * -ERANGE from the same MAX round, its tensor untouched, and the
 * contexts stay in step.
 */
static const struct step inf_plan[] = {
	{ K_F32_INF, 5 * ELEMS }, { K_I32, 3 * ELEMS + 1 }, { K_F32, 7 },
};

static void
infinity_is_erange(void **state)
{
	struct loopagg_conf ac = agg_conf(2);
	struct loopagg *a = loopagg_start(&ac);
	unsigned int r, s;

	(void)state;
	assert_non_null(a);
	for (r = 0; r < 2; r++)
		workers[r].o = opts_for(a, r, 2);
	run_workers(2, PLAN(inf_plan));
	loopagg_stop(a, NULL);
	for (r = 0; r < 2; r++) {
		float *in = malloc(inf_plan[0].n * 4);

		assert_int_equal(workers[r].rc[0], -ERANGE);
		assert_non_null(strstr(workers[r].err[0], "inf"));
		/* The tensor is left as it was. */
		assert_non_null(in);
		gen(&inf_plan[0], r, 0, in);
		assert_memory_equal(workers[r].out[0], in, inf_plan[0].n * 4);
		free(in);
	}
	for (s = 1; s < 3; s++) {
		size_t n = inf_plan[s].n;
		void *ref = malloc(n * 4);

		assert_non_null(ref);
		reference(&inf_plan[s], 2, s, ref);
		for (r = 0; r < 2; r++) {
			assert_int_equal(workers[r].rc[s], 0);
			assert_memory_equal(workers[r].out[s], ref, n * 4);
		}
		free(ref);
	}
}

/*
 * Every magnitude of the floats on one context: tensors whose largest |x|
 * is 2^k for k = 127 down to the subnormal -149, then ranks of very
 * different magnitudes, NaNs, zeros, an empty tensor and a single
 * subnormal. check_results() holds every rank to the reference's bits
 * and those to the documented bound of the exact sums.
 */
static struct step mag_steps[MAX_STEPS];

/* Appends a step of kind k, n elements, largest |x| 2^mag. */
static void
add_step(unsigned int *c, enum kind k, size_t n, int mag)
{
	assert_true(*c < MAX_STEPS);
	mag_steps[*c] = (struct step){ k, n };
	step_mag[(*c)++] = mag;
}

static struct plan
magnitude_plan(void)
{
	unsigned int c = 0;

	for (int k = 127; k >= -149; k--)
		add_step(&c, K_F32_MAG, 2 * ELEMS + 3, k);
	for (int k = 127; k >= -149; k -= 23)
		add_step(&c, K_F32_MIX, ELEMS + 1, k);
	add_step(&c, K_F32_NAN, 3 * ELEMS, 0);
	add_step(&c, K_F32_ZERO, ELEMS + 7, 0);
	add_step(&c, K_F32_MAG, 0, -140);
	add_step(&c, K_F32_MAG, 1, -149);
	return (struct plan){ mag_steps, c };
}

static void
f32_magnitudes(void **state)
{
	static const uint8_t ws[] = { 1, 3, 64 };
	struct plan p = magnitude_plan();

	(void)state;
	for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
		struct loopagg_conf ac = agg_conf(ws[i]);
		struct loopagg_stats st;

		run_world(&ac, ws[i], 0, p, &st);
		assert_int_equal(st.agg.completed, plan_chunks(&p, ELEMS));
		for (unsigned int s = 0; s < p.nsteps; s++) {
			if (p.steps[s].kind != K_F32_ZERO)
				continue;
			/* +0 everywhere, whatever the signs of the zeros. */
			for (unsigned int r = 0; r < ws[i]; r++)
				for (size_t j = 0; j < p.steps[s].n; j++)
					assert_int_equal(((uint32_t *)
						workers[r].out[s])[j], 0);
		}
		teardown(NULL);
	}
}

/* One rank alone: its sums are its own data. */
static void
world_1(void **state)
{
	struct loopagg_conf ac = agg_conf(1);

	(void)state;
	run_world(&ac, 1, 0, PLAN(mixed), NULL);
}

static void
expect_open_einval(const struct tally_ctx_opts *o, const char *text)
{
	struct tally_ctx *ctx = (struct tally_ctx *)&ctx;

	assert_int_equal(tally_ctx_open(o, &ctx), -EINVAL);
	assert_null(ctx);
	if (strstr(tally_ctx_error(NULL), text) == NULL)
		fail_msg("'%s' lacks '%s'", tally_ctx_error(NULL), text);
}

static void
bad_args(void **state)
{
	struct tally_ctx_opts good = {
		.dp_addr = "127.0.0.1", .job = JOB, .token = TOKEN,
		.rank = 1, .world = 2,
	}, o;
	struct tally_ctx_stats st;
	struct tally_ctx *ctx;
	int32_t v = 1;

	(void)state;
	assert_int_equal(tally_ctx_open(NULL, &ctx), -EINVAL);
	assert_null(ctx);
	assert_int_equal(tally_ctx_open(&good, NULL), -EINVAL);
	o = good, o.world = 0;
	expect_open_einval(&o, "world");
	o = good, o.world = 65;
	expect_open_einval(&o, "world");
	o = good, o.rank = 2;
	expect_open_einval(&o, "rank");
	o = good, o.dp_addr = NULL;
	expect_open_einval(&o, "dp_addr");
	o = good, o.dp_addr = "10.0.0";
	expect_open_einval(&o, "dp_addr");
	o = good, o.dp_addr = "localhost";
	expect_open_einval(&o, "dp_addr");
	o = good, o.dp_addr = "0.0.0.0";
	expect_open_einval(&o, "dp_addr");
	o = good, o.dp_addr = "239.1.1.1";
	expect_open_einval(&o, "dp_addr");
	o = good, o.bind_addr = "1.2.3.4.5";
	expect_open_einval(&o, "bind_addr");
	o = good, o.elems = TALLY_MAX_ELEMS + 1;
	expect_open_einval(&o, "elems");
	o = good, o.dp_port = 65535, o.dp_nports = 2;
	expect_open_einval(&o, "65535");

	assert_int_equal(tally_allreduce_i32(NULL, &v, 1), -EINVAL);
	assert_int_equal(tally_allreduce_f32(NULL, NULL, 0), -EINVAL);
	assert_int_equal(tally_allreduce_max_f32(NULL, NULL, 0), -EINVAL);
	tally_ctx_close(NULL);
	tally_ctx_stats(NULL, &st);
	assert_int_equal(st.packets_sent, 0);

	assert_int_equal(tally_ctx_open(&good, &ctx), 0);
	assert_string_equal(tally_ctx_error(ctx), "");
	assert_int_equal(tally_allreduce_i32(ctx, NULL, 3), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "NULL"));
	assert_int_equal(tally_allreduce_f32(ctx, NULL, 3), -EINVAL);
	assert_int_equal(tally_allreduce_max_f32(ctx, NULL, 3), -EINVAL);
	if (sizeof(size_t) > 4)
		assert_int_equal(tally_allreduce_i32(ctx, &v,
			(size_t)UINT32_MAX + 1), -EINVAL);
	/* Refusals before any packet leave the context usable. */
	assert_int_equal(tally_allreduce_i32(ctx, &v, 0), 0);
	assert_int_equal(tally_allreduce_f32(ctx, NULL, 0), 0);
	tally_ctx_stats(ctx, &st);
	assert_int_equal(st.packets_sent, 0);
	tally_ctx_close(ctx);
}

/*
 * A transport that fails: send with -EBADF (after fail_after bursts), or
 * receive with -EIO. It stands in for a context's UDP transport.
 */
struct fake_tp {
	struct tally_transport tp;
	int fail_send;
	unsigned int sent;
};

static int
fake_send(struct tally_transport *tp, const struct tally_tx_pkt *pkts,
	unsigned int n)
{
	struct fake_tp *f = (struct fake_tp *)tp;

	(void)pkts;
	if (f->fail_send)
		return -EBADF;
	f->sent += n;
	return (int)n;
}

static int
fake_recv(struct tally_transport *tp, struct tally_rx_pkt *pkts,
	unsigned int n, unsigned int timeout_us)
{
	(void)tp;
	(void)pkts;
	(void)n;
	(void)timeout_us;
	return -EIO;
}

static void
fake_destroy(struct tally_transport *tp)
{
	(void)tp;
}

static const struct tally_transport_ops fake_ops = {
	.send = fake_send, .recv = fake_recv, .destroy = fake_destroy,
};

/* Transport failures end the call with their error and break the ctx. */
static void
transport_errors(void **state)
{
	struct tally_ctx_opts o = {
		.dp_addr = "127.0.0.1", .job = JOB, .token = TOKEN,
		.world = 1,
	};
	struct fake_tp fake = { .tp = { .ops = &fake_ops, .name = "fake" } };
	struct tally_transport *udp;
	struct tally_ctx *ctx;
	int32_t v[1000] = { 0 };
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		assert_int_equal(tally_ctx_open(&o, &ctx), 0);
		udp = ctx->tp;
		ctx->tp = &fake.tp;
		fake.fail_send = i == 0;
		assert_int_equal(tally_allreduce_i32(ctx, v, 1000),
			i == 0 ? -EBADF : -EIO);
		assert_non_null(strstr(tally_ctx_error(ctx),
			i == 0 ? "fake transport: send" :
			"fake transport: receive"));
		assert_int_equal(tally_allreduce_i32(ctx, v, 1), -EPIPE);
		ctx->tp = udp;
		tally_ctx_close(ctx);
	}
	assert_int_equal(fake.sent, 4);	/* the window's first chunks */
}

/*
 * A worker descheduled past its call's deadline, its results waiting in
 * the socket (latetp.h): the call takes them and succeeds. A worker
 * really descheduled before its first wait (a loaded host) takes its
 * results without a late receive; it calls again, until one call had one.
 */
static void
late_reader_takes_waiting_results(void **state)
{
	struct loopagg_conf ac = agg_conf(1);
	struct loopagg *a = loopagg_start(&ac);
	struct latetp late = { .late_ms = 60 };
	struct tally_ctx_opts o;
	struct tally_ctx *ctx;
	int32_t v[3 * ELEMS + 5];
	unsigned int call;

	(void)state;
	assert_non_null(a);
	o = opts_for(a, 0, 1);
	o.timeout_ms = 20;	/* each late read is three times as long */
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	latetp_wrap(&late, ctx);
	for (call = 0; call < 20 && late.slept == 0; call++) {
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			v[i] = (int32_t)i - 7;
		if (tally_allreduce_i32(ctx, v, sizeof(v) / sizeof(v[0])) != 0)
			fail_msg("call %u: %s", call, tally_ctx_error(ctx));
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			assert_int_equal(v[i], (int32_t)i - 7);
	}
	print_message("# %u call(s), %u late receive(s)\n", call, late.slept);
	assert_true(late.slept > 0);
	wraptp_unwrap(&late.w, ctx);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

/*
 * A transport that adds an empty datagram to every burst its own brings
 * (as a 0-byte datagram from the dataplane's address, or one the
 * transport found not to be the dataplane's, reach the window).
 */
struct empty_tp {
	struct wraptp w;	/* first */
	uint64_t added;
};

static int
empty_recv(struct wraptp *w, struct tally_rx_pkt *pkts, unsigned int n,
	unsigned int timeout_us)
{
	struct empty_tp *e = (struct empty_tp *)w;
	int rc = tally_transport_recv(w->inner, pkts, n - 1, timeout_us);

	if (rc > 0) {
		pkts[rc].len = 0;
		e->added++;
		rc++;
	}
	return rc;
}

/* Empty datagrams are counted as ignored, and change nothing else. */
static void
empty_datagrams_counted(void **state)
{
	struct loopagg_conf ac = agg_conf(1);
	struct loopagg *a = loopagg_start(&ac);
	struct empty_tp e = { .added = 0 };
	struct tally_ctx_opts o;
	struct tally_ctx_stats st;
	struct tally_ctx *ctx;
	int32_t v[5 * ELEMS + 1];

	(void)state;
	assert_non_null(a);
	o = opts_for(a, 0, 1);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	wraptp_wrap(&e.w, ctx, "empty", empty_recv, WRAPTP_LENT);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		v[i] = (int32_t)(i * 3);
	assert_int_equal(tally_allreduce_i32(ctx, v, sizeof(v) / sizeof(v[0])),
		0);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(v[i], (int32_t)(i * 3));
	tally_ctx_stats(ctx, &st);
	assert_true(e.added > 0);
	assert_int_equal(st.ignored, e.added);
	assert_int_equal(st.results, 6);
	/* a loaded machine may retransmit; only those answer twice */
	assert_true(st.duplicates <= st.retransmits);
	wraptp_unwrap(&e.w, ctx);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

/* Two contexts cannot bind the same port. */
static void
bind_in_use(void **state)
{
	struct tally_ctx_opts o = {
		.dp_addr = "127.0.0.1", .bind_addr = "127.0.0.1",
		.bind_port = 47999, .job = JOB, .token = TOKEN, .world = 1,
	};
	struct tally_ctx *a, *b;

	(void)state;
	if (tally_ctx_open(&o, &a) != 0)
		skip();		/* the port is someone else's */
	assert_int_equal(tally_ctx_open(&o, &b), -EADDRINUSE);
	assert_null(b);
	assert_non_null(strstr(tally_ctx_error(NULL), "47999"));
	tally_ctx_close(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_args),
		cmocka_unit_test(bind_in_use),
		cmocka_unit_test(transport_errors),
		cmocka_unit_test(late_reader_takes_waiting_results),
		cmocka_unit_test(empty_datagrams_counted),
		cmocka_unit_test_teardown(i32_sizes, teardown),
		cmocka_unit_test_teardown(f32_sizes, teardown),
		cmocka_unit_test_teardown(sharded_two_aggregators, teardown),
		cmocka_unit_test_teardown(mixed_sequence, teardown),
		cmocka_unit_test_teardown(world_1, teardown),
		cmocka_unit_test_teardown(infinity_is_erange, teardown),
		cmocka_unit_test_teardown(f32_magnitudes, teardown),
		cmocka_unit_test_teardown(loss_5_percent, teardown),
		cmocka_unit_test_teardown(stale_results_dropped, teardown),
		cmocka_unit_test_teardown(auth_job_exact, teardown),
		cmocka_unit_test_teardown(auth_forgeries_dropped, teardown),
		cmocka_unit_test_teardown(plain_job_believes_forged_nack,
			teardown),
		cmocka_unit_test_teardown(window_1, teardown),
		cmocka_unit_test_teardown(window_256, teardown),
		cmocka_unit_test_teardown(three_ports, teardown),
		cmocka_unit_test_teardown(missing_rank_times_out, teardown),
		cmocka_unit_test_teardown(wrong_token_times_out, teardown),
		cmocka_unit_test_teardown(nack_bad_length, teardown),
		cmocka_unit_test_teardown(nack_bad_slot, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
