/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * data.h: inputs from a hash of (seed, rank, index), the expected sums
 * (for f32 in [-1, 1): libtally's fixed point, <tally/fixp.h>, applied
 * request by request as the plugin does), and the request loop.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tally/fixp.h>

#include "data.h"

double
data_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64 of (seed, rank, i). */
static uint64_t
mix(uint64_t seed, unsigned int rank, size_t i)
{
	uint64_t z = seed + ((uint64_t)rank << 40) + i * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* One input value of kind as 32 bits. */
static uint32_t
value(int kind, uint64_t h)
{
	float f;
	uint32_t u;

	if (kind == DATA_I32)
		return (uint32_t)h;
	if (kind == DATA_F32_EIGHTHS)
		f = (float)((int)(h % 4001) - 2000) * 0.125f;
	else
		f = (float)(h >> 40) / 8388608.0f - 1.0f;
	memcpy(&u, &f, sizeof(u));
	return u;
}

void
data_fill(void *x, size_t n, int kind, uint64_t seed, unsigned int rank)
{
	uint32_t *u = x;

	for (size_t i = 0; i < n; i++)
		u[i] = value(kind, mix(seed, rank, i));
}

/* Rank r's inputs x[a..a + n) of kind DATA_F32_UNIFORM. */
static void
uniform(float *x, size_t a, size_t n, uint64_t seed, unsigned int r)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = value(DATA_F32_UNIFORM, mix(seed, r, a + i));

		memcpy(&x[i], &u, sizeof(u));
	}
}

/* The fixed-point sums of x[a..b) over world ranks into out: the scale
 * from the max over every rank, each encoded, summed in i32, decoded. */
static void
expect_fixp(float *out, size_t a, size_t b, uint64_t seed,
	unsigned int world)
{
	size_t n = b - a;
	float *x = malloc(n * sizeof(*x)), amax = 0;
	int32_t *q = malloc(n * sizeof(*q)), *sum = calloc(n, sizeof(*sum));
	int e = 0;

	for (unsigned int r = 0; r < world; r++) {
		uniform(x, a, n, seed, r);
		if (tally_fixp_absmax(x, n) > amax)
			amax = tally_fixp_absmax(x, n);
	}
	tally_fixp_exponent(amax, world, &e);
	for (unsigned int r = 0; r < world; r++) {
		uniform(x, a, n, seed, r);
		tally_fixp_encode(x, q, n, e);
		for (size_t i = 0; i < n; i++)
			sum[i] = (int32_t)((uint32_t)sum[i] + (uint32_t)q[i]);
	}
	tally_fixp_decode(sum, out + a, n, e);
	free(x);
	free(q);
	free(sum);
}

void
data_expect(void *out, size_t n, int kind, uint64_t seed,
	unsigned int world, size_t chunk)
{
	uint32_t *u = out;
	float *f = out;

	if (kind == DATA_F32_UNIFORM) {
		for (size_t a = 0; a < n; a += chunk)
			expect_fixp(f, a, a + chunk < n ? a + chunk : n, seed,
				world);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t su = 0;
		float sf = 0;

		for (unsigned int r = 0; r < world; r++) {
			uint32_t v = value(kind, mix(seed, r, i));
			float fv;

			memcpy(&fv, &v, sizeof(fv));
			su += v;
			sf += fv;
		}
		if (kind == DATA_I32)
			u[i] = su;
		else
			f[i] = sf;
	}
}

size_t
data_diff(const void *got, const void *want, size_t n, int kind)
{
	const uint32_t *g = got, *w = want;
	const float *gf = got, *wf = want;

	for (size_t i = 0; i < n; i++)
		if (kind == DATA_F32_EIGHTHS ? gf[i] != wf[i] : g[i] != w[i])
			return i;
	return n;
}

/* Posts requests[next..] until one comes back NULL; returns next. */
static unsigned int
post_some(const struct tally_nccl_collnet *cn, void *cc, char *send,
	char *recv, size_t n, int type, size_t chunk, void *smh, void *rmh,
	void **reqs, unsigned int next, struct drive_res *res)
{
	for (; next < res->requests; next++) {
		size_t a = (size_t)next * chunk;
		size_t k = n - a < chunk ? n - a : chunk;
		int rc = cn->iallreduce(cc, send + a * 4, recv + a * 4, k,
			type, TALLY_NCCL_SUM, smh, rmh, &reqs[next]);

		if (rc != 0) {
			res->nccl = rc;
			break;
		}
		if (reqs[next] == NULL) {
			res->nulls++;
			break;
		}
	}
	return next;
}

void
drive(const struct tally_nccl_collnet *cn, void *cc, void *send,
	void *recv, size_t n, int type, size_t chunk, void *smh, void *rmh,
	double limit, struct drive_res *res)
{
	struct timespec idle = { 0, 50 * 1000 };
	unsigned int posted = 0, done_upto = 0, before;
	double t0 = data_now();
	void **reqs;

	memset(res, 0, sizeof(*res));
	res->requests = n == 0 ? 1 : (unsigned int)((n + chunk - 1) / chunk);
	reqs = calloc(res->requests, sizeof(*reqs));
	while (done_upto < res->requests && res->nccl == 0) {
		if (data_now() - t0 > limit) {
			res->nccl = -1;
			break;
		}
		before = done_upto;
		posted = post_some(cn, cc, send, recv, n, type, chunk, smh,
			rmh, reqs, posted, res);
		for (unsigned int i = done_upto; i < posted; i++) {
			int done = 0, size = 0;
			int rc = cn->test(reqs[i], &done, &size);

			if (rc != 0) {
				res->nccl = rc;
				break;
			}
			if (!done)
				break;
			done_upto = i + 1;
		}
		/* A pause when nothing completed, growing from 50 us to
		 * 1 ms, so that the plugin's thread keeps the core. */
		if (done_upto != before)
			idle.tv_nsec = 50 * 1000;
		else if (res->nccl == 0) {
			nanosleep(&idle, NULL);
			if (idle.tv_nsec < 1000 * 1000)
				idle.tv_nsec *= 2;
		}
	}
	res->secs = data_now() - t0;
	res->err_after = res->secs;
	free(reqs);
}
