/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of the feedback family against the CPU reference, bit
 * for bit, on random data (NaN, infinities, subnormals included) of sizes
 * around and well past the block and grid sizes, odd ones too; the
 * device's counters against the CPU's counts; chunks against the whole.
 * Without a CUDA device the whole program is skipped, visibly (TAP
 * "1..0 # SKIP").
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include <tally/feedback.h>
#include <tally/feedback_cuda.h>
#include <tally/fixp_cuda.h>

#include "fb_test.h"

/* Around a block (256 threads), past a grid pass (4096 x 256 items). */
static const size_t sizes[] = {
	1, 7, 8, 9, 31, 255, 256, 257, 4097, 65537, 262145,
	(1u << 20) + 3, 3u * (1u << 20) + 129,
};
#define N_SIZES	(sizeof(sizes) / sizeof(sizes[0]))
#define N_MAX	(3u * (1u << 20) + 129)

/* Host and device buffers shared by the cases (set up once). */
struct bufs {
	float *a, *b, *c, *ga, *gb, *gc;	/* host: inputs, GPU results */
	uint8_t *q, *gq;
	int32_t *w;
	uint64_t *idx, *gidx;
	float *d_a, *d_b, *d_c;
	uint8_t *d_q;
	int32_t *d_w;
	uint64_t *d_idx;
	unsigned long long *d_cnt;
	cudaStream_t stream;
};

static int
setup(void **state)
{
	struct bufs *b = calloc(1, sizeof(*b));
	size_t f = N_MAX * sizeof(float);

	if (b == NULL)
		return -1;
	*state = b;
	b->a = malloc(f);
	b->b = malloc(f);
	b->c = malloc(f);
	b->ga = malloc(f);
	b->gb = malloc(f);
	b->gc = malloc(f);
	b->q = malloc(N_MAX);
	b->gq = malloc(N_MAX);
	b->w = malloc(N_MAX * sizeof(int32_t));
	b->idx = malloc(N_MAX * sizeof(uint64_t));
	b->gidx = malloc(N_MAX * sizeof(uint64_t));
	if (b->a == NULL || b->b == NULL || b->c == NULL || b->ga == NULL ||
	    b->gb == NULL || b->gc == NULL || b->q == NULL || b->gq == NULL ||
	    b->w == NULL || b->idx == NULL || b->gidx == NULL)
		return -1;
	if (cudaMalloc((void **)&b->d_a, f) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_b, f) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_c, f) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_q, N_MAX) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_w, N_MAX * sizeof(int32_t)) !=
	    cudaSuccess ||
	    cudaMalloc((void **)&b->d_idx, N_MAX * sizeof(uint64_t)) !=
	    cudaSuccess ||
	    cudaMalloc((void **)&b->d_cnt, sizeof(unsigned long long)) !=
	    cudaSuccess ||
	    cudaStreamCreate(&b->stream) != cudaSuccess)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	struct bufs *b = *state;

	if (b == NULL)
		return 0;
	cudaStreamDestroy(b->stream);
	cudaFree(b->d_a);
	cudaFree(b->d_b);
	cudaFree(b->d_c);
	cudaFree(b->d_q);
	cudaFree(b->d_w);
	cudaFree(b->d_idx);
	cudaFree(b->d_cnt);
	free(b->a);
	free(b->b);
	free(b->c);
	free(b->ga);
	free(b->gb);
	free(b->gc);
	free(b->q);
	free(b->gq);
	free(b->w);
	free(b->idx);
	free(b->gidx);
	free(b);
	return 0;
}

static void
up(void *d, const void *h, size_t len)
{
	assert_int_equal(cudaMemcpy(d, h, len, cudaMemcpyHostToDevice),
		cudaSuccess);
}

/* Waits for the stream, then copies back. */
static void
down(struct bufs *b, void *h, const void *d, size_t len)
{
	assert_int_equal(cudaStreamSynchronize(b->stream), cudaSuccess);
	assert_int_equal(cudaMemcpy(h, d, len, cudaMemcpyDeviceToHost),
		cudaSuccess);
}

static void
fill(float *x, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (i % 3 == 0) ? rnd_any(s, 1) : rnd_unit(s);
}

