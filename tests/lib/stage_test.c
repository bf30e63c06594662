/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device tensors without a device: libtally's device path (the staging
 * pipeline of gpu/lib/stage.c and the codecs' device steps) driven
 * through the fake device of fakedev.c, against the host path
 * (tally_allreduce(), tally_allreduce_state(), _f32, _i32) through the
 * real engine behind loopagg, bit for bit, call after call: sizes 0, 1,
 * 257 and primes, segments shorter and longer than the window, many
 * segments, loss, every codec with a device path, with and without
 * memory, a refused scale round, a device that runs ahead of the host or
 * lags behind it, calls on alternating streams that the host never waits
 * for in between. And the refusals: codecs without a device path, host
 * and device states mixed up, a libtally or machine without CUDA; a
 * device failure before the call's first round (the context stays
 * usable) and after it (the context is broken); the staging registered
 * once; the counters; the pipeline's cost against the host path.
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
#include <time.h>
#include <unistd.h>

#include <tally/codec.h>
#include <tally/tally.h>
#include <tally/tally_cuda.h>

#include "tally_config.h"
#include "fakedev.h"
#include "loopagg.h"

#define JOB	12
#define TOKEN	UINT64_C(0x1212000012120000)
#define WORLD	3
#define CALLS	4
#define ELEMS	256
#define WINDOW	8
#define N	40009		/* a prime: 157 chunks, 20 windows */

/* What a run does: the same on the host and on the fake device. */
struct plan {
	const char *spec;
	enum tally_dev_what what;
	int narrow;
	double loss;
	enum fakedev_mode mode;
	size_t seg;		/* elements a segment */
	unsigned int streams;	/* 2: alternate, synchronized at the end */
	int inf_call;		/* the call where rank 1 has an inf, or -1 */
	size_t lens[CALLS];	/* elements of each call */
};

/* The rows of the powersgd states runs make (0: the job's). */
static uint32_t state_rows;

/* One rank of one side (host or device). */
struct rank {
	pthread_t thread;
	const struct plan *p;
	struct tally_ctx_opts o;
	unsigned int r;
	int dev;
	void *out[CALLS];
	int rc[CALLS];
	char err[CALLS][256];
	struct tally_ctx_stats st;
	struct tally_ctx_info info;
	char open_err[256];
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
 * Rank r's tensor at call c: for f32, noise of mixed magnitudes, larger
 * in some blocks, a smooth low-rank part (PowerSGD), an infinity when
 * the plan says; for i32, integers of up to 2^24.
 */
static void
gen(const struct plan *p, unsigned int r, unsigned int c, size_t n, void *out)
{
	for (size_t k = 0; k < n; k++) {
		uint64_t h = mix((uint64_t)r << 48 ^ (uint64_t)c << 40 ^ k);
		float x = ((float)(h & 0xffff) / 65536.0f - 0.5f) * 1e-2f;

		if (p->what == TALLY_DEV_I32) {
			((int32_t *)out)[k] = (int32_t)(h >> 40) - (1 << 23);
			continue;
		}
		x += 0.25f * sinf((float)(k % 97) * 0.1f + (float)r) *
			cosf((float)(k / 97) * 0.05f);
		if ((k / 256 * 5 + r * 3 + c) % 13 == 0)
			x *= 50.0f;
		((float *)out)[k] = x;
	}
	if ((int)c == p->inf_call && r == 1 && n > 100)
		((float *)out)[100] = INFINITY;
}

/* The host side's call c. */
static int
host_call(struct tally_ctx *ctx, struct tally_state *st, const struct plan *p,
	void *buf, size_t n)
{
	switch (p->what) {
	case TALLY_DEV_I32:
		return tally_allreduce_i32(ctx, buf, n);
	case TALLY_DEV_F32:
		return tally_allreduce_f32(ctx, buf, n);
	case TALLY_DEV_CODEC:
		return tally_allreduce(ctx, buf, n);
	default:
		return tally_allreduce_state(ctx, st, buf, n);
	}
}

/* The calls of one rank, with ctx and st set up (st may be NULL). */
static void
calls(struct rank *k, struct tally_ctx *ctx, struct tally_state *st,
	struct fakedev_stream **s)
{
	const struct plan *p = k->p;

