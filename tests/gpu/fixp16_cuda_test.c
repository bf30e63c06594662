/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of the 16-bit fixed-point codec against the CPU
 * functions, bit for bit: every bf16 and f16 pattern encoded at
 * exponents across the range (i32 and i16 lanes), sums decoded at every
 * exponent, and absmax, at sizes around and past a block and a grid
 * pass. Without a CUDA device the program skips, visibly (TAP
 * "1..0 # SKIP").
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <tally/fixp.h>
#include <tally/fixp16.h>
#include <tally/fixp16_cuda.h>
#include <tally/fixp_cuda.h>

#define N	((1u << 20) + 4099)	/* past one grid pass */

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Copies n bytes to a new device buffer. */
static void *
to_dev(const void *h, size_t n)
{
	void *d;

	assert_int_equal(cudaMalloc(&d, n), cudaSuccess);
	assert_int_equal(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice),
		cudaSuccess);
	return d;
}

static void
from_dev(void *h, const void *d, size_t n)
{
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost),
		cudaSuccess);
}

static void
kernels_match_cpu(void **state)
{
	static const enum tally_dtype types[] = { TALLY_DT_BF16,
		TALLY_DT_F16 };
	static const int exps[] = { TALLY_FIXP_EXP_MIN, -20, 0, 8, 14, 30,
		126, 133, 160, TALLY_FIXP_EXP_MAX };
	uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *y2 = malloc(N * 2);
	int32_t *q = malloc(N * 4), *q2 = malloc(N * 4), *s = malloc(N * 4);
	uint16_t *d_x, *d_y;
	int32_t *d_q, *d_s;
	float *d_m, m;

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(y2);
	assert_non_null(q);
	assert_non_null(q2);
	assert_non_null(s);
	for (size_t i = 0; i < N; i++) {
		x[i] = (uint16_t)(i < 0x10000 ? i : mix(i));
		s[i] = (int32_t)mix(i ^ 77) >> (int)(i % 32);
	}
	d_x = to_dev(x, N * 2);
	d_s = to_dev(s, N * 4);
	assert_int_equal(cudaMalloc((void **)&d_q, N * 4), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d_y, N * 2), cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d_m, 4), cudaSuccess);
	for (int t = 0; t < 2; t++) {
		/* Finite patterns only for absmax (an inf would win). */
		assert_int_equal(tally_fixp16_absmax_cuda(types[t], d_x + 0x10000,
			N - 0x10000, d_m, NULL), 0);
		from_dev(&m, d_m, 4);
		assert_true(m == tally_fixp16_absmax(types[t], x + 0x10000,
			N - 0x10000));
		for (size_t k = 0; k < sizeof(exps) / sizeof(exps[0]); k++) {
			for (unsigned int lanes = 16; lanes <= 32; lanes += 16) {
				size_t len = N * lanes / 8;

				assert_int_equal(tally_fixp16_encode_cuda(
					types[t], d_x, d_q, lanes, N, exps[k],
					NULL), 0);
				from_dev(q2, d_q, len);
				assert_int_equal(tally_fixp16_encode(types[t],
					x, q, lanes, N, exps[k]), 0);
				assert_memory_equal(q, q2, len);
			}
			assert_int_equal(tally_fixp16_decode_cuda(types[t], d_s,
				32, d_y, N, exps[k], NULL), 0);
			from_dev(y2, d_y, N * 2);
			assert_int_equal(tally_fixp16_decode(types[t], s, 32, y,
				N, exps[k]), 0);
			assert_memory_equal(y, y2, N * 2);
			assert_int_equal(tally_fixp16_decode_cuda(types[t], d_x,
				16, d_y, N, exps[k], NULL), 0);
			from_dev(y2, d_y, N * 2);
			assert_int_equal(tally_fixp16_decode(types[t], x, 16, y,
				N, exps[k]), 0);
			assert_memory_equal(y, y2, N * 2);
		}
	}
	assert_int_equal(tally_fixp16_encode_cuda(TALLY_DT_F32, d_x, d_q, 32,
		N, 0, NULL), -EINVAL);
	assert_int_equal(tally_fixp16_decode_cuda(TALLY_DT_BF16, d_s, 32, d_y,
		N, 999, NULL), -EINVAL);
	cudaFree(d_x);
	cudaFree(d_y);
	cudaFree(d_q);
	cudaFree(d_s);
	cudaFree(d_m);
	free(x);
	free(y);
	free(y2);
	free(q);
	free(q2);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernels_match_cpu),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
