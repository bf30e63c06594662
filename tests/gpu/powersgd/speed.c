/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_powersgd_speed [MELEMS] [RANK]: a small timing loop of PowerSGD's
 * CPU functions, one core. Over a tensor of MELEMS million elements (25 by
 * default) in its near-square view, rank RANK (4 by default), prints per
 * function the best of a few runs, as GB/s of the tensor's f32 bytes (M
 * read by p and q, written by decompress) and as milliseconds; init_q and
 * orthonormalize only touch Q or P, and print milliseconds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tally/powersgd.h>

#define RUNS	5

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum op { INIT_Q, P, ORTH, Q, DECOMPRESS, OP_MAX };

static const char *const names[OP_MAX] = {
	"init_q", "p", "orthonormalize", "q", "decompress",
};

/* Buffers of one measurement. */
struct bufs {
	size_t n;
	uint32_t rows, cols;
	unsigned int rank;
	float *m, *p, *p0, *q;
};

/* One run of op. orthonormalize starts from the same P every run. */
static void
run(struct bufs *b, enum op op, int it)
{
	switch (op) {
	case INIT_Q:
		tally_psgd_init_q(b->q, b->cols, b->rank, (uint64_t)it);
		break;
	case P:
		tally_psgd_p(b->m, b->n, b->rows, b->cols, b->q, b->rank, b->p0);
		break;
	case ORTH:
		for (size_t i = 0; i < (size_t)b->rows * b->rank; i++)
			b->p[i] = b->p0[i];
		tally_psgd_orthonormalize(b->p, b->rows, b->rank);
		break;
	case Q:
		tally_psgd_q(b->m, b->n, b->rows, b->cols, b->p, b->rank, b->q);
		break;
	case DECOMPRESS:
		tally_psgd_decompress(b->p, b->q, b->rows, b->cols, b->rank,
			0.25f, b->m, b->n);
		break;
	default:
		break;
	}
}

int
main(int argc, char **argv)
{
	struct bufs b = { 0 };
	uint64_t s = 1;

	b.n = (size_t)((argc > 1 ? atof(argv[1]) : 25) * 1e6);
	b.rank = argc > 2 ? (unsigned int)atoi(argv[2]) : 4;
	if (tally_psgd_shape(b.n, 0, &b.rows, &b.cols) != 0 ||
	    tally_psgd_check(b.n, b.rows, b.cols, b.rank) != 0) {
		fprintf(stderr, "usage: %s [MELEMS] [RANK 1..%d]\n", argv[0],
			TALLY_PSGD_RANK_MAX);
		return 2;
	}
	b.m = malloc(b.n * sizeof(float));
	b.p = malloc((size_t)b.rows * b.rank * sizeof(float));
	b.p0 = malloc((size_t)b.rows * b.rank * sizeof(float));
	b.q = malloc((size_t)b.cols * b.rank * sizeof(float));
	if (b.m == NULL || b.p == NULL || b.p0 == NULL || b.q == NULL) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < b.n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		b.m[i] = (float)((int64_t)(s >> 40) - (1 << 23)) / 0x1p23f;
	}
	printf("%-16s %8s %10s  (%zu elements, %u x %u, rank %u, best of %d)\n",
		"function", "GB/s", "ms", b.n, b.rows, b.cols, b.rank, RUNS);
	for (int op = 0; op < OP_MAX; op++) {
		double best = 1e30;

		for (int it = 0; it < RUNS; it++) {
			double t0 = now();

			run(&b, (enum op)op, it);
			t0 = now() - t0;
			best = t0 < best ? t0 : best;
		}
		if (op == P || op == Q || op == DECOMPRESS)
			printf("%-16s %8.2f %10.2f\n", names[op],
				(double)b.n * sizeof(float) / best / 1e9,
				best * 1e3);
		else
			printf("%-16s %8s %10.2f\n", names[op], "-", best * 1e3);
	}
	free(b.m);
	free(b.p);
	free(b.p0);
	free(b.q);
	return 0;
}