	for (unsigned int c = 0; c < CALLS; c++) {
		struct fakedev_stream *sc = s != NULL ? s[c % p->streams] :
			NULL;

		gen(p, k->r, c, p->lens[c], k->out[c]);
		k->rc[c] = k->dev ? tally_lib_dev_call(ctx, &fakedev_ops,
			p->what, st, k->out[c], p->lens[c], sc) :
			host_call(ctx, st, p, k->out[c], p->lens[c]);
		snprintf(k->err[c], sizeof(k->err[c]), "%s",
			tally_ctx_error(ctx));
		if (sc != NULL && p->streams == 1)
			fakedev_stream_sync(sc);	/* the caller's sync */
		if (k->rc[c] != 0 && k->rc[c] != -ERANGE)
			break;
	}
	for (unsigned int i = 0; s != NULL && i < p->streams; i++)
		fakedev_stream_sync(s[i]);
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	const struct plan *p = k->p;
	struct fakedev_stream *s[2] = { NULL, NULL };
	struct tally_state *st = NULL;
	struct tally_ctx *ctx;
	int rc = 0;

	for (unsigned int c = 0; c < CALLS; c++)
		k->rc[c] = -ECANCELED;
	if (tally_ctx_open(&k->o, &ctx) != 0) {
		snprintf(k->open_err, sizeof(k->open_err), "%s",
			tally_ctx_error(NULL));
		return NULL;
	}
	if (k->dev) {
		rc = tally_lib_dev_bind(ctx, &fakedev_ops, p->seg);
		for (unsigned int i = 0; rc == 0 && i < p->streams; i++)
			s[i] = fakedev_stream_new(p->mode, mix(k->r + 7 * i));
	}
	if (rc == 0 && p->what == TALLY_DEV_STATE)
		rc = k->dev ? tally_lib_dev_state_rows(ctx, &fakedev_ops,
			p->lens[0], state_rows, &st) :
			tally_state_new_rows(ctx, p->lens[0], state_rows, &st);
	if (rc != 0)
		snprintf(k->open_err, sizeof(k->open_err), "%s",
			tally_ctx_error(ctx));
	else
		calls(k, ctx, st, k->dev ? s : NULL);
	tally_ctx_stats(ctx, &k->st);
	tally_ctx_info(ctx, &k->info);
	/*
	 * The streams outlive the context: its close waits for its last
	 * call's event, which is on one of them (calls() has synchronized
	 * them, so the state's memory is no longer in use).
	 */
	tally_state_free(st);
	tally_ctx_close(ctx);
	fakedev_stream_free(s[0]);
	fakedev_stream_free(s[1]);
	return NULL;
}

/* Starts WORLD ranks of one side against a, into k[]. */
static void
start_side(const struct plan *p, struct loopagg *a, int dev, struct rank *k)
{
	for (unsigned int r = 0; r < WORLD; r++) {
		k[r] = (struct rank){
			.p = p, .r = r, .dev = dev,
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = WORLD, .window = WINDOW,
				.elems = ELEMS, .rto_us = 500,
				.timeout_ms = 5000,
				.narrow = (uint8_t)p->narrow,
				.codec = p->spec },
		};
		for (unsigned int c = 0; c < CALLS; c++) {
			k[r].out[c] = malloc(p->lens[c] * 4 + 4);
			assert_non_null(k[r].out[c]);
		}
		assert_int_equal(pthread_create(&k[r].thread, NULL, rank_main,
			&k[r]), 0);
	}
}

