/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_reduce_scatter(), tally_allgather() and tally_broadcast() against
 * the real engine (loopagg: tally_agg_process() behind UDP sockets on
 * 127.0.0.1), one thread and one context per rank.
 *
 * Every rank runs the same plan of calls, the collectives mixed with
 * allreduces on one context (which catches slot rounds that do not carry
 * over), over data made from (rank, step); the main thread then checks
 * every rank's result bit for bit against a reference: reduce-scatter's
 * shard of the wrapping i32 sums, or of the shared-scale fixed-point f32
 * sums (the scale taken over every rank's whole tensor); all-gather's
 * concatenation of the ranks' bytes (raw bits: NaN payloads, -0); the
 * root's bytes for a broadcast. Also with loss, duplicates and replays
 * both ways, in an authenticated job, and the failures: bad arguments,
 * a missing member times out. The bf16 and f16 reduce-scatter: each
 * rank's shard against the same shard of a tally_allreduce_typed() of
 * the same tensors on the same context, and against the fixed-point sum
 * rounded once (<tally/fixp16.h>), in 16- and 32-bit lanes, narrow and
 * wide jobs, with loss, and an infinity (-ERANGE on every rank).
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

#include <tally/fixp.h>
#include <tally/fixp16.h>
#include <tally/tally.h>

#include "loopagg.h"

#define JOB		11
#define TOKEN		UINT64_C(0x00c0ffee00c0ffee)
#define ELEMS		256
#define MAX_STEPS	32

enum kind { RS_I32, RS_F32, AG_F32, AG_BF16, BC_I32, BC_F16, AR_F32 };

struct step {
	enum kind kind;
	size_t count;		/* per rank (RS, AG), or n (BC, AR) */
	unsigned int root;	/* BC */
};

struct worker {
	pthread_t thread;
	struct tally_ctx_opts o;
	const struct step *steps;
	unsigned int nsteps;
	int open_rc;
	int rc[MAX_STEPS];
	void *out[MAX_STEPS];	/* owned */
	char err[MAX_STEPS][256];
	struct tally_ctx_stats st;
};

static struct worker workers[TALLY_MAX_WORKERS];

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static size_t
esize(enum kind k)
{
	return k == AG_BF16 || k == BC_F16 ? 2 : 4;
}

/* Elements a rank sends at step st of a world of w. */
static size_t
send_n(const struct step *st, unsigned int w)
{
	return st->kind == RS_I32 || st->kind == RS_F32 ? st->count * w :
		st->count;
}

/* Elements a rank gets back. */
static size_t
recv_n(const struct step *st, unsigned int w)
{
	return st->kind == AG_F32 || st->kind == AG_BF16 ? st->count * w :
		st->count;
}

/*
 * Rank r's data at step s: f32 in [-1, 1] scaled by step for the sums,
 * any bits for i32 sums and for what is moved as it is.
 */
static void
gen(const struct step *st, unsigned int r, unsigned int s, size_t n, void *buf)
{
	uint64_t seed = mix((uint64_t)r << 40 | (uint64_t)s << 20 | st->kind);

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(seed ^ i);

		if (st->kind == RS_F32 || st->kind == AR_F32)
			((float *)buf)[i] = (((float)(h & 0xffffff) /
				8388608.0f) - 1.0f) * (float)(1u << (s % 5));
		else if (esize(st->kind) == 2)
			((uint16_t *)buf)[i] = (uint16_t)h;
		else
			((uint32_t *)buf)[i] = (uint32_t)h;
	}
}

