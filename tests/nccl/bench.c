/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plugin's cost (issue 13, acceptance 3): the same 64 MiB f32 tensor
 * allreduced through the collnet (one request, as NCCL posts a registered
 * tensor of up to maxCollBytes; and in NCCL-sized chunks of --chunk
 * elements) and through libtally's own tally_allreduce_f32() on a second
 * job, alternately, iteration by iteration, the order rotating; medians
 * printed by rank 0.
 * The one-request sums must be bit-identical to libtally's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/tally.h>

#include "coord.h"
#include "data.h"
#include "harness.h"

#define BENCH_N	(16u << 20)	/* floats: 64 MiB */

/* The token in path (first line, blanks trimmed) into out. */
static int
read_token(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "re");
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

/* One timed call of way (0 plugin, 1 request; 1 plugin, chunked; 2
 * libtally) on buf, reset from src first; seconds, or -1 on error. */
static double
timed(struct harness *h, struct tally_ctx *ref, int way, float *buf,
	const float *src, void *mh)
{
	struct drive_res res;
	double t0;

	memcpy(buf, src, BENCH_N * sizeof(*buf));
	if (coord_barrier(h->co) != 0)
		return -1;
	if (way == 2) {
		t0 = data_now();
		if (tally_allreduce_f32(ref, buf, BENCH_N) != 0)
			return -1;
		return data_now() - t0;
	}
	drive(h->p.coll, h->cc, buf, buf, BENCH_N, TALLY_NCCL_FLOAT32,
		way == 0 ? BENCH_N : h->chunk, mh, mh, h->limit, &res);
	return res.nccl == 0 ? res.secs : -1;
}

/* Prints the medians and the ratio (rank 0). */
static void
report(struct harness *h, double *t[3], int same)
{
	double one = median(t[0], h->bench_iters);
	double chunked = median(t[1], h->bench_iters);
	double lib = median(t[2], h->bench_iters);

	check(h, same, "bench: the plugin's sums are bit-identical to "
		"libtally's on the same tensor");
	if (h->rank != 0)
		return;
	printf("bench: 64 MiB f32, %u ranks, median of %u: plugin (1 "
		"request) %.1f ms = %.1f MB/s, plugin (%zu-element "
		"requests) %.1f ms, libtally tally_allreduce_f32() %.1f ms = "
		"%.1f MB/s; plugin / libtally %.3f\n", h->world,
		h->bench_iters, one * 1e3, BENCH_N * 4 / one / 1e6,
		h->chunk, chunked * 1e3, lib * 1e3, BENCH_N * 4 / lib / 1e6,
		one / lib);
	fflush(stdout);
}

int
phase_bench(struct harness *h)
{
	struct tally_ctx *ref = NULL;
	float *src, *buf, *out, *lib;
	double *t[3];
	char token[256];
	void *mh = NULL;
	int same = 1, rc = 0;

	if (h->bench_url == NULL || h->bench_iters == 0)
		return 0;
	if (read_token(h->bench_token_file, token, sizeof(token)) != 0 ||
	    tally_open(h->bench_url, token, h->rank, h->world, &ref) != 0) {
		check(h, 0, "bench: join %s: %s", h->bench_url,
			tally_ctx_error(NULL));
		return -1;
	}
	src = malloc(BENCH_N * sizeof(*src));
	buf = malloc(BENCH_N * sizeof(*buf));
	out = malloc(BENCH_N * sizeof(*out));
	lib = malloc(BENCH_N * sizeof(*lib));
	for (int w = 0; w < 3; w++)
		t[w] = calloc(h->bench_iters, sizeof(double));
	data_fill(src, BENCH_N, DATA_F32_UNIFORM, h->seed, h->rank);
	h->p.coll->reg_mr(h->cc, buf, BENCH_N * 4, TALLY_NCCL_PTR_HOST, &mh);
	/* The three ways in a rotating order, so that drift in the
	 * machine's load falls on each alike. */
	for (unsigned int i = 0; i < h->bench_iters && rc == 0; i++) {
		for (int k = 0; k < 3 && rc == 0; k++) {
			int w = (int)(i + (unsigned int)k) % 3;

			t[w][i] = timed(h, ref, w, buf, src, mh);
			rc = t[w][i] < 0 ? -1 : 0;
			if (w == 0)
				memcpy(out, buf, BENCH_N * sizeof(*buf));
			if (w == 2)
				memcpy(lib, buf, BENCH_N * sizeof(*buf));
		}
		same &= memcmp(out, lib, BENCH_N * sizeof(*buf)) == 0;
	}
	if (rc == 0)
		report(h, t, same);
	else
		check(h, 0, "bench: a timed allreduce failed");
	h->p.coll->dereg_mr(h->cc, mh);
	tally_ctx_close(ref);
	for (int w = 0; w < 3; w++)
		free(t[w]);
	free(src);
	free(buf);
	free(out);
	free(lib);
	return rc;
}
