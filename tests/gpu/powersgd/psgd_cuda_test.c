/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA kernels of PowerSGD against the CPU reference, bit for bit:
 * the draws of Q, P = M Q, Q = M^T P and M_hat = P Q^T over square, odd,
 * padded, thin and wide views (data with NaN, infinities and subnormals
 * in places), every rank from 1 to TALLY_PSGD_RANK_MAX; the
 * orthonormalization around the 256 lanes (rows 1 .. 70001), with rank >
 * rows and zero, dependent and non-finite columns; whole steps chained on
 * the device; and the argument checks. Without a CUDA device the whole
 * program is skipped, visibly (TAP "1..0 # SKIP").
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

#include <tally/fixp_cuda.h>
#include <tally/powersgd.h>
#include <tally/powersgd_cuda.h>

#include "../feedback/fb_test.h"

#define N_MAX		(3u * (1u << 20) + 129)
#define PQ_MAX		(1u << 20)	/* floats of P or Q */

/* (n, rows_hint): square, odd, padded, thin, wide, past a grid pass. */
static const struct {
	size_t n;
	uint32_t hint;
} shapes[] = {
	{ 1, 0 }, { 7, 0 }, { 10, 0 }, { 257, 0 }, { 4099, 0 }, { 65537, 0 },
	{ 100, 7 }, { 5, 4 }, { 1000, 1 }, { 1000, 1000 }, { 70001, 3 },
	{ 1048576, 0 }, { N_MAX, 0 },
};
#define N_SHAPES	(sizeof(shapes) / sizeof(shapes[0]))

/* Host and device buffers shared by the cases (set up once). */
struct bufs {
	float *m, *gm, *p, *gp, *q, *gq;
	float *d_m, *d_p, *d_q;
	cudaStream_t stream;
};

