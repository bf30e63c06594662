/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally_feedback_speed [MELEMS]: a small timing loop of the feedback
 * family's CPU functions, one core. Prints, per function, the best of a
 * few runs over MELEMS million elements (16 by default, far past the
 * caches) as GB/s of f32 input (of f32 output for the decoders; of the n
 * elements of the tensor for random-k at density 0.01).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/feedback.h>

#define RUNS	5

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Buffers of one measurement. */
struct bufs {
	size_t n, k;
	float *g, *r, *v, *s, *y;
	uint8_t *b;
	int8_t *q8;
	int32_t *q32;
};

enum op {
	EF_APPLY, EF_UPDATE, DGC_ACC, DGC_SELECT, DGC_TAKE, TWOBIT_I4,
	TWOBIT_I8, TERN_I4, TERN_I8, DEC_I32, DEC_I8, DEC_I4, SIGN_ENC,
	SIGN_VOTES, SIGN_BITS, RANDK_GATHER, RANDK_TAKE, RANDK_SCATTER,
	OP_MAX,
};

static const char *const names[OP_MAX] = {
	"ef_apply", "ef_update", "dgc_accumulate", "dgc_select", "dgc_take",
	"2bit_encode_i4", "2bit_encode_i8", "tern_encode_i4",
	"tern_encode_i8", "tern_decode_i32", "tern_decode_i8",
	"tern_decode_i4", "sign_encode", "sign_decode_votes",
	"sign_decode_bits", "randk_gather (d=0.01)", "randk_take (d=0.01)",
	"randk_scatter (d=0.01)",
};

/* One run of op over the buffers. */
static void
run(struct bufs *b, enum op op, int it)
{
	size_t n = b->n;

	switch (op) {
	case EF_APPLY:
		tally_ef_apply(b->v, b->g, b->r, n);
		break;
	case EF_UPDATE:
		(void)tally_ef_update(b->r, b->v, b->s, n);
		break;
	case DGC_ACC:
		tally_dgc_accumulate(b->r, b->v, b->g, n, 0.9f);
		break;
	case DGC_SELECT:
		(void)tally_dgc_select(b->v, b->b, n, 0.5f);
		break;
	case DGC_TAKE:
		tally_dgc_take(b->v, b->r, b->s, b->b, n);
		break;
	case TWOBIT_I4:
		tally_2bit_encode_i4(b->r, b->g, b->b, n, -1);
		break;
	case TWOBIT_I8:
		tally_2bit_encode_i8(b->r, b->g, b->q8, n, -1);
		break;
	case TERN_I4:
		(void)tally_tern_encode_i4(b->g, b->b, n, 1.0f, (uint64_t)it, 0);
		break;
	case TERN_I8:
		(void)tally_tern_encode_i8(b->g, b->q8, n, 1.0f, (uint64_t)it, 0);
		break;
	case DEC_I32:
		tally_tern_decode_i32(b->q32, b->v, n, 0.5f);
		break;
	case DEC_I8:
		tally_tern_decode_i8(b->q8, b->v, n, 0.5f);
		break;
	case DEC_I4:
		tally_tern_decode_i4(b->b, b->v, n, 0.5f);
		break;
	case SIGN_ENC:
		tally_sign_encode(b->g, b->b, n);
		break;
	case SIGN_VOTES:
		tally_sign_decode_votes(b->q8, b->v, n, 8, 0.5f);
		break;
	case SIGN_BITS:
		tally_sign_decode_bits(b->b, b->v, n, 0.5f);
		break;
	case RANDK_GATHER:
		(void)tally_randk_gather(b->g, b->y, 0, b->k, n, (uint64_t)it);
		break;
	case RANDK_TAKE:
		(void)tally_randk_take(b->v, b->y, 0, b->k, n, (uint64_t)it);
		break;
	case RANDK_SCATTER:
		(void)tally_randk_scatter(b->y, b->v, 0, b->k, n, (uint64_t)it,
			1.0f);
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

	b.n = (size_t)(argc > 1 ? atof(argv[1]) : 16) * 1000000;
	if (b.n == 0) {
		fprintf(stderr, "usage: %s [MELEMS]\n", argv[0]);
		return 2;
	}
	b.k = (size_t)tally_randk_k(b.n, 0.01);
	b.g = malloc(b.n * sizeof(float));
	b.r = malloc(b.n * sizeof(float));
	b.v = malloc(b.n * sizeof(float));
	b.s = malloc(b.n * sizeof(float));
	b.y = malloc(b.k * sizeof(float));
	b.b = malloc(b.n);
	b.q8 = malloc(b.n);
	b.q32 = malloc(b.n * sizeof(int32_t));
	if (b.g == NULL || b.r == NULL || b.v == NULL || b.s == NULL ||
	    b.y == NULL || b.b == NULL || b.q8 == NULL || b.q32 == NULL) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < b.n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		b.g[i] = (float)((int64_t)(s >> 40) - (1 << 23)) / 0x1p23f;
		b.r[i] = b.g[i] / 4;
		b.v[i] = b.g[i] * 2;
		b.s[i] = b.g[i];
		b.q8[i] = (int8_t)(s >> 60);
		b.q32[i] = (int32_t)(s >> 58) - 32;
		b.b[i] = (uint8_t)(s >> 32);
	}
	printf("%-24s %8s  (%zu elements, best of %d)\n", "function", "GB/s",
		b.n, RUNS);
	for (int op = 0; op < OP_MAX; op++) {
		double best = 1e30;

		for (int it = 0; it < RUNS; it++) {
			double t0 = now();

			run(&b, (enum op)op, it);
			t0 = now() - t0;
			best = t0 < best ? t0 : best;
		}
		printf("%-24s %8.2f\n", names[op],
			(double)b.n * sizeof(float) / best / 1e9);
	}
	free(b.g);
	free(b.r);
	free(b.v);
	free(b.s);
	free(b.y);
	free(b.b);
	free(b.q8);
	free(b.q32);
	return 0;
}
