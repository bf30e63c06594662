/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tensors in GPU memory through the real engine, on a real device: every
 * rank (a thread with its own CUDA stream) encodes on the GPU into the
 * pinned staging, the sums come back through loopagg (tally_agg_process()
 * behind UDP on 127.0.0.1) and are decoded on the GPU; each result must
 * equal, bit for bit, what tally_allreduce*() gives for the same data on
 * the host through its own loopagg. Sizes 0, 1, 257, primes and several
 * segments, loss, the codecs with a device path and their memory, two
 * streams; then a large tensor's throughput and how much of the encoding
 * the double buffering hid (printed). Without a CUDA device the program
 * is skipped, visibly (TAP "1..0 # SKIP").
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

#include <cuda_runtime_api.h>

#include <tally/fixp_cuda.h>
#include <tally/tally.h>
#include <tally/tally_cuda.h>

#include "loopagg.h"

#define JOB	13
#define TOKEN	UINT64_C(0x1313000013130000)
#define WORLD	3
#define CALLS	4
#define N	40009

enum what { W_I32, W_F32, W_CODEC, W_STATE };

struct plan {
	const char *spec;
	enum what what;
	int narrow;
	double loss;
	unsigned int streams;	/* 2: alternate, synchronized at the end */
	size_t lens[CALLS];
};

struct rank {
	pthread_t thread;
	const struct plan *p;
	struct tally_ctx_opts o;
	unsigned int r;
	int dev;
	void *out[CALLS];
	int rc[CALLS];
	char err[256];
	double secs;		/* the device calls, synchronized */
	struct tally_ctx_stats st;
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
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank r's tensor at call c (as stage_test.c's, without infinities). */
static void
gen(const struct plan *p, unsigned int r, unsigned int c, size_t n, void *out)
{
	for (size_t k = 0; k < n; k++) {
		uint64_t h = mix((uint64_t)r << 48 ^ (uint64_t)c << 40 ^ k);
		float x = ((float)(h & 0xffff) / 65536.0f - 0.5f) * 1e-2f;

		if (p->what == W_I32) {
			((int32_t *)out)[k] = (int32_t)(h >> 40) - (1 << 23);
			continue;
		}
		x += 0.25f * sinf((float)(k % 97) * 0.1f + (float)r) *
			cosf((float)(k / 97) * 0.05f);
		if ((k / 256 * 5 + r * 3 + c) % 13 == 0)
			x *= 50.0f;
		((float *)out)[k] = x;
	}
}

static int
host_call(struct tally_ctx *ctx, struct tally_state *st, const struct plan *p,
	void *buf, size_t n)
{
	switch (p->what) {
	case W_I32:
		return tally_allreduce_i32(ctx, buf, n);
	case W_F32:
		return tally_allreduce_f32(ctx, buf, n);
	case W_CODEC:
		return tally_allreduce(ctx, buf, n);
	default:
		return tally_allreduce_state(ctx, st, buf, n);
	}
}

static int
dev_call(struct tally_ctx *ctx, struct tally_state *st, const struct plan *p,
	void *d_buf, size_t n, cudaStream_t s)
{
	switch (p->what) {
	case W_I32:
		return tally_allreduce_i32_cuda(ctx, d_buf, n, s);
	case W_F32:
		return tally_allreduce_f32_cuda(ctx, d_buf, n, s);
	case W_CODEC:
		return tally_allreduce_cuda(ctx, d_buf, n, s);
	default:
		return tally_allreduce_state_cuda(ctx, st, d_buf, n, s);
	}
}

/* The device side's calls: upload, reduce, and download at the end. */
static void
dev_calls(struct rank *k, struct tally_ctx *ctx, struct tally_state *st)
{
	const struct plan *p = k->p;
	void *d[CALLS] = { NULL };
	cudaStream_t s[2];
	double t;

	for (unsigned int i = 0; i < p->streams; i++)
		(void)cudaStreamCreate(&s[i]);
	for (unsigned int c = 0; c < CALLS; c++) {
		gen(p, k->r, c, p->lens[c], k->out[c]);
		(void)cudaMalloc(&d[c], p->lens[c] * 4 + 4);
		(void)cudaMemcpy(d[c], k->out[c], p->lens[c] * 4,
			cudaMemcpyHostToDevice);
	}
	t = now_s();
	for (unsigned int c = 0; c < CALLS; c++) {
		k->rc[c] = dev_call(ctx, st, p, d[c], p->lens[c],
			s[c % p->streams]);
		if (k->rc[c] != 0) {
			snprintf(k->err, sizeof(k->err), "%s",
				tally_ctx_error(ctx));
			break;
		}
	}
	(void)cudaDeviceSynchronize();
	k->secs = now_s() - t;
	for (unsigned int c = 0; c < CALLS; c++) {
		(void)cudaMemcpy(k->out[c], d[c], p->lens[c] * 4,
			cudaMemcpyDeviceToHost);
		(void)cudaFree(d[c]);
	}
	for (unsigned int i = 0; i < p->streams; i++)
		(void)cudaStreamDestroy(s[i]);
}