static void
zero_count(struct bufs *b)
{
	assert_int_equal(cudaMemset(b->d_cnt, 0, sizeof(*b->d_cnt)),
		cudaSuccess);
}

static unsigned long long
get_count(struct bufs *b)
{
	unsigned long long c = 0;

	down(b, &c, b->d_cnt, sizeof(c));
	return c;
}

/* ef_apply, ef_update (with its count), in place too. */
static void
ef(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 21;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float), want;

		fill(b->a, n, &s);
		fill(b->b, n, &s);
		up(b->d_a, b->a, f);
		up(b->d_b, b->b, f);
		tally_ef_apply(b->c, b->a, b->b, n);
		assert_int_equal(tally_ef_apply_cuda(b->d_c, b->d_a, b->d_b, n,
			b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
		/* r = v - sent: v = c, sent = a; in place over d_c */
		zero_count(b);
		want = tally_ef_update(b->c, b->c, b->a, n);
		assert_int_equal(tally_ef_update_cuda(b->d_c, b->d_c, b->d_a, n,
			b->d_cnt, b->stream), 0);
		assert_int_equal(get_count(b), want);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
	}
}

/* accumulate, select (with its count), take: a few steps of state. */
static void
dgc(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 22;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float), nb = (n + 7) / 8;

		fill(b->a, n, &s);	/* u */
		fill(b->b, n, &s);	/* v */
		up(b->d_a, b->a, f);
		up(b->d_b, b->b, f);
		for (int t = 0; t < 3; t++) {
			size_t want;

			fill(b->c, n, &s);	/* g */
			up(b->d_c, b->c, f);
			tally_dgc_accumulate(b->a, b->b, b->c, n, 0.9f);
			assert_int_equal(tally_dgc_accumulate_cuda(b->d_a,
				b->d_b, b->d_c, n, 0.9f, b->stream), 0);
			want = tally_dgc_select(b->b, b->q, n, 0.75f);
			zero_count(b);
			assert_int_equal(tally_dgc_select_cuda(b->d_b, b->d_q, n,
				0.75f, b->d_cnt, b->stream), 0);
			assert_int_equal(get_count(b), want);
			down(b, b->gq, b->d_q, nb);
			assert_memory_equal(b->gq, b->q, nb);
			tally_dgc_take(b->b, b->a, b->c, b->q, n);
			assert_int_equal(tally_dgc_take_cuda(b->d_b, b->d_a,
				b->d_c, b->d_q, n, b->stream), 0);
			down(b, b->ga, b->d_a, f);
			down(b, b->gb, b->d_b, f);
			down(b, b->gc, b->d_c, f);
			assert_memory_equal(b->ga, b->a, f);
			assert_memory_equal(b->gb, b->b, f);
			assert_memory_equal(b->gc, b->c, f);
		}
	}
}

/* 2-bit into i4 and i8, with and without g, thresholds across the range. */
static void
twobit(void **state)
{
	static const int exps[] = { -126, -20, -1, 0, 7, 103, 104, 126 };
	struct bufs *b = *state;
	uint64_t s = 23;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float);
		int e = exps[k % (sizeof(exps) / sizeof(exps[0]))];
		float t = tally_2bit_threshold(e);

		fill(b->a, n, &s);	/* g */
		for (size_t i = 0; i < n; i++)	/* r near t */
			b->b[i] = (i % 5 == 0) ? rnd_any(&s, 1) :
				t * 2 * rnd_unit(&s);
		up(b->d_a, b->a, f);
		up(b->d_b, b->b, f);
		tally_2bit_encode_i4(b->b, b->a, b->q, n, e);
		assert_int_equal(tally_2bit_encode_i4_cuda(b->d_b, b->d_a,
			b->d_q, n, e, b->stream), 0);
		down(b, b->gq, b->d_q, (n + 1) / 2);
		down(b, b->gb, b->d_b, f);
		assert_memory_equal(b->gq, b->q, (n + 1) / 2);
		assert_memory_equal(b->gb, b->b, f);
		tally_2bit_encode_i8(b->b, NULL, (int8_t *)b->q, n, e - 1);
		assert_int_equal(tally_2bit_encode_i8_cuda(b->d_b, NULL,
			(int8_t *)b->d_q, n, e - 1, b->stream), 0);
		down(b, b->gq, b->d_q, n);
		down(b, b->gb, b->d_b, f);
		assert_memory_equal(b->gq, b->q, n);
		assert_memory_equal(b->gb, b->b, f);
	}
}