static int
setup(void **state)
{
	struct bufs *b = calloc(1, sizeof(*b));
	size_t f = N_MAX * sizeof(float), g = PQ_MAX * sizeof(float);

	if (b == NULL)
		return -1;
	*state = b;
	b->m = malloc(f);
	b->gm = malloc(f);
	b->p = malloc(g);
	b->gp = malloc(g);
	b->q = malloc(g);
	b->gq = malloc(g);
	if (b->m == NULL || b->gm == NULL || b->p == NULL || b->gp == NULL ||
	    b->q == NULL || b->gq == NULL)
		return -1;
	if (cudaMalloc((void **)&b->d_m, f) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_p, g) != cudaSuccess ||
	    cudaMalloc((void **)&b->d_q, g) != cudaSuccess ||
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
	cudaFree(b->d_m);
	cudaFree(b->d_p);
	cudaFree(b->d_q);
	free(b->m);
	free(b->gm);
	free(b->p);
	free(b->gp);
	free(b->q);
	free(b->gq);
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

/* Asserts the same bits, naming the first difference. */
static void
same_bits(const float *gpu, const float *cpu, size_t cnt, const char *what,
	size_t n, unsigned int rank)
{
	for (size_t i = 0; i < cnt; i++)
		if (to_bits(gpu[i]) != to_bits(cpu[i]))
			fail_msg("%s (n %zu, rank %u): element %zu: gpu %a, cpu %a",
				what, n, rank, i, (double)gpu[i],
				(double)cpu[i]);
}

/* Mostly uniform, some of every class when specials is set. */
static void
fill(float *x, size_t cnt, uint64_t *s, int specials)
{
	for (size_t i = 0; i < cnt; i++)
		x[i] = (specials && i % 997 == 0) ? rnd_any(s, 1) :
			rnd_unit(s);
}

/* Ranks for a shape: all of them on small views, a few on large ones. */
static int
rank_wanted(size_t n, unsigned int rank)
{
	return n < 100000 || rank == 1 || rank == 4 || rank == 7 ||
		rank == TALLY_PSGD_RANK_MAX;
}

/* The draws of Q. */
static void
init_q(void **state)
{
	struct bufs *b = *state;

	for (unsigned int rank = 1; rank <= TALLY_PSGD_RANK_MAX; rank++)
		for (uint64_t seed = 0; seed < 3; seed++) {
			uint32_t cols = PQ_MAX / TALLY_PSGD_RANK_MAX - 3;
			size_t f = (size_t)cols * rank * sizeof(float);

			tally_psgd_init_q(b->q, cols, rank, seed * 1000003);
			assert_int_equal(tally_psgd_init_q_cuda(b->d_q, cols,
				rank, seed * 1000003, b->stream), 0);
			down(b, b->gq, b->d_q, f);
			same_bits(b->gq, b->q, (size_t)cols * rank, "init_q",
				cols, rank);
		}
}

/* P, Q and M_hat over every shape. */
static void
p_q_decompress(void **state)
{
	struct bufs *b = *state;
	uint64_t s = 71;

	for (size_t t = 0; t < N_SHAPES; t++) {
		size_t n = shapes[t].n;
		uint32_t rows, cols;

		assert_int_equal(tally_psgd_shape(n, shapes[t].hint, &rows,
			&cols), 0);
		fill(b->m, n, &s, 1);
		up(b->d_m, b->m, n * sizeof(float));
		for (unsigned int rank = 1; rank <= TALLY_PSGD_RANK_MAX;
		     rank++) {
			size_t np = (size_t)rows * rank, nq = (size_t)cols * rank;

			if (!rank_wanted(n, rank) || np > PQ_MAX || nq > PQ_MAX)
				continue;
			fill(b->q, nq, &s, 0);
			up(b->d_q, b->q, nq * sizeof(float));
			tally_psgd_p(b->m, n, rows, cols, b->q, rank, b->p);
			assert_int_equal(tally_psgd_p_cuda(b->d_m, n, rows, cols,
				b->d_q, rank, b->d_p, b->stream), 0);
			down(b, b->gp, b->d_p, np * sizeof(float));
			same_bits(b->gp, b->p, np, "p", n, rank);

			fill(b->p, np, &s, 0);
			up(b->d_p, b->p, np * sizeof(float));
			tally_psgd_q(b->m, n, rows, cols, b->p, rank, b->q);
			assert_int_equal(tally_psgd_q_cuda(b->d_m, n, rows, cols,
				b->d_p, rank, b->d_q, b->stream), 0);
			down(b, b->gq, b->d_q, nq * sizeof(float));
			same_bits(b->gq, b->q, nq, "q", n, rank);

			/* M_hat from this P and a finite Q */
			fill(b->q, nq, &s, 0);
			up(b->d_q, b->q, nq * sizeof(float));
			tally_psgd_decompress(b->p, b->q, rows, cols, rank,
				0.375f, b->gm, n);
			assert_int_equal(tally_psgd_decompress_cuda(b->d_p,
				b->d_q, rows, cols, rank, 0.375f, b->d_m, n,
				b->stream), 0);
			memcpy(b->m, b->gm, n * sizeof(float));
			down(b, b->gm, b->d_m, n * sizeof(float));
			same_bits(b->gm, b->m, n, "decompress", n, rank);
			/* d_m holds M_hat now: put M back */
			fill(b->m, n, &s, 1);
			up(b->d_m, b->m, n * sizeof(float));
		}
	}
}

/* Orthonormalization around the lanes, with awkward columns. */
static void
orthonormalize(void **state)
{
	static const uint32_t rowss[] = {
		1, 2, 5, 31, 255, 256, 257, 511, 513, 5000, 32769,
	};
	struct bufs *b = *state;
	uint64_t s = 72;

	for (size_t t = 0; t < sizeof(rowss) / sizeof(rowss[0]); t++)
		for (unsigned int rank = 1; rank <= TALLY_PSGD_RANK_MAX;
		     rank++) {
			uint32_t rows = rowss[t];
			size_t np = (size_t)rows * rank;

			if (np > PQ_MAX)
				continue;
			fill(b->p, np, &s, 0);
			for (uint32_t i = 0; i < rows && rank >= 6; i++) {
				float *e = b->p + (size_t)i * rank;

				e[1] = 0.0f;
				e[3] = e[0];
				e[4] = 2 * e[2] + e[0];
				e[5] = e[5] * 0x1p-90f;
			}
			if (rank >= 8) {
				b->p[(size_t)(rows / 2) * rank + 6] = NAN;
				b->p[(size_t)(rows - 1) * rank + 7] = INFINITY;
			}
			up(b->d_p, b->p, np * sizeof(float));
			tally_psgd_orthonormalize(b->p, rows, rank);
			assert_int_equal(tally_psgd_orthonormalize_cuda(b->d_p,
				rows, rank, b->stream), 0);
			down(b, b->gp, b->d_p, np * sizeof(float));
			same_bits(b->gp, b->p, np, "orthonormalize", rows,
				rank);
		}
}

/* Three whole steps on the device, warm-started, against the CPU. */
static void
steps(void **state)
{
	struct bufs *b = *state;
	const size_t n = 1000003;
	const unsigned int rank = 4;
	uint32_t rows, cols;
	uint64_t s = 73;
	float *q = malloc(PQ_MAX * sizeof(float));

	assert_non_null(q);
	assert_int_equal(tally_psgd_shape(n, 0, &rows, &cols), 0);
	fill(b->m, n, &s, 0);
	up(b->d_m, b->m, n * sizeof(float));
	tally_psgd_init_q(q, cols, rank, 5);
	assert_int_equal(tally_psgd_init_q_cuda(b->d_q, cols, rank, 5,
		b->stream), 0);
	for (int it = 0; it < 3; it++) {
		tally_psgd_p(b->m, n, rows, cols, q, rank, b->p);
		tally_psgd_orthonormalize(b->p, rows, rank);
		tally_psgd_q(b->m, n, rows, cols, b->p, rank, q);
		assert_int_equal(tally_psgd_p_cuda(b->d_m, n, rows, cols,
			b->d_q, rank, b->d_p, b->stream), 0);
		assert_int_equal(tally_psgd_orthonormalize_cuda(b->d_p, rows,
			rank, b->stream), 0);
		assert_int_equal(tally_psgd_q_cuda(b->d_m, n, rows, cols,
			b->d_p, rank, b->d_q, b->stream), 0);
	}
	tally_psgd_decompress(b->p, q, rows, cols, rank, 1.0f, b->m, n);
	assert_int_equal(tally_psgd_decompress_cuda(b->d_p, b->d_q, rows,
		cols, rank, 1.0f, b->d_m, n, b->stream), 0);
	down(b, b->gq, b->d_q, (size_t)cols * rank * sizeof(float));
	same_bits(b->gq, q, (size_t)cols * rank, "steps q", n, rank);
	down(b, b->gm, b->d_m, n * sizeof(float));
	same_bits(b->gm, b->m, n, "steps m_hat", n, rank);
	free(q);
}

/* Refused arguments, before any launch. */
static void
arguments(void **state)
{
	struct bufs *b = *state;

	assert_int_equal(tally_psgd_init_q_cuda(b->d_q, 10, 0, 1, NULL),
		-EINVAL);
	assert_int_equal(tally_psgd_init_q_cuda(b->d_q, 10,
		TALLY_PSGD_RANK_MAX + 1, 1, NULL), -EINVAL);
	assert_int_equal(tally_psgd_init_q_cuda(NULL, 10, 4, 1, NULL),
		-EINVAL);
	assert_int_equal(tally_psgd_p_cuda(b->d_m, 13, 4, 3, b->d_q, 1,
		b->d_p, NULL), -EINVAL);
	assert_int_equal(tally_psgd_p_cuda(NULL, 12, 4, 3, b->d_q, 1,
		b->d_p, NULL), -EINVAL);
	assert_int_equal(tally_psgd_p_cuda(b->d_m, 12, 4, 3, b->d_q, 1,
		NULL, NULL), -EINVAL);
	assert_int_equal(tally_psgd_q_cuda(b->d_m, 12, 4, 0, b->d_p, 1,
		b->d_q, NULL), -EINVAL);
	assert_int_equal(tally_psgd_orthonormalize_cuda(b->d_p, 0, 4, NULL),
		-EINVAL);
	assert_int_equal(tally_psgd_orthonormalize_cuda(NULL, 3, 4, NULL),
		-EINVAL);
	assert_int_equal(tally_psgd_decompress_cuda(b->d_p, b->d_q, 4, 3, 33,
		1.0f, b->d_m, 12, NULL), -EINVAL);
	assert_int_equal(tally_psgd_decompress_cuda(b->d_p, b->d_q, 4, 3, 1,
		1.0f, NULL, 12, NULL), -EINVAL);
	/* n == 0: P is zeros, nothing decompressed */
	assert_int_equal(tally_psgd_p_cuda(NULL, 0, 4, 3, b->d_q, 2, b->d_p,
		NULL), 0);
	assert_int_equal(tally_psgd_decompress_cuda(b->d_p, b->d_q, 4, 3, 2,
		1.0f, NULL, 0, NULL), 0);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_q),
		cmocka_unit_test(p_q_decompress),
		cmocka_unit_test(orthonormalize),
		cmocka_unit_test(steps),
		cmocka_unit_test(arguments),
	};
	int ndev = tally_cuda_device_count();

	if (ndev < 1) {
		printf("1..0 # SKIP no CUDA device (%s)\n", strerror(-ndev));
		return 0;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