static void *
rank_main(void *arg)
{
	struct rank *k = arg;
	const struct plan *p = k->p;
	struct tally_state *st = NULL;
	struct tally_ctx *ctx;
	int rc = 0;

	for (unsigned int c = 0; c < CALLS; c++)
		k->rc[c] = -ECANCELED;
	(void)cudaSetDevice(0);
	if (tally_ctx_open(&k->o, &ctx) != 0) {
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(NULL));
		return NULL;
	}
	if (p->what == W_STATE)
		rc = k->dev ? tally_state_new_cuda(ctx, p->lens[0], &st) :
			tally_state_new(ctx, p->lens[0], &st);
	if (rc != 0)
		snprintf(k->err, sizeof(k->err), "%s", tally_ctx_error(ctx));
	else if (k->dev)
		dev_calls(k, ctx, st);
	else
		for (unsigned int c = 0; c < CALLS; c++) {
			gen(p, k->r, c, p->lens[c], k->out[c]);
			k->rc[c] = host_call(ctx, st, p, k->out[c],
				p->lens[c]);
		}
	tally_ctx_stats(ctx, &k->st);
	tally_state_free(st);
	tally_ctx_close(ctx);
	return NULL;
}

static void
start_side(const struct plan *p, struct loopagg *a, int dev, struct rank *k)
{
	for (unsigned int r = 0; r < WORLD; r++) {
		k[r] = (struct rank){
			.p = p, .r = r, .dev = dev,
			.o = { .dp_addr = "127.0.0.1",
				.dp_port = loopagg_port(a), .job = JOB,
				.token = TOKEN, .rank = (uint8_t)r,
				.world = WORLD, .window = 16, .elems = 256,
				.rto_us = 500, .timeout_ms = 10000,
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

static void
compare(const struct plan *p, struct rank *h, struct rank *d)
{
	for (unsigned int r = 0; r < WORLD; r++)
		for (unsigned int c = 0; c < CALLS; c++) {
			const uint32_t *x = h[r].out[c], *y = d[r].out[c];

			if (h[r].rc[c] != 0 || d[r].rc[c] != 0)
				fail_msg("%s: rank %u call %u: host %d (%s), "
					"device %d (%s)", p->spec, r, c,
					h[r].rc[c], h[r].err, d[r].rc[c],
					d[r].err);
			for (size_t i = 0; i < p->lens[c]; i++)
				if (x[i] != y[i])
					fail_msg("%s: rank %u call %u element "
						"%zu: host %08x, device %08x",
						p->spec, r, c, i, x[i], y[i]);
		}
}

/* Runs p on both sides; compares; the device side's ranks in d. */
static void
run_plan(const struct plan *p, struct rank *d)
{
	struct loopagg_conf ac = {
		.job = JOB, .token = TOKEN, .world = WORLD, .window = 16,
		.max_elems = 256, .narrow = p->narrow, .loss_up = p->loss,
		.loss_down = p->loss, .seed = 3,
	};
	struct loopagg *ah = loopagg_start(&ac), *ad;
	struct rank h[WORLD];

	assert_non_null(ah);
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

static void
check(const struct plan *p)
{
	struct rank d[WORLD];

	run_plan(p, d);
}

static void
plain(void **state)
{
	(void)state;
	check(&(struct plan){ "fixp", W_CODEC, 0, 0, 1,
		{ 0, 1, 257, 3u * (1u << 20) + 7 } });
	check(&(struct plan){ "fixp", W_I32, 0, 0, 1, { 0, 1, 257, N } });
	check(&(struct plan){ "q8", W_F32, 0, 0.02, 2, { N, 1, 257, N } });
}

static void
codecs(void **state)
{
	static const char *const specs[] = { "q16", "q8", "q4", "ternary",
		"2bit", "sign", "randk,density=0.1" };

	(void)state;
	for (unsigned int i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		check(&(struct plan){ specs[i], W_CODEC, (int)(i % 2), 0, 1,
			{ N, 1, 257, 10007 } });
}

static void
memory(void **state)
{
	static const char *const specs[] = { "q8,ef=1", "q4,ef=1",
		"ternary,ef=1", "2bit,threshold=0.0625",
		"randk,density=0.1,ef=1", "powersgd", "powersgd,rank=8,rows=64" };

	(void)state;
	for (unsigned int i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		check(&(struct plan){ specs[i], W_STATE, (int)(i % 2), 0.01,
			1 + i % 2, { N, N, N, N } });
}

/*
 * A large tensor (16 Mi floats, 64 MiB, 16 segments): the time of the
 * device side's calls, and the share of it the host spent waiting for
 * the GPU's encoding rather than on the network.
 */
static void
throughput(void **state)
{
	struct plan p = { "fixp", W_CODEC, 0, 0, 1,
		{ 16u << 20, 16u << 20, 16u << 20, 16u << 20 } };
	struct cudaDeviceProp prop;
	struct rank d[WORLD];
	double wait = 0, net = 0, secs = 0;

	(void)state;
	run_plan(&p, d);
	for (unsigned int r = 0; r < WORLD; r++) {
		wait += (double)d[r].st.cuda_wait_ns * 1e-9;
		net += (double)d[r].st.cuda_net_ns * 1e-9;
		secs = fmax(secs, d[r].secs);
	}
	(void)cudaGetDeviceProperties(&prop, 0);
	print_message("# %s: %u ranks x %u calls of %zu floats: %.3f s, "
		"%.2f GB/s a rank; host waited for encoding %.1f %% of the "
		"time on the network (%.3f s of %.3f s)\n", prop.name, WORLD,
		CALLS, p.lens[0], secs, (double)CALLS * p.lens[0] * 4 / secs /
		1e9, 100 * wait / net, wait, net);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain),
		cmocka_unit_test(codecs),
		cmocka_unit_test(memory),
		cmocka_unit_test(throughput),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