/* TernGrad into i4 and i8: scales, seeds, offsets; and GPU chunks. */
static void
tern(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 24;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float);
		float sc = (k % 2) ? 1.0f : 0.3f + (float)k;
		uint64_t seed = rnd_next(&s), off = rnd_next(&s) >> (k % 64);

		fill(b->a, n, &s);
		for (size_t i = 0; i < n; i++)
			b->a[i] *= sc;
		up(b->d_a, b->a, f);
		assert_int_equal(tally_tern_encode_i4(b->a, b->q, n, sc, seed,
			off), 0);
		assert_int_equal(tally_tern_encode_i4_cuda(b->d_a, b->d_q, n, sc,
			seed, off, b->stream), 0);
		down(b, b->gq, b->d_q, (n + 1) / 2);
		assert_memory_equal(b->gq, b->q, (n + 1) / 2);
		/* the same bytes from chunks of even lengths */
		for (size_t at = 0, len = 2; at < n; at += len, len *= 4) {
			size_t l = n - at < len ? n - at : len;

			assert_int_equal(tally_tern_encode_i4_cuda(b->d_a + at,
				b->d_q + at / 2, l, sc, seed, off + at,
				b->stream), 0);
		}
		down(b, b->gq, b->d_q, (n + 1) / 2);
		assert_memory_equal(b->gq, b->q, (n + 1) / 2);
		assert_int_equal(tally_tern_encode_i8(b->a, (int8_t *)b->q, n,
			sc, seed, off), 0);
		assert_int_equal(tally_tern_encode_i8_cuda(b->d_a,
			(int8_t *)b->d_q, n, sc, seed, off, b->stream), 0);
		down(b, b->gq, b->d_q, n);
		assert_memory_equal(b->gq, b->q, n);
	}
}

