/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The codecs of the collectives against the real engine (loopagg:
 * tally_agg_process() behind UDP sockets on 127.0.0.1), one thread and
 * one context per rank:
 *
 * - the f32 reduce-scatter of q16, q8 and q4 jobs, wide and narrow,
 *   worlds 1, 2, 4, 7, sizes 0, 1, 257 and 10007 a rank: rank r's
 *   shard equals, bit for bit, shard r of tally_allreduce() of the same
 *   tensors (run as a second job with fresh contexts, so that the
 *   codecs' draws line up) and of a model built from <tally/quant.h>
 *   alone, and lies within the documented bound of the exact sum; error
 *   feedback over several calls (the context's memory, and a state of
 *   the caller's) against the allreduce's; 1 % loss both ways; a 64 MiB
 *   tensor; a missing member, and one that leaves between calls, give
 *   the others -ETIMEDOUT;
 * - the lossy q8 all-gather (tally_ctx_set_allgather_codec()): worlds 1,
 *   2, 4, 7, sizes 0, 1, 257, 10007: every rank, the owner included,
 *   holds the same bits, each element within max|x| / 254 (plus the
 *   binary32 roundings) of its chunk, which a lossless or coarser code
 *   would not give; a quarter of the bytes; a NaN or an infinity gives
 *   -ERANGE on every rank and the context goes on; ranks that disagree
 *   on the codec get an error, not a hang.
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
#include <tally/fixp.h>
#include <tally/quant.h>
#include <tally/tally.h>

#include "loopagg.h"

#define JOB		12
#define TOKEN		UINT64_C(0x00c0ffee0012c0de)
#define ELEMS		256
#define MAX_STEPS	8
#define JOB_SEED	5

enum op {
	OP_RS,		/* tally_reduce_scatter() */
	OP_RS_STATE,	/* tally_reduce_scatter_state(), a state of its own */
	OP_AR,		/* tally_allreduce() of the whole tensor */
	OP_AG,		/* tally_allgather() */
};

/* One rank's run of steps, and what it got. */
struct rank_run {
	pthread_t thread;
	struct tally_ctx_opts o;
	enum op op;
	const size_t *sizes;	/* count a rank at each step */
	unsigned int nsteps;
	unsigned int ag_bits;	/* tally_ctx_set_allgather_codec() */
	int bad_step;		/* the step where rank bad_rank sends an inf */
	unsigned int bad_rank;
	int open_rc;
	int rc[MAX_STEPS];
	float *out[MAX_STEPS];	/* owned */
	char err[MAX_STEPS][256];
	struct tally_ctx_stats st;
};

static struct rank_run runs[TALLY_MAX_WORKERS];

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * Rank r's n floats at step s: in [-1, 1] times 2^(s % 5), and from
 * element to element in runs of 300 of different binades (so that the
 * all-gather's chunks get scales of their own), some exact zeros.
 */
static void
gen(unsigned int r, unsigned int s, size_t n, float *x)
{
	uint64_t seed = mix((uint64_t)r << 40 | (uint64_t)s << 20 | 0x9);

	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(seed ^ i);
		float v = ((float)(h & 0xffffff) / 8388608.0f) - 1.0f;

		if (h % 97 == 0)
			v = 0.0f;
		x[i] = ldexpf(v, (int)(s % 5) + (int)((i / 300) % 6) - 3);
	}
}

/* Elements a rank sends and gets back at a step of count. */
static size_t
send_n(enum op op, size_t count, unsigned int w)
{
	return op == OP_AG ? count : count * w;
}

static size_t
recv_n(enum op op, size_t count, unsigned int w)
{
	return op == OP_RS || op == OP_RS_STATE ? count : count * w;
}

/* One step of k on ctx; st is OP_RS_STATE's state (made on demand). */
static int
run_step(struct rank_run *k, struct tally_ctx *ctx, struct tally_state **st,
	size_t count, float *send, float *out)
{
	size_t n = count * k->o.world;
	int rc;

	switch (k->op) {
	case OP_RS:
		return tally_reduce_scatter(ctx, send, out, count,
			TALLY_DT_F32);
	case OP_RS_STATE:
		if (*st == NULL) {
			rc = tally_state_new(ctx, n, st);
			if (rc != 0)
				return rc;
		}
		return tally_reduce_scatter_state(ctx, *st, send, out, count);
	case OP_AR:
		memcpy(out, send, n * sizeof(float));
		return tally_allreduce(ctx, out, n);
	default:
		return tally_allgather(ctx, send, out, count, TALLY_DT_F32);
	}
}

static void *
rank_main(void *arg)
{
	struct rank_run *k = arg;
	unsigned int w = k->o.world;
	struct tally_state *st = NULL;
	struct tally_ctx *ctx;

	k->open_rc = tally_ctx_open(&k->o, &ctx);
	if (k->open_rc != 0)
		return NULL;
	if (k->ag_bits != 0 &&
			tally_ctx_set_allgather_codec(ctx, k->ag_bits) != 0)
		k->open_rc = -EINVAL;
	for (unsigned int s = 0; s < k->nsteps; s++) {
		size_t c = k->sizes[s], sn = send_n(k->op, c, w);
		float *send = malloc(sn * sizeof(float) + 4);

		k->out[s] = calloc(recv_n(k->op, c, w) + 1, sizeof(float));
		gen(k->o.rank, s, sn, send);
		if ((int)s == k->bad_step && k->o.rank == k->bad_rank &&
				sn > 0)
			send[sn / 2] = INFINITY;
		k->rc[s] = run_step(k, ctx, &st, c, send, k->out[s]);
		snprintf(k->err[s], sizeof(k->err[s]), "%s",
			tally_ctx_error(ctx));
		free(send);
	}
	tally_state_free(st);
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_close(ctx);
	return NULL;
}

/* A job of world ranks on loopagg, all running op over sizes. */
struct job {
	const char *codec;
	int narrow;
	unsigned int world;
	double loss;
	unsigned int ag_bits;
	int bad_step;
	unsigned int timeout_ms;
	unsigned int present;	/* ranks that come: 0 = all */
	int ag_rank0;		/* ag_bits on rank 0 alone */
	int last_quits;		/* the last rank stops after step 0 */
};

/* Frees what runs[] holds. */
static void
runs_free(void)
{
	for (unsigned int r = 0; r < TALLY_MAX_WORKERS; r++)
		for (unsigned int s = 0; s < MAX_STEPS; s++)
			free(runs[r].out[s]);
	memset(runs, 0, sizeof(runs));
}

static void
run_job(const struct job *j, enum op op, const size_t *sizes,
	unsigned int nsteps, struct rank_run *out)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN,
		.world = (uint8_t)j->world, .window = 16, .max_elems = ELEMS,
		.narrow = (uint8_t)j->narrow, .loss_up = j->loss,
		.loss_down = j->loss, .seed = j->world * 7 + 1 };
	unsigned int present = j->present != 0 ? j->present : j->world;
	struct loopagg *a = loopagg_start(&ac);

	assert_non_null(a);
	for (unsigned int r = 0; r < present; r++) {
		out[r] = (struct rank_run){ .op = op, .sizes = sizes,
			.nsteps = j->last_quits && r == j->world - 1 ? 1 :
				nsteps,
			.ag_bits = j->ag_rank0 && r > 0 ? 0 : j->ag_bits,
			.bad_step = j->bad_step, .bad_rank = j->world - 1,
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = (uint8_t)j->world, .elems = ELEMS,
				.window = 16, .narrow = (uint8_t)j->narrow,
				.codec = j->codec, .rto_us = 2000,
				.timeout_ms = j->timeout_ms != 0 ?
					j->timeout_ms : 20000 } };
		assert_int_equal(pthread_create(&out[r].thread, NULL,
			rank_main, &out[r]), 0);
	}
	for (unsigned int r = 0; r < present; r++) {
		pthread_join(out[r].thread, NULL);
		assert_int_equal(out[r].open_rc, 0);
	}
	loopagg_stop(a, NULL);
}