static int
call(struct tally_ctx *ctx, const struct step *st, const void *send, void *out)
{
	switch (st->kind) {
	case RS_I32:
		return tally_reduce_scatter(ctx, send, out, st->count,
			TALLY_DT_I32);
	case RS_F32:
		return tally_reduce_scatter(ctx, send, out, st->count,
			TALLY_DT_F32);
	case AG_F32:
		return tally_allgather(ctx, send, out, st->count, TALLY_DT_F32);
	case AG_BF16:
		return tally_allgather(ctx, send, out, st->count,
			TALLY_DT_BF16);
	case BC_I32:
		return tally_broadcast(ctx, out, st->count, TALLY_DT_I32,
			st->root);
	case BC_F16:
		return tally_broadcast(ctx, out, st->count, TALLY_DT_F16,
			st->root);
	default:
		return tally_allreduce_f32(ctx, out, st->count);
	}
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct tally_ctx *ctx;
	unsigned int world = w->o.world;

	w->open_rc = tally_ctx_open(&w->o, &ctx);
	if (w->open_rc != 0)
		return NULL;
	for (unsigned int s = 0; s < w->nsteps; s++) {
		const struct step *st = &w->steps[s];
		size_t sn = send_n(st, world), rn = recv_n(st, world);
		void *send = malloc(sn * 4 + 4);

		w->out[s] = calloc(rn + 1, 4);
		gen(st, w->o.rank, s, sn, send);
		/* Broadcast and allreduce work in place. */
		if (st->kind == BC_I32 || st->kind == BC_F16 ||
				st->kind == AR_F32)
			memcpy(w->out[s], send, sn * esize(st->kind));
		w->rc[s] = call(ctx, st, send, w->out[s]);
		snprintf(w->err[s], sizeof(w->err[s]), "%s",
			tally_ctx_error(ctx));
		free(send);
	}
	tally_ctx_stats(ctx, &w->st);
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * The fixed-point sum of every rank's data at step s (n elements each),
 * as every rank must get it: the shared exponent from the largest |x|
 * of all, the encodings summed as i32, decoded once. 0, or -ERANGE.
 */
static int
fixp_ref(const struct step *st, unsigned int world, unsigned int s, size_t n,
	float *out)
{
	float *x = malloc(n * 4 + 4), m = 0.0f;
	int32_t *q = malloc(n * 4 + 4), *sum = calloc(n + 1, 4);
	int e;

	for (unsigned int r = 0; r < world; r++) {
		gen(st, r, s, n, x);
		if (tally_fixp_absmax(x, n) > m)
			m = tally_fixp_absmax(x, n);
	}
	assert_int_equal(tally_fixp_exponent(m, world, &e), 0);
	for (unsigned int r = 0; r < world; r++) {
		gen(st, r, s, n, x);
		tally_fixp_encode(x, q, n, e);
		for (size_t i = 0; i < n; i++)
			sum[i] = (int32_t)((uint32_t)sum[i] + (uint32_t)q[i]);
	}
	tally_fixp_decode(sum, out, n, e);
	free(x);
	free(q);
	free(sum);
	return 0;
}

/* What rank r must hold after step s (rn elements of the step's size). */
static void
reference(const struct step *st, unsigned int world, unsigned int r,
	unsigned int s, uint8_t *ref)
{
	size_t sn = send_n(st, world), es = esize(st->kind);
	uint8_t *all = malloc(sn * 4 * (world + 1) + 4);

	switch (st->kind) {
	case RS_I32:
		memset(all, 0, sn * 4);
		for (unsigned int k = 0; k < world; k++) {
			uint32_t *x = (uint32_t *)(all + sn * 4);

			gen(st, k, s, sn, x);
			for (size_t i = 0; i < sn; i++)
				((uint32_t *)all)[i] += x[i];
		}
		memcpy(ref, all + st->count * r * 4, st->count * 4);
		break;
	case RS_F32:
		fixp_ref(st, world, s, sn, (float *)all);
		memcpy(ref, all + st->count * r * 4, st->count * 4);
		break;
	case AR_F32:
		fixp_ref(st, world, s, sn, (float *)ref);
		break;
	case AG_F32:
	case AG_BF16:
		for (unsigned int k = 0; k < world; k++)
			gen(st, k, s, sn, ref + st->count * k * es);
		break;
	default:
		gen(st, st->root, s, sn, ref);
		break;
	}
	free(all);
}

static void
check_results(unsigned int world, const struct step *steps,
	unsigned int nsteps)
{
	for (unsigned int s = 0; s < nsteps; s++) {
		size_t len = recv_n(&steps[s], world) * esize(steps[s].kind);
		uint8_t *ref = malloc(len + 4);

		for (unsigned int r = 0; r < world; r++) {
			if (workers[r].rc[s] != 0)
				fail_msg("rank %u step %u: %d (%s)", r, s,
					workers[r].rc[s], workers[r].err[s]);
			reference(&steps[s], world, r, s, ref);
			if (memcmp(workers[r].out[s], ref, len) != 0)
				fail_msg("rank %u step %u (kind %d, count %zu):"
					" not the reference", r, s,
					steps[s].kind, steps[s].count);
		}
		free(ref);
	}
}

static int
teardown(void **state)
{
	(void)state;
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++)
		for (unsigned int s = 0; s < MAX_STEPS; s++)
			free(workers[r].out[s]);
	memset(workers, 0, sizeof(workers));
	return 0;
}