/* Decoding of i32, i8 and i4 sums. */
static void
decode(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 25;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float);
		float sc = (k % 3 == 0) ? 0.5f : rnd_any(&s, k % 3 == 1);

		for (size_t i = 0; i < n; i++) {
			uint64_t r = rnd_next(&s);

			b->w[i] = (i % 4) ? (int32_t)(r % 129) - 64 :
				(int32_t)(r >> 32);
			b->q[i] = (uint8_t)(r >> 8);
		}
		up(b->d_w, b->w, n * sizeof(int32_t));
		up(b->d_q, b->q, n);
		tally_tern_decode_i32(b->w, b->c, n, sc);
		assert_int_equal(tally_tern_decode_i32_cuda(b->d_w, b->d_c, n, sc,
			b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
		tally_tern_decode_i8((const int8_t *)b->q, b->c, n, sc);
		assert_int_equal(tally_tern_decode_i8_cuda(
			(const int8_t *)b->d_q, b->d_c, n, sc, b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
		tally_tern_decode_i4(b->q, b->c, n, sc);
		assert_int_equal(tally_tern_decode_i4_cuda(b->d_q, b->d_c, n, sc,
			b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
	}
}

/* Sign votes: encoding, wide and narrow decoding. */
static void
sign(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 26;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float), nb = (n + 7) / 8;
		unsigned int world = 1 + (unsigned int)(k * 5 % 64);

		fill(b->a, n, &s);
		up(b->d_a, b->a, f);
		tally_sign_encode(b->a, b->q, n);
		assert_int_equal(tally_sign_encode_cuda(b->d_a, b->d_q, n,
			b->stream), 0);
		down(b, b->gq, b->d_q, nb);
		assert_memory_equal(b->gq, b->q, nb);
		tally_sign_decode_bits(b->q, b->c, n, 0.25f);
		assert_int_equal(tally_sign_decode_bits_cuda(b->d_q, b->d_c, n,
			0.25f, b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
		for (size_t i = 0; i < n; i++)
			b->q[i] = (uint8_t)(rnd_next(&s) % (world + 1));
		up(b->d_q, b->q, n);
		tally_sign_decode_votes((const int8_t *)b->q, b->c, n, world,
			0.25f);
		assert_int_equal(tally_sign_decode_votes_cuda(
			(const int8_t *)b->d_q, b->d_c, n, world, 0.25f,
			b->stream), 0);
		down(b, b->gc, b->d_c, f);
		assert_memory_equal(b->gc, b->c, f);
	}
}

/* random-k: indices, gather, take, scatter, whole and from an offset. */
static void
randk(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 27;

	for (size_t k = 0; k < N_SIZES; k++) {
		size_t n = sizes[k], f = n * sizeof(float);
		size_t cnt = n / 7 + 1, first = n - cnt;
		uint64_t seed = rnd_next(&s);

		assert_int_equal(tally_randk_indices(b->idx, 0, n, n, seed), 0);
		assert_int_equal(tally_randk_indices_cuda(b->d_idx, 0, n, n,
			seed, b->stream), 0);
		down(b, b->gidx, b->d_idx, n * sizeof(uint64_t));
		assert_memory_equal(b->gidx, b->idx, n * sizeof(uint64_t));

		fill(b->a, n, &s);
		up(b->d_a, b->a, f);
		assert_int_equal(tally_randk_gather(b->a, b->b, first, cnt, n,
			seed), 0);
		assert_int_equal(tally_randk_gather_cuda(b->d_a, b->d_b, first,
			cnt, n, seed, b->stream), 0);
		down(b, b->gb, b->d_b, cnt * sizeof(float));
		assert_memory_equal(b->gb, b->b, cnt * sizeof(float));

		assert_int_equal(tally_randk_take(b->a, b->b, 0, cnt, n, seed),
			0);
		assert_int_equal(tally_randk_take_cuda(b->d_a, b->d_b, 0, cnt, n,
			seed, b->stream), 0);
		down(b, b->ga, b->d_a, f);
		down(b, b->gb, b->d_b, cnt * sizeof(float));
		assert_memory_equal(b->ga, b->a, f);
		assert_memory_equal(b->gb, b->b, cnt * sizeof(float));

		assert_int_equal(tally_randk_scatter(b->b, b->a, 0, cnt, n, seed,
			(float)n / cnt), 0);
		assert_int_equal(tally_randk_scatter_cuda(b->d_b, b->d_a, 0, cnt,
			n, seed, (float)n / cnt, b->stream), 0);
		down(b, b->ga, b->d_a, f);
		assert_memory_equal(b->ga, b->a, f);
	}
}

/* Bad arguments are refused before any launch; n == 0 does nothing. */
static void
arguments(void **state)
{
	struct bufs *b = *state;

	assert_int_equal(tally_ef_apply_cuda(NULL, b->d_a, b->d_b, 1, NULL),
		-EINVAL);
	assert_int_equal(tally_ef_update_cuda(b->d_a, NULL, b->d_b, 1, NULL,
		NULL), -EINVAL);
	assert_int_equal(tally_dgc_select_cuda(b->d_a, NULL, 1, 1.0f, NULL,
		NULL), -EINVAL);
	assert_int_equal(tally_2bit_encode_i4_cuda(NULL, NULL, b->d_q, 1, 0,
		NULL), -EINVAL);
	assert_int_equal(tally_tern_encode_i8_cuda(b->d_a, (int8_t *)b->d_q,
		1, 0.0f, 1, 0, NULL), -EINVAL);
	assert_int_equal(tally_tern_encode_i4_cuda(b->d_a, b->d_q, 1, NAN, 1,
		0, NULL), -EINVAL);
	assert_int_equal(tally_randk_gather_cuda(b->d_a, b->d_b, 5, 6, 10, 1,
		NULL), -EINVAL);
	assert_int_equal(tally_randk_indices_cuda(b->d_idx, UINT64_MAX, 2, 10,
		1, NULL), -EINVAL);
	assert_int_equal(tally_ef_apply_cuda(NULL, NULL, NULL, 0, NULL), 0);
	assert_int_equal(tally_sign_encode_cuda(NULL, NULL, 0, NULL), 0);
	assert_int_equal(tally_randk_scatter_cuda(NULL, NULL, 0, 0, 0, 1,
		1.0f, NULL), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ef),
		cmocka_unit_test(dgc),
		cmocka_unit_test(twobit),
		cmocka_unit_test(tern),
		cmocka_unit_test(decode),
		cmocka_unit_test(sign),
		cmocka_unit_test(randk),
		cmocka_unit_test(arguments),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