/* Every call of every rank: the same code, and the same bits. */
static void
compare(const struct plan *p, struct rank *h, struct rank *d)
{
	for (unsigned int r = 0; r < WORLD; r++) {
		if (h[r].open_err[0] || d[r].open_err[0])
			fail_msg("%s: rank %u: %s%s", p->spec, r,
				h[r].open_err, d[r].open_err);
		for (unsigned int c = 0; c < CALLS; c++) {
			size_t n = p->lens[c];
			const uint32_t *x = h[r].out[c], *y = d[r].out[c];

			if (h[r].rc[c] != d[r].rc[c])
				fail_msg("%s: rank %u call %u: host %d (%s), "
					"device %d (%s)", p->spec, r, c,
					h[r].rc[c], h[r].err[c], d[r].rc[c],
					d[r].err[c]);
			if (h[r].rc[c] == -ECANCELED)
				fail_msg("%s: rank %u call %u not run", p->spec,
					r, c);
			for (size_t i = 0; h[r].rc[c] == 0 && i < n; i++)
				if (x[i] != y[i])
					fail_msg("%s: rank %u call %u element "
						"%zu of %zu: host %08x, device "
						"%08x", p->spec, r, c, i, n,
						x[i], y[i]);
		}
	}
}

/* Runs p on both sides, each against its own aggregator; compares. */
static void
run_plan(const struct plan *p, struct rank *d)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = WORLD, .window = WINDOW,
		.max_elems = ELEMS, .narrow = p->narrow, .loss_up = p->loss,
		.loss_down = p->loss, .dup = p->loss, .seed = 11,
	};
	struct loopagg *ah = loopagg_start(&ac), *ad;
	struct rank h[WORLD];

	assert_non_null(ah);
	ac.seed = 12;
	ad = loopagg_start(&ac);
	assert_non_null(ad);
	start_side(p, ah, 0, h);
	start_side(p, ad, 1, d);
	for (unsigned int r = 0; r < WORLD; r++) {
		pthread_join(h[r].thread, NULL);
		pthread_join(d[r].thread, NULL);
	}
	loopagg_stop(ah, NULL);
	loopagg_stop(ad, NULL);
	compare(p, h, d);
	for (unsigned int r = 0; r < WORLD; r++)
		for (unsigned int c = 0; c < CALLS; c++) {
			free(h[r].out[c]);
			free(d[r].out[c]);
		}
}

/* run_plan() when the device side's ranks are of no further interest. */
static void
check(const struct plan *p)
{
	struct rank d[WORLD];

	run_plan(p, d);
}

#define SIZES	{ 0, 1, 257, N }

static void
fixp_sizes(void **state)
{
	(void)state;
	/* Segments of 5 chunks, shorter than the window: 32 of them. */
	check(&(struct plan){ "fixp", TALLY_DEV_CODEC, 0, 0, FAKEDEV_EAGER,
		1280, 1, -1, SIZES });
	check(&(struct plan){ "fixp", TALLY_DEV_CODEC, 0, 0, FAKEDEV_LAZY,
		1280, 1, -1, SIZES });
	/* 2.5 windows a segment; the default segment (one for all). */
	check(&(struct plan){ "fixp", TALLY_DEV_CODEC, 0, 0, FAKEDEV_RANDOM,
		5000, 1, -1, SIZES });
	check(&(struct plan){ "fixp", TALLY_DEV_F32, 0, 0, FAKEDEV_LAZY,
		0, 1, -1, { 10007, 1, N, 257 } });
}

static void
i32_sizes(void **state)
{
	(void)state;
	check(&(struct plan){ "fixp", TALLY_DEV_I32, 0, 0, FAKEDEV_EAGER,
		1280, 1, -1, SIZES });
	check(&(struct plan){ "fixp", TALLY_DEV_I32, 0, 0, FAKEDEV_LAZY,
		5120, 2, -1, { N, 257, 10007, 1 } });
}

/* Loss both ways, duplicates: the window recovers, the bits hold. */
static void
loss(void **state)
{
	(void)state;
	check(&(struct plan){ "fixp", TALLY_DEV_CODEC, 0, 0.05,
		FAKEDEV_RANDOM, 5120, 1, -1, SIZES });
	check(&(struct plan){ "q8", TALLY_DEV_CODEC, 1, 0.02, FAKEDEV_LAZY,
		2560, 1, -1, { N, N, 257, 1 } });
	check(&(struct plan){ "fixp", TALLY_DEV_I32, 0, 0.05, FAKEDEV_EAGER,
		5120, 2, -1, { N, 1, 257, N } });
}

/*
 * Calls on alternating streams, never waited for between calls, on a
 * device that lags: each call's decoding must still read its own sums.
 */