static struct tally_auth_keys test_keys[TALLY_MAX_WORKERS];

/* Runs steps on world ranks against an aggregator of ac; checks. */
static void
run_world(struct loopagg_conf ac, unsigned int world, const struct step *steps,
	unsigned int nsteps, struct loopagg_stats *st)
{
	struct loopagg *a;

	ac.job = JOB;
	ac.token = TOKEN;
	ac.world = (uint8_t)world;
	if (ac.window == 0)
		ac.window = 16;
	ac.max_elems = ELEMS;
	a = loopagg_start(&ac);
	assert_non_null(a);
	for (unsigned int r = 0; r < world; r++) {
		workers[r].o = (struct tally_ctx_opts){
			.dp_addr = "127.0.0.1", .dp_port = loopagg_port(a),
			.job = JOB, .token = TOKEN, .rank = (uint8_t)r,
			.world = (uint8_t)world, .elems = ELEMS,
			.window = ac.window, .dp_nports = (uint16_t)ac.nports,
			.auth = ac.auth != NULL ? &test_keys[r] : NULL,
		};
		workers[r].steps = steps;
		workers[r].nsteps = nsteps;
		assert_int_equal(pthread_create(&workers[r].thread, NULL,
			worker_main, &workers[r]), 0);
	}
	for (unsigned int r = 0; r < world; r++) {
		pthread_join(workers[r].thread, NULL);
		assert_int_equal(workers[r].open_rc, 0);
	}
	loopagg_stop(a, st);
	check_results(world, steps, nsteps);
}

/* Sizes of every kind: 0, 1, a chunk and one, odd, a prime, several
 * windows' worth; mixed with allreduces on one context. */
static const struct step plan[] = {
	{ RS_I32, 0, 0 }, { RS_I32, 1, 0 }, { RS_I32, 257, 0 },
	{ RS_F32, 1, 0 }, { RS_F32, 257, 0 }, { RS_F32, 10007, 0 },
	{ AR_F32, 1000, 0 },
	{ AG_F32, 0, 0 }, { AG_F32, 1, 0 }, { AG_F32, 257, 0 },
	{ AG_BF16, 10007, 0 }, { AG_F32, 9001, 0 },
	{ BC_I32, 0, 0 }, { BC_I32, 1, 1 }, { BC_I32, 257, 2 },
	{ BC_F16, 10007, 3 }, { RS_I32, 4099, 0 }, { AR_F32, 5, 0 },
	{ BC_I32, 70001, 0 },
};
#define NPLAN	(sizeof(plan) / sizeof(plan[0]))