/*
 * The quantized sum as a model from <tally/quant.h> alone: the scale
 * from every rank's whole tensor, each rank's encoding with its seed of
 * call number call, the sums as i32, decoded once. Also the largest
 * distance from the exact sum over the elements, against the bound of
 * docs/codecs/quant.md: W (1/s + 2^-21 max|x|).
 */
static void
rsq_model(unsigned int bits, unsigned int world, int narrow, unsigned int s,
	uint64_t call, size_t n, float *out)
{
	float *x = malloc(n * 4 + 4), m = 0.0f, scale;
	int8_t *q8 = malloc(n + 1);
	int16_t *q16 = malloc(n * 2 + 2);
	uint8_t *q4 = malloc(n / 2 + 1);
	int32_t *sum = calloc(n + 1, 4);
	double *exact = calloc(n + 1, sizeof(double));
	unsigned int levels;

	assert_int_equal(tally_quant_levels(bits, world, narrow, &levels), 0);
	for (unsigned int r = 0; r < world; r++) {
		gen(r, s, n, x);
		m = fmaxf(m, tally_fixp_absmax(x, n));
	}
	assert_int_equal(tally_quant_scale(m, levels, &scale), 0);
	for (unsigned int r = 0; r < world; r++) {
		uint64_t seed = tally_quant_seed(JOB_SEED, r, call);

		gen(r, s, n, x);
		for (size_t i = 0; i < n; i++)
			exact[i] += x[i];
		if (bits == 8)
			tally_quant_encode_i8(x, q8, n, scale, levels, seed, 0);
		else if (bits == 16)
			tally_quant_encode_i16(x, q16, n, scale, levels, seed,
				0);
		else
			tally_quant_encode_i4(x, q4, n, scale, levels, seed, 0);
		for (size_t i = 0; i < n; i++)
			sum[i] += bits == 8 ? q8[i] : bits == 16 ? q16[i] :
				(int8_t)(uint8_t)((q4[i / 2] >> (4 * (i & 1)))
					<< 4) >> 4;
	}
	tally_quant_decode_i32(sum, out, n, scale);
	for (size_t i = 0; i < n; i++)
		if (fabs(out[i] - exact[i]) > world * (1.0 / scale +
				ldexp(m, -21)))
			fail_msg("element %zu: %g, exact %g: past the bound",
				i, (double)out[i], exact[i]);
	free(x);
	free(q8);
	free(q16);
	free(q4);
	free(sum);
	free(exact);
}