static void
streams(void **state)
{
	(void)state;
	check(&(struct plan){ "fixp", TALLY_DEV_CODEC, 0, 0, FAKEDEV_LAZY,
		1280, 2, -1, { N, 257, N, 10007 } });
	check(&(struct plan){ "q4,ef=1", TALLY_DEV_STATE, 0, 0, FAKEDEV_LAZY,
		2560, 2, -1, { N, N, N, N } });
	check(&(struct plan){ "powersgd", TALLY_DEV_STATE, 0, 0,
		FAKEDEV_RANDOM, 1280, 2, -1, { N, N, N, N } });
}

/* The codecs without memory, wide and narrow sums. */
static void
codecs(void **state)
{
	static const char *const specs[] = {
		"q16", "q8,seed=3", "q4", "ternary", "sign",
		"randk,density=0.1", "randk,seed=5",
	};

	(void)state;
	for (unsigned int i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		for (int narrow = 0; narrow < 2; narrow++)
			check(&(struct plan){ specs[i], TALLY_DEV_CODEC,
				narrow, 0, (enum fakedev_mode)(i % 3),
				1280 + 1280 * (unsigned int)narrow, 1, -1,
				{ N, 1, 257, 10007 } });
}

/* Codecs with memory, in states and in the context's own memory. */
static void
memory(void **state)
{
	static const char *const specs[] = {
		"q8,ef=1,seed=4", "q4,ef=1", "q16,ef=1", "ternary,ef=1",
		"2bit,threshold=0.0625", "randk,density=0.1,ef=1",
		"powersgd", "powersgd,rank=1,ef=0", "powersgd,rank=8,rows=64",
	};

	(void)state;
	for (unsigned int i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		check(&(struct plan){ specs[i], TALLY_DEV_STATE, (int)(i % 2),
			0, (enum fakedev_mode)(i % 3), 2560, 1, -1,
			{ N, N, N, N } });
		/* The context's memory starts afresh for a new length. */
		check(&(struct plan){ specs[i], TALLY_DEV_CODEC, 0, 0.02,
			(enum fakedev_mode)((i + 1) % 3), 1280, 1, -1,
			{ N, N, 10007, 10007 } });
	}
	/* A device state of its own shape (tally_state_new_rows_cuda()). */
	state_rows = 157;
	check(&(struct plan){ "powersgd", TALLY_DEV_STATE, 0, 0,
		FAKEDEV_RANDOM, 2560, 1, -1, { N, N, N, N } });
	state_rows = 0;
}

/* An infinity at call 1: -ERANGE everywhere, the gradient kept. */
static void
erange(void **state)
{
	static const char *const specs[] = {
		"fixp", "q8,ef=1", "ternary,ef=1", "randk,density=0.2,ef=1",
		"powersgd,rank=2",
	};

	(void)state;
	for (unsigned int i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		check(&(struct plan){ specs[i], i == 0 ? TALLY_DEV_F32 :
			TALLY_DEV_STATE, 0, 0, FAKEDEV_LAZY, 2560, 1, 1,
			{ N, N, N, N } });
}

/* A context of world 1 on a dataplane of its own, bound to the fake. */
static struct tally_ctx *
solo(struct loopagg **a, const char *spec, size_t seg)
{
	struct loopagg_conf ac = { .job = JOB, .token = TOKEN, .world = 1,
		.window = WINDOW, .max_elems = ELEMS };
	struct tally_ctx_opts o = { .dp_addr = "127.0.0.1", .job = JOB,
		.token = TOKEN, .world = 1, .window = WINDOW, .elems = ELEMS,
		.rto_us = 500, .timeout_ms = 2000, .codec = spec };
	struct tally_ctx *ctx;

	*a = loopagg_start(&ac);
	assert_non_null(*a);
	o.dp_port = loopagg_port(*a);
	assert_int_equal(tally_ctx_open(&o, &ctx), 0);
	if (seg > 0)
		assert_int_equal(tally_lib_dev_bind(ctx, &fakedev_ops, seg), 0);
	return ctx;
}

/* Codecs without a device path say so, and leave the context usable. */
static void
unsupported(void **state)
{
	static const char *const specs[] = { "sparse,density=0.1",
		"sign,ef=1" };
	float *x = calloc(N, sizeof(float));
	struct fakedev_stream *s = fakedev_stream_new(FAKEDEV_EAGER, 1);
	struct tally_ctx_info info;
	struct tally_state *st;
	struct loopagg *a;

	(void)state;
	assert_non_null(x);
	for (unsigned int i = 0; i < 2; i++) {
		struct tally_ctx *ctx = solo(&a, specs[i], 1280);

		assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
			TALLY_DEV_CODEC, NULL, x, N, s), -EOPNOTSUPP);
		assert_non_null(strstr(tally_ctx_error(ctx), "no GPU path"));
		assert_int_equal(tally_lib_dev_state_new(ctx, &fakedev_ops, N,
			&st), -EOPNOTSUPP);
		assert_null(st);
		tally_ctx_info(ctx, &info);
		assert_int_equal(info.cuda_path, TALLY_CUDA_PATH_CODEC);
		assert_string_equal(tally_cuda_path_name(info.cuda_path),
			"codec-not-on-gpu");
		/* Fixed point, whatever the codec, still goes. */
		x[5] = 1.5f;
		assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
			TALLY_DEV_F32, NULL, x, N, s), 0);
		assert_true(x[5] == 1.5f);
		tally_ctx_close(ctx);
		loopagg_stop(a, NULL);
	}
	fakedev_stream_free(s);
	free(x);
}