static void
worlds(void **state)
{
	static const unsigned int w[] = { 1, 2, 4, 7 };

	(void)state;
	for (unsigned int i = 0; i < 4; i++) {
		struct step p[NPLAN];

		/* Roots within the world. */
		memcpy(p, plan, sizeof(plan));
		for (unsigned int s = 0; s < NPLAN; s++)
			p[s].root %= w[i];
		run_world((struct loopagg_conf){ .seed = 1 }, w[i], p, NPLAN,
			NULL);
		teardown(NULL);
	}
}

/* The same with loss, duplicates and replays both ways, three ports. */
static void
lossy(void **state)
{
	struct loopagg_stats st;

	(void)state;
	run_world((struct loopagg_conf){ .seed = 7, .loss_up = 0.02,
		.loss_down = 0.02, .dup = 0.01, .replay = 0.01, .nports = 3 },
		4, plan, NPLAN, &st);
	assert_true(st.lost_up > 0 && st.lost_down > 0);
	assert_true(st.agg.resent > 0);
	assert_int_equal(st.agg.drops[TALLY_ST_NOT_OWNER] +
		st.agg.drops[TALLY_ST_BAD_OWNER] +
		st.agg.drops[TALLY_ST_WRONG_OP] +
		st.agg.drops[TALLY_ST_MISMATCH] + st.agg.nacks, 0);
}

/* An authenticated job: every DONE and PART_RESULT checked by its tag. */
static void
authenticated(void **state)
{
	struct loopagg_stats st;

	(void)state;
	for (unsigned int r = 0; r < 4; r++)
		for (unsigned int i = 0; i < 16; i++) {
			test_keys[r].up[i] = (uint8_t)(0x10 * r + i);
			test_keys[r].down[i] = (uint8_t)(0x80 + 0x10 * r + i);
			test_keys[r].result[i] = (uint8_t)(0xf0 ^ i);
		}
	run_world((struct loopagg_conf){ .seed = 3, .loss_down = 0.01,
		.auth = test_keys }, 4, plan, NPLAN, &st);
	for (unsigned int r = 0; r < 4; r++)
		assert_int_equal(workers[r].st.forged, 0);
}

/*
 * A reduce-scatter member receives its shard and a header a chunk of
 * the others: far less than an allreduce of the same tensor.
 */
static void
receives_its_shard(void **state)
{
	static const struct step rs[] = { { RS_I32, 64 * ELEMS, 0 } };
	static const struct step ar[] = { { AR_F32, 4 * 64 * ELEMS, 0 } };
	uint64_t rs_bytes, ar_bytes;

	(void)state;
	run_world((struct loopagg_conf){ .seed = 1 }, 4, rs, 1, NULL);
	rs_bytes = workers[1].st.bytes_received;
	teardown(NULL);
	run_world((struct loopagg_conf){ .seed = 1 }, 4, ar, 1, NULL);
	ar_bytes = workers[1].st.bytes_received;
	/* 1/4 of the payload, plus 3 x 40 header bytes per 1064. */
	assert_true(rs_bytes * 100 < ar_bytes * 36);
	assert_true(rs_bytes * 100 > ar_bytes * 25);
}

