/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of the shared-scale fixed-point codec against the CPU
 * reference, bit for bit, on random data (NaN, infinities, subnormals and
 * saturating values included) of sizes around and well past the block and
 * grid sizes. Without a CUDA device the whole program is skipped, visibly
 * (TAP "1..0 # SKIP").
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

#include <tally/fixp.h>
#include <tally/fixp_cuda.h>

/* Around one block (256), past one grid pass (4096 x 256, 1024 x 256). */
static const size_t sizes[] = {
	1, 31, 255, 256, 257, 4097, 65537, 262145, (1u << 20) + 3,
	3u * (1u << 20) + 129,
};
#define N_MAX	(3u * (1u << 20) + 129)

/* Host and device buffers shared by the cases (set up once). */
struct bufs {
	float *x, *y, *y_gpu;
	int32_t *q, *q_gpu;
	float *d_x, *d_y, *d_out;
	int32_t *d_q;
	cudaStream_t stream;
};

static uint64_t
rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * n floats: mostly uniform in [-scale, scale), with specials mixed in when
 * specials is set (NaN, +-inf, subnormals, +-0, any bit pattern).
 */
static void
fill(float *x, size_t n, float scale, int specials, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd_next(s);
		float u = (float)((int64_t)(r >> 40) - (1 << 23)) / 0x1p23f;

		switch (specials ? r % 32 : 31) {
		case 0:
			x[i] = from_bits(0x7fc00000u | (uint32_t)(r >> 41));
			break;
		case 1:
			x[i] = (r & 0x100) ? INFINITY : -INFINITY;
			break;
		case 2:
			x[i] = from_bits((uint32_t)(r >> 41) |
				((r & 0x100) ? 0x80000000u : 0));
			break;
		case 3:
			x[i] = (r & 0x100) ? 0.0f : -0.0f;
			break;
		case 4:
			x[i] = from_bits((uint32_t)(r >> 32));
			break;
		default:
			x[i] = u * scale;
			break;
		}
	}
}

static int
setup(void **state)
{
	struct bufs *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return -1;
	b->x = malloc(N_MAX * sizeof(float));
	b->y = malloc(N_MAX * sizeof(float));
	b->y_gpu = malloc(N_MAX * sizeof(float));
	b->q = malloc(N_MAX * sizeof(int32_t));
	b->q_gpu = malloc(N_MAX * sizeof(int32_t));
	if (b->x == NULL || b->y == NULL || b->y_gpu == NULL ||
	    b->q == NULL || b->q_gpu == NULL)
		return -1;
	if (cudaMalloc((void **)&b->d_x, N_MAX * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_y, N_MAX * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_q, N_MAX * sizeof(int32_t)) !=
	    cudaSuccess ||
	    cudaMalloc((void **)&b->d_out, sizeof(float)) != cudaSuccess ||
	    cudaStreamCreate(&b->stream) != cudaSuccess)
		return -1;
	*state = b;
	return 0;
}

static int
teardown(void **state)
{
	struct bufs *b = *state;

	if (b == NULL)
		return 0;
	cudaStreamDestroy(b->stream);
	cudaFree(b->d_x);
	cudaFree(b->d_y);
	cudaFree(b->d_q);
	cudaFree(b->d_out);
	free(b->x);
	free(b->y);
	free(b->y_gpu);
	free(b->q);
	free(b->q_gpu);
	free(b);
	return 0;
}