/* Host and device states are not interchangeable. */
static void
state_mixup(void **state)
{
	float *x = calloc(1000, sizeof(float));
	struct fakedev_stream *s = fakedev_stream_new(FAKEDEV_EAGER, 1);
	struct tally_state *hs, *ds;
	struct loopagg *a;
	struct tally_ctx *ctx = solo(&a, "q8,ef=1", 1280);

	(void)state;
	assert_int_equal(tally_state_new(ctx, 1000, &hs), 0);
	assert_int_equal(tally_lib_dev_state_new(ctx, &fakedev_ops, 1000, &ds),
		0);
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
		TALLY_DEV_STATE, hs, x, 1000, s), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "host memory"));
	assert_int_equal(tally_allreduce_state(ctx, ds, x, 1000), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "device memory"));
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
		TALLY_DEV_STATE, NULL, x, 1000, s), -EINVAL);
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
		TALLY_DEV_STATE, ds, x, 999, s), -EINVAL);
	/* Both still work where they belong. */
	assert_int_equal(tally_allreduce_state(ctx, hs, x, 1000), 0);
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
		TALLY_DEV_STATE, ds, x, 1000, s), 0);
	tally_state_free(hs);
	tally_state_free(ds);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
	fakedev_stream_free(s);
	free(x);
}

/*
 * The public entry points on this machine: a libtally without CUDA
 * refuses with -EOPNOTSUPP, one with CUDA but no device with -ENODEV,
 * and tally_ctx_info() says which beforehand. (With a device, the
 * CUDA suite runs instead: tests/lib/allreduce_cuda_test.c.)
 */