/* Bad arguments are refused before any round; the context goes on. */
static void
bad_args(void **state)
{
	struct loopagg *a;
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN, .world = 1,
		.window = 4, .max_elems = ELEMS, .seed = 1 };
	struct tally_ctx *ctx;
	float x[4] = { 1, 2, 3, 4 }, y[4];

	(void)state;
	a = loopagg_start(&ac);
	assert_non_null(a);
	workers[0].o = (struct tally_ctx_opts){ .dp_addr = "127.0.0.1",
		.dp_port = loopagg_port(a), .job = JOB, .token = TOKEN,
		.world = 1, .elems = ELEMS, .window = 4 };
	assert_int_equal(tally_ctx_open(&workers[0].o, &ctx), 0);
	assert_int_equal(tally_reduce_scatter(NULL, x, y, 4, TALLY_DT_F32),
		-EINVAL);
	assert_int_equal(tally_reduce_scatter(ctx, x, NULL, 4, TALLY_DT_F32),
		-EINVAL);
	assert_int_equal(tally_allgather(ctx, NULL, y, 4, TALLY_DT_I32),
		-EINVAL);
	assert_int_equal(tally_allgather(ctx, x, y, 4, (enum tally_dtype)9),
		-EINVAL);
	assert_int_equal(tally_broadcast(ctx, x, 4, TALLY_DT_F32, 1),
		-EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "root 1"));
	assert_int_equal(tally_allgather(ctx, x, y, (size_t)1 << 32,
		TALLY_DT_I32), -EINVAL);
	/* Still in step: the calls work. */
	assert_int_equal(tally_reduce_scatter(ctx, x, y, 4, TALLY_DT_F32), 0);
	assert_memory_equal(x, y, sizeof(x));
	assert_int_equal(tally_allgather(ctx, x, y, 4, TALLY_DT_F32), 0);
	assert_memory_equal(x, y, sizeof(x));
	assert_int_equal(tally_broadcast(ctx, x, 4, TALLY_DT_F32, 0), 0);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

/* A member that never comes: every other one gets -ETIMEDOUT. */
static void
missing_member(void **state)
{
	static const struct step p[] = { { RS_F32, 300, 0 } };
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN, .world = 3,
		.window = 8, .max_elems = ELEMS, .seed = 1 };
	struct loopagg *a = loopagg_start(&ac);

	(void)state;
	assert_non_null(a);
	for (unsigned int r = 0; r < 2; r++) {
		workers[r].o = (struct tally_ctx_opts){
			.dp_addr = "127.0.0.1", .dp_port = loopagg_port(a),
			.job = JOB, .token = TOKEN, .rank = (uint8_t)r,
			.world = 3, .elems = ELEMS, .window = 8,
			.timeout_ms = 300 };
		workers[r].steps = p;
		workers[r].nsteps = 1;
		assert_int_equal(pthread_create(&workers[r].thread, NULL,
			worker_main, &workers[r]), 0);
	}
	for (unsigned int r = 0; r < 2; r++) {
		pthread_join(workers[r].thread, NULL);
		assert_int_equal(workers[r].rc[0], -ETIMEDOUT);
	}
	loopagg_stop(a, NULL);
}

/* The 16-bit reduce-scatter: sizes per rank, one of them with an inf. */
#define RS16_STEPS	5
static const size_t rs16_sizes[RS16_STEPS] = { 0, 1, 257, 3001, 1000 };
#define RS16_INF	4	/* the step where the last rank sends an inf */

struct rs16_rank {
	pthread_t thread;
	struct tally_ctx_opts o;
	enum tally_dtype dt;
	unsigned int lanes;	/* tally_ctx_set_lanes() */
	unsigned int used;	/* tally_ctx_lanes() */
	int open_rc;
	int rc[RS16_STEPS], ar_rc[RS16_STEPS];
	uint16_t *rs[RS16_STEPS];	/* reduce-scatter's shard, owned */
	uint16_t *ar[RS16_STEPS];	/* allreduce of the same, owned */
	char err[256];
};

/*
 * Rank r's world x count elements of dt at step s: finite values of a
 * few binades, zeros, -0 and NaNs (which count as 0); with inf, one
 * +inf in the middle (rank world - 1 only).
 */
static void
gen16(enum tally_dtype dt, unsigned int r, unsigned int s, size_t n, int inf,
	uint16_t *x)
{
	int f16 = dt == TALLY_DT_F16;
	uint64_t seed = mix((uint64_t)r << 40 | (uint64_t)s << 20 | 0x16 | f16);

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(seed ^ i);
		unsigned int sign = (unsigned int)(h >> 63) << 15;

		if (h % 61 == 0)
			x[i] = f16 ? 0x7e01 : 0x7fc1;
		else if (h % 53 == 0)
			x[i] = (uint16_t)sign;
		else if (f16)
			x[i] = (uint16_t)(sign | (8 + (h >> 8) % 10) << 10 |
				(h >> 20 & 0x3ff));
		else
			x[i] = (uint16_t)(sign | (118 + (h >> 8) % 10) << 7 |
				(h >> 20 & 0x7f));
	}
	if (inf && n > 0)
		x[n / 2] = f16 ? 0x7c00 : 0x7f80;
}

