/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plugin's cost (issue 13, acceptance 3): the same 64 MiB f32 tensor
 * allreduced through the collnet (one request, as NCCL posts a registered
 * tensor of up to maxCollBytes; and in NCCL-sized requests of --chunk
 * elements) and through libtally's own tally_allreduce_f32(), on the same
 * job: each iteration the plugin's comm is closed, the harness joins the
 * job itself (TALLY_URL, TALLY_TOKEN_FILE), times its call, leaves, and
 * the plugin joins again; which side goes first alternates. (Two jobs
 * side by side were measured to differ by 25 % between themselves on the
 * testbed, more than the plugin could cost.) Medians printed by rank 0;
 * the one-request sums must be bit-identical to libtally's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>

#include "coord.h"
#include "data.h"
#include "harness.h"

#define BENCH_N	(16u << 20)	/* floats: 64 MiB */

/* What the bench keeps across iterations. */
struct bench {
	float *src, *buf, *out, *lib;
	double *t[3];		/* plugin 1 request, plugin chunked, lib */
	void *mh;
};

/* The token of TALLY_TOKEN_FILE (first line, blanks trimmed) into out. */
static int
read_token(char *out, size_t cap)
{
	const char *path = getenv("TALLY_TOKEN_FILE");
	FILE *f = path != NULL ? fopen(path, "re") : NULL;
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(out, 1, cap - 1, f);
	fclose(f);
	while (n > 0 && strchr(" \t\r\n", out[n - 1]) != NULL)
		n--;
	out[n] = '\0';
	return n > 0 ? 0 : -1;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n), sorting v. */