/* GPU absmax of b->x[0..n) (already on the device), compared with the CPU. */
static float
check_absmax(struct bufs *b, size_t n, cudaStream_t stream)
{
	float want = tally_fixp_absmax(b->x, n), got = -1.0f;

	assert_int_equal(tally_fixp_absmax_cuda(b->d_x, n, b->d_out, stream),
		0);
	assert_int_equal(cudaMemcpyAsync(&got, b->d_out, sizeof(got),
		cudaMemcpyDeviceToHost, stream), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
	assert_memory_equal(&got, &want, sizeof(got));
	return want;
}

/* GPU encode of b->x[0..n) at exponent e, compared with the CPU. */
static void
check_encode(struct bufs *b, size_t n, int e, cudaStream_t stream)
{
	tally_fixp_encode(b->x, b->q, n, e);
	assert_int_equal(tally_fixp_encode_cuda(b->d_x, b->d_q, n, e, stream),
		0);
	assert_int_equal(cudaMemcpyAsync(b->q_gpu, b->d_q, n * sizeof(int32_t),
		cudaMemcpyDeviceToHost, stream), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
	assert_memory_equal(b->q_gpu, b->q, n * sizeof(int32_t));
}

/* GPU decode of b->q[0..n) at exponent e, compared with the CPU. */
static void
check_decode(struct bufs *b, size_t n, int e, cudaStream_t stream)
{
	assert_int_equal(cudaMemcpyAsync(b->d_q, b->q, n * sizeof(int32_t),
		cudaMemcpyHostToDevice, stream), cudaSuccess);
	tally_fixp_decode(b->q, b->y, n, e);
	assert_int_equal(tally_fixp_decode_cuda(b->d_q, b->d_y, n, e, stream),
		0);
	assert_int_equal(cudaMemcpyAsync(b->y_gpu, b->d_y, n * sizeof(float),
		cudaMemcpyDeviceToHost, stream), cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
	assert_memory_equal(b->y_gpu, b->y, n * sizeof(float));
}

/* Uploads b->x[0..n). */
static void
upload(struct bufs *b, size_t n)
{
	assert_int_equal(cudaMemcpy(b->d_x, b->x, n * sizeof(float),
		cudaMemcpyHostToDevice), cudaSuccess);
}

/*
 * Finite data at several magnitudes, down to subnormals (exponents past
 * 126, decoded through binary64): absmax, then encode at the exponents
 * of world 1, 4 and 64, then decode of the sums of world encodings.
 */
static void
finite_data(void **state)
{
	struct bufs *b = *state;
	static const unsigned int worlds[] = { 1, 4, 64 };
	static const float scales[] = {
		1e-30f, 1e-3f, 1.0f, 3e4f, 1e30f, 0x1p-120f, 1e-40f, 0x1p-146f,
	};
	uint64_t s = 11;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		float scale = scales[i % (sizeof(scales) / sizeof(scales[0]))];
		cudaStream_t st = (i & 1) ? b->stream : NULL;
		float a;

		fill(b->x, n, scale, 0, &s);
		upload(b, n);
		a = check_absmax(b, n, st);
		for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
			int e;

			assert_int_equal(tally_fixp_exponent(a, worlds[w], &e),
				0);
			check_encode(b, n, e, st);
			/* b->q holds the encoding: sums of world of them. */
			for (size_t k = 0; k < n; k++)
				b->q[k] *= (int32_t)worlds[w];
			check_decode(b, n, e, st);
		}
	}
}

/* The maximum in the last element (a partial block) is found. */
static void
absmax_tail(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 12;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		fill(b->x, n, 1.0f, 0, &s);
		b->x[n - 1] = -7.0f;
		upload(b, n);
		assert_true(check_absmax(b, n, b->stream) == 7.0f);
	}
}

/* Specials everywhere, at fixed and random exponents; random int32s. */
static void
special_data(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 13;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		const int exps[] = {
			TALLY_FIXP_EXP_MIN, -20, 0, 23, 31, 126, 127, 149,
			160, TALLY_FIXP_EXP_MAX,
			(int)(rnd_next(&s) % 305) - 126,
		};

		fill(b->x, n, 1e3f, 1, &s);
		upload(b, n);
		(void)check_absmax(b, n, b->stream);
		for (size_t j = 0; j < sizeof(exps) / sizeof(exps[0]); j++) {
			check_encode(b, n, exps[j], b->stream);
			for (size_t k = 0; k < n; k++)
				b->q[k] = (int32_t)(rnd_next(&s) >> 32);
			check_decode(b, n, exps[j], b->stream);
		}
	}
}

/* Bad arguments are refused before any launch; n == 0 does nothing. */
static void
arguments(void **state)
{
	struct bufs *b = *state;
	float got = -1.0f;

	assert_int_equal(tally_fixp_encode_cuda(b->d_x, b->d_q, 1,
		TALLY_FIXP_EXP_MAX + 1, NULL), -EINVAL);
	assert_int_equal(tally_fixp_decode_cuda(b->d_q, b->d_x, 1,
		TALLY_FIXP_EXP_MIN - 1, NULL), -EINVAL);
	assert_int_equal(tally_fixp_encode_cuda(NULL, b->d_q, 1, 0, NULL),
		-EINVAL);
	assert_int_equal(tally_fixp_decode_cuda(b->d_q, NULL, 1, 0, NULL),
		-EINVAL);
	assert_int_equal(tally_fixp_absmax_cuda(b->d_x, 1, NULL, NULL),
		-EINVAL);
	assert_int_equal(tally_fixp_absmax_cuda(NULL, 1, b->d_out, NULL),
		-EINVAL);
	assert_int_equal(tally_fixp_encode_cuda(NULL, NULL, 0, 0, NULL), 0);
	assert_int_equal(tally_fixp_decode_cuda(NULL, NULL, 0, 0, NULL), 0);
	/* absmax of nothing is 0, whatever d_out held. */
	assert_int_equal(cudaMemset(b->d_out, 0xff, sizeof(float)),
		cudaSuccess);
	assert_int_equal(tally_fixp_absmax_cuda(NULL, 0, b->d_out, NULL), 0);
	assert_int_equal(cudaMemcpy(&got, b->d_out, sizeof(got),
		cudaMemcpyDeviceToHost), cudaSuccess);
	assert_true(got == 0.0f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finite_data),
		cmocka_unit_test(absmax_tail),
		cmocka_unit_test(special_data),
		cmocka_unit_test(arguments),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
