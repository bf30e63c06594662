/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * data.h: inputs from a hash of (seed, rank, index), the expected sums
 * (for f32 in [-1, 1): libtally's fixed point, <tally/fixp.h>, applied
 * request by request as the plugin does; for bf16 and f16 in quarters the
 * exact sums, which the types hold), and the request loop (element sizes
 * by NCCL type: 4 bytes, 2 for bf16 and f16).
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

size_t
data_esize(int kind)
{
	return kind == DATA_BF16_QUARTERS || kind == DATA_F16_QUARTERS ? 2 : 4;
}

int
data_type(int kind)
{
	switch (kind) {
	case DATA_I32:
		return TALLY_NCCL_INT32;
	case DATA_BF16_QUARTERS:
		return TALLY_NCCL_BFLOAT16;
	case DATA_F16_QUARTERS:
		return TALLY_NCCL_FLOAT16;
	default:
		return TALLY_NCCL_FLOAT32;
	}
}

/* The bits of f in kind's 16-bit type: f must be exact there, and zero
 * or normal (quarters and their small sums are). */
static uint16_t
bits16(int kind, float f)
{
	uint32_t u;
	uint16_t sign;
	int e;

	memcpy(&u, &f, sizeof(u));
	if (kind == DATA_BF16_QUARTERS)
		return (uint16_t)(u >> 16);
	sign = (uint16_t)((u >> 16) & 0x8000);
	e = (int)((u >> 23) & 0xff);
	if (e == 0)
		return sign;
	return (uint16_t)(sign | ((e - 127 + 15) << 10) | ((u >> 13) & 0x3ff));
}

/* One input value of kind as a float (the f32 and 16-bit kinds). */
static float
fvalue(int kind, uint64_t h)
{
	if (kind == DATA_F32_EIGHTHS)
		return (float)((int)(h % 4001) - 2000) * 0.125f;
	if (kind == DATA_F32_UNIFORM)
		return (float)(h >> 40) / 8388608.0f - 1.0f;
	return (float)((int)(h % 65) - 32) * 0.25f;	/* quarters, +-8 */
}

/* One input value of kind as 32 bits (the 4-byte kinds). */
static uint32_t
value(int kind, uint64_t h)
{
	float f;
	uint32_t u;

	if (kind == DATA_I32)
		return (uint32_t)h;
	f = fvalue(kind, h);
	memcpy(&u, &f, sizeof(u));
	return u;
}

void
data_fill(void *x, size_t n, int kind, uint64_t seed, unsigned int rank)
{
	uint32_t *u = x;
	uint16_t *h = x;

	if (data_esize(kind) == 2) {
		for (size_t i = 0; i < n; i++)
			h[i] = bits16(kind, fvalue(kind, mix(seed, rank, i)));
		return;
	}
	for (size_t i = 0; i < n; i++)
		u[i] = value(kind, mix(seed, rank, i));
}

/* The exact sums of a 16-bit kind, in the type (float sums of quarters
 * are exact, and so is their conversion). */
static void
expect16(uint16_t *out, size_t n, int kind, uint64_t seed,
	unsigned int world)
{
	for (size_t i = 0; i < n; i++) {
		float s = 0;

		for (unsigned int r = 0; r < world; r++)
			s += fvalue(kind, mix(seed, r, i));
		out[i] = bits16(kind, s);
	}
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
	if (data_esize(kind) == 2) {
		expect16(out, n, kind, seed, world);
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
	const uint16_t *g16 = got, *w16 = want;
	const float *gf = got, *wf = want;

	if (data_esize(kind) == 2) {
		for (size_t i = 0; i < n; i++)
			if (g16[i] != w16[i])
				return i;
		return n;
	}
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
	size_t es = type == TALLY_NCCL_BFLOAT16 ||
		type == TALLY_NCCL_FLOAT16 ? 2 : 4;

	for (; next < res->requests; next++) {
		size_t a = (size_t)next * chunk;
		size_t k = n - a < chunk ? n - a : chunk;
		int rc = cn->iallreduce(cc, send + a * es, recv + a * es, k,
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