static void *
rs16_main(void *arg)
{
	struct rs16_rank *k = arg;
	unsigned int w = k->o.world;
	struct tally_ctx *ctx;

	k->open_rc = tally_ctx_open(&k->o, &ctx);
	if (k->open_rc != 0)
		return NULL;
	if (k->lanes != 0 && tally_ctx_set_lanes(ctx, k->lanes) != 0)
		k->open_rc = -EINVAL;
	k->used = tally_ctx_lanes(ctx, k->dt);
	for (unsigned int s = 0; s < RS16_STEPS; s++) {
		size_t c = rs16_sizes[s], n = c * w;
		uint16_t *send = malloc(n * 2 + 2);

		k->rs[s] = calloc(c + 1, 2);
		k->ar[s] = malloc(n * 2 + 2);
		gen16(k->dt, k->o.rank, s, n,
			s == RS16_INF && k->o.rank == w - 1, send);
		memcpy(k->ar[s], send, n * 2);
		k->rc[s] = tally_reduce_scatter(ctx, send, k->rs[s], c, k->dt);
		if (k->rc[s] != 0)
			snprintf(k->err, sizeof(k->err), "%s",
				tally_ctx_error(ctx));
		k->ar_rc[s] = tally_allreduce_typed(ctx, k->ar[s], n, k->dt);
		free(send);
	}
	tally_ctx_close(ctx);
	return NULL;
}

/*
 * The fixed-point sum rounded once, from <tally/fixp16.h> alone: the
 * exponent from every rank's whole tensor, the encodings summed as
 * integers, decoded. n elements into out.
 */
static void
rs16_ref(enum tally_dtype dt, unsigned int world, unsigned int lanes,
	int narrow, unsigned int s, size_t n, uint16_t *out)
{
	uint16_t *x = malloc(n * 2 + 2);
	int32_t *q = malloc(n * 4 + 4), *sum = calloc(n + 1, 4);
	float m = 0.0f;
	int e;

	for (unsigned int r = 0; r < world; r++) {
		gen16(dt, r, s, n, 0, x);
		if (tally_fixp16_absmax(dt, x, n) > m)
			m = tally_fixp16_absmax(dt, x, n);
	}
	assert_int_equal(tally_fixp16_exponent(m, world, lanes, narrow, &e),
		0);
	for (unsigned int r = 0; r < world; r++) {
		gen16(dt, r, s, n, 0, x);
		assert_int_equal(tally_fixp16_encode(dt, x, q, 32, n, e), 0);
		for (size_t i = 0; i < n; i++)
			sum[i] += q[i];
	}
	assert_int_equal(tally_fixp16_decode(dt, sum, 32, out, n, e), 0);
	free(x);
	free(q);
	free(sum);
}

/* Checks rank r's steps: shard = allreduce's shard = the reference. */
static void
rs16_check(const struct rs16_rank *k, unsigned int world, int narrow,
	unsigned int r)
{
	for (unsigned int s = 0; s < RS16_STEPS; s++) {
		size_t c = rs16_sizes[s], n = c * world;
		uint16_t *ref = malloc(n * 2 + 2);

		if (s == RS16_INF && c > 0) {
			assert_int_equal(k->rc[s], -ERANGE);
			assert_int_equal(k->ar_rc[s], -ERANGE);
			free(ref);
			continue;
		}
		if (k->rc[s] != 0 || k->ar_rc[s] != 0)
			fail_msg("%s world %u rank %u step %u: %d/%d (%s)",
				k->dt == TALLY_DT_F16 ? "f16" : "bf16", world,
				r, s, k->rc[s], k->ar_rc[s], k->err);
		rs16_ref(k->dt, world, k->used, narrow, s, n, ref);
		if (memcmp(k->rs[s], k->ar[s] + c * r, c * 2) != 0 ||
				memcmp(k->rs[s], ref + c * r, c * 2) != 0)
			fail_msg("%s world %u lanes %u %s rank %u step %u: "
				"shard not the allreduce's/the reference",
				k->dt == TALLY_DT_F16 ? "f16" : "bf16", world,
				k->used, narrow ? "narrow" : "wide", r, s);
		free(ref);
	}
}