static unsigned int
codec_bits(const char *codec)
{
	return codec[1] == '1' ? 16 : codec[1] == '8' ? 8 : 4;
}

/*
 * Runs sizes as reduce-scatters (op) and as allreduces, two jobs of
 * fresh contexts, and checks every rank's shard against the
 * allreduce's, bit for bit, and (model set: no memory) the model's.
 */
static void
rsq_check(const struct job *j, enum op op, const size_t *sizes,
	unsigned int nsteps, int model)
{
	static struct rank_run ar[TALLY_MAX_WORKERS];
	unsigned int w = j->world;
	uint64_t call = 0;

	run_job(j, op, sizes, nsteps, runs);
	run_job(j, OP_AR, sizes, nsteps, ar);
	for (unsigned int s = 0; s < nsteps; s++) {
		size_t c = sizes[s];
		float *ref = malloc(c * w * 4 + 4);

		if (model && c > 0)
			rsq_model(codec_bits(j->codec), w, j->narrow, s,
				call, c * w, ref);
		for (unsigned int r = 0; r < w; r++) {
			if (runs[r].rc[s] != 0 || ar[r].rc[s] != 0)
				fail_msg("%s world %u rank %u step %u: %d/%d "
					"(%s)", j->codec, w, r, s,
					runs[r].rc[s], ar[r].rc[s],
					runs[r].err[s]);
			if (memcmp(runs[r].out[s], ar[r].out[s] + c * r,
					c * 4) != 0)
				fail_msg("%s %s world %u rank %u step %u (%zu):"
					" not the allreduce's shard", j->codec,
					j->narrow ? "narrow" : "wide", w, r,
					s, c);
			if (model && memcmp(runs[r].out[s], ref + c * r,
					c * 4) != 0)
				fail_msg("%s world %u rank %u step %u: not "
					"the model", j->codec, w, r, s);
		}
		call += c > 0;
		free(ref);
	}
	for (unsigned int r = 0; r < w; r++)
		for (unsigned int s = 0; s < nsteps; s++) {
			free(ar[r].out[s]);
			ar[r].out[s] = NULL;
		}
	runs_free();
}

static const size_t sizes[] = { 0, 1, 257, 10007, 1, 256 };
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