static double
median(double *v, unsigned int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The plugin's two ways on b->buf (reset from src each time); their
 * seconds into t0 and t1; the one-request result kept in b->out. */
static int
plugin_side(struct harness *h, struct bench *b, double *t0, double *t1)
{
	struct drive_res res;

	for (int w = 0; w < 2; w++) {
		memcpy(b->buf, b->src, BENCH_N * sizeof(float));
		if (coord_barrier(h->co) != 0)
			return -1;
		drive(h->p.coll, h->cc, b->buf, b->buf, BENCH_N,
			TALLY_NCCL_FLOAT32, w == 0 ? BENCH_N : h->chunk,
			b->mh, b->mh, h->limit, &res);
		if (res.nccl != 0)
			return -1;
		*(w == 0 ? t0 : t1) = res.secs;
		if (w == 0)
			memcpy(b->out, b->buf, BENCH_N * sizeof(float));
	}
	return 0;
}

/* One untimed request of the whole tensor through the plugin. */
static int
warm(struct harness *h, struct bench *b)
{
	struct drive_res res;

	drive(h->p.coll, h->cc, b->buf, b->buf, BENCH_N, TALLY_NCCL_FLOAT32,
		BENCH_N, b->mh, b->mh, h->limit, &res);
	return res.nccl == 0 ? 0 : -1;
}

/* libtally's call on the same job: the plugin leaves it, the harness
 * joins, times its second tally_allreduce_f32(), leaves, the plugin
 * joins again and makes one call (untimed). Its seconds into *t, its result into b->lib. */
static int
lib_side(struct harness *h, struct bench *b, double *t)
{
	const char *url = getenv("TALLY_URL");
	struct tally_ctx *ctx = NULL;
	char token[256];
	double t0;
	int rc;

	h->p.coll->dereg_mr(h->cc, b->mh);
	h->p.coll->close_coll(h->cc);
	h->cc = NULL;
	if (read_token(token, sizeof(token)) != 0 ||
	    tally_open(url, token, h->rank, h->world, &ctx) != 0)
		return -1;
	/* An untimed call first: a fresh context is cold (its encode
	 * buffer, its round-trip estimate), as the plugin's is after its
	 * rejoin, which warm() covers. */
	rc = tally_allreduce_f32(ctx, b->buf, BENCH_N);
	memcpy(b->buf, b->src, BENCH_N * sizeof(float));
	if (rc == 0)
		rc = coord_barrier(h->co);
	t0 = data_now();
	if (rc == 0)
		rc = tally_allreduce_f32(ctx, b->buf, BENCH_N);
	*t = data_now() - t0;
	memcpy(b->lib, b->buf, BENCH_N * sizeof(float));
	tally_ctx_close(ctx);
	if (rc != 0 || rejoin(h) != 0 ||
	    h->p.coll->reg_mr(h->cc, b->buf, BENCH_N * 4,
	    TALLY_NCCL_PTR_HOST, &b->mh) != 0)
		return -1;
	return warm(h, b);
}

/* Prints the medians and the ratio (rank 0). */
static void
report(struct harness *h, struct bench *b, int same)
{
	double one = median(b->t[0], h->bench_iters);
	double chunked = median(b->t[1], h->bench_iters);
	double lib = median(b->t[2], h->bench_iters);

	check(h, same, "bench: the plugin's sums are bit-identical to "
		"libtally's on the same tensor");
	if (h->rank != 0)
		return;
	printf("bench: 64 MiB f32, %u ranks, one job, median of %u: plugin "
		"(1 request) %.1f ms = %.1f MB/s, plugin (%zu-element "
		"requests) %.1f ms, libtally tally_allreduce_f32() %.1f ms = "
		"%.1f MB/s; plugin / libtally %.3f\n", h->world,
		h->bench_iters, one * 1e3, BENCH_N * 4 / one / 1e6,
		h->chunk, chunked * 1e3, lib * 1e3, BENCH_N * 4 / lib / 1e6,
		one / lib);
	fflush(stdout);
}

/* Untimed warm-up of the plugin, then iterations, the side that goes
 * first alternating; 0 or -1. */
static int
iterate(struct harness *h, struct bench *b, int *same)
{
	double warm[2];

	if (plugin_side(h, b, &warm[0], &warm[1]) != 0)
		return -1;
	for (unsigned int i = 0; i < h->bench_iters; i++) {
		int rc = i % 2 == 0 ?
			plugin_side(h, b, &b->t[0][i], &b->t[1][i]) ||
			lib_side(h, b, &b->t[2][i]) :
			lib_side(h, b, &b->t[2][i]) ||
			plugin_side(h, b, &b->t[0][i], &b->t[1][i]);

		if (rc != 0)
			return -1;
		*same &= memcmp(b->out, b->lib, BENCH_N * sizeof(float)) == 0;
	}
	return 0;
}

int
phase_bench(struct harness *h)
{
	struct bench b = { 0 };
	int same = 1, rc;

	if (!h->bench || h->bench_iters == 0)
		return 0;
	b.src = malloc(BENCH_N * sizeof(float));
	b.buf = malloc(BENCH_N * sizeof(float));
	b.out = malloc(BENCH_N * sizeof(float));
	b.lib = malloc(BENCH_N * sizeof(float));
	for (int w = 0; w < 3; w++)
		b.t[w] = calloc(h->bench_iters, sizeof(double));
	data_fill(b.src, BENCH_N, DATA_F32_UNIFORM, h->seed, h->rank);
	h->p.coll->reg_mr(h->cc, b.buf, BENCH_N * 4, TALLY_NCCL_PTR_HOST,
		&b.mh);
	rc = iterate(h, &b, &same);
	if (rc == 0)
		report(h, &b, same);
	else
		check(h, 0, "bench: a timed allreduce or a rejoin failed: %s",
			tally_ctx_error(NULL));
	if (h->cc != NULL)
		h->p.coll->dereg_mr(h->cc, b.mh);
	for (int w = 0; w < 3; w++)
		free(b.t[w]);
	free(b.src);
	free(b.buf);
	free(b.out);
	free(b.lib);
	return rc;
}