/* One job: world ranks of dt with lanes (0: the rule), narrow, loss. */
static void
rs16_run(enum tally_dtype dt, unsigned int world, unsigned int lanes,
	int narrow, double loss)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN,
		.world = (uint8_t)world, .window = 16, .max_elems = ELEMS,
		.narrow = (uint8_t)narrow, .loss_up = loss, .loss_down = loss,
		.seed = world * 31 + lanes + (unsigned int)narrow };
	static struct rs16_rank k[TALLY_MAX_WORKERS];
	struct loopagg *a = loopagg_start(&ac);

	assert_non_null(a);
	for (unsigned int r = 0; r < world; r++) {
		k[r] = (struct rs16_rank){ .dt = dt, .lanes = lanes,
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = (uint8_t)world, .elems = ELEMS,
				.window = 16, .narrow = (uint8_t)narrow,
				.rto_us = 2000, .timeout_ms = 20000 } };
		assert_int_equal(pthread_create(&k[r].thread, NULL, rs16_main,
			&k[r]), 0);
	}
	for (unsigned int r = 0; r < world; r++)
		pthread_join(k[r].thread, NULL);
	loopagg_stop(a, NULL);
	for (unsigned int r = 0; r < world; r++) {
		assert_int_equal(k[r].open_rc, 0);
		assert_int_equal(k[r].used, lanes != 0 ? lanes :
			tally_fixp16_lanes(dt, world, narrow));
		rs16_check(&k[r], world, narrow, r);
		for (unsigned int s = 0; s < RS16_STEPS; s++) {
			free(k[r].rs[s]);
			free(k[r].ar[s]);
		}
	}
}

/* bf16 and f16 in worlds 1, 2, 4, 7: the rule's lanes, 16 and 32. */
static void
rs16_worlds(void **state)
{
	static const unsigned int w[] = { 1, 2, 4, 7 };
	static const unsigned int lanes[] = { 0, 16, 32 };

	(void)state;
	for (unsigned int i = 0; i < 4; i++)
		for (int narrow = 0; narrow <= 1; narrow++)
			for (unsigned int l = 0; l < 3; l++) {
				rs16_run(TALLY_DT_BF16, w[i], lanes[l], narrow,
					0.0);
				rs16_run(TALLY_DT_F16, w[i], lanes[l], narrow,
					0.0);
			}
}

/* The same with 1% loss both ways. */
static void
rs16_lossy(void **state)
{
	(void)state;
	rs16_run(TALLY_DT_BF16, 4, 16, 1, 0.01);
	rs16_run(TALLY_DT_F16, 4, 32, 1, 0.01);
	rs16_run(TALLY_DT_BF16, 7, 32, 0, 0.01);
	rs16_run(TALLY_DT_F16, 2, 16, 1, 0.01);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(worlds, teardown),
		cmocka_unit_test_teardown(lossy, teardown),
		cmocka_unit_test_teardown(authenticated, teardown),
		cmocka_unit_test_teardown(receives_its_shard, teardown),
		cmocka_unit_test_teardown(bad_args, teardown),
		cmocka_unit_test_teardown(missing_member, teardown),
		cmocka_unit_test(rs16_worlds),
		cmocka_unit_test(rs16_lossy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