/* q16, q8, q4, wide and narrow, worlds 1, 2, 4, 7. */
static void
rsq_worlds(void **state)
{
	static const unsigned int w[] = { 1, 2, 4, 7 };
	static const char *const codecs[] = { "q8,seed=5", "q4,seed=5",
		"q16,seed=5" };

	(void)state;
	for (unsigned int i = 0; i < 4; i++)
		for (int narrow = 0; narrow <= 1; narrow++)
			for (unsigned int c = 0; c < 3; c++) {
				struct job j = { .codec = codecs[c],
					.narrow = narrow, .world = w[i],
					.bad_step = -1 };

				rsq_check(&j, OP_RS, sizes, NSIZES, 1);
			}
}

/* The same with 1 % loss both ways. */
static void
rsq_lossy(void **state)
{
	struct job j = { .codec = "q8,seed=5", .narrow = 1, .world = 4,
		.loss = 0.01, .bad_step = -1 };

	(void)state;
	rsq_check(&j, OP_RS, sizes, NSIZES, 1);
	j.codec = "q4,seed=5";
	j.world = 7;
	j.narrow = 0;
	rsq_check(&j, OP_RS, sizes, NSIZES, 1);
}

/*
 * Error feedback over several calls of one tensor: the context's memory,
 * and a state of the caller's, both the allreduce's bits.
 */
static void
rsq_feedback(void **state)
{
	static const size_t same[] = { 257, 257, 257, 257 };
	struct job j = { .codec = "q8,ef=1,seed=5", .narrow = 1, .world = 4,
		.bad_step = -1 };

	(void)state;
	rsq_check(&j, OP_RS, same, 4, 0);
	rsq_check(&j, OP_RS_STATE, same, 4, 0);
	j.codec = "q4,ef=1,seed=5";
	j.world = 7;
	rsq_check(&j, OP_RS, same, 4, 0);
}

/*
 * An infinity in one rank's tensor: -ERANGE on every rank, nothing
 * summed; the context goes on in step (the next call is the model's).
 */
static void
rsq_infinity(void **state)
{
	static const size_t two[] = { 257, 300 };
	struct job j = { .codec = "q8,seed=5", .narrow = 1, .world = 4,
		.bad_step = 0 };
	float *ref = malloc(300 * 4 * 4);

	(void)state;
	run_job(&j, OP_RS, two, 2, runs);
	/* The failed call drew its seed: the next one is call 1. */
	rsq_model(8, 4, 1, 1, 1, 300 * 4, ref);
	for (unsigned int r = 0; r < 4; r++) {
		assert_int_equal(runs[r].rc[0], -ERANGE);
		assert_int_equal(runs[r].rc[1], 0);
		assert_memory_equal(runs[r].out[1], ref + 300 * r, 300 * 4);
	}
	free(ref);
	runs_free();
}

/* A 64 MiB tensor (4 Mi floats a shard) at world 4, q8 narrow. */
static void
rsq_large(void **state)
{
	static const size_t big[] = { (size_t)4 << 20 };
	struct job j = { .codec = "q8,seed=5", .narrow = 1, .world = 4,
		.bad_step = -1 };
	float *ref = malloc(((size_t)16 << 20) * 4);

	(void)state;
	run_job(&j, OP_RS, big, 1, runs);
	rsq_model(8, 4, 1, 0, 0, (size_t)16 << 20, ref);
	for (unsigned int r = 0; r < 4; r++) {
		assert_int_equal(runs[r].rc[0], 0);
		assert_memory_equal(runs[r].out[0], ref + (big[0] * r),
			big[0] * 4);
	}
	free(ref);
	runs_free();
}

/* A member that never comes: the others get -ETIMEDOUT. */
static void
rsq_missing(void **state)
{
	static const size_t one[] = { 1000 };
	struct job j = { .codec = "q8,seed=5", .world = 3, .bad_step = -1,
		.timeout_ms = 300, .present = 2 };

	(void)state;
	run_job(&j, OP_RS, one, 1, runs);
	for (unsigned int r = 0; r < 2; r++)
		assert_int_equal(runs[r].rc[0], -ETIMEDOUT);
	runs_free();
}

/*
 * A member that leaves after its first call (its context closed, as a
 * killed process's socket): the others finish that call, then get
 * -ETIMEDOUT in the next, never a hang.
 */