static void
public_api(void **state)
{
	struct tally_ctx_info info;
	struct tally_state *st = NULL;
	struct loopagg *a;
	struct tally_ctx *ctx = solo(&a, "fixp", 0);
	float x[4] = { 0 };
	int want;

	(void)state;
	tally_ctx_info(ctx, &info);
	if (info.cuda_path == TALLY_CUDA_PATH_STAGED) {
		print_message("# a CUDA device is here: see the gpu suite\n");
		goto out;
	}
	want = TALLY_HAVE_CUDA ? -ENODEV : -EOPNOTSUPP;
	assert_int_equal(info.cuda_path, TALLY_HAVE_CUDA ?
		TALLY_CUDA_PATH_NODEV : TALLY_CUDA_PATH_NONE);
	assert_int_equal(info.cuda_segment, TALLY_HAVE_CUDA ?
		TALLY_DEV_SEG_DEFAULT : 0);
	assert_int_equal(info.cuda_staging, 0);
	assert_int_equal(tally_allreduce_cuda(ctx, x, 4, NULL), want);
	assert_true(strlen(tally_ctx_error(ctx)) > 10);
	assert_int_equal(tally_allreduce_f32_cuda(ctx, x, 4, NULL), want);
	assert_int_equal(tally_allreduce_i32_cuda(ctx, (int32_t *)x, 4, NULL),
		want);
	assert_int_equal(tally_state_new_cuda(ctx, 4, &st), want);
	assert_null(st);
	assert_int_equal(tally_state_new_rows_cuda(ctx, 4, 2, &st), want);
	assert_null(st);
	assert_int_equal(tally_allreduce_state_cuda(ctx, NULL, x, 4, NULL),
		TALLY_HAVE_CUDA ? -EINVAL : -EOPNOTSUPP);
	assert_int_equal(tally_allreduce_cuda(NULL, x, 4, NULL), -EINVAL);
	/* Nothing was sent: the host path still works. */
	assert_int_equal(tally_allreduce(ctx, x, 4), 0);
out:
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

/*
 * A device failure before the call's first round leaves the context
 * usable; one after it breaks the context, as a network failure does.
 */
static void
device_failure(void **state)
{
	float *x = calloc(N, sizeof(float));
	struct fakedev_stream *s = fakedev_stream_new(FAKEDEV_LAZY, 1);
	struct tally_ctx_stats st;
	struct loopagg *a;
	struct tally_ctx *ctx = solo(&a, "fixp", 1280);

	(void)state;
	assert_non_null(x);
	fakedev_fail_at(s, 1);		/* the absmax kernel */
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops, TALLY_DEV_F32,
		NULL, x, N, s), -EIO);
	assert_non_null(strstr(tally_ctx_error(ctx), "largest |x|"));
	tally_ctx_stats(ctx, &st);
	assert_int_equal(st.results, 0);
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops, TALLY_DEV_F32,
		NULL, x, N, s), 0);
	fakedev_fail_at(s, 6);		/* segment 2's encoding */
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops, TALLY_DEV_F32,
		NULL, x, N, s), -EIO);
	assert_non_null(strstr(tally_ctx_error(ctx), "encoding a segment"));
	assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops, TALLY_DEV_F32,
		NULL, x, N, s), -EPIPE);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
	fakedev_stream_free(s);
	free(x);
}

/*
 * The staging: one page-aligned block, set up once and kept; a
 * segment rounded up to whole packets; the counters.
 */
static void
staging(void **state)
{
	struct plan p = { "fixp", TALLY_DEV_CODEC, 0, 0, FAKEDEV_EAGER, 1000,
		1, -1, { N, 1, 0, 257 } };
	size_t seg = 1024, page = (size_t)sysconf(_SC_PAGESIZE), segs = 0,
		bytes = 0;
	struct rank d[WORLD];

	(void)state;
	run_plan(&p, d);
	for (unsigned int c = 0; c < CALLS; c++) {
		segs += (p.lens[c] + seg - 1) / seg;
		bytes += p.lens[c] * 4;
	}
	for (unsigned int r = 0; r < WORLD; r++) {
		assert_int_equal(d[r].info.cuda_path, TALLY_CUDA_PATH_STAGED);
		assert_int_equal(d[r].info.cuda_segment, seg);
		assert_int_equal(d[r].info.cuda_staging,
			4 * ((seg * 4 + page - 1) / page * page) + page);
		assert_int_equal(d[r].st.cuda_calls, 3);	/* not n 0 */
		assert_int_equal(d[r].st.cuda_segments, segs);
		assert_int_equal(d[r].st.cuda_staged_bytes, bytes);
	}
}

/* The staging block stays where it is across calls. */
static void
staging_kept(void **state)
{
	float *x = calloc(N, sizeof(float));
	struct fakedev_stream *s = fakedev_stream_new(FAKEDEV_RANDOM, 3);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct loopagg *a;
	struct tally_ctx *ctx = solo(&a, "q8,ef=1", 2560);
	void *block = ctx->dev->block;

	(void)state;
	assert_non_null(block);
	assert_int_equal((uintptr_t)block % page, 0);
	assert_int_equal(ctx->dev->area % page, 0);
	for (unsigned int c = 0; c < 3; c++)
		assert_int_equal(tally_lib_dev_call(ctx, &fakedev_ops,
			TALLY_DEV_CODEC, NULL, x, N - c, s), 0);
	assert_ptr_equal(ctx->dev->block, block);
	/* Other ops on a bound context: refused. */
	assert_int_equal(tally_lib_dev_bind(ctx, &(struct tally_dev_ops){
		.name = "other" }, 0), -EINVAL);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
	fakedev_stream_free(s);
	free(x);
}

/* TALLY_CUDA_SEGMENT: taken, rounded up; nonsense refused. */
static void
segment_env(void **state)
{
	struct loopagg *a;
	struct tally_ctx *ctx = solo(&a, "fixp", 0);
	struct tally_ctx_info info;

	(void)state;
	setenv("TALLY_CUDA_SEGMENT", "1000", 1);
	assert_int_equal(tally_lib_dev_seg(ctx, 0), 1024);
	setenv("TALLY_CUDA_SEGMENT", "12x", 1);
	assert_int_equal(tally_lib_dev_bind(ctx, &fakedev_ops, 0), -EINVAL);
	assert_non_null(strstr(tally_ctx_error(ctx), "TALLY_CUDA_SEGMENT"));
	setenv("TALLY_CUDA_SEGMENT", "300", 1);
	assert_int_equal(tally_lib_dev_bind(ctx, &fakedev_ops, 0), 0);
	unsetenv("TALLY_CUDA_SEGMENT");
	tally_ctx_info(ctx, &info);
	assert_int_equal(info.cuda_segment, 512);
	tally_ctx_close(ctx);
	loopagg_stop(a, NULL);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * What the pipeline costs over the host path, both on the CPU: one
 * rank, fixp, 4 Mi floats, 1 Mi-element segments; the device's
 * operations run as they are enqueued, so the difference is the
 * pipeline's own (segment tails in the window, the queue). Printed; the
 * results must be the same bits.
 */
static void
overhead(void **state)
{
	size_t n = 4u << 20;
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
	struct fakedev_stream *s = fakedev_stream_new(FAKEDEV_EAGER, 1);
	struct tally_ctx_stats st;
	struct loopagg *a, *b;
	struct tally_ctx *hc = solo(&a, "fixp", 0);
	struct tally_ctx *dc = solo(&b, "fixp", 1u << 20);
	double th = 1e9, td = 1e9, t;

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	for (unsigned int rep = 0; rep < 3; rep++) {
		struct plan p = { .what = TALLY_DEV_F32, .inf_call = -1 };

		gen(&p, 0, 0, n, x);
		memcpy(y, x, n * sizeof(float));
		t = now_s();
		assert_int_equal(tally_allreduce_f32(hc, x, n), 0);
		th = fmin(th, now_s() - t);
		t = now_s();
		assert_int_equal(tally_lib_dev_call(dc, &fakedev_ops,
			TALLY_DEV_F32, NULL, y, n, s), 0);
		fakedev_stream_sync(s);
		td = fmin(td, now_s() - t);
		assert_memory_equal(x, y, n * sizeof(float));
	}
	tally_ctx_stats(dc, &st);
	print_message("# pipeline on the fake device: %zu floats, host path "
		"%.1f ms, device path %.1f ms (%+.1f %%), %llu segments\n", n,
		th * 1e3, td * 1e3, (td / th - 1) * 100,
		(unsigned long long)st.cuda_segments);
	tally_ctx_close(hc);
	tally_ctx_close(dc);
	loopagg_stop(a, NULL);
	loopagg_stop(b, NULL);
	fakedev_stream_free(s);
	free(x);
	free(y);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fixp_sizes),
		cmocka_unit_test(i32_sizes),
		cmocka_unit_test(loss),
		cmocka_unit_test(streams),
		cmocka_unit_test(codecs),
		cmocka_unit_test(memory),
		cmocka_unit_test(erange),
		cmocka_unit_test(unsupported),
		cmocka_unit_test(state_mixup),
		cmocka_unit_test(public_api),
		cmocka_unit_test(device_failure),
		cmocka_unit_test(staging),
		cmocka_unit_test(staging_kept),
		cmocka_unit_test(segment_env),
		cmocka_unit_test(overhead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