static void
rsq_killed(void **state)
{
	static const size_t two[] = { 5000, 5000 };
	struct job j = { .codec = "q8,seed=5", .narrow = 1, .world = 3,
		.bad_step = -1, .timeout_ms = 500, .last_quits = 1 };

	(void)state;
	run_job(&j, OP_RS, two, 2, runs);
	for (unsigned int r = 0; r < 3; r++)
		assert_int_equal(runs[r].rc[0], 0);
	for (unsigned int r = 0; r < 2; r++) {
		assert_int_equal(runs[r].rc[1], -ETIMEDOUT);
		assert_non_null(strstr(runs[r].err[1], "a member is missing"));
	}
	runs_free();
}

/*
 * The q8 all-gather's bound for one shard (count floats as the owner
 * sent them, x; as a rank got them, y): every chunk of elems - 4 values
 * within max|x| / 254 + 2^-22 max|x| + 2^-128 of x. With tight set,
 * whether some element is further than max|x| / 1000 (1 when it is).
 */
static int
agq_bound(const float *x, const float *y, size_t count, int tight)
{
	size_t d = ELEMS - 4;
	int far = 0;

	for (size_t c0 = 0; c0 < count; c0 += d) {
		size_t m = count - c0 < d ? count - c0 : d;
		double a = 0.0, bound;

		for (size_t i = 0; i < m; i++)
			a = fmax(a, fabs((double)x[c0 + i]));
		bound = a / 254 + ldexp(a, -22) + ldexp(1.0, -128);
		for (size_t i = 0; i < m; i++) {
			double e = fabs((double)y[c0 + i] - x[c0 + i]);

			if (e > bound)
				fail_msg("element %zu: %g for %g, bound %g",
					c0 + i, (double)y[c0 + i],
					(double)x[c0 + i], bound);
			far |= e > a / 1000;
		}
	}
	return tight ? far : 0;
}

/* Checks an all-gather job's results: the same bits, within the bound. */
static void
agq_check(unsigned int w, const size_t *sz, unsigned int nsteps)
{
	for (unsigned int s = 0; s < nsteps; s++) {
		size_t c = sz[s];
		float *x = malloc(c * 4 + 4);
		int far = 0;

		for (unsigned int r = 0; r < w; r++) {
			if (runs[r].rc[s] != 0)
				fail_msg("world %u rank %u step %u: %d (%s)",
					w, r, s, runs[r].rc[s],
					runs[r].err[s]);
			if (memcmp(runs[r].out[s], runs[0].out[s],
					c * w * 4) != 0)
				fail_msg("world %u step %u: ranks 0 and %u "
					"differ", w, s, r);
		}
		for (unsigned int p = 0; p < w; p++) {
			gen(p, s, c, x);
			far |= agq_bound(x, runs[0].out[s] + c * p, c, 1);
		}
		/* Lossy indeed: some element is off by more than 1/1000. */
		if (c > 100)
			assert_true(far);
		free(x);
	}
}

/* Worlds 1, 2, 4, 7, sizes 0, 1, 257, 10007 (and a chunk's exact fill). */
static void
agq_worlds(void **state)
{
	static const unsigned int w[] = { 1, 2, 4, 7 };
	static const size_t sz[] = { 0, 1, 257, 10007, 252, 504 };

	(void)state;
	for (unsigned int i = 0; i < 4; i++) {
		struct job j = { .world = w[i], .ag_bits = 8, .bad_step = -1 };

		run_job(&j, OP_AG, sz, 6, runs);
		agq_check(w[i], sz, 6);
		runs_free();
	}
}

/*
 * With 1 % loss both ways; and a rank receives about a quarter of the
 * exact all-gather's bytes.
 */
static void
agq_lossy_bytes(void **state)
{
	static const size_t sz[] = { 20000 };
	struct job j = { .world = 4, .ag_bits = 8, .loss = 0.01,
		.bad_step = -1 };
	uint64_t q8_bytes;

	(void)state;
	run_job(&j, OP_AG, sz, 1, runs);
	agq_check(4, sz, 1);
	runs_free();
	j.loss = 0.0;
	run_job(&j, OP_AG, sz, 1, runs);
	q8_bytes = runs[1].st.bytes_received;
	runs_free();
	j.ag_bits = 0;
	run_job(&j, OP_AG, sz, 1, runs);
	/* 1 + 4/252 bytes an element against 4, headers alike. */
	assert_true(q8_bytes * 100 < runs[1].st.bytes_received * 40);
	runs_free();
}

/*
 * A NaN or an infinity in a rank's shard: -ERANGE on every rank, the
 * context in step (the next call gives every rank the same bits).
 */
static void
agq_infinity(void **state)
{
	static const size_t sz[] = { 1000, 1000 };
	struct job j = { .world = 4, .ag_bits = 8, .bad_step = 0 };

	(void)state;
	run_job(&j, OP_AG, sz, 2, runs);
	for (unsigned int r = 0; r < 4; r++) {
		assert_int_equal(runs[r].rc[0], -ERANGE);
		assert_non_null(strstr(runs[r].err[0], "rank 3"));
		assert_true(isnan(runs[r].out[0][3 * 1000 + 500]));
		assert_int_equal(runs[r].rc[1], 0);
	}
	for (unsigned int p = 0; p < 4; p++) {
		float x[1000];

		gen(p, 1, 1000, x);
		(void)agq_bound(x, runs[0].out[1] + 1000 * p, 1000, 0);
	}
	for (unsigned int r = 0; r < 4; r++)
		assert_memory_equal(runs[r].out[1], runs[0].out[1], 4000 * 4);
	runs_free();
}

/* Ranks that disagree on the codec: an error on each, no hang. */
static void
agq_mismatch(void **state)
{
	static const size_t sz[] = { 1000 };
	struct job j = { .world = 2, .ag_bits = 8, .ag_rank0 = 1,
		.bad_step = -1, .timeout_ms = 1000 };

	(void)state;
	run_job(&j, OP_AG, sz, 1, runs);
	assert_true(runs[0].rc[0] == -EPROTO || runs[1].rc[0] == -EPROTO);
	assert_int_not_equal(runs[0].rc[0], 0);
	assert_int_not_equal(runs[1].rc[0], 0);
	runs_free();
}

/* The option: off by default, 0 or 8 only, a clear error otherwise. */
static void
agq_option(void **state)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN, .world = 1,
		.window = 4, .max_elems = ELEMS, .seed = 1 };
	struct loopagg *a = loopagg_start(&ac);
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .job = JOB,
		.token = TOKEN, .world = 1, .elems = ELEMS, .window = 4 };
	float x[3] = { 1.0f / 3, -2.5e-3f, 7.0f }, y[3];
	struct tally_ctx *ctx;

	(void)state;
	assert_non_null(a);
	o.dp_port = loopagg_port(a);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	assert_int_equal(tally_ctx_allgather_codec(ctx), 0);
	assert_int_equal(tally_allgather(ctx, x, y, 3, TALLY_DT_F32), 0);
	assert_memory_equal(x, y, sizeof(x));
	assert_int_equal(tally_ctx_set_allgather_codec(ctx, 4), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "not 4"));
	assert_int_equal(tally_ctx_set_allgather_codec(NULL, 8), -EINVAL);
	assert_int_equal(tally_ctx_set_allgather_codec(ctx, 8), 0);
	assert_int_equal(tally_ctx_allgather_codec(ctx), 8);
	assert_int_equal(tally_allgather(ctx, x, y, 3, TALLY_DT_F32), 0);
	/* World 1: the owner's own decoding, q8 of a 3-element chunk. */
	assert_true(memcmp(x, y, sizeof(x)) != 0);
	assert_true(fabsf(y[0] - x[0]) <= 7.0f / 254);
	/* In place. */
	memcpy(y, x, sizeof(x));
	assert_int_equal(tally_allgather(ctx, y, y, 3, TALLY_DT_F32), 0);
	assert_true(fabsf(y[0] - x[0]) <= 7.0f / 254);
	assert_int_equal(tally_ctx_set_allgather_codec(ctx, 0), 0);
	assert_int_equal(tally_allgather(ctx, x, y, 3, TALLY_DT_F32), 0);
	assert_memory_equal(x, y, sizeof(x));
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rsq_worlds),
		cmocka_unit_test(rsq_lossy),
		cmocka_unit_test(rsq_feedback),
		cmocka_unit_test(rsq_infinity),
		cmocka_unit_test(rsq_large),
		cmocka_unit_test(rsq_missing),
		cmocka_unit_test(rsq_killed),
		cmocka_unit_test(agq_worlds),
		cmocka_unit_test(agq_lossy_bytes),
		cmocka_unit_test(agq_infinity),
		cmocka_unit_test(agq_mismatch),
		cmocka_unit_test(agq_option),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
